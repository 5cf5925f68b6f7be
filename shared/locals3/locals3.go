// Package locals3 is the in-process S3 stand-in of the platform's local mode.
//
// It serves the S3 REST API (path-style addressing only: /bucket/key) with
// github.com/johannesboyne/gofakes3 on top of a file-per-object backend
// under Dir (see storeBackend), and adds what gofakes3 lacks: AWS Signature Version 4
// verification of every request, both Authorization-header signatures as
// sent by the AWS SDKs (hex SHA-256, UNSIGNED-PAYLOAD and the aws-chunked
// STREAMING-* payload modes, including flexible checksum trailers) and
// presigned URLs. Only the configured credentials are accepted.
//
// Object bodies are streamed: a PUT goes from the request (or, when the
// payload must be verified first, from a spool file) straight to the
// object's data file, and a GET streams from that file, so memory use does
// not grow with object size. Every acknowledged write has been fsynced
// (data, record and directory), so it survives a restart or a kill -9.
//
// The Server can be mounted under a path prefix on a shared listener; see
// Options.PathPrefix.
package locals3

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"

	"github.com/botforge/platform/shared/fsutil"
)

// Options configures a Server.
type Options struct {
	Dir             string // data directory; objects live under Dir/buckets
	Region          string // e.g. "us-east-1"
	AccessKeyID     string // the only credentials accepted
	SecretAccessKey string

	// PathPrefix, when set (e.g. "/_s3"), is the path the Server is mounted
	// under on a shared listener. Requests must start with it; it is
	// stripped before routing (/_s3/bucket/key addresses key in bucket) but
	// stays part of the canonical URI when verifying signatures, because
	// clients sign the path they send. Configure clients with the prefix in
	// the endpoint (BaseEndpoint "http://host:port/_s3") and mount the
	// Server itself, without http.StripPrefix, under both patterns
	// (otherwise http.ServeMux redirects the bare prefix, which ListBuckets
	// uses, and the redirected request no longer matches its signature):
	//
	//	mux.Handle("/_s3/", s3server)
	//	mux.Handle("/_s3", s3server)
	//
	// Anything in front of the Server must preserve the path and the Host
	// header the client signed.
	PathPrefix string

	// MinFreeBytes: while the disk holding Dir has less free space than
	// this, writes (PUT, POST) are refused with 507 InsufficientStorage,
	// saying the free space, the reserve and ReserveHint (how to change
	// it); reads go on. 0 keeps no reserve (SetMinFreeBytes changes it).
	MinFreeBytes int64
	ReserveHint  string

	// OnPut, when set, is called after an object PUT (PutObject or a
	// presigned PUT, or CompleteMultipartUpload) succeeded, before the
	// response is written. Errors are logged, not returned to the uploader.
	//
	// CopyObject (a PUT with x-amz-copy-source) also creates an object and
	// triggers OnPut; UploadPart does not. The object is durable when OnPut
	// runs. It runs synchronously on the request's goroutine with the
	// request's context, which is canceled once the response is sent: use
	// context.WithoutCancel for work that outlives the call.
	OnPut func(ctx context.Context, obj PutObject) error

	Now func() time.Time // defaults to time.Now; tests override
}

// PutObject describes an object that has just been stored.
type PutObject struct {
	Bucket, Key, ContentType string
	Size                     int64
}

// lockTimeout is how long Open waits for another Server to release Dir.
var lockTimeout = 5 * time.Second

// Server is an http.Handler serving the S3 API. It is safe for concurrent
// use.
type Server struct {
	opts    Options
	prefix  string // normalized PathPrefix: "" or "/x" without trailing slash
	tmpDir  string
	lock    *os.File // flock on Dir/lock
	backend *storeBackend
	handler http.Handler
	log     *slog.Logger

	closeOnce sync.Once
	closeErr  error
	closed    atomic.Bool
	minFree   atomic.Int64
}

