package transfer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/botforge/platform/shared/archive"
)

// Jobs runs the console's exports and imports on the platform that serves
// the console (docs/export-import.md, "From the console"). A job is the
// same Export or Import the CLI runs, calling the platform's own API with
// the credentials of the request that started it, so the API checks the
// caller's role on every call exactly as for the CLI. Its progress is
// polled (GET the job): a job outlives the page that started it (a
// reload, another tab), the archive is downloaded by the browser's own
// download manager from a file (streamed, resumable with Range), and no
// connection is held open per job (the console's inbox stream already
// holds one of the browser's six per host).
//
// Jobs live in memory, their files in Dir: a restart forgets them (and
// removes the files). Only a process that outlives its requests runs them
// (the local platform); on AWS the CLI does the same through the API.
type Jobs struct {
	// Dir holds the archives: exported ones and uploaded ones.
	Dir string
	// APIURL is where the platform's own API is reached from this process.
	APIURL func() string
	// Keep is how long a finished job's archive is kept (default 24 h).
	Keep time.Duration

	mu   sync.Mutex
	jobs map[string]*Job
}

// Job is one export or import and how far it has got.
type Job struct {
	ID        string `json:"id"`
	Kind      string `json:"kind"` // export or import
	Workspace string `json:"workspaceId"`
	Bot       string `json:"botId,omitempty"`
	// Status: uploaded (an import's archive is here, not run yet),
	// running, done, failed.
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// DryRun and Remap of an import's last run.
	DryRun bool `json:"dryRun"`
	Remap  bool `json:"remap"`
	// Progress: entries and bytes of the archive written (export) or read
	// (import), records exported, and the totals when known (an import's
	// archive size; an export's estimate of its records).
	Entries      int64  `json:"entries"`
	Bytes        int64  `json:"bytes"`
	Records      int64  `json:"records"`
	TotalBytes   int64  `json:"totalBytes,omitempty"`
	TotalRecords int64  `json:"totalRecords,omitempty"`
	Unit         string `json:"unit,omitempty"`
	// Secrets: the archive carries installations' configurations (a
	// passphrase opens them).
	Secrets   bool          `json:"secrets"`
	Source    *Source       `json:"source,omitempty"`
	Export    *Report       `json:"export,omitempty"`
	Import    *ImportReport `json:"import,omitempty"`
	StartedAt string        `json:"startedAt"`
	EndedAt   string        `json:"endedAt,omitempty"`
	// DownloadURL: a finished export's archive (its key is the
	// authorization: a browser's download sends no token).
	DownloadURL string `json:"downloadUrl,omitempty"`

	owner   string
	key     string
	file    string
	ended   time.Time
	running bool
}

// Source is an archive's origin (its header's).
type Source struct {
	APIURL      string `json:"apiUrl,omitempty"`
	WorkspaceID string `json:"workspaceId,omitempty"`
	BotID       string `json:"botId,omitempty"`
	CreatedAt   string `json:"createdAt,omitempty"`
}

// Errors a job's routes map to statuses.
var (
	ErrNoJob   = errors.New("no such transfer job (jobs are kept 24 hours, and forgotten when the platform restarts)")
	ErrRunning = errors.New("this job is running: wait for it to end")
)

// Caller is who starts or reads a job: an account (or token) in a
// workspace, with the credentials its job's API calls carry.
type Caller struct {
	Owner     string
	Workspace string
	Header    http.Header
}

func newKey() string {
	b := make([]byte, 16)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (j *Jobs) keep() time.Duration {
	if j.Keep > 0 {
		return j.Keep
	}
	return 24 * time.Hour
}

// add registers a job and forgets those ended longer ago than Keep.
func (j *Jobs) add(job *Job) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.jobs == nil {
		j.jobs = map[string]*Job{}
	}
	for id, o := range j.jobs {
		if !o.running && !o.ended.IsZero() && time.Since(o.ended) > j.keep() {
			os.Remove(o.file)
			os.Remove(o.file + ".journal")
			os.Remove(o.file + ".import-journal")
			delete(j.jobs, id)
		}
	}
	j.jobs[job.ID] = job
}

// Get answers a copy of the caller's job.
func (j *Jobs) Get(c Caller, id string) (Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.jobs[id]
	if !ok || job.owner != c.Owner || job.Workspace != c.Workspace {
		return Job{}, ErrNoJob
	}
	out := *job
	if out.Import != nil {
		r := *out.Import
		out.Import = &r
	}
	return out, nil
}

