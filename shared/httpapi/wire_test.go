package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/local"
)

// noRedirects is a client that shows redirects instead of following them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// TestEveryAnswerIsJSONErrorShape: paths the router would clean (file keys
// "." and "..", empty segments), unknown paths and methods all answer JSON
// in the {id, code, type, message} shape, never a redirect or HTML; a key
// "." or ".." percent-encoded reaches its operation.
func TestEveryAnswerIsJSONErrorShape(t *testing.T) {
	f := newFilesFixture(t)
	cases := []struct {
		method, path string
		status       int
		typ          string
	}{
		{"GET", "/v1/files/.", 400, "InvalidPayload"},
		{"GET", "/v1/files/..", 400, "InvalidPayload"},
		{"DELETE", "/v1/files/..", 400, "InvalidPayload"},
		{"GET", "/v1/files/./x", 400, "InvalidPayload"},
		{"GET", "/v1/files/../admin/workspaces", 400, "InvalidPayload"},
		{"GET", "/v1/files//x", 400, "InvalidPayload"},
		{"GET", "//v1/admin/workspaces", 400, "InvalidPayload"},
		{"GET", "/_s3/../v1/admin/account/me", 400, "InvalidPayload"},
		{"GET", "/v1/files/%2E", 404, "ResourceNotFound"},
		{"GET", "/v1/files/%2E%2E", 404, "ResourceNotFound"},
		// No operation: MethodNotFound, distinct from an operation that
		// found no such resource (ResourceNotFound above and below).
		{"GET", "/nope", 405, "MethodNotFound"},
		{"POST", "/", 405, "MethodNotFound"}, // GET / is the console
		{"GET", "/console", 405, "MethodNotFound"},
		{"GET", "/v1/files/", 405, "MethodNotFound"},
		{"GET", "/v1/admin/nope", 405, "MethodNotFound"},
		{"POST", "/v1/admin/bots/x/nope", 405, "MethodNotFound"},
		{"PATCH", "/v1/files", 405, "MethodNotFound"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, f.URL+c.path, nil)
			req.Header.Set("Authorization", "Bearer "+f.AdminToken)
			req.Header.Set("x-bot-id", f.bot)
			res, err := noRedirects.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			raw, _ := io.ReadAll(res.Body)
			var e struct {
				ID, Type, Message string
				Code              int
			}
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Fatalf("status %d, content type %q: %s", res.StatusCode, ct, raw)
			}
			if err := json.Unmarshal(raw, &e); err != nil || res.StatusCode != c.status || e.Code != c.status || e.Type != c.typ ||
				!strings.HasPrefix(e.ID, "err_") || e.Message == "" ||
				(e.Type == "MethodNotFound") != strings.Contains(e.Message, "the operation does not exist") ||
				(e.Type == "MethodNotFound") != (len(res.Header.Values("Allow")) == 1) {
				t.Fatalf("status %d %s, want %d %s in the error shape", res.StatusCode, raw, c.status, c.typ)
			}
		})
	}
}

// syncBuffer is a log destination shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// loggedPlatform is a local platform whose log is kept (JSON lines).
func loggedPlatform(t *testing.T) (url, token string, logs *syncBuffer) {
	t.Helper()
	logs = &syncBuffer{}
	dir := t.TempDir()
	p, err := local.Open(context.Background(), dir, "", slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler)
	t.Cleanup(func() { srv.Close(); p.Close() })
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, string(tok), logs
}

func send(t *testing.T, method, url string, header map[string]string, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	return res
}

func decode(t *testing.T, res *http.Response) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.NewDecoder(res.Body).Decode(&m); err != nil {
		t.Fatalf("status %d: body not JSON: %v", res.StatusCode, err)
	}
	return m
}

