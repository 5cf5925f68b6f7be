package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

// indexKeys returns how a table's row writes compute the row's column
// index entries (docs/tables.md, "Indexed filters"), or nil when the table
// does not maintain the index (written before the index existed, and not
// yet migrated: tablemigrate).
func indexKeys(rec dynamo.TableRecord, schema *tables.Schema) func(*platform.TableRow) []platform.TableIndexKey {
	if rec.State.Index == platform.TableIndexNone {
		return nil
	}
	return schema.IndexKeys
}

// tableRows is the rows of one table as a tables.RowSource: through the
// column index when the scan names a lookup and the table's index is
// complete, else a Query pass over the table's rows.
type tableRows struct {
	st  *dynamo.Store
	rec dynamo.TableRecord
}

// A find through the index reads rows by BatchGetItem, first rowBatchMin
// at a time, then twice as many each call up to DynamoDB's most (100): a
// page that needs few rows reads few more.
const (
	rowBatchMin = 16
	rowBatch    = 100
)

func (t tableRows) ScanRows(ctx context.Context, sc tables.Scan, fn func(r *platform.TableRow) (bool, error)) error {
	if sc.Index != nil && t.rec.State.Index == platform.TableIndexReady {
		err := t.scanIndex(ctx, sc, fn)
		if !errors.Is(err, dynamo.ErrTooManyCandidates) {
			return err
		}
	}
	return t.st.QueryRows(ctx, t.rec.RowSet(), dynamo.RowScan{Descending: sc.Descending, Limit: sc.Want, Needles: sc.Needles, After: sc.After, Before: sc.Before}, fn)
}

// maxCandidates bounds the candidates of a lookup read before any row
// (several values or a range: their ids must be sorted first). Past it
// the filter is not selective, and reading the table costs less than
// reading each candidate (BatchGetItem bills each row as a 4 KB read; a
// Query bills 4 KB of rows).
func (t tableRows) maxCandidates() int { return max(2000, int(t.rec.Rows/8)) }

// scanIndex reads the rows a lookup names, in id order. One value's
// entries are in id order already: they are streamed, a batch of rows at
// a time, and reading stops when fn does. Several values or a range are
// read whole first (bounded by maxCandidates, else ErrTooManyCandidates
// before any row is passed to fn), then sorted.
func (t tableRows) scanIndex(ctx context.Context, sc tables.Scan, fn func(r *platform.TableRow) (bool, error)) error {
	lk := *sc.Index
	if len(lk.Prefixes) == 1 {
		var batch []int64
		size, stopped := rowBatchMin, false
		err := t.st.IndexRowIDs(ctx, t.rec.ID, lk, sc.Descending, func(id int64) (bool, error) {
			batch = append(batch, id)
			if len(batch) < size {
				return true, nil
			}
			more, err := t.emit(ctx, batch, fn)
			batch, stopped, size = batch[:0], !more, min(size*2, rowBatch)
			return more, err
		})
		if err != nil || stopped || len(batch) == 0 {
			return err
		}
		_, err = t.emit(ctx, batch, fn)
		return err
	}
	var ids []int64
	bound := t.maxCandidates()
	err := t.st.IndexRowIDs(ctx, t.rec.ID, lk, false, func(id int64) (bool, error) {
		if len(ids) >= bound {
			return false, dynamo.ErrTooManyCandidates
		}
		ids = append(ids, id)
		return true, nil
	})
	if err != nil {
		return err
	}
	sort.Slice(ids, func(i, j int) bool { return (ids[i] < ids[j]) != sc.Descending })
	for start, size := 0, rowBatchMin; start < len(ids); start, size = start+size, min(size*2, rowBatch) {
		more, err := t.emit(ctx, ids[start:min(start+size, len(ids))], fn)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// emit reads rows by id (one BatchGetItem) and passes them to fn in the
// order given; an id whose row went meanwhile is skipped, as is a repeat.
func (t tableRows) emit(ctx context.Context, ids []int64, fn func(r *platform.TableRow) (bool, error)) (bool, error) {
	rows, err := t.st.GetRows(ctx, t.rec.RowSet(), ids)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		r, ok := rows[id]
		if !ok {
			continue
		}
		delete(rows, id)
		more, err := fn(&r.TableRow)
		if err != nil || !more {
			return false, err
		}
	}
	return true, nil
}

// upsertOwnersByIndex passes to add the rows holding the values of an
// upsert's column (canonical JSON, the keys of want), read through the
// column index: one lookup per value, then the rows. False when the index
// cannot serve them (not built yet, or a value it does not bound), and the
// caller reads the table.
func (s *server) upsertOwnersByIndex(c *call, rec dynamo.TableRecord, col *tables.Column, want map[string]int, add func(r *platform.TableRow)) (bool, error) {
	if rec.State.Index != platform.TableIndexReady || !col.Indexed() {
		return false, nil
	}
	var lookups []platform.TableIndexLookup
	for v := range want {
		lk, ok := col.Lookup(json.RawMessage(v))
		if !ok {
			return false, nil
		}
		lookups = append(lookups, lk)
	}
	var mu sync.Mutex
	var ids []int64
	var ferr firstErr
	parallel(len(lookups), rowWorkers, func(k int) {
		err := s.Store.IndexRowIDs(c.ctx, rec.ID, lookups[k], false, func(id int64) (bool, error) {
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return true, nil
		})
		if err != nil {
			ferr.set(err)
		}
	})
	if err := ferr.get(); err != nil {
		return false, err
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	rows, err := s.Store.GetRows(c.ctx, rec.RowSet(), ids)
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if r, ok := rows[id]; ok {
			add(&r.TableRow)
		}
	}
	return true, nil
}
