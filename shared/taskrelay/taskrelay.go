// Package taskrelay is the listener hub of the container stream tier
// (docs/deploy.md "Stream tiers"): a long-running process (an ECS task,
// functions/chatstream-service) holding many streams at once.
//
// It speaks the same protocol as the Lambda tier's relay
// (shared/chatrelay): the same signal, LISTEN and INBOX items, so the same
// fan-out serves both tiers, and a publisher does not know which tier holds
// a stream. What differs is who the holder is. In Lambda an invocation
// holds streams for at most 15 minutes; here the holder is the process:
//
//   - one holder id for the process's life, so one inbox and one inbox
//     Query per poll whatever the number of streams (the read cost and
//     the signal's latency no longer grow with listeners); the poll
//     adapts as the Lambda tier's does: every PollFast while signals flow
//     (HotFor after one it delivered or this process published, HotOnOpen
//     after a stream opened here), every PollEvery while idle;
//   - one LISTEN item per topic per process, however many of its streams
//     listen to the topic (an installation's topic is shared by all of
//     them), written when the first local stream subscribes;
//   - LISTEN items carry a lease (Lease) that the process renews while it
//     holds streams of the topic, and deletes once it holds none (checked
//     every Sweep), so the fan-out skips a process that died within Lease
//     without the process writing anything per stream while it lives.
package taskrelay

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/oklog/ulid/v2"

	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/listen"
)

// Defaults of a Relay's timing.
const (
	// DefaultPollFast and DefaultPollEvery are the latency a signal adds
	// after the fan-out put it in the inbox, while signals flow and while
	// the process is idle. One Query per process per poll, whatever it
	// holds: 40 a second per task while active, 4 while idle (about $0.66
	// a month per idle task on DynamoDB on-demand, shared/capacity).
	DefaultPollFast  = 25 * time.Millisecond
	DefaultPollEvery = 250 * time.Millisecond
	// DefaultHotFor: how long the poll stays fast after a signal was
	// delivered or published here (the bot's reply follows its user's
	// message; turns follow each other); DefaultHotOnOpen after a stream
	// opened (shorter: an idle page's client opens a stream again each
	// time one ends).
	DefaultHotFor    = 2 * time.Minute
	DefaultHotOnOpen = 30 * time.Second
	// DefaultLease is how long a LISTEN item names this process after its
	// last renewal: how long the fan-out may write to the inbox of a task
	// that died (harmless: each inbox item has a ttl) and how often a
	// topic's registration is written again while streams listen (twice
	// per Lease).
	DefaultLease = 12 * time.Hour
	// DefaultSweep is how often topics without local streams are
	// deregistered and leases renewed.
	DefaultSweep = time.Minute
)

// Relay is the hub of one long-running process (chatapi.Hub).
type Relay struct {
	DB    chatrelay.DB
	Table string
	Log   *slog.Logger
	// Local feeds this process's streams.
	Local *listen.Hub
	// Holder names this process in LISTEN and INBOX items.
	Holder string

	// PollFast is the poll while signals flow, PollEvery while idle
	// (HotFor after a signal, HotOnOpen after a stream opened).
	PollFast  time.Duration
	PollEvery time.Duration
	HotFor    time.Duration
	HotOnOpen time.Duration
	Lease     time.Duration
	Sweep     time.Duration
	// Window: how far back a poll reads the inbox (signals arrive through
	// the table's stream out of order), as chatrelay.Window.
	Window time.Duration

	pub *chatrelay.Relay // writes signals, as every function does
	now func() time.Time

	mu     sync.Mutex
	topics map[string]*reg
	closed bool

	since time.Time // Run's start: the inbox is read from then on

	// hot is until when the poll is fast (guarded by mu); wake makes an
	// idle poll run now (a stream just opened, a signal published here).
	hot  time.Time
	wake chan struct{}

	inboxQueries atomic.Int64
	registers    atomic.Int64
}

