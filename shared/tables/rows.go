package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"time"
	"unicode/utf8"

	"github.com/botforge/platform/shared/platform"
)

// RowError is an error confined to one row of a request: partial-success
// operations report it in their errors list and go on with the other rows.
type RowError struct{ Msg string }

func (e *RowError) Error() string { return e.Msg }

func rowErr(format string, args ...any) error { return &RowError{Msg: fmt.Sprintf(format, args...)} }

// Values are a row's column values by column id, in canonical JSON.
type Values map[string]json.RawMessage

// CheckRow validates one input row (its members as given) against the
// schema and returns its column values by column id. With create set,
// required columns must be present. System fields are left to the caller
// (id) or ignored with a warning; a member that is not a column is an
// error when the schema forbids additional properties, else ignored with a
// warning.
func (s *Schema) CheckRow(in map[string]json.RawMessage, create bool) (Values, []string, error) {
	vals := Values{}
	var warnings []string
	for _, name := range sortedKeys(in) {
		raw := in[name]
		if systemColumns[name] {
			if name != "id" || create {
				warnings = append(warnings, fmt.Sprintf("%q is maintained by the table: the given value was ignored", name))
			}
			continue
		}
		c := s.byName[name]
		if c == nil {
			if !s.AdditionalProperties {
				return nil, nil, rowErr("column %q is not in the table's schema (additionalProperties is false)", name)
			}
			warnings = append(warnings, fmt.Sprintf("column %q is not in the table's schema: its value was ignored", name))
			continue
		}
		canon, err := canonical(raw)
		if err != nil {
			return nil, nil, rowErr("column %q: invalid value: %v", name, err)
		}
		if err := c.check(decodeValue(canon)); err != nil {
			return nil, nil, err
		}
		vals[c.ID] = canon
	}
	if create {
		for _, r := range s.Required {
			if _, ok := vals[s.byName[r].ID]; !ok {
				return nil, nil, rowErr("column %q is required", r)
			}
		}
	}
	return vals, warnings, nil
}

// check validates a value of the column.
func (c *Column) check(v any) error {
	if v == nil {
		if !c.Nullable {
			return rowErr("column %q: must not be null", c.Name)
		}
		return nil
	}
	if err := checkType(c.Type, v); err != nil {
		return rowErr("column %q: %v", c.Name, err)
	}
	switch c.Type {
	case TypeString:
		str := v.(string)
		if c.DateTime {
			if _, ok := parseDate(str); !ok {
				return rowErr("column %q: %s is not a date-time (ISO 8601, e.g. 2024-05-01T12:00:00Z)", c.Name, quote(str))
			}
		}
		if c.Pattern != nil && !c.Pattern.MatchString(str) {
			return rowErr("column %q: %s does not match the pattern %s", c.Name, quote(str), c.Pattern)
		}
		if len(c.Enum) > 0 {
			found := false
			for _, e := range c.Enum {
				if e == str {
					found = true
					break
				}
			}
			if !found {
				return rowErr("column %q: %s is not one of the allowed values", c.Name, quote(str))
			}
		}
	case TypeArray:
		if c.Items != nil {
			for i, e := range v.([]any) {
				if err := c.Items.check(e, 1); err != nil {
					return rowErr("column %q: item %d: %v", c.Name, i, err)
				}
			}
		}
	case TypeObject:
		m := v.(map[string]any)
		for k, sh := range c.Props {
			if e, ok := m[k]; ok {
				if err := sh.check(e, 1); err != nil {
					return rowErr("column %q: member %q: %v", c.Name, k, err)
				}
			}
		}
	}
	return nil
}

func (sh *shape) check(v any, depth int) error {
	if v == nil {
		if sh.Type == "null" || sh.Nullable {
			return nil
		}
		return fmt.Errorf("must not be null")
	}
	if sh.Type == "null" {
		return fmt.Errorf("expected null, got %s", jsonType(v))
	}
	if err := checkType(sh.Type, v); err != nil {
		return err
	}
	if depth >= maxShapeDepth {
		return nil
	}
	switch sh.Type {
	case TypeArray:
		if sh.Items != nil {
			for i, e := range v.([]any) {
				if err := sh.Items.check(e, depth+1); err != nil {
					return fmt.Errorf("item %d: %v", i, err)
				}
			}
		}
	case TypeObject:
		m := v.(map[string]any)
		for k, p := range sh.Props {
			if e, ok := m[k]; ok {
				if err := p.check(e, depth+1); err != nil {
					return fmt.Errorf("member %q: %v", k, err)
				}
			}
		}
	}
	return nil
}

func checkType(t string, v any) error {
	ok := false
	switch t {
	case TypeString:
		_, ok = v.(string)
	case TypeNumber:
		_, ok = v.(float64)
	case TypeBoolean:
		_, ok = v.(bool)
	case TypeObject:
		_, ok = v.(map[string]any)
	case TypeArray:
		_, ok = v.([]any)
	}
	if !ok {
		return fmt.Errorf("expected %s, got %s", article(t), jsonType(v))
	}
	return nil
}

