package s3store_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botforge/platform/shared/locals3"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/s3store"
)

// env is an embedded S3 under /_s3 on a loopback server, and a Store
// reaching it in-process, presigning for the loopback address.
type env struct {
	store *s3store.Store
	url   string
	puts  chan locals3.PutObject
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{puts: make(chan locals3.PutObject, 16)}
	srv, err := locals3.Open(locals3.Options{
		Dir: t.TempDir(), Region: "us-east-1", AccessKeyID: "AKLOCAL", SecretAccessKey: "secret", PathPrefix: "/_s3",
		OnPut: func(_ context.Context, o locals3.PutObject) error { e.puts <- o; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	if err := srv.EnsureBucket(context.Background(), "bucket"); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/_s3/", srv)
	mux.Handle("/_s3", srv)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	e.url = hs.URL
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKLOCAL", "secret", "")))
	if err != nil {
		t.Fatal(err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://s3.local/_s3")
		o.UsePathStyle = true
		o.HTTPClient = s3store.HandlerClient(mux)
	})
	e.store = s3store.New(client, "bucket", s3store.Options{PresignEndpoint: func(context.Context) string { return hs.URL + "/_s3" }})
	return e
}

func (e *env) upload(t *testing.T, key, ct string, body []byte) {
	t.Helper()
	u, err := e.store.PresignPut(context.Background(), key, ct, int64(len(body)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, e.url+"/_s3/bucket/"+key+"?") {
		t.Fatalf("presigned URL %s", u)
	}
	req, _ := http.NewRequest("PUT", u, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("PUT: %d", res.StatusCode)
	}
	if o := <-e.puts; o.Key != key || o.Size != int64(len(body)) {
		t.Fatalf("OnPut %+v", o)
	}
}

func TestStore(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.upload(t, "files/b/f/g1", "text/plain", []byte("hello"))

	info, err := e.store.Head(ctx, "files/b/f/g1")
	if err != nil || info.Size != 5 || info.ContentType != "text/plain" || info.ETag == "" {
		t.Fatalf("head: %+v %v", info, err)
	}
	rc, got, err := e.store.Open(ctx, "files/b/f/g1", info.ETag)
	if err != nil || got != info {
		t.Fatalf("open: %+v %v", got, err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "hello" {
		t.Fatalf("content %q", b)
	}
	if _, _, err := e.store.Open(ctx, "files/b/f/g1", `"other"`); !errors.Is(err, platform.ErrObjectChanged) {
		t.Fatalf("open with a stale etag: %v", err)
	}
	if err := e.store.Copy(ctx, "files/b/f/g1", info.ETag, "files/b/f2/g1"); err != nil {
		t.Fatal(err)
	}
	<-e.puts // the copy is an object creation too
	if c, err := e.store.Head(ctx, "files/b/f2/g1"); err != nil || c.Size != 5 || c.ContentType != "text/plain" {
		t.Fatalf("copy: %+v %v", c, err)
	}
	if err := e.store.Put(ctx, "files/b/f3/g1", "text/csv", bytes.NewReader([]byte("a,b\n")), 4); err != nil {
		t.Fatal(err)
	}
	<-e.puts
	if p, err := e.store.Head(ctx, "files/b/f3/g1"); err != nil || p.Size != 4 || p.ContentType != "text/csv" {
		t.Fatalf("put: %+v %v", p, err)
	}
	if err := e.store.Delete(ctx, "files/b/f/g1"); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, "files/b/f/g1"); err != nil {
		t.Fatalf("delete of a missing object: %v", err)
	}
	if _, err := e.store.Head(ctx, "files/b/f/g1"); !errors.Is(err, platform.ErrNoObject) {
		t.Fatalf("head of a deleted object: %v", err)
	}
	if _, _, err := e.store.Open(ctx, "files/b/f/g1", ""); !errors.Is(err, platform.ErrNoObject) {
		t.Fatalf("open of a deleted object: %v", err)
	}
}

// TestHandlerClientStreams: the response reaches the client while the
// handler is still writing.
func TestHandlerClientStreams(t *testing.T) {
	release := make(chan struct{})
	var done sync.WaitGroup
	done.Add(1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer done.Done()
		w.Header().Set("Content-Length", "10")
		w.Write([]byte("first"))
		<-release
		w.Write([]byte("-last"))
	})
	res, err := s3store.HandlerClient(h).Get("http://x.local/a")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(res.Body, buf); err != nil || string(buf) != "first" || res.ContentLength != 10 {
		t.Fatalf("first part: %q %v", buf, err)
	}
	close(release)
	rest, _ := io.ReadAll(res.Body)
	res.Body.Close()
	done.Wait()
	if string(rest) != "-last" {
		t.Fatalf("rest %q", rest)
	}
	// A body the client abandons does not block the handler.
	h2 := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i < 1000; i++ {
			if _, err := w.Write(make([]byte, 1<<10)); err != nil {
				return
			}
		}
	})
	res, err = s3store.HandlerClient(h2).Get("http://x.local/b")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
}

func TestEventHandler(t *testing.T) {
	var got []string
	h := s3store.EventHandler("bucket", func(_ context.Context, key string) error {
		got = append(got, key)
		if strings.HasSuffix(key, "fail") {
			return errors.New("boom")
		}
		return nil
	})
	rec := func(bucket, event, key string) events.S3EventRecord {
		var r events.S3EventRecord
		r.EventName, r.S3.Bucket.Name, r.S3.Object.Key = event, bucket, key
		return r
	}
	err := h(context.Background(), events.S3Event{Records: []events.S3EventRecord{
		rec("bucket", "ObjectCreated:Put", "files/bot_1/file_1/g+1%2Bx"),
		rec("other", "ObjectCreated:Put", "files/x"),
		rec("bucket", "ObjectRemoved:Delete", "files/y"),
		rec("bucket", "ObjectCreated:Copy", "files/z/fail"),
	}})
	if len(got) != 2 || got[0] != "files/bot_1/file_1/g 1+x" || got[1] != "files/z/fail" {
		t.Fatalf("keys %q", got)
	}
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("error %v", err)
	}
}
