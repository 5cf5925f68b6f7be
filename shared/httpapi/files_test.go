package httpapi_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/files"
)

// filesFixture is a platform with a workspace, a bot, and helpers to call
// the Files API as the workspace owner.
type filesFixture struct {
	*fixture
	bot string
}

func newFilesFixture(t *testing.T) *filesFixture {
	t.Helper()
	f := newFixture(t)
	return &filesFixture{fixture: f, bot: f.createBot(f.AdminToken, map[string]any{"name": "files"})}
}

// do calls the Files API on bot with token (the admin's and the fixture's
// bot when empty).
func (f *filesFixture) do(token, bot, method, path string, body any) apitest.Response {
	f.T.Helper()
	if token == "" {
		token = f.AdminToken
	}
	if bot == "" {
		bot = f.bot
	}
	return f.Do(apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: map[string]string{"x-bot-id": bot}})
}

func (f *filesFixture) upsert(body map[string]any) apitest.Response {
	f.T.Helper()
	return f.Check(f.do("", "", "PUT", "/v1/files", body), 200, "upsertFile")
}

func (f *filesFixture) get(idOrKey string) apitest.Response {
	f.T.Helper()
	return f.Check(f.do("", "", "GET", "/v1/files/"+url.PathEscape(idOrKey), nil), 200, "getFile")
}

// put sends content to an upload URL as the official client does: a PUT
// with the returned content type (and the length of the content).
func put(t testing.TB, uploadURL, contentType string, content []byte) int {
	t.Helper()
	req, err := http.NewRequest("PUT", uploadURL, bytes.NewReader(content))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// upload upserts key, uploads content through the returned URL and returns
// the file as getFile answers it afterwards.
func (f *filesFixture) upload(key string, content []byte, extra map[string]any) apitest.Response {
	f.T.Helper()
	body := map[string]any{"key": key, "size": len(content)}
	for k, v := range extra {
		body[k] = v
	}
	r := f.upsert(body)
	if status := put(f.T, r.Str("file.uploadUrl"), r.Str("file.contentType"), content); status != 200 {
		f.T.Fatalf("upload of %s: %d", key, status)
	}
	return f.get(r.Str("file.id"))
}

// download GETs rawURL (a file's url) in the scope of bot with token (the
// fixture's when empty), following no redirect.
func (f *filesFixture) download(token, bot, rawURL string) (int, []byte, http.Header) {
	f.T.Helper()
	if token == "" {
		token = f.AdminToken
	}
	if bot == "" {
		bot = f.bot
	}
	req, err := http.NewRequest("GET", rawURL, nil)
	if err != nil {
		f.T.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("x-bot-id", bot)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		f.T.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b, res.Header
}

// s3 is an SDK client of the platform's embedded S3, with its credentials.
func (f *filesFixture) s3() *s3.Client {
	f.T.Helper()
	raw, err := os.ReadFile(filepath.Join(f.DataDir, "secrets.json"))
	if err != nil {
		f.T.Fatal(err)
	}
	var sec struct{ S3AccessKey, S3SecretKey string }
	if err := json.Unmarshal(raw, &sec); err != nil {
		f.T.Fatal(err)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(sec.S3AccessKey, sec.S3SecretKey, "")))
	if err != nil {
		f.T.Fatal(err)
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(f.URL + "/_s3")
		o.UsePathStyle = true
	})
}

// objectKey is the storage key an upload URL writes.
func objectKey(t testing.TB, uploadURL string) string {
	u, err := url.Parse(uploadURL)
	if err != nil {
		t.Fatal(err)
	}
	_, key, ok := strings.Cut(strings.TrimPrefix(u.Path, "/_s3/"), "/")
	if !ok {
		t.Fatalf("upload URL %s", uploadURL)
	}
	return key
}

