package dispatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// The sparse index on AWS (docs/runtime.md, "The sparse sweep index").
// There an outbox entry due at once is written in no sweep index
// (dynamo.Store.SparseSweepOnStream): only the table's stream names its
// shard, through the dispatcher function's event source mapping, which
// retries a failed batch until its records leave the stream. What keeps
// such an entry from being lost is this invariant: an entry in no index
// has either a stream record that will still reach an invocation, or a
// live pass's lease on it or on an earlier entry of its shard whose
// holder keeps the shard's next entry indexed. The dispatcher keeps it
// with these rules, over any store that can (dynamo.Store), unless
// Exclusive, whatever its index: over a full index they find everything
// indexed and write nothing, and a change of the stack's OutboxSweepIndex,
// which reaches the functions one by one, never leaves an entry written
// sparse to a dispatcher without them.
//
//   - A pass that meets a head another invocation holds (its lease read
//     with the shard, or a lease refused) indexes the first entry behind
//     it that is in no index (due now: the next sweep works the shard,
//     in order, once the head is done), or, when there is none, the held
//     head itself, due at its lease's end and only while it holds that
//     lease (its holder may have died). coverHeld.
//   - A shard whose pass fails (a store error, the invocation's time
//     running out) has its first pending entry indexed (cover); the
//     batch fails only if that fails too (RunShards, and DrainOutbox
//     for a batch it has no time left to work).
//   - A pass the sweep started (RunOnce) has no stream retry behind it:
//     its lease puts the entry into the index if it is in none
//     (LeaseIndexed), and before each delivery it indexes the entry
//     after it (reading past the last entry it read), so that the shard's
//     next entry is indexed before the one it works is removed.
type sparseIndex interface {
	PendingIndexed(ctx context.Context, shard, after string, limit int) ([]platform.Delivery, []int64, []bool, error)
	IndexEntry(ctx context.Context, d platform.Delivery, due time.Time, lease int64) (bool, error)
	LeaseIndexed(ctx context.Context, d platform.Delivery, now, until time.Time) (bool, error)
}

// sparse is the store's side of the rules; nil for an Exclusive
// dispatcher (the local platform's, whose commits wake it) or a store
// without it.
func (d *Dispatcher) sparse() sparseIndex {
	if d.Exclusive {
		return nil
	}
	if s, ok := d.Store.(sparseIndex); ok {
		return s
	}
	return nil
}

// errHeld: the lease of an entry was refused (another invocation took it
// since the shard was read, or it is gone): the pass reads the shard again.
var errHeld = errors.New("dispatch: the entry is held elsewhere")

// sweptKey marks the context of a pass the sweep started.
type sweptKey struct{}

func swept(ctx context.Context) bool { return ctx.Value(sweptKey{}) != nil }

// scheduled tells an entry scheduled for later (never attempted): it
// holds back nothing, and it is in the index (it was written so).
func scheduled(dl platform.Delivery, now time.Time) bool {
	due, _ := time.Parse(platform.TimeFormat, dl.DueAt)
	return dl.Attempts == 0 && due.After(now)
}

// rereads bounds how often a pass reads a shard again after its head
// changed hands under it (a lease refused, a held head's condition
// failed), before it fails the shard (which is then covered).
const rereads = 3

// coverHeld keeps the invariant for a pass leaving a shard whose head
// ds[0] another invocation holds (lease[0], epoch ms): the first entry
// behind it that is in no index is indexed, due now; when there is none
// (among these entries and those after them), the held head is, due at
// its lease's end, only while it holds that lease. false: a condition
// failed (the head's holder finished or re-leased it, an entry went):
// the shard must be read again.
func (d *Dispatcher) coverHeld(ctx context.Context, sp sparseIndex, shard string, ds []platform.Delivery, leases []int64, indexed []bool) (bool, error) {
	now := d.now()
	head, lease, headIndexed := ds[0], leases[0], indexed[0]
	for {
		for i := 1; i < len(ds); i++ {
			if indexed[i] || scheduled(ds[i], now) {
				continue
			}
			return sp.IndexEntry(ctx, ds[i], now, 0)
		}
		if len(ds) < batch {
			break
		}
		var err error
		if ds, leases, indexed, err = sp.PendingIndexed(ctx, shard, ds[len(ds)-1].ID, batch); err != nil {
			return false, err
		}
		ds = append([]platform.Delivery{{}}, ds...) // ds[0] stands for what was read before
		leases, indexed = append([]int64{0}, leases...), append([]bool{true}, indexed...)
	}
	if headIndexed {
		return true, nil // the sweep finds it once its lease has run out
	}
	ok, err := sp.IndexEntry(ctx, head, time.UnixMilli(lease), lease)
	if err == nil && !ok {
		// Its holder finished or re-leased it: read again.
		return false, nil
	}
	return ok, err
}

// cover makes sure the first pending entry of shard is in the index (or
// covered by coverHeld when another invocation holds it): for a shard a
// pass leaves undone (a store error, the invocation's time). Entries
// scheduled for later are indexed already and hold nothing back; a retry
// in its backoff is indexed (RetryDelivery).
func (d *Dispatcher) cover(ctx context.Context, sp sparseIndex, shard string) error {
	if ctx.Err() != nil {
		// The invocation's time is out: a few seconds of Lambda's are
		// left for this (DispatchReserve keeps more than that).
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	for range rereads {
		var (
			ds      []platform.Delivery
			leases  []int64
			indexed []bool
			err     error
			i       int
			after   string
		)
		now := d.now()
		for {
			if ds, leases, indexed, err = sp.PendingIndexed(ctx, shard, after, batch); err != nil {
				return err
			}
			for i = 0; i < len(ds) && scheduled(ds[i], now); i++ {
			}
			if i < len(ds) {
				break
			}
			if len(ds) < batch {
				return nil // nothing pending but what is scheduled (indexed)
			}
			after = ds[len(ds)-1].ID // a page of scheduled entries: read on
		}
		ok := true
		switch {
		case leases[i] > now.UnixMilli():
			ok, err = d.coverHeld(ctx, sp, shard, ds[i:], leases[i:], indexed[i:])
		case indexed[i]: // a retry, or a head a pass met held: the sweep finds it
		default:
			ok, err = sp.IndexEntry(ctx, ds[i], now, 0)
		}
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("dispatch: shard %s: its head changed hands %d times while covering it", shard, rereads)
}

// CoverShards covers each shard named (cover): for a stream batch an
// invocation has no time left to work. Over a store that keeps every
// entry in the index, nothing to do.
func (d *Dispatcher) CoverShards(ctx context.Context, shards []string) error {
	d.init()
	sp := d.sparse()
	if sp == nil {
		return nil
	}
	var errs []error
	for _, sh := range shards {
		if err := d.cover(ctx, sp, sh); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
