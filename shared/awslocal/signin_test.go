package awslocal_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/signin"
)

// TestSignInOnTheStack: people's sign-in through the AWS-shaped stack's
// HTTP API and its admin function (docs/signin.md): the setup link
// accepted once, the session cookie through API Gateway's payload (its
// cookies field both ways), CSRF refused, sign-out, password sign-in.
func TestSignInOnTheStack(t *testing.T) {
	dir := t.TempDir()
	s := startStackWith(t, awslocal.Options{DataDir: dir})
	b, err := os.ReadFile(filepath.Join(dir, "setup-link"))
	if err != nil {
		t.Fatal(err)
	}
	link := string(b)
	if !strings.HasPrefix(link, s.URL+"/#/setup/") {
		t.Fatalf("setup link %q", link)
	}
	tok := strings.TrimPrefix(link, s.URL+"/#/setup/")
	do := func(method, path string, hdr map[string]string, body any, want int) (*http.Response, map[string]any) {
		t.Helper()
		var rd io.Reader
		if body != nil {
			j, _ := json.Marshal(body)
			rd = bytes.NewReader(j)
		}
		req, _ := http.NewRequest(method, s.URL+path, rd)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d (want %d) %s", method, path, res.StatusCode, want, raw)
		}
		return res, out
	}
	cookieOf := func(res *http.Response) string {
		t.Helper()
		for _, c := range res.Cookies() {
			if c.Name == signin.CookieName && c.Secure && c.HttpOnly && c.Path == "/" {
				return c.Value
			}
		}
		t.Fatalf("no session cookie: %q", res.Header.Values("Set-Cookie"))
		return ""
	}
	res, out := do("POST", "/auth/links/"+tok, nil, map[string]any{"password": "stack password 1"}, 200)
	sess := map[string]string{"Cookie": signin.CookieName + "=" + cookieOf(res), signin.CSRFHeader: out["csrfToken"].(string)}
	do("POST", "/auth/links/"+tok, nil, map[string]any{"password": "stack password 2"}, 404)
	_, me := do("GET", "/v1/admin/account/me", sess, nil, 200)
	if me["account"].(map[string]any)["email"] != "admin@localhost" {
		t.Fatalf("me: %v", me)
	}
	do("GET", "/v1/admin/account/me", map[string]string{"Cookie": sess["Cookie"]}, nil, 403)
	do("POST", "/auth/signout", sess, nil, 200)
	do("GET", "/v1/admin/account/me", sess, nil, 401)
	do("POST", "/auth/password", nil, map[string]any{"email": "admin@localhost", "password": "wrong password"}, 401)
	res, out = do("POST", "/auth/password", nil, map[string]any{"email": "admin@localhost", "password": "stack password 1"}, 200)
	sess = map[string]string{"Cookie": signin.CookieName + "=" + cookieOf(res), signin.CSRFHeader: out["csrfToken"].(string)}
	_, l := do("GET", "/v1/admin/account/sessions", sess, nil, 200)
	if n := len(l["sessions"].([]any)); n != 1 {
		t.Fatalf("sessions: %v", l)
	}
}
