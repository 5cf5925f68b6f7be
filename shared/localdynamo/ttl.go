package localdynamo

import (
	"encoding/binary"
	"time"

	"github.com/cockroachdb/pebble"
)

// expireItems deletes the items whose TTL attribute is in the past, as
// DynamoDB's TTL does (DynamoDB takes up to a few days; this store takes up
// to one TTLInterval). Items whose TTL lies more than five years in the past
// are left alone, as DynamoDB does. The platform never relies on the delete
// for correctness: it checks expiry when it reads.
func (s *Server) expireItems(now time.Time) int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return 0
	}
	if s.checkSpace() != nil {
		return 0 // deleting writes too; it waits for space like any write
	}
	deleted := 0
	for _, t := range s.tables {
		if t.TTLAttr == "" {
			continue
		}
		deleted += s.expireTable(t, now)
	}
	return deleted
}

// expireTable deletes up to 10,000 expired items of t per pass, in batches.
func (s *Server) expireTable(t *tableDef, now time.Time) int {
	p := tablePrefix(prefixTTL, t.ID)
	from := binary.BigEndian.AppendUint64(append([]byte(nil), p...), uint64(max(0, now.AddDate(-5, 0, 0).Unix())))
	to := binary.BigEndian.AppendUint64(append([]byte(nil), p...), uint64(now.Unix()))
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: from, UpperBound: to})
	if err != nil {
		return 0
	}
	var keys [][]byte
	for ok := iter.First(); ok && len(keys) < 10000; ok = iter.Next() {
		keys = append(keys, append([]byte(nil), iter.Value()...))
	}
	_ = iter.Close()
	deleted := 0
	for len(keys) > 0 {
		n := min(len(keys), 25)
		deleted += s.expireBatch(t, keys[:n], now)
		keys = keys[n:]
	}
	return deleted
}

// expireBatch deletes the items at keys that are still expired (under their
// locks: an item updated since with a later TTL stays).
func (s *Server) expireBatch(t *tableDef, keys [][]byte, now time.Time) int {
	unlock := s.lockItems(keys...)
	defer unlock()
	b := s.db.NewBatch()
	defer b.Close()
	var dead int64
	var cs []Change
	n := 0
	for _, dk := range keys {
		it, err := read(s.db, dk)
		if err != nil || it == nil {
			continue
		}
		exp, ok := t.expiry(it)
		if !ok || exp >= now.Unix() {
			continue
		}
		d, err := t.stage(b, dk, it, nil)
		if err != nil {
			continue
		}
		dead += d
		n++
		if c, ok := t.change(it, nil); ok {
			cs = append(cs, c)
		}
	}
	if n == 0 {
		return 0
	}
	if err := s.commit(b, dead); err != nil {
		s.log.Warn("localdynamo: deleting expired items failed", "err", err)
		return 0
	}
	s.notify(cs)
	return n
}