// Delete forgets the caller's job and removes its archive.
func (j *Jobs) Delete(c Caller, id string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.jobs[id]
	if !ok || job.owner != c.Owner || job.Workspace != c.Workspace {
		return ErrNoJob
	}
	if job.running {
		return ErrRunning
	}
	os.Remove(job.file)
	os.Remove(job.file + ".journal")
	os.Remove(job.file + ".import-journal")
	delete(j.jobs, id)
	return nil
}

// Archive opens a finished export's archive for its download key.
func (j *Jobs) Archive(id, key string) (*os.File, Job, error) {
	j.mu.Lock()
	job, ok := j.jobs[id]
	var out Job
	if ok {
		out = *job
	}
	j.mu.Unlock()
	if !ok || out.Kind != "export" || out.Status != "done" || subtle.ConstantTimeCompare([]byte(key), []byte(out.key)) != 1 {
		return nil, Job{}, ErrNoJob
	}
	f, err := os.Open(out.file)
	return f, out, err
}

func (j *Jobs) client(c Caller) *Client {
	h := http.Header{}
	for _, k := range []string{"Authorization", "Cookie", "X-Csrf-Token", "User-Agent"} {
		if v := c.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	return &Client{URL: j.APIURL(), Header: h}
}

func (j *Jobs) update(job *Job, fn func(*Job)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fn(job)
}

func (j *Jobs) end(job *Job, err error) {
	j.update(job, func(job *Job) {
		job.running, job.ended, job.EndedAt = false, time.Now(), time.Now().UTC().Format(time.RFC3339Nano)
		if err != nil {
			job.Status, job.Error = "failed", err.Error()
			return
		}
		job.Status = "done"
	})
}

// StartExport starts exporting the caller's workspace (or one bot of it)
// into an archive; passphrase, set, carries the installations'
// configurations sealed with it.
func (j *Jobs) StartExport(c Caller, bot, passphrase string) (Job, error) {
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return Job{}, err
	}
	id := "export_" + newKey()[:16]
	job := &Job{ID: id, Kind: "export", Workspace: c.Workspace, Bot: bot, Status: "running", Secrets: passphrase != "",
		StartedAt: time.Now().UTC().Format(time.RFC3339Nano), owner: c.Owner, key: newKey(), file: filepath.Join(j.Dir, id+".bfa"), running: true}
	j.add(job)
	cl := j.client(c)
	go func() {
		ctx := context.Background()
		// The bar's total: an estimate, counted before the export (the
		// source's own counts: table rows, messages, files).
		if n, err := estimate(ctx, cl, c.Workspace, bot); err == nil {
			j.update(job, func(job *Job) { job.TotalRecords = n })
		}
		rep, err := Export{Client: cl, Workspace: c.Workspace, Bot: bot, Out: job.file, Passphrase: passphrase,
			Progress: func(p Progress) {
				j.update(job, func(job *Job) { job.Entries, job.Bytes, job.Records, job.Unit = p.Entries, p.Bytes, p.Records, p.Unit })
			}}.Run(ctx)
		if err == nil {
			j.update(job, func(job *Job) {
				job.Export, job.Entries, job.Bytes, job.TotalBytes = &rep, rep.Entries, rep.Bytes, rep.Bytes
				job.DownloadURL = "/v1/admin/transfer/jobs/" + url.PathEscape(job.ID) + "/archive?key=" + job.key
			})
		}
		j.end(job, err)
	}()
	return j.Get(c, id)
}

// Upload stores an archive to import (streamed to a file, never held in
// memory) and checks its header; its import is run by Run.
func (j *Jobs) Upload(c Caller, body io.Reader) (Job, error) {
	if err := os.MkdirAll(j.Dir, 0o700); err != nil {
		return Job{}, err
	}
	id := "import_" + newKey()[:16]
	file := filepath.Join(j.Dir, id+".bfa")
	f, err := os.OpenFile(file, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return Job{}, err
	}
	n, err := io.Copy(f, body)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(file)
		return Job{}, fmt.Errorf("the upload stopped: %w", err)
	}
	h, err := readHeader(file)
	if err != nil {
		os.Remove(file)
		return Job{}, &InvalidArchiveError{err}
	}
	job := &Job{ID: id, Kind: "import", Workspace: c.Workspace, Status: "uploaded", TotalBytes: n, Secrets: h.Secrets != nil,
		Source:    &Source{APIURL: h.Source.APIURL, WorkspaceID: h.Source.WorkspaceID, BotID: h.Source.BotID, CreatedAt: h.CreatedAt},
		StartedAt: time.Now().UTC().Format(time.RFC3339Nano), owner: c.Owner, file: file, ended: time.Now()}
	j.add(job)
	return j.Get(c, id)
}

