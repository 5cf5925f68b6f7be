// Package dispatch delivers what the outbox holds (docs/runtime.md): events
// to bots (event_received: message_created for incoming messages, the
// bot's own events, scheduled ones when due) and the bot's messages to the
// integration of their conversation (message_created).
//
// The outbox is sharded, a shard per conversation (or per entry of none):
// a pass works shards in parallel, each in order. It knows nothing of
// where it runs: the local platform runs it in a goroutine woken with the
// shards each commit wrote to (WakeShards), sweeping every second; on AWS
// a Lambda runs RunShards on the shards a batch of the table's stream
// names, and RunOnce (a sweep) on a schedule for retries and scheduled
// events.
//
// Rules:
//   - 2xx: delivered; the event becomes processed.
//   - 4xx: the receiver refused it for good (the SDK answers 400 to what
//     it cannot handle); the event becomes failed with the reason.
//   - 5xx, no answer, no connection: retried with exponential backoff
//     (MaxAttempts in all), then failed with the last reason.
//   - Deliveries of one conversation go out one at a time, in the order
//     they were written; a retry holds back the conversation's later ones,
//     an entry scheduled for later does not.
//   - At least once: an entry leaves the outbox only after its outcome is
//     recorded, so a crash in between delivers it again, with the same
//     event id.
package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chat"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tracing"
	"github.com/botforge/platform/shared/writelane"
)

// Store is what the dispatcher reads and records (dynamo.Store).
type Store interface {
	// The outbox is sharded (a conversation's entries, or one entry of no
	// conversation, per shard): PendingDeliveries reads a shard's head,
	// DueShards the shards with something due (the sweep).
	PendingDeliveries(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, error)
	DueShards(ctx context.Context, now time.Time, perBucket int) ([]string, error)
	LeaseDelivery(ctx context.Context, d platform.Delivery, now, until time.Time) (bool, error)
	RetryDelivery(ctx context.Context, d platform.Delivery, due time.Time, why string) error
	FinishDelivery(ctx context.Context, d platform.Delivery) error
	SetEventStatus(ctx context.Context, bot, id, status string, failureReason *string) error

	BotByID(ctx context.Context, id string) (platform.Bot, error)
	// CachedBotByID reads a bot as BotByID does, from a cache of at most
	// authcache.TTL (the bound on how late another process's change of a
	// bot is seen); FreshBotByID past it (eventBot).
	CachedBotByID(ctx context.Context, id string) (platform.Bot, error)
	FreshBotByID(ctx context.Context, id string) (platform.Bot, error)
	IntegrationByID(ctx context.Context, id string) (platform.Integration, error)
	GetEvent(ctx context.Context, bot, id string) (platform.Event, error)
	// MessageRecord reads a message without checking its conversation:
	// the dispatcher reads the conversation next (GetConversation: 404
	// while it is being deleted), one read less than GetMessage's check.
	MessageRecord(ctx context.Context, bot, id string) (platform.Message, error)
	GetUser(ctx context.Context, bot, id string) (platform.User, error)
	GetConversation(ctx context.Context, bot, id string) (platform.Conversation, error)
	// DeliveryConversation is GetConversation, and whether a message of
	// it may have changed since createdAt (a carried message is then read).
	DeliveryConversation(ctx context.Context, bot, id, createdAt string) (platform.Conversation, bool, error)
	ExpiredState(ctx context.Context, k platform.StateKey, expiresAt string) (platform.State, bool, error)
	EmitEvent(ctx context.Context, bot string, e platform.Event) error
	TimeOutWorkflow(ctx context.Context, bot, id, timeoutAt string, now time.Time) (bool, error)

	// Periodic register() calls (configureIntegration's scheduleRegisterCall).
	delivery.Ledger
	StartScheduledRegister(ctx context.Context, botID, alias, ticket string, op platform.Operation) (bool, error)
	SetInstallStatus(ctx context.Context, botID, alias, opID, status string, reason *string) error
	FinishAndQueue(ctx context.Context, d, next platform.Delivery) error
	TimeOutTask(ctx context.Context, bot, id, timeoutAt string, now time.Time) (bool, error)
	// The bot's invocations quota and counter (docs/account.md); prepaid:
	// the delivery's invocation is counted already (platform.Delivery.Prepaid).
	InvocationsLeft(ctx context.Context, bot string, prepaid bool) (bool, error)
	CountInvocation(ctx context.Context, bot string) error
}

// Defaults of a Dispatcher.
const (
	MaxAttempts = 5
	FirstRetry  = time.Second
	// batch is how many entries of a shard one read takes.
	batch = 100
	// sweepPerBucket is how many due entries of each sweep index partition
	// a sweep reads.
	sweepPerBucket = 200
	// Workers bounds the shards (conversations) delivered to in parallel.
	Workers = 32
)

// Dispatcher delivers the outbox.
type Dispatcher struct {
	Store  Store
	Client *http.Client // nil: delivery.Client(false)
	// WebhookBase is the public base of webhook URLs (".../webhooks").
	WebhookBase string
	Observer    delivery.Observer // nil: none
	// Code runs deployed code (bots and integrations with code and no
	// url); nil: none runs here, their deliveries fail saying so.
	Code platform.CodeRunner
	// Builtins are the integrations served in-process (shared/builtin):
	// the bot's messages in their conversations go to their Sender.
	Builtins *builtin.Registry
	Log      *slog.Logger
	// MaxAttempts and FirstRetry override the defaults.
	MaxAttempts int
	FirstRetry  time.Duration
	Now         func() time.Time
	// Workers overrides the default bound on shards worked in parallel.
	Workers int
	// Exclusive says this dispatcher alone delivers the outbox, from Run
	// only (the local platform over its embedded DynamoDB: one process
	// holds the data directory, releases a dead process's leases at
	// start, and Run works each shard in one goroutine at a time). It
	// then takes no lease before a delivery: a lease keeps other
	// dispatchers away, and there are none; the write (and its fsync)
	// would be spent on every delivery, on the reply's path.
	Exclusive bool
	// AllShards, when set, lists every outbox shard with an entry, in the
	// sweep index or not (dynamo.Store.OutboxShards): Run works them all
	// when it starts. For a store whose index is sparse (SparseSweep: an
	// entry due at once is found by its commit's wake-up, and after a
	// crash only so); nil: the sweep index lists them.
	AllShards func(ctx context.Context) ([]string, error)

	wake chan struct{}
	once sync.Once
	mu   sync.Mutex // guards MaxAttempts, FirstRetry, Now, nextDue, hinted and observing once running

	nextDue time.Time
	hinted  map[string]bool // shards named by WakeShards, not yet worked
	// revisit are the shards whose pass failed (a read, or the recording
	// of a delivery's outcome): Run works them again at its next tick, as
	// an entry left so may be in no sweep index (AllShards).
	revisit map[string]bool
	// comingDue are the due times (epoch ms) of the entries this
	// dispatcher left waiting (retries, scheduled entries): Run sweeps
	// when one has passed rather than every interval.
	comingDue map[int64]bool

	// observing counts the observers (log lines, bot issues) of finished
	// deliveries still writing, under mu; observed is signalled when it
	// falls to zero; observers bounds them (observeAside).
	observing int
	observed  *sync.Cond
	observers chan struct{}

	// removing counts the removals of delivered entries still becoming
	// durable (finishAside); Run waits for them before it returns.
	removing sync.WaitGroup
	// lane is the lane (shared/writelane) of Run's shard workers when
	// Exclusive: one for the dispatcher, not one per worker, so that a
	// shard's next pass, by a worker started after the last one ended,
	// reads past the removals that worker left in their fsync (the reply
	// to a user's next message would otherwise wait for the removal of
	// the last reply's entry). Only a shard's worker reads the shard under
	// it, one at a time, and a read waits only for writes where it reads,
	// so sharing it among shards changes nothing for any other shard.
	lane *writelane.Lane
	// workerDone, set by tests, is called as a shard's worker ends.
	workerDone func(shard string)
}

