package httpapi_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// fixture is a platform with a workspace of the admin account and helpers.
type fixture struct {
	*apitest.Env
	ws string
}

func newFixture(t testing.TB) *fixture {
	e := apitest.New(t)
	f := &fixture{Env: e}
	r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "Acme"}}), 200, "createWorkspace")
	f.ws = r.Str("id")
	return f
}

func (f *fixture) ws_(token, method, path string, body any) apitest.Response {
	return f.Do(apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: map[string]string{"x-workspace-id": f.ws}})
}

func (f *fixture) createBot(token string, body any) string {
	f.T.Helper()
	r := f.Check(f.ws_(token, "POST", "/v1/admin/bots", body), 200, "createBot")
	return r.Str("bot.id")
}

// invite adds a member with role and returns the new account's token.
func (f *fixture) invite(email, role string) (token, memberID string) {
	f.T.Helper()
	r := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/workspace-members", map[string]any{"email": email, "role": role}), 200, "createWorkspaceMember")
	return f.AccountToken(email), r.Str("id")
}

func TestWorkspaceAndBotLifecycle(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken

	w := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws, Token: tok, Headers: map[string]string{"x-multiple-integrations": "true"}}), 200, "getWorkspace")
	if w.Str("name") != "Acme" || w.Str("plan") != "community" || w.Str("billingVersion") != "v1" || w.Body["activeTrialId"] != nil {
		t.Fatalf("workspace defaults: %s", w.Raw)
	}
	if _, ok := w.Body["socialAccounts"].([]any); !ok || w.Body["about"] != "" {
		t.Fatalf("workspace default fields: %s", w.Raw)
	}

	bot := f.createBot(tok, map[string]any{"name": "Helper", "tags": map[string]string{"team": "a"}, "states": map[string]any{"s": map[string]any{"type": "workflow", "schema": map[string]any{}}}})
	got := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot, nil), 200, "getBot")
	if got.Str("bot.name") != "Helper" || got.Str("bot.status") != "active" || got.Str("bot.signingSecret") == "" {
		t.Fatalf("getBot: %s", got.Raw)
	}
	l := f.Check(f.ws_(tok, "GET", "/v1/admin/bots", nil), 200, "listBots")
	if n := len(l.List("bots")); n != 1 {
		t.Fatalf("listBots: %d bots: %s", n, l.Raw)
	}
	l = f.Check(f.ws_(tok, "GET", "/v1/admin/bots?tags.team=b", nil), 200, "listBots")
	if n := len(l.List("bots")); n != 0 {
		t.Fatalf("listBots tags filter: %s", l.Raw)
	}
	l = f.Check(f.ws_(tok, "GET", "/v1/admin/bots?tags.team=a&dev=false", nil), 200, "listBots")
	if n := len(l.List("bots")); n != 1 {
		t.Fatalf("listBots tags filter: %s", l.Raw)
	}
	w = f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws, Token: tok}), 200, "getWorkspace")
	if w.Body["botCount"] != float64(1) {
		t.Fatalf("botCount after create: %s", w.Raw)
	}

	// A workspace with bots cannot be deleted.
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + f.ws, Token: tok}), 409, "")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot, nil), 404, "")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + f.ws, Token: tok}), 200, "deleteWorkspace")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws, Token: tok}), 404, "")
	ws := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces", Token: tok}), 200, "listWorkspaces")
	if len(ws.List("workspaces")) != 0 {
		t.Fatalf("deleted workspace still listed: %s", ws.Raw)
	}
}

