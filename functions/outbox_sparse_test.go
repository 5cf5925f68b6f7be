package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/runtime"
)

// The sparse sweep index on AWS (docs/runtime.md, "The sparse sweep
// index"): an entry due at once is written in no sweep index; these tests
// take the dispatcher function's handler (runtime.DrainOutbox over the
// store and dispatcher as the Lambda functions build them) through the
// failures the index used to cover.

// killable is an invocation's AWS client that stops answering once the
// invocation is dead (a Lambda timeout freezes the process: nothing it
// does after reaches DynamoDB).
type killable struct {
	next aws.HTTPClient
	dead atomic.Bool
}

func (k *killable) Do(r *http.Request) (*http.Response, error) {
	if k.dead.Load() {
		return nil, errors.New("the invocation is dead")
	}
	return k.next.Do(r)
}

// dyingHandler is the dispatcher function's handler whose AWS calls fail
// once kill is called.
func dyingHandler(t *testing.T) (handle func(context.Context, []byte) error, kill func()) {
	t.Helper()
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	k := &killable{next: cfg.HTTPClient}
	if k.next == nil {
		k.next = http.DefaultClient
	}
	cfg.HTTPClient = k
	h := runtime.DrainOutbox(runtime.Dispatcher(cfg, runtime.FromEnv(), delivery.Client(true)))
	return func(ctx context.Context, ev []byte) error { return h(ctx, ev) }, func() { k.dead.Store(true) }
}

// laterHandler is the dispatcher function's handler on a clock ahead by d.
func laterHandler(t *testing.T, d time.Duration) func(context.Context, []byte) error {
	t.Helper()
	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	later := runtime.Dispatcher(cfg, runtime.FromEnv(), delivery.Client(true))
	later.SetClock(func() time.Time { return time.Now().Add(d) })
	h := runtime.DrainOutbox(later)
	return func(ctx context.Context, ev []byte) error { return h(ctx, ev) }
}

func countType(got []string, typ string) int {
	n := 0
	for _, x := range got {
		if x == typ {
			n++
		}
	}
	return n
}

// TestDeadInvocationSparse: a stream invocation leases a message's entry
// (in no sweep index), its bot holds the call, and the invocation dies (a
// Lambda timeout: nothing it does after reaches the table). Lambda retries
// the batch: the retry finds the entry held and puts it into the sweep
// index, due at the lease's end, and succeeds without delivering. The
// sweep does not take it while the lease lasts; after its end (a clock
// ahead) it delivers it once, and the event ends processed. Without the
// retry's index write the entry is found by nothing (checked).
func TestDeadInvocationSparse(t *testing.T) { deadInvocation(t, newStandIns(t)) }

// TestDeadInvocationSparseOnMoto: the same over moto_server.
func TestDeadInvocationSparseOnMoto(t *testing.T) {
	moto, _ := url.Parse(mototest.Start(t))
	deadInvocation(t, newStandInsOn(t, httputil.NewSingleHostReverseProxy(moto)))
}

