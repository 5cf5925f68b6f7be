package logstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// Local is platform.LogStore for the local platform: an embedded store of
// append-only files, indexed by time through their layout
//
//	<dir>/<bots|integrations>/<id>/<yyyymmdd>/<hh>.log
//
// one file per bot (or integration) per hour (UTC) of the lines' times,
// each line a JSON object (localLine) ending in a newline. A write appends
// to each file its lines fall in and fsyncs it before returning (a new file
// also fsyncs its directories), so an acknowledged line survives a crash.
// A torn last line (a crash mid-write) is ignored by readers and cut off
// before the next append.
//
// A query reads only the hour files of its window, newest first, from its
// cursor on, and stops at the first hour that completes the page: its cost
// grows with the page and the window, never with the rest of the history.
// Lines older than the retention are dropped on write and deleted in the
// background, as CloudWatch's retention does. Each bot's (or integration's)
// files are also capped in total size: past the cap, its oldest hour files
// are deleted (see LocalOptions.MaxSourceBytes), so that a chatty bot cannot
// fill the disk within the retention.
type Local struct {
	dir       string
	retention time.Duration
	maxSource int64
	now       func() time.Time
	log       *slog.Logger

	// sizes are the bytes stored per source directory, as far as this
	// process knows (read from disk at the source's first write, then
	// counted); trimming recounts from disk. capMu guards them.
	capMu  sync.Mutex
	sizes  map[string]int64
	warned map[string]bool // hour files whose dropped lines were logged

	mu    sync.Mutex
	files map[string]*segment // open hour files by path
	clock uint64              // use counter, for evicting idle files

	scanned atomic.Int64
	// beforeSync, set by tests, runs before each fsync of an hour file.
	beforeSync func(path string)
	stop       chan struct{}
	done       chan struct{}
	closed     atomic.Bool
}

// segment is one open hour file; mu serializes its appends.
type segment struct {
	mu   sync.Mutex
	f    *os.File
	used uint64
	dead bool // evicted: look it up again
}

var _ platform.LogStore = (*Local)(nil)

// LocalOptions configure OpenLocal.
type LocalOptions struct {
	// Retention is how long lines are kept (default 30 days).
	Retention time.Duration
	// MaxSourceBytes caps the files of one bot or integration (default
	// DefaultMaxSourceBytes): past it, the oldest hour files are deleted
	// down to three quarters of it, and while the current hour's file alone
	// exceeds it, further lines of that hour are dropped.
	MaxSourceBytes int64
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultMaxSourceBytes is the default cap of one bot's (or integration's)
// log files.
const DefaultMaxSourceBytes = 64 << 20

// maxOpenFiles caps the hour files kept open between writes.
const maxOpenFiles = 64

// futureSkew is how far ahead of the clock a line may be (CloudWatch takes
// lines up to two hours in the future).
const futureSkew = 2 * time.Hour

