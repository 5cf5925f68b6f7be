package console

import (
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func newMux() *http.ServeMux {
	mux := http.NewServeMux()
	for p, h := range Routes() {
		mux.Handle(p, h)
	}
	return mux
}

func get(t *testing.T, mux http.Handler, path string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec.Result()
}

// "/" is the page, "/console/..." its assets, with a strict CSP; the page
// loads nothing from elsewhere and runs no inline script.
func TestServesThePage(t *testing.T) {
	mux := newMux()
	res := get(t, mux, "/", nil)
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") {
		t.Errorf("CSP allows unsafe sources: %q", csp)
	}
	page := string(body)
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(page) || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("the page has an inline script or an external reference:\n%s", page)
	}
	// Every asset the page references is served.
	for _, m := range regexp.MustCompile(`(?:href|src)="(/console/[^"]+)"`).FindAllStringSubmatch(page, -1) {
		if r := get(t, mux, m[1], nil); r.StatusCode != 200 {
			t.Errorf("%s: %d", m[1], r.StatusCode)
		}
	}
	// Modules are JavaScript, gzipped for clients that accept it, and
	// revalidated with their ETag.
	r := get(t, mux, "/console/app.js", map[string]string{"Accept-Encoding": "gzip, br"})
	if r.Header.Get("Content-Type") != "text/javascript; charset=utf-8" || r.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("app.js: %v", r.Header)
	}
	zr, err := gzip.NewReader(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(zr); !strings.Contains(string(b), "render(") {
		t.Fatal("app.js gzipped body")
	}
	if r2 := get(t, mux, "/console/app.js", map[string]string{"If-None-Match": r.Header.Get("ETag"), "Accept-Encoding": "gzip"}); r2.StatusCode != 304 {
		t.Fatalf("revalidation: %d", r2.StatusCode)
	}
	for _, p := range []string{"/console/nope.js", "/console/index.html", "/console/"} {
		if r := get(t, mux, p, nil); r.StatusCode != 404 {
			t.Errorf("%s: %d", p, r.StatusCode)
		}
	}
	raw, gz := Sizes()
	t.Logf("console assets: %d bytes, %d gzipped", raw, gz)
}

// No module loads anything from another origin or by a bare specifier
// (there is no import map: the CSP forbids inline scripts).
func TestModulesImportOnlyTheirSiblings(t *testing.T) {
	// Import declarations (at a statement's start; the vendored files are
	// minified: `import{options as n}from"preact"`).
	imp := regexp.MustCompile(`(?m)(?:^|[;}])\s*import\s*(?:[\w*{}\s,$]+?from\s*)?["']([^"']+)["']`)
	for name, a := range assets {
		if !strings.HasSuffix(name, ".js") {
			continue
		}
		found := imp.FindAllStringSubmatch(string(a.body), -1)
		if name == "app.js" && len(found) < 5 || name == "vendor/hooks.module.js" && len(found) != 1 {
			t.Errorf("%s: %d imports found: the pattern misses them", name, len(found))
		}
		for _, m := range found {
			if !strings.HasPrefix(m[1], "./") {
				t.Errorf("%s imports %q", name, m[1])
			}
			if _, ok := assets[strings.TrimPrefix(pathJoin(name, m[1]), "/")]; !ok {
				t.Errorf("%s imports %q, which is not embedded", name, m[1])
			}
		}
	}
}

func pathJoin(from, rel string) string {
	dir := ""
	if i := strings.LastIndex(from, "/"); i >= 0 {
		dir = from[:i+1]
	}
	return dir + strings.TrimPrefix(rel, "./")
}

// The vendored libraries are the files scripts/console/vendor.sh copied
// from the pinned npm packages (vendor.sh --check compares them with the
// packages themselves).
func TestVendoredChecksums(t *testing.T) {
	sums := assets["vendor/SHA256SUMS"]
	if sums == nil {
		t.Fatal("vendor/SHA256SUMS is missing")
	}
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(sums.body)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		f := strings.Fields(line)
		a := assets["vendor/"+f[1]]
		if a == nil {
			t.Errorf("vendor/%s is missing", f[1])
			continue
		}
		sum := sha256.Sum256(a.body)
		if hex.EncodeToString(sum[:]) != f[0] {
			t.Errorf("vendor/%s does not match SHA256SUMS: run scripts/console/vendor.sh", f[1])
		}
		n++
	}
	if n != 3 {
		t.Errorf("SHA256SUMS lists %d files, want 3", n)
	}
}

// TestCSPNamesTheStreamHost: with the platform's stream host given
// (PLATFORM_CHAT_STREAM_URL), the console's CSP lets the page connect to
// its origin (aws-local's stand-ins are http://127.0.0.1:<port>); without
// one it is the fixed policy.
func TestCSPNamesTheStreamHost(t *testing.T) {
	for _, tc := range []struct{ stream, want string }{
		{"", ContentSecurityPolicy},
		{"not a url", ContentSecurityPolicy},
		{"http://127.0.0.1:9000/", strings.Replace(ContentSecurityPolicy, "connect-src 'self' ", "connect-src 'self' http://127.0.0.1:9000 ", 1)},
		{"https://abc.lambda-url.eu-west-1.on.aws", strings.Replace(ContentSecurityPolicy, "connect-src 'self' ", "connect-src 'self' https://abc.lambda-url.eu-west-1.on.aws ", 1)},
	} {
		rec := httptest.NewRecorder()
		RoutesWith(tc.stream)["GET /{$}"].ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		if got := rec.Header().Get("Content-Security-Policy"); got != tc.want {
			t.Errorf("stream %q: CSP %q, want %q", tc.stream, got, tc.want)
		}
	}
}