// SetMinFreeBytes changes the free space below which writes are refused.
func (s *Server) SetMinFreeBytes(n int64) { s.minFree.Store(n) }

// checkSpace refuses a write while the disk's free space is below the
// reserve, in the embedded DynamoDB's words (fsutil.ReserveMessage).
func (s *Server) checkSpace(r *http.Request) *s3Error {
	need := s.minFree.Load()
	if need <= 0 || (r.Method != http.MethodPut && r.Method != http.MethodPost) {
		return nil
	}
	free, err := fsutil.FreeBytes(s.opts.Dir)
	if err != nil || int64(free) >= need {
		return nil
	}
	return newError(http.StatusInsufficientStorage, "InsufficientStorage", "%s", fsutil.ReserveMessage(free, need, s.opts.ReserveHint))
}

// Open opens (creating if needed) the store in opts.Dir and returns a Server.
// Only one Server (process) can have a Dir open at a time; Open fails after a
// few seconds if another holds its lock.
func Open(opts Options) (*Server, error) {
	switch {
	case opts.Dir == "":
		return nil, errors.New("locals3: Options.Dir is required")
	case opts.Region == "":
		return nil, errors.New("locals3: Options.Region is required")
	case opts.AccessKeyID == "" || opts.SecretAccessKey == "":
		return nil, errors.New("locals3: Options.AccessKeyID and Options.SecretAccessKey are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	prefix := strings.TrimRight(opts.PathPrefix, "/")
	if prefix != "" && !strings.HasPrefix(prefix, "/") {
		prefix = "/" + prefix
	}

	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("locals3: %w", err)
	}
	lock, err := fsutil.LockDir(filepath.Join(opts.Dir, "lock"), lockTimeout)
	if err != nil {
		return nil, fmt.Errorf("locals3: %w", err)
	}
	logger := slog.Default().With("component", "locals3")
	// Before the file-per-object store, objects lived in a bbolt file.
	// Local development data is not migrated.
	if _, err := os.Stat(filepath.Join(opts.Dir, "s3.db")); err == nil {
		logger.Warn("ignoring objects stored by an earlier version (s3.db); delete the file to silence this", "dir", opts.Dir)
	}

	// Request bodies that must be verified before they are stored are
	// spooled here, and deleted buckets are moved here before removal.
	// Holding the lock, leftovers of a crashed process can be removed.
	tmpDir := filepath.Join(opts.Dir, "s3.tmp")
	err = os.RemoveAll(tmpDir)
	if err == nil {
		err = os.Mkdir(tmpDir, 0o700)
	}
	if err != nil {
		_ = fsutil.UnlockDir(lock)
		return nil, fmt.Errorf("locals3: %w", err)
	}

	clock := timeSource{opts.Now}
	backend, err := openStore(filepath.Join(opts.Dir, "buckets"), tmpDir, clock.Now, logger)
	if err != nil {
		_ = fsutil.UnlockDir(lock)
		return nil, fmt.Errorf("locals3: open store: %w", err)
	}
	backend.record = opts.OnPut != nil
	// Make the (possibly new) directories durable too.
	_ = fsutil.SyncDir(opts.Dir)

	fake := gofakes3.New(backend,
		gofakes3.WithTimeSource(clock),
		gofakes3.WithTimeSkewLimit(0), // checked (against the signed time) in authenticate
		gofakes3.WithIntegrityCheck(true),
		gofakes3.WithLogger(errorLogger{logger}),
	)
	srv := &Server{
		opts:    opts,
		prefix:  prefix,
		tmpDir:  tmpDir,
		lock:    lock,
		backend: backend,
		handler: fake.Server(),
		log:     logger,
	}
	srv.minFree.Store(opts.MinFreeBytes)
	return srv, nil
}

// Close releases the data directory; later requests are refused. Requests
// still in flight may fail.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		_ = os.RemoveAll(s.tmpDir)
		s.closeErr = fsutil.UnlockDir(s.lock)
	})
	return s.closeErr
}