const maxObserving = 64

// observeAside runs a finished delivery's observer (its log lines, a bot
// issue) beside the recording of its outcome, and returns a channel closed
// once it is done. Over an Exclusive store (the local platform) the
// conversation's next delivery does not wait for it: the log line's own
// fsync was one more on the reply's path (docs/runtime.md, "Round-trip
// latency"); Run and RunShards wait for the observers still writing
// before they return. Otherwise (an AWS invocation) each delivery waits
// for its own, as before. A crash may lose the log lines of the
// deliveries just finished, as it could before (they were written in
// parallel with the entry's removal, never before it).
func (d *Dispatcher) observeAside(observe func()) <-chan struct{} {
	d.observers <- struct{}{}
	d.mu.Lock()
	d.observing++
	d.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			<-d.observers
			d.mu.Lock()
			if d.observing--; d.observing == 0 {
				d.observed.Broadcast()
			}
			d.mu.Unlock()
		}()
		observe()
	}()
	return done
}

// waitObserved returns once no delivery's observer is writing.
func (d *Dispatcher) waitObserved() {
	d.mu.Lock()
	for d.observing > 0 {
		d.observed.Wait()
	}
	d.mu.Unlock()
}

// FullSweep is how often Run sweeps even when no entry it knows of has
// come due (entries it never saw: another process's).
const FullSweep = 30 * time.Second

// SetRetry changes the retry policy of a running dispatcher (tests).
func (d *Dispatcher) SetRetry(first time.Duration, attempts int) {
	d.init()
	d.mu.Lock()
	d.FirstRetry, d.MaxAttempts = first, attempts
	d.mu.Unlock()
}

// SetClock replaces the clock of a running dispatcher (tests: a schedule
// a day away comes due at once).
func (d *Dispatcher) SetClock(now func() time.Time) {
	d.init()
	d.mu.Lock()
	d.Now = now
	d.mu.Unlock()
}

func (d *Dispatcher) now() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.Now()
}

func (d *Dispatcher) retryPolicy() (time.Duration, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.FirstRetry, d.MaxAttempts
}

func (d *Dispatcher) init() {
	d.once.Do(func() {
		d.wake = make(chan struct{}, 1)
		if d.Log == nil {
			d.Log = slog.Default()
		}
		if d.Client == nil {
			d.Client = delivery.Client(false)
		}
		if d.MaxAttempts == 0 {
			d.MaxAttempts = MaxAttempts
		}
		if d.FirstRetry == 0 {
			d.FirstRetry = FirstRetry
		}
		if d.Now == nil {
			d.Now = time.Now
		}
		if d.Workers == 0 {
			d.Workers = Workers
		}
		d.lane = writelane.New()
		d.observers = make(chan struct{}, maxObserving)
		d.observed = sync.NewCond(&d.mu)
	})
}

// Wake asks a running dispatcher for a sweep now (it never blocks).
func (d *Dispatcher) Wake() { d.WakeShards(nil) }

// WakeShards asks a running dispatcher to work the shards named (those a
// commit just wrote to), or to sweep when none is named; it never blocks.
func (d *Dispatcher) WakeShards(shards []string) {
	d.init()
	d.mu.Lock()
	if d.hinted == nil {
		d.hinted = map[string]bool{}
	}
	for _, sh := range shards {
		d.hinted[sh] = true
	}
	if len(shards) == 0 {
		d.hinted[""] = true // "" asks for a sweep
	}
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// takeHinted returns the shards named since the last call, and whether a
// sweep was asked for.
func (d *Dispatcher) takeHinted() (shards []string, sweep bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for sh := range d.hinted {
		if sh == "" {
			sweep = true
			continue
		}
		shards = append(shards, sh)
	}
	d.hinted = nil
	return shards, sweep
}

// Run delivers until ctx ends, for a process that writes every entry it
// delivers (the local platform): the shards named by WakeShards as soon as
// they are, each in a goroutine of its own (up to Workers at once), so that
// a conversation waiting on a slow bot never holds back another's; every
// interval, a sweep if an entry it left waiting (a retry, a scheduled
// entry) has come due, or FullSweep has passed since the last one. It
// starts with a sweep of every shard, due or not, so that it knows when
// what was pending comes due. It returns once the shards under way are
// done.
func (d *Dispatcher) Run(ctx context.Context, interval time.Duration) {
	d.init()
	t := time.NewTicker(interval)
	defer t.Stop()
	started := true
	if _, err := d.runAll(ctx); err != nil && ctx.Err() == nil {
		// Tried again at each tick until it succeeds: what it would have
		// found may be in no sweep index (AllShards).
		d.Log.Error("dispatch: the first pass failed", "err", err)
		started = false
	}
	defer d.removing.Wait() // after the workers (deferred below) are done
	defer d.waitObserved()
	w := &shardWorkers{d: d, ctx: ctx, sem: make(chan struct{}, d.Workers), active: map[string]bool{}}
	defer w.wg.Wait()
	lastSweep := time.Now()
	tick := false
	for {
		shards, asked := d.takeHinted()
		if tick {
			shards = append(shards, d.takeRevisit()...)
		}
		if tick && !started {
			all, err := d.listAll(ctx)
			if err != nil && ctx.Err() == nil {
				d.Log.Error("dispatch: listing the outbox's shards failed", "err", err)
			}
			started = err == nil
			shards = append(shards, all...)
		}
		if asked || tick && (d.cameDue(d.now()) || time.Since(lastSweep) >= FullSweep) {
			due, err := d.Store.DueShards(ctx, d.now(), sweepPerBucket)
			if err != nil && ctx.Err() == nil {
				d.Log.Error("dispatch: a sweep failed", "err", err)
			}
			shards = append(shards, due...)
			lastSweep = time.Now()
		}
		for _, sh := range shards {
			w.work(sh)
		}
		tick = false
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-t.C:
			tick = true
		}
	}
}

