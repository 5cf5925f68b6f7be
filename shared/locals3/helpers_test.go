package locals3

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/botforge/platform/shared/sdkhttp"
)

const (
	testAccessKey = "AKIALOCALTEST"
	testSecret    = "local-test-secret"
	testRegion    = "us-east-1"
	testBucket    = "uploads"
)

// clock is a settable clock that follows real time (the SDK's presigner and
// signer stamp requests with the real time) plus an offset.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// putLog collects OnPut calls.
type putLog struct {
	mu   sync.Mutex
	puts []PutObject
	err  error // returned by the hook
}

func (l *putLog) hook(_ context.Context, obj PutObject) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.puts = append(l.puts, obj)
	return l.err
}

func (l *putLog) take() []PutObject {
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.puts
	l.puts = nil
	return p
}

// testEnv is a Server on a loopback httptest server.
type testEnv struct {
	srv   *Server
	http  *httptest.Server
	clock *clock
	puts  *putLog
	dir   string
	// endpoint is the S3 endpoint URL clients use (including any prefix).
	endpoint string
}

type envConfig struct {
	dir    string
	prefix string // PathPrefix, mounted on a mux next to another handler
	tls    bool
	wrap   func(http.Handler) http.Handler
}

func newEnv(t *testing.T, cfg envConfig) *testEnv {
	t.Helper()
	if cfg.dir == "" {
		cfg.dir = t.TempDir()
	}
	env := &testEnv{clock: &clock{}, puts: &putLog{}, dir: cfg.dir}
	srv, err := Open(Options{
		Dir:             cfg.dir,
		Region:          testRegion,
		AccessKeyID:     testAccessKey,
		SecretAccessKey: testSecret,
		PathPrefix:      cfg.prefix,
		OnPut:           env.puts.hook,
		Now:             env.clock.Now,
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	env.srv = srv
	if err := srv.EnsureBucket(context.Background(), testBucket); err != nil {
		t.Fatalf("EnsureBucket: %v", err)
	}

	var h http.Handler = srv
	if cfg.prefix != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "api") })
		// Both patterns: ServeMux would answer the bare prefix (ListBuckets)
		// with a redirect, which invalidates the signature.
		mux.Handle(strings.TrimRight(cfg.prefix, "/")+"/", srv)
		mux.Handle(strings.TrimRight(cfg.prefix, "/"), srv)
		h = mux
	}
	if cfg.wrap != nil {
		h = cfg.wrap(h)
	}
	if cfg.tls {
		env.http = httptest.NewTLSServer(h)
	} else {
		env.http = httptest.NewServer(h)
	}
	t.Cleanup(env.http.Close)
	env.endpoint = env.http.URL + strings.TrimRight(cfg.prefix, "/")
	return env
}

// client returns an SDK client for the environment, signing with secret.
func (e *testEnv) client(secret string, optFns ...func(*s3.Options)) *s3.Client {
	cfg := aws.Config{
		Region:           testRegion,
		Credentials:      credentials.NewStaticCredentialsProvider(testAccessKey, secret, ""),
		HTTPClient:       sdkhttp.Shield(e.http.Client()),
		RetryMaxAttempts: 1,
		// What config.LoadDefaultConfig resolves by default (the zero value
		// would disable the SDK's default CRC32 checksums).
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}
	return s3.NewFromConfig(cfg, append([]func(*s3.Options){func(o *s3.Options) {
		o.BaseEndpoint = aws.String(e.endpoint)
		o.UsePathStyle = true
	}}, optFns...)...)
}

// s3ErrorBody is the subset of an S3 error document the tests look at.
type s3ErrorBody struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

// do sends req with the plain HTTP client and returns status and error code
// (if the body is an S3 error document).
func (e *testEnv) do(t *testing.T, req *http.Request) (int, string, []byte) {
	t.Helper()
	resp, err := e.http.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var doc s3ErrorBody
	if resp.StatusCode >= 300 {
		_ = xml.Unmarshal(body, &doc)
	}
	return resp.StatusCode, doc.Code, body
}

// httpStatus extracts the HTTP status code from an SDK error.
func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func mustStatus(t *testing.T, gotStatus int, gotCode string, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	if gotStatus != wantStatus || (wantCode != "" && gotCode != wantCode) {
		t.Fatalf("got %d %s, want %d %s; body: %s", gotStatus, gotCode, wantStatus, wantCode, body)
	}
}
