// Package chatrelay is the AWS implementation of the Chat API's listener
// hub (chatapi.Hub; the local one is shared/listen): on AWS the function
// that writes a signal (the Chat function for a user's message, the
// dispatcher for the bot's reply) is never the one holding the streams,
// which live in invocations of the streaming function (a Lambda function
// URL with response streaming, docs/chat-api.md "Where it runs").
//
// The path of a signal, through the table (docs/data-model.md):
//
//  1. Publish / CloseTopic (any function) put a signal item
//     CHATSIG#<topic> / <ulid> holding the SSE frame (or "close").
//  2. The table's stream (KEYS_ONLY) invokes the fan-out function
//     (Fanout.Handle) for each inserted signal, filtered on the key's
//     prefix: it reads the signal, reads the topic's holders
//     (LISTEN#<topic> / <holder>, one per streaming invocation that
//     subscribed to it) and puts the signal in each holder's inbox
//     (INBOX#<holder> / <signal>#<topic>). A holder past its expiry (an
//     invocation that died without cleaning up) is deleted instead.
//  3. Each streaming invocation (Relay.Hold) polls its own inbox and
//     hands what it finds to its in-process hub, which feeds its streams
//     as locally: every PollFast while its conversations are active (for
//     HotFor after a signal it delivered, HotOnOpen after a stream it
//     opened), every PollEvery otherwise.
//
// Every item carries a ttl, so nothing outlives its use by more than a
// day even if a function dies between two steps.
package chatrelay

import (
	"context"
	"crypto/rand"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/botforge/platform/shared/listen"
)

// Key prefixes of the relay's items.
const (
	SignalPrefix = "CHATSIG#" // pk CHATSIG#<topic>, sk <ulid>: a published signal
	ListenPrefix = "LISTEN#"  // pk LISTEN#<topic>, sk <holder>: an invocation holding streams of topic
	InboxPrefix  = "INBOX#"   // pk INBOX#<holder>, sk <signal ulid>#<topic>: a signal handed to a holder
)

// Timing. The poll interval is the latency a signal adds on top of the
// table's stream and the fan-out, and the read cost of an open invocation
// (one Query per interval). It adapts: a conversation that just had a
// signal (a message, the bot's reply, an event) or a stream just opened
// is likely to have the next one soon (the bot's reply follows the user's
// message; turns follow each other), so for HotFor after a signal, and
// HotOnOpen after a stream opened, the holder polls every PollFast; an
// idle holder polls every PollEvery, the cost of a listener that only
// waits (docs/deploy.md prices both). HotOnOpen is the shorter: an idle
// page's client opens a stream again each time one ends (Lambda's 15
// minutes), and each opening would otherwise buy two fast minutes.
// Window is how far back a poll reads its inbox: signals are ordered by
// their publishers' clocks and arrive through the stream out of order, so
// a poll reads the last Window and skips what it already delivered.
var (
	PollEvery = 250 * time.Millisecond
	PollFast  = 25 * time.Millisecond
	HotFor    = 2 * time.Minute
	HotOnOpen = 30 * time.Second
	Window    = 30 * time.Second
	// SignalTTL: how long signals and inbox items are kept (the table's
	// TTL collects them; no one reads them after Window).
	SignalTTL = 24 * time.Hour
)

// DB is what the relay calls of DynamoDB.
type DB interface {
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Relay is the listener hub of one function instance on AWS. Lambda runs
// one invocation at a time per instance, so an instance holds streams
// only while an invocation of the streaming function runs (Hold): that
// invocation is the holder its LISTEN items name.
type Relay struct {
	DB    DB
	Table string
	Log   *slog.Logger
	// Local feeds this instance's streams.
	Local *listen.Hub

	mu     sync.Mutex
	holds  int
	holder string
	until  time.Time
	topics map[string]bool // topics this holder registered (LISTEN items to delete)
	stop   context.CancelFunc
	polled chan struct{}
	// hot is until when the holder's poll is fast (HotFor after a
	// delivered signal, HotOnOpen after an opened stream). wake makes an
	// idle holder's poll run now (a stream just opened).
	hot  time.Time
	wake chan struct{}
}

// heat keeps the holder's poll fast for at least d from now.
func (r *Relay) heat(d time.Duration) {
	r.mu.Lock()
	if until := time.Now().Add(d); until.After(r.hot) {
		r.hot = until
	}
	r.mu.Unlock()
}

// interval is the wait before the holder's next poll.
func (r *Relay) interval() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Now().Before(r.hot) {
		return PollFast
	}
	return PollEvery
}