// shardWorkers are Run's goroutines, one per shard being worked: a shard
// named again while it is worked is read again when its pass ends (what
// the commit that named it wrote may have come after the pass's read).
type shardWorkers struct {
	d      *Dispatcher
	ctx    context.Context
	sem    chan struct{} // bounds the shards worked at once
	wg     sync.WaitGroup
	mu     sync.Mutex
	active map[string]bool // shard -> named again while worked
}

func (w *shardWorkers) work(sh string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.active[sh]; ok {
		w.active[sh] = true
		return
	}
	w.active[sh] = false
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		w.sem <- struct{}{}
		defer func() { <-w.sem }()
		// The shard's worker is its only reader and writer (Exclusive): the
		// dispatcher's lane lets it go on past the fsyncs of its removals
		// and of those of the shard's earlier workers.
		var lane *writelane.Lane
		if w.d.Exclusive {
			lane = w.d.lane
		}
		for {
			if _, err := w.d.runShard(w.ctx, sh, lane); err != nil && w.ctx.Err() == nil {
				w.d.Log.Error("dispatch: a pass failed", "shard", sh, "err", err)
				w.d.revisitLater(sh)
			}
			w.mu.Lock()
			if w.active[sh] && w.ctx.Err() == nil {
				w.active[sh] = false
				w.mu.Unlock()
				continue
			}
			delete(w.active, sh)
			w.mu.Unlock()
			if w.d.workerDone != nil {
				w.d.workerDone(sh)
			}
			return
		}
	}()
}

// runAll works every shard with an entry, due or not.
func (d *Dispatcher) runAll(ctx context.Context) (int, error) {
	d.init()
	all, err := d.listAll(ctx)
	if err != nil {
		return 0, err
	}
	return d.RunShards(ctx, all)
}

// listAll lists every shard with an entry: AllShards, or the sweep index
// (due or not).
func (d *Dispatcher) listAll(ctx context.Context) ([]string, error) {
	if d.AllShards != nil {
		return d.AllShards(ctx)
	}
	return d.Store.DueShards(ctx, d.now().AddDate(100, 0, 0), sweepPerBucket)
}

// revisitLater has Run work shard again at its next tick.
func (d *Dispatcher) revisitLater(shard string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.revisit == nil {
		d.revisit = map[string]bool{}
	}
	d.revisit[shard] = true
}

// takeRevisit returns the shards to work again, and forgets them.
func (d *Dispatcher) takeRevisit() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	shards := make([]string, 0, len(d.revisit))
	for sh := range d.revisit {
		shards = append(shards, sh)
	}
	d.revisit = nil
	return shards
}

// noteComing records an entry left waiting until due.
func (d *Dispatcher) noteComing(due time.Time) {
	d.mu.Lock()
	if d.comingDue == nil {
		d.comingDue = map[int64]bool{}
	}
	d.comingDue[due.UnixMilli()] = true
	d.mu.Unlock()
}

// cameDue tells whether an entry left waiting has come due by now (and
// forgets those that have).
func (d *Dispatcher) cameDue(now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	came := false
	for due := range d.comingDue {
		if due <= now.UnixMilli() {
			delete(d.comingDue, due)
			came = true
		}
	}
	return came
}

// RunOnce makes one pass: it sweeps for the shards with something due
// (Store.DueShards) and works them, with the shards named, and returns how
// many deliveries it finished.
func (d *Dispatcher) RunOnce(ctx context.Context, shards ...string) (int, error) {
	d.init()
	due, err := d.Store.DueShards(ctx, d.now(), sweepPerBucket)
	if err != nil {
		return 0, err
	}
	// A sweep's pass: over AWS's sparse index it indexes what it leases
	// (sparse.go).
	return d.RunShards(context.WithValue(ctx, sweptKey{}, true), append(shards, due...))
}

// RunShards works the shards named, up to Workers at once, each until
// nothing in it is due (or its head waits for a retry, or is leased
// elsewhere), and returns how many deliveries it finished. On AWS the
// stream-fed dispatcher calls it with the shards of a batch's records.
func (d *Dispatcher) RunShards(ctx context.Context, shards []string) (int, error) {
	d.init()
	d.mu.Lock()
	d.nextDue = time.Time{}
	d.mu.Unlock()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
		sem  = make(chan struct{}, d.Workers)
		seen = map[string]bool{}
	)
	for _, sh := range shards {
		if seen[sh] {
			continue
		}
		seen[sh] = true
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n, err := d.runShard(ctx, sh, nil)
			if sp := d.sparse(); err != nil && sp != nil {
				// Left undone: its first pending entry goes into the index,
				// and the pass succeeds (a stream batch is not retried).
				if cerr := d.cover(ctx, sp, sh); cerr != nil {
					err = errors.Join(err, cerr)
				} else {
					d.Log.Warn("dispatch: a shard's pass failed; its first pending entry is indexed for the sweep", "shard", sh, "err", err)
					err = nil
				}
			}
			mu.Lock()
			done += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	d.waitObserved()
	return done, errors.Join(errs...)
}