func TestUpdateWorkspace(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	path := "/v1/admin/workspaces/" + f.ws
	r := f.Check(f.Do(apitest.Req{Method: "PUT", Path: path, Token: tok, Body: map[string]any{"about": "We build bots", "handle": "acme", "socialAccounts": []string{"x"}}}), 200, "updateWorkspace")
	if r.Str("about") != "We build bots" || r.Str("handle") != "acme" || r.Str("name") != "Acme" {
		t.Fatalf("updateWorkspace: %s", r.Raw)
	}
	// Another workspace cannot take the handle.
	other := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + other, Token: tok, Body: map[string]any{"handle": "acme"}}), 409, "")
	l := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces?handle=acme", Token: tok}), 200, "listWorkspaces")
	if len(l.List("workspaces")) != 1 {
		t.Fatalf("list by handle: %s", l.Raw)
	}
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: path, Token: tok, Body: map[string]any{"handle": "Not Valid!"}}), 400, "")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: path, Token: tok, Body: map[string]any{"spendingLimit": 1}}), 400, "")
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ name, header string }{
		{"no header", ""},
		{"not bearer", "Basic abc"},
		{"unknown token", "Bearer bp_pat_doesnotexist"},
		{"empty token", "Bearer "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Headers: map[string]string{"Authorization": tc.header}})
			if r.Status != 401 || r.Str("type") != "Unauthorized" {
				t.Fatalf("got %d %s", r.Status, r.Raw)
			}
		})
	}

	// A PAT works until deleted, then at once stops working.
	created := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/pats", Token: f.AdminToken, Body: map[string]any{"note": "ci"}}), 200, "createPersonalAccessToken")
	pat, id := created.Str("pat.value"), created.Str("pat.id")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: pat}), 200, "getAccount")
	list := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/pats", Token: pat}), 200, "listPersonalAccessTokens")
	if strings.Contains(string(list.Raw), pat) {
		t.Fatal("listing shows a token value")
	}
	if len(list.List("pats")) != 2 {
		t.Fatalf("pats: %s", list.Raw)
	}
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/account/pats/" + id, Token: f.AdminToken}), 200, "deletePersonalAccessToken")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: pat}), 401, "")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/account/pats/" + id, Token: f.AdminToken}), 404, "")
}

func TestTenantIsolation(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)

	// An outsider: a member of another workspace of the same platform only.
	outTok, _ := newFixtureOn(f).invite("eve@example.com", "owner")

	for _, tc := range []apitest.Req{
		{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws},
		{Method: "PUT", Path: "/v1/admin/workspaces/" + f.ws, Body: map[string]any{"name": "x"}},
		{Method: "DELETE", Path: "/v1/admin/workspaces/" + f.ws},
		{Method: "GET", Path: "/v1/admin/bots/" + bot, Headers: map[string]string{"x-workspace-id": f.ws}},
		{Method: "GET", Path: "/v1/admin/bots", Headers: map[string]string{"x-workspace-id": f.ws}},
		{Method: "DELETE", Path: "/v1/admin/bots/" + bot, Headers: map[string]string{"x-workspace-id": f.ws}},
		{Method: "GET", Path: "/v1/admin/workspace-members", Headers: map[string]string{"x-workspace-id": f.ws}},
		{Method: "POST", Path: "/v1/admin/bots/baks", Body: map[string]any{"botId": bot}, Headers: map[string]string{"x-workspace-id": f.ws}},
	} {
		tc.Token = outTok
		r := f.Do(tc)
		if r.Status != 404 {
			t.Errorf("%s %s by outsider: %d %s, want 404", tc.Method, tc.Path, r.Status, r.Raw)
		}
	}
	// The bot exists, yet through the outsider's own workspace it is not found.
	outWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outTok, Body: map[string]any{"name": "Eve"}}), 200, "createWorkspace").Str("id")
	r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: outTok, Headers: map[string]string{"x-workspace-id": outWs}})
	if r.Status != 404 {
		t.Fatalf("foreign bot through own workspace: %d", r.Status)
	}
	r = f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots/baks", Token: outTok, Body: map[string]any{"botId": bot}, Headers: map[string]string{"x-workspace-id": outWs}})
	if r.Status != 404 {
		t.Fatalf("key for a foreign bot: %d", r.Status)
	}
}

// newFixtureOn makes a second workspace on the same platform, owned by the admin.
func newFixtureOn(f *fixture) *fixture {
	r := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: f.AdminToken, Body: map[string]any{"name": "Second"}}), 200, "createWorkspace")
	return &fixture{Env: f.Env, ws: r.Str("id")}
}

