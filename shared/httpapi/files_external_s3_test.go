package httpapi_test

import (
	"github.com/botforge/platform/shared/mototest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// TestExternalS3 runs the Files API over an external S3 (moto_server at
// S3_ENDPOINT): the local platform creates the missing bucket, the upload
// URL points at that S3, and the upload completes there too (watched from
// the platform, and on getFile), content served back byte for byte.
func TestExternalS3(t *testing.T) {
	endpoint := mototest.Start(t)
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
