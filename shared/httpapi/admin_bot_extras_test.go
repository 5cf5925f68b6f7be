package httpapi_test

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// withoutTimes is a bot's JSON without its update and deployment times.
func withoutTimes(b map[string]any) string {
	c := map[string]any{}
	for k, v := range b {
		if k != "updatedAt" && k != "deployedAt" {
			c[k] = v
		}
	}
	return jsonOf(c)
}

// TestBotJSONRoundTripAndVersions: a bot exported (getBotJson) then
// re-imported (publishFromBotJson) is the same bot; a version is a
// snapshot of the definition that deployBotVersion makes current again.
func TestBotJSONRoundTripAndVersions(t *testing.T) {
	f := newSyncFixture(t, map[string]any{
		"name": "Helper", "description": "Helps", "tags": map[string]string{"team": "a"},
		"states":  map[string]any{"s": map[string]any{"type": "conversation", "schema": map[string]any{"type": "object"}}},
		"events":  map[string]any{"e": map[string]any{"schema": map[string]any{}}},
		"actions": map[string]any{"act": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"user":    map[string]any{"tags": map[string]any{"email": map[string]any{"title": "Email"}}},
		"code":    "exports.handler = () => 'v1'",
	})
	tok := f.AdminToken
	f.updateBot(tok, f.bot, map[string]any{
		"recurringEvents": map[string]any{"daily": map[string]any{"schedule": map[string]any{"cron": "0 9 * * *"}, "type": "tick", "payload": map[string]any{"n": 1}}},
		"configuration":   map[string]any{"data": map[string]any{"lang": "en"}},
		"secrets":         map[string]any{"API_KEY": "s3cret"},
	})
	original := f.getBot(f.bot, "x-multiple-integrations", "true")

	j := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/bot-json", nil), 200, "getBotJson")
	if j.Str("format") != "botforge.bot/v1" || j.Str("code") != "exports.handler = () => 'v1'" || strings.Contains(string(j.Raw), "s3cret") {
		t.Fatalf("bot json: %s", j.Raw)
	}
	// A version of it, then the bot changes completely.
	v := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+f.bot+"/versions", map[string]any{"name": "v1", "description": "first"}), 200, "createBotVersion")
	vid := v.Str("version.id")
	f.updateBot(tok, f.bot, map[string]any{
		"name": "Changed", "tags": map[string]string{"team": "", "other": "b"}, "states": map[string]any{"s": nil, "t": map[string]any{"type": "user", "schema": map[string]any{}}},
		"integrations": map[string]any{"main": nil}, "recurringEvents": map[string]any{"daily": nil}, "code": "exports.handler = () => 'v2'",
	})
	if b := f.getBot(f.bot, "x-multiple-integrations", "true"); b["name"] != "Changed" || len(b["integrations"].(map[string]any)) != 0 {
		t.Fatalf("changed: %v", b)
	}
	// Re-import the export: the same bot as before (its integration installed
	// again, registered), bar the times.
	f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+f.bot+"/publish-from-bot-json", map[string]any{"botJson": j.Body}), 200, "publishFromBotJson")
	back := f.getBot(f.bot, "x-multiple-integrations", "true")
	strip := func(b map[string]any) map[string]any {
		c := map[string]any{}
		for k, v := range b {
			c[k] = v
		}
		// The installation is new (another webhook, created now).
		ints := map[string]any{}
		for alias, raw := range b["integrations"].(map[string]any) {
			in := map[string]any{}
			for k, v := range raw.(map[string]any) {
				if k != "webhookId" && k != "webhookUrl" && k != "createdAt" && k != "updatedAt" {
					in[k] = v
				}
			}
			ints[alias] = in
		}
		c["integrations"] = ints
		return c
	}
	if a, b := withoutTimes(strip(original)), withoutTimes(strip(back)); a != b {
		t.Fatalf("round trip differs:\n%s\n%s", a, b)
	}
	if again := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/bot-json", nil), 200, "getBotJson"); jsonOf(again.Body) != jsonOf(j.Body) {
		t.Fatalf("export after import differs:\n%s\n%s", j.Raw, again.Raw)
	}

	// Versions: listed, found, deployed.
	f.updateBot(tok, f.bot, map[string]any{"name": "Later", "code": "exports.handler = () => 'v3'"})
	l := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/versions", nil), 200, "listBotVersions")
	if vs := l.List("versions"); len(vs) != 1 || vs[0].(map[string]any)["id"] != vid || vs[0].(map[string]any)["description"] != "first" {
		t.Fatalf("versions: %s", l.Raw)
	}
	g := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/versions/"+vid, nil), 200, "getBotVersion")
	u, err := url.Parse(g.Str("url"))
	if err != nil {
		t.Fatal(err)
	}
	snap := f.Check(f.ws_(tok, "GET", u.RequestURI(), nil), 200, "getBotJson")
	if snap.Str("name") != "Helper" || snap.Str("code") != "exports.handler = () => 'v1'" {
		t.Fatalf("version snapshot: %s", snap.Raw)
	}
	f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+f.bot+"/versions/deploy", map[string]any{"versionId": vid}), 200, "deployBotVersion")
	if b := f.getBot(f.bot); b["name"] != "Helper" {
		t.Fatalf("deployed version: %v", b)
	}
	if c := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/bot-json", nil), 200, "getBotJson"); c.Str("code") != "exports.handler = () => 'v1'" {
		t.Fatalf("deployed code: %s", c.Raw)
	}

	// Bad input writes nothing.
	other := newFixtureOn(f.fixture)
	foreignBot := other.createBot(tok, map[string]any{})
	viewer, _ := f.invite("versions-viewer@example.com", "viewer")
	items, objects := f.stored()
	for _, tc := range []struct {
		name   string
		req    apitest.Req
		status int
	}{
		{"version without name", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/versions", Body: map[string]any{"description": "x"}}, 400},
		{"version with blank name", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/versions", Body: map[string]any{"name": "  "}}, 400},
		{"version of a foreign bot", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + foreignBot + "/versions", Body: map[string]any{"name": "x"}}, 404},
		{"version by a viewer", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/versions", Body: map[string]any{"name": "x"}, Token: viewer}, 403},
		{"deploy of an unknown version", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/versions/deploy", Body: map[string]any{"versionId": "botver_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}, 404},
		{"get of an unknown version", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + f.bot + "/versions/nope"}, 404},
		{"bot json without botJson", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{}}, 400},
		{"bot json of another format", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"format": "studio/v9"}}}, 400},
		{"bot json with an unknown field", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"nope": 1}}}, 400},
		{"bot json with subscriptions updateBot refuses", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"subscriptions": "x"}}}, 400},
		{"bot json with an action updateBot refuses", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"actions": map[string]any{"a": "x"}}}}, 400},
		{"bot json with an event updateBot refuses", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"events": map[string]any{"e": []int{1}}}}}, 400},
		{"bot json with a garbage configuration", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"configuration": "garbage"}}}, 400},
		{"bot json with a configuration schema not an object", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"configuration": map[string]any{"schema": 7}}}}, 400},
		{"bot json with a missing integration", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"integrations": map[string]any{"x": map[string]any{"integrationId": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ", "enabled": true}}}}}, 400},
		{"bot json with a bad state", apitest.Req{Method: "POST", Path: "/v1/admin/bots/" + f.bot + "/publish-from-bot-json", Body: map[string]any{"botJson": map[string]any{"recurringEvents": map[string]any{"r": map[string]any{"schedule": map[string]any{"cron": "nope"}, "type": "t", "payload": map[string]any{}}}}}}, 400},
		{"bot json of a foreign bot", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + foreignBot + "/bot-json"}, 404},
		{"bot json by a viewer", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + f.bot + "/bot-json", Token: viewer}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Token == "" {
				tc.req.Token = tok
			}
			tc.req.Headers = map[string]string{"x-workspace-id": f.ws}
			if r := f.Do(tc.req); r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	if i, o := f.stored(); i != items || o != objects {
		t.Fatalf("refused requests wrote: items %d -> %d, objects %d -> %d", items, i, objects, o)
	}
}

// TestTransferBot: the bot, its keys, its data and its operations move to
// the target workspace and leave the source; the caller must administer
// both; a foreign or unknown target is 404; a private integration of the
// source refuses the move; concurrent transfers leave one owner.
func TestTransferBot(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	target := newFixtureOn(f)
	bot := f.createBot(tok, map[string]any{"name": "Mover"})
	bak := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	chat := func(token string) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: token, Body: map[string]any{"tags": map[string]any{}}, Headers: map[string]string{"x-bot-id": bot}})
	}
	user := f.Check(chat(tok), 201, "createUser").Str("user.id")
	f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/versions", map[string]any{"name": "v1"}), 200, "createBotVersion")
	f.Check(f.ws_(tok, "PUT", "/v1/admin/bots/"+bot+"/allowlist", map[string]any{"setting": "SELECTED_USERS"}), 200, "updateBotAllowlist")

	// Not an administrator of the target: refused.
	dev, _ := f.invite("mover-dev@example.com", "administrator")
	f.Check(target.ws_(tok, "POST", "/v1/admin/workspace-members", map[string]any{"email": "mover-dev@example.com", "role": "developer"}), 200, "createWorkspaceMember")
	if r := f.ws_(dev, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": target.ws}); r.Status != 403 {
		t.Fatalf("developer of the target: %d %s", r.Status, r.Raw)
	}
	// A developer of the source: refused.
	srcDev, _ := f.invite("src-dev@example.com", "developer")
	if r := f.ws_(srcDev, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": target.ws}); r.Status != 403 {
		t.Fatalf("developer of the source: %d %s", r.Status, r.Raw)
	}
	// A workspace the caller is not in, an unknown one, the same one.
	foreignTok, _ := newFixtureOn(f).invite("stranger@example.com", "owner")
	foreignWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: foreignTok, Body: map[string]any{"name": "Theirs"}}), 200, "createWorkspace").Str("id")
	items, _ := f.stored()
	for _, to := range []string{foreignWs, "wkspace_01JZZZZZZZZZZZZZZZZZZZZZZZ", "nope-nope-nope-nope-nope-nope"} {
		if r := f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": to}); r.Status != 404 {
			t.Fatalf("transfer to %s: %d %s", to, r.Status, r.Raw)
		}
	}
	f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": f.ws}), 400, "")
	f.Check(f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{}), 400, "")
	// A private integration of the source installed on the bot.
	intID := f.createIntegration(tok, integrationDef("privint", "1.0.0", nil)).Str("integration.id")
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"p": map[string]any{"integrationId": intID}}})
	if r := f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": target.ws}); r.Status != 409 || !strings.Contains(r.Str("message"), "private") {
		t.Fatalf("private integration: %d %s", r.Status, r.Raw)
	}
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"p": nil}})
	ops := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/integration-operations", nil), 200, "").List("operations")
	if len(ops) == 0 {
		t.Fatal("no operation recorded for the install")
	}
	opID := ops[0].(map[string]any)["id"].(string)
	if i, _ := f.stored(); i < items {
		t.Fatalf("items lost: %d -> %d", items, i)
	}

	// Concurrent transfers to two targets: exactly one wins.
	third := newFixtureOn(f)
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for n, to := range []string{target.ws, third.ws} {
		wg.Add(1)
		go func(n int, to string) {
			defer wg.Done()
			statuses[n] = f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": to}).Status
		}(n, to)
	}
	wg.Wait()
	wins := 0
	for _, s := range statuses {
		if s == 200 {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("concurrent transfers: %v", statuses)
	}
	now := target
	if statuses[0] != 200 {
		now = third
	}
	countOf := func(fx *fixture) float64 {
		return fx.Check(fx.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + fx.ws, Token: tok}), 200, "getWorkspace").Body["botCount"].(float64)
	}
	if countOf(f) != 0 || countOf(now) != 1 {
		t.Fatalf("bot counts: source %v, target %v", countOf(f), countOf(now))
	}
	// Reachable under the new workspace, not the old.
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot, nil), 404, "")
	now.Check(now.ws_(tok, "GET", "/v1/admin/bots/"+bot, nil), 200, "getBot")
	if l := now.Check(now.ws_(tok, "GET", "/v1/admin/bots", nil), 200, "listBots").List("bots"); len(l) != 1 {
		t.Fatalf("target lists %d bots", len(l))
	}
	if l := f.Check(f.ws_(tok, "GET", "/v1/admin/bots", nil), 200, "listBots").List("bots"); len(l) != 0 {
		t.Fatalf("source lists %d bots", len(l))
	}
	for _, path := range []string{"/versions", "/issues", "/logs?timeStart=2026-01-01T00:00:00.000Z", "/action-runs?integrationName=x", "/integration-operations"} {
		if r := f.ws_(tok, "GET", "/v1/admin/bots/"+bot+path, nil); r.Status != 404 {
			t.Errorf("source %s: %d", path, r.Status)
		}
		if r := now.ws_(tok, "GET", "/v1/admin/bots/"+bot+path, nil); r.Status != 200 {
			t.Errorf("target %s: %d %s", path, r.Status, r.Raw)
		}
	}
	// The ledger's operations are read through the bot's workspace now.
	f.Check(f.ws_(tok, "GET", "/v1/admin/integration-operations/"+opID, nil), 404, "")
	now.Check(now.ws_(tok, "GET", "/v1/admin/integration-operations/"+opID, nil), 200, "")
	if vs := now.Check(now.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/versions", nil), 200, "listBotVersions").List("versions"); len(vs) != 1 {
		t.Fatalf("versions after transfer: %v", vs)
	}
	if a := now.Check(now.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot + "/allowlist", Token: tok, Headers: map[string]string{"x-workspace-id": now.ws}}), 200, "getBotAllowlist"); a.Str("setting") != "SELECTED_USERS" {
		t.Fatalf("allowlist after transfer: %s", a.Raw)
	}
	// Its data (chat) and its key keep working, now in the new workspace.
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/users/" + user, Token: tok, Headers: map[string]string{"x-bot-id": bot}}), 200, "getUser")
	f.Check(chat(bak), 201, "createUser")
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: bak, Headers: map[string]string{"x-workspace-id": f.ws}}); r.Status != 404 {
		t.Fatalf("key through the old workspace: %d", r.Status)
	}
	now.Check(now.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot, Token: bak, Headers: map[string]string{"x-workspace-id": now.ws}}), 200, "getBot")
	keys := now.Check(now.ws_(tok, "GET", "/v1/admin/bots/baks?botId="+bot, nil), 200, "listBotApiKeys").List("baks")
	if len(keys) != 1 {
		t.Fatalf("keys after transfer: %v", keys)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/baks?botId="+bot, nil), 404, "")
	// The old workspace can now be deleted; the new one cannot while the bot is there.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+intID, nil), 200, "deleteIntegration")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + f.ws, Token: tok}), 200, "deleteWorkspace")
	if r := f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + now.ws, Token: tok}); r.Status != 409 {
		t.Fatalf("delete of the target with the bot: %d %s", r.Status, r.Raw)
	}
}

