package localdynamo

import (
	"bytes"
	"context"
	"encoding/base64"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

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
	// TxSurcharge is the write units a transaction's doubling added to
	// its base-table items: Total().Write - TxSurcharge is the write
	// units at 1x (what each item and index entry written takes).
	TxSurcharge float64
	// Calls counts the requests of each operation that took units.
	Calls map[string]int
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
	out := Usage{Partitions: make(map[Partition]Units, len(s.units.usage.Partitions)), Operations: make(map[string]Units, len(s.units.usage.Operations)),
		TxSurcharge: s.units.usage.TxSurcharge, Calls: maps.Clone(s.units.usage.Calls)}
	for k, v := range s.units.usage.Partitions {
		out.Partitions[k] = v
	}
	for k, v := range s.units.usage.Operations {
		out.Operations[k] = v
	}
	return out
}

// charge is one request's units, gathered before they are added to the
// meter at once and answered as the request's ConsumedCapacity: the count
// and the answer come from the same charge. A nil charge (neither counting
// nor asked) takes nothing.
type charge struct {
	parts map[Partition]Units
	total Units
	want  string // ReturnConsumedCapacity: "TOTAL", "INDEXES" or "" (none)
	// surcharge: the transaction's doubling of its base-table units.
	surcharge float64
}

// newCharge returns the charge of one request asking ask (its
// ReturnConsumedCapacity), nil when nobody needs its units.
func (s *Server) newCharge(ask string) (*charge, error) {
	switch ask {
	case "", "NONE":
		ask = ""
	case "TOTAL", "INDEXES":
	default:
		return nil, invalid("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", ask)
	}
	if ask == "" && !s.units.counting() {
		return nil, nil
	}
	return &charge{want: ask}, nil
}

func (c *charge) add(p Partition, u Units) {
	if c == nil {
		return
	}
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
	m.usage.TxSurcharge += c.surcharge
	if m.usage.Calls == nil {
		m.usage.Calls = map[string]int{}
	}
	m.usage.Calls[op]++
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
	if c == nil {
		return
	}
	size := itemSize(old)
	if !failed {
		size = max(size, itemSize(nw))
	}
	c.add(Partition{Table: t.Name, Key: keyText(key[t.Hash])}, Units{Write: factor * unitsOf(size, writeUnitBytes)})
	c.surcharge += (factor - 1) * unitsOf(size, writeUnitBytes)
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
	if c == nil {
		return
	}
	u := unitsOf(size, readUnitBytes) * factor
	if !consistent {
		u /= 2
	}
	c.add(p, Units{Read: u})
}

// capacity is DynamoDB's ConsumedCapacity of one table: the units of the
// whole request on it, and with INDEXES those of the table and of each
// index apart.
type capacity struct {
	TableName              string
	CapacityUnits          float64
	ReadCapacityUnits      *float64                `json:",omitempty"`
	WriteCapacityUnits     *float64                `json:",omitempty"`
	Table                  *capacityPart           `json:",omitempty"`
	GlobalSecondaryIndexes map[string]capacityPart `json:",omitempty"`
	LocalSecondaryIndexes  map[string]capacityPart `json:",omitempty"`
}

// capacityPart is the units of a table or an index alone.
type capacityPart struct {
	CapacityUnits      float64
	ReadCapacityUnits  *float64 `json:",omitempty"`
	WriteCapacityUnits *float64 `json:",omitempty"`
}

// part gives units as DynamoDB does: CapacityUnits, and the read or write
// units (both when there are both; a write operation's reads are none).
func part(u Units, write bool) capacityPart {
	p := capacityPart{CapacityUnits: u.Read + u.Write}
	if u.Read > 0 || !write {
		p.ReadCapacityUnits = &u.Read
	}
	if u.Write > 0 || write {
		p.WriteCapacityUnits = &u.Write
	}
	return p
}

// consumed is the ConsumedCapacity of a charge, one per table in name
// order (nil when it was not asked for). write: the operation writes.
func (s *Server) consumed(c *charge, write bool) []capacity {
	if c == nil || c.want == "" {
		return nil
	}
	type sums struct {
		total, table Units
		gsi, lsi     map[string]Units
	}
	byTable := map[string]*sums{}
	for p, u := range c.parts {
		t := byTable[p.Table]
		if t == nil {
			t = &sums{gsi: map[string]Units{}, lsi: map[string]Units{}}
			byTable[p.Table] = t
		}
		t.total.add(u)
		if p.Index == "" {
			t.table.add(u)
			continue
		}
		into := t.gsi
		if td := s.tables[p.Table]; td != nil {
			if ix := td.index(p.Index); ix != nil && ix.Local {
				into = t.lsi
			}
		}
		v := into[p.Index]
		v.add(u)
		into[p.Index] = v
	}
	out := make([]capacity, 0, len(byTable))
	for _, name := range slices.Sorted(maps.Keys(byTable)) {
		t := byTable[name]
		all := part(t.total, write)
		cc := capacity{TableName: name, CapacityUnits: all.CapacityUnits, ReadCapacityUnits: all.ReadCapacityUnits, WriteCapacityUnits: all.WriteCapacityUnits}
		if c.want == "INDEXES" {
			tp := part(t.table, write)
			cc.Table = &tp
			for ix, u := range t.gsi {
				if cc.GlobalSecondaryIndexes == nil {
					cc.GlobalSecondaryIndexes = map[string]capacityPart{}
				}
				cc.GlobalSecondaryIndexes[ix] = part(u, write)
			}
			for ix, u := range t.lsi {
				if cc.LocalSecondaryIndexes == nil {
					cc.LocalSecondaryIndexes = map[string]capacityPart{}
				}
				cc.LocalSecondaryIndexes[ix] = part(u, write)
			}
		}
		out = append(out, cc)
	}
	return out
}

// answer adds a charge's ConsumedCapacity to a response out (a map, or
// json.RawMessage "{}"): one object for a single-table operation, a list
// for the batch and transaction operations (list).
func (s *Server) answer(out any, c *charge, write, list bool) any {
	cc := s.consumed(c, write)
	if cc == nil {
		return out
	}
	m, ok := out.(map[string]any)
	if !ok {
		m = map[string]any{}
	}
	if list {
		m["ConsumedCapacity"] = cc
	} else if len(cc) > 0 {
		m["ConsumedCapacity"] = cc[0]
	}
	return m
}

// Settle returns once no operation is under way (or ctx ends). A write is
// visible to readers (and to PartitionKeys) from its commit, a moment
// before its units are recorded: a caller that saw the write's effect and
// then reads Usage settles first, so that the write is counted.
func (s *Server) Settle(ctx context.Context) error {
	for s.running.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
