package localdynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/botforge/platform/shared/fsutil"
	"github.com/botforge/platform/shared/writelane"
)

const (
	// maxBodyBytes caps request bodies.
	maxBodyBytes = 16 << 20
	// targetPrefix is the X-Amz-Target prefix of DynamoDB operations.
	targetPrefix = "DynamoDB_20120810."
	lockName     = "LOCK"
	storeName    = "store"
	// stripes is the number of item locks; writes to items in different
	// stripes run in parallel. A lock is held until the write's fsync, so
	// two calls that share one wait for each other's: with 1,024, two
	// BatchWriteItem calls of 25 items shared one about half the time
	// (docs/embedded-dynamodb.md, "Concurrency").
	stripes = 65536
)

// ErrLocked is returned (wrapped) by Open when another process or Server
// has the directory open.
var ErrLocked = fsutil.ErrLocked

// Options tune a Server; the zero value is the default.
type Options struct {
	// MinFreeBytes: while the file system has less free space than this,
	// writes are refused with InsufficientStorageException (reads go on).
	// Default 64 MiB; a negative value keeps no reserve.
	MinFreeBytes int64
	// ReserveHint, when set, ends the refusal's message: how the operator
	// changes the reserve (shared/local names its flag and variable).
	ReserveHint string
	// CacheBytes is the block cache size. Default 128 MiB.
	CacheBytes int64
	// TTLInterval is how often expired items are deleted. Default 1 minute.
	TTLInterval time.Duration
	// Logger receives background errors. Default slog.Default().
	Logger *slog.Logger

	// freeSpace replaces the file system's free-space probe (tests).
	freeSpace func() (uint64, error)
	// beforeSync, when set, runs before every fsync of a store file named
	// (tests hold a write in flight with it).
	beforeSync func(name string)
}

// Server is a durable DynamoDB JSON-API endpoint (an http.Handler) over an
// ordered on-disk store in a directory. It is safe for concurrent use.
type Server struct {
	dir  string
	opts Options
	lock *os.File // flock on dir/LOCK
	db   *pebble.DB
	log  *slog.Logger

	// mu guards the table definitions: item operations hold it shared for
	// their whole duration, table operations exclusively.
	mu     sync.RWMutex
	tables map[string]*tableDef
	closed bool

	items [stripes]sync.Mutex // item locks, by hash of the item's store key

	durable inflight
	// dead: key ranges reads found without a live key, skipped by the
	// next reads (deadranges.go); stepped counts the keys Queries and
	// Scans stepped over, tombstones and older versions included.
	dead    deadRanges
	stepped atomic.Int64

	deadBytes    atomic.Int64 // bytes overwritten or deleted since the last compaction
	compacting   atomic.Bool
	stop         chan struct{}
	wg           sync.WaitGroup
	spaceRefused atomic.Int64 // writes refused for lack of space (tests, metrics)
	minFree      atomic.Int64 // current MinFreeBytes
	calls        sync.Map     // operation name -> *atomic.Int64 (Calls)
	onChange     atomic.Pointer[changeHook]
	units        meter        // capacity units (CountUnits, Usage)
	running      atomic.Int64 // operations under way (Settle)
	inProcess    atomic.Int64 // requests of the in-process path (InProcessCalls)
	direct       atomic.Int64 // calls RunDirect answered (DirectCalls)
}

// Calls returns how many requests of each operation the server answered
// (benchmarks count DynamoDB calls per unit of work with it).
func (s *Server) Calls() map[string]int64 {
	out := map[string]int64{}
	s.calls.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// KeysStepped is how many store keys Queries and Scans have stepped over
// so far: the items they read, and the deleted items and older versions
// of items Pebble keeps until a compaction, which they walk past.
func (s *Server) KeysStepped() int64 { return s.stepped.Load() }

// SetMinFreeBytes changes the free space below which writes are refused.
func (s *Server) SetMinFreeBytes(n int64) { s.minFree.Store(n) }

// DefaultMinFreeBytes is the free space kept in reserve by default.
const DefaultMinFreeBytes = 64 << 20

// Open opens (creating if needed) the store in dir and returns the server.
// It fails with ErrLocked if the directory is in use. A directory written by
// the previous journal-based version is migrated once.
func Open(dir string) (*Server, error) { return OpenWith(dir, Options{}) }

// OpenWith is Open with options.
func OpenWith(dir string, opts Options) (*Server, error) {
	if opts.MinFreeBytes == 0 {
		opts.MinFreeBytes = DefaultMinFreeBytes
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 128 << 20
	}
	if opts.TTLInterval == 0 {
		opts.TTLInterval = time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localdynamo: %w", err)
	}
	// The data is private, whoever created the directory.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("localdynamo: %w", err)
	}
	lock, err := fsutil.LockDir(filepath.Join(dir, lockName), 0)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, opts: opts, lock: lock, log: opts.Logger, tables: map[string]*tableDef{}, stop: make(chan struct{})}
	s.durable.cond = sync.NewCond(&s.durable.mu)
	s.minFree.Store(opts.MinFreeBytes)
	if err := s.open(); err != nil {
		if s.db != nil {
			_ = s.db.Close()
		}
		_ = fsutil.UnlockDir(lock)
		return nil, err
	}
	s.wg.Add(1)
	go s.background()
	return s, nil
}

