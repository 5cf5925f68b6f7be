package main

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
)

// TestUsage: a mode is needed, and one only; -outbox-scan needs its table
// and function; an unexpected argument is a usage error (2); -h prints
// both modes.
func TestUsage(t *testing.T) {
	t.Setenv("PLATFORM_TABLE", "")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, 2, "-queue-url is required"},
		{[]string{"-queue-url", "q", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"-outbox-scan"}, 2, "-outbox-scan needs -table"},
		{[]string{"-outbox-scan", "-table", "t"}, 2, "-outbox-scan needs"},
		{[]string{"-outbox-scan", "-table", "t", "-stack", "s", "-segments", "0"}, 2, "-segments of at least 1"},
		{[]string{"-outbox-scan", "-queue-url", "q", "-table", "t", "-stack", "s"}, 2, "two modes"},
		{[]string{"-h"}, 0, "replay -outbox-scan -table TABLE"},
	} {
		var out, errOut bytes.Buffer
		if code := run(c.args, &out, &errOut); code != c.code || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("replay %v: exit %d, stderr %q; want %d and %q", c.args, code, errOut.String(), c.code, c.want)
		}
	}
}

// TestOutboxScanCommandOnMoto: the command against moto_server (the
// operator's endpoint, AWS_ENDPOINT_URL): a dry run prints the old
// unindexed entry's shard and the total and exits 0; a run whose
// invocation fails (moto has no such function) says so and exits 1.
func TestOutboxScanCommandOnMoto(t *testing.T) {
	endpoint := mototest.Start(t)
	t.Setenv("AWS_ENDPOINT_URL", endpoint)
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "local")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
	t.Setenv("AWS_PROFILE", "")
	ctx := context.Background()
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""), HTTPClient: &http.Client{Timeout: 30 * time.Second}})
	const table = "replaycmd"
	if err := dynamo.EnsureTable(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	shard := "OUTBOX#" + platform.NewID(platform.PrefixBot) + "#" + platform.NewID(platform.PrefixConversation)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: shard}, "sk": &types.AttributeValueMemberS{Value: platform.NewID(dynamo.PrefixDelivery)},
		"dueAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().Add(-25*time.Hour).UnixMilli(), 10)},
	}}); err != nil {
		t.Fatal(err)
	}

	var out, errOut bytes.Buffer
	if code := run([]string{"-outbox-scan", "-table", table, "-dry-run", "-segments", "2"}, &out, &errOut); code != 0 {
		t.Fatalf("dry run: exit %d: %s", code, errOut.String())
	}
	if s := out.String(); !strings.Contains(s, shard+" 1 entries") || !strings.Contains(s, "1 shards, 1 entries, 1 batches (dry run: nothing invoked)") {
		t.Errorf("dry run printed:\n%s", s)
	}

	out.Reset()
	errOut.Reset()
	if code := run([]string{"-outbox-scan", "-table", table, "-stack", "nostack"}, &out, &errOut); code != 1 {
		t.Errorf("an invocation of a function that is not there: exit %d, want 1\n%s%s", code, out.String(), errOut.String())
	}
	t.Logf("failed run:\n%s", out.String())
	if s := out.String(); !strings.Contains(s, shard+" 1 entries") || !strings.Contains(s, "nostack-dispatcher") {
		t.Errorf("failed run printed:\n%s", s)
	}
}
