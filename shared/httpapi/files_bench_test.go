package httpapi_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
)

// BenchmarkFilesList measures a page of 20 of listFiles, unfiltered and with
// one tag filter, in a bot of 200 and of 20,000 files: the items read per
// page (items/op) must not grow with the file count.
//
//	go test ./shared/httpapi -run '^$' -bench BenchmarkFilesList -benchtime 50x
func BenchmarkFilesList(b *testing.B) {
	for _, n := range []int{200, 20000} {
		e := apitest.New(b)
		f := &filesFixture{fixture: &fixture{Env: e}}
		f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
		f.bot = f.createBot(e.AdminToken, map[string]any{"name": "b"})
		start := time.Now()
		seedFiles(b, e, f.bot, n)
		b.Logf("seeded %d files in %v", n, time.Since(start).Round(time.Millisecond))
		for _, q := range []struct{ name, query string }{
			{"unfiltered", ""},
			{"one-tag", "tags.team=a"},
		} {
			b.Run(fmt.Sprintf("files=%d/%s", n, q.name), func(b *testing.B) {
				var mu sync.Mutex
				items, calls := 0, 0
				e.Platform.OnUsage(func(op string, u *dynamo.Usage) {
					mu.Lock()
					items += u.ItemsRead
					calls += u.Calls("")
					mu.Unlock()
				})
				defer e.Platform.OnUsage(nil)
				req := apitest.Req{Method: "GET", Path: "/v1/files?pageSize=20&" + q.query, Token: e.AdminToken, Headers: map[string]string{"x-bot-id": f.bot}}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if r := e.Do(req); r.Status != 200 || len(r.List("files")) != 20 {
						b.Fatalf("%d %d", r.Status, len(r.List("files")))
					}
				}
				b.ReportMetric(float64(items)/float64(b.N), "items/op")
				b.ReportMetric(float64(calls)/float64(b.N), "ddb-calls/op")
			})
		}
	}
}

// pattern is a reader of n deterministic bytes made on the fly: an upload
// body that the client does not hold in memory.
type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	m := min(int64(len(b)), p.n-p.off)
	for i := int64(0); i < m; i++ {
		b[i] = byte((p.off + i) * 31 % 251)
	}
	p.off += m
	return int(m), nil
}

// peakRSS is the process's peak resident set (VmHWM), in MiB; 0 when unknown.
func peakRSS() float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkFilesLargeUploadDownload uploads a 50 MiB file through its
// upload URL and downloads it through its exact file reference, on the
// local platform; it reports MiB/s of each and the process's peak RSS.
//
//	go test ./shared/httpapi -run '^$' -bench BenchmarkFilesLargeUploadDownload -benchtime 3x
func BenchmarkFilesLargeUploadDownload(b *testing.B) {
	const size = 50 << 20
	e := apitest.New(b)
	f := &filesFixture{fixture: &fixture{Env: e}}
	f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
	f.bot = f.createBot(e.AdminToken, map[string]any{"name": "b"})
	want := sha256.New()
	io.Copy(want, &pattern{n: size})
	wantSum := hex.EncodeToString(want.Sum(nil))
	var upTime, downTime time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := f.upsert(map[string]any{"key": fmt.Sprintf("big-%d.bin", i), "size": size})
		req, _ := http.NewRequest("PUT", r.Str("file.uploadUrl"), &pattern{n: size})
		req.ContentLength = size
		req.Header.Set("Content-Type", r.Str("file.contentType"))
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("upload: %v %v", err, res)
		}
		res.Body.Close()
		upTime += time.Since(start)
		g := f.get(r.Str("file.id"))
		if g.Str("file.status") != "upload_completed" {
			b.Fatalf("status: %s", g.Raw)
		}
		u, _ := url.Parse(g.Str("file.url"))
		if u.Query().Get("checksum") != wantSum {
			b.Fatalf("checksum %s", u.Query().Get("checksum"))
		}
		dl, _ := http.NewRequest("GET", g.Str("file.url"), nil)
		dl.Header.Set("Authorization", "Bearer "+e.AdminToken)
		dl.Header.Set("x-bot-id", f.bot)
		start = time.Now()
		res, err = http.DefaultClient.Do(dl)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("download: %v %v", err, res)
		}
		h := sha256.New()
		n, _ := io.Copy(h, res.Body)
		res.Body.Close()
		downTime += time.Since(start)
		if n != size || hex.EncodeToString(h.Sum(nil)) != wantSum {
			b.Fatalf("downloaded %d bytes, checksum mismatch", n)
		}
	}
	mib := float64(size) / (1 << 20) * float64(b.N)
	b.ReportMetric(mib/upTime.Seconds(), "upload-MiB/s")
	b.ReportMetric(mib/downTime.Seconds(), "download-MiB/s")
	b.ReportMetric(peakRSS(), "peak-RSS-MiB")
}

