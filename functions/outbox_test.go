package functions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/runtime"
)

// streamBatch is a DynamoDB stream batch of outbox inserts, one record per
// entry of each shard, as the table's stream shows them (KEYS_ONLY).
func streamBatch(t *testing.T, entries map[string][]string) []byte {
	t.Helper()
	var recs []map[string]any
	for shard, ids := range entries {
		for _, id := range ids {
			recs = append(recs, map[string]any{"eventName": "INSERT", "eventSource": "aws:dynamodb",
				"dynamodb": map[string]any{"Keys": map[string]any{"pk": map[string]any{"S": shard}, "sk": map[string]any{"S": id}}}})
		}
	}
	b, err := json.Marshal(map[string]any{"Records": recs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pendingEntries lists the outbox's shards and their entries, in the
// sweep index or not (a Scan of the table's OUTBOX# items: the sparse
// index, docs/runtime.md, leaves a new entry out of it), entries due by
// now.
func pendingEntries(t *testing.T, store *dynamo.Store, now time.Time) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	for _, sh := range outboxShards(t, store) {
		ds, _, err := store.PendingDeliveries(ctx, sh, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if due, _ := time.Parse(platform.TimeFormat, d.DueAt); !due.After(now) {
				out[sh] = append(out[sh], d.ID)
			}
		}
	}
	return out
}

// outboxShards lists the outbox's shards with an entry, by a Scan (tests
// only: no function's role has Scan).
func outboxShards(t *testing.T, store *dynamo.Store) []string {
	t.Helper()
	seen := map[string]bool{}
	var shards []string
	p := dynamodb.NewScanPaginator(store.Client(), &dynamodb.ScanInput{TableName: aws.String(runtime.FromEnv().Table),
		FilterExpression: aws.String("begins_with(pk, :o)"), ProjectionExpression: aws.String("pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":o": &types.AttributeValueMemberS{Value: "OUTBOX#"}}})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			pk := it["pk"].(*types.AttributeValueMemberS).Value
			if dynamo.IsShard(pk) && !seen[pk] {
				seen[pk] = true
				shards = append(shards, pk)
			}
		}
	}
	return shards
}

// indexedShards lists the shards the sweep index names as due by now.
func indexedShards(t *testing.T, store *dynamo.Store, now time.Time) []string {
	t.Helper()
	shards, err := store.DueShards(context.Background(), now, 100)
	if err != nil {
		t.Fatal(err)
	}
	return shards
}

func storeOf(t *testing.T) *dynamo.Store {
	t.Helper()
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	env := runtime.FromEnv()
	return dynamo.New(runtime.DynamoClient(cfg, env, nil), env.Table)
}

// TestDispatcherShardsInOrder: through the dispatcher function's handler,
// a stream batch naming two conversations' shards delivers both (in
// parallel), each conversation's events in the order they were written,
// a retry (500) holding back its conversation's later ones only; every
// event ends processed. Then an entry leased by an invocation that died
// is left alone while its lease lasts, and delivered once by the sweep
// (the scheduled invocation) after it ran out.
func TestDispatcherShardsInOrder(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	received.mu.Lock()
	received.failOnce = map[string]bool{"a0": true}
	received.mu.Unlock()
	hdr := map[string]string{"x-bot-id": botID}
	conv := func() string {
		_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
		return out["conversation"].(map[string]any)["id"].(string)
	}
	convs := map[string]string{"a": conv(), "b": conv()}
	var ids []string
	for i := range 5 {
		for _, c := range []string{"a", "b"} {
			_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr,
				map[string]any{"type": fmt.Sprint(c, i), "conversationId": convs[c], "payload": map[string]any{}})
			ids = append(ids, out["event"].(map[string]any)["id"].(string))
		}
	}
	store := storeOf(t)
	entries := pendingEntries(t, store, time.Now().Add(time.Second))
	if len(entries) != 2 {
		t.Fatalf("shards pending: %v, want the two conversations'", entries)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := dispatcherHandler(t)(ctx, streamBatch(t, entries)); err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{}
	for _, typ := range received.got() {
		if typ == "ping" {
			continue
		}
		per[typ[:1]] = append(per[typ[:1]], typ)
	}
	if got := strings.Join(per["a"], ","); got != "a0,a0,a1,a2,a3,a4" {
		t.Errorf("conversation a received %s, want a0 (500), a0, a1..a4", got)
	}
	if got := strings.Join(per["b"], ","); got != "b0,b1,b2,b3,b4" {
		t.Errorf("conversation b received %s", got)
	}
	for _, id := range ids {
		if st := s.eventStatus(t, botID, id); st != "processed" {
			t.Errorf("event %s is %s", id, st)
		}
	}

	// An invocation took the next entry and died.
	_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr,
		map[string]any{"type": "a5", "conversationId": convs["a"], "payload": map[string]any{}})
	id := out["event"].(map[string]any)["id"].(string)
	now := time.Now()
	ds, _, err := store.PendingDeliveries(context.Background(), dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: convs["a"]}), "", 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("entries of conversation a: %v %v", ds, err)
	}
	if ok, err := store.LeaseDelivery(context.Background(), ds[0], now, now.Add(10*time.Minute)); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	handle := dispatcherHandler(t)
	// Its stream batch, retried (the invocation failed), finds the entry
	// held: in the sparse index it indexes it, due at the lease's end.
	shardA := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: convs["a"]})
	if err := handle(ctx, streamBatch(t, map[string][]string{shardA: {ds[0].ID}})); err != nil {
		t.Fatal(err)
	}
	if err := handle(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if st := s.eventStatus(t, botID, id); st != "pending" {
		t.Fatalf("a leased entry went out under its lease: %s", st)
	}
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	later := runtime.Dispatcher(cfg, runtime.FromEnv(), delivery.Client(true))
	later.SetClock(func() time.Time { return time.Now().Add(11 * time.Minute) })
	if err := runtime.DrainOutbox(later)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, typ := range received.got() {
		if typ == "a5" {
			n++
		}
	}
	if n != 1 || s.eventStatus(t, botID, id) != "processed" {
		t.Fatalf("after the lease ran out: delivered %d times, status %s", n, s.eventStatus(t, botID, id))
	}
}