func (s *Server) open() error {
	cache := pebble.NewCache(s.opts.CacheBytes)
	defer cache.Unref()
	opts := &pebble.Options{
		FS:           privateFS{FS: vfs.Default, beforeSync: s.opts.beforeSync},
		Cache:        cache,
		MemTableSize: 16 << 20,
		Logger:       pebbleLogger{s.log},
	}
	// Bloom filters on every level: a GetItem reads the data block of the
	// one file holding the item, whatever the number of levels.
	opts.Levels = make([]pebble.LevelOptions, 7)
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(filepath.Join(s.dir, storeName), opts)
	if err != nil {
		return fmt.Errorf("localdynamo: open store: %w", err)
	}
	s.db = db
	if err := s.loadTables(); err != nil {
		return err
	}
	if err := s.migrateJournal(); err != nil {
		return err
	}
	return privatize(s.dir)
}

// privatize makes every file below dir readable by its owner only (files a
// previous version created with wider permissions included).
func privatize(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if info.Mode().Perm() != mode {
			if err := os.Chmod(path, mode); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

func (s *Server) loadTables() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixMeta}, UpperBound: []byte{prefixMeta + 1}})
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		var t tableDef
		if err := json.Unmarshal(it.Value(), &t); err != nil {
			return fmt.Errorf("localdynamo: table definition %q: %w", it.Key()[1:], err)
		}
		s.tables[t.Name] = &t
	}
	return it.Error()
}

// nextTableID returns an id no table has used (ids are never reused, so
// leftovers of a deleted table can never be mistaken for a new one's).
func (s *Server) nextTableID() (uint32, error) {
	key := []byte{'n'}
	v, closer, err := s.db.Get(key)
	var id uint32
	if err == nil {
		if len(v) == 4 {
			id = uint32(v[0])<<24 | uint32(v[1])<<16 | uint32(v[2])<<8 | uint32(v[3])
		}
		closer.Close()
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return 0, err
	}
	id++
	return id, nil
}

func tableIDValue(id uint32) []byte {
	return []byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
}

// ServeHTTP answers one DynamoDB JSON-API request (dispatching on the
// X-Amz-Target header). A write is answered once it is on disk.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		errorResponse(http.StatusMethodNotAllowed, "UnknownOperationException", "only POST is supported").write(w)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op, found := strings.CutPrefix(target, targetPrefix)
	h := handlers[op]
	if !found || h.fn == nil && h.read == nil {
		errorResponse(http.StatusBadRequest, "UnknownOperationException",
			fmt.Sprintf("unknown or unsupported operation %q", target)).write(w)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			errorResponse(http.StatusRequestEntityTooLarge, "ValidationException",
				fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes)).write(w)
			return
		}
		errorResponse(http.StatusBadRequest, "SerializationException", "reading request body: "+err.Error()).write(w)
		return
	}
	if !json.Valid(body) {
		errorResponse(http.StatusBadRequest, "SerializationException", "request body is not valid JSON").write(w)
		return
	}
	s.count(op)
	lane, visible := writelane.From(r.Context())
	toResponse(s.serveIn(op, request{body: body}, lane, visible)).write(w)
}

// count counts one request of op (Calls).
func (s *Server) count(op string) {
	c, ok := s.calls.Load(op)
	if !ok {
		c, _ = s.calls.LoadOrStore(op, new(atomic.Int64))
	}
	c.(*atomic.Int64).Add(1)
}

// serve runs one operation.
func (s *Server) serve(op string, body []byte) response {
	return toResponse(s.serveIn(op, request{body: body}, nil, nil))
}