// TestRequestLog: every request, the embedded S3's included, is logged in
// one line with its method, path, status, duration, request id (the one of
// the X-Request-Id header) and caller kind; never a token, a signature or
// a query.
func TestRequestLog(t *testing.T) {
	base, tok, logs := loggedPlatform(t)
	auth := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}
	type want struct {
		method, path string
		status       int
		caller       string
		errorID      bool
	}
	var wants []want
	var ids []string
	do := func(method, path string, h map[string]string, body string, w want) *http.Response {
		res := send(t, method, base+path, h, body)
		w.method, w.path = method, strings.SplitN(path, "?", 2)[0]
		wants, ids = append(wants, w), append(ids, res.Header.Get("X-Request-Id"))
		if res.StatusCode != w.status {
			t.Fatalf("%s %s: %d, want %d", method, path, res.StatusCode, w.status)
		}
		return res
	}
	do("GET", "/v1/admin/account/me?secret=query", auth, "", want{status: 200, caller: "account"})
	do("GET", "/v1/admin/account/me", map[string]string{"Authorization": "Bearer bp_pat_not-a-token"}, "", want{status: 401, caller: "anonymous", errorID: true})
	do("GET", "/nope", nil, "", want{status: 405, caller: "anonymous", errorID: true})
	ws := decode(t, do("POST", "/v1/admin/workspaces", auth, `{"name":"logged"}`, want{status: 200, caller: "account"}))["id"].(string)
	auth["x-workspace-id"] = ws
	bot := decode(t, do("POST", "/v1/admin/bots", auth, `{"name":"b"}`, want{status: 200, caller: "account"}))["bot"].(map[string]any)["id"].(string)
	bak := decode(t, do("POST", "/v1/admin/bots/baks", auth, `{"botId":"`+bot+`"}`, want{status: 200, caller: "account"}))
	botKey := bak["value"].(string)
	file := decode(t, do("PUT", "/v1/files", map[string]string{"Authorization": "Bearer " + botKey, "x-bot-id": bot, "Content-Type": "application/json"},
		`{"key":"a.txt","size":5}`, want{status: 200, caller: "bot"}))["file"].(map[string]any)
	upload, _ := neturl.Parse(file["uploadUrl"].(string))
	signature := upload.Query().Get("X-Amz-Signature")
	do("PUT", upload.RequestURI(), map[string]string{"Content-Type": file["contentType"].(string)}, "hello", want{status: 200, caller: "s3"})

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line not JSON: %q", l)
		}
		if m["msg"] == "request" {
			lines = append(lines, m)
		}
	}
	if len(lines) != len(wants) {
		t.Fatalf("%d request lines for %d requests:\n%s", len(lines), len(wants), logs)
	}
	for i, w := range wants {
		l := lines[i]
		ms, _ := l["ms"].(float64)
		if l["method"] != w.method || l["path"] != w.path || l["status"] != float64(w.status) || l["caller"] != w.caller ||
			l["requestId"] != ids[i] || !strings.HasPrefix(ids[i], "req_") || ms <= 0 || (l["errorId"] != nil) != w.errorID {
			t.Errorf("line %d: %v; want %+v, request id %s", i, l, w, ids[i])
		}
	}
	all := logs.String()
	for _, secret := range []string{tok, botKey, signature, "secret=query", "X-Amz-"} {
		if secret == "" || strings.Contains(all, secret) {
			t.Errorf("the log holds %q:\n%s", secret, all)
		}
	}
}

// TestCORS: browser pages of this machine (any port) may call the API and
// the embedded S3: preflights answered 204 with the allowed method and
// headers, answers marked with the origin. Other origins get a 403 in the
// error shape and unmarked answers. PLATFORM_CORS_ORIGINS replaces the
// default list.
func TestCORS(t *testing.T) {
	preflight := func(base, origin, path string) *http.Response {
		return send(t, "OPTIONS", base+path, map[string]string{"Origin": origin, "Access-Control-Request-Method": "POST",
			"Access-Control-Request-Headers": "authorization, content-type, x-bot-id"}, "")
	}
	allowed := func(t *testing.T, res *http.Response, origin string) {
		t.Helper()
		h := res.Header
		if res.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
			h.Get("Access-Control-Allow-Headers") != "authorization, content-type, x-bot-id" || h.Get("Access-Control-Allow-Credentials") != "" {
			t.Fatalf("preflight from %s: %d %v", origin, res.StatusCode, h)
		}
	}
	refused := func(t *testing.T, res *http.Response, origin string) {
		t.Helper()
		if res.StatusCode != 403 || res.Header.Get("Access-Control-Allow-Origin") != "" || decode(t, res)["type"] != "Forbidden" {
			t.Fatalf("preflight from %s: %d %v", origin, res.StatusCode, res.Header)
		}
	}

	t.Run("local default", func(t *testing.T) {
		base, tok, _ := loggedPlatform(t)
		for _, o := range []string{"http://localhost:3000", "http://127.0.0.1:5173", "http://[::1]:8080"} {
			allowed(t, preflight(base, o, "/v1/admin/workspaces"), o)
			allowed(t, preflight(base, o, "/_s3/platform-files/files/x"), o)
		}
		for _, o := range []string{"https://evil.example", "http://localhost.evil.example:3000", "http://localhost:3000x", "null"} {
			refused(t, preflight(base, o, "/v1/admin/workspaces"), o)
		}
		res := send(t, "GET", base+"/v1/admin/account/me", map[string]string{"Authorization": "Bearer " + tok, "Origin": "http://localhost:3000"}, "")
		if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "http://localhost:3000" || !strings.Contains(res.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
			t.Fatalf("call from an allowed origin: %d %v", res.StatusCode, res.Header)
		}
		res = send(t, "GET", base+"/v1/admin/account/me", map[string]string{"Authorization": "Bearer " + tok, "Origin": "https://evil.example"}, "")
		if res.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Fatalf("call from another origin marked allowed: %v", res.Header)
		}
		// Not a preflight: an OPTIONS call is an unknown method.
		if res := send(t, "OPTIONS", base+"/v1/admin/workspaces", nil, ""); res.StatusCode != 405 || decode(t, res)["type"] != "MethodNotFound" {
			t.Fatalf("OPTIONS without Origin: %d", res.StatusCode)
		}
	})
	t.Run("configured", func(t *testing.T) {
		t.Setenv("PLATFORM_CORS_ORIGINS", "https://app.example.com, https://admin.example.com")
		base, _, _ := loggedPlatform(t)
		allowed(t, preflight(base, "https://app.example.com", "/v1/chat/conversations"), "https://app.example.com")
		refused(t, preflight(base, "http://localhost:3000", "/v1/chat/conversations"), "http://localhost:3000")
	})
}
