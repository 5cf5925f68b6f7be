package localdynamo

import (
	"bytes"
	"encoding/base64"
	"math"
	"sync"

	"github.com/truora/minidyn/types"
)

// Capacity units, counted as DynamoDB bills them (on demand, standard
// table class), so that tests and the capacity model (scripts/capacity)
// can see what a load costs and which partition key it heats:
//
//   - a write is ceil(size/1 KB) write units, size being the larger of the
//     item before and after (a delete: the deleted item; nothing there: 1);
//     a write whose condition fails still costs the existing item's size
//     (at least 1);
//   - each global or local secondary index an item is in, or leaves, takes
//     its own writes: a new entry one write of its projected size (plus
//     100 bytes of index overhead), a removed one a delete, a changed key a
//     delete and a put, an unchanged key a write when the projection
//     changed;
//   - a transaction doubles the units of its base-table items (writes and
//     condition checks); index writes are counted once;
//   - a read is ceil(size/4 KB) read units per item (GetItem, BatchGetItem,
//     at least 1), a Query or Scan page the bytes it read rounded up to
//     4 KB once (at least 1); eventually consistent reads cost half,
//     transactional reads twice.
//
// Counting is off by default (a long-running server would keep one entry
// per partition key it ever saw): CountUnits turns it on.

// Partition names one partition key: of the base table (Index "") or of
// one of its indexes. Key is the key's value as text (a number's digits, a
// binary value in base64); Scan pages are counted under Key "(scan)".
type Partition struct {
	Table, Index, Key string
}

// Units are capacity units consumed.
type Units struct {
	Read, Write float64
}

func (u *Units) add(v Units) { u.Read += v.Read; u.Write += v.Write }

// Usage is what a server counted since CountUnits: by partition key and by
// operation (the API's name: PutItem, TransactWriteItems, Query...).
type Usage struct {
	Partitions map[Partition]Units
	Operations map[string]Units
}

// Total is the sum over every operation.
func (u Usage) Total() Units {
	var t Units
	for _, v := range u.Operations {
		t.add(v)
	}
	return t
}

// meter accumulates Usage while counting is on.
type meter struct {
	mu    sync.Mutex
	on    bool
	usage Usage
}

// CountUnits starts counting capacity units (from zero) or stops it.
func (s *Server) CountUnits(on bool) {
	s.units.mu.Lock()
	defer s.units.mu.Unlock()
	s.units.on = on
	s.units.usage = Usage{Partitions: map[Partition]Units{}, Operations: map[string]Units{}}
}

// Usage returns a copy of what was counted since CountUnits(true).
func (s *Server) Usage() Usage {
	s.units.mu.Lock()
	defer s.units.mu.Unlock()
	out := Usage{Partitions: make(map[Partition]Units, len(s.units.usage.Partitions)), Operations: make(map[string]Units, len(s.units.usage.Operations))}
	for k, v := range s.units.usage.Partitions {
		out.Partitions[k] = v
	}
	for k, v := range s.units.usage.Operations {
		out.Operations[k] = v
	}
	return out
}

// charge is one request's units, gathered before they are added at once.
type charge struct {
	parts map[Partition]Units
	total Units
}

func (c *charge) add(p Partition, u Units) {
	if c.parts == nil {
		c.parts = map[Partition]Units{}
	}
	v := c.parts[p]
	v.add(u)
	c.parts[p] = v
	c.total.add(u)
}

func (m *meter) counting() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.on
}

func (m *meter) record(op string, c *charge) {
	if c == nil || c.parts == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.on {
		return
	}
	for p, u := range c.parts {
		v := m.usage.Partitions[p]
		v.add(u)
		m.usage.Partitions[p] = v
	}
	v := m.usage.Operations[op]
	v.add(c.total)
	m.usage.Operations[op] = v
}

const (
	writeUnitBytes = 1024
	readUnitBytes  = 4096
	// indexOverhead is what DynamoDB adds to an index entry's size.
	indexOverhead = 100
)

func unitsOf(size, per int) float64 {
	return math.Max(1, math.Ceil(float64(size)/float64(per)))
}

// keyText is a key value as text, for Partition.Key.
func keyText(v *types.Item) string {
	switch {
	case v == nil:
		return ""
	case v.S != nil:
		return *v.S
	case v.N != nil:
		return *v.N
	case v.B != nil:
		return base64.StdEncoding.EncodeToString(v.B)
	}
	return ""
}

// chargeWrite adds to c the units of one write of the item keyed key from
// old to nw (nil for none) in table t, the base table's units multiplied by
// factor (2 in a transaction). failed: the condition failed (or it was a
// condition check), nothing was written.
func (t *tableDef) chargeWrite(c *charge, key, old, nw item, factor float64, failed bool) {
	size := itemSize(old)
	if !failed {
		size = max(size, itemSize(nw))
	}
	c.add(Partition{Table: t.Name, Key: keyText(key[t.Hash])}, Units{Write: factor * unitsOf(size, writeUnitBytes)})
	if failed {
		return
	}
	for _, ix := range t.Indexes {
		oldIn := old != nil && old[ix.Hash] != nil && (ix.Range == "" || old[ix.Range] != nil)
		newIn := nw != nil && nw[ix.Hash] != nil && (ix.Range == "" || nw[ix.Range] != nil)
		var oldP, newP item
		if oldIn {
			oldP = t.project(ix, old)
		}
		if newIn {
			newP = t.project(ix, nw)
		}
		size := func(it item) float64 { return unitsOf(itemSize(it)+indexOverhead, writeUnitBytes) }
		part := func(it item) Partition { return Partition{Table: t.Name, Index: ix.Name, Key: keyText(it[ix.Hash])} }
		switch {
		case oldIn && newIn && sameKey(old, nw, ix):
			if !bytes.Equal(appendItemJSON(nil, oldP), appendItemJSON(nil, newP)) {
				c.add(part(nw), Units{Write: max(size(oldP), size(newP))})
			}
		default:
			if oldIn {
				c.add(part(old), Units{Write: size(oldP)})
			}
			if newIn {
				c.add(part(nw), Units{Write: size(newP)})
			}
		}
	}
}

func sameKey(a, b item, ix *indexDef) bool {
	eq := func(name string) bool {
		if name == "" {
			return true
		}
		return bytes.Equal(appendValueJSON(nil, a[name]), appendValueJSON(nil, b[name]))
	}
	return eq(ix.Hash) && eq(ix.Range)
}

// chargeRead adds the units of reading size bytes from partition p.
func chargeRead(c *charge, p Partition, size int, consistent bool, factor float64) {
	u := unitsOf(size, readUnitBytes) * factor
	if !consistent {
		u /= 2
	}
	c.add(p, Units{Read: u})
}