func article(t string) string {
	switch t {
	case TypeObject, TypeArray:
		return "an " + t
	}
	return "a " + t
}

// parseDate reads a date as the API accepts it: RFC 3339 (ISO 8601 with
// a time and zone) or a calendar date.
func parseDate(s string) (time.Time, bool) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// Size is the storage a row's values take, compared with the table's
// factor times platform.TableRowUnit.
func (s *Schema) Size(vals Values) int {
	n := 2
	for id, v := range vals {
		if c := s.byID[id]; c != nil {
			n += len(c.Name) + len(v) + 4
		}
	}
	return n
}

// CheckSize refuses a row larger than the table's factor allows.
func (s *Schema) CheckSize(vals Values, factor int) error {
	if factor < 1 {
		factor = 1
	}
	if n, max := s.Size(vals), factor*platform.TableRowUnit; n > max {
		return rowErr("the row takes %d bytes; a row of this table (factor %d) takes at most %d", n, factor, max)
	}
	return nil
}

// NewRow builds a new row. A computed column given a value holds it
// fresh; the others are stale until a value is written for them.
func (s *Schema) NewRow(id int64, now string, vals Values) platform.TableRow {
	r := platform.TableRow{ID: id, CreatedAt: now, UpdatedAt: now, Values: vals}
	for _, c := range s.Columns {
		if c.Computed == nil {
			continue
		}
		if r.Computed == nil {
			r.Computed = map[string]platform.ComputedCell{}
		}
		if _, given := vals[c.ID]; given {
			r.Computed[c.ID] = platform.ComputedCell{Status: platform.ComputedFresh, UpdatedBy: "user", UpdatedAt: now, Gen: c.Gen}
		} else {
			r.Computed[c.ID] = platform.ComputedCell{Status: platform.ComputedStale, UpdatedAt: now, Gen: c.Gen}
		}
	}
	return r
}

// Patch applies the values of an update to a row: the given columns take
// their new values, the others keep theirs. A computed column given a
// value becomes fresh; one whose dependencies changed (directly or
// through other computed columns) and that was not given becomes stale.
func (s *Schema) Patch(r platform.TableRow, vals Values, now string) platform.TableRow {
	out := r
	out.Values = make(Values, len(r.Values)+len(vals))
	for k, v := range r.Values {
		out.Values[k] = v
	}
	changed := map[string]bool{}
	for id, v := range vals {
		if old, ok := r.Values[id]; !ok || !bytes.Equal(old, v) {
			changed[s.byID[id].Name] = true
		}
		out.Values[id] = v
	}
	out.UpdatedAt = now
	if !s.hasComputed() {
		return out
	}
	out.Computed = make(map[string]platform.ComputedCell, len(r.Computed))
	for k, v := range r.Computed {
		out.Computed[k] = v
	}
	// Staleness spreads from the changed columns through dependencies.
	stale := map[string]bool{}
	for progress := true; progress; {
		progress = false
		for _, c := range s.Columns {
			if c.Computed == nil || stale[c.Name] {
				continue
			}
			if _, given := vals[c.ID]; given {
				continue
			}
			for _, d := range c.Computed.Dependencies {
				if changed[d] || stale[d] {
					stale[c.Name], progress = true, true
					break
				}
			}
		}
	}
	for _, c := range s.Columns {
		if c.Computed == nil {
			continue
		}
		if _, given := vals[c.ID]; given {
			out.Computed[c.ID] = platform.ComputedCell{Status: platform.ComputedFresh, UpdatedBy: "user", UpdatedAt: now, Gen: c.Gen}
		} else if stale[c.Name] {
			out.Computed[c.ID] = platform.ComputedCell{Status: platform.ComputedStale, UpdatedAt: now, Gen: c.Gen}
		}
	}
	return out
}

// cellStale reports whether the row's value of computed column c waits to
// be (re)computed: never written, marked stale, or written before the
// column's computation last changed.
func cellStale(r platform.TableRow, c *Column) bool {
	cell, ok := r.Computed[c.ID]
	return !ok || cell.Status == platform.ComputedStale || cell.Gen < c.Gen
}

// StaleColumns lists the row's stale computed columns.
func (s *Schema) StaleColumns(r platform.TableRow) []string {
	out := []string{}
	for _, c := range s.Columns {
		if c.Computed != nil && cellStale(r, c) {
			out = append(out, c.Name)
		}
	}
	return out
}

// IsStale reports whether any computed value of the row is stale.
func (s *Schema) IsStale(r platform.TableRow) bool {
	for _, c := range s.Columns {
		if c.Computed != nil && cellStale(r, c) {
			return true
		}
	}
	return false
}

