package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/local"
	"github.com/botforge/platform/shared/replay"
	"github.com/botforge/platform/shared/runtime"
)

// handlerLambda invokes the dispatcher function's handler in-process.
type handlerLambda struct {
	drain func(ctx context.Context, event json.RawMessage) error
	calls atomic.Int32
}

func (h *handlerLambda) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	h.calls.Add(1)
	if err := h.drain(ctx, in.Payload); err != nil {
		return &lambda.InvokeOutput{FunctionError: aws.String("Unhandled"), Payload: []byte(err.Error())}, nil
	}
	return &lambda.InvokeOutput{StatusCode: 200}, nil
}

// TestOutboxScanDelivers: what the outbox scan sends, the dispatcher
// function's handler (runtime.DrainOutbox, the dispatcher built as on AWS:
// a lease per delivery) delivers. Users' messages whose outbox entries are
// left outside the sweep index (their gsi1 attributes removed, as the AWS
// store writes an entry due at once) and whose stream records never came
// (no dispatcher ran) reach the bot once the scan ran, every one, and the
// outbox is empty after; a second scan finds nothing.
func TestOutboxScanDelivers(t *testing.T) {
	ctx := context.Background()
	p, err := local.OpenAWSDispatch(ctx, t.TempDir(), "http://127.0.0.1:1", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	api := httptest.NewServer(p.Handler)
	defer api.Close()
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") }))
	defer bot.Close()
	var delivered atomic.Int32
	p.OnDelivery(func(_ context.Context, r delivery.Result) {
		if r.Outcome == delivery.Delivered {
			delivered.Add(1)
		}
	})
	call := func(path string, hdr map[string]string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", api.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+p.FirstToken)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %s", path, res.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
	id := func(m map[string]any, k string) string { s, _ := m[k].(map[string]any)["id"].(string); return s }
	ws := call("/v1/admin/workspaces", nil, map[string]any{"name": "scan"})
	b := call("/v1/admin/bots", map[string]string{"x-workspace-id": ws["id"].(string)}, map[string]any{"name": "scan", "dev": true, "url": bot.URL})
	h := map[string]string{"x-bot-id": id(b, "bot")}
	const convs, each = 3, 2
	for range convs {
		cv := call("/v1/chat/conversations", h, map[string]any{"channel": "web", "tags": map[string]string{}})
		u := call("/v1/chat/users", h, map[string]any{"tags": map[string]string{}})
		for j := range each {
			call("/v1/chat/messages", h, map[string]any{"conversationId": id(cv, "conversation"), "userId": id(u, "user"),
				"type": "text", "payload": map[string]any{"text": fmt.Sprint(j)}, "tags": map[string]string{}})
		}
	}

	if n := delivered.Load(); n != 0 {
		t.Fatalf("%d deliveries before the scan: a dispatcher runs", n)
	}
	// The entries, out of the sweep index.
	db := p.Store.Client()
	scanAll := func() []map[string]types.AttributeValue {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(p.Env.Table), FilterExpression: aws.String("begins_with(pk, :o) AND NOT begins_with(pk, :d)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: "OUTBOX#"}, ":d": &types.AttributeValueMemberS{Value: "OUTBOX#DUE#"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Items
	}
	entries := scanAll()
	if len(entries) != convs*each {
		t.Fatalf("%d outbox entries, want %d", len(entries), convs*each)
	}
	for _, it := range entries {
		if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(p.Env.Table),
			Key: map[string]types.AttributeValue{"pk": it["pk"], "sk": it["sk"]}, UpdateExpression: aws.String("REMOVE gsi1pk, gsi1sk")}); err != nil {
			t.Fatal(err)
		}
	}

	fn := &handlerLambda{drain: runtime.DrainOutbox(p.Dispatcher)}
	o := &replay.OutboxScan{DynamoDB: db, Lambda: fn, Table: p.Env.Table, Function: "dispatcher", OlderThan: time.Nanosecond,
		Now: func() time.Time { return time.Now().Add(time.Second) }}
	res, err := o.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != convs {
		t.Errorf("%d shards sent, want %d: %v", len(res), convs, res)
	}
	for _, r := range res {
		if r.Outcome != replay.Replayed {
			t.Errorf("%s", r)
		}
	}
	// The handler returns once its shards are worked: each delivery made,
	// its entry removed.
	if n := delivered.Load(); n != convs*each {
		t.Errorf("%d deliveries after the scan, want %d", n, convs*each)
	}
	if left := scanAll(); len(left) != 0 {
		t.Errorf("%d outbox entries left after the scan", len(left))
	}
	if res, err := o.Run(ctx); err != nil || len(res) != 0 {
		t.Errorf("a second scan: %v, %v; want nothing", res, err)
	}
	if fn.calls.Load() != 1 {
		t.Errorf("%d invocations, want 1", fn.calls.Load())
	}
}
