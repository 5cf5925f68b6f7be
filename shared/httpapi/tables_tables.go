package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"sort"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

// Bounds of a table's tags.
const (
	maxTableTags     = 50
	maxTableTagKey   = 100
	maxTableTagValue = 1000
	// tableRetries bounds the re-reads of a table or row whose conditional
	// write found it changed.
	tableRetries = 8
)

// loadTable reads the table of path {table} (name or id) of the call's bot
// and its schema.
func (s *server) loadTable(c *call, ref string) (dynamo.TableRecord, *tables.Schema, error) {
	rec, err := s.Store.GetTable(c.ctx, c.bot.ID, ref)
	if err != nil {
		return rec, nil, err
	}
	sc, err := tables.Load(rec.Schema, rec.State)
	return rec, sc, err
}

// wireTable is a table in its wire shape (tags always an object).
func wireTable(t platform.Table) platform.Table {
	if t.Tags == nil {
		t.Tags = map[string]string{}
	}
	return t
}

// tableCounts is the part of getTable's answer after the table.
func tableCounts(rec dynamo.TableRecord) map[string]any {
	return map[string]any{"table": wireTable(rec.Table), "rows": rec.Rows, "stale": rec.Stale, "indexing": 0}
}

func (s *server) listTables(c *call) (any, error) {
	tags := c.query().object("tags")
	recs, err := s.Store.ListTables(c.ctx, c.bot.ID)
	if err != nil {
		return nil, err
	}
	out := []platform.Table{}
	for _, r := range recs {
		match := true
		for k, v := range tags {
			if r.Tags[k] != v {
				match = false
				break
			}
		}
		if match {
			out = append(out, wireTable(r.Table))
		}
	}
	return map[string]any{"tables": out}, nil
}