// InvalidArchiveError: what was uploaded is not an archive (a 400).
type InvalidArchiveError struct{ Err error }

func (e *InvalidArchiveError) Error() string {
	return "not an archive of this format: " + e.Err.Error()
}

func readHeader(file string) (*archive.Header, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := archive.NewReader(f)
	if err != nil {
		return nil, err
	}
	return &rd.Header, nil
}

// Run imports an uploaded archive into the caller's workspace: a dry run
// (nothing written: what would change), or the import. Run again after a
// dry run, or after a failure (the import resumes after the last chunk
// applied; a remapped one imports another copy).
func (j *Jobs) Run(c Caller, id string, dryRun, remap bool, passphrase string) (Job, error) {
	j.mu.Lock()
	job, ok := j.jobs[id]
	if !ok || job.owner != c.Owner || job.Workspace != c.Workspace || job.Kind != "import" {
		j.mu.Unlock()
		return Job{}, ErrNoJob
	}
	if job.running {
		j.mu.Unlock()
		return Job{}, ErrRunning
	}
	job.running, job.Status, job.Error, job.DryRun, job.Remap = true, "running", "", dryRun, remap
	job.Entries, job.Bytes, job.Import, job.EndedAt = 0, 0, nil, ""
	job.StartedAt = time.Now().UTC().Format(time.RFC3339Nano)
	j.mu.Unlock()
	cl := j.client(c)
	go func() {
		// Chunks of 256 KiB (the CLI sends 4 MiB): the bar moves a chunk at a
		// time, and a call on loopback costs little.
		rep, err := Import{Client: cl, Workspace: c.Workspace, In: job.file, Passphrase: passphrase, DryRun: dryRun, Remap: remap, ChunkBytes: 256 << 10,
			Progress: func(p Progress) {
				j.update(job, func(job *Job) { job.Entries, job.Bytes = p.Entries, p.Bytes })
			}}.Run(context.Background())
		j.update(job, func(job *Job) {
			job.Import = &rep
			if err == nil {
				job.Bytes = job.TotalBytes
			}
		})
		j.end(job, err)
	}()
	return j.Get(c, id)
}

// estimate counts the records an export will write, from the source's
// own counts: tables' rows, conversations and their messages, files,
// users (one list call per page of each); the other kinds are few.
func estimate(ctx context.Context, c *Client, ws, bot string) (int64, error) {
	x := &exporter{Export: Export{Client: c, Workspace: ws}}
	bots := []string{bot}
	if bot == "" {
		bots = nil
		if err := x.list(ctx, headers{ws: ws}, "/v1/admin/bots", "bots", func(r json.RawMessage) error {
			bots = append(bots, idOf(r))
			return nil
		}); err != nil {
			return 0, err
		}
	}
	n := int64(1 + len(bots))
	for _, b := range bots {
		h := headers{ws: ws, bot: b}
		var names []string
		if err := x.list(ctx, h, "/v1/tables", "tables", func(r json.RawMessage) error {
			var t struct{ Name string }
			json.Unmarshal(r, &t)
			names = append(names, t.Name)
			return nil
		}); err != nil {
			return 0, err
		}
		for _, t := range names {
			var out struct{ Rows int64 }
			if err := c.do(ctx, h, "GET", "/v1/tables/"+url.PathEscape(t), nil, &out); err != nil {
				return 0, err
			}
			n += 1 + out.Rows
		}
		for _, l := range []struct{ path, field string }{{"/v1/chat/conversations", "conversations"}, {"/v1/files", "files"}, {"/v1/chat/users", "users"}} {
			if err := x.list(ctx, h, l.path, l.field, func(r json.RawMessage) error {
				var cv struct{ MessageCount int64 }
				json.Unmarshal(r, &cv)
				n += 1 + cv.MessageCount
				return nil
			}); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}
