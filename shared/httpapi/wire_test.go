package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
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
		{"GET", "/nope", 404, "ResourceNotFound"},
		{"GET", "/", 404, "ResourceNotFound"},
		{"GET", "/v1/files/", 404, "ResourceNotFound"},
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
				!strings.HasPrefix(e.ID, "err_") || e.Message == "" {
				t.Fatalf("status %d %s, want %d %s in the error shape", res.StatusCode, raw, c.status, c.typ)
			}
		})
	}
}
