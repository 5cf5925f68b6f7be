package httpapi_test

import (
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestUpdateAccount: updateAccount changes the profile getAccount answers;
// bad input is a 400 that changes nothing; a bot key is refused.
func TestUpdateAccount(t *testing.T) {
	f := newFixture(t)
	tok, _ := f.invite("dev@example.com", "developer")
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	put := func(token string, body any) apitest.Response {
		return f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/account/me", Token: token, Body: body})
	}
	r := f.Check(put(tok, map[string]any{"displayName": "Dee", "profilePicture": "https://example.com/p.png", "refresh": true}), 200, "updateAccount")
	if r.Str("account.displayName") != "Dee" || r.Str("account.email") != "dev@example.com" {
		t.Fatalf("updateAccount: %s", r.Raw)
	}
	for _, bad := range []struct {
		name   string
		token  string
		body   any
		status int
	}{
		{"displayName too long", tok, map[string]any{"displayName": strings.Repeat("x", 101)}, 400},
		{"unknown field", tok, map[string]any{"email": "x@example.com"}, 400},
		{"displayName not a string", tok, map[string]any{"displayName": 3}, 400},
		{"bot key", key, map[string]any{"displayName": "bot"}, 403},
	} {
		r := put(bad.token, bad.body)
		if r.Status != bad.status {
			t.Fatalf("updateAccount %s: %d %s, want %d", bad.name, r.Status, r.Raw, bad.status)
		}
		checkError(t, r)
	}
	got := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: tok}), 200, "getAccount")
	if got.Str("account.displayName") != "Dee" || got.Str("account.profilePicture") != "https://example.com/p.png" || got.Str("account.email") != "dev@example.com" {
		t.Fatalf("getAccount after updates: %s", got.Raw)
	}
}

// TestDeleteAccount: deleting an account removes its memberships and its
// tokens (they stop authenticating) and frees its email; it is refused,
// with nothing written, while the account is the last owner of a
// workspace.
func TestDeleteAccount(t *testing.T) {
	f := newFixture(t)
	tok, memberID := f.invite("leaver@example.com", "developer")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/pats", Token: tok, Body: map[string]any{"note": "second"}}), 200, "createPersonalAccessToken")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/preferences/theme", Token: tok, Body: map[string]any{"value": "dark"}}), 200, "setAccountPreference")
	// The leaver owns a workspace of its own: deleting is refused.
	own := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Mine"}}), 200, "createWorkspace").Str("id")
	del := func(token string) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/me", Token: token, Body: map[string]any{}})
	}
	r := del(tok)
	if r.Status != 403 || !strings.Contains(r.Str("message"), own) {
		t.Fatalf("deleteAccount of a last owner: %d %s, want 403 naming %s", r.Status, r.Raw, own)
	}
	checkError(t, r)
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: tok}), 200, "getAccount")
	if ms := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members"); len(ms) != 2 {
		t.Fatalf("members after a refused deletion: %d, want 2", len(ms))
	}
	// Once the workspace is gone, the account can go.
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + own, Token: tok}), 200, "deleteWorkspace")
	if r := f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/me", Token: tok, Body: map[string]any{"extra": 1}}); r.Status != 400 {
		t.Fatalf("deleteAccount with an unknown field: %d %s", r.Status, r.Raw)
	}
	accountID := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: tok}), 200, "getAccount").Str("account.id")
	f.Check(del(tok), 200, "deleteAccount")
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: tok}); r.Status != 401 {
		t.Fatalf("the deleted account's token: %d %s, want 401", r.Status, r.Raw)
	}
	if ms := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/workspace-members", nil), 200, "listWorkspaceMembers").List("members"); len(ms) != 1 {
		t.Fatalf("members after the deletion: %d, want 1", len(ms))
	}
	if left := f.ItemsHolding(memberID, accountID); len(left) != 0 {
		t.Fatalf("the deleted membership left items: %v", left)
	}
	// The email is free: inviting it again makes a new account.
	again, _ := f.invite("leaver@example.com", "viewer")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: again}), 200, "getAccount")
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/preferences/theme", Token: again}); r.Status != 404 {
		t.Fatalf("the old account's preference on the new account: %d %s, want 404", r.Status, r.Raw)
	}
}