// reg is a topic's registration.
type reg struct {
	until time.Time     // the LISTEN item's ttl
	busy  chan struct{} // not nil while the item is being written or deleted
	ok    bool          // the item is written
}

// New returns the relay of a process over the table.
func New(db chatrelay.DB, table string, log *slog.Logger) *Relay {
	if log == nil {
		log = slog.Default()
	}
	return &Relay{DB: db, Table: table, Log: log, Local: listen.NewHub(),
		Holder:   "task-" + ulid.MustNew(ulid.Now(), rand.Reader).String(),
		PollFast: DefaultPollFast, PollEvery: DefaultPollEvery, HotFor: DefaultHotFor, HotOnOpen: DefaultHotOnOpen,
		Lease: DefaultLease, Sweep: DefaultSweep, Window: chatrelay.Window,
		pub: chatrelay.New(db, table, log), now: time.Now,
		topics: map[string]*reg{}, wake: make(chan struct{}, 1)}
}

// heat keeps the poll fast for at least d from now; an idle poll runs at
// once.
func (r *Relay) heat(d time.Duration) {
	r.mu.Lock()
	wasIdle := !r.now().Before(r.hot)
	if until := r.now().Add(d); until.After(r.hot) {
		r.hot = until
	}
	r.mu.Unlock()
	if wasIdle {
		select {
		case r.wake <- struct{}{}:
		default:
		}
	}
}

// interval is the wait before the next poll.
func (r *Relay) interval() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.now().Before(r.hot) {
		return r.PollFast
	}
	return r.PollEvery
}

// Hot tells whether the poll is fast now.
func (r *Relay) Hot() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.now().Before(r.hot)
}

// Publish writes the signal to the table: the fan-out hands it to every
// holder of topic, this process included (through its inbox). A
// conversation active here is likely to have its next signal soon: the
// poll turns fast.
func (r *Relay) Publish(topic string, frame []byte) int {
	r.heat(r.HotFor)
	return r.pub.Publish(topic, frame)
}

// CloseTopic ends the streams of topic wherever they are held.
func (r *Relay) CloseTopic(topic string) { r.pub.CloseTopic(topic) }

// Subscribe subscribes a stream of this process to topics, registering
// the process as a holder of those it did not hold yet. It returns once
// every topic is registered, so a signal published after the stream
// opened reaches it. A registration that fails ends the stream at once
// (the client sees it close and opens another) rather than leave it
// silent.
func (r *Relay) Subscribe(topics ...string) *listen.Sub {
	sub := r.Local.Subscribe(topics...)
	r.heat(r.HotOnOpen)
	for _, t := range topics {
		if err := r.register(t); err != nil {
			r.Log.Error("taskrelay: listener not registered", "topic", t, "err", err)
			sub.Close()
			break
		}
	}
	return sub
}

var errClosed = errors.New("taskrelay: the process is shutting down")

func (r *Relay) register(topic string) error {
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return errClosed
		}
		g := r.topics[topic]
		if g != nil && g.busy != nil { // being written or deleted: wait and look again
			busy := g.busy
			r.mu.Unlock()
			<-busy
			continue
		}
		if g != nil && g.ok {
			r.mu.Unlock()
			return nil
		}
		g = &reg{busy: make(chan struct{}), until: r.now().Add(r.Lease)}
		r.topics[topic] = g
		r.mu.Unlock()
		err := r.put(topic, g.until)
		r.mu.Lock()
		close(g.busy)
		g.busy = nil
		if err != nil {
			delete(r.topics, topic)
		} else {
			g.ok = true
		}
		r.mu.Unlock()
		return err
	}
}

func (r *Relay) put(topic string, until time.Time) error {
	r.registers.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.DB.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.Table), Item: map[string]types.AttributeValue{
		"pk": str(chatrelay.ListenPrefix + topic), "sk": str(r.Holder), "ttl": num(until.Unix()),
	}})
	return err
}

func (r *Relay) delete(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := r.DB.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.Table), Key: map[string]types.AttributeValue{
		"pk": str(chatrelay.ListenPrefix + topic), "sk": str(r.Holder)}})
	return err
}

