package signintest

// Single sign-on against a real OpenID provider that no one here wrote:
// the zitadel/oidc example provider (scripts/oidcprovider, its own
// module), built and run on loopback by the test.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/signin"
)

// providerDir is scripts/oidcprovider, found up from the working
// directory (a package's test runs in its own directory).
func providerDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "scripts", "oidcprovider")
		if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no scripts/oidcprovider above the working directory")
		}
		dir = up
	}
}

var (
	providerOnce sync.Once
	providerBin  string
	providerErr  error
)

func buildProvider(t *testing.T) string {
	t.Helper()
	providerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oidcprovider")
		if err != nil {
			providerErr = err
			return
		}
		providerBin = filepath.Join(dir, "oidcprovider")
		cmd := exec.Command("go", "build", "-o", providerBin, ".")
		cmd.Dir, providerErr = providerDir()
		if providerErr != nil {
			return
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			providerErr = err
			providerBin = string(out)
		}
	})
	if providerErr != nil {
		t.Fatalf("building the OpenID provider: %v\n%s", providerErr, providerBin)
	}
	return providerBin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strings.TrimPrefix(l.Addr().String(), "127.0.0.1:")
}

// ProviderUser is a user the provider adds to the example's (password
// verysecure); Groups is its "groups" claim.
type ProviderUser struct {
	Username      string   `json:"username"`
	Email         string   `json:"email"`
	EmailVerified bool     `json:"emailVerified"`
	Groups        []string `json:"groups,omitempty"`
}

