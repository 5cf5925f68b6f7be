package localdynamo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/truora/minidyn/server"

	"github.com/botforge/platform/shared/fsutil"
)

const (
	// maxBodyBytes caps request bodies.
	maxBodyBytes = 16 << 20
	// targetPrefix is the X-Amz-Target prefix of DynamoDB operations.
	targetPrefix = "DynamoDB_20120810."
	lockName     = "LOCK"
)

// ErrLocked is returned (wrapped) by Open when another process or Server
// has the directory open.
var ErrLocked = fsutil.ErrLocked

type opKind int

const (
	opUnknown opKind = iota
	opRead
	opWrite
)

// ops lists the supported operations.
var ops = map[string]opKind{
	"CreateTable":        opWrite,
	"UpdateTable":        opWrite,
	"DeleteTable":        opWrite,
	"PutItem":            opWrite,
	"UpdateItem":         opWrite,
	"DeleteItem":         opWrite,
	"BatchWriteItem":     opWrite,
	"TransactWriteItems": opWrite,
	"UpdateTimeToLive":   opWrite,

	"GetItem":            opRead,
	"Query":              opRead,
	"Scan":               opRead,
	"BatchGetItem":       opRead,
	"TransactGetItems":   opRead,
	"DescribeTable":      opRead,
	"ListTables":         opRead,
	"DescribeTimeToLive": opRead,
}

// Server is a durable DynamoDB JSON-API endpoint (an http.Handler) backed by
// minidyn and a journal in a directory. It is safe for concurrent use.
type Server struct {
	dir  string
	lock *os.File // holds the flock on dir/LOCK

	// mu orders state changes: a write applies its change and appends its
	// journal record while holding mu exclusively, so journal order is apply
	// order. Reads hold it shared.
	mu     sync.RWMutex
	mini   *server.Server
	tables map[string]*tableMeta
	j      *journal
	closed bool

	replaying bool // skips response cosmetics while replaying
	// compactSkipped says why a compaction was abandoned (for tests).
	compactSkipped error
}

// Open replays the journal in dir (creating dir if needed) into a fresh
// minidyn and returns the server. It fails with ErrLocked if the directory is
// in use, and with ErrCorruptJournal if the journal is damaged other than by
// a crash during an unacknowledged write (such a torn tail is truncated).
func Open(dir string) (*Server, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("localdynamo: %w", err)
	}
	lock, err := fsutil.LockDir(filepath.Join(dir, lockName), 0)
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, lock: lock}
	if err := s.load(); err != nil {
		_ = fsutil.UnlockDir(lock)
		return nil, err
	}
	return s, nil
}