func (f *filesFixture) objectExists(key string) bool {
	f.T.Helper()
	_, err := f.s3().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("platform-files"), Key: &key})
	var nf *types.NotFound
	if errors.As(err, &nf) {
		return false
	}
	if err != nil {
		f.T.Fatalf("head %s: %v", key, err)
	}
	return true
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func TestFilesUploadAndDownload(t *testing.T) {
	f := newFilesFixture(t)
	content := []byte("hello, files\n")
	r := f.upsert(map[string]any{"key": "docs/hello world.txt", "size": len(content), "tags": map[string]string{"kind": "doc"}, "metadata": map[string]any{"a": 1, "b": nil}, "accessPolicies": []string{"integrations"}})
	if r.Str("file.status") != "upload_pending" || r.Str("file.contentType") != "text/plain" || r.Str("file.url") != "" || r.Str("file.key") != "docs/hello world.txt" {
		t.Fatalf("upsert: %s", r.Raw)
	}
	if r.Str("file.owner.type") != "bot" || r.Str("file.owner.id") != f.bot || r.Str("file.botId") != f.bot || !strings.HasPrefix(r.Str("file.id"), "file_") {
		t.Fatalf("owner, ids: %s", r.Raw)
	}
	up, _ := url.Parse(r.Str("file.uploadUrl"))
	if up.Query().Get("X-Amz-SignedHeaders") != "content-length;content-type;host" || !strings.HasPrefix(up.Path, "/_s3/platform-files/files/"+f.bot+"/"+r.Str("file.id")+"/") {
		t.Fatalf("upload URL: %s", up)
	}
	if status := put(t, r.Str("file.uploadUrl"), "text/plain", content); status != 200 {
		t.Fatalf("PUT: %d", status)
	}
	g := f.get(r.Str("file.id"))
	if g.Str("file.status") != "upload_completed" || g.Body["file"].(map[string]any)["size"] != float64(len(content)) {
		t.Fatalf("after upload: %s", g.Raw)
	}
	fileURL := g.Str("file.url")
	u, _ := url.Parse(fileURL)
	q := u.Query()
	if u.Path != "/v1/files/"+r.Str("file.id")+"/content" || q.Get("checksum") != sha(content) || q.Get("filename") != "hello world.txt" ||
		q.Get("size") != "13" || q.Get("contentType") != "text/plain" || len(q) != 6 || q.Get("expires") == "" || len(q.Get("signature")) != 64 {
		t.Fatalf("url: %s", fileURL)
	}
	status, body, h := f.download("", "", fileURL)
	if status != 200 || !bytes.Equal(body, content) || h.Get("Content-Type") != "text/plain" || h.Get("Content-Length") != "13" ||
		!strings.Contains(h.Get("Content-Disposition"), `"hello world.txt"`) || h.Get("ETag") != `"`+sha(content)+`"` {
		t.Fatalf("download: %d %q %v", status, body, h)
	}
	for name := range h {
		if strings.HasPrefix(strings.ToLower(name), "x-amz") {
			t.Errorf("download answers storage header %s", name)
		}
	}
	// The file by key, and in the list.
	byKey := f.get("docs/hello world.txt")
	if byKey.Str("file.id") != r.Str("file.id") || byKey.Str("file.url") != fileURL {
		t.Fatalf("by key: %s", byKey.Raw)
	}
	l := f.Check(f.do("", "", "GET", "/v1/files", nil), 200, "listFiles")
	if len(l.List("files")) != 1 {
		t.Fatalf("list: %s", l.Raw)
	}
	// No answer reveals where the bytes are stored.
	for _, raw := range [][]byte{g.Raw, byKey.Raw, l.Raw} {
		if bytes.Contains(raw, []byte("_s3")) || bytes.Contains(raw, []byte("files/"+f.bot)) || bytes.Contains(raw, []byte("platform-files")) {
			t.Fatalf("an answer reveals a storage address: %s", raw)
		}
	}
}