// serveIn runs one operation of a lane (lane.go; nil for none): a write of
// it with visible set calls visible once the write is visible (DeleteItem
// only, what the dispatcher needs; other writes are answered as ever,
// visible not called), a read of it does not wait for the lane's writes in
// flight. It answers the operation's output (encoded by toResponse for the
// HTTP path, converted to the SDK's types by the in-process path) or its
// error (a *dynErr is DynamoDB's error).
func (s *Server) serveIn(op string, req request, lane *writelane.Lane, visible func()) (out any, err error) {
	s.running.Add(1)
	defer s.running.Add(-1)
	h := handlers[op]
	if h.table {
		s.mu.Lock()
		defer s.mu.Unlock()
	} else {
		s.mu.RLock()
		defer s.mu.RUnlock()
	}
	if s.closed {
		return nil, errClosed()
	}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("localdynamo: panic", "op", op, "panic", p)
			out, err = nil, &dynErr{status: http.StatusInternalServerError, typ: "InternalServerError", msg: fmt.Sprintf("%s failed: %v", op, p)}
		}
	}()
	if h.write {
		if err := s.checkSpace(); err != nil {
			return nil, err
		}
	}
	// A read must not answer from a write that is not yet durable: it waits
	// for the writes in flight that it may have seen, those that began
	// before it ended and write where it read (not for every write in
	// flight: a read of one item does not wait for another's fsync).
	if h.write {
		if lane != nil && visible != nil && h.aside != nil {
			return h.aside(s, req, &aside{lane: lane, visible: visible})
		}
		return h.fn(s, req)
	}
	if h.read == nil {
		mark := s.durable.mark()
		out, err = h.fn(s, req)
		s.durable.wait(mark, nil, nil)
		return out, err
	}
	rs := &readSet{}
	out, err = h.read(s, req, rs)
	s.durable.wait(s.durable.mark(), rs, lane)
	return out, err
}

func errClosed() *dynErr {
	return &dynErr{status: http.StatusServiceUnavailable, typ: "ServiceUnavailable", msg: "localdynamo: server is closed"}
}

// checkSpace refuses a write while free space is below MinFreeBytes, so the
// store itself never runs into a full disk: reads go on, and writes resume
// as soon as space is freed.
func (s *Server) checkSpace() error {
	free, err := s.freeBytes()
	need := s.minFree.Load()
	if err != nil || int64(free) >= need {
		return nil
	}
	s.spaceRefused.Add(1)
	return &dynErr{typ: "InsufficientStorageException", msg: fsutil.ReserveMessage(free, need, s.opts.ReserveHint)}
}

func (s *Server) freeBytes() (uint64, error) {
	if s.opts.freeSpace != nil {
		return s.opts.freeSpace()
	}
	u, err := vfs.Default.GetDiskUsage(s.dir)
	return u.AvailBytes, err
}

// lockItems takes the item locks of the given store keys (in stripe order,
// so that concurrent multi-item writes cannot deadlock) and returns the
// function releasing them.
func (s *Server) lockItems(keys ...[]byte) func() {
	idx := make([]int, 0, len(keys))
	for _, k := range keys {
		h := fnv.New32a()
		_, _ = h.Write(k)
		idx = append(idx, int(h.Sum32()%stripes))
	}
	slices.Sort(idx)
	idx = slices.Compact(idx)
	for _, i := range idx {
		s.items[i].Lock()
	}
	return func() {
		for _, i := range idx {
			s.items[i].Unlock()
		}
	}
}

// commit makes a batch durable (fsynced; concurrent commits share fsyncs).
func (s *Server) commit(b *pebble.Batch, dead int64) error { return s.commitAside(b, dead, nil) }

// commitAside is commit for a write of a lane (ax; nil for none): ax's
// visible is called once the batch is visible to reads, its fsync still
// under way; it returns once the batch is durable.
func (s *Server) commitAside(b *pebble.Batch, dead int64, ax *aside) error {
	var lane *writelane.Lane
	if ax != nil {
		lane = ax.lane
	}
	ws := writeSetOf(b)
	s.dead.cut(ws)
	t := s.durable.begin(ws, lane)
	var err error
	if ax == nil {
		err = b.Commit(pebble.Sync)
		s.dead.cut(ws)
	} else if err = s.db.ApplyNoSyncWait(b, pebble.Sync); err == nil {
		s.dead.cut(ws)
		ax.visible()
		err = b.SyncWait()
	}
	s.durable.end(t)
	if err != nil {
		return err
	}
	if dead > 0 {
		s.deadBytes.Add(dead)
	}
	return nil
}

// inflight tracks writes between the start of their commit and the end of
// their fsync (Pebble makes a batch visible before its fsync), with the
// keys each writes; a read waits for those it may have seen.
type inflight struct {
	mu      sync.Mutex
	cond    *sync.Cond
	next    uint64
	pending map[uint64]pendingWrite
}

// pendingWrite is a write in flight: what it writes, and its lane (nil for
// none).
type pendingWrite struct {
	ws   *writeSet
	lane *writelane.Lane
}

