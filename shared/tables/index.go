package tables

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/botforge/platform/shared/platform"
)

// The column index (docs/tables.md, "Indexed filters"): every non-null
// value of a string, number or boolean column of a row is an index entry
// written in the transaction that writes the row. An entry's key encodes
// the value so that string order is value order within a kind:
//
//	b0, b1                 false, true
//	n<16 hex digits>       a number: its IEEE 754 bits, sign-flipped so
//	                       that negative numbers sort first
//	s<string>              a string, cut to maxIndexString bytes
//
// The store appends "\x00" and the row id, so a value's entries are in
// id order and one value's entries are those beginning with key+"\x00".
// Keys are monotonic in the value (a cut string may share its key with
// longer ones): the store returns candidates, and the filter is evaluated
// on every candidate row, so an index answer is never wrong, only at worst
// larger than the matches.

// maxIndexString bounds the bytes of a string kept in an index key
// (DynamoDB sort keys hold at most 1024 bytes).
const maxIndexString = 900

// maxIndexIn is the most values of a $in that the index serves (each is
// one Query); a larger $in reads the table.
const maxIndexIn = 100

// Indexed reports whether a column's values are index entries.
func (c *Column) Indexed() bool {
	switch c.Type {
	case TypeString, TypeNumber, TypeBoolean:
		return true
	}
	return false
}

// IndexedColumns counts the indexed columns: the most index entries a
// row can have.
func (s *Schema) IndexedColumns() int {
	n := 0
	for _, c := range s.Columns {
		if c.Indexed() {
			n++
		}
	}
	return n
}

// IndexKeys returns the index entries of a stored row: one per indexed
// column holding a non-null value, in column id order.
func (s *Schema) IndexKeys(r *platform.TableRow) []platform.TableIndexKey {
	var out []platform.TableIndexKey
	for id, raw := range r.Values {
		c := s.byID[id]
		if c == nil || !c.Indexed() {
			continue
		}
		if k, ok := indexKey(decodeValue(raw)); ok {
			out = append(out, platform.TableIndexKey{Col: id, Key: k})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Col < out[j].Col })
	return out
}

// indexKey encodes a scalar value; false for null and non-scalars.
func indexKey(v any) (string, bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return "b1", true
		}
		return "b0", true
	case float64:
		if x == 0 {
			x = 0 // -0 and 0 are one value
		}
		b := math.Float64bits(x)
		if b>>63 == 1 {
			b = ^b
		} else {
			b |= 1 << 63
		}
		return fmt.Sprintf("n%016x", b), true
	case string:
		if len(x) > maxIndexString {
			i := maxIndexString
			for i > 0 && !utf8.RuneStart(x[i]) {
				i--
			}
			x = x[:i]
		}
		return "s" + x, true
	}
	return "", false
}

// Lookup returns the index lookup of the rows whose value of the column
// equals a stored value (canonical JSON); false when the index does not
// bound it (null, not a scalar, a string holding NUL).
func (c *Column) Lookup(raw json.RawMessage) (platform.TableIndexLookup, bool) {
	k, ok := servable(decodeValue(raw))
	if !ok || !c.Indexed() {
		return platform.TableIndexLookup{}, false
	}
	return platform.TableIndexLookup{Col: c.ID, Prefixes: []string{k + "\x00"}}, true
}

// Index returns how the store can find candidate rows of the filter
// through a column index, or nil when no top-level condition can be served
// by one (the find then reads the table). Preferred: an equality, then
// the smallest $in, then a range bounded on both sides, then one side.
func (f *Filter) Index() *platform.TableIndexLookup {
	if f == nil {
		return nil
	}
	return f.index
}

// planIndex picks the index lookup of the filter's top-level conditions.
func (f *Filter) planIndex() {
	conds := []cond{f.root}
	if and, ok := f.root.(andCond); ok {
		conds = and
	}
	best, bestRank := (*platform.TableIndexLookup)(nil), 0
	for _, c := range conds {
		fc, ok := c.(fieldCond)
		if !ok || fc.f.col == nil || len(fc.f.sub) > 0 || fc.f.date || !fc.f.col.Indexed() {
			continue
		}
		lk, rank := fc.lookup()
		if lk != nil && (best == nil || rank < bestRank) {
			best, bestRank = lk, rank
		}
	}
	f.index = best
}

