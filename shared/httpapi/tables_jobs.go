package httpapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tables"
)

// Duplication in steps (docs/tables.md): a duplicate copies its source's
// rows in chunks, each chunk recorded in the job (a cursor) before the
// next, so any worker can continue a job where another stopped.
const (
	copyChunk = 500 // rows a step reads and writes (20 BatchWriteItem calls)
	// syncCopyRows is how many rows duplicateTable copies before it
	// answers; a larger table finishes in the background.
	syncCopyRows = 2000
	// pollCopyRows is how many rows a getTableJobs call copies for a job
	// no worker is advancing.
	pollCopyRows = 2000
	// jobLease is how long a worker owns a job it advances.
	jobLease = 30 * time.Second
	// recentJobs is how many jobs getTableJobs lists.
	recentJobs = 20
)

func (s *server) duplicateTable(c *call) (any, error) {
	var in struct {
		TableName  *string  `json:"tableName"`
		SchemaOnly *bool    `json:"schemaOnly"`
		Factor     *float64 `json:"factor"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	src, err := s.Store.GetTable(c.ctx, c.bot.ID, c.PathValue("sourceTableId"))
	if err != nil {
		return nil, err
	}
	schemaOnly := in.SchemaOnly != nil && *in.SchemaOnly
	name := src.Name + "Copy"
	if in.TableName != nil {
		name = *in.TableName
	}
	if err := tables.CheckTableName(name); err != nil {
		if in.TableName == nil {
			return nil, platform.Invalid("the default name of the copy, %q, is not valid (%v): give tableName", name, err)
		}
		return nil, err
	}
	now := platform.Now()
	t := src.Table
	t.ID, t.Name, t.CreatedAt, t.UpdatedAt = platform.NewID(platform.PrefixTable), name, now, now
	t.Tags = map[string]string{}
	for k, v := range src.Tags {
		t.Tags[k] = v
	}
	if in.Factor != nil {
		if t.Factor, err = checkFactor(*in.Factor); err != nil {
			return nil, err
		}
		if t.Factor < src.Factor && !schemaOnly {
			return nil, platform.Invalid("invalid body: field \"factor\": the copy's rows need a factor of at least %d (the source's), or schemaOnly", src.Factor)
		}
	}
	// The copy keeps its source's column ids, so rows are copied as they
	// are stored, and its row ids, so it continues after the source's last.
	// Its column index is written with its rows (the source's may not be
	// complete yet: it is not copied).
	st := platform.TableState{Columns: src.State.Columns, NextColumn: src.State.NextColumn, Index: platform.TableIndexReady, RowShards: platform.TableRowShards}
	if t.KeyColumn != "" {
		st.KeyIndex = newKeyIndexID()
	}
	job := dynamo.JobRecord{TableJob: platform.TableJob{
		ID: platform.NewID(platform.PrefixTableJob), BotID: c.bot.ID, TableID: t.ID, Type: platform.JobDuplicate,
		Status: platform.JobCompleted, Progress: 1, CreatedAt: now, UpdatedAt: now,
	}}
	nextID := int64(0)
	if !schemaOnly && src.NextID > 0 {
		nextID = src.NextID
		job.Status, job.Progress = platform.JobInProgress, 0
		job.State = dynamo.JobState{SourceID: src.ID, MaxID: src.NextID, Total: src.Rows}
		st.FillJob = job.ID
	}
	if err := s.Store.CreateTable(c.ctx, c.bot.ID, t, st, nextID, 0, 0); err != nil {
		return nil, err
	}
	if _, err := s.Store.SaveJob(c.ctx, job); err != nil {
		if rec, gerr := s.Store.GetTable(c.ctx, c.bot.ID, t.ID); gerr == nil {
			_ = s.Store.DeleteTable(context.WithoutCancel(c.ctx), rec)
		}
		return nil, err
	}
	if job.Status == platform.JobInProgress {
		if err := s.advanceJob(c.ctx, c.bot.ID, t.ID, job.ID, syncCopyRows); err != nil {
			return nil, err
		}
		if cur, ok, err := s.Store.GetJob(c.ctx, t.ID, job.ID); err == nil && ok {
			job = cur
		}
		if job.Status == platform.JobInProgress && s.BackgroundJobs {
			go s.finishJob(c.bot.ID, t.ID, job.ID)
		}
	}
	rec, err := s.Store.GetTable(c.ctx, c.bot.ID, t.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"table": wireTable(rec.Table), "rows": src.Rows,
		"job": map[string]any{"id": job.ID, "status": job.Status},
	}, nil
}

// finishJob advances a job to its end, in a goroutine of a process that
// outlives its requests (the local platform). It gives up after an hour;
// getTableJobs can still continue the job.
func (s *server) finishJob(botID, tableID, jobID string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for ctx.Err() == nil {
		if err := s.advanceJob(ctx, botID, tableID, jobID, 10*copyChunk); err != nil {
			s.Logger.Error("table job", "job", jobID, "err", err)
			return
		}
		j, ok, err := s.Store.GetJob(ctx, tableID, jobID)
		if err != nil || !ok || j.Status != platform.JobInProgress {
			return
		}
		if j.State.LeaseUntil > platform.Now() {
			time.Sleep(time.Second) // another worker holds it
		}
	}
}

// advanceJob copies up to budget rows of a duplicate job, one chunk at a
// time, under a lease (another worker, or a getTableJobs call, leaves a
// leased job alone). Each chunk is idempotent (rows keep their ids), and
// the job's cursor moves only after the chunk is written, so an
// interrupted step is simply redone.
func (s *server) advanceJob(ctx context.Context, botID, tableID, jobID string, budget int) error {
	job, ok, err := s.Store.GetJob(ctx, tableID, jobID)
	if err != nil || !ok || job.Status != platform.JobInProgress || job.Type != platform.JobDuplicate {
		return err
	}
	now := time.Now().UTC()
	if job.State.LeaseUntil > platform.FormatTime(now) {
		return nil
	}
	job.State.LeaseUntil = platform.FormatTime(now.Add(jobLease))
	if job, err = s.Store.SaveJob(ctx, job); err != nil {
		if errors.Is(err, dynamo.ErrVersionConflict) {
			return nil // another worker took it
		}
		return err
	}
	for copied := 0; copied < budget; {
		target, err := s.Store.GetTable(ctx, botID, tableID)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			return s.endJob(ctx, job, platform.JobFailed) // the copy was deleted
		}
		if err != nil {
			return err
		}
		src, err := s.Store.GetTable(ctx, botID, job.State.SourceID)
		if platform.TypeOf(err) == platform.ErrResourceNotFound {
			// The source was deleted: the copy keeps what it has and opens.
			return s.completeCopy(ctx, job, target, platform.JobFailed)
		} else if err != nil {
			return err
		}
		schema, err := tables.Load(target.Schema, target.State)
		if err != nil {
			return err
		}
		var rows []platform.TableRow
		stale := int64(0)
		err = s.Store.QueryRows(ctx, src.RowSet(), dynamo.RowScan{After: job.State.Cursor, Before: job.State.MaxID + 1, Limit: copyChunk},
			func(r *platform.TableRow) (bool, error) {
				rows = append(rows, *r)
				stale += b2i(schema.IsStale(*r))
				return true, nil
			})
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			if err := s.Store.PutRows(ctx, target.RowSet(), rows, indexKeys(target, schema)); err != nil {
				return err
			}
			job.State.Cursor = rows[len(rows)-1].ID
			job.State.Copied += int64(len(rows))
			job.State.Stale += stale
			copied += len(rows)
		}
		done := len(rows) < copyChunk || job.State.Cursor >= job.State.MaxID
		if done {
			return s.completeCopy(ctx, job, target, platform.JobCompleted)
		}
		if job.State.Total > 0 {
			job.Progress = min(float64(job.State.Copied)/float64(job.State.Total), 0.99)
		}
		job.UpdatedAt = platform.Now()
		job.State.LeaseUntil = platform.FormatTime(time.Now().UTC().Add(jobLease))
		if job, err = s.Store.SaveJob(ctx, job); err != nil {
			if errors.Is(err, dynamo.ErrVersionConflict) {
				return nil
			}
			return err
		}
	}
	// Out of budget: release the lease for the next call or worker.
	job.State.LeaseUntil = ""
	if _, err := s.Store.SaveJob(ctx, job); err != nil && !errors.Is(err, dynamo.ErrVersionConflict) {
		return err
	}
	return nil
}

// completeCopy ends a duplicate: the key index is copied, the table gets
// its final counts and opens to writes, and the job ends with status.
func (s *server) completeCopy(ctx context.Context, job dynamo.JobRecord, target dynamo.TableRecord, status string) error {
	if target.State.KeyIndex != "" && status == platform.JobCompleted {
		if src, err := s.Store.GetTable(ctx, target.BotID, job.State.SourceID); err == nil && src.State.KeyIndex != "" && src.KeyColumn == target.KeyColumn {
			if err := s.Store.CopyKeyIndex(ctx, src.ID, src.State.KeyIndex, target.ID, target.State.KeyIndex); err != nil {
				return err
			}
		}
	}
	for attempt := 0; ; attempt++ {
		st := target.State
		st.FillJob = ""
		err := s.Store.FinishFill(ctx, target, target.Table, st, job.State.Copied, job.State.Stale)
		if err == nil {
			break
		}
		if !errors.Is(err, dynamo.ErrVersionConflict) || attempt >= tableRetries {
			return err
		}
		if target, err = s.Store.GetTable(ctx, target.BotID, target.ID); err != nil {
			return err
		}
	}
	return s.endJob(ctx, job, status)
}

func (s *server) endJob(ctx context.Context, job dynamo.JobRecord, status string) error {
	job.Status, job.UpdatedAt, job.State.LeaseUntil = status, platform.Now(), ""
	if status == platform.JobCompleted {
		job.Progress = 1
	}
	_, err := s.Store.SaveJob(ctx, job)
	if errors.Is(err, dynamo.ErrVersionConflict) {
		return nil
	}
	return err
}

func (s *server) getTableJobs(c *call) (any, error) {
	rec, err := s.Store.GetTable(c.ctx, c.bot.ID, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	jobs, err := s.Store.ListJobs(c.ctx, rec.ID, recentJobs)
	if err != nil {
		return nil, err
	}
	// Polling continues a duplicate no worker is advancing: in Lambda,
	// where nothing runs after a response, this is how large copies end.
	for i, j := range jobs {
		if j.Status == platform.JobInProgress && j.Type == platform.JobDuplicate && j.State.LeaseUntil <= platform.Now() {
			if err := s.advanceJob(c.ctx, c.bot.ID, rec.ID, j.ID, pollCopyRows); err != nil {
				return nil, err
			}
			if cur, ok, err := s.Store.GetJob(c.ctx, rec.ID, j.ID); err == nil && ok {
				jobs[i] = cur
			}
		}
	}
	out := make([]platform.TableJob, len(jobs))
	for i, j := range jobs {
		out[i] = j.TableJob
	}
	return map[string]any{"jobs": out}, nil
}

var errNoTableFiles = platform.Errorf(platform.ErrMethodNotFound, "table exports and imports need the Files API's storage, which this deployment does not provide")

func (s *server) exportTable(c *call) (any, error) {
	if s.TableFiles == nil {
		return nil, errNoTableFiles
	}
	q := c.query()
	format, err := q.oneOf("format", "csv", "csv", "json")
	if err != nil {
		return nil, err
	}
	compress := true
	if b, err := q.boolean("compress"); err != nil {
		return nil, err
	} else if b != nil {
		compress = *b
	}
	rec, schema, err := s.loadTable(c, c.PathValue("table"))
	if err != nil {
		return nil, err
	}
	now := platform.Now()
	job := dynamo.JobRecord{TableJob: platform.TableJob{
		ID: platform.NewID(platform.PrefixTableJob), BotID: c.bot.ID, TableID: rec.ID, Type: platform.JobExport,
		Status: platform.JobInProgress, CreatedAt: now, UpdatedAt: now,
	}}
	if job, err = s.Store.SaveJob(c.ctx, job); err != nil {
		return nil, err
	}
	ex := tables.NewExporter(rec.Table, schema, format)
	err = s.Store.QueryRows(c.ctx, rec.RowSet(), dynamo.RowScan{}, func(r *platform.TableRow) (bool, error) {
		ex.Add(r)
		return true, nil
	})
	var fileID string
	if err == nil {
		content, ctype, ext := ex.Finish(compress)
		key := fmt.Sprintf("tables/%s/%s.%s", rec.Name, job.ID, ext)
		fileID, err = s.TableFiles.SaveTableExport(c.ctx, c.bot.ID, key, ctype, content)
	}
	if err != nil {
		_ = s.endJob(context.WithoutCancel(c.ctx), job, platform.JobFailed)
		return nil, err
	}
	job.OutputFileID = &fileID
	job.Status, job.Progress, job.UpdatedAt = platform.JobCompleted, 1, platform.Now()
	if job, err = s.Store.SaveJob(c.ctx, job); err != nil {
		return nil, err
	}
	return map[string]any{"job": job.TableJob}, nil
}

func (s *server) importTable(c *call) (any, error) {
	if s.TableFiles == nil {
		return nil, errNoTableFiles
	}
	var in struct {
		FileID string `json:"fileId"`
	}
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	ref := c.PathValue("table")
	rec, schema, err := s.loadTable(c, ref)
	if err != nil {
		return nil, err
	}
	if err := writable(rec); err != nil {
		return nil, err
	}
	content, _, err := s.TableFiles.ReadTableImport(c.ctx, c.bot.ID, in.FileID)
	if err != nil {
		return nil, err
	}
	input, err := tables.ParseImport(content, schema)
	if err != nil {
		return nil, err
	}
	// Every row is checked before any is written: an import is all or
	// nothing as far as validation goes.
	rep := &rowReport{}
	var pending []pendingRow
	for i, raw := range input {
		vals, _, err := schema.CheckRow(raw, true)
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
		pending = append(pending, pendingRow{index: i, vals: vals})
	}
	if len(rep.errors) > 0 {
		return nil, rep.allFailed("imported")
	}
	now := platform.Now()
	fileID := in.FileID
	job := dynamo.JobRecord{TableJob: platform.TableJob{
		ID: platform.NewID(platform.PrefixTableJob), BotID: c.bot.ID, TableID: rec.ID, Type: platform.JobImport,
		Status: platform.JobInProgress, InputFileID: &fileID, CreatedAt: now, UpdatedAt: now,
	}}
	if job, err = s.Store.SaveJob(c.ctx, job); err != nil {
		return nil, err
	}
	fail := func(err error) (any, error) {
		_ = s.endJob(context.WithoutCancel(c.ctx), job, platform.JobFailed)
		return nil, err
	}
	for start, conflicts := 0, 0; start < len(pending); {
		end := min(start+platform.MaxRowsPerRequest, len(pending))
		_, err := s.insertRows(c, rec, schema, pending[start:end], rep)
		if errors.Is(err, dynamo.ErrVersionConflict) && conflicts < tableRetries {
			// The table changed meanwhile (values are stored by column id,
			// which a change of schema keeps): write against its new version.
			conflicts++
			if rec, schema, err = s.loadTable(c, rec.ID); err != nil {
				return fail(err)
			}
			continue
		}
		if err == nil && len(rep.errors) > 0 {
			err = rep.allFailed("imported") // key values already held by other rows
		}
		if err != nil {
			return fail(err)
		}
		start = end
	}
	job.Status, job.Progress, job.UpdatedAt = platform.JobCompleted, 1, platform.Now()
	if job, err = s.Store.SaveJob(c.ctx, job); err != nil {
		return nil, err
	}
	return map[string]any{"job": job.TableJob}, nil
}