// startProvider runs the provider on port with the platform's callback
// registered, until the test ends.
func startProvider(t *testing.T, port, redirect string, users ...ProviderUser) {
	t.Helper()
	cmd := exec.Command(buildProvider(t))
	cmd.Env = append(os.Environ(), "PORT="+port, "REDIRECT_URI="+redirect)
	if len(users) > 0 {
		b, err := json.Marshal(users)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Env = append(cmd.Env, "OIDC_USERS="+string(b))
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "issuer ") {
		t.Fatalf("provider did not start: %q %v", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	// Listening follows the line: wait for the discovery document.
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := http.Get("http://127.0.0.1:" + port + "/.well-known/openid-configuration")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("provider not answering: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// browser follows redirects by hand, keeping cookies by name (secure
// cookies over loopback http, as browsers do).
type browser struct {
	t       *testing.T
	cookies map[string]string
	client  *http.Client
}

func newBrowser(t *testing.T) *browser {
	return &browser{t: t, cookies: map[string]string{}, client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, u string, form url.Values) *http.Response {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	var cs []string
	for k, v := range b.cookies {
		cs = append(cs, k+"="+v)
	}
	if len(cs) > 0 {
		req.Header.Set("Cookie", strings.Join(cs, "; "))
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	for _, c := range res.Cookies() {
		if c.MaxAge < 0 {
			delete(b.cookies, c.Name)
		} else {
			b.cookies[c.Name] = c.Value
		}
	}
	return res
}

func location(t *testing.T, res *http.Response, base string) string {
	t.Helper()
	if res.StatusCode < 300 || res.StatusCode >= 400 {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("%s: status %d, want a redirect: %s", res.Request.URL, res.StatusCode, b)
	}
	res.Body.Close()
	u, err := res.Request.URL.Parse(res.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return u.String()
}

// providerLogin goes from the platform's start URL through the provider's
// login form to the platform's callback URL (not followed).
func (b *browser) providerLogin(start, user string) string {
	t := b.t
	t.Helper()
	authURL := location(t, b.do("GET", start, nil), "")
	au, _ := url.Parse(authURL)
	q := au.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || q.Get("nonce") == "" {
		t.Fatalf("authorization request lacks PKCE S256, state or nonce: %s", authURL)
	}
	loginURL := location(t, b.do("GET", authURL, nil), "")
	lu, _ := url.Parse(loginURL)
	id := lu.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("no auth request id in %s", loginURL)
	}
	res := b.do("POST", lu.Scheme+"://"+lu.Host+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {"verysecure"}})
	next := location(t, res, "")
	// The provider's own callback, then ours.
	return location(t, b.do("GET", next, nil), "")
}

func body(res *http.Response) string {
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return string(b)
}

// OIDCSignIn: single sign-on against the real provider: PKCE S256, state
// and nonce sent; an unlinked identity refused; the setup link links it;
// sign-in; a replayed answer, a wrong state, a foreign iss and a callback
// without the browser's flow cookie refused.
func OIDCSignIn(t *testing.T, start Start) {
	port := freePort(t)
	e := newEnv(t, start, Setup{OIDC: &OIDC{Issuer: "http://127.0.0.1:" + port + "/", ClientID: "web", ClientSecret: "secret", Name: "Zitadel example"}})
	startProvider(t, port, e.URL+signin.CallbackPath)

	cfg := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/config"}), 200, "")
	if ps := cfg.List("providers"); len(ps) != 1 || ps[0].(map[string]any)["name"] != "Zitadel example" {
		t.Fatalf("config: %s", cfg.Raw)
	}
	// Unlinked identities are refused: accounts are linked, never matched by email.
	b := newBrowser(t)
	cb := b.providerLogin(e.URL+"/auth/oidc/start", "test-user@127.0.0.1")
	if res := b.do("GET", cb, nil); res.StatusCode != 403 || !strings.Contains(body(res), "no account here is linked") {
		t.Fatalf("unlinked identity: %d", res.StatusCode)
	}

	// The first account's setup link links the identity.
	tok := e.setupToken(t)
	b = newBrowser(t)
	cb = b.providerLogin(e.URL+"/auth/oidc/start?link="+url.QueryEscape(tok), "test-user@127.0.0.1")
	res := b.do("GET", cb, nil)
	if got := location(t, res, ""); got != e.URL+"/#/" {
		t.Fatalf("after sign-in: %s", got)
	}
	cookie := b.cookies[signin.CookieName]
	if cookie == "" {
		t.Fatal("no session cookie")
	}
	gs := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/session", Headers: map[string]string{"Cookie": signin.CookieName + "=" + cookie}}), 200, "")
	if gs.Str("email") != "admin@localhost" {
		t.Fatalf("session: %s", gs.Raw)
	}
	s := session{cookie: cookie, csrf: gs.Str("csrfToken")}
	e.Check(e.me(s), 200, "")
	// The setup link is spent.
	e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/links/" + tok}), 404, "")

	// A replayed answer (the same code and state) is refused.
	b.cookies["__Host-botforge_oidc"] = mustQuery(t, cb, "state")
	if res := b.do("GET", cb, nil); res.StatusCode != 400 || !strings.Contains(body(res), "already finished") {
		t.Fatalf("replayed code: %d", res.StatusCode)
	}

	// Signing in again with the linked identity: a new session.
	b2 := newBrowser(t)
	cb = b2.providerLogin(e.URL+"/auth/oidc/start", "test-user@127.0.0.1")
	// A wrong state is refused (and leaves the real one usable).
	bad := strings.Replace(cb, "state="+url.QueryEscape(mustQuery(t, cb, "state")), "state=forged", 1)
	if res := b2.do("GET", bad, nil); res.StatusCode != 400 || !strings.Contains(body(res), "wrong state") {
		t.Fatalf("wrong state: %d", res.StatusCode)
	}
	b2.cookies["__Host-botforge_oidc"] = mustQuery(t, cb, "state")
	// An answer naming another issuer (RFC 9207 iss) is refused.
	if res := b2.do("GET", cb+"&iss="+url.QueryEscape("http://evil.example/"), nil); res.StatusCode != 401 || !strings.Contains(body(res), "not the configured") {
		t.Fatalf("foreign iss: %d", res.StatusCode)
	}
	b2.cookies["__Host-botforge_oidc"] = mustQuery(t, cb, "state")
	if got := location(t, b2.do("GET", cb, nil), ""); got != e.URL+"/#/" {
		t.Fatalf("second sign-in: %s", got)
	}
	if b2.cookies[signin.CookieName] == "" || b2.cookies[signin.CookieName] == cookie {
		t.Fatal("the second sign-in must open a new session")
	}
	// Without the flow cookie (another browser, or a callback on another
	// host than the console's): refused, saying what to check.
	b3 := newBrowser(t)
	cb = b3.providerLogin(e.URL+"/auth/oidc/start", "test-user@127.0.0.1")
	delete(b3.cookies, "__Host-botforge_oidc")
	if res := b3.do("GET", cb, nil); res.StatusCode != 400 || !strings.Contains(body(res), "PLATFORM_PUBLIC_URL") {
		t.Fatalf("no flow cookie: %d", res.StatusCode)
	}
}

// OIDCForeignIssuer: a provider whose discovery names another issuer than
// the configured one is refused.
func OIDCForeignIssuer(t *testing.T, start Start) {
	port := freePort(t)
	// The same provider, configured under another issuer name.
	e := newEnv(t, start, Setup{OIDC: &OIDC{Issuer: "http://localhost:" + port + "/", ClientID: "web", ClientSecret: "secret", Name: "Zitadel example"}})
	startProvider(t, port, e.URL+signin.CallbackPath)
	b := newBrowser(t)
	res := b.do("GET", e.URL+"/auth/oidc/start", nil)
	if txt := body(res); res.StatusCode != 502 || !strings.Contains(txt, "did not match the issuer") {
		t.Fatalf("foreign issuer: %d %s", res.StatusCode, txt)
	}
}

// OIDCPublicURLMismatch: a console reached at another host than
// PLATFORM_PUBLIC_URL says so, with both URLs.
func OIDCPublicURLMismatch(t *testing.T, start Start) {
	port := freePort(t)
	e := newEnv(t, start, Setup{Env: map[string]string{signin.EnvPublicURL: "https://console.example.com"},
		OIDC: &OIDC{Issuer: "http://127.0.0.1:" + port + "/", ClientID: "web", ClientSecret: "secret", Name: "Zitadel example"}})
	res := newBrowser(t).do("GET", e.URL+"/auth/oidc/start", nil)
	if txt := body(res); res.StatusCode != 400 || !strings.Contains(txt, "PLATFORM_PUBLIC_URL is https://console.example.com") {
		t.Fatalf("wrong public URL: %d %s", res.StatusCode, txt)
	}
}

func mustQuery(t *testing.T, u, name string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil || p.Query().Get(name) == "" {
		t.Fatalf("%s has no %s", u, name)
	}
	return p.Query().Get(name)
}
