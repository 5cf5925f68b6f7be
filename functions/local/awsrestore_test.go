package main_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/runtime"
)

// TestAWSRestoreCommand runs `local aws-restore` (the real binary) against
// moto with two tables standing for the live one and its point-in-time
// copy: a dry run writes nothing, the run copies the bot's items (and only
// them) and answers its report in JSON, a second run restores nothing, and
// wrong arguments are usage errors (exit 2).
func TestAWSRestoreCommand(t *testing.T) {
	endpoint := mototest.StartSerial(t)
	bin := buildBinary(t)
	env := []string{"DYNAMODB_ENDPOINT=" + endpoint, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "PLATFORM_TABLE=live"}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := context.Background()
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	db := runtime.DynamoClient(cfg, runtime.FromEnv(), nil)
	for _, name := range []string{"live", "copy"} {
		if err := dynamo.EnsureTable(ctx, db, name); err != nil {
			t.Fatal(err)
		}
	}
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	put := func(table string, it map[string]types.AttributeValue) {
		t.Helper()
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it}); err != nil {
			t.Fatal(err)
		}
	}
	ws := map[string]types.AttributeValue{"pk": s("WS#wkspace_1"), "sk": s("WS"), "botCount": &types.AttributeValueMemberN{Value: "1"}}
	put("live", ws)
	put("copy", map[string]types.AttributeValue{"pk": s("WS#wkspace_1"), "sk": s("WS"), "botCount": &types.AttributeValueMemberN{Value: "2"}})
	put("copy", map[string]types.AttributeValue{"pk": s("BOT#bot_gone"), "sk": s("BOT"), "workspaceId": s("wkspace_1"), "doc": s(`{"id":"bot_gone"}`)})
	put("copy", map[string]types.AttributeValue{"pk": s("BOTTABLES#bot_gone"), "sk": s("TABLE#t"), "tableId": s("table_01ABCDEFGH")})
	put("copy", map[string]types.AttributeValue{"pk": s("TABLE#table_01ABCDEFGH"), "sk": s("TABLE"), "botId": s("bot_gone"), "name": s("t")})
	put("copy", map[string]types.AttributeValue{"pk": s("TROWS#table_01ABCDEFGH#1"), "sk": s("0000000001"), "doc": s(`{"id":1}`)})
	put("copy", map[string]types.AttributeValue{"pk": s("BOT#bot_other"), "sk": s("BOT"), "workspaceId": s("wkspace_1")})
	count := func() int {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("live")})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Items)
	}

	code, out, errs := runCLI(t, bin, nil, "aws-restore", "--from", "copy", "--bot", "bot_gone", "--dry-run")
	if code != 0 || count() != 1 || !strings.Contains(out, `"itemsRestored": 4`) {
		t.Fatalf("dry run: exit %d, %d live items: %s %s", code, count(), out, errs)
	}
	code, out, errs = runCLI(t, bin, nil, "aws-restore", "--from", "copy", "--bot", "bot_gone")
	var r struct {
		ItemsRestored int
		ItemConflicts []string
	}
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || r.ItemsRestored != 4 || len(r.ItemConflicts) != 0 {
		t.Fatalf("restore: exit %d (%v): %s %s", code, err, out, errs)
	}
	if count() != 5 { // the workspace, the bot, its table (two items) and its row (no item naming the bot: found by the table's id); not the other bot
		t.Fatalf("%d live items after the restore, want 5", count())
	}
	got, _ := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("live"), Key: map[string]types.AttributeValue{"pk": s("WS#wkspace_1"), "sk": s("WS")}})
	if n := got.Item["botCount"].(*types.AttributeValueMemberN).Value; n != "2" {
		t.Fatalf("botCount %s after the bot was put back, want 2", n)
	}
	code, out, _ = runCLI(t, bin, nil, "aws-restore", "--from", "copy", "--bot", "bot_gone")
	if code != 0 || !strings.Contains(out, `"itemsRestored": 0`) || !strings.Contains(out, `"itemsUnchanged": 4`) {
		t.Fatalf("second run: exit %d: %s", code, out)
	}
	for _, args := range [][]string{
		{"aws-restore", "--bot", "bot_gone"},
		{"aws-restore", "--from", "copy"},
		{"aws-restore", "--from", "copy", "--bot", "b", "--workspace", "w"},
		{"aws-restore", "--from", "copy", "--bot", "b", "--bucket", "x", "--at", "yesterday"},
		{"aws-restore", "--from", "copy", "--bot", "b", "stray"},
	} {
		if code, _, errs := runCLI(t, bin, nil, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %s", args, code, errs)
		}
	}
}
