package functions_test

// The dispatcher's stream trigger against a third-party DynamoDB emulator
// with streams (moto_server): the platform's own writes, read back from the
// table's stream, pass template.yaml's filter exactly when they insert an
// outbox entry.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/botforge/platform/shared/mototest"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/runtime"
)

// streamRecords reads every record of the table's stream (DynamoDB Streams
// API, JSON 1.0; moto does not check signatures).
func streamRecords(t *testing.T, endpoint, streamARN string) []map[string]any {
	t.Helper()
	call := func(op string, in, out any) {
		t.Helper()
		body, _ := json.Marshal(in)
		req, _ := http.NewRequest("POST", endpoint, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDBStreams_20120810."+op)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+accessKey+"/20261121/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || json.Unmarshal(b, out) != nil {
			t.Fatalf("%s: %d %s", op, res.StatusCode, b)
		}
	}
	var desc struct {
		StreamDescription struct{ Shards []struct{ ShardId string } }
	}
	call("DescribeStream", map[string]any{"StreamArn": streamARN}, &desc)
	var records []map[string]any
	for _, sh := range desc.StreamDescription.Shards {
		var it struct{ ShardIterator string }
		call("GetShardIterator", map[string]any{"StreamArn": streamARN, "ShardId": sh.ShardId, "ShardIteratorType": "TRIM_HORIZON"}, &it)
		for iter := it.ShardIterator; iter != ""; {
			var page struct {
				Records           []map[string]any
				NextShardIterator string
			}
			call("GetRecords", map[string]any{"ShardIterator": iter}, &page)
			records = append(records, page.Records...)
			if len(page.Records) == 0 {
				break
			}
			iter = page.NextShardIterator
		}
	}
	return records
}

// templateStreamFilter is the filter pattern of template.yaml (its one
// FilterCriteria pattern: the dispatcher's; infra's agreement test holds
// the CDK app to it).
func templateStreamFilter(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*- Pattern: '(\{.*\})'\s*$`).FindAllStringSubmatch(string(raw), -1)
	if len(m) != 1 {
		t.Fatalf("template.yaml has %d filter patterns, want the dispatcher's one", len(m))
	}
	var p map[string]any
	if err := json.Unmarshal([]byte(m[0][1]), &p); err != nil {
		t.Fatalf("filter pattern %s: %v", m[0][1], err)
	}
	return p
}

// passes applies a filter pattern of nested objects and arrays of values.
func passes(t *testing.T, pattern, record any) bool {
	t.Helper()
	switch p := pattern.(type) {
	case map[string]any:
		r, ok := record.(map[string]any)
		if !ok {
			return false
		}
		for k, sub := range p {
			if v, ok := r[k]; !ok || !passes(t, sub, v) {
				return false
			}
		}
		return true
	case []any:
		for _, want := range p {
			if op, ok := want.(map[string]any); ok {
				prefix, isPrefix := op["prefix"].(string)
				if len(op) != 1 || !isPrefix {
					t.Fatalf("filter operator %v is not understood by this test", want)
				}
				if s, ok := record.(string); ok && strings.HasPrefix(s, prefix) {
					return true
				}
				continue
			}
			if record == want {
				return true
			}
		}
		return false
	}
	t.Fatalf("filter pattern %v is not understood by this test", pattern)
	return false
}

// TestDispatcherStreamTrigger: on a table with a KEYS_ONLY stream (moto),
// a bot's event written through the Chat function, then delivered by the
// dispatcher function, leaves stream records of which exactly one passes
// the stack's filter: the outbox entry's insert. The dispatcher's own
// writes (lease, removal, the event's status) and the API's other writes
// do not, so the function is not invoked for them.
func TestDispatcherStreamTrigger(t *testing.T) {
	moto, _ := url.Parse(mototest.Start(t))
	s := newStandInsOn(t, httputil.NewSingleHostReverseProxy(moto))
	ctx := context.Background()
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := runtime.FromEnv()
	db := runtime.DynamoClient(cfg, env, nil)
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(env.Table),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}}); err != nil {
		t.Fatal(err)
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(env.Table)})
	if err != nil || desc.Table.LatestStreamArn == nil {
		t.Fatalf("stream of the table: %v", err)
	}

	botID, received := s.recurringBot(t)
	id := s.queueEvent(t, botID, "ping")
	if err := dispatcherHandler(t)(ctx, streamSample(t)); err != nil {
		t.Fatal(err)
	}
	if got := received.got(); !containsType(got, "ping") || s.eventStatus(t, botID, id) != "processed" {
		t.Fatalf("the bot received %v", got)
	}

	filter := templateStreamFilter(t)
	var passed, outboxOther []string
	for _, r := range streamRecords(t, moto.String(), *desc.Table.LatestStreamArn) {
		keys, _ := r["dynamodb"].(map[string]any)["Keys"].(map[string]any)
		pk, _ := keys["pk"].(map[string]any)["S"].(string)
		sk, _ := keys["sk"].(map[string]any)["S"].(string)
		line := fmt.Sprintf("%s %s/%s", r["eventName"], pk, sk)
		if passes(t, filter, r) {
			passed = append(passed, line)
		} else if dynamo.IsShard(pk) {
			outboxOther = append(outboxOther, line)
		}
	}
	if len(passed) != 1 || !strings.HasPrefix(passed[0], "INSERT OUTBOX#"+botID+"#dlv_") {
		t.Fatalf("records passing the filter: %v, want the outbox entry's insert only", passed)
	}
	// The test saw the dispatcher's own writes to the entry, and the filter
	// dropped them.
	if len(outboxOther) < 2 {
		t.Fatalf("the dispatcher's writes to the entry (lease, removal) are not in the stream: %v", outboxOther)
	}
	t.Logf("passed: %v; dropped outbox records: %v", passed, outboxOther)
}
