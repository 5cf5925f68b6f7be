package signintest

import (
	"net/http"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/signin"
)

// ssoSignIn signs user in through the provider: the callback's answer.
func (e *env) ssoSignIn(t *testing.T, user string) (*browser, *http.Response) {
	t.Helper()
	b := newBrowser(t)
	cb := b.providerLogin(e.URL+"/auth/oidc/start", user)
	return b, b.do("GET", cb, nil)
}

// ssoSession is a successful single sign-on's session (and its account's
// email, checked).
func (e *env) ssoSession(t *testing.T, user, email string) session {
	t.Helper()
	b, res := e.ssoSignIn(t, user)
	if got := location(t, res, ""); got != e.URL+"/#/" {
		t.Fatalf("%s: after sign-in: %s", user, got)
	}
	cookie := b.cookies[signin.CookieName]
	gs := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/auth/session", Headers: map[string]string{"Cookie": signin.CookieName + "=" + cookie}}), 200, "")
	if gs.Str("email") != email {
		t.Fatalf("%s: session of %s, want %s", user, gs.Raw, email)
	}
	return session{cookie: cookie, csrf: gs.Str("csrfToken")}
}

// ssoRefused checks that user's sign-in is refused with status and a
// page saying want.
func (e *env) ssoRefused(t *testing.T, user string, status int, want string) {
	t.Helper()
	b, res := e.ssoSignIn(t, user)
	if txt := body(res); res.StatusCode != status || !strings.Contains(txt, want) {
		t.Fatalf("%s: %d %s, want %d saying %q", user, res.StatusCode, txt, status, want)
	}
	if b.cookies[signin.CookieName] != "" {
		t.Fatalf("%s: a refused sign-in set a session", user)
	}
}

// memberRole is the role of email in the flow's workspace ("" if none).
func (e *env) memberRole(t *testing.T, email string) string {
	t.Helper()
	r := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspace-members", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": e.ws}}), 200, "listWorkspaceMembers")
	for _, m := range r.List("members") {
		if mm := m.(map[string]any); mm["email"] == email {
			return mm["role"].(string)
		}
	}
	return ""
}

// OIDCSelfSignUp: with PLATFORM_OIDC_ALLOWED_DOMAINS, an unknown identity
// whose verified email is at an allowed domain gets an account on its
// first sign-in and joins PLATFORM_OIDC_WORKSPACE (here a handle) with
// PLATFORM_OIDC_SIGNUP_ROLE; signing in again is the same account. Another
// domain, an unverified email, and an email that already has an account
// here (never taken over) are refused, saying why.
func OIDCSelfSignUp(t *testing.T, start Start) {
	port := freePort(t)
	e := newEnv(t, start, Setup{
		Env:  map[string]string{signin.EnvOIDCAllowedDomains: "acme.test, example.org", signin.EnvOIDCWorkspace: "acme-sso", signin.EnvOIDCSignUpRole: "developer"},
		OIDC: &OIDC{Issuer: "http://127.0.0.1:" + port + "/", ClientID: "web", ClientSecret: "secret", Name: "Zitadel example"}})
	e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + e.ws, Token: e.AdminToken, Body: map[string]any{"handle": "acme-sso"}}), 200, "updateWorkspace")
	startProvider(t, port, e.URL+signin.CallbackPath,
		ProviderUser{Username: "alice", Email: "Alice@ACME.test", EmailVerified: true},
		ProviderUser{Username: "bob", Email: "bob@other.test", EmailVerified: true},
		ProviderUser{Username: "carol", Email: "carol@acme.test", EmailVerified: false},
		ProviderUser{Username: "dave", Email: "dave@acme.test", EmailVerified: true})

	// Refusals first: none creates an account.
	e.ssoRefused(t, "bob", 403, "self sign-up is open only to email addresses at acme.test, example.org, not bob@other.test")
	e.ssoRefused(t, "carol", 403, "carol@acme.test is not verified")
	// dave@acme.test has an account (invited, pending): its identity is
	// linked only by its invitation link, never by email.
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": e.ws}, Body: map[string]any{"email": "dave@acme.test", "role": "viewer"}}), 200, "createWorkspaceMember")
	e.ssoRefused(t, "dave", 403, "an account for dave@acme.test already exists here")
	for _, who := range []string{"bob@other.test", "carol@acme.test"} {
		if role := e.memberRole(t, who); role != "" {
			t.Fatalf("refused %s is a member (%s)", who, role)
		}
	}
	if role := e.memberRole(t, "dave@acme.test"); role != "viewer" {
		t.Fatalf("dave's role changed to %q", role)
	}

	// alice signs up: an account, a member of acme-sso as developer.
	s := e.ssoSession(t, "alice", "alice@acme.test")
	me := e.Check(e.me(s), 200, "")
	if me.Str("account.email") != "alice@acme.test" {
		t.Fatalf("me: %s", me.Raw)
	}
	if role := e.memberRole(t, "alice@acme.test"); role != "developer" {
		t.Fatalf("alice's role: %q", role)
	}
	e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots", Headers: s.headers("x-workspace-id", e.ws)}), 200, "listBots")
	// Again: the same account, a new session.
	s2 := e.ssoSession(t, "alice", "alice@acme.test")
	if s2.cookie == s.cookie || e.Check(e.me(s2), 200, "").Str("account.id") != me.Str("account.id") {
		t.Fatal("a second sign-in must be the same account in a new session")
	}
	// The sign-up is in the workspace's audit log.
	a := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + e.ws + "/audit-records", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": e.ws}}), 200, "getAuditRecords")
	if !strings.Contains(string(a.Raw), "SIGN_UP: account created by self sign-up") {
		t.Fatalf("no SIGN_UP audit record: %s", a.Raw)
	}
}