func TestViewerCannotWrite(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	viewer, _ := f.invite("viewer@example.com", "viewer")
	_, devMember := f.invite("dev@example.com", "developer")
	bak := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("id")

	writes := []apitest.Req{
		{Method: "PUT", Path: "/v1/admin/workspaces/" + f.ws, Body: map[string]any{"name": "x"}},
		{Method: "DELETE", Path: "/v1/admin/workspaces/" + f.ws},
		{Method: "POST", Path: "/v1/admin/workspace-members", Body: map[string]any{"email": "x@example.com", "role": "viewer"}},
		{Method: "PUT", Path: "/v1/admin/workspace-members/" + devMember, Body: map[string]any{"role": "viewer"}},
		{Method: "DELETE", Path: "/v1/admin/workspace-members/" + devMember},
		{Method: "POST", Path: "/v1/admin/bots", Body: map[string]any{}},
		{Method: "DELETE", Path: "/v1/admin/bots/" + bot},
		{Method: "POST", Path: "/v1/admin/bots/baks", Body: map[string]any{"botId": bot}},
		{Method: "DELETE", Path: "/v1/admin/bots/baks/" + bak},
	}
	for _, w := range writes {
		w.Token = viewer
		w.Headers = map[string]string{"x-workspace-id": f.ws}
		if r := f.Do(w); r.Status != 403 || r.Str("type") != "Forbidden" {
			t.Errorf("viewer %s %s: %d %s, want 403", w.Method, w.Path, r.Status, r.Raw)
		}
	}
	// Nothing was written.
	if n := len(f.Check(f.ws_(viewer, "GET", "/v1/admin/bots", nil), 200, "listBots").List("bots")); n != 1 {
		t.Fatalf("bots after refused writes: %d", n)
	}
	if n := len(f.Check(f.ws_(viewer, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members")); n != 3 {
		t.Fatalf("members after refused writes: %d", n)
	}
	// Viewers read.
	me := f.Check(f.ws_(viewer, "GET", "/v1/admin/workspace-members/me", nil), 200, "getWorkspaceMember")
	if me.Str("role") != "viewer" || me.Str("email") != "viewer@example.com" {
		t.Fatalf("me: %s", me.Raw)
	}
}

func TestBotAPIKeyScope(t *testing.T) {
	f := newFixture(t)
	botA := f.createBot(f.AdminToken, nil)
	botB := f.createBot(f.AdminToken, nil)
	created := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": botA, "note": "runtime"}), 200, "createBotApiKey")
	key := created.Str("value")

	f.Check(f.ws_(key, "GET", "/v1/admin/bots/"+botA, nil), 200, "getBot")
	// The SDK's client sends no x-workspace-id: the key's own workspace.
	if r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + botA, Token: key}), 200, "getBot"); r.Str("bot.id") != botA {
		t.Fatalf("getBot without x-workspace-id: %s", r.Raw)
	}
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + botB, Token: key}); r.Status != 403 {
		t.Fatalf("another bot without x-workspace-id: %d %s", r.Status, r.Raw)
	}
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + botA, Token: f.AdminToken}); r.Status != 400 {
		t.Fatalf("an account without x-workspace-id: %d %s", r.Status, r.Raw)
	}
	// Another bot, existing or not: the same 403 (what a bot key may do
	// does not depend on what exists).
	for _, id := range []string{botB, "undefined", "bot_01M8DJDKWEX4TXX8SB1FZEEBRF"} {
		if r := f.ws_(key, "GET", "/v1/admin/bots/"+id, nil); r.Status != 403 || r.Str("type") != "Forbidden" {
			t.Fatalf("BAK reading bot %s: %d %s", id, r.Status, r.Raw)
		}
	}
	for _, r := range []apitest.Req{
		{Method: "GET", Path: "/v1/admin/account/me"},
		{Method: "GET", Path: "/v1/admin/workspaces"},
		{Method: "GET", Path: "/v1/admin/bots"},
		{Method: "DELETE", Path: "/v1/admin/bots/" + botA},
		{Method: "POST", Path: "/v1/admin/bots", Body: map[string]any{}},
	} {
		r.Token, r.Headers = key, map[string]string{"x-workspace-id": f.ws}
		if got := f.Do(r); got.Status != 403 {
			t.Errorf("BAK %s %s: %d, want 403", r.Method, r.Path, got.Status)
		}
	}
	list := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/baks?botId="+botA, nil), 200, "listBotApiKeys")
	if len(list.List("baks")) != 1 || strings.Contains(string(list.Raw), key) {
		t.Fatalf("baks: %s", list.Raw)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/baks/"+created.Str("id"), nil), 200, "deleteBotApiKey")
	if r := f.ws_(key, "GET", "/v1/admin/bots/"+botA, nil); r.Status != 401 {
		t.Fatalf("deleted BAK: %d", r.Status)
	}

	// Deleting a bot revokes its keys.
	k2 := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": botB}), 200, "createBotApiKey").Str("value")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+botB, nil), 200, "deleteBot")
	if r := f.ws_(k2, "GET", "/v1/admin/bots/"+botB, nil); r.Status != 401 {
		t.Fatalf("key of deleted bot: %d %s", r.Status, r.Raw)
	}
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	hdr := map[string]string{"x-workspace-id": f.ws}
	big := `{"code":"` + strings.Repeat("x", 10<<20) + `"}`
	bigDef := `{"name":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, tc := range []struct {
		name   string
		req    apitest.Req
		status int
		want   string
	}{
		{"malformed JSON", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{"name":`}, 400, "malformed JSON"},
		{"trailing data", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{} {}`}, 400, "malformed JSON"},
		{"not an object", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `[1]`}, 400, "invalid body"},
		{"wrong type", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{"name": 5}`}, 400, `"name"`},
		{"wrong nested type", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{"tags": {"a": 1}}`}, 400, `"tags.a"`},
		{"unknown field", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{"nope": true}`}, 400, "nope"},
		{"bad state type", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{"states": {"s": {"type": "planet", "schema": {}}}}`}, 400, `"states.s.type"`},
		{"missing required", apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Body: `{"role": "viewer"}`}, 400, "email"},
		{"bad enum", apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Body: `{"email": "a@b.co", "role": "king"}`}, 400, `"role"`},
		{"bad email", apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Body: `{"email": "nope", "role": "viewer"}`}, 400, `"email"`},
		{"missing body", apitest.Req{Method: "POST", Path: "/v1/admin/bots/baks"}, 400, "botId"},
		{"oversize body", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: big}, 413, "exceeds"},
		{"oversize definition", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: bigDef}, 413, "too large"},
		{"pageSize 0", apitest.Req{Method: "GET", Path: "/v1/admin/bots?pageSize=0"}, 400, "pageSize"},
		{"pageSize 101", apitest.Req{Method: "GET", Path: "/v1/admin/bots?pageSize=101"}, 400, "pageSize"},
		{"pageSize text", apitest.Req{Method: "GET", Path: "/v1/admin/bots?pageSize=ten"}, 400, "pageSize"},
		{"forged nextToken", apitest.Req{Method: "GET", Path: "/v1/admin/bots?nextToken=eyJwayI6IkJPVCMxIn0.AAAA"}, 400, "nextToken"},
		{"garbage nextToken", apitest.Req{Method: "GET", Path: "/v1/admin/bots?nextToken=%00%01"}, 400, "nextToken"},
		{"bad sortField", apitest.Req{Method: "GET", Path: "/v1/admin/bots?sortField=name"}, 400, "sortField"},
		{"bad dev", apitest.Req{Method: "GET", Path: "/v1/admin/bots?dev=maybe"}, 400, "dev"},
		{"no workspace header", apitest.Req{Method: "GET", Path: "/v1/admin/bots", Headers: map[string]string{"x-workspace-id": ""}}, 400, "x-workspace-id"},
		{"unknown route", apitest.Req{Method: "GET", Path: "/v1/admin/nothing-here"}, 405, "the operation does not exist"},
		{"wrong method", apitest.Req{Method: "PATCH", Path: "/v1/admin/bots"}, 405, "the operation does not exist"},
		{"text content type", apitest.Req{Method: "POST", Path: "/v1/admin/bots", Body: `{}`, Headers: map[string]string{"Content-Type": "text/plain"}}, 415, "content type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Token = tok
			h := map[string]string{}
			for k, v := range hdr {
				h[k] = v
			}
			for k, v := range tc.req.Headers {
				h[k] = v
			}
			tc.req.Headers = h
			r := f.Do(tc.req)
			if r.Status != tc.status || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Raw, tc.status, tc.want)
			}
		})
	}
	if n := len(f.Check(f.ws_(tok, "GET", "/v1/admin/bots", nil), 200, "listBots").List("bots")); n != 0 {
		t.Fatalf("refused requests wrote %d bots", n)
	}
	if n := len(f.Check(f.ws_(tok, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members")); n != 1 {
		t.Fatalf("refused requests wrote members: %d", n)
	}
}

func TestPagination(t *testing.T) {
	f := newFixture(t)
	for i := 0; i < 25; i++ {
		f.createBot(f.AdminToken, map[string]any{"name": fmt.Sprintf("b%02d", i)})
	}
	seen := map[string]bool{}
	var names []string
	next := ""
	pages := 0
	for {
		path := "/v1/admin/bots?pageSize=10&sortDirection=asc"
		if next != "" {
			path += "&nextToken=" + url.QueryEscape(next)
		}
		r := f.Check(f.ws_(f.AdminToken, "GET", path, nil), 200, "listBots")
		pages++
		for _, b := range r.List("bots") {
			m := b.(map[string]any)
			seen[m["id"].(string)] = true
			names = append(names, m["name"].(string))
		}
		next = r.Str("meta.nextToken")
		if next == "" {
			break
		}
		// A token continues only its own list: not another sort order or workspace.
		if r := f.ws_(f.AdminToken, "GET", "/v1/admin/bots?pageSize=10&sortDirection=desc&nextToken="+url.QueryEscape(next), nil); r.Status != 400 {
			t.Fatalf("token reused on another list: %d", r.Status)
		}
		tampered := next[:len(next)-2] + "AA"
		if r := f.ws_(f.AdminToken, "GET", "/v1/admin/bots?pageSize=10&sortDirection=asc&nextToken="+url.QueryEscape(tampered), nil); r.Status != 400 {
			t.Fatalf("tampered token: %d", r.Status)
		}
	}
	if len(seen) != 25 || pages != 3 {
		t.Fatalf("paged %d bots in %d pages", len(seen), pages)
	}
	for i, n := range names {
		if n != fmt.Sprintf("b%02d", i) {
			t.Fatalf("ascending order broken at %d: %v", i, names)
		}
	}
	// Default page size is 20, newest first.
	r := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots", nil), 200, "listBots")
	if l := r.List("bots"); len(l) != 20 || l[0].(map[string]any)["name"] != "b24" {
		t.Fatalf("default page: %d bots", len(l))
	}
}

func TestMembersAndOwnership(t *testing.T) {
	f := newFixture(t)
	adminTok, adminMember := f.invite("admin2@example.com", "administrator")
	_, devMember := f.invite("dev@example.com", "developer")
	me := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members/me", nil), 200, "getWorkspaceMember")
	ownerMember := me.Str("id")

	// Administrators manage non-owners but cannot touch owners or grant ownership.
	f.Check(f.ws_(adminTok, "PUT", "/v1/admin/workspace-members/"+devMember, map[string]any{"role": "manager"}), 200, "updateWorkspaceMember")
	f.Check(f.ws_(adminTok, "PUT", "/v1/admin/workspace-members/"+devMember, map[string]any{"role": "owner"}), 403, "")
	f.Check(f.ws_(adminTok, "PUT", "/v1/admin/workspace-members/"+ownerMember, map[string]any{"role": "viewer"}), 403, "")
	f.Check(f.ws_(adminTok, "DELETE", "/v1/admin/workspace-members/"+ownerMember, nil), 403, "")
	f.Check(f.ws_(adminTok, "POST", "/v1/admin/workspace-members", map[string]any{"email": "o@example.com", "role": "owner"}), 403, "")
	// Adding an existing member again is a conflict.
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/workspace-members", map[string]any{"email": "DEV@example.com", "role": "viewer"}), 409, "")

	// The last owner can be neither demoted nor removed.
	r := f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+ownerMember, map[string]any{"role": "administrator"})
	if r.Status != 403 || !strings.Contains(r.Str("message"), "last owner") {
		t.Fatalf("demote last owner: %d %s", r.Status, r.Raw)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/workspace-members/"+ownerMember, nil), 403, "")

	// Any member may leave.
	viewerTok, viewerMember := f.invite("leaver@example.com", "viewer")
	f.Check(f.ws_(viewerTok, "DELETE", "/v1/admin/workspace-members/"+viewerMember, nil), 200, "deleteWorkspaceMember")
	f.Check(f.ws_(viewerTok, "GET", "/v1/admin/workspace-members/me", nil), 404, "")

	// With two owners, one may go; concurrently, never both.
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+adminMember, map[string]any{"role": "owner"}), 200, "updateWorkspaceMember")
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, id := range []string{ownerMember, adminMember} {
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			statuses[i] = f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+id, map[string]any{"role": "developer"}).Status
		}(i, id)
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		if s == 200 {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("concurrent demotion of both owners: statuses %v, want exactly one 200", statuses)
	}
	list := f.Check(f.ws_(adminTok, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers")
	owners := 0
	for _, m := range list.List("members") {
		if m.(map[string]any)["role"] == "owner" {
			owners++
		}
	}
	if owners != 1 {
		t.Fatalf("owners after concurrent demotion: %d", owners)
	}

}

func TestConcurrentBotCreationCountsExactly(t *testing.T) {
	f := newFixture(t)
	const n = 20
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.createBot(f.AdminToken, nil)
		}()
	}
	wg.Wait()
	w := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws, Token: f.AdminToken}), 200, "getWorkspace")
	if w.Body["botCount"] != float64(n) {
		t.Fatalf("botCount %v after %d concurrent creates", w.Body["botCount"], n)
	}
}

// TestRefusedTransactionLeavesDataIntact: a write refused by a failed
// condition (here adding an existing member) changes nothing, and later reads
// and lists of the same table keep working.
func TestRefusedTransactionLeavesDataIntact(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, map[string]any{"recurringEvents": map[string]any{
		"tick": map[string]any{"schedule": map[string]any{"cron": "*/5 * * * *"}, "type": "tick", "payload": map[string]any{}},
	}})
	f.invite("member@example.com", "viewer")
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/workspace-members", map[string]any{"email": "member@example.com", "role": "viewer"}), 409, "")
	f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+bot, nil), 200, "getBot")
	if n := len(f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots", nil), 200, "listBots").List("bots")); n != 1 {
		t.Fatalf("listBots after a refused write: %d bots", n)
	}
	if n := len(f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members")); n != 2 {
		t.Fatalf("members after a refused write: %d", n)
	}
}

// TestRefusedInvitationWritesNothing: an invitation refused with a 400 has
// written no account, membership or token, so retrying it is refused the
// same way (not a 409), and the member list is unchanged.
func TestRefusedInvitationWritesNothing(t *testing.T) {
	f := newFixture(t)
	for _, email := range []string{"evil/x@test.local", `back\slash@test.local`, ".dot@test.local", "a..b@test.local", "x@-host.local", "x@host..local"} {
		for try := 1; try <= 2; try++ {
			r := f.ws_(f.AdminToken, "POST", "/v1/admin/workspace-members", map[string]any{"email": email, "role": "viewer"})
			if r.Status != 400 || !strings.Contains(r.Str("message"), "email") {
				t.Fatalf("%s, try %d: got %d %s, want 400 about the email", email, try, r.Status, r.Raw)
			}
		}
	}
	if n := len(f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members")); n != 1 {
		t.Fatalf("refused invitations wrote members: %d", n)
	}
	// A plain address is accepted once; inviting it again is the 409.
	f.invite("plain.name+tag@test.local", "viewer")
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/workspace-members", map[string]any{"email": "Plain.Name+Tag@test.local", "role": "viewer"}), 409, "")
}