// load replays the journal, compacting it first if that pays off.
func (s *Server) load() error {
	path := filepath.Join(s.dir, journalName)
	// Left over by an interrupted create or compaction; never the journal.
	for _, leftover := range []string{path + ".tmp", path + ".compact"} {
		if err := os.Remove(leftover); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("localdynamo: %w", err)
		}
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := createJournal(path); err != nil {
			return fmt.Errorf("localdynamo: create journal: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("localdynamo: %w", err)
	}

	f, res, err := s.replayFile(path)
	if err != nil {
		return err
	}
	if s.shouldCompact(res) {
		if cf, cres, ok := s.compact(path); ok {
			_ = f.Close()
			f, res = cf, cres
		}
	}
	if _, err := f.Seek(res.validEnd, io.SeekStart); err != nil {
		_ = f.Close()
		return fmt.Errorf("localdynamo: %w", err)
	}
	s.j = newJournal(f, res.validEnd, res.records)
	return nil
}

// replayFile resets the state to empty and replays the journal at path into
// it, truncating a torn tail. It returns the open journal file.
func (s *Server) replayFile(path string) (*os.File, scanResult, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, scanResult{}, fmt.Errorf("localdynamo: %w", err)
	}
	s.mini = server.NewServer()
	s.tables = map[string]*tableMeta{}
	s.replaying = true
	defer func() { s.replaying = false }()

	n := 0
	res, err := readJournal(f, func(r record) error {
		n++
		out, _ := s.execWrite(r.op, r.body)
		if r.flag == flagApplied && !out.ok() {
			return fmt.Errorf("localdynamo: journal %s: replaying record %d (%s) failed with %d %s; minidyn no longer agrees with the journal",
				path, n, r.op, out.status, bytes.TrimSpace(out.body))
		}
		return nil
	})
	if err == nil && res.validEnd < res.size {
		// A torn tail: the write it held was never acknowledged.
		if err = f.Truncate(res.validEnd); err == nil {
			err = f.Sync()
		}
		if err != nil {
			err = fmt.Errorf("localdynamo: truncate torn journal tail: %w", err)
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, res, err
	}
	return f, res, nil
}

// ServeHTTP answers one DynamoDB JSON-API request (dispatching on the
// X-Amz-Target header). A mutating request is answered only after its
// journal record is on disk.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		errorResponse(http.StatusMethodNotAllowed, "UnknownOperationException", "only POST is supported").write(w)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	op, found := strings.CutPrefix(target, targetPrefix)
	kind := ops[op]
	if !found || kind == opUnknown {
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

	if kind == opWrite {
		s.serveWrite(w, op, body)
	} else {
		s.serveRead(w, op, body)
	}
}

func closedResponse() response {
	return errorResponse(http.StatusServiceUnavailable, "ServiceUnavailable", "localdynamo: server is closed")
}

func journalFailedResponse(err error) response {
	return errorResponse(http.StatusInternalServerError, "InternalServerError", err.Error())
}

// serveWrite applies a mutating request and appends its record under the
// exclusive lock, then waits for the record to be durable outside it, so
// that concurrent writers share fsyncs.
func (s *Server) serveWrite(w http.ResponseWriter, op string, body []byte) {
	res, off, done := func() (response, int64, bool) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return closedResponse(), 0, true
		}
		if err := s.j.failure(); err != nil {
			return journalFailedResponse(err), 0, true
		}
		res, rec := s.execWrite(op, body)
		if rec != nil {
			return res, s.j.append(*rec), false
		}
		// A failed write may still have observed state that is not durable.
		return res, s.j.appended(), false
	}()
	if !done {
		if err := s.j.waitDurable(off); err != nil {
			res = journalFailedResponse(err)
		}
	}
	res.write(w)
}

// serveRead answers a read once everything it may have seen is durable.
func (s *Server) serveRead(w http.ResponseWriter, op string, body []byte) {
	res, off, done := func() (response, int64, bool) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.closed {
			return closedResponse(), 0, true
		}
		return s.execRead(op, body), s.j.appended(), false
	}()
	if !done {
		if err := s.j.waitDurable(off); err != nil {
			res = journalFailedResponse(err)
		}
	}
	res.write(w)
}

// Close flushes and fsyncs the journal, closes it and releases the directory
// lock. Requests after Close are answered 503 ServiceUnavailable. Close is
// idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	off := s.j.appended()
	s.mini, s.tables = nil, nil
	s.mu.Unlock()

	err := s.j.waitDurable(off)
	if cerr := s.j.close(); err == nil {
		err = cerr
	}
	if uerr := fsutil.UnlockDir(s.lock); err == nil {
		err = uerr
	}
	return err
}

// callMini runs one request through minidyn. A panic in minidyn (it has a
// few, e.g. Query on an index that does not exist) becomes an
// InternalServerError response.
func (s *Server) callMini(op string, body []byte) (res response) {
	req, err := http.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	if err != nil {
		return errorResponse(http.StatusInternalServerError, "InternalServerError", err.Error())
	}
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	defer func() {
		if p := recover(); p != nil {
			res = errorResponse(http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("minidyn panicked on %s: %v", op, p))
		}
	}()
	var rec recorder
	s.mini.ServeHTTP(&rec, req)
	return rec.response()
}

