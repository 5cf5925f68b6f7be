package httpapi_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/files"
)

// TestOneUploadLimit: upsertFile and the embedded S3 share one size limit.
// upsertFile takes sizes up to files.MaxFileSize (and refuses more with a
// 400 naming the field); the upload URL of a file of that size, or of any
// size past the embedded S3's former 1 GiB cap, is read by the embedded S3
// rather than refused as too large on its declared length.
func TestOneUploadLimit(t *testing.T) {
	f := newFilesFixture(t)
	r := f.do("", "", "PUT", "/v1/files", map[string]any{"key": "too-big.bin", "size": files.MaxFileSize + 1})
	if r.Status != 400 || !strings.Contains(r.Str("message"), `"size"`) {
		t.Fatalf("size over the limit: %d %s", r.Status, r.Raw)
	}
	for _, size := range []int64{1<<30 + 1, files.MaxFileSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			up := f.upsert(map[string]any{"key": fmt.Sprintf("big-%d.bin", size), "size": size, "contentType": "application/octet-stream"})
			status, body := putDeclared(t, up.Str("file.uploadUrl"), "application/octet-stream", size, 1<<20)
			if strings.Contains(body, "EntityTooLarge") || status == 200 {
				t.Fatalf("a PUT declaring %d bytes (what upsertFile accepted), cut after 1 MiB: %d %s", size, status, body)
			}
			if got := f.get(up.Str("file.id")).Str("file.status"); got != "upload_pending" {
				t.Fatalf("status after a cut upload: %s", got)
			}
		})
	}
}

// putDeclared sends a PUT declaring length bytes on a raw connection,
// sends the first sent bytes, then closes its side: a server that reads
// the body sees it cut short; one refusing the declared length answers
// before reading. It returns the answer's status and body.
func putDeclared(t *testing.T, rawURL, contentType string, length, sent int64) (int, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "PUT %s HTTP/1.1\r\nHost: %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", u.RequestURI(), u.Host, contentType, length)
	// The server may answer (and stop reading) before all is sent.
	_, _ = io.Copy(c, io.LimitReader(zeros{}, sent))
	c.(*net.TCPConn).CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(bytes.TrimSpace(b))
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestUnaddressableKeysAreRefused: a key the official client cannot put in
// a URL (".", "..": encodeURIComponent leaves them, URL normalization
// removes them) or whose getFile path is another operation's ("search",
// "tags", "knowledge-bases") is refused where a key is created, upsertFile
// and copyFile, with a 400 naming the field; no file is written.
func TestUnaddressableKeysAreRefused(t *testing.T) {
	f := newFilesFixture(t)
	src := f.upsert(map[string]any{"key": "source.txt", "size": 1}).Str("file.id")
	for _, key := range []string{".", "..", "search", "tags", "knowledge-bases"} {
		t.Run("upsertFile "+key, func(t *testing.T) {
			r := f.do("", "", "PUT", "/v1/files", map[string]any{"key": key, "size": 1})
			if r.Status != 400 || r.Str("type") != "InvalidPayload" || !strings.Contains(r.Str("message"), `field "key"`) {
				t.Fatalf("%d %s; want 400 naming the field", r.Status, r.Raw)
			}
		})
		t.Run("copyFile "+key, func(t *testing.T) {
			// "." and ".." percent-encoded: the only way to send them.
			dest := strings.NewReplacer(".", "%2E").Replace(url.PathEscape(key))
			r := f.do("", "", "POST", "/v1/files/"+src+"/"+dest, map[string]any{})
			if r.Status != 400 || r.Str("type") != "InvalidPayload" || !strings.Contains(r.Str("message"), `"destinationKey"`) {
				t.Fatalf("%d %s; want 400 naming the parameter", r.Status, r.Raw)
			}
		})
	}
	list := f.do("", "", "GET", "/v1/files", nil)
	if n := len(list.List("files")); n != 1 {
		t.Fatalf("%d files after the refusals, want only the source: %s", n, list.Raw)
	}
}