// runShard delivers a shard's due entries in order. Its entries are one
// conversation's (or a single one of none): one not yet due after a failed
// attempt (a retry's backoff), or leased by another dispatcher, holds back
// those after it; one scheduled for later (never attempted) does not.
// With a lane (Run's worker of the shard, Exclusive), a delivered entry's
// removal goes on durably beside the next delivery (finishAside), and the
// shard's reads do not wait for it.
func (d *Dispatcher) runShard(ctx context.Context, shard string, lane *writelane.Lane) (int, error) {
	done := 0
	after := ""
	readCtx := ctx
	if lane != nil {
		readCtx = writelane.Reading(ctx, lane)
	}
	sp := d.sparse()                 // AWS's sparse index: its rules (sparse.go)
	sweep := sp != nil && swept(ctx) // a sweep's pass: no stream retry behind it
	again := 0
	reread := func() error {
		if again++; again > rereads {
			return fmt.Errorf("dispatch: shard %s: its head changed hands %d times", shard, rereads)
		}
		after = ""
		return nil
	}
read:
	for ctx.Err() == nil {
		ds, leases, indexed, err := d.pending(readCtx, sp, shard, after)
		if err != nil {
			return done, err
		}
		now := d.now()
		for i := 0; i < len(ds); i++ {
			dl := ds[i]
			after = dl.ID
			if leases[i] > now.UnixMilli() {
				if sp == nil {
					return done, nil // under way elsewhere: what follows waits
				}
				// What follows waits; the first entry behind it that is
				// in no index is indexed (or the held head, due at its
				// lease's end), unless the head changed hands meanwhile.
				ok, err := d.coverHeld(ctx, sp, shard, ds[i:], leases[i:], indexed[i:])
				if err != nil || ok {
					return done, err
				}
				if err := reread(); err != nil {
					return done, err
				}
				continue read
			}
			due, _ := time.Parse(platform.TimeFormat, dl.DueAt)
			if due.After(now) {
				if dl.Attempts > 0 {
					notePending(dl, now) // undelivered: the outbox age counts it
					d.noteDue(due)       // a retry's backoff: what follows waits
					return done, nil
				}
				d.noteComing(due)
				continue // scheduled: the sweep finds it when due
			}
			if sweep {
				// The entry after this one goes into the index before this
				// one can be removed (reading past the last one read).
				if ds, leases, indexed, err = d.indexNext(ctx, sp, shard, ds, leases, indexed, i, now); err != nil {
					return done, err
				}
			}
			notePending(dl, now)
			finished, err := d.deliver(ctx, dl, lane)
			if finished {
				forgetPending(dl.ID)
			}
			if errors.Is(err, errHeld) {
				// Taken since the shard was read, or gone: read it again.
				if err := reread(); err != nil {
					return done, err
				}
				continue read
			}
			if err != nil {
				d.Log.Error("dispatch: recording a delivery failed", "delivery", dl.ID, "err", err)
				if sp != nil {
					return done, err // RunShards covers the shard (cover)
				}
				d.revisitLater(shard) // the entry stays, maybe in no sweep index
			}
			if !finished {
				return done, nil // retried later: the conversation's next ones wait
			}
			done++
		}
		if len(ds) < batch {
			return done, nil
		}
	}
	return done, ctx.Err()
}

// pending reads a shard's entries after after, with whether each is in
// the sweep index when the store's index is sparse (all are otherwise).
func (d *Dispatcher) pending(ctx context.Context, sp sparseIndex, shard, after string) ([]platform.Delivery, []int64, []bool, error) {
	if sp != nil {
		return sp.PendingIndexed(ctx, shard, after, batch)
	}
	ds, leases, err := d.Store.PendingDeliveries(ctx, shard, after, batch)
	return ds, leases, nil, err
}

// indexNext indexes the entry after ds[i] that is not scheduled for later,
// reading the shard past the last entry read when there is none among them
// (what it reads is added to the entries): a sweep's pass keeps its
// shard's next entry indexed before it delivers (and removes) ds[i].
func (d *Dispatcher) indexNext(ctx context.Context, sp sparseIndex, shard string, ds []platform.Delivery, leases []int64, indexed []bool, i int, now time.Time) ([]platform.Delivery, []int64, []bool, error) {
	j := i + 1
	for {
		for j < len(ds) && scheduled(ds[j], now) {
			j++
		}
		if j < len(ds) {
			break
		}
		more, ml, mi, err := sp.PendingIndexed(ctx, shard, ds[len(ds)-1].ID, batch)
		if err != nil {
			return ds, leases, indexed, err
		}
		if len(more) == 0 {
			return ds, leases, indexed, nil
		}
		ds, leases, indexed = append(ds, more...), append(leases, ml...), append(indexed, mi...)
	}
	if !indexed[j] {
		if _, err := sp.IndexEntry(ctx, ds[j], now, 0); err != nil {
			return ds, leases, indexed, err
		}
		indexed[j] = true // or gone: its lease will say so
	}
	return ds, leases, indexed, nil
}

// noteDue records an entry left waiting until due, for NextDue.
func (d *Dispatcher) noteDue(due time.Time) {
	d.noteComing(due)
	d.mu.Lock()
	if d.nextDue.IsZero() || due.Before(d.nextDue) {
		d.nextDue = due
	}
	d.mu.Unlock()
}

// NextDue is when the soonest entry the last pass left waiting (a retry's
// backoff, set by that pass or an earlier one) comes due; zero for none.
// Scheduled entries (never attempted) are not counted: the sweep finds
// them when due.
func (d *Dispatcher) NextDue() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.nextDue
}

// outcome is how one attempt ended.
type outcome struct {
	ok    bool   // delivered
	final bool   // refused for good (no retry)
	why   string // failure reason
	skip  bool   // nothing to deliver (canceled event, no integration)
	// ignored: the bot is not subscribed to the event (bot.subscriptions).
	ignored bool
	// spent: a pre-paid invocation (platform.Delivery.Prepaid) is used:
	// the attempt reached the bot (a call was made), or the bot is gone
	// (its usage with it: nothing to give back).
	spent bool
	// observe records the attempt (its log lines, a bot issue): deliver
	// runs it while it records the outcome, two durable writes (two
	// fsyncs) at once instead of one after the other, and waits for both.
	observe func()
}

// subscribed applies bot.subscriptions: null events (the default) mean
// every event; a map lists the integration and custom events the bot
// wants. The platform's own events always go out.
func subscribed(bot platform.Bot, typ string) bool {
	switch typ {
	case platform.EventMessageCreated, platform.EventStateExpired, platform.EventWorkflowUpdate, platform.EventTaskUpdate:
		return true
	}
	var sub struct {
		Events map[string]json.RawMessage `json:"events"`
	}
	if json.Unmarshal(bot.Subscriptions, &sub) != nil || sub.Events == nil {
		return true
	}
	_, ok := sub.Events[typ]
	return ok
}

