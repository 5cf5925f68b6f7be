package localdynamo

import (
	"bytes"
	"slices"
	"sync"

	"github.com/cockroachdb/pebble"
)

// deadRanges remembers key ranges that a forward read found without a live
// key, so that the next read of such a range seeks past them.
//
// Why: Pebble keeps a deleted key as a tombstone until a compaction drops
// it, and an iterator steps over every tombstone between its start and the
// first live key. A partition whose items are written and soon deleted (an
// outbox lane: an entry per delivery, removed once delivered) collects
// thousands of them: each Query of it then walked the whole history (a
// platform profile, 1,500 round trips in one conversation: a quarter of the
// process's CPU in the memtable iterator's Next). DynamoDB bills nothing for
// deleted items, nor does a Query of theirs take longer.
//
// The invariant: no live key lies in a remembered range. Writes keep it:
// every key a batch writes cuts the range holding it short, before the
// batch is visible (so a read whose snapshot holds the key does not skip
// it) and again once it is visible (a range learned meanwhile from an older
// snapshot). A read learns a range from its snapshot only up to the first
// key cut since (gen; nothing when too many cuts or an unreadable write
// came since): the snapshot and the lookup are taken under the lock the
// cuts take. Deletes never make a key live, so they cut nothing they need
// to (they cut harmlessly: a deleted key was live, so in no range).
type deadRanges struct {
	mu     sync.Mutex
	gen    uint64      // moves on with every cut
	ranges []deadRange // disjoint, sorted by lo
	// recent: the last cuts' write sets, by gen: a range learned from an
	// older snapshot ends at the first key written since (on a busy store
	// some write is always under way, mostly elsewhere).
	// (nil: a write that could not be read).
	recent [recentCuts]*writeSet
}

const recentCuts = 64

// deadRange: no live key in [lo, hi).
type deadRange struct{ lo, hi []byte }

// maxDeadRanges bounds the memory the hints take (forgetting one only
// costs a read its walk over the tombstones again).
const maxDeadRanges = 4096

// snapshot takes a snapshot of db and, for a forward read from lo, where
// the read can start instead (nil: at lo), with the generation a range
// learned from this snapshot must still be at.
func (d *deadRanges) snapshot(db *pebble.DB, lo []byte, forward bool) (*pebble.Snapshot, []byte, uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var from []byte
	if forward && lo != nil {
		if i := d.holding(lo); i >= 0 {
			from = d.ranges[i].hi
		}
	}
	return db.NewSnapshot(), from, d.gen
}

// holding is the index of the range holding key k, or -1.
func (d *deadRanges) holding(k []byte) int {
	i, found := slices.BinarySearchFunc(d.ranges, k, func(r deadRange, k []byte) int { return bytes.Compare(r.lo, k) })
	if !found {
		i--
	}
	if i >= 0 && bytes.Compare(k, d.ranges[i].hi) < 0 {
		return i
	}
	return -1
}

// learn records that [lo, hi) held no live key in a snapshot taken at gen.
func (d *deadRanges) learn(lo, hi []byte, gen uint64) {
	if lo == nil || bytes.Compare(lo, hi) >= 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A key written since the snapshot may be live: the range ends there.
	if d.gen-gen >= recentCuts {
		return
	}
	for g := gen + 1; g <= d.gen; g++ {
		ws := d.recent[g%recentCuts]
		if ws == nil {
			return
		}
		i, _ := slices.BinarySearchFunc(ws.keys, lo, bytes.Compare)
		if i < len(ws.keys) && bytes.Compare(ws.keys[i], hi) < 0 {
			hi = ws.keys[i]
		}
	}
	if bytes.Compare(lo, hi) >= 0 {
		return
	}
	// Merge with the ranges it overlaps or touches: [first, last).
	first, _ := slices.BinarySearchFunc(d.ranges, lo, func(r deadRange, k []byte) int { return bytes.Compare(r.lo, k) })
	if first > 0 && bytes.Compare(d.ranges[first-1].hi, lo) >= 0 {
		first--
	}
	last := first
	nr := deadRange{lo: bytes.Clone(lo), hi: bytes.Clone(hi)}
	for ; last < len(d.ranges) && bytes.Compare(d.ranges[last].lo, nr.hi) <= 0; last++ {
		r := d.ranges[last]
		if bytes.Compare(r.lo, nr.lo) < 0 {
			nr.lo = r.lo
		}
		if bytes.Compare(r.hi, nr.hi) > 0 {
			nr.hi = r.hi
		}
	}
	d.ranges = slices.Replace(d.ranges, first, last, nr)
	d.bound(first)
}

// bound forgets ranges beyond maxDeadRanges, the farthest from the one at
// i first (any would do).
func (d *deadRanges) bound(i int) {
	for len(d.ranges) > maxDeadRanges {
		if i < len(d.ranges)/2 {
			d.ranges = d.ranges[:len(d.ranges)-1]
		} else {
			d.ranges = slices.Delete(d.ranges, 0, 1)
			i--
		}
	}
}

// cut takes each key ws writes out of the range holding it (ws nil: a
// write that could not be read forgets them all).
func (d *deadRanges) cut(ws *writeSet) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	d.recent[d.gen%recentCuts] = ws
	if len(d.ranges) == 0 {
		return
	}
	if ws == nil {
		d.ranges = nil
		return
	}
	for _, k := range ws.keys {
		i := d.holding(k)
		if i < 0 {
			continue
		}
		// What follows k stays dead: from its successor (k with a zero
		// byte appended) to the range's end.
		r, next := d.ranges[i], append(bytes.Clone(k), 0)
		var keep []deadRange
		if bytes.Compare(r.lo, k) < 0 {
			keep = append(keep, deadRange{lo: r.lo, hi: bytes.Clone(k)})
		}
		if bytes.Compare(next, r.hi) < 0 {
			keep = append(keep, deadRange{lo: next, hi: r.hi})
		}
		d.ranges = slices.Replace(d.ranges, i, i+1, keep...)
		d.bound(i)
	}
}
