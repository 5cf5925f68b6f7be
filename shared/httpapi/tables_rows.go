package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

const (
	// rowWorkers bounds the concurrent per-row DynamoDB calls of one
	// request (conditional updates, deletes, key claims).
	rowWorkers = 16
	// keyClaimGrace is how old a key claim without its row must be before
	// another row may take it over (younger, it may be a write in progress).
	keyClaimGrace = time.Minute
)

// writable refuses row writes on a table a duplicate is still filling.
func writable(rec dynamo.TableRecord) error {
	if rec.State.FillJob != "" {
		return platform.Errorf(platform.ErrResourceLocked, "table %q is being filled by duplicate job %s: its rows can change once getTableJobs reports the job completed", rec.Name, rec.State.FillJob)
	}
	return nil
}

// parallel runs fn(0..n-1), at most workers at a time.
func parallel(n, workers int, fn func(i int)) {
	var wg sync.WaitGroup
	var next atomic.Int64
	for w := 0; w < min(workers, n); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// firstErr keeps the first error of parallel work.
type firstErr struct {
	mu  sync.Mutex
	err error
}

func (f *firstErr) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstErr) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// rowReport collects the per-row warnings and errors of a partial-success
// operation.
type rowReport struct {
	mu        sync.Mutex
	warnings  []string
	errors    []string
	notFounds int
}

func (r *rowReport) warn(i int, ws []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range ws {
		r.warnings = append(r.warnings, fmt.Sprintf("rows[%d]: %s", i, w))
	}
}

func (r *rowReport) fail(i int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf("rows[%d]: %s", i, err.Error()))
	var nf rowNotFound
	if errors.As(err, &nf) {
		r.notFounds++
	}
}

// lists returns warnings and errors in row order, never nil.
func (r *rowReport) lists() ([]string, []string) {
	byRow := func(l []string) []string {
		out := append([]string{}, l...)
		sort.SliceStable(out, func(i, j int) bool { return rowIndex(out[i]) < rowIndex(out[j]) })
		return out
	}
	return byRow(r.warnings), byRow(r.errors)
}

func rowIndex(msg string) int {
	end := strings.IndexByte(msg, ']')
	n, _ := strconv.Atoi(msg[len("rows["):max(end, len("rows["))])
	return n
}

// allFailed is the answer when no row of a request succeeded: a 400 (a
// 404 when every row was missing) listing the first errors.
func (r *rowReport) allFailed(what string) error {
	_, errs := r.lists()
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Sprintf("and %d more", len(errs)-5))
	}
	msg := fmt.Sprintf("no row was %s: %s", what, strings.Join(errs, "; "))
	if r.notFounds == len(r.errors) {
		return platform.Errorf(platform.ErrResourceNotFound, "%s", msg)
	}
	return platform.Invalid("%s", msg)
}

// rowNotFound is a row error for a missing row.
type rowNotFound struct{ id int64 }

func (e rowNotFound) Error() string { return fmt.Sprintf("row %d not found", e.id) }

// keyConflict is a row error for a key column value another row holds.
type keyConflict struct {
	column, value string
	owner         int64
}

func (e keyConflict) Error() string {
	return fmt.Sprintf("column %q: row %d already holds %s: key column values are unique", e.column, e.owner, e.value)
}

// isRowError reports whether err concerns one row only.
func isRowError(err error) bool {
	var re *tables.RowError
	var nf rowNotFound
	var kc keyConflict
	return errors.As(err, &re) || errors.As(err, &nf) || errors.As(err, &kc)
}

// keyColumn is the table's indexed key column, or nil.
func keyColumn(rec dynamo.TableRecord, schema *tables.Schema) *tables.Column {
	if rec.KeyColumn == "" || rec.State.KeyIndex == "" {
		return nil
	}
	return schema.Column(rec.KeyColumn)
}