func (f *inflight) begin(ws *writeSet, lane *writelane.Lane) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	if f.pending == nil {
		f.pending = map[uint64]pendingWrite{}
	}
	f.pending[f.next] = pendingWrite{ws: ws, lane: lane}
	return f.next
}

func (f *inflight) end(t uint64) {
	f.mu.Lock()
	delete(f.pending, t)
	f.mu.Unlock()
	f.cond.Broadcast()
}

func (f *inflight) mark() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next
}

// wait returns once no write that began by mark and touches rs (any,
// with rs nil) is in flight, the writes of lane (when not nil) left out.
func (f *inflight) wait(mark uint64, rs *readSet, lane *writelane.Lane) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		blocked := false
		for t, p := range f.pending {
			if t <= mark && (lane == nil || p.lane != lane) && (rs == nil || p.ws.touches(rs)) {
				blocked = true
				break
			}
		}
		if !blocked {
			return
		}
		f.cond.Wait()
	}
}

// writeSet is what a batch writes: its keys, and the ranges it deletes.
type writeSet struct {
	keys   [][]byte // sorted
	ranges [][2][]byte
}

// writeSetOf lists what b writes (nil when it cannot be read: such a
// write is waited for by every read).
func writeSetOf(b *pebble.Batch) *writeSet {
	ws := &writeSet{}
	r := b.Reader()
	for {
		kind, k, v, ok, err := r.Next()
		if err != nil {
			return nil
		}
		if !ok {
			break
		}
		switch kind {
		case pebble.InternalKeyKindSet, pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindMerge:
			ws.keys = append(ws.keys, bytes.Clone(k))
		case pebble.InternalKeyKindRangeDelete:
			ws.ranges = append(ws.ranges, [2][]byte{bytes.Clone(k), bytes.Clone(v)})
		default:
			return nil
		}
	}
	slices.SortFunc(ws.keys, bytes.Compare)
	return ws
}

// touches tells whether the write may change what rs read.
func (ws *writeSet) touches(rs *readSet) bool {
	if ws == nil {
		return true
	}
	for _, k := range rs.points {
		if _, found := slices.BinarySearchFunc(ws.keys, k, bytes.Compare); found {
			return true
		}
		for _, r := range ws.ranges {
			if bytes.Compare(k, r[0]) >= 0 && bytes.Compare(k, r[1]) < 0 {
				return true
			}
		}
	}
	for _, sp := range rs.spans {
		// The first key at or after the span's start, if before its end.
		i, _ := slices.BinarySearchFunc(ws.keys, sp[0], bytes.Compare)
		if i < len(ws.keys) && (sp[1] == nil || bytes.Compare(ws.keys[i], sp[1]) < 0) {
			return true
		}
		for _, r := range ws.ranges {
			if (sp[1] == nil || bytes.Compare(r[0], sp[1]) < 0) && bytes.Compare(sp[0], r[1]) < 0 {
				return true
			}
		}
	}
	return false
}

// readSet is what a read read: item keys and key ranges ([lower, upper),
// a nil upper bound open).
type readSet struct {
	points [][]byte
	spans  [][2][]byte
}

func (rs *readSet) point(k []byte) { rs.points = append(rs.points, bytes.Clone(k)) }

func (rs *readSet) span(lower, upper []byte) {
	rs.spans = append(rs.spans, [2][]byte{bytes.Clone(lower), bytes.Clone(upper)})
}

// background deletes expired items and compacts away dead data.
func (s *Server) background() {
	defer s.wg.Done()
	tick := time.NewTicker(s.opts.TTLInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			s.expireItems(time.Now())
			s.maybeCompact()
		}
	}
}

// maybeCompact compacts the whole store once the bytes overwritten or
// deleted since the last compaction exceed both 64 MiB and the live data,
// so the files stay bounded by the live data.
func (s *Server) maybeCompact() {
	dead := s.deadBytes.Load()
	if dead < 64<<20 || !s.compacting.CompareAndSwap(false, true) {
		return
	}
	defer s.compacting.Store(false)
	live := int64(s.db.Metrics().DiskSpaceUsage())
	if dead < live/2 {
		return
	}
	s.deadBytes.Add(-dead)
	if err := s.db.Compact([]byte{0}, []byte{0xFF}, false); err != nil {
		s.log.Warn("localdynamo: compaction failed", "err", err)
	}
}

// Close closes the store and releases the directory lock. Requests after
// Close are answered 503 ServiceUnavailable. Close is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.wg.Wait()
	err := s.db.Close()
	if uerr := fsutil.UnlockDir(s.lock); err == nil {
		err = uerr
	}
	return err
}

// pebbleLogger sends Pebble's messages to slog (its routine ones at debug).
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("pebble: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error("pebble: fatal: " + fmt.Sprintf(format, args...))
	os.Exit(2)
}