// TestDispatcherStreamMigratesFirst: right after an upgrade, a
// conversation's older entry still waits under the previous layout's
// OUTBOX partition when a newer one of the same conversation fires the
// stream. The first invocation of the dispatcher function migrates before
// it delivers, whatever its trigger, so the conversation's order holds
// (the one-minute run alone would come too late).
func TestDispatcherStreamMigratesFirst(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	hdr := map[string]string{"x-bot-id": botID}
	_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
	conv := out["conversation"].(map[string]any)["id"].(string)
	for _, typ := range []string{"older", "newer"} {
		s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr, map[string]any{"type": typ, "conversationId": conv, "payload": map[string]any{}})
	}
	ctx := context.Background()
	store := storeOf(t)
	shard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	ds, _, err := store.PendingDeliveries(ctx, shard, "", 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("the conversation's entries: %v %v", ds, err)
	}
	// The older entry as the previous layout held it (written by a
	// function of the previous version).
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := runtime.FromEnv()
	db := runtime.DynamoClient(cfg, env, nil)
	older := ds[0]
	if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(env.Table), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: shard}, "sk": &types.AttributeValueMemberS{Value: older.ID}}}); err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(older)
	due, _ := time.Parse(platform.TimeFormat, older.DueAt)
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(env.Table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "OUTBOX"}, "sk": &types.AttributeValueMemberS{Value: older.ID},
		"doc":      &types.AttributeValueMemberS{Value: string(doc)},
		"dueAt":    &types.AttributeValueMemberN{Value: fmt.Sprint(due.UnixMilli())},
		"attempts": &types.AttributeValueMemberN{Value: "0"},
		"gsi1pk":   &types.AttributeValueMemberS{Value: "BOT#" + botID + "#DLVS"}, "gsi1sk": &types.AttributeValueMemberS{Value: older.ID},
		"gsi2pk": &types.AttributeValueMemberS{Value: "BOT#" + botID + "#CONV#" + conv + "#DLVS"}, "gsi2sk": &types.AttributeValueMemberS{Value: older.ID},
	}}); err != nil {
		t.Fatal(err)
	}
	// The stream names the newer entry only.
	dctx, cancel := context.WithDeadline(ctx, time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := dispatcherHandler(t)(dctx, streamBatch(t, map[string][]string{shard: {ds[1].ID}})); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, typ := range received.got() {
		if typ != "ping" {
			got = append(got, typ)
		}
	}
	if strings.Join(got, ",") != "older,newer" {
		t.Fatalf("the bot received %v, want older then newer", got)
	}
}