// claimKey claims a key value for row id in the table's key index. When
// another row holds the claim but not the value (a claim left by an
// interrupted write), the claim is taken over once old enough. It returns
// the owner: id, or the row holding the value.
func (s *server) claimKey(c *call, rec dynamo.TableRecord, col *tables.Column, v string, id int64) (int64, error) {
	for attempt := 0; attempt < 3; attempt++ {
		owner, err := s.Store.ClaimKey(c.ctx, rec.ID, rec.State.KeyIndex, v, id)
		if err != nil || owner == id {
			return owner, err
		}
		r, ok, err := s.Store.GetRow(c.ctx, rec.RowSet(), owner)
		if err != nil {
			return 0, err
		}
		if ok && tables.KeyValue(r.Values[col.ID]) == v {
			return owner, nil
		}
		took, err := s.Store.TakeKey(c.ctx, rec.ID, rec.State.KeyIndex, v, owner, id, keyClaimGrace)
		if err != nil || took {
			return id, err
		}
		if !ok {
			return owner, nil // a young claim: its row is being written
		}
	}
	return 0, platform.Errorf(platform.ErrResourceLocked, "the key value %s is changing concurrently; try again", v)
}

// pendingRow is a validated row of a request, by its index in the request.
type pendingRow struct {
	index int
	vals  tables.Values
}

// doneRow is a row written, by its index in the request.
type doneRow struct {
	index int
	row   platform.TableRow
}

// insertRows creates validated rows: one atomic ADD reserves their ids,
// key values are claimed, and transactions of up to 99 rows write them
// with the table's row and stale counts (exact after any crash). ErrVersionConflict: the table changed since it was read
// (re-read it and validate again).
func (s *server) insertRows(c *call, rec dynamo.TableRecord, schema *tables.Schema, pending []pendingRow, rep *rowReport) ([]doneRow, error) {
	col := keyColumn(rec, schema)
	if col != nil {
		seen := map[string]int{}
		kept := pending[:0:0]
		for _, p := range pending {
			if v := tables.KeyValue(p.vals[col.ID]); v != "" {
				if err := tables.CheckKeyValue(col.Name, v); err != nil {
					rep.fail(p.index, err)
					continue
				}
				if j, dup := seen[v]; dup {
					rep.fail(p.index, &tables.RowError{Msg: fmt.Sprintf("column %q: rows[%d] also holds %s: key column values are unique", col.Name, j, v)})
					continue
				}
				seen[v] = p.index
			}
			kept = append(kept, p)
		}
		pending = kept
	}
	if len(pending) == 0 {
		return nil, nil
	}
	now := platform.Now()
	rows := make([]platform.TableRow, len(pending))
	for k, p := range pending {
		rows[k] = schema.NewRow(0, now, p.vals)
	}
	n := int64(len(rows))
	last, err := s.Store.ReserveRowIDs(c.ctx, rec, n)
	if errors.Is(err, dynamo.ErrVersionConflict) && rec.NextID+n > platform.MaxTableRowID {
		return nil, platform.Errorf(platform.ErrLimitExceeded, "table %q has used its %d row ids", rec.Name, platform.MaxTableRowID)
	}
	if err != nil {
		return nil, err
	}
	for k := range rows {
		rows[k].ID = last - n + 1 + int64(k)
	}
	keep := make([]bool, len(rows))
	for k := range keep {
		keep[k] = true
	}
	if col != nil {
		var ferr firstErr
		parallel(len(rows), rowWorkers, func(k int) {
			v := tables.KeyValue(rows[k].Values[col.ID])
			if v == "" {
				return
			}
			owner, err := s.claimKey(c, rec, col, v, rows[k].ID)
			switch {
			case err != nil:
				ferr.set(err)
			case owner != rows[k].ID:
				keep[k] = false
				rep.fail(pending[k].index, keyConflict{column: col.Name, value: v, owner: owner})
			}
		})
		if err := ferr.get(); err != nil {
			s.abandonRows(c, rec, col, rows, keep)
			return nil, err
		}
	}
	var out []doneRow
	var write []platform.TableRow
	var stale []bool
	for k, r := range rows {
		if !keep[k] {
			continue
		}
		write = append(write, r)
		stale = append(stale, schema.IsStale(r))
		out = append(out, doneRow{index: pending[k].index, row: r})
	}
	var keys [][]platform.TableIndexKey
	if keysOf := indexKeys(rec, schema); keysOf != nil {
		keys = make([][]platform.TableIndexKey, len(write))
		for k := range write {
			keys[k] = keysOf(&write[k])
		}
	}
	if err := s.Store.InsertRows(c.ctx, rec, write, stale, keys); err != nil {
		s.abandonRows(c, rec, col, rows, keep)
		return nil, err
	}
	return out, nil
}