func (s *server) getTable(c *call) (any, error) {
	rec, err := s.Store.GetTable(c.ctx, c.bot.ID, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	return tableCounts(rec), nil
}

// tableInput is the body of createTable, getOrCreateTable and updateTable.
type tableInput struct {
	Name             *string           `json:"name"`
	Factor           *float64          `json:"factor"`
	Frozen           *bool             `json:"frozen"`
	KeyColumn        json.RawMessage   `json:"keyColumn"` // absent, null, "" or a column
	Schema           json.RawMessage   `json:"schema"`
	Tags             map[string]string `json:"tags"`
	IsComputeEnabled *bool             `json:"isComputeEnabled"`
}

// keyColumn reads keyColumn: given reports whether it was in the body;
// null and "" mean no key column.
func (in tableInput) keyColumn() (name string, given bool, err error) {
	if in.KeyColumn == nil {
		return "", false, nil
	}
	if string(bytes.TrimSpace(in.KeyColumn)) == "null" {
		return "", true, nil
	}
	if err := json.Unmarshal(in.KeyColumn, &name); err != nil {
		return "", true, platform.Invalid("invalid body: field \"keyColumn\": must be a column name or null")
	}
	return name, true, nil
}

func checkFactor(f float64) (int, error) {
	if f != math.Trunc(f) || f < 1 || f > 30 {
		return 0, platform.Invalid("invalid body: field \"factor\": must be an integer from 1 to 30")
	}
	return int(f), nil
}

func checkTableTags(tags map[string]string) error {
	if len(tags) > maxTableTags {
		return platform.Invalid("invalid body: field \"tags\": at most %d tags", maxTableTags)
	}
	for k, v := range tags {
		if k == "" || len(k) > maxTableTagKey || len(v) > maxTableTagValue {
			return platform.Invalid("invalid body: field \"tags\": tag names have 1 to %d bytes and values at most %d", maxTableTagKey, maxTableTagValue)
		}
	}
	return nil
}

// newTable validates the definition of a new table named name.
func newTable(name string, in tableInput) (platform.Table, platform.TableState, error) {
	var t platform.Table
	if err := tables.CheckTableName(name); err != nil {
		return t, platform.TableState{}, err
	}
	schema, err := tables.Define(in.Schema)
	if err != nil {
		return t, platform.TableState{}, err
	}
	st, _ := schema.Bind(nil, platform.TableState{Index: platform.TableIndexReady, RowShards: platform.TableRowShards})
	t = platform.Table{
		ID: platform.NewID(platform.PrefixTable), Name: name, Factor: 1, Schema: schema.JSON(),
		Tags: map[string]string{}, CreatedAt: platform.Now(),
	}
	t.UpdatedAt = t.CreatedAt
	if in.Factor != nil {
		if t.Factor, err = checkFactor(*in.Factor); err != nil {
			return t, st, err
		}
	}
	if in.Frozen != nil {
		t.Frozen = *in.Frozen
	}
	if in.IsComputeEnabled != nil {
		t.IsComputeEnabled = *in.IsComputeEnabled
	}
	if in.Tags != nil {
		if err := checkTableTags(in.Tags); err != nil {
			return t, st, err
		}
		t.Tags = in.Tags
	}
	key, _, err := in.keyColumn()
	if err != nil {
		return t, st, err
	}
	if key != "" {
		if err := schema.CheckKeyColumn(key); err != nil {
			return t, st, err
		}
		t.KeyColumn, st.KeyIndex = key, newKeyIndexID()
	}
	return t, st, nil
}

// newKeyIndexID names a new key index (a table may rebuild its index
// under a new name while the old one is dropped).
func newKeyIndexID() string { return platform.NewID("") }

func (s *server) createTable(c *call) (any, error) {
	var in tableInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	name := ""
	if in.Name != nil {
		name = *in.Name
	}
	t, st, err := newTable(name, in)
	if err != nil {
		return nil, err
	}
	if err := s.Store.CreateTable(c.ctx, c.bot.ID, t, st, 0, 0, 0); err != nil {
		return nil, err
	}
	return map[string]any{"table": wireTable(t)}, nil
}

func (s *server) getOrCreateTable(c *call) (any, error) {
	var in tableInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	ref := c.PathValue("table")
	t, st, defErr := newTable(ref, in)
	for attempt := 0; attempt < 2; attempt++ {
		rec, err := s.Store.GetTable(c.ctx, c.bot.ID, ref)
		if err == nil {
			out := tableCounts(rec)
			out["created"] = false
			return out, nil
		}
		if platform.TypeOf(err) != platform.ErrResourceNotFound {
			return nil, err
		}
		if platform.HasPrefix(ref, platform.PrefixTable) {
			return nil, err // an id names an existing table only
		}
		if defErr != nil {
			return nil, defErr
		}
		err = s.Store.CreateTable(c.ctx, c.bot.ID, t, st, 0, 0, 0)
		if err == nil {
			return map[string]any{"table": wireTable(t), "created": true, "rows": 0, "stale": 0, "indexing": 0}, nil
		}
		if platform.TypeOf(err) != platform.ErrAlreadyExists {
			return nil, err
		}
		// Created concurrently: answer the table that won.
	}
	return nil, platform.Errorf(platform.ErrResourceLocked, "table %q is being created and deleted concurrently; try again", ref)
}

var errFrozen = func(name string) error {
	return platform.Errorf(platform.ErrResourceLocked, "table %q is frozen: its name and schema cannot change (duplicate it to change them)", name)
}

func (s *server) updateTable(c *call) (any, error) {
	var in tableInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	ref := c.PathValue("table")
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, prev, err := s.loadTable(c, ref)
		if err != nil {
			return nil, err
		}
		t, st, stale, err := applyTableUpdate(rec, prev, in)
		if err != nil {
			return nil, err
		}
		if sameTable(rec.Table, t) && reflect.DeepEqual(rec.State, st) {
			return map[string]any{"table": wireTable(rec.Table), "staleColumns": []string{}}, nil
		}
		if rec.Frozen {
			return nil, errFrozen(rec.Name)
		}
		t.UpdatedAt = platform.Now()
		err = s.Store.SaveTable(c.ctx, rec, t, st, len(stale) > 0)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if st.KeyIndex != rec.State.KeyIndex {
			if err := s.switchKeyIndex(c, rec, t, st); err != nil {
				return nil, err
			}
		}
		sort.Strings(stale)
		if stale == nil {
			stale = []string{}
		}
		return map[string]any{"table": wireTable(t), "staleColumns": stale}, nil
	}
	return nil, platform.Errorf(platform.ErrResourceLocked, "table %q keeps changing concurrently; try again", ref)
}

// applyTableUpdate computes a table after an updateTable body.
func applyTableUpdate(rec dynamo.TableRecord, prev *tables.Schema, in tableInput) (platform.Table, platform.TableState, []string, error) {
	t := rec.Table
	t.Tags = rec.Tags
	schema := prev
	var err error
	if in.Schema != nil {
		if schema, err = prev.Merge(in.Schema); err != nil {
			return t, rec.State, nil, err
		}
	}
	if in.Name != nil {
		if err := tables.CheckTableName(*in.Name); err != nil {
			return t, rec.State, nil, err
		}
		t.Name = *in.Name
	}
	if in.Factor != nil {
		f, err := checkFactor(*in.Factor)
		if err != nil {
			return t, rec.State, nil, err
		}
		if f < rec.Factor {
			return t, rec.State, nil, platform.Invalid("invalid body: field \"factor\": a table's factor can only grow (it is %d)", rec.Factor)
		}
		t.Factor = f
	}
	if in.Frozen != nil {
		if rec.Frozen && !*in.Frozen {
			return t, rec.State, nil, errFrozen(rec.Name)
		}
		t.Frozen = *in.Frozen
	}
	if in.IsComputeEnabled != nil {
		t.IsComputeEnabled = *in.IsComputeEnabled
	}
	if in.Tags != nil {
		if err := checkTableTags(in.Tags); err != nil {
			return t, rec.State, nil, err
		}
		t.Tags = in.Tags
	}
	key, given, err := in.keyColumn()
	if err != nil {
		return t, rec.State, nil, err
	}
	if !given {
		key = rec.KeyColumn
	}
	if key != "" {
		if err := schema.CheckKeyColumn(key); err != nil {
			if !given {
				return t, rec.State, nil, platform.Invalid("invalid schema: column %q is the key column; change keyColumn in the same update to remove or retype it", key)
			}
			return t, rec.State, nil, err
		}
	}
	st, stale := schema.Bind(prev, rec.State)
	t.KeyColumn = key
	switch {
	case key == "":
		st.KeyIndex = ""
	case key != rec.KeyColumn || rec.State.KeyIndex == "" ||
		prev.Column(key) == nil || schema.Column(key).ID != prev.Column(key).ID:
		st.KeyIndex = newKeyIndexID()
	}
	t.Schema = schema.JSON()
	return t, st, stale, nil
}

