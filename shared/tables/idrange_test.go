package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/botforge/platform/shared/platform"
)

// rangeRows is a RowSource honouring Scan's id bounds, counting reads.
type rangeRows struct {
	memRows
	last Scan
}

func (m *rangeRows) ScanRows(ctx context.Context, sc Scan, fn func(r *platform.TableRow) (bool, error)) error {
	m.last = sc
	n := 0
	return m.memRows.ScanRows(ctx, Scan{Descending: sc.Descending}, func(r *platform.TableRow) (bool, error) {
		if r.ID <= sc.After || (sc.Before > 0 && r.ID >= sc.Before) {
			m.read--
			return true, nil
		}
		if sc.Want > 0 && n >= sc.Want {
			return false, nil
		}
		n++
		return fn(r)
	})
}

// TestFindIDRange: a find in id order whose filter bounds the id (an
// exporter's keyset page, {"id": {"$gt": last}}) reads from there, and
// only the page, however far into the table: pages through a table cost
// what they return.
func TestFindIDRange(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"n":{"type":"number"}}}`)
	src := &rangeRows{}
	for i := int64(1); i <= 5000; i++ {
		src.rows = append(src.rows, row(s, i, fmt.Sprintf(`{"n":%d}`, i%7)))
	}
	cases := []struct {
		filter     string
		desc       bool
		want       string
		after, bef int64
		maxRead    int
	}{
		{`{"id":{"$gt":4000}}`, false, "[4001 4002 4003]", 4000, 0, 4},
		{`{"id":{"$gte":4000,"$lt":4002}}`, false, "[4000 4001]", 3999, 4002, 3},
		{`{"id":{"$lte":10}}`, true, "[10 9 8]", 0, 11, 4},
		{`{"id":4500}`, false, "[4500]", 4499, 4501, 2},
		// Another condition: bounded still, the filter decides each row.
		{`{"id":{"$gt":4000},"n":3}`, false, "[4007 4014 4021]", 4000, 0, 1000},
		// Not an integer: not bounded, still right.
		{`{"id":{"$gt":4999.5}}`, false, "[5000]", 0, 0, 5000},
	}
	for _, c := range cases {
		f, err := ParseFilter(json.RawMessage(c.filter), s)
		if err != nil {
			t.Fatal(err)
		}
		src.read = 0
		res, err := Find(context.Background(), src, s, Query{Filter: f, Limit: 3, Desc: c.desc})
		if err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, r := range res.Rows {
			got = append(got, r["id"].(int64))
		}
		if fmt.Sprint(got) != c.want || src.last.After != c.after || src.last.Before != c.bef {
			t.Fatalf("%s: %v (scan after %d before %d), want %s (after %d before %d)", c.filter, got, src.last.After, src.last.Before, c.want, c.after, c.bef)
		}
	}
	// Reads: a page deep into the table reads the page, not what precedes it.
	f, _ := ParseFilter(json.RawMessage(`{"id":{"$gt":4000}}`), s)
	src.read = 0
	if _, err := Find(context.Background(), src, s, Query{Filter: f, Limit: 100}); err != nil {
		t.Fatal(err)
	}
	if src.read > 101 {
		t.Fatalf("a page after id 4000 read %d rows", src.read)
	}
}
