package localdynamo

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/truora/minidyn/types"
)

// TestDecodeStoredAsJSON: decodeStored gives json.Unmarshal's item for
// random items as the store writes them (every type, nested, strings
// with escapes, control characters, non-ASCII, invalid UTF-8 replaced),
// and for JSON of other shapes (whitespace, escapes appendString does not
// write, surrogate pairs, two types in a value, null, lowercase types),
// which it leaves to encoding/json; and it takes the store's shape itself
// (its allocations are a fraction of encoding/json's).
func TestDecodeStoredAsJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "é", "\"", "\\", "\n", "\t", "\r", "\x01", "\x1f", "<&>", "\u2028", "😀", "\xff", "\xe2\x82", "/", " ", "x\u0000y"}
	str := func() string {
		var b strings.Builder
		for range rng.IntN(6) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		return b.String()
	}
	var value func(depth int) *types.Item
	value = func(depth int) *types.Item {
		s := str()
		switch k := rng.IntN(10); {
		case k == 0:
			return &types.Item{S: &s}
		case k == 1:
			n := "-12.5e3"
			return &types.Item{N: &n}
		case k == 2:
			return &types.Item{B: []byte(s)}
		case k == 3:
			f := rng.IntN(2) == 0
			return &types.Item{BOOL: &f}
		case k == 4:
			f := true
			return &types.Item{NULL: &f}
		case k == 5:
			s2 := s + "2"
			return &types.Item{SS: []*string{&s, &s2}}
		case k == 6:
			a, b := "1", "2.5"
			return &types.Item{NS: []*string{&a, &b}}
		case k == 7:
			return &types.Item{BS: [][]byte{[]byte(s), {}, {0, 255}}}
		case k == 8 && depth < 3:
			l := []*types.Item{}
			for range rng.IntN(3) {
				l = append(l, value(depth+1))
			}
			return &types.Item{L: l}
		case depth < 3:
			m := item{}
			for range rng.IntN(3) {
				m[str()] = value(depth + 1)
			}
			return &types.Item{M: m}
		}
		return &types.Item{S: &s}
	}
	check := func(raw []byte, fast bool) {
		t.Helper()
		var want item
		wantErr := json.Unmarshal(raw, &want)
		got, err := decodeStored(raw)
		if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodeStored %v (%v), json %v (%v)", raw, dump(got), err, dump(want), wantErr)
		}
		p := storedParser{b: raw}
		if _, ok := p.item(); fast && (!ok || p.i != len(raw)) {
			t.Fatalf("%q: not taken by the store's reader", raw)
		}
	}
	for range 3000 {
		it := item{}
		for range 1 + rng.IntN(6) {
			it[str()] = value(0)
		}
		check(appendItemJSON(nil, it), true)
	}
	for _, raw := range []string{
		`{}`, ` {"a":{"S":"x"}}`, `{"a": {"S":"x"}}`, `{"a":{"S":"\ud83d\ude00"}}`, `{"a":{"S":"\ud83d"}}`, `{"a":{"S":"x","N":"1"}}`,
		`{"a":null}`, `{"a":{"s":"x"}}`, `{"a":{"B":null}}`, `{"a":{"BOOL":1}}`, `{"a":{"S":"x"},"a":{"N":"2"}}`, `{"a":{"SS":[]}}`,
		`{"a":{"L":[{"S":"x"},null]}}`, `{"a":{"S":"\x01"}}`, "{\"a\":{\"S\":\"\xff\"}}", `{"a":{"B":"!!"}}`, `{"a":{"M":{}}}`, `{"a":{"S":"x"}`, `[]`, ``,
		`{"a":{"S":"\u00e9\/\b\f"}}`, `{"a":{"X":"x"}}`,
	} {
		check([]byte(raw), false)
	}
}