// TestPreferences: account preferences are the caller's own; workspace
// preferences are read by members and set by administrators; values are
// any JSON; bad keys and values are 4xx with nothing written.
func TestPreferences(t *testing.T) {
	f := newFixture(t)
	viewer, _ := f.invite("viewer@example.com", "viewer")
	stranger := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: f.AdminToken, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	acct := func(token, method, key string, body any) apitest.Response {
		return f.Do(apitest.Req{Method: method, Path: "/v1/admin/account/preferences/" + key, Token: token, Body: body})
	}
	wsp := func(token, method, key string, body any) apitest.Response {
		return f.ws_(token, method, "/v1/admin/workspaces/preferences/"+key, body)
	}
	value := map[string]any{"theme": "dark", "n": 3.5, "list": []any{"a", nil}}
	f.Check(acct(f.AdminToken, "POST", "ui.settings", map[string]any{"value": value}), 200, "setAccountPreference")
	if r := f.Check(acct(f.AdminToken, "GET", "ui.settings", nil), 200, "getAccountPreference"); string(r.Raw) != `{"value":{"list":["a",null],"n":3.5,"theme":"dark"}}`+"\n" {
		t.Fatalf("getAccountPreference: %s", r.Raw)
	}
	// Another account does not see it.
	if r := acct(viewer, "GET", "ui.settings", nil); r.Status != 404 {
		t.Fatalf("another account's preference: %d %s", r.Status, r.Raw)
	}
	f.Check(wsp(f.AdminToken, "POST", "layout", map[string]any{"value": "grid"}), 200, "setWorkspacePreference")
	if r := f.Check(wsp(viewer, "GET", "layout", nil), 200, "getWorkspacePreference"); r.Str("value") != "grid" {
		t.Fatalf("getWorkspacePreference: %s", r.Raw)
	}
	// The preference of one workspace is not another's.
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/preferences/layout", Token: f.AdminToken, Headers: map[string]string{"x-workspace-id": stranger}}); r.Status != 404 {
		t.Fatalf("another workspace's preference: %d %s", r.Status, r.Raw)
	}
	for _, bad := range []struct {
		name   string
		r      apitest.Response
		status int
	}{
		{"viewer sets a workspace preference", wsp(viewer, "POST", "layout", map[string]any{"value": "list"}), 403},
		{"bad key", acct(f.AdminToken, "POST", "a%20b", map[string]any{"value": 1}), 400},
		{"long key", acct(f.AdminToken, "POST", strings.Repeat("k", 101), map[string]any{"value": 1}), 400},
		{"unknown field", acct(f.AdminToken, "POST", "ui.settings", map[string]any{"value": 1, "other": 2}), 400},
		{"too large", acct(f.AdminToken, "POST", "ui.settings", map[string]any{"value": strings.Repeat("x", 70<<10)}), 413},
		{"unknown key", acct(f.AdminToken, "GET", "never.set", nil), 404},
		{"no workspace header", f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/preferences/layout", Token: f.AdminToken}), 400},
		{"unknown workspace sub-path", f.ws_(f.AdminToken, "GET", "/v1/admin/workspaces/"+f.ws+"/nope", nil), 405},
	} {
		if bad.r.Status != bad.status {
			t.Fatalf("%s: %d %s, want %d", bad.name, bad.r.Status, bad.r.Raw, bad.status)
		}
		checkError(t, bad.r)
		if bad.status == 405 && bad.r.Str("type") != "MethodNotFound" {
			t.Fatalf("%s: %s, want MethodNotFound", bad.name, bad.r.Raw)
		}
	}
	if r := f.Check(acct(f.AdminToken, "GET", "ui.settings", nil), 200, "getAccountPreference"); !strings.Contains(string(r.Raw), `"theme":"dark"`) {
		t.Fatalf("refused writes changed the preference: %s", r.Raw)
	}
	if r := f.Check(wsp(viewer, "GET", "layout", nil), 200, "getWorkspacePreference"); r.Str("value") != "grid" {
		t.Fatalf("a refused write changed the workspace preference: %s", r.Raw)
	}
}

