package localdynamo

import (
	"fmt"

	"github.com/cockroachdb/pebble"
)

// PartitionKeys returns the partition keys of table's items that start with
// prefix (a string hash key), in byte order, each once. It is no DynamoDB
// operation (DynamoDB has no way to list partition keys short of a Scan of
// the whole table): the store is ordered by key, so it reads only the keys
// under prefix and seeks past each partition's items, one seek per
// partition. The local platform uses it at start to find every outbox shard
// (docs/runtime.md, "The sparse sweep index"); it counts no units.
func (s *Server) PartitionKeys(table, prefix string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, fmt.Errorf("localdynamo: closed")
	}
	t, err := s.table(table)
	if err != nil {
		return nil, err
	}
	if t.AttrTypes[t.Hash] != "S" {
		return nil, fmt.Errorf("localdynamo: table %s's hash key is not a string", table)
	}
	base := tablePrefix(prefixData, t.ID)
	// The escaped prefix without its terminator (0x00 0x01): every key
	// whose hash key starts with prefix starts with these bytes.
	esc := appendEscaped(append([]byte(nil), base...), []byte(prefix))
	lower := esc[:len(esc)-2]
	iter, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, err
	}
	defer iter.Close()
	var keys []string
	for ok := iter.First(); ok; {
		k := iter.Key()[len(base):]
		pk, n, err := unescapeKey(k)
		if err != nil {
			return nil, err
		}
		keys = append(keys, string(pk))
		// Past this partition: its items all start with base+escaped pk
		// and its terminator 0x00 0x01.
		next := append([]byte(nil), iter.Key()[:len(base)+n]...)
		next[len(next)-1]++ // 0x00 0x01 -> 0x00 0x02
		ok = iter.SeekGE(next)
	}
	return keys, iter.Error()
}

// unescapeKey decodes the escaped string at the start of b (appendEscaped)
// and returns it with the length of its encoding, terminator included.
func unescapeKey(b []byte) ([]byte, int, error) {
	var out []byte
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		switch b[i+1] {
		case 0xFF:
			out = append(out, 0)
			i++
		case 1:
			return out, i + 2, nil
		default:
			return nil, 0, fmt.Errorf("localdynamo: a malformed key")
		}
	}
	return nil, 0, fmt.Errorf("localdynamo: a key without its terminator")
}