// planIDRange bounds the ids the filter's top-level conditions on id
// allow ({"id": {"$gt": 1000}}: an exporter's keyset page), so that a find
// in id order reads the rows from there instead of from the table's start.
func (f *Filter) planIDRange() {
	conds := []cond{f.root}
	if and, ok := f.root.(andCond); ok {
		conds = and
	}
	f.idOnly = true
	for _, c := range conds {
		fc, ok := c.(fieldCond)
		if !ok || fc.f.system != "id" || len(fc.f.sub) > 0 {
			f.idOnly = false
			continue
		}
		for _, o := range fc.ops {
			v, isNum := o.val.(float64)
			if !isNum || v != math.Trunc(v) || v < 0 || v > float64(platform.MaxTableRowID) {
				// Not bounded here: the filter still decides each row, and
				// the page may not stop at its length.
				f.idOnly = false
				continue
			}
			n := int64(v)
			after, before := int64(0), int64(0)
			switch o.name {
			case "$gt":
				after = n
			case "$gte":
				after = n - 1
			case "$lt":
				before = n
			case "$lte":
				before = n + 1
			case "$eq":
				after, before = n-1, n+1
			default:
				f.idOnly = false
				continue
			}
			if after > f.idAfter {
				f.idAfter = after
			}
			if before > 0 && (f.idBefore == 0 || before < f.idBefore) {
				f.idBefore = before
			}
		}
	}
	if f.idAfter < 0 {
		f.idAfter = 0
	}
}

// servable reports whether an operand has an index key that bounds its
// matches: a scalar, and a string without NUL (the key separator).
func servable(v any) (string, bool) {
	if s, ok := v.(string); ok && strings.IndexByte(s, 0) >= 0 {
		return "", false
	}
	return indexKey(v)
}

// lookup returns the index lookup of a condition on one indexed column and
// its rank (lower is more selective), or nil.
func (fc fieldCond) lookup() (*platform.TableIndexLookup, int) {
	col := fc.f.col.ID
	var lo, hi string
	var best *platform.TableIndexLookup
	bestRank := 0
	take := func(lk *platform.TableIndexLookup, rank int) {
		if best == nil || rank < bestRank {
			best, bestRank = lk, rank
		}
	}
	for _, o := range fc.ops {
		switch o.name {
		case "$eq":
			if k, ok := servable(o.val); ok {
				take(&platform.TableIndexLookup{Col: col, Prefixes: []string{k + "\x00"}}, 1)
			}
		case "$in":
			if len(o.vals) > maxIndexIn {
				continue
			}
			var ps []string
			seen := map[string]bool{}
			for _, v := range o.vals {
				k, ok := servable(v)
				if !ok {
					ps = nil
					break
				}
				if !seen[k] {
					seen[k] = true
					ps = append(ps, k+"\x00")
				}
			}
			if ps != nil {
				sort.Strings(ps)
				take(&platform.TableIndexLookup{Col: col, Prefixes: ps}, 1+len(ps))
			}
		case "$gt", "$gte":
			if k, ok := servable(o.val); ok && (lo == "" || k[0] == lo[0] && k > lo) {
				lo = k
			}
		case "$lt", "$lte":
			if k, ok := servable(o.val); ok && (hi == "" || k[0] == hi[0] && k < hi) {
				hi = k
			}
		}
	}
	if best != nil || (lo == "" && hi == "") {
		return best, bestRank
	}
	// A range: entries of the bound's kind from lo to hi, both inclusive
	// (an entry is key+"\x00"+id, and key+"\x01" is above all of them).
	// Bounds of two kinds match no row; the lower one is kept (a superset).
	switch {
	case lo != "" && hi != "" && lo[0] == hi[0]:
		return &platform.TableIndexLookup{Col: col, Lo: lo, Hi: hi + "\x01"}, maxIndexIn + 2
	case lo != "":
		return &platform.TableIndexLookup{Col: col, Lo: lo, Hi: string(rune(lo[0] + 1))}, maxIndexIn + 3
	}
	return &platform.TableIndexLookup{Col: col, Lo: hi[:1], Hi: hi + "\x01"}, maxIndexIn + 3
}
