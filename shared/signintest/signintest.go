// Package signintest is people's sign-in flows (docs/signin.md) as one
// table run against both builds: the local platform in-process
// (shared/signin's TestSignInFlows) and the AWS build under aws-local
// (shared/awslocal's TestSignInFlowsOnTheStack). Each flow asks its build
// for a fresh platform configured as it needs (Setup) and speaks only
// HTTP to it, so the same assertions hold for the same code behind API
// Gateway's stand-in, in Lambda processes, with its secret in SSM.
package signintest

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/signin"
)

// Setup is what a flow needs of its platform.
type Setup struct {
	// Env: sign-in settings of the platform (signin.EnvPerAccount,
	// signin.EnvPublicURL, ...): locally the process's environment, on the
	// stack the admin function's (a template with them set).
	Env map[string]string
	// OIDC, when set: single sign-on configured. Locally the four
	// PLATFORM_OIDC_* variables; on the stack the OidcIssuer, OidcClientId
	// and OidcName parameters and the secret in the SSM SecureString
	// /<stack>/oidc-client-secret (as an operator deploys it).
	OIDC *OIDC
}

// OIDC is a provider's configuration.
type OIDC struct{ Issuer, ClientID, ClientSecret, Name string }

// Platform is a running build, reached through HTTP.
type Platform struct {
	*apitest.Env
	// Other is the path prefix of an operation served by another
	// process than the sign-in's (the stack's tables function; locally
	// the same process): GET Other+"/nope" with x-bot-id answers 404 to
	// an accepted session, 401 to an ended one.
	Other string
}

// Start starts a fresh platform of one build configured by s.
type Start func(t *testing.T, s Setup) *Platform

// Flow is one sign-in flow.
type Flow struct {
	Name string
	Run  func(t *testing.T, start Start)
}

// Flows are every flow, run against each build.
var Flows = []Flow{
	{"PasswordSessionAndCSRF", PasswordSessionAndCSRF},
	{"InvitationAcceptedOnceAndSessionsEnd", InvitationAcceptedOnceAndSessionsEnd},
	{"TOTPSingleUseAndRecoveryCodes", TOTPSingleUseAndRecoveryCodes},
	{"SignInThrottled", SignInThrottled},
	{"UnknownEmailTiming", UnknownEmailTiming},
	{"EndedSessionsStopEverywhere", EndedSessionsStopEverywhere},
	{"OIDCSignIn", OIDCSignIn},
	{"OIDCForeignIssuer", OIDCForeignIssuer},
	{"OIDCPublicURLMismatch", OIDCPublicURLMismatch},
	{"OIDCSelfSignUp", OIDCSelfSignUp},
	{"OIDCRoleClaim", OIDCRoleClaim},
	{"InvitationMailed", InvitationMailed},
}

// Run runs every flow against one build, each a subtest.
func Run(t *testing.T, start Start) {
	for _, f := range Flows {
		t.Run(f.Name, func(t *testing.T) { f.Run(t, start) })
	}
}

// env is a flow's platform with a workspace.
type env struct {
	*Platform
	ws string
}

func newEnv(t *testing.T, start Start, s Setup) *env {
	t.Helper()
	p := start(t, s)
	r := p.Check(p.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: p.AdminToken, Body: map[string]any{"name": "Acme"}}), 200, "createWorkspace")
	return &env{Platform: p, ws: r.Str("id")}
}

// session is a browser's: its cookie and CSRF token.
type session struct{ cookie, csrf string }

func (s session) headers(extra ...string) map[string]string {
	h := map[string]string{"Cookie": signin.CookieName + "=" + s.cookie, signin.CSRFHeader: s.csrf}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(h, extra[i])
		} else {
			h[extra[i]] = extra[i+1]
		}
	}
	return h
}

// sessionOf reads the session cookie a response set, checking its
// attributes.
func sessionOf(t *testing.T, r apitest.Response) session {
	t.Helper()
	res := http.Response{Header: r.Header}
	for _, c := range res.Cookies() {
		if c.Name != signin.CookieName {
			continue
		}
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Domain != "" {
			t.Fatalf("session cookie attributes: %q", r.Header.Values("Set-Cookie"))
		}
		if len(c.Value) < 22 { // >= 128 bits in base64url
			t.Fatalf("session value too short: %d chars", len(c.Value))
		}
		return session{cookie: c.Value, csrf: r.Str("csrfToken")}
	}
	t.Fatalf("no session cookie set: status %d %s", r.Status, r.Raw)
	return session{}
}

// setupToken is the first account's one-time setup link's token.
func (e *env) setupToken(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.DataDir, "setup-link"))
	if err != nil {
		t.Fatal(err)
	}
	return linkToken(t, string(b), "/#/setup/")
}

func (e *env) setupAdmin(t *testing.T, pw string) session {
	t.Helper()
	tok := e.setupToken(t)
	info := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/links/" + tok}), 200, "")
	if info.Str("kind") != "setup" || info.Str("email") != "admin@localhost" {
		t.Fatalf("setup link: %s", info.Raw)
	}
	r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + tok, Body: map[string]any{"password": pw}}), 200, "")
	// The setup link works once.
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + tok, Body: map[string]any{"password": pw}}), 404, "")
	return sessionOf(t, r)
}

func linkToken(t *testing.T, url, marker string) string {
	t.Helper()
	i := strings.Index(url, marker)
	if i < 0 {
		t.Fatalf("link %q has no %s", url, marker)
	}
	return strings.TrimSpace(url[i+len(marker):])
}

func (e *env) signIn(email, pw, code string, hdr ...string) apitest.Response {
	body := map[string]any{"email": email, "password": pw}
	if code != "" {
		body["code"] = code
	}
	var h map[string]string
	for i := 0; i+1 < len(hdr); i += 2 {
		if h == nil {
			h = map[string]string{}
		}
		h[hdr[i]] = hdr[i+1]
	}
	return e.Do(apitest.Req{Method: "POST", Path: "/auth/password", Body: body, Headers: h})
}

func (e *env) me(s session, extra ...string) apitest.Response {
	return e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Headers: s.headers(extra...)})
}
