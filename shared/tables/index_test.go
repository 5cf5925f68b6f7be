package tables

import (
	"math"
	"math/rand"
	"sort"
	"strings"
	"testing"
)

// TestIndexKeyOrder: index keys sort as their values (numbers as numbers,
// strings byte-wise), so that ranges of keys are ranges of values; equal
// values have equal keys (-0 and 0); a string cut in its key keeps the
// order weakly (never reversed).
func TestIndexKeyOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	nums := []float64{0, math.Copysign(0, -1), 1, -1, 0.5, -0.5, 1e300, -1e300, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, math.MaxFloat64, -math.MaxFloat64, 3, 3.0000001, 1 << 53}
	for i := 0; i < 500; i++ {
		nums = append(nums, (r.Float64()-0.5)*math.Pow(10, float64(r.Intn(40)-20)))
	}
	for _, a := range nums {
		for _, b := range nums[:40] {
			ka, _ := indexKey(a)
			kb, _ := indexKey(b)
			if (a < b) != (ka < kb) || (a == b) != (ka == kb) {
				t.Fatalf("numbers %v, %v: keys %q, %q", a, b, ka, kb)
			}
		}
	}
	strs := []string{"", "a", "ab", "abc", "b", "é", "Z", "a b", strings.Repeat("x", 2000), strings.Repeat("x", 2000) + "y"}
	for i := 0; i < 300; i++ {
		b := make([]rune, r.Intn(6))
		for j := range b {
			b[j] = rune(r.Intn(0x300) + 1)
		}
		strs = append(strs, string(b))
	}
	for _, a := range strs {
		for _, b := range strs {
			ka, _ := indexKey(a)
			kb, _ := indexKey(b)
			if a < b && ka > kb {
				t.Fatalf("strings %q < %q but keys %q > %q", a, b, ka, kb)
			}
			if len(a) <= maxIndexString && len(b) <= maxIndexString && (a < b) != (ka < kb) {
				t.Fatalf("strings %q, %q: keys %q, %q", a, b, ka, kb)
			}
		}
	}
	if k, _ := indexKey(strings.Repeat("é", 600)); len(k) > maxIndexString+1 || !strings.HasPrefix(k, "sé") {
		t.Fatalf("cut key: %d bytes", len(k))
	}
	var keys []string
	for _, v := range []any{false, true, 1.0, "x"} {
		k, _ := indexKey(v)
		keys = append(keys, k)
	}
	if !sort.StringsAreSorted(keys) {
		t.Fatalf("kinds: %v", keys)
	}
	for _, v := range []any{nil, map[string]any{}, []any{1.0}} {
		if _, ok := indexKey(v); ok {
			t.Fatalf("%v has an index key", v)
		}
	}
}