// deliver makes one attempt at dl and records its outcome; finished is
// false when it was put back for a retry (or is leased elsewhere). With a
// lane, the entry's removal is only visible when it returns
// (finishAside).
func (d *Dispatcher) deliver(ctx context.Context, dl platform.Delivery, lane *writelane.Lane) (finished bool, err error) {
	// The trace of the request that queued it goes on into the call.
	ctx, span := tracing.Start(tracing.WithParent(ctx, dl.Trace), "deliver "+dl.Kind, trace.SpanKindClient)
	defer span.End()
	now := d.now()
	if !d.Exclusive {
		until := now.Add(delivery.MaxBotTimeout + time.Minute)
		lease := d.Store.LeaseDelivery
		sp := d.sparse()
		if sp != nil && swept(ctx) {
			lease = sp.LeaseIndexed // no stream retry behind a sweep's pass
		}
		ok, err := lease(ctx, dl, now, until)
		if err != nil || !ok {
			forgetPending(dl.ID) // under way elsewhere: not this process's to count
			if err == nil && sp != nil {
				err = errHeld // the pass reads the shard again (coverHeld)
			}
			return false, err
		}
	}
	if due, err := time.Parse(platform.TimeFormat, dl.DueAt); err == nil {
		metrics.DispatchLag.Observe(max(now.Sub(due), 0).Seconds(), dl.Kind)
	}
	var (
		out  outcome
		next *platform.Delivery // a periodic delivery's next run
	)
	switch dl.Kind {
	case platform.DeliverEvent:
		out = d.sendEvent(ctx, dl)
	case platform.DeliverOutgoing:
		out = d.sendOutgoing(ctx, dl)
	case platform.DeliverStateExpiry:
		out = d.expireState(ctx, dl)
	case platform.DeliverWorkflowTimeout:
		// Its workflow_timedout event is queued in the same transaction.
		_, err := d.Store.TimeOutWorkflow(ctx, dl.BotID, dl.WorkflowID, dl.ExpiresAt, d.now())
		if o := failed(err, skipped); o != nil {
			out = *o
		} else {
			out = outcome{ok: true}
		}
	case platform.DeliverRegister:
		out, next = d.register(ctx, dl)
	case platform.DeliverTaskTimeout:
		// Its task_update event (task_timedout) is queued in the same transaction.
		_, err := d.Store.TimeOutTask(ctx, dl.BotID, dl.TaskID, dl.ExpiresAt, d.now())
		if o := failed(err, skipped); o != nil {
			out = *o
		} else {
			out = outcome{ok: true}
		}
	default:
		out = outcome{final: true, why: fmt.Sprintf("unknown delivery kind %q", dl.Kind)}
	}
	// A pre-paid invocation used stays used (the retry's write clears the
	// entry's mark); one still unused is given back as the entry goes
	// (Store.FinishDelivery).
	dl.Prepaid = dl.Prepaid && !out.spent
	if out.observe != nil {
		observed := d.observeAside(out.observe)
		if !d.Exclusive {
			defer func() { <-observed }()
		}
	}
	first, attempts := d.retryPolicy()
	retry := !out.ok && !out.final && !out.skip && !out.ignored && dl.Attempts+1 < attempts
	countAttempt(dl.Kind, out, retry)
	if retry {
		due := d.now().Add(first << dl.Attempts)
		d.noteDue(due)
		return false, d.Store.RetryDelivery(ctx, dl, due, out.why)
	}
	if dl.EventID != "" && !out.skip {
		status, reason := platform.EventProcessed, (*string)(nil)
		switch {
		case out.ignored:
			status = platform.EventIgnored
		case !out.ok:
			status, reason = platform.EventFailed, &out.why
		}
		// A delivered event whose status its entry settles is processed
		// once the entry is removed below: nothing to write on it. Other
		// outcomes are written first, then the entry removed.
		if status != platform.EventProcessed || !dl.Settles {
			if err := d.Store.SetEventStatus(ctx, dl.BotID, dl.EventID, status, reason); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
				return false, err
			}
		}
	}
	if next != nil {
		if due, err := time.Parse(platform.TimeFormat, next.DueAt); err == nil {
			d.noteComing(due) // a run of its own: Run sweeps when it is due
		}
		return true, d.Store.FinishAndQueue(ctx, dl, *next)
	}
	if lane != nil {
		return true, d.finishAside(ctx, dl, lane)
	}
	return true, d.Store.FinishDelivery(ctx, dl)
}

// finishAside removes a delivered entry and returns once the removal is
// visible (the shard's next read will not see the entry), its fsync still
// under way: the conversation's next delivery (the bot's reply, written
// during this delivery) goes out meanwhile instead of after one more
// fsync (docs/runtime.md, "Cut since (lat36)"). Only for Run's worker of
// the shard over the embedded store (Exclusive): the shard's reads are
// its own (writelane), and after a crash the store's ordered log keeps
// this removal if it keeps anything written after it, so an entry whose
// removal was lost is delivered again before those after it, in order,
// with its id (at least once, as a crash during a delivery does). A store
// that never says the write is visible (another DynamoDB) is waited for
// whole, as FinishDelivery. An error before the removal is visible is
// returned (the entry stays, the shard reads it again); one after it
// (its fsync failed) is logged.
func (d *Dispatcher) finishAside(ctx context.Context, dl platform.Delivery, lane *writelane.Lane) error {
	visible := make(chan struct{})
	var once sync.Once
	shown := func() { once.Do(func() { close(visible) }) }
	done := make(chan error, 1)
	d.removing.Add(1)
	go func() {
		defer d.removing.Done()
		err := d.Store.FinishDelivery(writelane.Writing(ctx, lane, shown), dl)
		select {
		case <-visible:
			if err != nil {
				d.Log.Error("dispatch: removing a delivered entry failed", "delivery", dl.ID, "err", err)
			}
		default:
		}
		done <- err
	}()
	select {
	case <-visible:
		return nil
	case err := <-done:
		return err
	}
}