// execWrite applies one mutating request, live or from the journal, and
// returns the response and the record to journal (nil if the request left
// no trace). It is deterministic given the state and the request, which is
// what makes replay reproduce the state. The caller holds mu exclusively.
func (s *Server) execWrite(op string, body []byte) (response, *record) {
	switch op {
	case "UpdateTimeToLive":
		return s.updateTimeToLive(body)
	case "BatchWriteItem":
		return s.batchWriteItem(body)
	case "PutItem":
		return s.putItem(body)
	case "CreateTable", "UpdateTable", "DeleteTable", "UpdateItem", "DeleteItem", "TransactWriteItems":
		res := s.callMini(op, body)
		rec := s.recordFor(op, body, res)
		res = s.afterTableChange(op, body, res, rec)
		return res, rec
	default:
		return errorResponse(http.StatusBadRequest, "UnknownOperationException", "not a write operation: "+op), nil
	}
}

// recordFor decides whether a request minidyn has just answered must be
// journaled.
func (s *Server) recordFor(op string, body []byte, res response) *record {
	if res.ok() {
		return &record{flag: flagApplied, op: op, body: body}
	}
	if s.mayHaveChanged(op, body, res) {
		return &record{flag: flagFailed, op: op, body: body}
	}
	return nil
}

// mayHaveChanged reports whether a failed request may have changed
// minidyn's state. minidyn is atomic for conditional check failures,
// transactions and table creation and deletion, but a PutItem, UpdateItem or
// DeleteItem that fails while maintaining a secondary index (for example an
// index key attribute of the wrong type) has already changed the item,
// UpdateTable applies AttributeDefinitions and earlier index changes before a
// failing one, and a panic can stop anything halfway.
func (s *Server) mayHaveChanged(op string, body []byte, res response) bool {
	if res.status >= http.StatusInternalServerError {
		// minidyn panicked halfway through.
		return true
	}
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		switch res.errorType() {
		case "ConditionalCheckFailedException", "ResourceNotFoundException":
			return false
		}
		return true
	case "UpdateTable":
		return s.tables[tableNameOf(body)] != nil
	}
	return false
}

// execRead answers a read. The caller holds mu (shared is enough).
func (s *Server) execRead(op string, body []byte) response {
	switch op {
	case "ListTables":
		return s.listTables(body)
	case "DescribeTimeToLive":
		return s.describeTimeToLive(body)
	case "DescribeTable":
		res := s.callMini(op, body)
		if res.ok() {
			res.body = s.completeDescription(res.body, "Table", "ACTIVE")
		}
		return res
	default:
		return s.callMini(op, body)
	}
}

// putItem forwards PutItem and fixes its response: minidyn always returns the
// new item as Attributes, DynamoDB returns nothing, or the old item when
// ReturnValues is ALL_OLD.
func (s *Server) putItem(body []byte) (response, *record) {
	var in struct {
		TableName    string
		Item         map[string]json.RawMessage `json:"-"`
		ReturnValues string
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return errorResponse(http.StatusBadRequest, "SerializationException", err.Error()), nil
	}
	switch in.ReturnValues {
	case "", "NONE", "ALL_OLD":
	default:
		return validationError("ReturnValues can only be ALL_OLD or NONE"), nil
	}

	var old json.RawMessage
	if meta := s.tables[in.TableName]; in.ReturnValues == "ALL_OLD" && meta != nil {
		var item struct{ Item map[string]json.RawMessage }
		_ = json.Unmarshal(body, &item)
		in.Item = item.Item
		if key, ok := meta.keyOf(in.Item); ok {
			get, _ := json.Marshal(map[string]any{"TableName": in.TableName, "Key": key, "ConsistentRead": true})
			if res := s.callMini("GetItem", get); res.ok() {
				var out struct{ Item json.RawMessage }
				if json.Unmarshal(res.body, &out) == nil {
					old = out.Item
				}
			}
		}
	}

	res := s.callMini("PutItem", body)
	rec := s.recordFor("PutItem", body, res)
	if res.ok() {
		if len(old) > 0 && string(old) != "null" {
			res = jsonResponse(map[string]json.RawMessage{"Attributes": old})
		} else {
			res.body = []byte("{}")
		}
	}
	return res, rec
}

// tableNameOf returns the TableName field of a request body, or "".
func tableNameOf(body []byte) string {
	var in struct{ TableName string }
	_ = json.Unmarshal(body, &in)
	return in.TableName
}