// Value returns the row's value of a column (nil when absent).
func (s *Schema) Value(r platform.TableRow, name string) json.RawMessage {
	if c := s.byName[name]; c != nil {
		return r.Values[c.ID]
	}
	return nil
}

// KeyValue renders the row's value of the key column as an index key:
// its canonical JSON ("" when absent or null).
func KeyValue(v json.RawMessage) string {
	if len(v) == 0 || string(v) == "null" {
		return ""
	}
	return string(v)
}

// CheckKeyValue refuses a key value too long to be indexed.
func CheckKeyValue(column, v string) error {
	if len(v) > 512 || !utf8.ValidString(v) {
		return rowErr("column %q: a key column value is at most 512 bytes of JSON", column)
	}
	return nil
}

// Row is a row in its wire shape.
type Row map[string]any

// Wire renders a stored row in the reference's shape: system fields, its
// computed states and stale columns, and its values by column name.
// Values of columns no longer in the schema are left out.
func (s *Schema) Wire(r platform.TableRow) Row {
	out := Row{"id": r.ID, "createdAt": r.CreatedAt, "updatedAt": r.UpdatedAt}
	computed := map[string]any{}
	stale := []string{}
	for _, c := range s.Columns {
		if v, ok := r.Values[c.ID]; ok {
			out[c.Name] = v
		}
		if c.Computed == nil {
			continue
		}
		cell, ok := r.Computed[c.ID]
		isStale := cellStale(r, c)
		wc := map[string]any{"status": platform.ComputedStale}
		if ok {
			if !isStale {
				wc["status"] = cell.Status
			}
			if cell.Error != "" {
				wc["error"] = cell.Error
			}
			if cell.UpdatedBy != "" {
				wc["updatedBy"] = cell.UpdatedBy
			}
			if cell.UpdatedAt != "" {
				wc["updatedAt"] = cell.UpdatedAt
			}
		}
		computed[c.Name] = wc
		if isStale {
			stale = append(stale, c.Name)
		}
	}
	out["computed"] = computed
	out["stale"] = stale
	return out
}

// Selection keeps some columns of wire rows (findTableRows' select).
type Selection struct {
	paths [][]string
}

// ParseSelect reads select paths ("name", "address.city"). System fields
// are always kept. A path whose column is not in the schema is ignored
// with a warning.
func ParseSelect(paths []string, s *Schema) (*Selection, []string, error) {
	if paths == nil {
		return nil, nil, nil
	}
	sel := &Selection{}
	var warnings []string
	for _, p := range paths {
		parts, err := splitPath(p)
		if err != nil {
			return nil, nil, platform.Invalid("invalid select %q: %v", p, err)
		}
		if systemColumns[parts[0]] {
			continue
		}
		if s.byName[parts[0]] == nil {
			warnings = append(warnings, fmt.Sprintf("select: %q is not a column of the table: ignored", p))
			continue
		}
		sel.paths = append(sel.paths, parts)
	}
	return sel, warnings, nil
}

// Apply keeps the selected paths of a wire row (and its system fields).
func (sel *Selection) Apply(r Row) Row {
	if sel == nil {
		return r
	}
	out := Row{}
	for k, v := range r {
		if systemColumns[k] {
			out[k] = v
		}
	}
	for _, p := range sel.paths {
		v, ok := r[p[0]]
		if !ok {
			continue
		}
		if len(p) == 1 {
			out[p[0]] = v
			continue
		}
		var val any = v
		if raw, isRaw := v.(json.RawMessage); isRaw {
			val = decodeValue(raw)
		}
		sub, ok := pick(val, p[1:])
		if !ok {
			continue
		}
		dst, _ := out[p[0]].(map[string]any)
		if dst == nil {
			dst = map[string]any{}
			out[p[0]] = dst
		}
		place(dst, p[1:], sub)
	}
	return out
}

func pick(v any, path []string) (any, bool) {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

func place(dst map[string]any, path []string, v any) {
	for _, k := range path[:len(path)-1] {
		next, _ := dst[k].(map[string]any)
		if next == nil {
			next = map[string]any{}
			dst[k] = next
		}
		dst = next
	}
	dst[path[len(path)-1]] = v
}

// splitPath splits a dot path; it has 1 to 8 non-empty parts.
func splitPath(p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	var parts []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '.' {
			if i == start {
				return nil, fmt.Errorf("empty segment in path")
			}
			parts = append(parts, p[start:i])
			start = i + 1
		}
	}
	if len(parts) > 8 {
		return nil, fmt.Errorf("a path has at most 8 segments")
	}
	return parts, nil
}

// ColumnsByIndex is the column names in display order (exports).
func (s *Schema) ColumnsByIndex() []string {
	names := s.Names()
	sort.SliceStable(names, func(i, j int) bool { return s.byName[names[i]].Index < s.byName[names[j]].Index })
	return names
}