// TestTwoDispatchersDeliverOnce: the dispatcher function's lease keeps two
// invocations (two stream batches naming the same shards, as a replaced
// mapping or a retried batch can make, and the minute's sweep) from
// delivering an entry twice or a conversation's entries out of order:
// three handlers (dispatch.Dispatcher not Exclusive, as on AWS) work the
// same four conversations' shards at once, over one table; each event
// reaches the bot once, each conversation's in the order written, and
// every entry is gone. (Run with the dispatchers Exclusive, no lease, it
// fails: events delivered twice.) With either sweep index (the stack's
// OutboxSweepIndex): sparse, the entries are in no index, and the sweep's
// handler meets the stream's leases.
func TestTwoDispatchersDeliverOnce(t *testing.T) {
	for _, index := range []string{"sparse", "full"} {
		t.Run(index, func(t *testing.T) {
			t.Setenv("PLATFORM_OUTBOX_SWEEP_INDEX", index)
			twoDispatchersDeliverOnce(t)
		})
	}
}

func twoDispatchersDeliverOnce(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	hdr := map[string]string{"x-bot-id": botID}
	const convs, per = 4, 8
	var ids []string
	for c := range convs {
		_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
		conv := out["conversation"].(map[string]any)["id"].(string)
		for i := range per {
			_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr,
				map[string]any{"type": fmt.Sprintf("%c%d", 'a'+c, i), "conversationId": conv, "payload": map[string]any{}})
			ids = append(ids, out["event"].(map[string]any)["id"].(string))
		}
	}
	store := storeOf(t)
	entries := pendingEntries(t, store, time.Now().Add(time.Second))
	if len(entries) != convs {
		t.Fatalf("shards pending: %d, want %d", len(entries), convs)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	events := [][]byte{streamBatch(t, entries), streamBatch(t, entries), sampleEvent(t, "dispatcher-schedule.json", nil)}
	errs := make(chan error, len(events))
	for _, ev := range events {
		handle := dispatcherHandler(t) // an invocation of its own
		go func() { errs <- handle(ctx, ev) }()
	}
	for range events {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	per2 := map[byte][]string{}
	for _, typ := range received.got() {
		if typ != "ping" {
			per2[typ[0]] = append(per2[typ[0]], typ)
		}
	}
	for c := range convs {
		want := make([]string, per)
		for i := range per {
			want[i] = fmt.Sprintf("%c%d", 'a'+c, i)
		}
		if got := strings.Join(per2[byte('a'+c)], ","); got != strings.Join(want, ",") {
			t.Errorf("conversation %c received %s, want each once, in order: %s", 'a'+c, got, strings.Join(want, ","))
		}
	}
	for _, id := range ids {
		if st := s.eventStatus(t, botID, id); st != "processed" {
			t.Errorf("event %s is %s", id, st)
		}
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Errorf("entries left in the outbox: %v", left)
	}
}