// Stats is what a process holds and what it cost so far.
type Stats struct {
	Streams      int   // open subscriptions
	Topics       int   // registered topics (LISTEN items)
	InboxQueries int64 // inbox Queries made since the start
	Registers    int64 // LISTEN items written (registrations and renewals)
	Hot          bool  // polling every PollFast (signals flow), else every PollEvery
}

// Stats reports the relay's counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	n := len(r.topics)
	r.mu.Unlock()
	return Stats{Streams: r.Local.Listeners(), Topics: n, InboxQueries: r.inboxQueries.Load(), Registers: r.registers.Load(), Hot: r.Hot()}
}

// Run polls the process's inbox and keeps its registrations until ctx
// ends; then it ends every local stream (their clients reconnect, to
// another task) and deletes the process's LISTEN items.
func (r *Relay) Run(ctx context.Context) {
	r.since = r.now()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); r.poll(ctx) }()
	go func() { defer wg.Done(); r.sweepLoop(ctx) }()
	wg.Wait()
	r.shutdown()
}

func (r *Relay) shutdown() {
	r.mu.Lock()
	r.closed = true
	topics := make([]string, 0, len(r.topics))
	for t, g := range r.topics {
		if g.ok {
			topics = append(topics, t)
		}
	}
	r.mu.Unlock()
	for _, t := range topics {
		r.Local.CloseTopic(t)
		if err := r.delete(t); err != nil {
			r.Log.Error("taskrelay: listener not removed", "topic", t, "err", err)
		}
	}
}

func (r *Relay) sweepLoop(ctx context.Context) {
	t := time.NewTicker(r.Sweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.SweepOnce()
	}
}

// SweepOnce deregisters the topics no local stream listens to any more
// and renews the leases past their half.
func (r *Relay) SweepOnce() {
	now := r.now()
	var idle []string
	var renew []string
	r.mu.Lock()
	for t, g := range r.topics {
		if g.busy != nil || !g.ok {
			continue
		}
		if r.Local.Subscribers(t) == 0 {
			g.busy = make(chan struct{})
			idle = append(idle, t)
		} else if g.until.Sub(now) < r.Lease/2 {
			renew = append(renew, t)
		}
	}
	r.mu.Unlock()
	for _, t := range idle {
		if err := r.delete(t); err != nil {
			// Its lease retires it: the fan-out skips and deletes it then.
			r.Log.Error("taskrelay: listener not removed", "topic", t, "err", err)
		}
		r.mu.Lock()
		g := r.topics[t]
		delete(r.topics, t)
		close(g.busy)
		r.mu.Unlock()
	}
	for _, t := range renew {
		until := now.Add(r.Lease)
		if err := r.put(t, until); err != nil {
			r.Log.Error("taskrelay: lease not renewed", "topic", t, "err", err)
			continue
		}
		r.mu.Lock()
		if g := r.topics[t]; g != nil {
			g.until = until
		}
		r.mu.Unlock()
	}
}

// poll reads the process's inbox (every PollFast while signals flow,
// PollEvery while idle) and hands each signal, once, to the local hub.
func (r *Relay) poll(ctx context.Context) {
	seen := map[string]time.Time{}
	t := time.NewTimer(r.interval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.wake:
			t.Stop()
		}
		now := r.now()
		from := now.Add(-r.Window)
		if from.Before(r.since) {
			from = r.since
		}
		delivered := false
		n, _ := chatrelay.ReadInbox(ctx, r.DB, r.Table, r.Holder, from, now, seen, r.Window, func(it chatrelay.Signal) {
			delivered = true
			chatrelay.Deliver(r.Local, it)
		}, r.Log)
		r.inboxQueries.Add(int64(n))
		if delivered {
			r.heat(r.HotFor)
		}
		// A wake that came while this poll ran is spent: it read the inbox.
		select {
		case <-r.wake:
		default:
		}
		t.Reset(r.interval())
	}
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}
