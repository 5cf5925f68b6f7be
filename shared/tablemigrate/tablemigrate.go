// Package tablemigrate builds the column index of tables written before
// the index existed (docs/tables.md, "Indexed filters"), without stopping
// their writers. A table goes through three states, each a conditional
// write of its item, so the migration can stop anywhere (a crash, kill -9)
// and be run again, by one process or several:
//
//  1. none -> building (IndexSince = now): from now on every row write
//     that reads the table maintains the index in its own transaction;
//  2. after Grace (every write that read the table before step 1 has
//     ended: API Gateway ends a request after 29 s), the rows are read in
//     id order and their entries written, each chunk in a transaction that
//     checks the rows are still at the version read (a row changed since
//     was written by a writer that maintained its entries; the chunk is
//     read again and retried). Writing an entry twice writes the same
//     item, so a fill redone from the start after a crash is harmless;
//  3. building -> ready: finds use the index.
//
// Until step 3 finds read the table (the previous layout's way), so their
// answers never depend on a partly built index.
package tablemigrate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

// DefaultGrace is how long after step 1 the fill waits: longer than any
// request that may have read the table before it (29 s in API Gateway;
// locally a row write request reads the table again when a schema change
// makes its id reservation fail, every 1000 rows).
const DefaultGrace = 2 * time.Minute

// fillChunk is how many rows one step of the fill reads.
const fillChunk = 500

// migrationName marks the migration done (Store.MarkMigrationDone) once no
// table is left: the platform only creates tables with an index since.
const migrationName = "table-column-index"

// Migrator builds the column index of the tables that lack it.
type Migrator struct {
	Store *dynamo.Store
	// Grace: DefaultGrace when zero.
	Grace time.Duration
	Log   *slog.Logger
	// AfterChunk, when set, runs after each chunk of a fill (progress,
	// tests); an error stops the fill there, as a crash would.
	AfterChunk func(table string, lastID int64) error
}

func (m *Migrator) grace() time.Duration {
	if m.Grace > 0 {
		return m.Grace
	}
	return DefaultGrace
}

// Run advances every table whose index is not ready, and reports how many
// are still not ready (waiting for their grace, or changed meanwhile): the
// caller runs it again later. It reads the tables with a Scan (never done
// by a request).
func (m *Migrator) Run(ctx context.Context) (pending int, err error) {
	recs, err := m.Store.TablesToIndex(ctx)
	if err != nil {
		return 0, err
	}
	defer func() {
		if err == nil && pending == 0 {
			err = m.Store.MarkMigrationDone(ctx, migrationName)
		}
	}()
	for _, rec := range recs {
		done, err := m.Table(ctx, rec)
		if err != nil {
			return pending + 1, fmt.Errorf("table %s: %w", rec.ID, err)
		}
		if !done {
			pending++
		}
	}
	return pending, nil
}

// Loop runs Run at once and then every period while tables remain, until
// ctx ends; errors are logged and retried. Once a run finds no table left
// the migration is marked done, and a later Loop (a restart) reads only
// that mark.
func (m *Migrator) Loop(ctx context.Context, every time.Duration) {
	if done, err := m.Store.MigrationDone(ctx, migrationName); err == nil && done {
		return
	}
	for {
		pending, err := m.Run(ctx)
		if err != nil && ctx.Err() == nil && m.Log != nil {
			m.Log.Warn("table index migration", "error", err)
		}
		if err == nil && pending == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}

// Table advances one table as far as it can now; true once its index is
// ready (or the table is gone).
func (m *Migrator) Table(ctx context.Context, rec dynamo.TableRecord) (bool, error) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			cur, err := m.Store.GetTable(ctx, rec.BotID, rec.ID)
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				return true, nil
			}
			if err != nil {
				return false, err
			}
			rec = cur
		}
		if attempt > 20 {
			return false, nil // busy: the next run goes on
		}
		st := rec.State
		switch st.Index {
		case platform.TableIndexReady:
			return true, nil
		case platform.TableIndexNone:
			st.Index, st.IndexSince = platform.TableIndexBuilding, platform.Now()
			err := m.Store.SaveTable(ctx, rec, rec.Table, st, false)
			if errors.Is(err, dynamo.ErrVersionConflict) {
				continue
			}
			if err != nil {
				return false, err
			}
			m.log("table index migration: row writes maintain the index", rec)
			return false, nil
		}
		since, err := time.Parse(time.RFC3339Nano, st.IndexSince)
		if err != nil {
			since = time.Time{} // unreadable: the grace has long passed
		}
		if time.Since(since) < m.grace() {
			return false, nil
		}
		if err := m.fill(ctx, rec); err != nil {
			if platform.TypeOf(err) == platform.ErrResourceNotFound {
				return true, nil
			}
			return false, err
		}
		return m.ready(ctx, rec)
	}
}

// ready moves a filled table's index to ready, re-reading the table while
// other changes of it (schema, rows' ids) come first: the entries written
// stay valid whatever they change.
func (m *Migrator) ready(ctx context.Context, rec dynamo.TableRecord) (bool, error) {
	for attempt := 0; attempt < 20; attempt++ {
		cur, err := m.Store.GetTable(ctx, rec.BotID, rec.ID)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		st := cur.State
		st.Index = platform.TableIndexReady
		err = m.Store.SaveTable(ctx, cur, cur.Table, st, false)
		if errors.Is(err, dynamo.ErrVersionConflict) {
			continue
		}
		if err != nil {
			return false, err
		}
		m.log("table index migration: index ready", cur)
		return true, nil
	}
	return false, nil
}

func (m *Migrator) log(msg string, rec dynamo.TableRecord) {
	if m.Log != nil {
		m.Log.Info(msg, "bot", rec.BotID, "table", rec.ID, "rows", rec.Rows)
	}
}

// fill writes the index entries of every row of the table, a chunk at a
// time, under the schema of the table as read before each chunk.
func (m *Migrator) fill(ctx context.Context, rec dynamo.TableRecord) error {
	for after := int64(0); ; {
		cur, err := m.Store.GetTable(ctx, rec.BotID, rec.ID)
		if err != nil {
			return err
		}
		schema, err := tables.Load(cur.Schema, cur.State)
		if err != nil {
			return err
		}
		chunk, err := m.Store.RowRecords(ctx, cur.RowSet(), after, fillChunk)
		if err != nil || len(chunk) == 0 {
			return err
		}
		rows := chunk
		for attempt := 0; len(rows) > 0; attempt++ {
			if attempt > 20 {
				return fmt.Errorf("rows after %d keep changing; the next run goes on", after)
			}
			keys := make([][]platform.TableIndexKey, len(rows))
			for i := range rows {
				keys[i] = schema.IndexKeys(&rows[i].TableRow)
			}
			changed, err := m.Store.PutIndexEntries(ctx, cur.RowSet(), rows, keys)
			if err != nil {
				return err
			}
			if len(changed) == 0 {
				break
			}
			// A transaction whose rows changed wrote nothing: read them
			// again (a row gone needs no entry) and write theirs.
			again, err := m.Store.GetRows(ctx, cur.RowSet(), changed)
			if err != nil {
				return err
			}
			rows = make([]dynamo.RowRecord, 0, len(changed))
			for _, id := range changed {
				if r, ok := again[id]; ok {
					rows = append(rows, r)
				}
			}
		}
		after = chunk[len(chunk)-1].ID
		if m.AfterChunk != nil {
			if err := m.AfterChunk(rec.ID, after); err != nil {
				return err
			}
		}
		if len(chunk) < fillChunk {
			return nil
		}
	}
}