func TestFilesContentTypeInference(t *testing.T) {
	f := newFilesFixture(t)
	for key, want := range map[string]string{
		"a.txt": "text/plain", "b.MD": "text/markdown", "c.html": "text/html", "d.json": "application/json",
		"e.csv": "text/csv", "f.png": "image/png", "g.pdf": "application/pdf", "dir.v2/noext": "application/octet-stream",
		"h": "application/octet-stream", "i.unknownext": "application/octet-stream",
	} {
		t.Run(key, func(t *testing.T) {
			r := f.upsert(map[string]any{"key": key, "size": 1})
			if r.Str("file.contentType") != want {
				t.Fatalf("%s: content type %s, want %s", key, r.Str("file.contentType"), want)
			}
		})
	}
	r := f.upsert(map[string]any{"key": "j.txt", "size": 1, "contentType": "application/x-custom; charset=utf-8"})
	if r.Str("file.contentType") != "application/x-custom; charset=utf-8" {
		t.Fatalf("explicit content type: %s", r.Raw)
	}
	// The upload must carry exactly that content type.
	if status := put(t, r.Str("file.uploadUrl"), "text/plain", []byte("x")); status != 403 {
		t.Fatalf("PUT with another content type: %d", status)
	}
	if status := put(t, r.Str("file.uploadUrl"), "application/x-custom; charset=utf-8", []byte("x")); status != 200 {
		t.Fatalf("PUT: %d", status)
	}
}

// TestFilesUploadURLRefused: the upload URL accepts only its own object,
// content type and size, and only until it expires.
func TestFilesUploadURLRefused(t *testing.T) {
	f := newFilesFixture(t)
	content := []byte("0123456789")
	r := f.upsert(map[string]any{"key": "a.txt", "size": len(content)})
	other := f.upsert(map[string]any{"key": "b.txt", "size": len(content)})
	u := r.Str("file.uploadUrl")
	for _, tc := range []struct {
		name, url, contentType string
		body                   []byte
	}{
		{"another content type", u, "text/html", content},
		{"no content type", u, "", content},
		{"a larger size", u, "text/plain", append(append([]byte{}, content...), 'x')},
		{"a smaller size", u, "text/plain", content[:5]},
		{"another object", strings.Replace(u, r.Str("file.id"), other.Str("file.id"), 1), "text/plain", content},
		{"a tampered signature", u[:len(u)-1] + map[bool]string{true: "0", false: "1"}[u[len(u)-1] != '0'], "text/plain", content},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if status := put(t, tc.url, tc.contentType, tc.body); status != 403 {
				t.Fatalf("PUT: %d, want 403", status)
			}
		})
	}
	for _, id := range []string{r.Str("file.id"), other.Str("file.id")} {
		if s := f.get(id).Str("file.status"); s != "upload_pending" {
			t.Fatalf("a refused upload changed the file: %s", s)
		}
	}

	t.Run("expired", func(t *testing.T) {
		defer func(d time.Duration) { files.UploadURLTTL = d }(files.UploadURLTTL)
		files.UploadURLTTL = time.Second
		r := f.upsert(map[string]any{"key": "c.txt", "size": len(content)})
		time.Sleep(2100 * time.Millisecond)
		if status := put(t, r.Str("file.uploadUrl"), "text/plain", content); status != 403 {
			t.Fatalf("PUT after expiry: %d", status)
		}
		if s := f.get("c.txt").Str("file.status"); s != "upload_pending" {
			t.Fatalf("status %s", s)
		}
	})
}