// streamStorage serves any object as size pattern bytes, made on the fly:
// a storage that holds nothing in memory, to measure what the API itself
// buffers.
type streamStorage struct{ size int64 }

func (s streamStorage) PresignPut(context.Context, string, string, int64, time.Duration) (string, error) {
	return "", nil
}
func (s streamStorage) Open(context.Context, string, string) (io.ReadCloser, platform.ObjectInfo, error) {
	return io.NopCloser(&pattern{n: s.size}), platform.ObjectInfo{Size: s.size, ETag: `"e"`}, nil
}
func (s streamStorage) Head(context.Context, string) (platform.ObjectInfo, error) {
	return platform.ObjectInfo{Size: s.size, ETag: `"e"`}, nil
}
func (s streamStorage) Copy(context.Context, string, string, string) error { return nil }
func (s streamStorage) Delete(context.Context, string) error               { return nil }
func (s streamStorage) Put(context.Context, string, string, io.ReadSeeker, int64) error {
	return nil
}

// TestFilesDownloadStreams: the download handler streams. Serving a 50 MiB
// file from a storage that makes its bytes on the fly, the API allocates a
// small fraction of the file.
func TestFilesDownloadStreams(t *testing.T) {
	const size = 50 << 20
	f := newFilesFixture(t)
	id := platform.NewID(platform.PrefixFile)
	ts := platform.Now()
	rec := platform.FileRecord{
		File: platform.File{ID: id, BotID: f.bot, Key: "big.bin", Size: size, ContentType: "application/octet-stream",
			CreatedAt: ts, UpdatedAt: ts, Status: platform.FileUploadCompleted, Owner: platform.FileOwner{Type: "bot", ID: f.bot}},
		Generation: platform.NewID(""), Checksum: strings.Repeat("a", 64), ETag: `"e"`,
	}
	if err := f.Platform.Store.ImportFiles(context.Background(), []platform.FileRecord{rec}); err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(httpapi.Config{Store: f.Platform.Store, PagingKey: []byte("0123456789abcdef"), Files: streamStorage{size: size}}, httpapi.AreaFiles)
	req, _ := http.NewRequest("GET", "/v1/files/"+id+"/content?size=52428800&contentType=application%2Foctet-stream&filename=big.bin&checksum="+strings.Repeat("a", 64), nil)
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	req.Header.Set("x-bot-id", f.bot)
	w := &countingWriter{header: http.Header{}}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h.ServeHTTP(w, req)
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("served %d bytes, allocated %d KiB", w.n, alloc>>10)
	if w.status != 200 || w.n != size {
		t.Fatalf("status %d, %d bytes", w.status, w.n)
	}
	if alloc > 4<<20 {
		t.Fatalf("the download allocated %d bytes for a %d-byte file: not streamed", alloc, size)
	}
}

type countingWriter struct {
	header http.Header
	status int
	n      int64
}

func (w *countingWriter) Header() http.Header { return w.header }
func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(200)
	w.n += int64(len(p))
	return len(p), nil
}
