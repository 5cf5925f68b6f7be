package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Bounds of a filter. The filter language has no code (no $where, $expr,
// $function: unknown operators are refused), regular expressions are
// RE2 (linear time, no backtracking), and these bound the work one filter
// can ask for per row.
const (
	maxFilterDepth = 8    // nesting of $and/$or/$nor/$not and operator objects
	maxFilterNodes = 256  // conditions in one filter
	maxInValues    = 1000 // values of one $in/$nin
	maxRegexLen    = 256  // length of one $regex
)

// Filter is a parsed MongoDB-like filter, checked against a table schema.
type Filter struct {
	root     cond
	warnings []string
	needles  []string
	nodes    int
	index    *platform.TableIndexLookup // see planIndex
	// idAfter and idBefore bound the ids of the rows the filter can match
	// (exclusive, 0 for none: its top-level conditions on id), and idOnly
	// says it has no other condition (see planIDRange).
	idAfter, idBefore int64
	idOnly            bool
}

// Warnings are remarks on a valid but questionable filter.
func (f *Filter) Warnings() []string { return f.warnings }

// Needles are strings every stored row matching the filter contains (the
// canonical "columnId":value of its top-level equalities): the store can
// skip rows without them before decoding any (see docs/tables.md).
func (f *Filter) Needles() []string {
	if f == nil {
		return nil
	}
	return f.needles
}

// Match reports whether a stored row satisfies the filter.
func (f *Filter) Match(s *Schema, r *platform.TableRow) bool {
	if f == nil || f.root == nil {
		return true
	}
	v := rowView{s: s, r: r}
	return f.root.match(&v)
}

type cond interface{ match(v *rowView) bool }

type andCond []cond
type orCond []cond
type notCond struct{ c cond }

func (a andCond) match(v *rowView) bool {
	for _, c := range a {
		if !c.match(v) {
			return false
		}
	}
	return true
}

func (o orCond) match(v *rowView) bool {
	for _, c := range o {
		if c.match(v) {
			return true
		}
	}
	return false
}

func (n notCond) match(v *rowView) bool { return !n.c.match(v) }

// field is what a condition reads: a system field or a column, and a path
// into the column's (object) value.
type field struct {
	name   string // as written
	system string // "id", "createdAt", "updatedAt" or ""
	col    *Column
	sub    []string
	date   bool // compared as dates
}

type fieldCond struct {
	f   field
	ops []op
}

type op struct {
	name   string
	val    any   // $eq $ne $gt $gte $lt $lte
	vals   []any // $in $nin
	exists bool  // $exists
	re     *regexp.Regexp
	not    []op // $not
}

// ParseFilter parses a filter (JSON object) against a schema. Unknown
// columns and operators, malformed operands and filters beyond the bounds
// are refused with a 400 naming the problem.
func ParseFilter(raw json.RawMessage, s *Schema) (*Filter, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, platform.Invalid("invalid filter: %v", err)
	}
	v, err := normalizeNumbers(v)
	if err != nil {
		return nil, platform.Invalid("invalid filter: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, platform.Invalid("invalid filter: must be an object")
	}
	f := &Filter{}
	p := parser{s: s, f: f}
	root, err := p.doc(m, 0, "filter")
	if err != nil {
		return nil, err
	}
	f.root = root
	if and, ok := root.(andCond); ok {
		for _, c := range and {
			f.addNeedle(c)
		}
	} else {
		f.addNeedle(root)
	}
	f.planIndex()
	f.planIDRange()
	return f, nil
}

type parser struct {
	s *Schema
	f *Filter
}

func (p *parser) bad(at, format string, args ...any) error {
	return platform.Invalid("invalid filter: %s: %s", at, fmt.Sprintf(format, args...))
}

func (p *parser) count(at string) error {
	p.f.nodes++
	if p.f.nodes > maxFilterNodes {
		return p.bad(at, "a filter has at most %d conditions", maxFilterNodes)
	}
	return nil
}

// doc parses a filter document: field conditions and logical operators,
// all of which must hold.
func (p *parser) doc(m map[string]any, depth int, at string) (cond, error) {
	if depth > maxFilterDepth {
		return nil, p.bad(at, "nested deeper than %d levels", maxFilterDepth)
	}
	var all andCond
	for _, k := range sortedKeys(m) {
		val := m[k]
		here := at + "." + k
		if strings.HasPrefix(k, "$") {
			var c cond
			var err error
			switch k {
			case "$and", "$or", "$nor":
				c, err = p.list(k, val, depth, here)
			case "$not":
				sub, ok := val.(map[string]any)
				if !ok {
					return nil, p.bad(here, "expects a filter object")
				}
				var inner cond
				if inner, err = p.doc(sub, depth+1, here); err == nil {
					c = notCond{inner}
				}
			default:
				return nil, p.bad(here, "operator %q is not supported (logical operators: $and, $or, $nor, $not)", k)
			}
			if err != nil {
				return nil, err
			}
			all = append(all, c)
			continue
		}
		c, err := p.fieldCond(k, val, depth, here)
		if err != nil {
			return nil, err
		}
		all = append(all, c)
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return all, nil
}

func (p *parser) list(k string, val any, depth int, at string) (cond, error) {
	items, ok := val.([]any)
	if !ok || len(items) == 0 {
		return nil, p.bad(at, "expects a non-empty array of filters")
	}
	conds := make([]cond, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, p.bad(fmt.Sprintf("%s[%d]", at, i), "expects a filter object")
		}
		c, err := p.doc(m, depth+1, fmt.Sprintf("%s[%d]", at, i))
		if err != nil {
			return nil, err
		}
		conds = append(conds, c)
	}
	switch k {
	case "$and":
		return andCond(conds), nil
	case "$or":
		return orCond(conds), nil
	}
	return notCond{orCond(conds)}, nil
}

// resolve maps a field path to a system field or a column.
func (p *parser) resolve(path, at string) (field, error) {
	parts, err := splitPath(path)
	if err != nil {
		return field{}, p.bad(at, "%v", err)
	}
	f := field{name: path, sub: parts[1:]}
	switch parts[0] {
	case "id":
		f.system = "id"
	case "createdAt", "updatedAt":
		f.system, f.date = parts[0], true
	default:
		c := p.s.byName[parts[0]]
		if c == nil {
			return field{}, p.bad(at, "%q is not a column of the table (columns: %s; system: id, createdAt, updatedAt)", parts[0], strings.Join(p.s.Names(), ", "))
		}
		f.col = c
		f.date = c.DateTime && len(f.sub) == 0
	}
	if f.system != "" && len(f.sub) > 0 {
		return field{}, p.bad(at, "%q has no members", parts[0])
	}
	return f, nil
}

func (p *parser) fieldCond(path string, val any, depth int, at string) (cond, error) {
	if err := p.count(at); err != nil {
		return nil, err
	}
	f, err := p.resolve(path, at)
	if err != nil {
		return nil, err
	}
	m, isOps := val.(map[string]any)
	if isOps {
		isOps = false
		for k := range m {
			if strings.HasPrefix(k, "$") {
				isOps = true
				break
			}
		}
	}
	if !isOps {
		o, err := p.operand(f, "$eq", val, at)
		if err != nil {
			return nil, err
		}
		return fieldCond{f: f, ops: []op{o}}, nil
	}
	ops, err := p.ops(f, m, depth+1, at)
	if err != nil {
		return nil, err
	}
	return fieldCond{f: f, ops: ops}, nil
}

// ops parses an operator object ({"$gt": 1, "$lt": 5}); all must hold.
func (p *parser) ops(f field, m map[string]any, depth int, at string) ([]op, error) {
	if depth > maxFilterDepth {
		return nil, p.bad(at, "nested deeper than %d levels", maxFilterDepth)
	}
	var out []op
	options, hasOptions := m["$options"]
	for _, k := range sortedKeys(m) {
		val := m[k]
		here := at + "." + k
		switch k {
		case "$options":
			if _, ok := m["$regex"]; !ok {
				return nil, p.bad(here, "$options goes with $regex")
			}
		case "$eq", "$ne", "$gt", "$gte", "$lt", "$lte":
			o, err := p.operand(f, k, val, here)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		case "$in", "$nin":
			items, ok := val.([]any)
			if !ok {
				return nil, p.bad(here, "expects an array of values")
			}
			if len(items) > maxInValues {
				return nil, p.bad(here, "at most %d values", maxInValues)
			}
			o := op{name: k}
			for _, it := range items {
				e, err := p.operand(f, "$eq", it, here)
				if err != nil {
					return nil, err
				}
				o.vals = append(o.vals, e.val)
			}
			out = append(out, o)
		case "$exists":
			b, ok := val.(bool)
			if !ok {
				return nil, p.bad(here, "expects true or false")
			}
			out = append(out, op{name: k, exists: b})
		case "$regex":
			pattern, ok := val.(string)
			if !ok {
				return nil, p.bad(here, "expects a string")
			}
			flags := ""
			if hasOptions {
				opt, ok := options.(string)
				if !ok {
					return nil, p.bad(at+".$options", "expects a string of flags (i, m, s)")
				}
				for _, r := range opt {
					if !strings.ContainsRune("ims", r) {
						return nil, p.bad(at+".$options", "flag %q is not supported (i, m, s)", r)
					}
				}
				flags = opt
			}
			re, err := compileRegex(pattern, flags)
			if err != nil {
				return nil, p.bad(here, "%v", err)
			}
			if f.col != nil && len(f.sub) == 0 && f.col.Type != TypeString && f.col.Type != TypeArray {
				p.f.warnings = append(p.f.warnings, fmt.Sprintf("filter: column %q holds %ss: $regex matches only strings, so no row matches", f.name, f.col.Type))
			}
			out = append(out, op{name: k, re: re})
		case "$not":
			sub, ok := val.(map[string]any)
			if !ok || len(sub) == 0 {
				return nil, p.bad(here, "expects an operator object, e.g. {\"$not\": {\"$gt\": 5}}")
			}
			for sk := range sub {
				if !strings.HasPrefix(sk, "$") {
					return nil, p.bad(here, "expects an operator object, e.g. {\"$not\": {\"$gt\": 5}}")
				}
			}
			inner, err := p.ops(f, sub, depth+1, here)
			if err != nil {
				return nil, err
			}
			out = append(out, op{name: k, not: inner})
		default:
			return nil, p.bad(here, "operator %q is not supported (field operators: $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin, $exists, $regex, $options, $not)", k)
		}
		if err := p.count(here); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compileRegex compiles a $regex: RE2 syntax, bounded length.
func compileRegex(pattern, flags string) (*regexp.Regexp, error) {
	if len(pattern) > maxRegexLen {
		return nil, fmt.Errorf("a $regex has at most %d characters", maxRegexLen)
	}
	if flags != "" {
		pattern = "(?" + flags + ")" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression (RE2 syntax): %v", err)
	}
	return re, nil
}

// operand checks the value of a comparison against the field: dates must
// be dates, order comparisons need a number or a string.
func (p *parser) operand(f field, name string, val any, at string) (op, error) {
	o := op{name: name, val: val}
	switch name {
	case "$gt", "$gte", "$lt", "$lte":
		switch val.(type) {
		case float64, string:
		default:
			return o, p.bad(at, "%s compares with a number, a string or a date, not %s", name, jsonType(val))
		}
	}
	if f.date && val != nil {
		str, ok := val.(string)
		if !ok {
			return o, p.bad(at, "%q is a date: compare it with a date string (ISO 8601), not %s", f.name, jsonType(val))
		}
		t, ok := parseDate(str)
		if !ok {
			return o, p.bad(at, "%q is a date: %s is not a date (ISO 8601, e.g. 2024-05-01 or 2024-05-01T12:00:00Z)", f.name, quote(str))
		}
		o.val = t
		return o, nil
	}
	if val == nil {
		return o, nil
	}
	// A comparison that can never hold is valid but likely a mistake.
	var want string
	switch {
	case f.system == "id":
		want = TypeNumber
	case f.col != nil && len(f.sub) == 0:
		want = f.col.Type
	}
	got := ""
	switch val.(type) {
	case string:
		got = TypeString
	case float64:
		got = TypeNumber
	case bool:
		got = TypeBoolean
	}
	if want != "" && got != "" && want != got && want != TypeArray && want != TypeObject {
		p.f.warnings = append(p.f.warnings, fmt.Sprintf("filter: %q holds %ss; comparing it with %s (%s) matches no row", f.name, want, quote(val), article(got)))
	}
	return o, nil
}

// addNeedle records the stored form of a top-level equality on a scalar
// column, which every matching row's document contains.
func (f *Filter) addNeedle(c cond) {
	fc, ok := c.(fieldCond)
	if !ok || fc.f.col == nil || len(fc.f.sub) > 0 || fc.f.date {
		return
	}
	switch fc.f.col.Type {
	case TypeString, TypeNumber, TypeBoolean:
	default:
		return
	}
	for _, o := range fc.ops {
		if o.name != "$eq" || o.val == nil {
			continue
		}
		switch o.val.(type) {
		case string, float64, bool:
			key := encode(fc.f.col.ID)
			f.needles = append(f.needles, string(key)+":"+string(encode(o.val)))
			return
		}
	}
}

// rowView reads a row's values for a filter, decoding each column once
// (filters are evaluated on every row of a table: no allocation for the
// common case of a few scalar columns).
type rowView struct {
	s    *Schema
	r    *platform.TableRow
	ids  [4]string
	vals [4]any
	n    int
	more map[string]any
	one  [1]any
}

func (v *rowView) decoded(id string, raw json.RawMessage) any {
	for i := 0; i < v.n; i++ {
		if v.ids[i] == id {
			return v.vals[i]
		}
	}
	if val, ok := v.more[id]; ok {
		return val
	}
	val := decodeValue(raw)
	if v.n < len(v.ids) {
		v.ids[v.n], v.vals[v.n] = id, val
		v.n++
	} else {
		if v.more == nil {
			v.more = map[string]any{}
		}
		v.more[id] = val
	}
	return val
}

// values returns the candidate values of a field in the row (MongoDB
// semantics: an array is matched by its elements as well as by itself),
// and whether the field is present.
func (v *rowView) values(f field) ([]any, bool) {
	switch f.system {
	case "id":
		v.one[0] = float64(v.r.ID)
		return v.one[:], true
	case "createdAt":
		v.one[0] = v.r.CreatedAt
		return v.one[:], true
	case "updatedAt":
		v.one[0] = v.r.UpdatedAt
		return v.one[:], true
	}
	raw, ok := v.r.Values[f.col.ID]
	if !ok {
		return nil, false
	}
	val := v.decoded(f.col.ID, raw)
	if _, isArr := val.([]any); !isArr && len(f.sub) == 0 {
		v.one[0] = val // the common case: one scalar, no allocation
		return v.one[:], true
	}
	cands := []any{val}
	for _, k := range f.sub {
		var next []any
		for _, c := range cands {
			switch x := c.(type) {
			case map[string]any:
				if e, ok := x[k]; ok {
					next = append(next, e)
				}
			case []any:
				for _, el := range x {
					if m, ok := el.(map[string]any); ok {
						if e, ok := m[k]; ok {
							next = append(next, e)
						}
					}
				}
			}
		}
		cands = next
	}
	if len(cands) == 0 {
		return nil, false
	}
	var out []any
	for _, c := range cands {
		out = append(out, c)
		if arr, ok := c.([]any); ok {
			out = append(out, arr...)
		}
	}
	return out, true
}

func (fc fieldCond) match(v *rowView) bool {
	cands, present := v.values(fc.f)
	for _, o := range fc.ops {
		if !o.match(fc.f, cands, present) {
			return false
		}
	}
	return true
}

func (o op) match(f field, cands []any, present bool) bool {
	switch o.name {
	case "$eq":
		return anyEqual(f, cands, present, o.val)
	case "$ne":
		return !anyEqual(f, cands, present, o.val)
	case "$in", "$nin":
		in := false
		for _, want := range o.vals {
			if anyEqual(f, cands, present, want) {
				in = true
				break
			}
		}
		return in == (o.name == "$in")
	case "$exists":
		return present == o.exists
	case "$regex":
		for _, c := range cands {
			if s, ok := c.(string); ok && o.re.MatchString(s) {
				return true
			}
		}
		return false
	case "$not":
		for _, n := range o.not {
			if !n.match(f, cands, present) {
				return true
			}
		}
		return false
	}
	for _, c := range cands {
		cmp, ok := compareOperand(f, c, o.val)
		if !ok {
			continue
		}
		switch o.name {
		case "$gt":
			if cmp > 0 {
				return true
			}
		case "$gte":
			if cmp >= 0 {
				return true
			}
		case "$lt":
			if cmp < 0 {
				return true
			}
		case "$lte":
			if cmp <= 0 {
				return true
			}
		}
	}
	return false
}

// anyEqual reports whether a candidate equals want; null matches a
// missing field or a null value.
func anyEqual(f field, cands []any, present bool, want any) bool {
	if want == nil {
		if !present {
			return true
		}
		for _, c := range cands {
			if c == nil {
				return true
			}
		}
		return false
	}
	for _, c := range cands {
		switch w := want.(type) {
		case string:
			if s, ok := c.(string); ok && s == w {
				return true
			}
			continue
		case float64:
			if n, ok := c.(float64); ok && n == w {
				return true
			}
			continue
		case bool:
			if b, ok := c.(bool); ok && b == w {
				return true
			}
			continue
		}
		if t, ok := want.(time.Time); ok {
			if s, ok := c.(string); ok {
				if ct, ok := parseDate(s); ok && ct.Equal(t) {
					return true
				}
			}
			continue
		}
		if reflect.DeepEqual(c, want) {
			return true
		}
	}
	return false
}

// compareOperand orders a candidate against an operand of the same kind
// (numbers, strings, dates); other pairs do not compare.
func compareOperand(f field, c, want any) (int, bool) {
	switch w := want.(type) {
	case time.Time:
		s, ok := c.(string)
		if !ok {
			return 0, false
		}
		t, ok := parseDate(s)
		if !ok {
			return 0, false
		}
		return t.Compare(w), true
	case float64:
		n, ok := c.(float64)
		if !ok {
			return 0, false
		}
		switch {
		case n < w:
			return -1, true
		case n > w:
			return 1, true
		}
		return 0, true
	case string:
		s, ok := c.(string)
		if !ok {
			return 0, false
		}
		return strings.Compare(s, w), true
	}
	return 0, false
}

// compareValues orders any two JSON values for sorting: absent and null
// first, then booleans, numbers, strings (dates by instant when both
// parse as dates and date is set), objects and arrays.
func compareValues(a, b any, date bool) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case float64:
		y := b.(float64)
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	case string:
		y := b.(string)
		if date {
			if tx, ok := parseDate(x); ok {
				if ty, ok := parseDate(y); ok {
					return tx.Compare(ty)
				}
			}
		}
		return strings.Compare(x, y)
	case nil:
		return 0
	}
	return bytes.Compare(encode(a), encode(b))
}

func rank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case bool:
		return 1
	case float64:
		return 2
	case string:
		return 3
	case map[string]any:
		return 4
	case []any:
		return 5
	}
	return 6
}
