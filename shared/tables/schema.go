// Package tables is the logic of the Tables API that needs neither HTTP nor
// a database: table schemas and their validation, row validation and the
// rows' stored and wire forms, computed-column staleness, the
// MongoDB-like filter engine, grouping, search relevance, select and
// ordering, and the find procedure over a source of rows.
package tables

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"

	"github.com/botforge/platform/shared/platform"
)

// Limits of table schemas.
const (
	MaxColumns       = 20  // the reference's hard limit of columns per table
	MaxColumnNameLen = 30  // the reference's limit on a renamed column
	MaxTableNameLen  = 35  // Botpress's limit on table names
	maxPatternLen    = 512 // a column pattern or filter $regex
	maxShapeDepth    = 6   // nesting of items/properties checked in values
)

// Column types of the reference.
const (
	TypeString  = "string"
	TypeNumber  = "number"
	TypeBoolean = "boolean"
	TypeObject  = "object"
	TypeArray   = "array"
)

// systemColumns are the row fields the platform maintains; no column may
// take their names.
var systemColumns = map[string]bool{"id": true, "createdAt": true, "updatedAt": true, "computed": true, "stale": true, "similarity": true}

var (
	columnNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	tableNameRE  = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_]*$`)
)

// CheckTableName validates a table name: it starts with a letter, _ or $,
// holds letters, digits and underscores, is at most 35 characters, and is
// not shaped like a table id (a path names a table by name or by id).
func CheckTableName(name string) error {
	switch {
	case name == "":
		return platform.Invalid("invalid table name: must not be empty")
	case len(name) > MaxTableNameLen:
		return platform.Invalid("invalid table name %q: at most %d characters", name, MaxTableNameLen)
	case !tableNameRE.MatchString(name):
		return platform.Invalid("invalid table name %q: must start with a letter, _ or $ and hold only letters, digits and underscores", name)
	case platform.HasPrefix(name, platform.PrefixTable):
		return platform.Invalid("invalid table name %q: it is shaped like a table id", name)
	}
	return nil
}

// CheckColumnName validates a column name.
func CheckColumnName(name string) error {
	switch {
	case systemColumns[name]:
		return platform.Invalid("invalid schema: column %q: the name is reserved for a system column (id, createdAt, updatedAt, computed, stale, similarity)", name)
	case len(name) == 0 || len(name) > MaxColumnNameLen:
		return platform.Invalid("invalid schema: column %q: a column name has 1 to %d characters", name, MaxColumnNameLen)
	case !columnNameRE.MatchString(name):
		return platform.Invalid("invalid schema: column %q: a column name starts with a letter or _ and holds only letters, digits and underscores", name)
	}
	return nil
}

// Schema is a table's validated schema: its columns, with their storage
// identity once bound (Bind or Load).
type Schema struct {
	// Columns in display order (x-zui.index, then name).
	Columns              []*Column
	Required             []string
	AdditionalProperties bool
	dollarSchema         json.RawMessage

	byName map[string]*Column
	byID   map[string]*Column
}

// Column is one column of a table.
type Column struct {
	Name string
	// ID and Gen: see platform.TableColumn.
	ID  string
	Gen int

	Type       string // TypeString, TypeNumber, TypeBoolean, TypeObject or TypeArray
	DateTime   bool   // a string column of format date-time: compared as dates
	Nullable   bool
	Pattern    *regexp.Regexp
	Enum       []string
	Items      *shape            // element shape of an array column
	Props      map[string]*shape // member shapes of an object column
	Index      int               // x-zui.index
	Searchable bool
	Computed   *Computed // set when the column is computed (and enabled)

	def map[string]json.RawMessage // the normalized definition
}

// Computed is the computation of a computed column.
type Computed struct {
	Dependencies []string        // column names
	def          json.RawMessage // x-zui.computed as given: a change makes values stale
}

// shape is the type of a nested value (array element or object member).
type shape struct {
	Type     string
	Nullable bool
	Items    *shape
	Props    map[string]*shape
}

// Column returns the column named name, or nil.
func (s *Schema) Column(name string) *Column { return s.byName[name] }

// ColumnByID returns the column stored under id, or nil.
func (s *Schema) ColumnByID(id string) *Column { return s.byID[id] }

// Define validates the schema of a new table and normalizes it.
func Define(raw json.RawMessage) (*Schema, error) {
	s := &Schema{AdditionalProperties: true, byName: map[string]*Column{}}
	if err := s.apply(raw, true); err != nil {
		return nil, err
	}
	return s, s.check()
}

// Merge returns the schema s with the changes of an updateTable schema:
// the columns it gives are added or replace the existing ones, a column
// given as null (or of type "null") is removed, the columns it does not
// mention stay; required and additionalProperties replace the current
// ones when given.
func (s *Schema) Merge(raw json.RawMessage) (*Schema, error) {
	n := s.clone()
	if err := n.apply(raw, false); err != nil {
		return nil, err
	}
	return n, n.check()
}

// clone copies the schema without storage identities (Bind assigns them).
func (s *Schema) clone() *Schema {
	n := &Schema{AdditionalProperties: s.AdditionalProperties, dollarSchema: s.dollarSchema, byName: map[string]*Column{}}
	n.Required = append(n.Required, s.Required...)
	for _, c := range s.Columns {
		cc := *c
		n.Columns = append(n.Columns, &cc)
		n.byName[c.Name] = &cc
	}
	return n
}

func (s *Schema) apply(raw json.RawMessage, create bool) error {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil || top == nil {
		return platform.Invalid("invalid schema: must be a JSON-schema object")
	}
	if t, ok := top["type"]; ok && string(t) != `"object"` {
		return platform.Invalid(`invalid schema: field "type": a table schema is of type "object"`)
	}
	if d, ok := top["$schema"]; ok {
		var str string
		if json.Unmarshal(d, &str) != nil {
			return platform.Invalid(`invalid schema: field "$schema": must be a string`)
		}
		s.dollarSchema = d
	}
	if a, ok := top["additionalProperties"]; ok {
		var b bool
		if json.Unmarshal(a, &b) != nil {
			return platform.Invalid(`invalid schema: field "additionalProperties": must be true or false`)
		}
		s.AdditionalProperties = b
	}
	props, ok := top["properties"]
	if !ok && create {
		return platform.Invalid(`invalid schema: field "properties" (the columns) is required`)
	}
	removed := map[string]bool{}
	if ok {
		order, err := objectKeys(props)
		if err != nil {
			return platform.Invalid(`invalid schema: field "properties": must be an object of column definitions`)
		}
		var defs map[string]json.RawMessage
		_ = json.Unmarshal(props, &defs)
		for _, name := range order {
			col, remove, err := parseColumn(name, defs[name])
			if err != nil {
				return err
			}
			old := s.byName[name]
			if remove {
				if old != nil {
					s.drop(name)
					removed[name] = true
				}
				continue
			}
			if err := CheckColumnName(name); err != nil {
				return err
			}
			if old != nil {
				if _, has := col.def["x-zui"]; !has || !hasIndex(col.def["x-zui"]) {
					col.Index = old.Index
					col.setIndex(old.Index)
				}
				*old = *col
				continue
			}
			s.Columns = append(s.Columns, col)
			s.byName[name] = col
		}
	}
	if r, ok := top["required"]; ok {
		var req []string
		if err := json.Unmarshal(r, &req); err != nil {
			return platform.Invalid(`invalid schema: field "required": must be an array of column names`)
		}
		s.Required = req
	} else if len(removed) > 0 {
		kept := s.Required[:0:0]
		for _, r := range s.Required {
			if !removed[r] {
				kept = append(kept, r)
			}
		}
		s.Required = kept
	}
	s.numberColumns()
	return nil
}

func (s *Schema) drop(name string) {
	delete(s.byName, name)
	for i, c := range s.Columns {
		if c.Name == name {
			s.Columns = append(s.Columns[:i:i], s.Columns[i+1:]...)
			return
		}
	}
}

func hasIndex(xzui json.RawMessage) bool {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(xzui, &m)
	_, ok := m["index"]
	return ok
}

// numberColumns gives the columns without an x-zui.index the next indexes,
// in the order they were declared, and sorts the columns by index.
func (s *Schema) numberColumns() {
	next := -1
	for _, c := range s.Columns {
		if c.Index >= 0 && c.Index > next {
			next = c.Index
		}
	}
	for _, c := range s.Columns {
		if c.Index < 0 {
			next++
			c.setIndex(next)
		}
	}
	sort.SliceStable(s.Columns, func(i, j int) bool {
		if s.Columns[i].Index != s.Columns[j].Index {
			return s.Columns[i].Index < s.Columns[j].Index
		}
		return s.Columns[i].Name < s.Columns[j].Name
	})
}

func (c *Column) setIndex(i int) {
	c.Index = i
	var xz map[string]json.RawMessage
	_ = json.Unmarshal(c.def["x-zui"], &xz)
	if xz == nil {
		xz = map[string]json.RawMessage{}
	}
	xz["index"] = json.RawMessage(strconv.Itoa(i))
	c.def["x-zui"] = encodeRaw(xz)
}

func encodeRaw(m map[string]json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(m)
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// check verifies what involves several columns: their number, required
// names, computed dependencies (known columns, no cycle).
func (s *Schema) check() error {
	if len(s.Columns) > MaxColumns {
		return platform.Invalid("invalid schema: a table has at most %d columns (this schema has %d)", MaxColumns, len(s.Columns))
	}
	seen := map[string]bool{}
	for _, r := range s.Required {
		if s.byName[r] == nil {
			return platform.Invalid("invalid schema: field \"required\": %q is not a column", r)
		}
		if seen[r] {
			return platform.Invalid("invalid schema: field \"required\": %q is listed twice", r)
		}
		seen[r] = true
	}
	for _, c := range s.Columns {
		if c.Computed == nil {
			continue
		}
		for _, d := range c.Computed.Dependencies {
			switch {
			case d == c.Name:
				return platform.Invalid("invalid schema: column %q: a computed column cannot depend on itself", c.Name)
			case s.byName[d] == nil:
				return platform.Invalid("invalid schema: column %q: computed dependency %q is not a column", c.Name, d)
			}
		}
	}
	// Dependency cycles would make staleness propagate forever.
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(c *Column) error
	visit = func(c *Column) error {
		switch state[c.Name] {
		case 1:
			return platform.Invalid("invalid schema: computed columns depend on each other in a cycle through %q", c.Name)
		case 2:
			return nil
		}
		state[c.Name] = 1
		if c.Computed != nil {
			for _, d := range c.Computed.Dependencies {
				if err := visit(s.byName[d]); err != nil {
					return err
				}
			}
		}
		state[c.Name] = 2
		return nil
	}
	for _, c := range s.Columns {
		if err := visit(c); err != nil {
			return err
		}
	}
	return nil
}

// parseColumn validates and normalizes one column definition. remove
// reports a column given as null or of type "null" (in an update: to be
// removed; in a new schema: no column).
func parseColumn(name string, raw json.RawMessage) (*Column, bool, error) {
	bad := func(format string, args ...any) error {
		return platform.Invalid("invalid schema: column %q: %s", name, fmt.Sprintf(format, args...))
	}
	if string(bytes.TrimSpace(raw)) == "null" {
		return nil, true, nil
	}
	var def map[string]json.RawMessage
	if err := json.Unmarshal(raw, &def); err != nil || def == nil {
		return nil, false, bad("the definition must be an object")
	}
	typ, nullable, err := parseType(def["type"])
	if err != nil {
		return nil, false, bad("%v", err)
	}
	if typ == "null" {
		return nil, true, nil
	}
	c := &Column{Name: name, Type: typ, Nullable: true, Index: -1, def: map[string]json.RawMessage{"type": json.RawMessage(strconv.Quote(typ))}}
	if n, ok := def["nullable"]; ok {
		if json.Unmarshal(n, &c.Nullable) != nil {
			return nil, false, bad(`"nullable" must be true or false`)
		}
		c.def["nullable"] = n
	}
	if nullable {
		c.Nullable = true
		c.def["nullable"] = json.RawMessage("true")
	}
	if d, ok := def["description"]; ok {
		var str string
		if json.Unmarshal(d, &str) != nil {
			return nil, false, bad(`"description" must be a string`)
		}
		c.def["description"] = d
	}
	if f, ok := def["format"]; ok {
		var str string
		if json.Unmarshal(f, &str) != nil {
			return nil, false, bad(`"format" must be a string`)
		}
		// Only date-time means something to the table (values compared as
		// dates); other formats are annotations the reference does not keep.
		if str == "date-time" {
			if typ != TypeString {
				return nil, false, bad(`format "date-time" applies to string columns`)
			}
			c.DateTime = true
			c.def["format"] = f
		}
	}
	if p, ok := def["pattern"]; ok {
		var str string
		if json.Unmarshal(p, &str) != nil {
			return nil, false, bad(`"pattern" must be a string`)
		}
		if typ != TypeString {
			return nil, false, bad(`"pattern" applies to string columns`)
		}
		if len(str) > maxPatternLen {
			return nil, false, bad(`"pattern" is longer than %d characters`, maxPatternLen)
		}
		re, err := regexp.Compile(str)
		if err != nil {
			return nil, false, bad(`"pattern" is not a valid regular expression: %v`, err)
		}
		c.Pattern = re
		c.def["pattern"] = p
	}
	if e, ok := def["enum"]; ok {
		if json.Unmarshal(e, &c.Enum) != nil {
			return nil, false, bad(`"enum" must be an array of strings`)
		}
		if typ != TypeString {
			return nil, false, bad(`"enum" applies to string columns`)
		}
		c.def["enum"] = e
	}
	if it, ok := def["items"]; ok && typ == TypeArray {
		sh, norm, err := parseShape(it, 1)
		if err != nil {
			return nil, false, bad(`"items": %v`, err)
		}
		if sh != nil {
			c.Items = sh
			c.def["items"] = norm
		}
	}
	if pr, ok := def["properties"]; ok && typ == TypeObject {
		props, norm, err := parseProps(pr, 1)
		if err != nil {
			return nil, false, bad(`"properties": %v`, err)
		}
		c.Props = props
		c.def["properties"] = norm
	}
	if xz, ok := def["x-zui"]; ok {
		if err := c.parseXZui(xz); err != nil {
			return nil, false, bad("%v", err)
		}
	}
	return c, false, nil
}

// parseType reads a JSON-schema type: a name, or an array of names with
// at most one besides "null" (nullable). integer is a number.
func parseType(raw json.RawMessage) (string, bool, error) {
	if raw == nil {
		return "", false, fmt.Errorf(`"type" is required (one of string, number, boolean, object, array)`)
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		t, err := typeName(one)
		return t, false, err
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		return "", false, fmt.Errorf(`"type" must be a type name`)
	}
	t, nullable := "", false
	for _, m := range many {
		if m == "null" {
			nullable = true
			continue
		}
		if t != "" {
			return "", false, fmt.Errorf(`"type" may name one type besides "null"`)
		}
		var err error
		if t, err = typeName(m); err != nil {
			return "", false, err
		}
	}
	if t == "" {
		t = "null"
	}
	return t, nullable, nil
}

func typeName(t string) (string, error) {
	switch t {
	case TypeString, TypeNumber, TypeBoolean, TypeObject, TypeArray, "null":
		return t, nil
	case "integer":
		return TypeNumber, nil
	}
	return "", fmt.Errorf(`"type" %q is not one of string, number, boolean, object, array`, t)
}

// parseShape reads the type of a nested value (array items, object
// members). A nested definition without a usable type is not checked and
// not kept (nil, nil).
func parseShape(raw json.RawMessage, depth int) (*shape, json.RawMessage, error) {
	var def map[string]json.RawMessage
	if json.Unmarshal(raw, &def) != nil || def == nil {
		return nil, nil, fmt.Errorf("must be an object")
	}
	if def["type"] == nil {
		return nil, nil, nil
	}
	typ, nullable, err := parseType(def["type"])
	if err != nil {
		return nil, nil, err
	}
	sh := &shape{Type: typ, Nullable: nullable || typ == "null"}
	if n, ok := def["nullable"]; ok {
		var b bool
		_ = json.Unmarshal(n, &b)
		sh.Nullable = sh.Nullable || b
	}
	if depth < maxShapeDepth {
		if it, ok := def["items"]; ok && typ == TypeArray {
			sub, norm, err := parseShape(it, depth+1)
			if err != nil {
				return nil, nil, fmt.Errorf("items: %v", err)
			}
			if sub != nil {
				sh.Items = sub
				def["items"] = norm
			} else {
				delete(def, "items")
			}
		}
		if pr, ok := def["properties"]; ok && typ == TypeObject {
			props, norm, err := parseProps(pr, depth+1)
			if err != nil {
				return nil, nil, fmt.Errorf("properties: %v", err)
			}
			sh.Props = props
			def["properties"] = norm
		}
	}
	return sh, encodeRaw(def), nil
}

func parseProps(raw json.RawMessage, depth int) (map[string]*shape, json.RawMessage, error) {
	var defs map[string]json.RawMessage
	if json.Unmarshal(raw, &defs) != nil || defs == nil {
		return nil, nil, fmt.Errorf("must be an object of definitions")
	}
	props := map[string]*shape{}
	norm := map[string]json.RawMessage{}
	for k, d := range defs {
		sh, n, err := parseShape(d, depth)
		if err != nil {
			return nil, nil, fmt.Errorf("%q: %v", k, err)
		}
		if sh != nil {
			props[k], norm[k] = sh, n
		}
	}
	return props, encodeRaw(norm), nil
}

// parseXZui checks the x-zui fields the platform reads and keeps all of
// them as given.
func (c *Column) parseXZui(raw json.RawMessage) error {
	var xz map[string]json.RawMessage
	if json.Unmarshal(raw, &xz) != nil || xz == nil {
		return fmt.Errorf(`"x-zui" must be an object`)
	}
	for k, v := range xz {
		var err error
		switch k {
		case "index":
			var f float64
			if json.Unmarshal(v, &f) != nil || f != math.Trunc(f) || f < 0 || f > 1e6 {
				return fmt.Errorf(`"x-zui.index" must be a non-negative integer`)
			}
			c.Index = int(f)
		case "searchable", "hidden":
			var b bool
			err = json.Unmarshal(v, &b)
			if k == "searchable" {
				c.Searchable = b
			}
		case "order", "width":
			var f float64
			err = json.Unmarshal(v, &f)
		case "id", "schemaId", "typings":
			var s string
			err = json.Unmarshal(v, &s)
		case "computed":
			if err := c.parseComputed(v); err != nil {
				return err
			}
		}
		if err != nil {
			return fmt.Errorf(`"x-zui.%s" has the wrong type`, k)
		}
	}
	c.def["x-zui"] = encodeRaw(xz)
	return nil
}

func (c *Column) parseComputed(raw json.RawMessage) error {
	var cp struct {
		Action       *string   `json:"action"`
		Dependencies *[]string `json:"dependencies"`
		Prompt       *string   `json:"prompt"`
		Code         *string   `json:"code"`
		Model        *string   `json:"model"`
		WorkflowID   *string   `json:"workflowId"`
		Enabled      *bool     `json:"enabled"`
	}
	if err := json.Unmarshal(raw, &cp); err != nil {
		return fmt.Errorf(`"x-zui.computed" is malformed: %v`, err)
	}
	switch {
	case cp.Action == nil:
		return fmt.Errorf(`"x-zui.computed.action" is required (ai, code or workflow)`)
	case *cp.Action != "ai" && *cp.Action != "code" && *cp.Action != "workflow":
		return fmt.Errorf(`"x-zui.computed.action" must be ai, code or workflow`)
	case cp.Model != nil && len(*cp.Model) > 80:
		return fmt.Errorf(`"x-zui.computed.model" has at most 80 characters`)
	case cp.WorkflowID != nil && len(*cp.WorkflowID) > 20:
		return fmt.Errorf(`"x-zui.computed.workflowId" has at most 20 characters`)
	}
	if cp.Enabled != nil && !*cp.Enabled {
		return nil // a disabled computation: the column holds what is written to it
	}
	c.Computed = &Computed{def: raw}
	if cp.Dependencies != nil {
		c.Computed.Dependencies = *cp.Dependencies
	}
	return nil
}

// JSON renders the schema in its normalized wire form.
func (s *Schema) JSON() json.RawMessage {
	props := map[string]json.RawMessage{}
	for _, c := range s.Columns {
		props[c.Name] = encodeRaw(c.def)
	}
	top := map[string]json.RawMessage{
		"type":                 json.RawMessage(`"object"`),
		"additionalProperties": json.RawMessage(strconv.FormatBool(s.AdditionalProperties)),
		"properties":           encodeRaw(props),
	}
	if s.dollarSchema != nil {
		top["$schema"] = s.dollarSchema
	}
	if len(s.Required) > 0 {
		b, _ := json.Marshal(s.Required)
		top["required"] = b
	}
	return encodeRaw(top)
}

// Bind gives the columns of s their storage identity, continuing those of
// prev (the table's schema before an update; nil for a new table): a
// column keeps its id unless its type changes. It returns the table's new
// state and the names of the computed columns whose values became stale
// (a computed column added, or its computation changed).
func (s *Schema) Bind(prev *Schema, st platform.TableState) (platform.TableState, []string) {
	next := platform.TableState{Columns: map[string]platform.TableColumn{}, NextColumn: st.NextColumn, KeyIndex: st.KeyIndex, FillJob: st.FillJob, Index: st.Index, IndexSince: st.IndexSince, RowShards: st.RowShards}
	var stale []string
	s.byID = map[string]*Column{}
	for _, c := range s.Columns {
		var old *Column
		if prev != nil {
			old = prev.byName[c.Name]
		}
		if old != nil && old.sameStorage(c) {
			c.ID, c.Gen = old.ID, old.Gen
			switch {
			case c.Computed != nil && old.Computed == nil,
				c.Computed != nil && !jsonEqual(c.Computed.def, old.Computed.def):
				c.Gen++
				stale = append(stale, c.Name)
			}
		} else {
			next.NextColumn++
			c.ID, c.Gen = "c"+strconv.Itoa(next.NextColumn), 1
			if c.Computed != nil && prev != nil {
				stale = append(stale, c.Name)
			}
		}
		next.Columns[c.Name] = platform.TableColumn{ID: c.ID, Gen: c.Gen}
		s.byID[c.ID] = c
	}
	return next, stale
}

// sameStorage reports whether values stored for o remain valid for c.
func (o *Column) sameStorage(c *Column) bool {
	if o.Type != c.Type {
		return false
	}
	if o.Type == TypeArray {
		ot, ct := "", ""
		if o.Items != nil {
			ot = o.Items.Type
		}
		if c.Items != nil {
			ct = c.Items.Type
		}
		return ot == ct || ot == "" || ct == ""
	}
	return true
}

func jsonEqual(a, b json.RawMessage) bool {
	ca, err1 := canonical(a)
	cb, err2 := canonical(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}

// Load rebuilds a stored table's schema with its columns' identities.
func Load(raw json.RawMessage, st platform.TableState) (*Schema, error) {
	s := &Schema{AdditionalProperties: true, byName: map[string]*Column{}, byID: map[string]*Column{}}
	if err := s.apply(raw, true); err != nil {
		return nil, fmt.Errorf("stored table schema: %w", err)
	}
	for _, c := range s.Columns {
		tc, ok := st.Columns[c.Name]
		if !ok {
			return nil, fmt.Errorf("stored table schema: column %q has no storage identity", c.Name)
		}
		c.ID, c.Gen = tc.ID, tc.Gen
		s.byID[c.ID] = c
	}
	return s, nil
}

// Rename renames column old to name, also where other parts of the schema
// name it (required, computed dependencies). The column keeps its storage
// identity, so no row changes.
func (s *Schema) Rename(old, name string) (*Schema, error) {
	c := s.byName[old]
	if c == nil {
		return nil, platform.NotFound("column", old)
	}
	if err := CheckColumnName(name); err != nil {
		return nil, err
	}
	if s.byName[name] != nil {
		return nil, platform.Errorf(platform.ErrAlreadyExists, "column %q already exists", name)
	}
	n := s.clone()
	n.byID = map[string]*Column{}
	for _, col := range n.Columns {
		o := s.byName[col.Name]
		col.ID, col.Gen = o.ID, o.Gen
		col.def = cloneDef(o.def)
		if col.Name == old {
			col.Name = name
			delete(n.byName, old)
			n.byName[name] = col
		}
		if col.Computed != nil {
			deps := make([]string, len(col.Computed.Dependencies))
			changed := false
			for i, d := range col.Computed.Dependencies {
				deps[i] = d
				if d == old {
					deps[i], changed = name, true
				}
			}
			if changed {
				col.renameDependency(old, name)
				col.Computed = &Computed{Dependencies: deps, def: col.Computed.def}
			}
		}
		n.byID[col.ID] = col
	}
	for i, r := range n.Required {
		if r == old {
			n.Required[i] = name
		}
	}
	return n, nil
}

func cloneDef(d map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(d))
	for k, v := range d {
		out[k] = v
	}
	return out
}

// renameDependency rewrites x-zui.computed.dependencies after a rename
// (the computation itself is unchanged, so the values stay fresh).
func (c *Column) renameDependency(old, name string) {
	var xz map[string]json.RawMessage
	_ = json.Unmarshal(c.def["x-zui"], &xz)
	var cp map[string]json.RawMessage
	_ = json.Unmarshal(xz["computed"], &cp)
	var deps []string
	_ = json.Unmarshal(cp["dependencies"], &deps)
	for i, d := range deps {
		if d == old {
			deps[i] = name
		}
	}
	b, _ := json.Marshal(deps)
	cp["dependencies"] = b
	xz["computed"] = encodeRaw(cp)
	c.def["x-zui"] = encodeRaw(xz)
}

// CheckKeyColumn validates a key column: a string or number column.
func (s *Schema) CheckKeyColumn(name string) error {
	c := s.byName[name]
	if c == nil {
		return platform.Invalid("invalid keyColumn: %q is not a column of the table", name)
	}
	if c.Type != TypeString && c.Type != TypeNumber {
		return platform.Invalid("invalid keyColumn: column %q is of type %s; a key column holds strings or numbers", name, c.Type)
	}
	return nil
}

// Names returns the column names in display order.
func (s *Schema) Names() []string {
	out := make([]string, len(s.Columns))
	for i, c := range s.Columns {
		out[i] = c.Name
	}
	return out
}

// hasComputed reports whether any column is computed.
func (s *Schema) hasComputed() bool {
	for _, c := range s.Columns {
		if c.Computed != nil {
			return true
		}
	}
	return false
}

// HasComputed reports whether the table has computed columns.
func (s *Schema) HasComputed() bool { return s.hasComputed() }