// register calls register() on an installation whose integration asked
// for it on a schedule, records the result on the installation as the
// install's own registration does, and returns the schedule's next run.
// Like every register() it is sent once (an operation in the ledger);
// whatever the outcome, the schedule goes on. A stale entry (the schedule
// changed, the installation or bot is gone) ends the run.
func (d *Dispatcher) register(ctx context.Context, dl platform.Delivery) (outcome, *platform.Delivery) {
	bot, err := d.Store.BotByID(ctx, dl.BotID)
	if o := failed(err, skipped); o != nil {
		return *o, nil
	}
	inst, ok := bot.Installs[dl.Alias]
	if !ok || inst.RegisterTicket != dl.Ticket {
		return skipped, nil
	}
	now := d.now()
	if !inst.Enabled {
		// Nothing to call while disabled; the schedule resumes with it.
		return skipped, d.nextRegister(dl, inst, now)
	}
	integ, err := d.Store.IntegrationByID(ctx, inst.IntegrationID)
	if o := failed(err, skipped); o != nil {
		return *o, nil
	}
	timeout := delivery.BotTimeout(platform.Bot{MaxExecutionTime: integ.MaxExecutionTime})
	op := platform.Operation{
		ID: platform.NewID(platform.PrefixOperation), Type: platform.OperationRegister, Status: platform.OperationPending,
		BotID: bot.ID, IntegrationID: integ.ID, Alias: inst.Alias, WorkspaceID: bot.WorkspaceID,
		CreatedAt: platform.FormatTime(now), UpdatedAt: platform.FormatTime(now),
		Deadline: platform.FormatTime(now.Add(timeout + time.Minute)),
	}
	current, err := d.Store.StartScheduledRegister(ctx, bot.ID, inst.Alias, dl.Ticket, op)
	if err != nil {
		return outcome{why: err.Error()}, nil
	}
	if !current {
		return skipped, nil
	}
	call := delivery.IntegrationCall{
		Operation: "register", Secret: integ.SigningSecret,
		BotID: bot.ID, Alias: inst.Alias, IntegrationID: integ.ID, WebhookID: inst.WebhookID,
		ConfigurationType: inst.ConfigurationType, Configuration: inst.Configuration,
		Body: map[string]any{"webhookUrl": dl.WebhookURL}, Timeout: timeout,
	}
	if call.URL, err = platform.IntegrationTarget(ctx, d.Code, integ); err != nil {
		call.NoURL = codeFailure(err).why
	}
	op, res, err := delivery.RunOperation(ctx, d.Store, d.Client, op, call)
	if err != nil {
		d.Log.Error("dispatch: recording a scheduled register", "operation", op.ID, "err", err)
	}
	status, reason := delivery.RegistrationStatus(op, res)
	if err := d.Store.SetInstallStatus(ctx, bot.ID, inst.Alias, op.ID, status, reason); err != nil {
		return outcome{why: err.Error()}, nil
	}
	d.observe(ctx, delivery.Result{Kind: platform.OperationRegister, BotID: bot.ID, WorkspaceID: bot.WorkspaceID,
		IntegrationID: integ.ID, Name: inst.Alias, OperationID: op.ID, URL: call.URL}, res)
	return outcome{ok: res.Outcome == delivery.Delivered, final: true, why: res.Err}, d.nextRegister(dl, inst, now)
}

// nextRegister is the next run of a periodic register() entry, one period
// of the installation's schedule after now.
func (d *Dispatcher) nextRegister(dl platform.Delivery, inst platform.IntegrationInstance, now time.Time) *platform.Delivery {
	due, ok := platform.NextRegister(inst.RegisterSchedule, now)
	if !ok {
		return nil
	}
	n := dl
	n.ID, n.CreatedAt, n.DueAt, n.Attempts, n.LastError = platform.NewID("dlv_"), platform.FormatTime(now), platform.FormatTime(due), 0, ""
	return &n
}

// gone reports a record that no longer exists: nothing to deliver.
func gone(err error) bool { return platform.TypeOf(err) == platform.ErrResourceNotFound }

// skipped is the outcome of a delivery whose subject is gone.
var skipped = outcome{skip: true}

// failed maps the error of a read: nil for none, ifGone when the record is
// gone, a transient failure otherwise.
func failed(err error, ifGone outcome) *outcome {
	switch {
	case err == nil:
		return nil
	case gone(err):
		return &ifGone
	}
	return &outcome{why: err.Error()}
}

// sendEvent delivers an event to its bot.
func (d *Dispatcher) sendEvent(ctx context.Context, dl platform.Delivery) outcome {
	var ev platform.Event
	if dl.EventType == platform.EventMessageCreated {
		// Rebuilt from its message below (messagePayload), as the
		// message's write made it: no read of the event (never
		// scheduled, so never canceled).
		ev = platform.Event{ID: dl.EventID, Type: dl.EventType, ConversationID: dl.ConversationID, MessageID: dl.MessageID}
	} else {
		var err error
		ev, err = d.Store.GetEvent(ctx, dl.BotID, dl.EventID)
		if o := failed(err, skipped); o != nil {
			return *o
		}
		if ev.Status == platform.EventCanceled {
			return outcome{skip: true}
		}
	}
	bot, err := d.eventBot(ctx, dl.BotID, ev.Type)
	if o := failed(err, outcome{skip: true, spent: true}); o != nil {
		return *o
	}
	if !subscribed(bot, ev.Type) {
		return outcome{ignored: true}
	}
	if bot.URL, err = platform.BotTarget(ctx, d.Code, bot); err != nil {
		out := codeFailure(err)
		d.observe(ctx, delivery.Result{Kind: "event", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, EventID: ev.ID, EventType: ev.Type}, delivery.Response{Outcome: delivery.Failed, Err: out.why})
		return out
	}
	ev.Status = platform.EventPending
	if ev.Type == platform.EventMessageCreated {
		m, payload, out := d.messagePayload(ctx, dl)
		if out != nil {
			return *out
		}
		ev.Payload = payload
		if dl.EventType != "" {
			ev.CreatedAt, ev.UserID, ev.ConversationID = m.CreatedAt, m.UserID, m.ConversationID
		}
	}
	req, err := delivery.BotRequest(bot, "event_received", ev.Type, map[string]any{"event": ev})
	if err != nil {
		return outcome{final: true, why: err.Error()}
	}
	// The bot's invocations quota: past it, the event fails unsent.
	left, err := d.Store.InvocationsLeft(ctx, bot.ID, dl.Prepaid)
	if err != nil {
		return outcome{why: err.Error()}
	}
	if !left {
		return outcome{final: true, why: "the bot's quota of invocations this month is reached (QuotaExceeded)"}
	}
	// The invocation is counted while the bot works (every attempt
	// counts, answered or not): its durable write is then off the path of
	// whatever the conversation delivers next. It is durable before the
	// entry can be removed (a crash never loses the count of a delivery
	// whose entry is gone). A pre-paid delivery's (a user's message:
	// counted by the message's own write) is not counted again.
	counted := make(chan struct{})
	if dl.Prepaid {
		close(counted)
	} else {
		go func() {
			defer close(counted)
			if err := d.Store.CountInvocation(ctx, bot.ID); err != nil {
				log := d.Log
				if log == nil {
					log = slog.Default()
				}
				log.WarnContext(ctx, "invocation not counted", "bot", bot.ID, "err", err)
			}
		}()
	}
	res := delivery.Send(ctx, d.Client, req)
	<-counted
	out := judge(res)
	out.spent = true
	out.observe = func() {
		d.observe(ctx, delivery.Result{Kind: "event", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, EventID: ev.ID, EventType: ev.Type, URL: bot.URL}, res)
	}
	return out
}

