package tables

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/platform"
)

func mustDefine(t *testing.T, schema string) *Schema {
	t.Helper()
	s, err := Define(json.RawMessage(schema))
	if err != nil {
		t.Fatalf("Define(%s): %v", schema, err)
	}
	s.Bind(nil, platform.TableState{})
	return s
}

func row(s *Schema, id int64, members string) platform.TableRow {
	var in map[string]json.RawMessage
	if err := json.Unmarshal([]byte(members), &in); err != nil {
		panic(err)
	}
	vals, _, err := s.CheckRow(in, true)
	if err != nil {
		panic(err)
	}
	return s.NewRow(id, "2024-01-01T00:00:00.000Z", vals)
}

func TestDefineNormalizes(t *testing.T) {
	s := mustDefine(t, `{"type":"object","title":"t","properties":{
		"b":{"type":"string","x-zui":{"index":5,"searchable":true,"custom":"kept"}},
		"a":{"type":["number","null"],"minimum":1},
		"c":{"type":"array","items":{"anyOf":[]}},
		"d":{"type":"null"}}}`)
	if got := strings.Join(s.Names(), ","); got != "b,a,c" {
		t.Fatalf("columns in index order: %s", got)
	}
	out := string(s.JSON())
	for _, want := range []string{`"custom":"kept"`, `"index":6`, `"index":7`, `"nullable":true`, `"additionalProperties":true`} {
		if !strings.Contains(out, want) {
			t.Errorf("normalized schema lacks %s: %s", want, out)
		}
	}
	for _, gone := range []string{`"title"`, `"minimum"`, `"anyOf"`, `"d"`} {
		if strings.Contains(out, gone) {
			t.Errorf("normalized schema keeps %s: %s", gone, out)
		}
	}
	// The normalized schema defines the same table again.
	again := mustDefine(t, out)
	if string(again.JSON()) != out {
		t.Fatalf("not a fixed point:\n%s\n%s", out, again.JSON())
	}
}