// TestFilesUpsertStartsNewGeneration: upserting a key again erases its
// content; the old bytes are never served again, even when the old upload
// URL is used afterwards.
func TestFilesUpsertStartsNewGeneration(t *testing.T) {
	f := newFilesFixture(t)
	v1 := []byte("version one")
	r1 := f.upsert(map[string]any{"key": "doc.txt", "size": len(v1), "tags": map[string]string{"v": "1"}})
	if status := put(t, r1.Str("file.uploadUrl"), "text/plain", v1); status != 200 {
		t.Fatalf("PUT gen 1: %d", status)
	}
	g1 := f.get("doc.txt")
	oldURL := g1.Str("file.url")

	r2 := f.upsert(map[string]any{"key": "doc.txt", "size": 11, "tags": map[string]string{"v": "2"}})
	if r2.Str("file.id") != g1.Str("file.id") || r2.Str("file.status") != "upload_pending" || r2.Str("file.url") != "" || r2.Str("file.createdAt") != g1.Str("file.createdAt") {
		t.Fatalf("second upsert: %s", r2.Raw)
	}
	if status, _, _ := f.download("", "", oldURL); status != 404 {
		t.Fatalf("old generation served: %d", status)
	}
	if f.objectExists(objectKey(t, r1.Str("file.uploadUrl"))) {
		t.Fatal("the replaced generation's object was kept")
	}
	// A third upsert, then the second generation's URL is used: its bytes
	// land after it was superseded and change nothing.
	r3 := f.upsert(map[string]any{"key": "doc.txt", "size": 13})
	if status := put(t, r2.Str("file.uploadUrl"), "text/plain", []byte("version two")); status != 200 {
		t.Fatalf("PUT gen 2: %d", status)
	}
	if g := f.get("doc.txt"); g.Str("file.status") != "upload_pending" || g.Str("file.url") != "" {
		t.Fatalf("a superseded upload completed the file: %s", g.Raw)
	}
	if f.objectExists(objectKey(t, r2.Str("file.uploadUrl"))) {
		t.Fatal("the superseded generation's object was kept")
	}
	v3 := []byte("version three")
	if status := put(t, r3.Str("file.uploadUrl"), "text/plain", v3); status != 200 {
		t.Fatalf("PUT gen 3: %d", status)
	}
	g3 := f.get("doc.txt")
	status, body, _ := f.download("", "", g3.Str("file.url"))
	if status != 200 || !bytes.Equal(body, v3) {
		t.Fatalf("gen 3: %d %q", status, body)
	}
	if status, _, _ := f.download("", "", oldURL); status != 404 {
		t.Fatalf("gen 1 served after gen 3: %d", status)
	}
}

// TestFilesSizeMismatch: an object whose size differs from the declared one
// (written around the upload URL, which S3 would refuse) fails the upload.
func TestFilesSizeMismatch(t *testing.T) {
	f := newFilesFixture(t)
	r := f.upsert(map[string]any{"key": "a.bin", "size": 10})
	key := objectKey(t, r.Str("file.uploadUrl"))
	_, err := f.s3().PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String("platform-files"), Key: &key, Body: bytes.NewReader([]byte("12345"))})
	if err != nil {
		t.Fatal(err)
	}
	g := f.get(r.Str("file.id"))
	if g.Str("file.status") != "upload_failed" || !strings.Contains(g.Str("file.failedStatusReason"), "5 bytes") || g.Str("file.url") != "" {
		t.Fatalf("size mismatch: %s", g.Raw)
	}
	// Then the right size arrives (a retry with the same URL): completed.
	if status := put(t, r.Str("file.uploadUrl"), "application/octet-stream", []byte("0123456789")); status != 200 {
		t.Fatalf("PUT: %d", status)
	}
	if g := f.get(r.Str("file.id")); g.Str("file.status") != "upload_completed" || g.Body["file"].(map[string]any)["failedStatusReason"] != nil {
		t.Fatalf("after a good upload: %s", g.Raw)
	}
}