// eventBot reads the bot an event goes to from the cache of bots (at most
// authcache.TTL old: a new url, code or subscriptions made by another
// process reach the dispatcher within that bound, this process's at once),
// and again past the cache when the cached bot would not take the event
// (not subscribed, or nowhere to send it), so a change that grants is
// seen at once.
func (d *Dispatcher) eventBot(ctx context.Context, id, typ string) (platform.Bot, error) {
	bot, err := d.Store.CachedBotByID(ctx, id)
	if err == nil && (!subscribed(bot, typ) || (bot.URL == "" && !bot.HasCode())) {
		bot, err = d.Store.FreshBotByID(ctx, id)
	}
	return bot, err
}

// expireState emits the state_expired event of a state that ran out and
// was not renewed since (a renewal queued its own check). The event's id
// comes from the delivery's, so a repeat after a crash emits nothing new.
func (d *Dispatcher) expireState(ctx context.Context, dl platform.Delivery) outcome {
	if dl.State == nil {
		return outcome{final: true, why: "no state named"}
	}
	st, expired, err := d.Store.ExpiredState(ctx, *dl.State, dl.ExpiresAt)
	if err != nil {
		return outcome{why: err.Error()}
	}
	if !expired {
		return skipped
	}
	payload, err := json.Marshal(map[string]any{"state": st})
	if err != nil {
		return outcome{final: true, why: err.Error()}
	}
	ev := platform.Event{
		ID: platform.PrefixEvent + strings.TrimPrefix(dl.ID, "dlv_"), CreatedAt: platform.FormatTime(d.now()),
		Type: platform.EventStateExpired, Payload: payload, Status: platform.EventPending,
		ConversationID: st.ConversationID, UserID: st.UserID,
	}
	err = d.Store.EmitEvent(ctx, dl.BotID, ev)
	switch platform.TypeOf(err) {
	case platform.ErrAlreadyExists, platform.ErrResourceNotFound:
		return skipped // emitted before a crash; or its conversation or user is gone
	}
	if err != nil {
		return outcome{why: err.Error()}
	}
	return outcome{ok: true}
}

// messagePayload is the payload of a message_created event as the bot
// reads it: the message, its author and its conversation, as they are now.
func (d *Dispatcher) messagePayload(ctx context.Context, dl platform.Delivery) (platform.Message, json.RawMessage, *outcome) {
	deleted := outcome{final: true, why: "the message was deleted before it could be delivered"}
	m, conv, out := d.deliveredMessage(ctx, dl, deleted, outcome{final: true, why: "the conversation was deleted before the message could be delivered"})
	if out != nil {
		return m, nil, out
	}
	user, err := d.Store.GetUser(ctx, dl.BotID, m.UserID)
	if o := failed(err, outcome{final: true, why: "the message's user was deleted before the message could be delivered"}); o != nil {
		return m, nil, o
	}
	b, err := json.Marshal(map[string]any{"message": m, "user": user, "conversation": conv})
	if err != nil {
		return m, nil, &outcome{final: true, why: err.Error()}
	}
	return m, b, nil
}

// deliveredMessage is the message a delivery is about, as it is now, and
// its conversation; msgGone and convGone are the outcomes when either is
// no more. The message as its write carried it (dynamo/message_carry.go),
// read again when not carried, or when one of its conversation's messages
// changed since it was written.
func (d *Dispatcher) deliveredMessage(ctx context.Context, dl platform.Delivery, msgGone, convGone outcome) (platform.Message, platform.Conversation, *outcome) {
	var m platform.Message
	carried := len(dl.Message) > 0 && json.Unmarshal(dl.Message, &m) == nil
	if carried {
		// What the entry left out (dynamo.carryMessage).
		m.ID, m.ConversationID = dl.MessageID, dl.ConversationID
		if m.UpdatedAt == "" {
			m.UpdatedAt = m.CreatedAt
		}
		if m.Tags == nil {
			m.Tags = map[string]string{} // as the stored record reads
		}
	}
	if !carried {
		var err error
		if m, err = d.Store.MessageRecord(ctx, dl.BotID, dl.MessageID); err != nil {
			return m, platform.Conversation{}, failed(err, msgGone)
		}
	}
	conv, changed, err := d.Store.DeliveryConversation(ctx, dl.BotID, m.ConversationID, m.CreatedAt)
	if o := failed(err, convGone); o != nil {
		return m, conv, o
	}
	if carried && changed {
		if m, err = d.Store.MessageRecord(ctx, dl.BotID, dl.MessageID); err != nil {
			return m, conv, failed(err, msgGone)
		}
	}
	return m, conv, nil
}