// OIDCRoleClaim: with PLATFORM_OIDC_ROLE_CLAIM=groups and
// PLATFORM_OIDC_ROLE_MAP, every single sign-on sets the member's role in
// PLATFORM_OIDC_WORKSPACE from the claim (the highest mapped value wins),
// undoing a change made meanwhile in the workspace and adding a missing
// membership; a claim mapping to nothing (or absent) is refused before
// anything is written: no account created, no invitation link spent.
func OIDCRoleClaim(t *testing.T, start Start) {
	port := freePort(t)
	e := newEnv(t, start, Setup{
		Env: map[string]string{signin.EnvOIDCAllowedDomains: "acme.test", signin.EnvOIDCWorkspace: "acme-roles",
			signin.EnvOIDCRoleClaim: "groups", signin.EnvOIDCRoleMap: "bot-admins=administrator, bot-devs=developer"},
		OIDC: &OIDC{Issuer: "http://127.0.0.1:" + port + "/", ClientID: "web", ClientSecret: "secret", Name: "Zitadel example"}})
	e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + e.ws, Token: e.AdminToken, Body: map[string]any{"handle": "acme-roles"}}), 200, "updateWorkspace")
	startProvider(t, port, e.URL+signin.CallbackPath,
		ProviderUser{Username: "erin", Email: "erin@acme.test", EmailVerified: true, Groups: []string{"bot-devs", "bot-admins"}},
		ProviderUser{Username: "frank", Email: "frank@acme.test", EmailVerified: true, Groups: []string{"staff", "bot-devs"}},
		ProviderUser{Username: "gina", Email: "gina@acme.test", EmailVerified: true, Groups: []string{"marketing"}},
		ProviderUser{Username: "hank", Email: "hank@acme.test", EmailVerified: true},
		ProviderUser{Username: "ivy", Email: "ivy@other.test", EmailVerified: true, Groups: []string{"bot-admins"}})
	ws := map[string]string{"x-workspace-id": e.ws}

	// No mapped value: refused, no account.
	e.ssoRefused(t, "gina", 403, `claim groups (marketing) holds none of the values this platform maps to a role (bot-admins, bot-devs)`)
	e.ssoRefused(t, "hank", 403, `claim groups () holds none`)
	for _, who := range []string{"gina@acme.test", "hank@acme.test"} {
		if role := e.memberRole(t, who); role != "" {
			t.Fatalf("refused %s is a member (%s)", who, role)
		}
	}
	// The highest mapped value wins.
	e.ssoSession(t, "erin", "erin@acme.test")
	if role := e.memberRole(t, "erin@acme.test"); role != "administrator" {
		t.Fatalf("erin: %q", role)
	}
	// An administrator's change in the workspace is undone at the next
	// sign-in: the provider decides.
	fs := e.ssoSession(t, "frank", "frank@acme.test")
	if role := e.memberRole(t, "frank@acme.test"); role != "developer" {
		t.Fatalf("frank: %q", role)
	}
	var frankID string
	for _, m := range e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspace-members", Token: e.AdminToken, Headers: ws}), 200, "").List("members") {
		if mm := m.(map[string]any); mm["email"] == "frank@acme.test" {
			frankID = mm["id"].(string)
		}
	}
	e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspace-members/" + frankID, Token: e.AdminToken, Headers: ws, Body: map[string]any{"role": "viewer"}}), 200, "updateWorkspaceMember")
	if role := e.memberRole(t, "frank@acme.test"); role != "viewer" {
		t.Fatalf("frank after update: %q", role)
	}
	e.ssoSession(t, "frank", "frank@acme.test")
	if role := e.memberRole(t, "frank@acme.test"); role != "developer" {
		t.Fatalf("frank after signing in again: %q", role)
	}
	// A member removed from the workspace is added again by the claim.
	e.Check(e.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspace-members/" + frankID, Token: e.AdminToken, Headers: ws}), 200, "deleteWorkspaceMember")
	e.Check(e.me(fs), 401, "") // its sessions ended
	e.ssoSession(t, "frank", "frank@acme.test")
	if role := e.memberRole(t, "frank@acme.test"); role != "developer" {
		t.Fatalf("frank after removal and sign-in: %q", role)
	}
	// An invitation accepted by single sign-on: the claim's role, not the
	// invitation's; a refused claim does not spend the link.
	inv := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-invitations", Token: e.AdminToken, Headers: ws, Body: map[string]any{"email": "ivy@other.test", "role": "viewer"}}), 200, "")
	tok := linkToken(t, inv.Str("invitation.url"), "/#/invite/")
	b := newBrowser(t)
	cb := b.providerLogin(e.URL+"/auth/oidc/start?link="+tok, "ivy")
	if got := location(t, b.do("GET", cb, nil), ""); got != e.URL+"/#/" {
		t.Fatalf("ivy: %s", got)
	}
	if role := e.memberRole(t, "ivy@other.test"); role != "administrator" {
		t.Fatalf("ivy: %q", role)
	}
	// The changes are in the audit log.
	a := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + e.ws + "/audit-records", Token: e.AdminToken, Headers: ws}), 200, "getAuditRecords")
	if !strings.Contains(string(a.Raw), "ROLE_SET: role viewer -> developer from the groups claim") {
		t.Fatalf("no ROLE_SET audit record: %s", a.Raw)
	}
}