// TestFilesDownloadRef: a file reference must name the current generation
// exactly; anything else is refused in the error shape, never redirected.
func TestFilesDownloadRef(t *testing.T) {
	f := newFilesFixture(t)
	content := []byte("exact bytes")
	g := f.upload("refs/a b+c.txt", content, nil)
	good, _ := url.Parse(g.Str("file.url"))
	base := f.URL + good.Path
	enc := func(size, ct, name, sum string) string {
		return "size=" + url.QueryEscape(size) + "&contentType=" + url.QueryEscape(ct) + "&filename=" + url.QueryEscape(name) + "&checksum=" + url.QueryEscape(sum)
	}
	sum := sha(content)
	// The url is the reference, signed (readable without a token).
	signed := good.RawQuery
	if !strings.HasPrefix(signed, enc("11", "text/plain", "a b+c.txt", sum)+"&expires=") || !strings.Contains(signed, "&signature=") {
		t.Fatalf("reference query %s", good.RawQuery)
	}
	good.RawQuery = enc("11", "text/plain", "a b+c.txt", sum)
	status, body, _ := f.download("", "", base+"?"+good.RawQuery)
	if status != 200 || !bytes.Equal(body, content) {
		t.Fatalf("good reference: %d %s", status, body)
	}
	for _, tc := range []struct {
		name, query string
		want        int
	}{
		{"size altered", enc("12", "text/plain", "a b+c.txt", sum), 404},
		{"content type altered", enc("11", "text/html", "a b+c.txt", sum), 404},
		{"filename altered", enc("11", "text/plain", "a b c.txt", sum), 404},
		{"checksum altered", enc("11", "text/plain", "a b+c.txt", sha([]byte("other"))), 404},
		{"checksum not hex", enc("11", "text/plain", "a b+c.txt", strings.ToUpper(sum)), 400},
		{"size not a number", enc("eleven", "text/plain", "a b+c.txt", sum), 400},
		{"size with a sign", enc("+11", "text/plain", "a b+c.txt", sum), 400},
		{"unknown parameter", good.RawQuery + "&x=1", 400},
		{"duplicated parameter", good.RawQuery + "&size=11", 400},
		{"missing parameter", "size=11&contentType=text%2Fplain&filename=a+b%2Bc.txt", 400},
		{"no query", "", 400},
		{"bad escape", good.RawQuery + "%zz", 400},
		{"query over 4 KiB", good.RawQuery + "&pad=" + strings.Repeat("a", 4096), 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := f.download("", "", base+"?"+tc.query)
			var e struct{ ID, Type, Message string }
			if status != tc.want || json.Unmarshal(body, &e) != nil || !strings.HasPrefix(e.ID, "err_") || e.Message == "" {
				t.Fatalf("%d %s, want %d in the error shape", status, body, tc.want)
			}
		})
	}
	t.Run("another bot", func(t *testing.T) {
		other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
		if status, _, _ := f.download("", other, base+"?"+good.RawQuery); status != 404 {
			t.Fatalf("another bot's file: %d", status)
		}
	})
	t.Run("no token", func(t *testing.T) {
		for _, tc := range []struct {
			name, query string
			want        int
		}{
			{"an unsigned reference", good.RawQuery, 401},
			{"the signed url", signed, 200},
			{"the signed url, size altered", strings.Replace(signed, "size=11", "size=12", 1), 401},
			{"the signed url, expiry moved", strings.Replace(signed, "&expires=", "&expires=9", 1), 401},
			{"an expiry without its signature", signed[:strings.Index(signed, "&signature=")], 401},
		} {
			res, err := http.Get(base + "?" + tc.query)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.want || (tc.want == 200 && !bytes.Equal(body, content)) {
				t.Errorf("%s without a token: %d %s", tc.name, res.StatusCode, body)
			}
		}
	})
	t.Run("by key", func(t *testing.T) {
		if status, _, _ := f.download("", "", f.URL+"/v1/files/"+url.PathEscape("refs/a b+c.txt")+"/content?"+good.RawQuery); status != 404 {
			t.Fatalf("a reference by key: %d", status)
		}
	})
	t.Run("head", func(t *testing.T) {
		req, _ := http.NewRequest("HEAD", base+"?"+good.RawQuery, nil)
		req.Header.Set("Authorization", "Bearer "+f.AdminToken)
		req.Header.Set("x-bot-id", f.bot)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || res.ContentLength != 11 {
			t.Fatalf("HEAD: %d %d", res.StatusCode, res.ContentLength)
		}
	})
}