// OpenLocal opens (creating) the store in dir and starts its retention
// sweeper.
func OpenLocal(dir string, o LocalOptions) (*Local, error) {
	if o.Retention <= 0 {
		o.Retention = 30 * 24 * time.Hour
	}
	if o.MaxSourceBytes <= 0 {
		o.MaxSourceBytes = DefaultMaxSourceBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	for _, k := range []platform.LogKind{platform.LogBot, platform.LogIntegration} {
		if err := os.MkdirAll(filepath.Join(dir, kindDir(k)), 0o700); err != nil {
			return nil, err
		}
	}
	s := &Local{
		dir: dir, retention: o.Retention, maxSource: o.MaxSourceBytes, now: o.Now, log: o.Logger,
		sizes: map[string]int64{}, warned: map[string]bool{}, files: map[string]*segment{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	go s.sweep()
	return s, nil
}

// Close stops the sweeper and closes the open files.
func (s *Local) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for p, seg := range s.files {
		seg.mu.Lock()
		if seg.f != nil {
			errs = append(errs, seg.f.Close())
			seg.f = nil
		}
		seg.dead = true
		seg.mu.Unlock()
		delete(s.files, p)
	}
	return errors.Join(errs...)
}

// Scanned is how many lines queries have read since the store opened.
func (s *Local) Scanned() int64 { return s.scanned.Load() }

func kindDir(k platform.LogKind) string {
	if k == platform.LogIntegration {
		return "integrations"
	}
	return "bots"
}

// hourFile is the file of the lines of src in the hour of t.
func (s *Local) hourFile(src platform.LogSource, t time.Time) string {
	t = t.UTC()
	return filepath.Join(s.dir, kindDir(src.Kind), src.ID, t.Format("20060102"), t.Format("15")+".log")
}

// localLine is a line as stored; the source is the file's.
type localLine struct {
	ID             string `json:"id"`
	T              int64  `json:"t"` // Unix milliseconds
	Level          string `json:"l"`
	Message        string `json:"m"`
	UserID         string `json:"u,omitempty"`
	ConversationID string `json:"c,omitempty"`
	WorkflowID     string `json:"w,omitempty"`
}

// Write appends lines to their hour files and fsyncs each file before
// returning. Lines older than the retention, or more than two hours ahead
// of the clock, are dropped (as CloudWatch rejects them).
func (s *Local) Write(ctx context.Context, lines ...platform.LogLine) error {
	if s.closed.Load() {
		return errors.New("log store closed")
	}
	now := s.now()
	byFile := map[string]*bytes.Buffer{}
	var order []string
	for _, l := range lines {
		l.Normalize()
		if !l.Source.Valid() {
			return fmt.Errorf("log line of an invalid source %q/%q", l.Source.Kind, l.Source.ID)
		}
		if l.Time.Before(now.Add(-s.retention)) || l.Time.After(now.Add(futureSkew)) {
			continue
		}
		b, err := json.Marshal(localLine{
			ID: l.ID, T: l.Time.UnixMilli(), Level: l.Level, Message: l.Message,
			UserID: l.UserID, ConversationID: l.ConversationID, WorkflowID: l.WorkflowID,
		})
		if err != nil {
			return err
		}
		p := s.hourFile(l.Source, l.Time)
		buf := byFile[p]
		if buf == nil {
			buf = &bytes.Buffer{}
			byFile[p] = buf
			order = append(order, p)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	// The files are appended to and fsynced at once, not one after the
	// other: a call's lines go to its bot's file and its integration's
	// (logstore.LinesOf), and each fsync of a growing file is a journal
	// commit of a few ms, so in a row they held a webhook's answer for two
	// (docs/runtime.md, "Cut since (lat37)"). Write returns once every
	// file is durable, as before (TestWriteSyncsItsFilesAtOnce).
	var (
		wg    sync.WaitGroup
		errMu sync.Mutex
		first error
		sem   = make(chan struct{}, maxSyncsAtOnce)
	)
	for _, p := range order {
		if err := ctx.Err(); err != nil {
			wg.Wait()
			return err
		}
		if !s.reserve(p, int64(byFile[p].Len())) {
			continue // this hour alone is over the source's cap
		}
		if len(order) == 1 {
			return s.appendTo(p, byFile[p].Bytes())
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(p string) {
			defer func() { <-sem; wg.Done() }()
			if err := s.appendTo(p, byFile[p].Bytes()); err != nil {
				errMu.Lock()
				if first == nil {
					first = err
				}
				errMu.Unlock()
			}
		}(p)
	}
	wg.Wait()
	return first
}

// maxSyncsAtOnce bounds the files one Write appends to at once (lines
// spanning many hours).
const maxSyncsAtOnce = 8

// sourceDir is the directory of the source of an hour file.
func sourceDir(hourFile string) string { return filepath.Dir(filepath.Dir(hourFile)) }

// reserve counts n more bytes for the hour file at path against its
// source's cap, trimming the source's oldest files when over it. It
// reports false when the file at path alone would exceed the cap: its
// lines are then dropped.
func (s *Local) reserve(path string, n int64) bool {
	src := sourceDir(path)
	s.capMu.Lock()
	defer s.capMu.Unlock()
	size, known := s.sizes[src]
	if !known {
		size = dirSize(src)
	}
	if size+n <= s.maxSource {
		s.sizes[src] = size + n
		return true
	}
	size = s.trimLocked(src, path, s.maxSource*3/4-n)
	if size+n > s.maxSource {
		// What is left is the file at path alone (or files that could
		// not be deleted).
		s.sizes[src] = size
		if s.warned[path] {
			return false
		}
		s.warned[path] = true
		s.log.Warn("log lines dropped: one hour of this source exceeds its cap", "file", path, "capBytes", s.maxSource)
		return false
	}
	s.sizes[src] = size + n
	return true
}

// trimLocked deletes the oldest hour files of the source directory src,
// but never keep (the file being written), until the source holds at most
// target bytes, and returns what it holds then. capMu is held.
func (s *Local) trimLocked(src, keep string, target int64) int64 {
	type file struct {
		path string
		size int64
	}
	var files []file // oldest first
	var total int64
	days, _ := os.ReadDir(src)
	for _, d := range days { // ReadDir sorts: yyyymmdd, oldest first
		hours, _ := hourFiles(filepath.Join(src, d.Name()))
		for i := len(hours) - 1; i >= 0; i-- { // hourFiles is newest first
			if st, err := os.Stat(hours[i].path); err == nil {
				files = append(files, file{hours[i].path, st.Size()})
				total += st.Size()
			}
		}
	}
	for _, f := range files {
		if total <= target {
			break
		}
		if f.path == keep {
			continue
		}
		if err := s.removeHourFile(f.path); err != nil {
			s.log.Warn("log cap: could not delete", "file", f.path, "err", err)
			continue
		}
		total -= f.size
	}
	return total
}

// removeHourFile deletes an hour file, closing it first if open. s.mu is
// held throughout, so no writer reopens the file before it is gone (writers
// never wait for s.mu while holding a segment's lock).
func (s *Local) removeHourFile(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seg := s.files[path]; seg != nil {
		seg.mu.Lock()
		if seg.f != nil {
			_ = seg.f.Close()
			seg.f = nil
		}
		seg.dead = true
		seg.mu.Unlock()
		delete(s.files, path)
	}
	err := os.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		syncDir(filepath.Dir(path))
		// An emptied day directory goes too (a non-empty one stays).
		_ = os.Remove(filepath.Dir(path))
	}
	return err
}

// dirSize is the total size of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// appendTo appends data to the file at path and fsyncs it.
func (s *Local) appendTo(path string, data []byte) error {
	for {
		seg := s.segment(path)
		seg.mu.Lock()
		if seg.dead {
			seg.mu.Unlock()
			continue
		}
		err := func() error {
			if seg.f == nil {
				f, err := openForAppend(path)
				if err != nil {
					return err
				}
				seg.f = f
			}
			if _, err := seg.f.Write(data); err != nil {
				return fmt.Errorf("append to %s: %w", path, err)
			}
			if s.beforeSync != nil {
				s.beforeSync(path)
			}
			return seg.f.Sync()
		}()
		seg.mu.Unlock()
		return err
	}
}

// segment returns the open-file entry of path, evicting idle ones when too
// many are open.
func (s *Local) segment(path string) *segment {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	seg := s.files[path]
	if seg == nil {
		seg = &segment{}
		s.files[path] = seg
		if len(s.files) > maxOpenFiles {
			s.evictLocked()
		}
	}
	seg.used = s.clock
	return seg
}

// evictLocked closes the least recently used half of the open files that
// no one is writing to.
func (s *Local) evictLocked() {
	type cand struct {
		path string
		seg  *segment
	}
	var cs []cand
	for p, seg := range s.files {
		cs = append(cs, cand{p, seg})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].seg.used < cs[j].seg.used })
	for _, c := range cs[:len(cs)/2] {
		if !c.seg.mu.TryLock() {
			continue
		}
		if c.seg.f != nil {
			_ = c.seg.f.Close()
			c.seg.f = nil
		}
		c.seg.dead = true
		c.seg.mu.Unlock()
		delete(s.files, c.path)
	}
}

// openForAppend opens (creating) an hour file for appending. A new file's
// directories are fsynced so that its entry survives a crash; an existing
// file whose last line is torn is cut back to its last complete line.
func openForAppend(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		// The day directory is new: make its entry (and the source's, if
		// new too) durable.
		syncDir(filepath.Dir(dir))
		syncDir(filepath.Dir(filepath.Dir(dir)))
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		syncDir(dir)
		return f, nil
	}
	if !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := repairTail(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("repair %s: %w", path, err)
	}
	return f, nil
}

// repairTail cuts a torn last line (one without its newline) off f.
func repairTail(f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	size := st.Size()
	if size == 0 {
		return nil
	}
	var last [1]byte
	if _, err := f.ReadAt(last[:], size-1); err != nil {
		return err
	}
	if last[0] == '\n' {
		return nil
	}
	// Find the last newline, reading backwards in blocks.
	keep := int64(0)
	buf := make([]byte, 64<<10)
	for end := size; end > 0 && keep == 0; {
		start := max(0, end-int64(len(buf)))
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep = start + int64(i) + 1
		}
		end = start
	}
	if err := f.Truncate(keep); err != nil {
		return err
	}
	return f.Sync()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// Query answers one page: it walks the hour files of the window from the
// newest hour the page can hold (the cursor's, or the window's end) down to
// the window's start, keeping the lines that match, and stops after the
// first hour file at which it holds more than a page (older hours hold only
// older lines).
func (s *Local) Query(ctx context.Context, q platform.LogQuery) (platform.LogPage, error) {
	if err := q.Check(); err != nil {
		return platform.LogPage{}, err
	}
	cur, err := parseCursor(q.Cursor)
	if err != nil {
		return platform.LogPage{}, err
	}
	now := s.now()
	upper := cur.upper(q.End)
	// Nothing is kept beyond these bounds (see Write), so the walk stops
	// there whatever window was asked.
	hi := minTime(upper, now.Add(futureSkew))
	lo := maxTime(q.Start, now.Add(-s.retention-time.Hour))
	var cands []platform.LogLine
	scanned := 0
	root := filepath.Join(s.dir, kindDir(q.Source.Kind), q.Source.ID)
walk:
	for day := hi.UTC().Truncate(24 * time.Hour); !day.Before(lo.UTC().Truncate(24 * time.Hour)); day = day.Add(-24 * time.Hour) {
		if err := ctx.Err(); err != nil {
			return platform.LogPage{}, err
		}
		hours, err := hourFiles(filepath.Join(root, day.Format("20060102")))
		if err != nil {
			return platform.LogPage{}, err
		}
		for _, h := range hours {
			start := day.Add(time.Duration(h.hour) * time.Hour)
			if start.After(hi) || !start.Add(time.Hour).After(lo) {
				continue
			}
			n, err := readHour(h.path, func(l platform.LogLine) {
				l.Source = q.Source
				if q.Matches(l) && l.Time.Compare(upper) <= 0 && cur.allows(l) {
					cands = append(cands, l)
				}
			})
			scanned += n
			if err != nil {
				return platform.LogPage{}, err
			}
			if len(cands) > q.Limit {
				break walk
			}
		}
	}
	s.scanned.Add(int64(scanned))
	sortNewestFirst(cands)
	page, next := paginate(cands, q.Limit, cur)
	if page == nil {
		page = []platform.LogLine{}
	}
	return platform.LogPage{Lines: page, Next: next, Scanned: scanned}, nil
}

type hourPath struct {
	hour int
	path string
}

// hourFiles lists the hour files of a day directory, newest first.
func hourFiles(dir string) ([]hourPath, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []hourPath
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || len(name) != 2 {
			continue
		}
		h, err := strconv.Atoi(name)
		if err != nil || h < 0 || h > 23 {
			continue
		}
		out = append(out, hourPath{h, filepath.Join(dir, e.Name())})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].hour > out[j].hour })
	return out, nil
}