func deadInvocation(t *testing.T, s *standIns) {
	botID, received := s.recurringBot(t)
	holding := make(chan struct{})
	received.mu.Lock()
	received.hangOnce = map[string]chan struct{}{"stuck": holding}
	received.release = make(chan struct{})
	received.mu.Unlock()
	t.Cleanup(func() { close(received.release) }) // before the bot's server closes
	_, ids := s.conversationEvents(t, botID, "stuck")
	id := ids[0]
	store := storeOf(t)
	entries := pendingEntries(t, store, time.Now().Add(time.Second))
	if len(entries) != 1 || len(indexedShards(t, store, time.Now().Add(time.Hour))) != 0 {
		t.Fatalf("entries %v, indexed %v: want one entry, in no sweep index", entries, indexedShards(t, store, time.Now().Add(time.Hour)))
	}
	batch := streamBatch(t, entries)

	// The invocation that dies.
	dying, kill := dyingHandler(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	done := make(chan error, 1)
	go func() { done <- dying(ctx, batch) }()
	<-holding // leased, at the bot
	kill()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the dead invocation succeeded")
	}
	if got := s.eventStatus(t, botID, id); got != "pending" {
		t.Fatalf("after the dead invocation the event is %s", got)
	}

	// Lambda retries its batch.
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := dispatcherHandler(t)(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "stuck"); n != 1 {
		t.Fatalf("delivered under the lease: the bot received it %d times", n)
	}
	lease := delivery.MaxBotTimeout + time.Minute
	if due := indexedShards(t, store, time.Now().Add(lease+time.Second)); len(due) != 1 {
		t.Fatalf("after the retried batch the sweep index names %v, want the entry's shard at the lease's end", due)
	}
	// The sweep leaves it while the lease lasts.
	if err := dispatcherHandler(t)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "stuck"); n != 1 {
		t.Fatalf("the sweep took a held entry: the bot received it %d times", n)
	}
	// After it: delivered once.
	if err := laterHandler(t, lease+time.Minute)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "stuck"); n != 2 || s.eventStatus(t, botID, id) != "processed" {
		t.Fatalf("after the lease: the bot received it %d times (want 2: the call held, then once), status %s", n, s.eventStatus(t, botID, id))
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// TestHeldHeadIndexesWhatFollows: a stream batch names a conversation's
// second entry while another invocation holds the first (its lease). The
// pass leaves the shard (what follows a held entry waits), putting the
// entry behind the held one into the sweep index, due now, and succeeds.
// The holder finishes and ends without reading the shard again; the sweep
// delivers the second entry once. Without the index write nothing finds it
// (checked).
func TestHeldHeadIndexesWhatFollows(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	conv, ids := s.conversationEvents(t, botID, "first", "second")
	store := storeOf(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	shard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	ds, _, err := store.PendingDeliveries(ctx, shard, "", 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("entries: %v %v", ds, err)
	}
	now := time.Now()
	if ok, err := store.LeaseDelivery(ctx, ds[0], now, now.Add(delivery.MaxBotTimeout+time.Minute)); !ok || err != nil {
		t.Fatalf("lease: %v %v", ok, err)
	}
	if err := dispatcherHandler(t)(ctx, streamBatch(t, map[string][]string{shard: {ds[1].ID}})); err != nil {
		t.Fatal(err)
	}
	if got := received.got(); slices.Contains(got, "second") || slices.Contains(got, "first") {
		t.Fatalf("delivered past a held entry: %v", got)
	}
	if due := indexedShards(t, store, time.Now().Add(time.Second)); !slices.Equal(due, []string{shard}) {
		t.Fatalf("the sweep index names %v, want the shard, due now", due)
	}
	// The holder delivers the first (not through this bot: it only
	// removes it) and ends.
	if err := store.FinishDelivery(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if err := dispatcherHandler(t)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "second"); n != 1 || s.eventStatus(t, botID, ids[1]) != "processed" {
		t.Fatalf("the sweep delivered the second entry %d times (want 1), status %s", n, s.eventStatus(t, botID, ids[1]))
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// TestSweepLeaseIndexes: the sweep's pass has no stream retry behind it. A
// conversation's first entry is a retry come due (in the index), its
// second a message's entry (in none, its stream batch done long ago); the
// sweep's invocation delivers the first, leases the second, its bot holds
// the call and the invocation dies. The second entry is in the index
// (before its delivery the pass indexed it; its lease would have): after
// the lease's end the sweep delivers it once. Without either it is found
// by nothing (checked).
func TestSweepLeaseIndexes(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	holding := make(chan struct{})
	received.mu.Lock()
	received.hangOnce = map[string]chan struct{}{"second": holding}
	received.release = make(chan struct{})
	received.mu.Unlock()
	t.Cleanup(func() { close(received.release) }) // before the bot's server closes
	conv, ids := s.conversationEvents(t, botID, "first", "second")
	store := storeOf(t)
	shard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	ds, _, err := store.PendingDeliveries(context.Background(), shard, "", 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("entries: %v %v", ds, err)
	}
	if err := store.RetryDelivery(context.Background(), ds[0], time.Now().Add(-time.Second), "503"); err != nil {
		t.Fatal(err)
	}
	dying, kill := dyingHandler(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	done := make(chan error, 1)
	go func() { done <- dying(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)) }()
	<-holding
	kill()
	cancel()
	<-done
	if got := fmt.Sprint(received.got()); countType(received.got(), "first") != 1 || countType(received.got(), "second") != 1 {
		t.Fatalf("the dying sweep's pass: the bot received %s", got)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := laterHandler(t, delivery.MaxBotTimeout+2*time.Minute)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "second"); n != 2 || s.eventStatus(t, botID, ids[1]) != "processed" {
		t.Fatalf("after the lease: the bot received the second %d times (want 2: the call held, then once), status %s", n, s.eventStatus(t, botID, ids[1]))
	}
	if countType(received.got(), "first") != 1 {
		t.Fatalf("the first delivered again: %v", received.got())
	}
}

// oldBatch is a stream batch of outbox inserts whose records were made at
// created (ApproximateCreationDateTime, epoch seconds).
func oldBatch(t *testing.T, entries map[string][]string, created time.Time) []byte {
	t.Helper()
	var recs []map[string]any
	for shard, ids := range entries {
		for _, id := range ids {
			recs = append(recs, map[string]any{"eventName": "INSERT", "eventSource": "aws:dynamodb",
				"dynamodb": map[string]any{"ApproximateCreationDateTime": float64(created.Unix()),
					"Keys": map[string]any{"pk": map[string]any{"S": shard}, "sk": map[string]any{"S": id}}}})
		}
	}
	b, err := json.Marshal(map[string]any{"Records": recs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamReReadOfOldRecords: the dispatcher's mapping reads from
// TRIM_HORIZON, so a mapping replaced or recreated reads the stream's last
// 24 hours again. A batch of such records (an hour old) whose entries were
// delivered costs one BatchGetItem of their keys and nothing else (no
// shard read, nothing delivered again); a batch mixing them with an old
// record whose entry is still there (a message the replaced mapping never
// delivered) delivers that one, once, with one BatchGetItem.
func TestStreamReReadOfOldRecords(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	hdr := map[string]string{"x-bot-id": botID}
	conv := func() string {
		_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
		return out["conversation"].(map[string]any)["id"].(string)
	}
	event := func(c, typ string) {
		s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr, map[string]any{"type": typ, "conversationId": c, "payload": map[string]any{}})
	}
	a, b := conv(), conv()
	event(a, "a0")
	event(a, "a1")
	store := storeOf(t)
	delivered := pendingEntries(t, store, time.Now().Add(time.Second))
	handle := dispatcherHandler(t) // one instance: its first invocation migrates
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := handle(ctx, streamBatch(t, delivered)); err != nil {
		t.Fatal(err)
	}
	if got := received.got(); countType(got, "a0") != 1 || countType(got, "a1") != 1 {
		t.Fatalf("the bot received %v", got)
	}
	hour := time.Now().Add(-time.Hour)

	s.DynamoOps.reset()
	if err := handle(ctx, oldBatch(t, delivered, hour)); err != nil {
		t.Fatal(err)
	}
	if ops := s.DynamoOps.reset(); !slices.Equal(ops, []string{"BatchGetItem"}) {
		t.Fatalf("a re-read batch of delivered entries made %v, want one BatchGetItem", ops)
	}

	event(b, "b0")
	pending := pendingEntries(t, store, time.Now().Add(time.Second))
	if len(pending) != 1 {
		t.Fatalf("pending: %v", pending)
	}
	for sh, ids := range delivered {
		pending[sh] = ids
	}
	s.DynamoOps.reset()
	if err := handle(ctx, oldBatch(t, pending, hour)); err != nil {
		t.Fatal(err)
	}
	ops := s.DynamoOps.reset()
	if n := countType(ops, "BatchGetItem"); n != 1 {
		t.Errorf("%d BatchGetItem calls for one batch, want 1: %v", n, ops)
	}
	got := received.got()
	if countType(got, "b0") != 1 || countType(got, "a0") != 1 || countType(got, "a1") != 1 {
		t.Fatalf("the bot received %v, want a0, a1, b0 once each", got)
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// refusing is an invocation's AWS client whose DynamoDB calls of one
// operation fail (a store error on the recording of an outcome).
type refusing struct {
	next aws.HTTPClient
	op   string // X-Amz-Target's operation, e.g. DeleteItem
}

func (r *refusing) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+r.op {
		return nil, errors.New("refused: " + r.op)
	}
	return r.next.Do(req)
}

// TestFailedPassIndexesTheShard: a stream invocation delivers a message's
// entry but cannot remove it (its DeleteItem fails). Rather than fail the
// batch or leave the entry where nothing finds it, the handler indexes the
// shard's first pending entry (this one, held by its own lease: due at the
// lease's end) and succeeds; the sweep after the lease delivers it again
// (at least once) and removes it. The entry is held by the pass's own
// lease, so what indexes it is the held-head rule (coverHeld), reached
// through the failed shard's cover or, when the handler makes another
// pass, through that pass meeting the held entry; without it nothing
// finds the entry (checked).
func TestFailedPassIndexesTheShard(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	_, ids := s.conversationEvents(t, botID, "kept")
	id := ids[0]
	store := storeOf(t)
	entries := pendingEntries(t, store, time.Now().Add(time.Second))

	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next := cfg.HTTPClient
	if next == nil {
		next = http.DefaultClient
	}
	cfg.HTTPClient = &refusing{next: next, op: "DeleteItem"}
	handle := runtime.DrainOutbox(runtime.Dispatcher(cfg, runtime.FromEnv(), delivery.Client(true)))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := handle(ctx, streamBatch(t, entries)); err != nil {
		t.Fatalf("the batch failed: %v", err)
	}
	if n := countType(received.got(), "kept"); n != 1 {
		t.Fatalf("the bot received it %d times", n)
	}
	lease := delivery.MaxBotTimeout + time.Minute
	if due := indexedShards(t, store, time.Now().Add(lease+time.Second)); len(due) != 1 {
		t.Fatalf("the sweep index names %v, want the shard at the lease's end", due)
	}
	if err := laterHandler(t, lease+time.Minute)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "kept"); n != 2 || s.eventStatus(t, botID, id) != "processed" {
		t.Fatalf("after the lease: received %d times (want 2: at least once), status %s", n, s.eventStatus(t, botID, id))
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// hooked is an invocation's AWS client that runs before once, just before
// its first DynamoDB call of one operation.
type hooked struct {
	next   aws.HTTPClient
	op     string
	before func()
	done   atomic.Bool
}

func (h *hooked) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810."+h.op && h.done.CompareAndSwap(false, true) {
		h.before()
	}
	return h.next.Do(req)
}

// TestRefusedLeaseIndexesTheHeldEntry: between a stream invocation's read
// of a shard and its lease of the head, another invocation leases it (and
// then dies). The lease is refused; the pass reads the shard again, finds
// the head held and indexes it, due at that lease's end, and succeeds
// without delivering; the sweep after the lease delivers it once. Without
// the rule the refused lease ended the pass with the entry in no index
// (checked).
func TestRefusedLeaseIndexesTheHeldEntry(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	conv, ids := s.conversationEvents(t, botID, "raced")
	id := ids[0]
	store := storeOf(t)
	entries := pendingEntries(t, store, time.Now().Add(time.Second))
	shard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	ds, _, err := store.PendingDeliveries(context.Background(), shard, "", 10)
	if err != nil || len(ds) != 1 {
		t.Fatalf("entries: %v %v", ds, err)
	}
	lease := delivery.MaxBotTimeout + time.Minute

	cfg, err := runtime.AWSConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	next := cfg.HTTPClient
	if next == nil {
		next = http.DefaultClient
	}
	cfg.HTTPClient = &hooked{next: next, op: "UpdateItem", before: func() {
		now := time.Now()
		if ok, err := store.LeaseDelivery(context.Background(), ds[0], now, now.Add(lease)); !ok || err != nil {
			t.Errorf("the other invocation's lease: %v %v", ok, err)
		}
	}}
	handle := runtime.DrainOutbox(runtime.Dispatcher(cfg, runtime.FromEnv(), delivery.Client(true)))
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	if err := handle(ctx, streamBatch(t, entries)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "raced"); n != 0 {
		t.Fatalf("delivered under another's lease: %d", n)
	}
	if due := indexedShards(t, store, time.Now().Add(lease+time.Second)); !slices.Equal(due, []string{shard}) {
		t.Fatalf("the sweep index names %v, want the shard at the lease's end", due)
	}
	if err := laterHandler(t, lease+time.Minute)(ctx, sampleEvent(t, "dispatcher-schedule.json", nil)); err != nil {
		t.Fatal(err)
	}
	if n := countType(received.got(), "raced"); n != 1 || s.eventStatus(t, botID, id) != "processed" {
		t.Fatalf("after the lease: received %d times (want 1), status %s", n, s.eventStatus(t, botID, id))
	}
}

// TestUndecodableEntryIsRemoved: an outbox entry whose document does not
// decode (written by hand, or by a bug) is refused for good and removed,
// logged first: it holds back neither its conversation (the entry after
// it is delivered) nor the stream batch that names its shard, which the
// mapping would otherwise retry until its records leave the stream (a
// day of that lane's conversations stopped). Without it the handler fails
// on the shard's reading, every time.
func TestUndecodableEntryIsRemoved(t *testing.T) {
	s := newStandIns(t)
	botID, received := s.recurringBot(t)
	conv, ids := s.conversationEvents(t, botID, "first", "second")
	store := storeOf(t)
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(runtime.DispatchReserve+time.Minute))
	defer cancel()
	shard := dynamo.Shard(platform.Delivery{BotID: botID, ConversationID: conv})
	ds, _, err := store.PendingDeliveries(ctx, shard, "", 10)
	if err != nil || len(ds) != 2 {
		t.Fatalf("entries: %v %v", ds, err)
	}
	cfg, err := runtime.AWSConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := runtime.FromEnv()
	if _, err := runtime.DynamoClient(cfg, env, nil).UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &env.Table,
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: shard}, "sk": &types.AttributeValueMemberS{Value: ds[0].ID}},
		UpdateExpression:          aws.String("SET doc = :bad"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":bad": &types.AttributeValueMemberS{Value: `{"kind":`}}}); err != nil {
		t.Fatal(err)
	}
	if err := dispatcherHandler(t)(ctx, streamBatch(t, map[string][]string{shard: {ds[0].ID, ds[1].ID}})); err != nil {
		t.Fatalf("the batch failed: %v", err)
	}
	got := received.got()
	if countType(got, "first") != 0 || countType(got, "second") != 1 || s.eventStatus(t, botID, ids[1]) != "processed" {
		t.Fatalf("received %v (want the second event once, status processed: %s)", got, s.eventStatus(t, botID, ids[1]))
	}
	if left := pendingEntries(t, store, time.Now().Add(time.Hour)); len(left) != 0 {
		t.Fatalf("entries left: %v", left)
	}
}

// conversationEvents opens a conversation of botID and queues one event of
// each type in it, through the chat API: the conversation's id and the
// events'.
func (s *standIns) conversationEvents(t *testing.T, botID string, types ...string) (conv string, ids []string) {
	t.Helper()
	hdr := map[string]string{"x-bot-id": botID}
	_, out := s.call(t, httpapi.AreaChat, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
	conv = out["conversation"].(map[string]any)["id"].(string)
	for _, typ := range types {
		_, out = s.call(t, httpapi.AreaChat, "POST", "/v1/chat/events", hdr, map[string]any{"type": typ, "conversationId": conv, "payload": map[string]any{}})
		ids = append(ids, out["event"].(map[string]any)["id"].(string))
	}
	return conv, ids
}