// abandonRows undoes what insertRows did for rows it could not write:
// their key claims (best effort: the request fails anyway; rows written
// by transactions that did commit are counted).
func (s *server) abandonRows(c *call, rec dynamo.TableRecord, col *tables.Column, rows []platform.TableRow, keep []bool) {
	ctx := context.WithoutCancel(c.ctx)
	for k, r := range rows {
		if !keep[k] || col == nil {
			continue
		}
		if v := tables.KeyValue(r.Values[col.ID]); v != "" {
			_ = s.Store.ReleaseKey(ctx, rec.ID, rec.State.KeyIndex, v, r.ID)
		}
	}
}

// pendingUpdate is a validated change of an existing row.
type pendingUpdate struct {
	index int
	id    int64
	vals  tables.Values
}

// updateRows applies changes to existing rows, each with a conditional
// write on the row's version, re-reading and re-applying the change when
// the row changed meanwhile (so concurrent changes of one row all land).
// An error affects only its row.
func (s *server) updateRows(c *call, rec dynamo.TableRecord, schema *tables.Schema, updates []pendingUpdate, rep *rowReport) ([]doneRow, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(updates))
	for k, u := range updates {
		ids[k] = u.id
	}
	current, err := s.Store.GetRows(c.ctx, rec.RowSet(), ids)
	if err != nil {
		return nil, err
	}
	col := keyColumn(rec, schema)
	keysOf := indexKeys(rec, schema)
	now := platform.Now()
	results := make([]*platform.TableRow, len(updates))
	var ferr firstErr
	parallel(len(updates), rowWorkers, func(k int) {
		u := updates[k]
		rr, ok := current[u.id]
		for attempt := 0; attempt < tableRetries; attempt++ {
			if !ok {
				rep.fail(u.index, rowNotFound{u.id})
				return
			}
			next := schema.Patch(rr.TableRow, u.vals, now)
			if err := schema.CheckSize(next.Values, rec.Factor); err != nil {
				rep.fail(u.index, err)
				return
			}
			oldV, newV := "", ""
			if col != nil {
				oldV, newV = tables.KeyValue(rr.Values[col.ID]), tables.KeyValue(next.Values[col.ID])
				if newV != oldV && newV != "" {
					if err := tables.CheckKeyValue(col.Name, newV); err != nil {
						rep.fail(u.index, err)
						return
					}
					owner, err := s.claimKey(c, rec, col, newV, u.id)
					if err != nil {
						ferr.set(err)
						return
					}
					if owner != u.id {
						rep.fail(u.index, keyConflict{column: col.Name, value: newV, owner: owner})
						return
					}
				}
			}
			delta := b2i(schema.IsStale(next)) - b2i(schema.IsStale(rr.TableRow))
			var oldKeys, newKeys []platform.TableIndexKey
			if keysOf != nil {
				oldKeys, newKeys = keysOf(&rr.TableRow), keysOf(&next)
			}
			err := s.Store.ReplaceRow(c.ctx, rec, next, rr.Ver, delta, oldKeys, newKeys)
			if errors.Is(err, dynamo.ErrVersionConflict) {
				if col != nil && newV != oldV && newV != "" {
					_ = s.Store.ReleaseKey(c.ctx, rec.ID, rec.State.KeyIndex, newV, u.id)
				}
				rr, ok, err = s.Store.GetRow(c.ctx, rec.RowSet(), u.id)
				if err != nil {
					ferr.set(err)
					return
				}
				continue
			}
			if err != nil {
				ferr.set(err)
				return
			}
			if col != nil && newV != oldV && oldV != "" {
				if err := s.Store.ReleaseKey(c.ctx, rec.ID, rec.State.KeyIndex, oldV, u.id); err != nil {
					ferr.set(err)
				}
			}
			results[k] = &next
			return
		}
		rep.fail(u.index, &tables.RowError{Msg: fmt.Sprintf("row %d keeps changing concurrently; try again", u.id)})
	})
	if err := ferr.get(); err != nil {
		return nil, err
	}
	var out []doneRow
	for k, r := range results {
		if r != nil {
			out = append(out, doneRow{index: updates[k].index, row: *r})
		}
	}
	return out, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// wireRows renders written rows in request order.