// readHour reads the complete lines of an hour file and returns how many it
// read. A torn last line (no newline yet) is not a line.
func readHour(path string, each func(platform.LogLine)) (int, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return 0, nil
	}
	n := 0
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		raw := b[:i]
		b = b[i+1:]
		var ll localLine
		if err := json.Unmarshal(raw, &ll); err != nil || ll.ID == "" {
			continue // not a line of ours: skip it rather than fail the log
		}
		n++
		each(platform.LogLine{
			ID: ll.ID, Time: time.UnixMilli(ll.T).UTC(), Level: ll.Level, Message: ll.Message,
			UserID: ll.UserID, ConversationID: ll.ConversationID, WorkflowID: ll.WorkflowID,
		})
	}
	return n, nil
}

// sweep deletes, at start and then hourly, the day directories older than
// the retention.
func (s *Local) sweep() {
	defer close(s.done)
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		s.prune()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *Local) prune() {
	// Sizes are recounted from disk at each source's next write.
	s.capMu.Lock()
	clear(s.sizes)
	clear(s.warned)
	s.capMu.Unlock()
	cutoff := s.now().UTC().Add(-s.retention).Truncate(24 * time.Hour).Format("20060102")
	for _, k := range []platform.LogKind{platform.LogBot, platform.LogIntegration} {
		kd := filepath.Join(s.dir, kindDir(k))
		ids, _ := os.ReadDir(kd)
		for _, id := range ids {
			days, _ := os.ReadDir(filepath.Join(kd, id.Name()))
			for _, d := range days {
				// A day strictly before the cutoff day holds only lines
				// older than the retention.
				if len(d.Name()) == 8 && d.Name() < cutoff {
					if err := os.RemoveAll(filepath.Join(kd, id.Name(), d.Name())); err != nil {
						s.log.Warn("log retention: could not delete", "dir", d.Name(), "err", err)
					}
				}
			}
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