// sendOutgoing delivers a bot's message to the integration of its
// conversation (message_created); a conversation of no integration has
// nowhere to send it.
func (d *Dispatcher) sendOutgoing(ctx context.Context, dl platform.Delivery) outcome {
	m, conv, gone := d.deliveredMessage(ctx, dl, skipped, skipped)
	if gone != nil {
		return *gone
	}
	if conv.Integration == "" {
		return outcome{skip: true}
	}
	bot, err := d.Store.BotByID(ctx, dl.BotID)
	if o := failed(err, skipped); o != nil {
		return *o
	}
	inst, integ, err := d.installation(ctx, bot, conv.Integration)
	if err != nil {
		return outcome{why: err.Error()}
	}
	if integ == nil && conv.Integration == platform.EmulatorIntegration {
		// The console's emulator reads the stored reply itself: delivered.
		d.observe(ctx, delivery.Result{Kind: "message_created", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, Name: platform.EmulatorIntegration}, delivery.Response{Outcome: delivery.Delivered})
		return outcome{ok: true}
	}
	if integ == nil {
		return outcome{final: true, why: fmt.Sprintf("the bot has no enabled integration %q for this conversation", conv.Integration)}
	}
	if b, ok := d.Builtins.Of(*integ); ok {
		return d.sendBuiltin(ctx, b, bot, inst, *integ, conv, m)
	}
	if integ.URL, err = platform.IntegrationTarget(ctx, d.Code, *integ); err != nil {
		out := codeFailure(err)
		d.observe(ctx, delivery.Result{Kind: "message_created", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, IntegrationID: integ.ID, Name: inst.Alias}, delivery.Response{Outcome: delivery.Failed, Err: out.why})
		return out
	}
	author := platform.User{ID: bot.ID, CreatedAt: bot.CreatedAt, UpdatedAt: bot.UpdatedAt, Tags: map[string]string{}}
	// The integration sees its own tags without its alias.
	var body map[string]any
	raw, _ := json.Marshal(map[string]any{"type": m.Type, "payload": m.Payload, "conversation": conv, "user": author, "message": m})
	if err := json.Unmarshal(raw, &body); err != nil {
		return outcome{final: true, why: err.Error()}
	}
	chat.UnprefixRecords(body, inst.Alias)
	call := delivery.IntegrationCall{
		Operation: "message_created", URL: integ.URL, Secret: integ.SigningSecret,
		BotID: bot.ID, Alias: inst.Alias, IntegrationID: integ.ID, WebhookID: inst.WebhookID,
		ConfigurationType: inst.ConfigurationType, Configuration: inst.Configuration,
		Body:    body,
		Timeout: delivery.BotTimeout(platform.Bot{MaxExecutionTime: integ.MaxExecutionTime}),
	}
	if integ.URL == "" {
		return outcome{final: true, why: "the integration has no url to call"}
	}
	req, err := call.Request()
	if err != nil {
		return outcome{final: true, why: err.Error()}
	}
	res := delivery.Send(ctx, d.Client, req)
	out := judge(res)
	out.observe = func() {
		d.observe(ctx, delivery.Result{Kind: "message_created", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, IntegrationID: integ.ID, Name: inst.Alias, URL: integ.URL}, res)
	}
	return out
}

// sendBuiltin hands a bot's message to a built-in integration in-process,
// with its records as any integration sees them (tags without its alias).
func (d *Dispatcher) sendBuiltin(ctx context.Context, b builtin.Integration, bot platform.Bot, inst platform.IntegrationInstance, integ platform.Integration, conv platform.Conversation, m platform.Message) outcome {
	result := delivery.Result{Kind: "message_created", BotID: bot.ID, WorkspaceID: bot.WorkspaceID, IntegrationID: integ.ID, Name: inst.Alias}
	sender, ok := b.(builtin.Sender)
	if !ok {
		// A built-in integration without a channel has nobody to tell.
		d.observe(ctx, result, delivery.Response{Outcome: delivery.Delivered})
		return outcome{ok: true}
	}
	out := builtin.Outgoing{
		Message: m, Conversation: conv,
		User: platform.User{ID: bot.ID, CreatedAt: bot.CreatedAt, UpdatedAt: bot.UpdatedAt, Tags: map[string]string{}},
	}
	var view map[string]any
	raw, _ := json.Marshal(map[string]any{"message": out.Message, "conversation": out.Conversation})
	if err := json.Unmarshal(raw, &view); err != nil {
		return outcome{final: true, why: err.Error()}
	}
	chat.UnprefixRecords(view, inst.Alias)
	raw, _ = json.Marshal(view)
	var back struct {
		Message      platform.Message      `json:"message"`
		Conversation platform.Conversation `json:"conversation"`
	}
	if err := json.Unmarshal(raw, &back); err != nil {
		return outcome{final: true, why: err.Error()}
	}
	out.Message, out.Conversation = back.Message, back.Conversation
	in := builtin.Install{
		Bot: bot, Instance: inst, Integration: integ,
		WebhookURL: strings.TrimSuffix(d.WebhookBase, "/") + "/" + inst.WebhookID,
		API:        d.Builtins.APIFor(),
	}
	started := time.Now()
	err := sender.SendMessage(ctx, in, out)
	res := delivery.Response{Outcome: delivery.Delivered, StatusCode: 200, Duration: time.Since(started)}
	if err != nil {
		res.Outcome, res.StatusCode, res.Err = delivery.Failed, platform.StatusOf(err), err.Error()
	}
	d.observe(ctx, result, res)
	if err == nil {
		return outcome{ok: true}
	}
	return outcome{final: res.StatusCode/100 == 4, why: err.Error()}
}

// installation finds the bot's enabled instance of the integration named
// name (an alias, or the integration's name).
func (d *Dispatcher) installation(ctx context.Context, bot platform.Bot, name string) (platform.IntegrationInstance, *platform.Integration, error) {
	if in, ok := bot.Installs[name]; ok && in.Enabled {
		integ, err := d.Store.IntegrationByID(ctx, in.IntegrationID)
		if gone(err) {
			return in, nil, nil
		}
		return in, &integ, err
	}
	for _, in := range bot.Installs {
		if !in.Enabled {
			continue
		}
		integ, err := d.Store.IntegrationByID(ctx, in.IntegrationID)
		if gone(err) {
			continue
		}
		if err != nil {
			return in, nil, err
		}
		if integ.Name == name {
			return in, &integ, nil
		}
	}
	return platform.IntegrationInstance{}, nil, nil
}

// judge maps an answer to the SDK's meaning: 2xx done, 4xx refused for
// good, anything else transient.
// codeFailure is the outcome of deployed code that cannot be reached: for
// good when the platform says why (no Node.js, the code fails at load),
// else (storage, a token) worth a retry.
func codeFailure(err error) outcome {
	var pe *platform.Error
	if errors.As(err, &pe) {
		return outcome{final: true, why: pe.Message}
	}
	return outcome{why: err.Error()}
}

func judge(res delivery.Response) outcome {
	switch {
	case res.Outcome == delivery.Delivered:
		return outcome{ok: true}
	case res.StatusCode >= 400 && res.StatusCode < 500, res.Final:
		return outcome{final: true, why: res.Err}
	default:
		return outcome{why: res.Err}
	}
}

func (d *Dispatcher) observe(ctx context.Context, r delivery.Result, res delivery.Response) {
	if d.Observer == nil {
		return
	}
	r.Outcome, r.StatusCode, r.Error, r.At, r.Duration = res.Outcome, res.StatusCode, res.Err, d.now(), res.Duration
	d.Observer(ctx, r)
}