// EnsureBucket creates the bucket name unless it exists.
func (s *Server) EnsureBucket(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return fmt.Errorf("locals3: bucket %q: %w", name, err)
	}
	exists, err := s.backend.BucketExists(name)
	if err != nil {
		return fmt.Errorf("locals3: bucket %q: %w", name, err)
	}
	if exists {
		return nil
	}
	if err := s.backend.CreateBucket(name); err != nil && !gofakes3.IsAlreadyExists(err) {
		return fmt.Errorf("locals3: create bucket %q: %w", name, err)
	}
	return nil
}

func (s *Server) now() time.Time { return s.opts.Now() }

// ServeHTTP authenticates the request, verifies its payload and hands it to
// gofakes3.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The canonical URI is computed from the path as the client sent it,
	// before the prefix is stripped.
	escapedPath := r.URL.EscapedPath()
	if s.closed.Load() {
		writeError(w, r, newError(http.StatusServiceUnavailable, "ServiceUnavailable", "The server is closed."))
		return
	}
	if s.prefix != "" {
		var ok bool
		if r, ok = stripPrefix(r, s.prefix); !ok {
			writeError(w, r, newError(http.StatusNotFound, "NotFound", "The path is not under %s", s.prefix))
			return
		}
	}

	// CORS preflights never carry credentials; gofakes3 answers them
	// permissively (this is a local development server).
	if r.Method == http.MethodOptions && r.Header.Get("Origin") != "" && r.Header.Get("Access-Control-Request-Method") != "" {
		s.handler.ServeHTTP(w, r)
		return
	}

	canonicalURI, err := canonicalURIPath(escapedPath)
	if err != nil {
		writeError(w, r, newError(http.StatusBadRequest, "InvalidURI", "Couldn't parse the specified URI."))
		return
	}
	auth, e := s.authenticate(r, canonicalURI)
	if e != nil {
		writeError(w, r, e)
		return
	}
	if e := s.checkSpace(r); e != nil {
		writeError(w, r, e)
		return
	}
	bucket, key := splitPath(r.URL.Path)
	if e := unsupportedSubresource(r, key); e != nil {
		writeError(w, r, e)
		return
	}
	cleanup, e := s.prepareBody(w, r, auth)
	defer cleanup()
	if e != nil {
		writeError(w, r, e)
		return
	}
	stripAuthHeaders(r.Header)

	if s.opts.OnPut == nil || !isObjectWrite(r, key) {
		s.handler.ServeHTTP(w, r)
		return
	}

	// Object write with a hook: hold the (small) response back until the
	// hook ran.
	rec := &responseRecorder{header: http.Header{}}
	s.handler.ServeHTTP(rec, r)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status < 300 {
		var err error
		obj, ok := s.backend.takePut(bucket, key)
		if !ok {
			obj, err = s.describe(bucket, key)
		}
		if err != nil {
			s.log.ErrorContext(r.Context(), "OnPut: cannot describe stored object", "bucket", bucket, "key", key, "err", err)
		} else if err := s.opts.OnPut(r.Context(), obj); err != nil {
			s.log.ErrorContext(r.Context(), "OnPut hook failed", "bucket", bucket, "key", key, "err", err)
		}
	}
	rec.flush(w)
}

// describe reads an object's size and content type back from the store.
func (s *Server) describe(bucket, key string) (PutObject, error) {
	obj, err := s.backend.HeadObject(bucket, key)
	if err != nil {
		return PutObject{}, err
	}
	if obj.Contents != nil {
		_ = obj.Contents.Close()
	}
	return PutObject{Bucket: bucket, Key: key, ContentType: obj.Metadata["Content-Type"], Size: obj.Size}, nil
}