func TestMergeAndBind(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"},"c":{"type":"string"}},"required":["a","c"]}`)
	st, _ := s.Bind(nil, platform.TableState{})
	n, err := s.Merge(json.RawMessage(`{"properties":{"b":{"type":"string"},"c":null,"d":{"type":"boolean"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	st2, stale := n.Bind(s, st)
	if len(stale) != 0 {
		t.Fatalf("stale: %v", stale)
	}
	if st2.Columns["a"].ID != st.Columns["a"].ID {
		t.Fatalf("an untouched column keeps its id")
	}
	if st2.Columns["b"].ID == st.Columns["b"].ID {
		t.Fatalf("a retyped column gets a new id (its values are cleared)")
	}
	if _, ok := st2.Columns["c"]; ok || strings.Join(n.Required, ",") != "a" {
		t.Fatalf("removed column: %v %v", st2.Columns, n.Required)
	}
	if st2.NextColumn != 5 {
		t.Fatalf("next column %d", st2.NextColumn)
	}
	if n.Column("b").Index != s.Column("b").Index {
		t.Fatalf("a redefined column keeps its index")
	}
	r, err := s.Rename("a", "z")
	if err != nil {
		t.Fatal(err)
	}
	if r.Column("z").ID != s.Column("a").ID || strings.Join(r.Required, ",") != "z,c" {
		t.Fatalf("rename: %s", r.JSON())
	}
}

func TestComputedStaleness(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{
		"in":{"type":"string"},
		"other":{"type":"string"},
		"mid":{"type":"string","x-zui":{"computed":{"action":"code","dependencies":["in"]}}},
		"top":{"type":"string","x-zui":{"computed":{"action":"ai","dependencies":["mid"]}}},
		"off":{"type":"string","x-zui":{"computed":{"action":"ai","enabled":false}}}}}`)
	r := row(s, 1, `{"in":"a","mid":"m","top":"t"}`)
	if got := s.StaleColumns(r); len(got) != 0 {
		t.Fatalf("given computed values are fresh: %v", got)
	}
	vals, _, _ := s.CheckRow(map[string]json.RawMessage{"other": json.RawMessage(`"x"`)}, false)
	if got := s.StaleColumns(s.Patch(r, vals, "now")); len(got) != 0 {
		t.Fatalf("unrelated change: %v", got)
	}
	vals, _, _ = s.CheckRow(map[string]json.RawMessage{"in": json.RawMessage(`"b"`)}, false)
	r2 := s.Patch(r, vals, "now")
	if got := strings.Join(s.StaleColumns(r2), ","); got != "mid,top" {
		t.Fatalf("dependency change: %s", got)
	}
	vals, _, _ = s.CheckRow(map[string]json.RawMessage{"in": json.RawMessage(`"a"`)}, false)
	r3 := s.Patch(r, vals, "now") // same value: nothing changed
	if !s.IsStale(r2) || s.IsStale(r3) {
		t.Fatalf("IsStale")
	}
	// A new computation makes every value of its column stale.
	st, _ := s.Bind(nil, platform.TableState{})
	n, err := s.Merge(json.RawMessage(`{"properties":{"top":{"type":"string","x-zui":{"computed":{"action":"ai","prompt":"new","dependencies":["mid"]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, stale := n.Bind(s, st)
	if strings.Join(stale, ",") != "top" || strings.Join(n.StaleColumns(r), ",") != "top" {
		t.Fatalf("changed computation: %v %v", stale, n.StaleColumns(r))
	}
}

func TestCheckRow(t *testing.T) {
	s := mustDefine(t, `{"type":"object","additionalProperties":false,"required":["s"],"properties":{
		"s":{"type":"string","pattern":"^[a-z]+$"},
		"e":{"type":"string","enum":["x","y"]},
		"d":{"type":"string","format":"date-time"},
		"n":{"type":"number","nullable":false},
		"o":{"type":"object","properties":{"k":{"type":"number"},"deep":{"type":"object","properties":{"z":{"type":"boolean"}}}}},
		"a":{"type":"array","items":{"type":"string"}}}}`)
	for _, tc := range []struct {
		row string
		ok  bool
	}{
		{`{"s":"abc"}`, true},
		{`{"s":"abc","e":"x","d":"2024-01-01T10:00:00+02:00","n":1e3,"o":{"k":1,"deep":{"z":true},"extra":1},"a":["q"]}`, true},
		{`{"s":"abc","d":"2024-01-01"}`, true},
		{`{"e":"x"}`, false},
		{`{"s":"ABC"}`, false},
		{`{"s":"abc","e":"z"}`, false},
		{`{"s":"abc","d":"yesterday"}`, false},
		{`{"s":"abc","n":null}`, false},
		{`{"s":"abc","n":"1"}`, false},
		{`{"s":"abc","o":{"k":"1"}}`, false},
		{`{"s":"abc","o":{"deep":{"z":1}}}`, false},
		{`{"s":"abc","a":[1]}`, false},
		{`{"s":"abc","zz":1}`, false},
		{`{"s":"abc","n":1e400}`, false},
	} {
		var in map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tc.row), &in); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.CheckRow(in, true)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.row, err, tc.ok)
		}
		if _, isRow := err.(*RowError); err != nil && !isRow {
			t.Errorf("%s: %T is not a row error", tc.row, err)
		}
	}
	vals, _, _ := s.CheckRow(map[string]json.RawMessage{"s": json.RawMessage(`"ab"`), "n": json.RawMessage(`1.0`)}, true)
	if string(vals[s.Column("n").ID]) != "1" {
		t.Fatalf("numbers are stored canonically: %s", vals[s.Column("n").ID])
	}
	if err := s.CheckSize(Values{s.Column("s").ID: json.RawMessage(`"` + strings.Repeat("a", 5000) + `"`)}, 1); err == nil {
		t.Fatalf("a 5 KB row fits factor 1")
	}
}

// memRows is a RowSource over rows in memory, counting what it reads.
type memRows struct {
	rows []platform.TableRow
	read int
}

func (m *memRows) ScanRows(ctx context.Context, sc Scan, fn func(r *platform.TableRow) (bool, error)) error {
	order := append([]platform.TableRow{}, m.rows...)
	sort.Slice(order, func(i, j int) bool { return (order[i].ID < order[j].ID) != sc.Descending })
	for i := range order {
		if sc.Want > 0 && i >= sc.Want {
			return nil
		}
		m.read++
		r := order[i]
		if more, err := fn(&r); err != nil || !more {
			return err
		}
	}
	return nil
}

func findIDs(t *testing.T, s *Schema, src *memRows, q Query) ([]int64, bool) {
	t.Helper()
	res, err := Find(context.Background(), src, s, q)
	if err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, r := range res.Rows {
		out = append(out, r["id"].(int64))
	}
	return out, res.HasMore
}

func TestFind(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"n":{"type":"number"},"t":{"type":"string","x-zui":{"searchable":true}}}}`)
	src := &memRows{}
	for i := int64(1); i <= 50; i++ {
		src.rows = append(src.rows, row(s, i, fmt.Sprintf(`{"n":%d,"t":"item %d %s"}`, i%7, i, []string{"red", "blue"}[i%2])))
	}
	ids, more := findIDs(t, s, src, Query{Limit: 3, Offset: 2})
	if fmt.Sprint(ids) != "[3 4 5]" || !more || src.read != 6 {
		t.Fatalf("page by id: %v %v, read %d", ids, more, src.read)
	}
	f, err := ParseFilter(json.RawMessage(`{"n":3}`), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Needles()) != 1 || f.Needles()[0] != `"c1":3` {
		t.Fatalf("needles: %v", f.Needles())
	}
	ids, more = findIDs(t, s, src, Query{Filter: f, Limit: 2, Desc: true})
	if fmt.Sprint(ids) != "[45 38]" || !more {
		t.Fatalf("filter desc: %v %v", ids, more)
	}
	ids, _ = findIDs(t, s, src, Query{OrderBy: "n", Limit: 3})
	if fmt.Sprint(ids) != "[7 14 21]" {
		t.Fatalf("order by n: %v", ids)
	}
	se, err := ParseSearch("item 17 blue", s)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Find(context.Background(), src, s, Query{Search: se, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Rows[0]["id"].(int64) != 17 || res.Rows[0]["similarity"].(float64) != 1 {
		t.Fatalf("search: %v", res.Rows[0])
	}
	if _, err := Find(context.Background(), src, s, Query{OrderBy: "n", Offset: MaxWindow, Limit: 1}); err == nil {
		t.Fatalf("a window beyond MaxWindow is refused")
	}
}

func TestSearchScore(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"t":{"type":"string"}}}`)
	score := func(q, text string) float64 {
		se, err := ParseSearch(q, s)
		if err != nil || se == nil {
			t.Fatalf("ParseSearch(%q): %v", q, err)
		}
		r := row(s, 1, fmt.Sprintf(`{"t":%q}`, text))
		return se.Score(&r)
	}
	for _, tc := range []struct {
		q, text string
		want    float64
	}{
		{"hopper", "Grace Hopper", 1},
		{"grace hopper", "Grace Hopper", 1},
		{"hopper grace", "Grace Hopper", 0.9},
		{"hop", "Grace Hopper", 0.72},
		{"hoper", "Grace Hopper", 0.45},
		{"zebra", "Grace Hopper", 0},
	} {
		if got := score(tc.q, tc.text); got != tc.want {
			t.Errorf("score(%q, %q) = %v, want %v", tc.q, tc.text, got, tc.want)
		}
	}
	if se, _ := ParseSearch("!!!", s); se != nil {
		t.Fatalf("a search without words")
	}
	if !oneEditAway("abcd", "abdc") || !oneEditAway("abc", "abxc") || oneEditAway("abcd", "dcba") {
		t.Fatalf("oneEditAway")
	}
}

func TestFilterBounds(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"n":{"type":"number"},"t":{"type":"string"}}}`)
	many := make([]string, 300)
	for i := range many {
		many[i] = `{"n":1}`
	}
	for _, f := range []string{
		`{"$or":[` + strings.Join(many, ",") + `]}`,
		`{"t":{"$regex":"(?:a|b)*c` + strings.Repeat("x", 300) + `"}}`,
		`{"n":{"$in":[` + strings.Repeat("1,", 1000) + `1]}}`,
		`{"$where":"sleep(1000)"}`,
		`{"n":{"$not":{"$not":{"$not":{"$not":{"$not":{"$not":{"$not":{"$not":{"$not":{"$gt":1}}}}}}}}}}}`,
	} {
		if _, err := ParseFilter(json.RawMessage(f), s); err == nil || platform.TypeOf(err) != platform.ErrInvalidPayload {
			t.Errorf("%.60s...: err %v, want InvalidPayload", f, err)
		}
	}
}

func TestImportFormats(t *testing.T) {
	s := mustDefine(t, `{"type":"object","properties":{"n":{"type":"number"},"b":{"type":"boolean"},"o":{"type":"object"},"t":{"type":"string"}}}`)
	rows, err := ParseImport([]byte("id,n,b,o,t\n1,2.5,true,\"{\"\"k\"\":1}\",\"a,b\"\n2,,,,\n"), s)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || string(rows[0]["n"]) != "2.5" || string(rows[0]["b"]) != "true" || string(rows[0]["o"]) != `{"k":1}` || string(rows[0]["t"]) != `"a,b"` || len(rows[1]) != 0 {
		t.Fatalf("csv: %v", rows)
	}
	if _, err := ParseImport([]byte("n\nabc\n"), s); err == nil {
		t.Fatalf("a number column with text")
	}
	rows, err = ParseImport([]byte(`{"rows":[{"id":4,"n":1,"createdAt":"x"}]}`), s)
	if err != nil || len(rows) != 1 || rows[0]["id"] != nil || rows[0]["createdAt"] != nil {
		t.Fatalf("json: %v %v", rows, err)
	}
}