// TestPublicWorkspaces: a workspace made public (updateWorkspace isPublic)
// is read by any caller and listed; a private one is a 404 and unlisted;
// search filters by name; pages are signed and bounded.
func TestPublicWorkspaces(t *testing.T) {
	f := newFixture(t)
	other, _ := f.invite("other@example.com", "viewer") // any account
	mk := func(name string, public bool) string {
		id := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: f.AdminToken, Body: map[string]any{"name": name}}), 200, "createWorkspace").Str("id")
		if public {
			f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + id, Token: f.AdminToken, Body: map[string]any{"isPublic": true, "about": "we build bots"}}), 200, "updateWorkspace")
		}
		return id
	}
	alpha, beta, private := mk("Alpha Bots", true), mk("Beta Bots", true), mk("Secret", false)
	gamma := mk("Gamma", true)
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + gamma, Token: f.AdminToken, Body: map[string]any{"isPublic": false}}), 200, "updateWorkspace")

	r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + alpha + "/public", Token: other}), 200, "getPublicWorkspace")
	if r.Str("name") != "Alpha Bots" || r.Str("about") != "we build bots" {
		t.Fatalf("getPublicWorkspace: %s", r.Raw)
	}
	for _, id := range []string{private, gamma, "wkspace_01ARZ3NDEKTSV4RRFFQ69G5FAV", "nope"} {
		if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + id + "/public", Token: other}); r.Status != 404 {
			t.Fatalf("getPublicWorkspace of %s: %d %s, want 404", id, r.Status, r.Raw)
		}
	}
	names := func(r apitest.Response) []string {
		var out []string
		for _, w := range r.List("workspaces") {
			out = append(out, w.(map[string]any)["name"].(string))
		}
		return out
	}
	list := func(query string) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/public" + query, Token: other}), 200, "listPublicWorkspaces")
	}
	if got := strings.Join(names(list("")), ","); got != "Alpha Bots,Beta Bots" {
		t.Fatalf("listPublicWorkspaces: %s", got)
	}
	if got := strings.Join(names(list("?search=beta")), ","); got != "Beta Bots" {
		t.Fatalf("listPublicWorkspaces search: %s", got)
	}
	if got := strings.Join(names(list("?workspaceIds="+beta+"&workspaceIds="+private)), ","); got != "Beta Bots" {
		t.Fatalf("listPublicWorkspaces by ids: %s", got)
	}
	first := list("?pageSize=1")
	if got := names(first); len(got) != 1 || got[0] != "Alpha Bots" || first.Str("meta.nextToken") == "" {
		t.Fatalf("first page: %s", first.Raw)
	}
	second := list("?pageSize=1&nextToken=" + first.Str("meta.nextToken"))
	if got := names(second); len(got) != 1 || got[0] != "Beta Bots" {
		t.Fatalf("second page: %s", second.Raw)
	}
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/public?nextToken=forged", Token: other}); r.Status != 400 {
		t.Fatalf("forged nextToken: %d %s", r.Status, r.Raw)
	}
}

// TestDeleteAccountMany: an account with more items than one transaction
// holds (60 tokens: 120 items) is deleted in several, every token with it.
func TestDeleteAccountMany(t *testing.T) {
	f := newFixture(t)
	tok, memberID := f.invite("many@example.com", "developer")
	accountID := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: tok}), 200, "getAccount").Str("account.id")
	var tokens []string
	for i := 0; i < 60; i++ {
		tokens = append(tokens, f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/pats", Token: tok, Body: map[string]any{"note": "n"}}), 200, "createPersonalAccessToken").Str("pat.value"))
	}
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/account/me", Token: tok, Body: map[string]any{}}), 200, "deleteAccount")
	for _, v := range append(tokens, tok) {
		if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: v}); r.Status != 401 {
			t.Fatalf("a token of the deleted account: %d %s", r.Status, r.Raw)
		}
	}
	if left := f.ItemsHolding(memberID, accountID); len(left) != 0 {
		t.Fatalf("the deleted account left items: %v", left)
	}
}