func wireRows(schema *tables.Schema, done []doneRow) []tables.Row {
	sort.Slice(done, func(i, j int) bool { return done[i].index < done[j].index })
	out := make([]tables.Row, 0, len(done))
	for _, d := range done {
		out = append(out, schema.Wire(d.row))
	}
	return out
}

// rowsInput is the body of createTableRows, updateTableRows and
// upsertTableRows.
type rowsInput struct {
	Rows         []map[string]json.RawMessage `json:"rows"`
	WaitComputed *bool                        `json:"waitComputed"`
	KeyColumn    *string                      `json:"keyColumn"`
}

func waitComputedWarning(in rowsInput, schema *tables.Schema, rep *rowReport) {
	if in.WaitComputed != nil && *in.WaitComputed && schema.HasComputed() {
		rep.warnings = append(rep.warnings, "waitComputed: this platform does not run computations; computed values stay stale until a value is written for them")
	}
}

func (s *server) createTableRows(c *call) (any, error) {
	var in rowsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.KeyColumn != nil {
		return nil, platform.Invalid("invalid body: field \"keyColumn\": not allowed")
	}
	ref := c.PathValue("table")
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, schema, err := s.loadTable(c, ref)
		if err != nil {
			return nil, err
		}
		if err := writable(rec); err != nil {
			return nil, err
		}
		rep := &rowReport{}
		var pending []pendingRow
		for i, raw := range in.Rows {
			vals, warnings, err := schema.CheckRow(raw, true)
			if err == nil {
				err = schema.CheckSize(vals, rec.Factor)
			}
			if err != nil {
				if !isRowError(err) {
					return nil, err
				}
				rep.fail(i, err)
				continue
			}
			rep.warn(i, warnings)
			pending = append(pending, pendingRow{index: i, vals: vals})
		}
		done, err := s.insertRows(c, rec, schema, pending, rep)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if len(done) == 0 {
			return nil, rep.allFailed("created")
		}
		waitComputedWarning(in, schema, rep)
		warnings, errs := rep.lists()
		return map[string]any{"rows": wireRows(schema, done), "warnings": warnings, "errors": errs}, nil
	}
	return nil, platform.Errorf(platform.ErrResourceLocked, "table %q keeps changing concurrently; try again", ref)
}