// stripPrefix returns a shallow copy of r with prefix removed from the path,
// like http.StripPrefix, or false if the path is not under prefix.
func stripPrefix(r *http.Request, prefix string) (*http.Request, bool) {
	p, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || (p != "" && p[0] != '/') {
		return r, false
	}
	rp := r.URL.RawPath
	if rp != "" {
		if rp, ok = strings.CutPrefix(rp, prefix); !ok {
			return r, false
		}
	}
	if p == "" {
		p, rp = "/", ""
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = new(url.URL)
	*r2.URL = *r.URL
	r2.URL.Path = p
	r2.URL.RawPath = rp
	return r2, true
}

// splitPath splits a path-style request path into bucket and key.
func splitPath(p string) (bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(p, "/"), "/")
	return bucket, key
}

// isObjectWrite reports whether r stores an object: PutObject (including
// presigned and CopyObject) or CompleteMultipartUpload, but not UploadPart.
func isObjectWrite(r *http.Request, key string) bool {
	if key == "" {
		return false
	}
	q := r.URL.Query()
	_, hasUpload := q["uploadId"]
	switch r.Method {
	case http.MethodPut:
		return !hasUpload
	case http.MethodPost:
		return hasUpload
	}
	return false
}

// Subresources gofakes3 does not implement. It would route them like plain
// object or bucket requests (PUT /b/k?tagging would overwrite the object with
// the tagging XML), so they are refused.
var (
	unsupportedObjectSubresources = []string{"acl", "tagging", "retention", "legal-hold", "torrent", "restore", "select", "attributes", "renameObject"}
	unsupportedBucketSubresources = []string{
		"acl", "tagging", "policy", "policyStatus", "cors", "lifecycle", "website", "notification",
		"encryption", "replication", "logging", "ownershipControls", "publicAccessBlock", "object-lock",
		"accelerate", "requestPayment", "intelligent-tiering", "inventory", "analytics", "metrics", "metadataTable",
	}
)

func unsupportedSubresource(r *http.Request, key string) *s3Error {
	list := unsupportedBucketSubresources
	if key != "" {
		list = unsupportedObjectSubresources
	}
	q := r.URL.Query()
	for _, name := range list {
		if _, ok := q[name]; ok {
			return newError(http.StatusNotImplemented, codeNotImplemented, "The %q subresource is not implemented by the local S3 server.", name)
		}
	}
	return nil
}

// stripAuthHeaders removes signing and transport headers once they have been
// verified, so gofakes3 (which stores every X-Amz-* request header as object
// metadata and echoes it on GET) does not persist them. Flexible checksums are
// dropped as well: they were verified, and replaying a whole-object checksum
// on a ranged GET would make SDKs fail their response validation.
func stripAuthHeaders(h http.Header) {
	for name := range h {
		l := strings.ToLower(name)
		switch {
		case l == "authorization",
			l == "x-amz-date",
			l == "x-amz-content-sha256",
			l == "x-amz-security-token",
			l == "x-amz-decoded-content-length",
			l == "x-amz-trailer",
			l == "x-amz-sdk-checksum-algorithm",
			l == "x-amz-expected-bucket-owner",
			l == "x-amz-request-payer",
			strings.HasPrefix(l, "x-amz-checksum-"):
			delete(h, name)
		}
	}
}

// timeSource adapts Options.Now to gofakes3.TimeSource.
type timeSource struct{ now func() time.Time }

func (t timeSource) Now() time.Time                   { return t.now().UTC() }
func (t timeSource) Since(at time.Time) time.Duration { return t.now().Sub(at) }

// errorLogger forwards gofakes3's error-level messages (internal errors
// behind 500 responses) to slog and drops its chatty info output.
type errorLogger struct{ log *slog.Logger }

func (l errorLogger) Print(level gofakes3.LogLevel, v ...any) {
	if level == gofakes3.LogErr {
		l.log.Error(fmt.Sprint(v...))
	}
}

// responseRecorder buffers a response so it can be released later.
type responseRecorder struct {
	header http.Header
	status int
	body   []byte
}

func (r *responseRecorder) Header() http.Header { return r.header }

func (r *responseRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *responseRecorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body = append(r.body, p...)
	return len(p), nil
}

func (r *responseRecorder) flush(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body)
}
