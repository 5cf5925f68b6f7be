package localdynamo

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"time"

	"github.com/truora/minidyn/types"
)

// tableDef is a table's definition as stored under its meta key.
type tableDef struct {
	Name        string
	ID          uint32
	Created     time.Time
	Hash, Range string            // key attribute names (Range may be "")
	AttrTypes   map[string]string // attribute name -> S, N or B
	AttrOrder   []string          // definition order, for descriptions
	BillingMode string
	Read, Write int64 // provisioned throughput, when PROVISIONED
	Indexes     []*indexDef
	TTLAttr     string // TTL attribute when TTL is enabled, else ""
}

// indexDef is a global or local secondary index.
type indexDef struct {
	Name        string
	No          uint16 // key-space number, unique within the table
	Local       bool
	Hash, Range string
	Projection  string   // ALL, KEYS_ONLY or INCLUDE
	NonKey      []string // INCLUDE attributes
	Read, Write int64
}

func (t *tableDef) index(name string) *indexDef {
	for _, ix := range t.Indexes {
		if ix.Name == name {
			return ix
		}
	}
	return nil
}

// keySchema returns the HASH and RANGE attribute names of the table or of
// an index ("" for the table).
func (t *tableDef) keySchema(ix *indexDef) (string, string) {
	if ix == nil {
		return t.Hash, t.Range
	}
	return ix.Hash, ix.Range
}

// dataKey returns the store key of the item with primary key attributes in
// key. With exact, key must hold the key attributes and nothing else (as in
// GetItem's Key).
func (t *tableDef) dataKey(key item, exact bool) ([]byte, error) {
	if exact {
		want := 1
		if t.Range != "" {
			want = 2
		}
		if len(key) != want {
			return nil, fmt.Errorf("The provided key element does not match the schema")
		}
	}
	b := tablePrefix(prefixData, t.ID)
	var err error
	if b, err = t.appendKeyAttr(b, key, t.Hash, true); err != nil {
		return nil, err
	}
	if t.Range != "" {
		if b, err = t.appendKeyAttr(b, key, t.Range, true); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (t *tableDef) appendKeyAttr(b []byte, it item, name string, primary bool) ([]byte, error) {
	v, ok := it[name]
	if !ok {
		if primary {
			return nil, fmt.Errorf("One or more parameter values were invalid: Missing the key %s in the item", name)
		}
		return nil, errNoIndexKey
	}
	typ := t.AttrTypes[name]
	if typeOf(v) != typ {
		if primary {
			return nil, fmt.Errorf("One or more parameter values were invalid: Type mismatch for key %s expected: %s actual: %s", name, typ, typeOf(v))
		}
		return nil, fmt.Errorf("One or more parameter values were invalid: Type mismatch for Index Key %s Expected: %s Actual: %s", name, typ, typeOf(v))
	}
	if (typ == "S" && *v.S == "") || (typ == "B" && len(v.B) == 0) {
		if primary {
			return nil, fmt.Errorf("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", name)
		}
		return nil, fmt.Errorf("One or more parameter values are not valid. A value specified for a secondary index key is not supported. The AttributeValue for a key attribute cannot contain an empty string value. IndexName: %s, IndexKey: %s", "", name)
	}
	return appendKeyValue(b, v, typ)
}

var errNoIndexKey = fmt.Errorf("item has no key for this index")

// keyAttrs returns the primary key attributes of an item.
func (t *tableDef) keyAttrs(it item) item {
	k := item{t.Hash: it[t.Hash]}
	if t.Range != "" {
		k[t.Range] = it[t.Range]
	}
	return k
}

// indexKey returns the store key of the entry of it in ix, or nil when the
// item lacks the index's key attributes (it is then not in the index).
func (t *tableDef) indexKey(ix *indexDef, it item, dataKey []byte) ([]byte, error) {
	b := tablePrefix(prefixIndex, t.ID)
	b = binary.BigEndian.AppendUint16(b, ix.No)
	var err error
	if b, err = t.appendKeyAttr(b, it, ix.Hash, false); err != nil {
		return nil, err
	}
	if ix.Range != "" {
		if b, err = t.appendKeyAttr(b, it, ix.Range, false); err != nil {
			return nil, err
		}
	}
	return append(b, dataKey[5:]...), nil
}

// entry is one index or TTL entry of an item: its store key and value.
// An index entry holds the item as the index projects it (so a Query of
// an index reads one range, as DynamoDB's projections are stored copies);
// a TTL entry holds the item's data key.
type entry struct{ key, value []byte }

// entries returns the index and TTL entries an item has. It fails when an
// index key attribute has the wrong type.
func (t *tableDef) entries(it item, dataKey []byte) ([]entry, error) {
	var out []entry
	for _, ix := range t.Indexes {
		k, err := t.indexKey(ix, it, dataKey)
		if err == errNoIndexKey {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s IndexName: %s", err.Error(), ix.Name)
		}
		out = append(out, entry{k, appendItemJSON(nil, t.project(ix, it))})
	}
	if exp, ok := t.expiry(it); ok {
		out = append(out, entry{t.ttlKey(exp, dataKey), dataKey})
	}
	return out, nil
}

// expiry returns the TTL of an item in epoch seconds, if TTL is enabled and
// the item has a numeric TTL attribute.
func (t *tableDef) expiry(it item) (int64, bool) {
	if t.TTLAttr == "" || it == nil {
		return 0, false
	}
	v := it[t.TTLAttr]
	if v == nil || v.N == nil {
		return 0, false
	}
	f, err := strconv.ParseFloat(*v.N, 64)
	if err != nil || f < 0 || f > 1<<62 {
		return 0, false
	}
	return int64(f), true
}

func (t *tableDef) ttlKey(exp int64, dataKey []byte) []byte {
	b := tablePrefix(prefixTTL, t.ID)
	b = binary.BigEndian.AppendUint64(b, uint64(exp))
	return append(b, dataKey[5:]...)
}

// project applies an index's projection to an item read through it.
func (t *tableDef) project(ix *indexDef, it item) item {
	if ix == nil || ix.Projection == "ALL" || ix.Projection == "" {
		return it
	}
	out := item{}
	for _, k := range []string{t.Hash, t.Range, ix.Hash, ix.Range} {
		if k != "" && it[k] != nil {
			out[k] = it[k]
		}
	}
	if ix.Projection == "INCLUDE" {
		for _, k := range ix.NonKey {
			if it[k] != nil {
				out[k] = it[k]
			}
		}
	}
	return out
}

// lastKey returns the LastEvaluatedKey of an item read through ix (or the
// table): the table's key attributes and the index's.
func (t *tableDef) lastKey(ix *indexDef, it item) item {
	k := t.keyAttrs(it)
	if ix != nil {
		k[ix.Hash] = it[ix.Hash]
		if ix.Range != "" {
			k[ix.Range] = it[ix.Range]
		}
	}
	return k
}

// checkItem validates an item to be stored: key attributes, index key
// types, size.
func (t *tableDef) checkItem(it item) error {
	if size := itemSize(it); size > maxItemSize {
		return fmt.Errorf("Item size has exceeded the maximum allowed size")
	}
	return nil
}

func typesString(s string) *types.Item { return &types.Item{S: &s} }