// New returns a relay over the table.
func New(db DB, table string, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	return &Relay{DB: db, Table: table, Log: log, Local: listen.NewHub()}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func newID(t time.Time) string { return ulid.MustNew(ulid.Timestamp(t), rand.Reader).String() }

// Publish puts the signal in the table; the fan-out hands it to the
// holders of topic (this instance's streams included, through its inbox,
// so every stream gets each signal once and in the same way). It answers
// 0: who gets it is known only to the fan-out.
func (r *Relay) Publish(topic string, frame []byte) int {
	r.signal(topic, frame, false)
	return 0
}

// CloseTopic ends the streams of topic wherever they are held.
func (r *Relay) CloseTopic(topic string) { r.signal(topic, nil, true) }

func (r *Relay) signal(topic string, frame []byte, closing bool) {
	now := time.Now()
	item := map[string]types.AttributeValue{
		"pk": str(SignalPrefix + topic), "sk": str(newID(now)),
		"ttl": num(now.Add(SignalTTL).Unix()),
	}
	if closing {
		item["close"] = &types.AttributeValueMemberBOOL{Value: true}
	} else {
		item["frame"] = &types.AttributeValueMemberB{Value: frame}
	}
	// A signal is best effort, as locally (a slow listener is dropped): the
	// write the signal tells of is already committed, and the client can
	// read it with listMessages. The publisher's request is not failed.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.Table), Item: item}); err != nil {
		r.Log.Error("chatrelay: signal not written", "topic", topic, "err", err)
	}
}

// Subscribe subscribes a stream of this instance to topics: the holder
// (the running invocation, see Hold) is registered as a listener of each
// new topic. Outside Hold the stream gets nothing from other functions.
// A registration that fails ends the stream at once (the client sees it
// close) rather than leave it silent.
func (r *Relay) Subscribe(topics ...string) *listen.Sub {
	sub := r.Local.Subscribe(topics...)
	r.mu.Lock()
	// A stream just opened: its user is about to talk.
	if until := time.Now().Add(HotOnOpen); until.After(r.hot) {
		r.hot = until
	}
	if r.wake != nil {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
	holder, until := r.holder, r.until
	var fresh []string
	if holder != "" {
		for _, t := range topics {
			if !r.topics[t] {
				r.topics[t] = true
				fresh = append(fresh, t)
			}
		}
	}
	r.mu.Unlock()
	for _, t := range fresh {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := r.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.Table), Item: map[string]types.AttributeValue{
			"pk": str(ListenPrefix + t), "sk": str(holder), "ttl": num(until.Unix()),
		}})
		cancel()
		if err != nil {
			r.Log.Error("chatrelay: listener not registered", "topic", t, "err", err)
			r.mu.Lock()
			delete(r.topics, t)
			r.mu.Unlock()
			sub.Close()
		}
	}
	return sub
}

// Hold makes this instance a holder until release is called (nested
// holds share one holder): a fresh holder id, registered until deadline,
// whose inbox is polled meanwhile. release stops the poll and deletes the
// holder's LISTEN items, so the fan-out stops writing to it.
func (r *Relay) Hold(deadline time.Time) (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds++
	if r.holds == 1 {
		now := time.Now()
		r.holder, r.until, r.topics = newID(now), deadline, map[string]bool{}
		ctx, cancel := context.WithCancel(context.Background())
		r.stop, r.polled, r.wake = cancel, make(chan struct{}), make(chan struct{}, 1)
		go r.poll(ctx, r.holder, now, r.polled, r.wake)
	}
	var once sync.Once
	return func() { once.Do(r.release) }
}

func (r *Relay) release() {
	r.mu.Lock()
	r.holds--
	if r.holds > 0 {
		r.mu.Unlock()
		return
	}
	holder, topics, stop, polled := r.holder, r.topics, r.stop, r.polled
	r.holder, r.topics = "", nil
	r.mu.Unlock()
	stop()
	<-polled
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for t := range topics {
		if _, err := r.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.Table), Key: map[string]types.AttributeValue{
			"pk": str(ListenPrefix + t), "sk": str(holder)}}); err != nil {
			// Its ttl (the invocation's end) retires it; the fan-out skips
			// and deletes it past then.
			r.Log.Error("chatrelay: listener not removed", "topic", t, "err", err)
		}
	}
}