// TestBotAllowlist: the default, partial updates, members only, roles,
// tenancy.
func TestBotAllowlist(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	bot := f.createBot(tok, map[string]any{})
	path := "/v1/admin/bots/" + bot + "/allowlist"
	if a := f.Check(f.ws_(tok, "GET", path, nil), 200, "getBotAllowlist"); a.Str("setting") != "ALL_WORKSPACE_USERS" || len(a.List("users")) != 0 {
		t.Fatalf("default: %s", a.Raw)
	}
	devTok, _ := f.invite("allow-dev@example.com", "developer")
	viewerTok, _ := f.invite("allow-viewer@example.com", "viewer")
	me := f.Check(f.ws_(tok, "GET", "/v1/admin/workspace-members/me", nil), 200, "getWorkspaceMember").Str("userId")
	dev := f.Check(f.ws_(devTok, "GET", "/v1/admin/workspace-members/me", nil), 200, "getWorkspaceMember").Str("userId")
	f.Check(f.ws_(tok, "PUT", path, map[string]any{"setting": "SELECTED_USERS", "users": map[string]bool{me: true, dev: true}}), 200, "updateBotAllowlist")
	f.Check(f.ws_(tok, "PUT", path, map[string]any{"users": map[string]bool{dev: false}}), 200, "updateBotAllowlist")
	a := f.Check(f.ws_(viewerTok, "GET", path, nil), 200, "getBotAllowlist")
	if a.Str("setting") != "SELECTED_USERS" || jsonOf(a.Body["users"]) != fmt.Sprintf(`[{"id":%q}]`, me) {
		t.Fatalf("after updates: %s", a.Raw)
	}
	other := newFixtureOn(f)
	foreignBot := other.createBot(tok, map[string]any{})
	outsider, _ := other.invite("allow-outsider@example.com", "owner")
	outsiderID := other.Check(other.ws_(outsider, "GET", "/v1/admin/workspace-members/me", nil), 200, "getWorkspaceMember").Str("userId")
	items, _ := f.stored()
	for _, tc := range []struct {
		name   string
		token  string
		path   string
		body   any
		status int
	}{
		{"not a member", tok, path, map[string]any{"users": map[string]bool{outsiderID: true}}, 400},
		{"unknown user", tok, path, map[string]any{"users": map[string]bool{"00000000-0000-0000-0000-000000000000": true}}, 400},
		{"bad setting", tok, path, map[string]any{"setting": "EVERYONE"}, 400},
		{"not a boolean", tok, path, map[string]any{"users": map[string]any{me: "yes"}}, 400},
		{"developer", devTok, path, map[string]any{"setting": "ALL_WORKSPACE_USERS"}, 403},
		{"foreign bot", tok, "/v1/admin/bots/" + foreignBot + "/allowlist", map[string]any{"setting": "ALL_WORKSPACE_USERS"}, 404},
		{"unknown bot", tok, "/v1/admin/bots/bot_01JZZZZZZZZZZZZZZZZZZZZZZZ/allowlist", map[string]any{"setting": "ALL_WORKSPACE_USERS"}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := f.ws_(tc.token, "PUT", tc.path, tc.body); r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	if i, _ := f.stored(); i != items {
		t.Fatalf("refused updates wrote items: %d -> %d", items, i)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+foreignBot+"/allowlist", nil), 404, "")
}

// TestShareableIDsAndSandbox: one id per installation, kept until deleted;
// unknown installations 404; unlinkSandboxedConversations answers for an
// installation.
func TestShareableIDsAndSandbox(t *testing.T) {
	f := newSyncFixture(t, nil)
	tok := f.AdminToken
	base := "/v1/admin/bots/" + f.bot + "/integrations/" + f.intID
	f.Check(f.ws_(tok, "GET", base+"/shareable-id", nil), 404, "")
	c := f.Check(f.ws_(tok, "POST", base+"/shareable-id", map[string]any{}), 200, "createIntegrationShareableId")
	id := c.Str("shareableId")
	if !strings.HasPrefix(id, "main-") {
		t.Fatalf("shareable id %q", id)
	}
	if again := f.Check(f.ws_(tok, "POST", base+"/shareable-id?integrationInstanceAlias=main", map[string]any{}), 200, "createIntegrationShareableId"); again.Str("shareableId") != id {
		t.Fatalf("a second create: %s", again.Raw)
	}
	g := f.Check(f.ws_(tok, "GET", base+"/shareable-id", nil), 200, "getIntegrationShareableId")
	if g.Str("shareableId") != id || g.Body["isExpired"] != false {
		t.Fatalf("get: %s", g.Raw)
	}
	f.Check(f.ws_(tok, "DELETE", base+"/sandboxed-conversations", nil), 200, "unlinkSandboxedConversations")
	f.Check(f.ws_(tok, "DELETE", base+"/shareable-id", nil), 200, "deleteIntegrationShareableId")
	f.Check(f.ws_(tok, "GET", base+"/shareable-id", nil), 404, "")
	if n := f.Check(f.ws_(tok, "POST", base+"/shareable-id", map[string]any{}), 200, "createIntegrationShareableId").Str("shareableId"); n == id {
		t.Fatal("a deleted id came back")
	}
	other := newFixtureOn(f.fixture)
	foreignBot := other.createBot(tok, map[string]any{})
	viewer, _ := f.invite("share-viewer@example.com", "viewer")
	items, _ := f.stored()
	for _, tc := range []struct {
		name, method, path, token string
		status                    int
	}{
		{"unknown integration", "POST", "/v1/admin/bots/" + f.bot + "/integrations/intver_01JZZZZZZZZZZZZZZZZZZZZZZZ/shareable-id", tok, 404},
		{"unknown alias", "POST", base + "/shareable-id?integrationInstanceAlias=nope", tok, 404},
		{"foreign bot", "POST", "/v1/admin/bots/" + foreignBot + "/integrations/" + f.intID + "/shareable-id", tok, 404},
		{"viewer creates", "POST", base + "/shareable-id", viewer, 403},
		{"viewer deletes", "DELETE", base + "/shareable-id", viewer, 403},
		{"unlink of an unknown integration", "DELETE", "/v1/admin/bots/" + f.bot + "/integrations/intver_01JZZZZZZZZZZZZZZZZZZZZZZZ/sandboxed-conversations", tok, 404},
		{"unlink on a foreign bot", "DELETE", "/v1/admin/bots/" + foreignBot + "/integrations/" + f.intID + "/sandboxed-conversations", tok, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.method == "POST" {
				body = map[string]any{}
			}
			if r := f.ws_(tc.token, tc.method, tc.path, body); r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	if i, _ := f.stored(); i != items {
		t.Fatalf("refused requests wrote items: %d -> %d", items, i)
	}
	f.Check(f.ws_(viewer, "GET", base+"/shareable-id", nil), 200, "getIntegrationShareableId")
}

// TestListActionRuns: every callAction to an integration is recorded
// (success or failure, input, output, timing); listed newest first per
// installation, filtered by time, page by page.
func TestListActionRuns(t *testing.T) {
	f := newSyncFixture(t, nil)
	tok := f.AdminToken
	call := func(input map[string]any) apitest.Response {
		return f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "main:sendReminder", "input": input})
	}
	start := time.Now().UTC()
	for i := 0; i < 3; i++ {
		f.Check(call(map[string]any{"n": i}), 200, "callAction")
	}
	if r := call(map[string]any{"refuse": true}); r.Status < 400 {
		t.Fatalf("refused action: %d", r.Status)
	}
	path := "/v1/admin/bots/" + f.bot + "/action-runs?integrationName=main"
	l := f.Check(f.ws_(tok, "GET", path, nil), 200, "listActionRuns")
	runs := l.List("data")
	if len(runs) != 4 {
		t.Fatalf("runs: %s", l.Raw)
	}
	first, last := runs[0].(map[string]any), runs[3].(map[string]any)
	if first["status"] != "FAILURE" || !strings.Contains(fmt.Sprint(first["errorMessage"]), "no such ticket") || first["output"] != nil {
		t.Fatalf("newest run: %v", first)
	}
	if last["status"] != "SUCCESS" || last["actionType"] != "sendReminder" || last["integrationName"] != "main" || last["cached"] != false ||
		jsonOf(last["input"]) != `{"n":0}` || last["output"].(map[string]any)["type"] != "sendReminder" {
		t.Fatalf("oldest run: %v", last)
	}
	// Pages.
	var seen int
	next := ""
	for i := 0; i < 5; i++ {
		r := f.Check(f.ws_(tok, "GET", path+"&pageSize=3"+next, nil), 200, "listActionRuns")
		seen += len(r.List("data"))
		n, _ := r.Body["meta"].(map[string]any)["nextToken"].(string)
		if n == "" {
			break
		}
		next = "&nextToken=" + url.QueryEscape(n)
	}
	if seen != 4 {
		t.Fatalf("pages saw %d runs", seen)
	}
	// Time filters.
	ts := runs[1].(map[string]any)["timestamp"].(string)
	if n := len(f.Check(f.ws_(tok, "GET", path+"&timestampUntil="+url.QueryEscape(ts), nil), 200, "listActionRuns").List("data")); n != 3 {
		t.Fatalf("until %s: %d runs", ts, n)
	}
	if n := len(f.Check(f.ws_(tok, "GET", path+"&timestampFrom="+url.QueryEscape(ts), nil), 200, "listActionRuns").List("data")); n != 2 {
		t.Fatalf("from %s: %d runs", ts, n)
	}
	future := start.Add(time.Hour).Format(time.RFC3339)
	if n := len(f.Check(f.ws_(tok, "GET", path+"&timestampFrom="+url.QueryEscape(future), nil), 200, "listActionRuns").List("data")); n != 0 {
		t.Fatalf("from the future: %d runs", n)
	}
	if n := len(f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+f.bot+"/action-runs?integrationName=other", nil), 200, "listActionRuns").List("data")); n != 0 {
		t.Fatalf("another alias: %d runs", n)
	}
	other := newFixtureOn(f.fixture)
	for _, tc := range []struct {
		name   string
		fx     *fixture
		path   string
		status int
	}{
		{"no integrationName", f.fixture, "/v1/admin/bots/" + f.bot + "/action-runs", 400},
		{"bad timestamp", f.fixture, path + "&timestampFrom=yesterday", 400},
		{"from after until", f.fixture, path + "&timestampFrom=2026-02-01T00:00:00Z&timestampUntil=2026-01-01T00:00:00Z", 400},
		{"bad page size", f.fixture, path + "&pageSize=0", 400},
		{"foreign workspace", other, path, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := tc.fx.ws_(tok, "GET", tc.path, nil); r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	// A deleted bot's runs go with its data.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+f.bot, nil), 200, "deleteBot")
	f.Platform.Sweeper.Run(t.Context())
	if held := f.ItemsHolding("ACTRUN#" + f.bot); len(held) > 0 {
		t.Fatalf("runs left after the bot's deletion: %v", held)
	}
}

// TestTransferBotWithKeysMadeMeanwhile: API keys created while the bot is
// being transferred all end in the workspace that owns the bot after it:
// the new owner lists and revokes every one, the old workspace none.
func TestTransferBotWithKeysMadeMeanwhile(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	target := newFixtureOn(f)
	for round := range 3 {
		bot := f.createBot(tok, map[string]any{})
		var wg sync.WaitGroup
		transferred := make(chan int, 1)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 4 {
					for {
						r := f.ws_(tok, "POST", "/v1/admin/bots/"+bot+"/transfer", map[string]any{"targetWorkspaceId": target.ws})
						if r.Status != 409 { // retried when the bot changed meanwhile
							transferred <- r.Status
							return
						}
					}
				}
				f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}) // 200 before, 404 after
			}()
		}
		wg.Wait()
		if st := <-transferred; st != 200 {
			t.Fatalf("round %d: transfer %d", round, st)
		}
		// Both workspaces' audit records tell of the transfer.
		for _, ws := range []string{f.ws, target.ws} {
			recs := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + ws + "/audit-records", Token: tok}), 200, "getAuditRecords").List("records")
			found := false
			for _, r := range recs {
				m := r.(map[string]any)
				found = found || (m["action"] == "TRANSFER_BOT" && m["resourceId"] == bot)
			}
			if !found {
				t.Fatalf("round %d: no TRANSFER_BOT record of %s in workspace %s", round, bot, ws)
			}
		}
		keys := target.Check(target.ws_(tok, "GET", "/v1/admin/bots/baks?botId="+bot, nil), 200, "listBotApiKeys").List("baks")
		for _, k := range keys {
			id := k.(map[string]any)["id"].(string)
			if r := f.ws_(tok, "DELETE", "/v1/admin/bots/baks/"+id, nil); r.Status != 404 {
				t.Fatalf("round %d: the old workspace revoked key %s: %d", round, id, r.Status)
			}
			target.Check(target.ws_(tok, "DELETE", "/v1/admin/bots/baks/"+id, nil), 200, "deleteBotApiKey")
		}
	}
}
