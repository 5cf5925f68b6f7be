package httpapi_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// startMoto starts moto_server (a third-party S3 emulator) on a free
// loopback port and returns its endpoint; the test is skipped, saying why,
// when moto_server is not installed.
func startMoto(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Skip("moto_server is not installed (pip install 'moto[server]'): the external-S3 test needs it")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		res, err := http.Get(endpoint + "/")
		if err == nil {
			res.Body.Close()
			return endpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto_server did not answer on %s: %v", endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestExternalS3 runs the Files API over an external S3 (moto_server at
// S3_ENDPOINT): the local platform creates the missing bucket, the upload
// URL points at that S3, and the upload completes there too (watched from
// the platform, and on getFile), content served back byte for byte.
func TestExternalS3(t *testing.T) {
	endpoint := startMoto(t)
	t.Setenv("S3_ENDPOINT", endpoint)
	t.Setenv("PLATFORM_BUCKET", "ext-"+strings.ToLower(platform.NewID("")))
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "us-east-1")
	f := newFilesFixture(t)

	content := []byte("hello from an external S3\n")
	r := f.upsert(map[string]any{"key": "ext.txt", "size": len(content), "index": true})
	if u := r.Str("file.uploadUrl"); !strings.HasPrefix(u, endpoint+"/") {
		t.Fatalf("upload URL %q does not point at %s", u, endpoint)
	}
	if status := put(t, r.Str("file.uploadUrl"), r.Str("file.contentType"), content); status != 200 {
		t.Fatalf("PUT to the external S3: %d", status)
	}
	// Completed without anyone reading the file: listFiles shows it.
	id := r.Str("file.id")
	deadline := time.Now().Add(15 * time.Second)
	for {
		l := f.Check(f.do("", "", "GET", "/v1/files", nil), 200, "listFiles").List("files")
		if len(l) == 1 && l[0].(map[string]any)["status"] == "indexing_completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload not completed: %v", l)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := f.get(id)
	if !strings.Contains(got.Str("file.url"), "checksum="+sha(content)) {
		t.Fatalf("file: %s", got.Raw)
	}
	status, body, _ := f.download("", "", got.Str("file.url"))
	if status != 200 || string(body) != string(content) {
		t.Fatalf("download: %d %q", status, body)
	}

	// Completion on read: a second generation, read right after its PUT.
	next := []byte("second generation")
	r = f.upsert(map[string]any{"key": "ext.txt", "size": len(next)})
	if status := put(t, r.Str("file.uploadUrl"), r.Str("file.contentType"), next); status != 200 {
		t.Fatalf("second PUT: %d", status)
	}
	if g := f.get(id); g.Str("file.status") != "upload_completed" || !strings.Contains(g.Str("file.url"), "checksum="+sha(next)) {
		t.Fatalf("getFile right after the upload: %s", g.Raw)
	}
}