// sameTable reports whether two tables differ in nothing but updatedAt.
func sameTable(a, b platform.Table) bool {
	a.UpdatedAt, b.UpdatedAt = "", ""
	if len(a.Tags) == 0 && len(b.Tags) == 0 {
		a.Tags, b.Tags = nil, nil
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// switchKeyIndex builds the new key index of a table (every row's key
// value claimed; a duplicate value undoes the change with a 400) and drops
// the old one. Rows written meanwhile claim their values in the new index
// themselves, as the table they read has it.
func (s *server) switchKeyIndex(c *call, old dynamo.TableRecord, t platform.Table, st platform.TableState) error {
	if st.KeyIndex != "" {
		rec, schema, err := s.loadTable(c, t.ID)
		if err != nil {
			return err
		}
		col := schema.Column(t.KeyColumn)
		var dup error
		err = s.Store.QueryRows(c.ctx, rec.RowSet(), dynamo.RowScan{}, func(r *platform.TableRow) (bool, error) {
			v := tables.KeyValue(r.Values[col.ID])
			if v == "" {
				return true, nil
			}
			if err := tables.CheckKeyValue(col.Name, v); err != nil {
				dup = platform.Invalid("invalid keyColumn: row %d: %v", r.ID, err)
				return false, nil
			}
			owner, err := s.claimKey(c, rec, col, v, r.ID)
			if err != nil {
				return false, err
			}
			if owner != r.ID {
				dup = platform.Invalid("invalid keyColumn: column %q cannot be the key column: rows %d and %d both hold %s", col.Name, owner, r.ID, v)
				return false, nil
			}
			return true, nil
		})
		if err == nil && dup != nil {
			err = dup
			s.undoKeyColumn(c, t.ID, st.KeyIndex, old)
		}
		if err != nil {
			_ = s.Store.DropKeyIndex(c.ctx, t.ID, st.KeyIndex)
			return err
		}
	}
	if old.State.KeyIndex != "" {
		return s.Store.DropKeyIndex(c.ctx, t.ID, old.State.KeyIndex)
	}
	return nil
}

// undoKeyColumn restores the key column a failed index build replaced,
// unless the table changed again meanwhile.
func (s *server) undoKeyColumn(c *call, tableID, failedIndex string, old dynamo.TableRecord) {
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, err := s.Store.GetTable(c.ctx, c.bot.ID, tableID)
		if err != nil || rec.State.KeyIndex != failedIndex {
			return
		}
		// The old index is only dropped once the new one is built, so it
		// is still there to return to (unless its column went meanwhile).
		t, st := rec.Table, rec.State
		t.KeyColumn, st.KeyIndex = old.KeyColumn, old.State.KeyIndex
		if schema, err := tables.Load(rec.Schema, rec.State); err != nil || (old.KeyColumn != "" && schema.CheckKeyColumn(old.KeyColumn) != nil) {
			t.KeyColumn, st.KeyIndex = "", ""
		}
		err = s.Store.SaveTable(c.ctx, rec, t, st, false)
		if !errors.Is(err, dynamo.ErrVersionConflict) {
			return
		}
	}
}

func (s *server) deleteTable(c *call) (any, error) {
	rec, err := s.Store.GetTable(c.ctx, c.bot.ID, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	return nil, s.Store.DeleteTable(c.ctx, rec)
}

func (s *server) renameTableColumn(c *call) (any, error) {
	var in struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	ref := c.PathValue("table")
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, schema, err := s.loadTable(c, ref)
		if err != nil {
			return nil, err
		}
		if rec.Frozen {
			return nil, errFrozen(rec.Name)
		}
		renamed, err := schema.Rename(in.Name, in.NewName)
		if err != nil {
			return nil, err
		}
		t, st := rec.Table, rec.State
		st.Columns = map[string]platform.TableColumn{}
		for name, col := range rec.State.Columns {
			if name == in.Name {
				name = in.NewName
			}
			st.Columns[name] = col
		}
		if t.KeyColumn == in.Name {
			t.KeyColumn = in.NewName
		}
		t.Schema, t.UpdatedAt = renamed.JSON(), platform.Now()
		err = s.Store.SaveTable(c.ctx, rec, t, st, false)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return map[string]any{"table": wireTable(t)}, nil
	}
	return nil, platform.Errorf(platform.ErrResourceLocked, "table %q keeps changing concurrently; try again", ref)
}