// rowID reads the id member of an input row.
func rowID(raw map[string]json.RawMessage) (int64, bool, error) {
	v, ok := raw["id"]
	if !ok || string(v) == "null" {
		return 0, false, nil
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil || f != math.Trunc(f) || f < 1 || f > platform.MaxTableRowID {
		return 0, true, &tables.RowError{Msg: fmt.Sprintf("id %s is not a row id (an integer from 1 to %d)", v, platform.MaxTableRowID)}
	}
	return int64(f), true, nil
}

func (s *server) updateTableRows(c *call) (any, error) {
	var in rowsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.KeyColumn != nil {
		return nil, platform.Invalid("invalid body: field \"keyColumn\": not allowed")
	}
	rec, schema, err := s.loadTable(c, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	if err := writable(rec); err != nil {
		return nil, err
	}
	rep := &rowReport{}
	var updates []pendingUpdate
	seen := map[int64]int{}
	for i, raw := range in.Rows {
		id, _, err := rowID(raw)
		if err == nil && id == 0 {
			err = &tables.RowError{Msg: "id is required: it names the row to update"}
		}
		if err == nil {
			if j, dup := seen[id]; dup {
				err = &tables.RowError{Msg: fmt.Sprintf("row %d is already updated by rows[%d] of this request", id, j)}
			}
		}
		var vals tables.Values
		var warnings []string
		if err == nil {
			vals, warnings, err = schema.CheckRow(raw, false)
		}
		if err != nil {
			if !isRowError(err) {
				return nil, err
			}
			rep.fail(i, err)
			continue
		}
		seen[id] = i
		rep.warn(i, warnings)
		updates = append(updates, pendingUpdate{index: i, id: id, vals: vals})
	}
	done, err := s.updateRows(c, rec, schema, updates, rep)
	if err != nil {
		return nil, err
	}
	if len(done) == 0 {
		return nil, rep.allFailed("updated")
	}
	waitComputedWarning(in, schema, rep)
	warnings, errs := rep.lists()
	return map[string]any{"rows": wireRows(schema, done), "warnings": warnings, "errors": errs}, nil
}

func (s *server) upsertTableRows(c *call) (any, error) {
	var in rowsInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	keyName := "id"
	if in.KeyColumn != nil {
		keyName = *in.KeyColumn
	}
	ref := c.PathValue("table")
	for attempt := 0; attempt < tableRetries; attempt++ {
		rec, schema, err := s.loadTable(c, ref)
		if err != nil {
			return nil, err
		}
		if err := writable(rec); err != nil {
			return nil, err
		}
		res, err := s.upsert(c, rec, schema, in, keyName)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		return res, err
	}
	return nil, platform.Errorf(platform.ErrResourceLocked, "table %q keeps changing concurrently; try again", ref)
}

// upsert inserts the rows whose key matches no row and updates the others.
func (s *server) upsert(c *call, rec dynamo.TableRecord, schema *tables.Schema, in rowsInput, keyName string) (any, error) {
	rep := &rowReport{}
	var col *tables.Column
	if keyName != "id" {
		col = schema.Column(keyName)
		if col == nil {
			return nil, platform.Invalid("invalid body: field \"keyColumn\": %q is not a column of the table", keyName)
		}
		if col.Type == tables.TypeObject || col.Type == tables.TypeArray {
			return nil, platform.Invalid("invalid body: field \"keyColumn\": column %q holds %ss; upsert by a string, number or boolean column", keyName, col.Type)
		}
	}
	// The key of each row: its id, or its key column value.
	ids := make([]int64, len(in.Rows))
	keys := make([]string, len(in.Rows))
	valid := make([]bool, len(in.Rows))
	seen := map[string]int{}
	for i, raw := range in.Rows {
		var k string
		if col == nil {
			id, _, err := rowID(raw)
			if err != nil {
				rep.fail(i, err)
				continue
			}
			ids[i] = id
			if id > 0 {
				k = strconv.FormatInt(id, 10)
			}
		} else {
			if v, given := raw[keyName]; given {
				vals, _, err := schema.CheckRow(map[string]json.RawMessage{keyName: v}, false)
				if err != nil {
					if !isRowError(err) {
						return nil, err
					}
					rep.fail(i, err)
					continue
				}
				k = tables.KeyValue(vals[col.ID])
			}
			if k == "" {
				rep.fail(i, &tables.RowError{Msg: fmt.Sprintf("the key column %q has no value", keyName)})
				continue
			}
		}
		if k != "" {
			if j, dup := seen[k]; dup {
				rep.fail(i, &tables.RowError{Msg: fmt.Sprintf("rows[%d] has the same key (%s = %s)", j, keyName, k)})
				continue
			}
			seen[k] = i
		}
		keys[i], valid[i] = k, true
	}
	// Find the rows the keys name.
	owner := map[string]int64{}
	switch {
	case col == nil:
		var want []int64
		for i := range in.Rows {
			if valid[i] && ids[i] > 0 {
				want = append(want, ids[i])
			}
		}
		found, err := s.Store.GetRows(c.ctx, rec.RowSet(), want)
		if err != nil {
			return nil, err
		}
		for id := range found {
			owner[strconv.FormatInt(id, 10)] = id
		}
	case keyColumn(rec, schema) == col:
		var values []string
		for i, k := range keys {
			if valid[i] {
				values = append(values, k)
			}
		}
		owners, err := s.Store.LookupKeys(c.ctx, rec.ID, rec.State.KeyIndex, values)
		if err != nil {
			return nil, err
		}
		var rowIDs []int64
		for _, id := range owners {
			rowIDs = append(rowIDs, id)
		}
		rows, err := s.Store.GetRows(c.ctx, rec.RowSet(), rowIDs)
		if err != nil {
			return nil, err
		}
		for v, id := range owners {
			if r, ok := rows[id]; ok && tables.KeyValue(r.Values[col.ID]) == v {
				owner[v] = id
			}
		}
	default:
		// Not the key column: the rows holding each value, through the
		// column index, or in one pass over the table's rows.
		dups := map[string]bool{}
		add := func(r *platform.TableRow) {
			v := tables.KeyValue(r.Values[col.ID])
			if _, wanted := seen[v]; !wanted || v == "" {
				return
			}
			if id, twice := owner[v]; twice && id != r.ID {
				dups[v] = true
			}
			owner[v] = r.ID
		}
		served, err := s.upsertOwnersByIndex(c, rec, col, seen, add)
		if err != nil {
			return nil, err
		}
		if !served {
			rep.warnings = append(rep.warnings, fmt.Sprintf("upsert by %q, which is not the table's keyColumn, reads every row of the table (its column index is not built yet); set keyColumn to %q to make its values unique", keyName, keyName))
			err := s.Store.QueryRows(c.ctx, rec.RowSet(), dynamo.RowScan{}, func(r *platform.TableRow) (bool, error) {
				add(r)
				return true, nil
			})
			if err != nil {
				return nil, err
			}
		}
		for v := range dups {
			i := seen[v]
			valid[i] = false
			rep.fail(i, &tables.RowError{Msg: fmt.Sprintf("several rows hold %s = %s: upsert cannot tell which to update", keyName, v)})
		}
	}
	// Validate as inserts or updates.
	var inserts []pendingRow
	var updates []pendingUpdate
	for i, raw := range in.Rows {
		if !valid[i] {
			continue
		}
		id, exists := owner[keys[i]]
		if col == nil && ids[i] > 0 && !exists {
			rep.warn(i, []string{fmt.Sprintf("row %d does not exist: the row was inserted with a new id", ids[i])})
		}
		vals, warnings, err := schema.CheckRow(raw, !exists)
		if err == nil && !exists {
			err = schema.CheckSize(vals, rec.Factor)
		}
		if err != nil {
			if !isRowError(err) {
				return nil, err
			}
			rep.fail(i, err)
			continue
		}
		if col == nil {
			warnings = dropIDWarning(warnings)
		}
		rep.warn(i, warnings)
		if exists {
			updates = append(updates, pendingUpdate{index: i, id: id, vals: vals})
		} else {
			inserts = append(inserts, pendingRow{index: i, vals: vals})
		}
	}
	// Inserts first: a version conflict there retries the whole request
	// before anything is written.
	conflictRep := &rowReport{}
	inserted, err := s.insertRows(c, rec, schema, inserts, conflictRep)
	if err != nil {
		return nil, err
	}
	// An insert that lost its key to a concurrent upsert updates the row
	// that won.
	byIndex := map[int]pendingRow{}
	for _, p := range inserts {
		byIndex[p.index] = p
	}
	for _, msg := range conflictRep.errors {
		i := rowIndex(msg)
		p := byIndex[i]
		if col != nil {
			if id, ok := s.lookupOwner(c, rec, schema, col, keys[i]); ok {
				updates = append(updates, pendingUpdate{index: i, id: id, vals: p.vals})
				continue
			}
		}
		rep.mu.Lock()
		rep.errors = append(rep.errors, msg)
		rep.mu.Unlock()
	}
	updated, err := s.updateRows(c, rec, schema, updates, rep)
	if err != nil {
		return nil, err
	}
	if len(inserted) == 0 && len(updated) == 0 {
		return nil, rep.allFailed("inserted or updated")
	}
	waitComputedWarning(in, schema, rep)
	warnings, errs := rep.lists()
	return map[string]any{
		"inserted": wireRows(schema, inserted), "updated": wireRows(schema, updated),
		"warnings": warnings, "errors": errs,
	}, nil
}

// dropIDWarning removes the warning about an ignored id, which upsert by
// id reads.
func dropIDWarning(ws []string) []string {
	out := ws[:0:0]
	for _, w := range ws {
		if !strings.HasPrefix(w, `"id" `) {
			out = append(out, w)
		}
	}
	return out
}

// lookupOwner finds the row holding a key value through the key index.
// The claim is taken before the row is written, so a concurrent insert's
// row may not be there yet: it is waited for (a few short pauses).
func (s *server) lookupOwner(c *call, rec dynamo.TableRecord, schema *tables.Schema, col *tables.Column, v string) (int64, bool) {
	if keyColumn(rec, schema) != col {
		return 0, false
	}
	owners, err := s.Store.LookupKeys(c.ctx, rec.ID, rec.State.KeyIndex, []string{v})
	if err != nil || owners[v] == 0 {
		return 0, false
	}
	for wait := 0; wait < 20; wait++ {
		if _, ok, err := s.Store.GetRow(c.ctx, rec.RowSet(), owners[v]); err != nil || ok {
			break
		}
		select {
		case <-c.ctx.Done():
			return owners[v], true
		case <-time.After(time.Duration(5*(wait+1)) * time.Millisecond):
		}
	}
	return owners[v], true
}

func (s *server) deleteTableRows(c *call) (any, error) {
	var in struct {
		IDs           []float64       `json:"ids"`
		Filter        json.RawMessage `json:"filter"`
		DeleteAllRows *bool           `json:"deleteAllRows"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	hasFilter := len(in.Filter) > 0 && string(in.Filter) != "null"
	all := in.DeleteAllRows != nil && *in.DeleteAllRows
	given := 0
	for _, b := range []bool{len(in.IDs) > 0, hasFilter, all} {
		if b {
			given++
		}
	}
	if given != 1 {
		return nil, platform.Invalid("invalid body: give exactly one of ids (non-empty), filter, or deleteAllRows: true")
	}
	rec, schema, err := s.loadTable(c, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	if err := writable(rec); err != nil {
		return nil, err
	}
	var ids []int64
	switch {
	case len(in.IDs) > 0:
		seen := map[int64]bool{}
		for _, f := range in.IDs {
			if f != math.Trunc(f) || f < 1 {
				return nil, platform.Invalid("invalid body: field \"ids\": %v is not a row id", f)
			}
			if id := int64(f); !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	default:
		var f *tables.Filter
		if hasFilter {
			if f, err = tables.ParseFilter(in.Filter, schema); err != nil {
				return nil, err
			}
		}
		sc := tables.Scan{Needles: f.Needles(), Index: f.Index()}
		err := (tableRows{st: s.Store, rec: rec}).ScanRows(c.ctx, sc, func(r *platform.TableRow) (bool, error) {
			if f.Match(schema, r) {
				ids = append(ids, r.ID)
			}
			return true, nil
		})
		if err != nil {
			return nil, err
		}
	}
	n, err := s.deleteRows(c, rec, schema, ids)
	if err != nil {
		return nil, err
	}
	return map[string]any{"deletedRows": n}, nil
}

// deleteRows deletes rows by id: they are read (BatchGetItem), then
// deleted in transactions that also uncount them (each deleted row is
// counted once, even against concurrent deletes, and the counts stay exact
// after a crash), and their key values released.
func (s *server) deleteRows(c *call, rec dynamo.TableRecord, schema *tables.Schema, ids []int64) (int64, error) {
	col := keyColumn(rec, schema)
	var deleted int64
	for len(ids) > 0 {
		n := min(len(ids), 1000)
		got, err := s.Store.GetRows(c.ctx, rec.RowSet(), ids[:n])
		ids = ids[n:]
		if err != nil {
			return deleted, err
		}
		rows := make([]dynamo.RowRecord, 0, len(got))
		for _, r := range got {
			rows = append(rows, r)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
		gone, err := s.Store.DeleteRows(c.ctx, rec, rows, schema.IsStale, indexKeys(rec, schema), schema.IndexedColumns())
		deleted += int64(len(gone))
		if err != nil {
			return deleted, err
		}
		if col == nil {
			continue
		}
		var ferr firstErr
		parallel(len(gone), rowWorkers, func(k int) {
			if v := tables.KeyValue(gone[k].Values[col.ID]); v != "" {
				if err := s.Store.ReleaseKey(c.ctx, rec.ID, rec.State.KeyIndex, v, gone[k].ID); err != nil {
					ferr.set(err)
				}
			}
		})
		if err := ferr.get(); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

func (s *server) getTableRow(c *call) (any, error) {
	q := c.query()
	raw, err := q.str("id")
	if err != nil {
		return nil, err
	}
	if raw == "" {
		return nil, platform.Invalid("query parameter \"id\" (the row id) is required")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id < 1 || id > platform.MaxTableRowID {
		return nil, platform.Invalid("query parameter \"id\" must be a row id (an integer from 1 to %d)", platform.MaxTableRowID)
	}
	rec, schema, err := s.loadTable(c, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	r, ok, err := s.Store.GetRow(c.ctx, rec.RowSet(), id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, platform.NotFound("row", raw)
	}
	return map[string]any{"row": schema.Wire(r.TableRow)}, nil
}

func (s *server) findTableRows(c *call) (any, error) {
	var in struct {
		Limit          *int            `json:"limit"`
		Offset         *int            `json:"offset"`
		Filter         json.RawMessage `json:"filter"`
		Group          json.RawMessage `json:"group"`
		Search         *string         `json:"search"`
		Select         []string        `json:"select"`
		OrderBy        *string         `json:"orderBy"`
		OrderDirection *string         `json:"orderDirection"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	rec, schema, err := s.loadTable(c, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	q := tables.Query{Limit: tables.DefaultLimit, OrderBy: "id"}
	warnings := []string{}
	if in.Limit != nil {
		q.Limit = *in.Limit
	}
	if in.Offset != nil {
		q.Offset = *in.Offset
	}
	if q.Limit < 1 || q.Limit > tables.MaxLimit {
		return nil, platform.Invalid("invalid body: field \"limit\": must be from 1 to %d", tables.MaxLimit)
	}
	if q.Offset < 0 {
		return nil, platform.Invalid("invalid body: field \"offset\": must not be negative")
	}
	if in.OrderDirection != nil {
		q.Desc = *in.OrderDirection == "desc"
	}
	if len(in.Filter) > 0 && string(in.Filter) != "null" {
		if q.Filter, err = tables.ParseFilter(in.Filter, schema); err != nil {
			return nil, err
		}
		warnings = append(warnings, q.Filter.Warnings()...)
	}
	if len(in.Group) > 0 && string(in.Group) != "null" {
		if q.Group, err = tables.ParseGroup(in.Group, schema); err != nil {
			return nil, err
		}
	}
	if in.Search != nil && strings.TrimSpace(*in.Search) != "" {
		if q.Group != nil {
			warnings = append(warnings, "search is ignored when grouping")
		} else {
			if q.Search, err = tables.ParseSearch(*in.Search, schema); err != nil {
				return nil, err
			}
			if q.Search == nil {
				warnings = append(warnings, "search has no word (letters or digits): rows come in the requested order")
			} else {
				warnings = append(warnings, q.Search.Warnings()...)
			}
		}
	}
	if in.Select != nil {
		if q.Group != nil {
			warnings = append(warnings, "select is ignored when grouping: grouped rows hold the group's fields")
		} else {
			var w []string
			if q.Select, w, err = tables.ParseSelect(in.Select, schema); err != nil {
				return nil, err
			}
			warnings = append(warnings, w...)
		}
	}
	if in.OrderBy != nil && *in.OrderBy != "" {
		q.OrderBy = *in.OrderBy
		if err := tables.CheckOrderBy(q.OrderBy, schema, q.Group); err != nil {
			return nil, err
		}
		if q.Search != nil && q.OrderBy != "id" {
			warnings = append(warnings, "orderBy is ignored when searching: rows come by similarity, best first")
		}
	}
	res, err := tables.Find(c.ctx, tableRows{st: s.Store, rec: rec}, schema, q)
	if err != nil {
		return nil, err
	}
	rows := res.Rows
	if rows == nil {
		rows = []tables.Row{}
	}
	return map[string]any{"rows": rows, "hasMore": res.HasMore, "offset": q.Offset, "limit": q.Limit, "warnings": warnings}, nil
}
