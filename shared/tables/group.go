package tables

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/botforge/platform/shared/platform"
)

// maxGroups bounds the groups one grouped find keeps in memory.
const maxGroups = 10000

// Group aggregates rows by key columns: {"status": "key", "total":
// ["sum", "avg"], "id": "count"}. Each group becomes one result row with
// the fields <column><Operation> (statusKey, totalSum, totalAvg,
// idCount), plus id (the group's smallest row id) and an empty computed,
// so that it keeps the reference's Row shape.
type Group struct {
	keys []groupField
	aggs []groupField
	out  map[string]bool
}

type groupField struct {
	f    field
	op   string
	name string // output field
}

var groupOps = map[string]bool{"key": true, "avg": true, "max": true, "min": true, "sum": true, "count": true}

// ParseGroup parses a group specification against the schema.
func ParseGroup(raw json.RawMessage, s *Schema) (*Group, error) {
	var spec map[string]any
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, platform.Invalid("invalid group: must be an object of column: operation(s)")
	}
	if len(spec) == 0 {
		return nil, platform.Invalid("invalid group: name at least one column")
	}
	g := &Group{out: map[string]bool{}}
	p := parser{s: s, f: &Filter{}}
	for _, col := range sortedKeys(spec) {
		f, err := p.resolve(col, "group")
		if err != nil {
			return nil, platform.Invalid("invalid group: %q is not a column of the table", col)
		}
		if len(f.sub) > 0 {
			return nil, platform.Invalid("invalid group: %q: group by columns, not paths", col)
		}
		var ops []string
		switch v := spec[col].(type) {
		case string:
			ops = []string{v}
		case []any:
			for _, o := range v {
				str, ok := o.(string)
				if !ok {
					return nil, platform.Invalid("invalid group: %q: operations are strings (key, avg, max, min, sum, count)", col)
				}
				ops = append(ops, str)
			}
		default:
			return nil, platform.Invalid("invalid group: %q: give an operation or an array of operations (key, avg, max, min, sum, count)", col)
		}
		for _, o := range ops {
			if !groupOps[o] {
				return nil, platform.Invalid("invalid group: %q: operation %q is not one of key, avg, max, min, sum, count", col, o)
			}
			gf := groupField{f: f, op: o, name: col + strings.ToUpper(o[:1]) + o[1:]}
			if g.out[gf.name] {
				continue
			}
			g.out[gf.name] = true
			if o == "key" {
				g.keys = append(g.keys, gf)
			} else {
				g.aggs = append(g.aggs, gf)
			}
		}
	}
	return g, nil
}

// firstField is an output field of the grouping, for messages.
func (g *Group) firstField() string {
	if len(g.keys) > 0 {
		return g.keys[0].name
	}
	return g.aggs[0].name
}

// HasField reports whether name is an output field of the grouping.
func (g *Group) HasField(name string) bool { return g.out[name] }

// groupAcc accumulates one group.
type groupAcc struct {
	keys  []any
	minID int64
	aggs  []aggAcc
}

type aggAcc struct {
	sum   float64
	nums  int
	count int
	best  any
	has   bool
}

type grouper struct {
	g      *Group
	s      *Schema
	groups map[string]*groupAcc
	order  []*groupAcc
}

func (g *Group) start(s *Schema) *grouper {
	return &grouper{g: g, s: s, groups: map[string]*groupAcc{}}
}

func (gr *grouper) add(r *platform.TableRow) error {
	v := rowView{s: gr.s, r: r}
	keys := make([]any, len(gr.g.keys))
	for i, k := range gr.g.keys {
		if cands, ok := v.values(k.f); ok && len(cands) > 0 {
			keys[i] = cands[0]
		}
	}
	id := string(encode(keys))
	acc := gr.groups[id]
	if acc == nil {
		if len(gr.groups) >= maxGroups {
			return platform.Invalid("invalid group: more than %d groups; narrow the rows with a filter", maxGroups)
		}
		acc = &groupAcc{keys: keys, minID: r.ID, aggs: make([]aggAcc, len(gr.g.aggs))}
		gr.groups[id] = acc
		gr.order = append(gr.order, acc)
	}
	if r.ID < acc.minID {
		acc.minID = r.ID
	}
	for i, a := range gr.g.aggs {
		cands, ok := v.values(a.f)
		if !ok || len(cands) == 0 || cands[0] == nil {
			continue
		}
		val := cands[0]
		ag := &acc.aggs[i]
		ag.count++
		if n, isNum := val.(float64); isNum {
			ag.sum += n
			ag.nums++
		}
		switch a.op {
		case "min", "max":
			if _, isObj := val.(map[string]any); isObj {
				continue
			}
			if _, isArr := val.([]any); isArr {
				continue
			}
			if !ag.has {
				ag.best, ag.has = val, true
				continue
			}
			c := compareValues(val, ag.best, a.f.date)
			if (a.op == "min" && c < 0) || (a.op == "max" && c > 0) {
				ag.best = val
			}
		}
	}
	return nil
}

// rows renders the groups as result rows.
func (gr *grouper) rows() []Row {
	out := make([]Row, 0, len(gr.order))
	for _, acc := range gr.order {
		r := Row{"id": acc.minID, "computed": map[string]any{}}
		for i, k := range gr.g.keys {
			r[k.name] = acc.keys[i]
		}
		for i, a := range gr.g.aggs {
			ag := acc.aggs[i]
			switch a.op {
			case "count":
				r[a.name] = ag.count
			case "sum":
				if ag.nums > 0 {
					r[a.name] = ag.sum
				} else {
					r[a.name] = nil
				}
			case "avg":
				if ag.nums > 0 {
					r[a.name] = ag.sum / float64(ag.nums)
				} else {
					r[a.name] = nil
				}
			case "min", "max":
				r[a.name] = ag.best
			}
		}
		out = append(out, r)
	}
	return out
}

// sortGroups orders result rows by an output field (orderBy naming one),
// else by their keys, ascending or descending; ties by id.
func (g *Group) sortGroups(rows []Row, orderBy string, desc bool) {
	fields := []string{}
	dates := map[string]bool{}
	if g.out[orderBy] {
		fields = append(fields, orderBy)
	}
	for _, k := range g.keys {
		fields = append(fields, k.name)
		dates[k.name] = k.f.date
	}
	sort.SliceStable(rows, func(i, j int) bool {
		for _, f := range fields {
			c := compareValues(normal(rows[i][f]), normal(rows[j][f]), dates[f])
			if c != 0 {
				return (c < 0) != desc
			}
		}
		return rows[i]["id"].(int64) < rows[j]["id"].(int64)
	})
}

// normal brings aggregate values to the JSON kinds compareValues orders.
func normal(v any) any {
	switch x := v.(type) {
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return v
}