// poll reads the holder's inbox (every interval: PollFast while active,
// PollEvery otherwise) and hands each signal, once, to the local hub.
func (r *Relay) poll(ctx context.Context, holder string, since time.Time, done chan struct{}, wake chan struct{}) {
	defer close(done)
	seen := map[string]time.Time{}
	t := time.NewTimer(r.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
			t.Stop()
		}
		now := time.Now()
		from := now.Add(-Window)
		if from.Before(since) {
			from = since
		}
		_, _ = ReadInbox(ctx, r.DB, r.Table, holder, from, now, seen, Window, func(it Signal) {
			r.heat(HotFor)
			Deliver(r.Local, it)
		}, r.Log)
		t.Reset(r.interval())
	}
}

// Signal is one item of a holder's inbox: a frame or a close of a topic.
type Signal = map[string]types.AttributeValue

// ReadInbox reads holder's inbox from from on (one Query a page) and
// hands each signal not yet in seen to fn, marking it seen at now; then
// seen forgets what is older than window (signals of different writers
// arrive out of their ids' order: what was seen is remembered as long as
// it can still be listed). It answers the Query calls made and the first
// error (logged unless ctx ended). The streaming function's relay and the
// container tier's (shared/taskrelay) read their inboxes with it.
func ReadInbox(ctx context.Context, db DB, table, holder string, from, now time.Time, seen map[string]time.Time, window time.Duration, fn func(Signal), log *slog.Logger) (queries int, err error) {
	// ULIDs of a millisecond before `from`: the smallest is the bound.
	lower := ulid.MustNew(ulid.Timestamp(from.Add(-time.Second)), zero{}).String()
	var start map[string]types.AttributeValue
	for {
		queries++
		out, qerr := db.Query(ctx, &dynamodb.QueryInput{
			TableName:              aws.String(table),
			KeyConditionExpression: aws.String("pk = :pk AND sk > :from"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(InboxPrefix + holder), ":from": str(lower)},
			ExclusiveStartKey: start,
		})
		if qerr != nil {
			if ctx.Err() == nil && log != nil {
				log.Error("chatrelay: inbox not read", "holder", holder, "err", qerr)
			}
			err = qerr
			break
		}
		for _, it := range out.Items {
			sk := attrS(it["sk"])
			if _, ok := seen[sk]; ok {
				continue
			}
			seen[sk] = now
			fn(it)
		}
		if start = out.LastEvaluatedKey; start == nil {
			break
		}
	}
	for k, at := range seen {
		if now.Sub(at) > window+2*time.Second {
			delete(seen, k)
		}
	}
	return queries, err
}

// Deliver hands an inbox signal to the local hub: its frame to the
// topic's streams, or the topic's close.
func Deliver(local *listen.Hub, it Signal) {
	topic := attrS(it["topic"])
	if c, ok := it["close"].(*types.AttributeValueMemberBOOL); ok && c.Value {
		local.CloseTopic(topic)
		return
	}
	if f, ok := it["frame"].(*types.AttributeValueMemberB); ok {
		local.Publish(topic, f.Value)
	}
}

func attrS(v types.AttributeValue) string {
	if s, ok := v.(*types.AttributeValueMemberS); ok {
		return s.Value
	}
	return ""
}

// zero is an entropy source of zeros: the smallest ULID of a millisecond.
type zero struct{}

func (zero) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Margin is how long before its invocation's deadline a stream ends, so
// that it ends cleanly (the client sees the end of the stream, the
// holder's items are deleted) rather than being cut by Lambda's timeout.
var Margin = 5 * time.Second

// Streaming serves h in a streaming function's invocations: each request
// holds the relay for its duration (with the invocation's deadline less
// Margin as the deadline of both the request and the registration).
// Requests without a deadline (not in Lambda) get none.
func (r *Relay) Streaming(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		deadline, ok := ctx.Deadline()
		if !ok {
			deadline = time.Now().Add(15 * time.Minute)
		} else {
			deadline = deadline.Add(-Margin)
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
			req = req.WithContext(ctx)
		}
		release := r.Hold(deadline)
		defer release()
		h.ServeHTTP(flusher{w}, req)
	})
}

// flusher gives lambdaurl's writer (unbuffered: each Write goes to the
// client) the Flush that streaming handlers call.
type flusher struct{ http.ResponseWriter }

func (f flusher) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (f flusher) Unwrap() http.ResponseWriter { return f.ResponseWriter }
