package httpapi_test

import (
	"context"
	"encoding/base64"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
)

const pluginNodeCode = "module.exports = { marker: 'PLUGIN_NODE_MARKER_7f3a' }"

func pluginDef(name, version string, extra map[string]any) map[string]any {
	d := map[string]any{
		"name": name, "version": version, "title": "Title of " + name, "description": "Reminds",
		"code": map[string]any{"node": pluginNodeCode, "browser": "export default {}"},
		"configuration": map[string]any{"schema": map[string]any{
			"type": "object", "properties": map[string]any{"every": map[string]any{"type": "string"}},
		}},
		"states":       map[string]any{"last": map[string]any{"type": "bot", "schema": map[string]any{}}},
		"events":       map[string]any{"reminded": map[string]any{"schema": map[string]any{}}},
		"actions":      map[string]any{"remind": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"user":         map[string]any{"tags": map[string]any{"tz": map[string]any{"title": "Time zone"}}},
		"conversation": map[string]any{"tags": map[string]any{}},
		"attributes":   map[string]any{"kind": "reminders"},
		"sdkVersion":   "4.0.0",
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

func (f *fixture) createPlugin(token string, body map[string]any) apitest.Response {
	f.T.Helper()
	return f.Check(f.ws_(token, "POST", "/v1/admin/plugins", body), 200, "createPlugin")
}

// stored counts what the platform holds: DynamoDB items (a Scan, as only a
// test may) and file storage objects (files under the data dir's s3/).
func (f *fixture) stored() (items, objects int) {
	f.T.Helper()
	in := &dynamodb.ScanInput{TableName: aws.String(f.Platform.Env.Table), Select: types.SelectCount}
	for {
		out, err := f.Platform.Store.Client().Scan(context.Background(), in)
		if err != nil {
			f.T.Fatal(err)
		}
		items += int(out.Count)
		if len(out.LastEvaluatedKey) == 0 {
			break
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	_ = filepath.WalkDir(filepath.Join(f.DataDir, "s3"), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			objects++
		}
		return nil
	})
	return items, objects
}

// pluginSetup: an interface, an integration implementing it (its entity
// "ticket" standing for the interface's "item"), and a plugin depending on
// both.
type pluginSetup struct {
	ifaceID, intID, pluginID string
}

func newPluginSetup(f *fixture, tok string) pluginSetup {
	f.T.Helper()
	var s pluginSetup
	s.ifaceID = f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.0.0", map[string]any{
		"entities": map[string]any{"item": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}}}}},
	})), 200, "createInterface").Str("interface.id")
	s.intID = f.createIntegration(tok, integrationDef("impl", "1.0.0", map[string]any{
		"entities":   map[string]any{"ticket": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"ticketNo": map[string]any{"type": "number"}}}}},
		"interfaces": map[string]any{"creatable": map[string]any{"id": s.ifaceID, "entities": map[string]any{"item": map[string]any{"name": "ticket"}}, "actions": map[string]any{}, "events": map[string]any{}, "channels": map[string]any{}}},
	})).Str("integration.id")
	icon := base64.StdEncoding.EncodeToString([]byte(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`))
	readme := base64.StdEncoding.EncodeToString([]byte("# Reminders"))
	s.pluginID = f.createPlugin(tok, pluginDef("reminders", "1.0.0", map[string]any{
		"icon": icon, "readme": readme,
		"actions": map[string]any{"remind": map[string]any{
			"input":  map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"item": map[string]any{"$ref": "interface:creatable/entities/item", "description": "what"}}}},
			"output": map[string]any{"schema": map[string]any{}},
		}},
		"dependencies": map[string]any{
			"interfaces":   map[string]any{"creatable": map[string]any{"id": s.ifaceID}},
			"integrations": map[string]any{"chat": map[string]any{"name": "impl", "version": "latest"}},
		},
	})).Str("plugin.id")
	return s
}

// TestPluginLifecycle: create (dependencies resolved from the catalogue,
// code in the file storage, never in an item), read by id, by name and its
// code, dereference, update, versions created once, list, delete; a
// version in use by a bot is not deleted.
func TestPluginLifecycle(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	s := newPluginSetup(f, tok)
	g := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID, nil), 200, "getPlugin")
	if g.Str("plugin.dependencies.interfaces.creatable.id") != s.ifaceID || g.Str("plugin.dependencies.interfaces.creatable.version") != "1.0.0" ||
		g.Str("plugin.dependencies.integrations.chat.id") != s.intID || g.Str("plugin.visibility") != "private" || g.Str("plugin.title") != "Title of reminders" {
		t.Fatalf("getPlugin: %s", g.Raw)
	}
	if !strings.HasPrefix(s.pluginID, "intver_") {
		t.Fatalf("plugin id %q", s.pluginID)
	}
	// The code is in the file storage, not in any item.
	if held := f.ItemsHolding("PLUGIN_NODE_MARKER_7f3a"); len(held) > 0 {
		t.Fatalf("items holding the code: %v", held)
	}
	if c := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/code/node", nil), 200, "getPluginCode"); c.Str("code") != pluginNodeCode {
		t.Fatalf("node code: %s", c.Raw)
	}
	if c := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/code/browser", nil), 200, "getPluginCode"); c.Str("code") != "export default {}" {
		t.Fatalf("browser code: %s", c.Raw)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/code/windows", nil), 400, "")
	// The icon is served without a token.
	res, err := http.Get(g.Str("plugin.iconUrl"))
	if err != nil {
		t.Fatal(err)
	}
	svg, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(svg), "<svg") || res.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("icon: %d %s", res.StatusCode, svg)
	}

	// By name, latest, versions once.
	if got := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/reminders/1.0.0", nil), 200, "getPluginByName").Str("plugin.id"); got != s.pluginID {
		t.Fatalf("by name: %s", got)
	}
	v2 := f.createPlugin(tok, pluginDef("reminders", "1.2.0", nil)).Str("plugin.id")
	if got := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/reminders/latest", nil), 200, "getPluginByName").Str("plugin.id"); got != v2 {
		t.Fatalf("latest: %s", got)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/reminders/3.0.0", nil), 404, "")
	if r := f.ws_(tok, "POST", "/v1/admin/plugins", pluginDef("reminders", "1.0.0", nil)); r.Status != 409 || r.Str("type") != "AlreadyExists" {
		t.Fatalf("same version twice: %d %s", r.Status, r.Raw)
	}

	// Dereferenced: the interface's entity becomes the integration's.
	d := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/dereferenced?interfaces.creatable="+s.intID, nil), 200, "getDereferencedPlugin")
	item := d.Body["plugin"].(map[string]any)["actions"].(map[string]any)["remind"].(map[string]any)["input"].(map[string]any)["schema"].(map[string]any)["properties"].(map[string]any)["item"].(map[string]any)
	if item["$ref"] != nil || item["description"] != "what" || item["properties"].(map[string]any)["ticketNo"] == nil {
		t.Fatalf("dereferenced: %v", item)
	}
	for _, q := range []string{"", "?interfaces.creatable=intver_01JZZZZZZZZZZZZZZZZZZZZZZZ", "?interfaces.other=" + s.intID + "&interfaces.creatable=" + s.intID} {
		if r := f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/dereferenced"+q, nil); r.Status != 400 {
			t.Fatalf("dereferenced%s: %d %s", q, r.Status, r.Raw)
		}
	}

	// Update: maps patched, code replaced, dependencies resolved again.
	u := f.Check(f.ws_(tok, "PUT", "/v1/admin/plugins/"+s.pluginID, map[string]any{
		"title": "Reminders", "events": map[string]any{"reminded": nil, "snoozed": map[string]any{"schema": map[string]any{}}},
		"code": map[string]any{"node": "module.exports = 2"}, "attributes": map[string]any{"kind": nil},
	}), 200, "updatePlugin")
	ev := u.Body["plugin"].(map[string]any)["events"].(map[string]any)
	if u.Str("plugin.title") != "Reminders" || ev["reminded"] != nil || ev["snoozed"] == nil || u.Body["plugin"].(map[string]any)["attributes"] != nil {
		t.Fatalf("update: %s", u.Raw)
	}
	if c := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID+"/code/node", nil), 200, "getPluginCode"); c.Str("code") != "module.exports = 2" {
		t.Fatalf("updated code: %s", c.Raw)
	}

	// Lists, filters, pages.
	ids := func(r apitest.Response) []string {
		var out []string
		for _, it := range r.List("plugins") {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	f.createPlugin(tok, pluginDef("other", "0.1.0", nil))
	for _, q := range []struct {
		query string
		n     int
	}{{"", 3}, {"?name=reminders", 2}, {"?name=reminders&version=1.2.0", 1}, {"?version=0.1.0", 1}, {"?name=remind", 0}} {
		if got := ids(f.Check(f.ws_(tok, "GET", "/v1/admin/plugins"+q.query, nil), 200, "listPlugins")); len(got) != q.n {
			t.Errorf("list%s: %v, want %d", q.query, got, q.n)
		}
	}
	var seen []string
	next := ""
	for i := 0; i < 5; i++ {
		r := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins?pageSize=2"+next, nil), 200, "listPlugins")
		seen = append(seen, ids(r)...)
		n, _ := r.Body["meta"].(map[string]any)["nextToken"].(string)
		if n == "" {
			break
		}
		next = "&nextToken=" + url.QueryEscape(n)
	}
	if len(seen) != 3 {
		t.Fatalf("pages: %v", seen)
	}

	// A bot using it: the version cannot be deleted until the bot stops.
	bot := f.createBot(tok, map[string]any{})
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"impl": map[string]any{"integrationId": s.intID}}})
	b := f.updateBot(tok, bot, map[string]any{"plugins": map[string]any{"rem": map[string]any{
		"id": s.pluginID, "configuration": map[string]any{"every": "day"},
		"interfaces":   map[string]any{"creatable": map[string]any{"integrationId": s.intID}},
		"integrations": map[string]any{"chat": map[string]any{"integrationId": s.intID, "integrationAlias": "impl"}},
	}}})
	p := b.Body["bot"].(map[string]any)["plugins"].(map[string]any)["rem"].(map[string]any)
	if p["name"] != "reminders" || p["version"] != "1.0.0" || p["title"] != "Reminders" || p["interfaces"].(map[string]any)["creatable"].(map[string]any)["interfaceId"] != s.ifaceID {
		t.Fatalf("bot plugin: %v", p)
	}
	if r := f.ws_(tok, "DELETE", "/v1/admin/plugins/"+s.pluginID, nil); r.Status != 409 || r.Str("type") != "ReferenceConstraint" {
		t.Fatalf("delete in use: %d %s", r.Status, r.Raw)
	}
	// The integration it relies on cannot go first.
	if r := f.ws_(tok, "PUT", "/v1/admin/bots/"+bot, map[string]any{"integrations": map[string]any{"impl": nil}}); r.Status != 400 || !strings.Contains(r.Str("message"), "relies on") {
		t.Fatalf("removing a plugin's integration: %d %s", r.Status, r.Raw)
	}
	f.updateBot(tok, bot, map[string]any{"plugins": map[string]any{"rem": nil}})
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/plugins/"+s.pluginID, nil), 200, "deletePlugin")
	f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+s.pluginID, nil), 404, "")
	// A deleted bot stops counting.
	b2 := f.createBot(tok, map[string]any{})
	f.updateBot(tok, b2, map[string]any{"plugins": map[string]any{"o": map[string]any{"id": v2}}})
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+b2, nil), 200, "deleteBot")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/plugins/"+v2, nil), 200, "deletePlugin")
}

// TestPluginsAcrossWorkspacesAndHub: a private version is its workspace's
// alone; a public one is in the hub (listed), an unlisted one reachable
// by id and name only; another workspace reads a shared one but never
// changes it.
func TestPluginsAcrossWorkspacesAndHub(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	priv := f.createPlugin(tok, pluginDef("secretplug", "1.0.0", nil)).Str("plugin.id")
	pub := f.createPlugin(tok, pluginDef("hubplug", "1.0.0", map[string]any{"visibility": "public"})).Str("plugin.id")
	unl := f.createPlugin(tok, pluginDef("quietplug", "1.0.0", map[string]any{"visibility": "unlisted"})).Str("plugin.id")

	other := newFixtureOn(f)
	ws2 := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	other.ws = ws2
	other.Check(other.ws_(tok, "GET", "/v1/admin/plugins/"+priv, nil), 404, "")
	other.Check(other.ws_(tok, "GET", "/v1/admin/plugins/"+pub, nil), 200, "getPlugin")
	other.Check(other.ws_(tok, "GET", "/v1/admin/plugins/quietplug/1.0.0", nil), 200, "getPluginByName")
	other.Check(other.ws_(tok, "GET", "/v1/admin/plugins/secretplug/1.0.0", nil), 404, "")
	other.Check(other.ws_(tok, "PUT", "/v1/admin/plugins/"+pub, map[string]any{"title": "Mine"}), 403, "")
	other.Check(other.ws_(tok, "DELETE", "/v1/admin/plugins/"+pub, nil), 403, "")
	other.Check(other.ws_(tok, "DELETE", "/v1/admin/plugins/"+priv, nil), 404, "")
	other.Check(other.ws_(tok, "GET", "/v1/admin/plugins/"+priv+"/code/node", nil), 404, "")
	if n := len(other.Check(other.ws_(tok, "GET", "/v1/admin/plugins", nil), 200, "listPlugins").List("plugins")); n != 0 {
		t.Fatalf("other workspace lists %d plugins", n)
	}
	// A shared name is one workspace's.
	if r := other.ws_(tok, "POST", "/v1/admin/plugins", pluginDef("hubplug", "2.0.0", map[string]any{"visibility": "public"})); r.Status != 409 {
		t.Fatalf("taken name: %d %s", r.Status, r.Raw)
	}

	// The hub, with another account's token and no workspace.
	outsider, _ := f.invite("hub-reader@example.com", "viewer")
	hub := func(path string) apitest.Response {
		return f.Do(apitest.Req{Method: "GET", Path: path, Token: outsider})
	}
	listed := f.Check(hub("/v1/admin/hub/plugins"), 200, "listPublicPlugins")
	if l := listed.List("plugins"); len(l) != 1 || l[0].(map[string]any)["id"] != pub {
		t.Fatalf("hub lists: %s", listed.Raw)
	}
	f.Check(hub("/v1/admin/hub/plugins/"+pub), 200, "getPublicPluginById")
	f.Check(hub("/v1/admin/hub/plugins/"+unl), 200, "getPublicPluginById")
	f.Check(hub("/v1/admin/hub/plugins/"+priv), 404, "")
	f.Check(hub("/v1/admin/hub/plugins/hubplug/latest"), 200, "getPublicPlugin")
	f.Check(hub("/v1/admin/hub/plugins/secretplug/1.0.0"), 404, "")
	if c := f.Check(hub("/v1/admin/hub/plugins/"+pub+"/code/node"), 200, "getPublicPluginCode"); c.Str("code") != pluginNodeCode {
		t.Fatalf("hub code: %s", c.Raw)
	}
	f.Check(hub("/v1/admin/hub/plugins/"+priv+"/code/node"), 404, "")
	f.Check(hub("/v1/admin/hub/plugins/"+pub+"/dereferenced"), 200, "getDereferencedPublicPluginById")
	// Made private, it leaves the hub.
	f.Check(f.ws_(tok, "PUT", "/v1/admin/plugins/"+pub, map[string]any{"visibility": "private"}), 200, "updatePlugin")
	if l := f.Check(hub("/v1/admin/hub/plugins"), 200, "listPublicPlugins").List("plugins"); len(l) != 0 {
		t.Fatalf("hub after private: %v", l)
	}
	f.Check(hub("/v1/admin/hub/plugins/"+pub), 404, "")
}

// TestPluginRolesAndBadInput: viewers read, developers write; refused
// bodies write nothing (no item, no object).
func TestPluginRolesAndBadInput(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	viewer, _ := f.invite("plugin-viewer@example.com", "viewer")
	f.Check(f.ws_(viewer, "POST", "/v1/admin/plugins", pluginDef("v", "1.0.0", nil)), 403, "")
	id := f.createPlugin(tok, pluginDef("mine", "1.0.0", nil)).Str("plugin.id")
	f.Check(f.ws_(viewer, "GET", "/v1/admin/plugins/"+id, nil), 200, "getPlugin")
	f.Check(f.ws_(viewer, "GET", "/v1/admin/plugins", nil), 200, "listPlugins")
	f.Check(f.ws_(viewer, "PUT", "/v1/admin/plugins/"+id, map[string]any{"title": "x"}), 403, "")
	f.Check(f.ws_(viewer, "DELETE", "/v1/admin/plugins/"+id, nil), 403, "")
	// A foreign private integration is no dependency.
	f2 := newFixture(t)
	foreign := f2.createIntegration(f2.AdminToken, integrationDef("foreign", "1.0.0", nil)).Str("integration.id")

	items, objects := f.stored()
	big := strings.Repeat("x", 10<<20)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"bad name", pluginDef("Not Ok", "1.0.0", nil), 400, "name"},
		{"bad version", pluginDef("fine", "v1", nil), 400, "version"},
		{"no code", pluginDef("fine", "1.0.0", map[string]any{"code": nil}), 400, "code"},
		{"empty node code", pluginDef("fine", "1.0.0", map[string]any{"code": map[string]any{"node": "", "browser": ""}}), 400, "code.node"},
		{"unknown field", pluginDef("fine", "1.0.0", map[string]any{"colour": "red"}), 400, "colour"},
		{"bad visibility", pluginDef("fine", "1.0.0", map[string]any{"visibility": "everyone"}), 400, "visibility"},
		{"icon not base64", pluginDef("fine", "1.0.0", map[string]any{"icon": "%%%"}), 400, "icon"},
		{"unknown interface", pluginDef("fine", "1.0.0", map[string]any{"dependencies": map[string]any{"interfaces": map[string]any{"x": map[string]any{"id": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}}), 400, "dependencies.interfaces.x"},
		{"unknown integration by name", pluginDef("fine", "1.0.0", map[string]any{"dependencies": map[string]any{"integrations": map[string]any{"x": map[string]any{"name": "nope", "version": "1.0.0"}}}}), 400, "dependencies.integrations.x"},
		{"dependency without id or name", pluginDef("fine", "1.0.0", map[string]any{"dependencies": map[string]any{"integrations": map[string]any{"x": map[string]any{"version": "1.0.0"}}}}), 400, "dependencies.integrations.x"},
		{"foreign private integration", pluginDef("fine", "1.0.0", map[string]any{"dependencies": map[string]any{"integrations": map[string]any{"x": map[string]any{"id": foreign}}}}), 400, "not found"},
		{"state with a bad type", pluginDef("fine", "1.0.0", map[string]any{"states": map[string]any{"s": map[string]any{"type": "planet", "schema": map[string]any{}}}}), 400, "states.s.type"},
		{"oversize body", pluginDef("fine", "1.0.0", map[string]any{"code": map[string]any{"node": big, "browser": ""}}), 413, "exceeds"},
		{"oversize definition", pluginDef("fine", "1.0.0", map[string]any{"events": map[string]any{"e": map[string]any{"schema": map[string]any{"description": strings.Repeat("y", 400<<10)}}}}), 413, "too large"},
		{"malformed", `{"name":`, 400, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(tok, "POST", "/v1/admin/plugins", tc.body)
			if r.Status != tc.status || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Raw, tc.status, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		name   string
		body   any
		status int
	}{
		{"unknown field", map[string]any{"colour": "red"}, 400},
		{"dependency not found", map[string]any{"dependencies": map[string]any{"interfaces": map[string]any{"x": map[string]any{"name": "nope", "version": "latest"}}}}, 400},
		{"bad icon", map[string]any{"icon": base64.StdEncoding.EncodeToString([]byte("not an image"))}, 400},
	} {
		t.Run("update "+tc.name, func(t *testing.T) {
			if r := f.ws_(tok, "PUT", "/v1/admin/plugins/"+id, tc.body); r.Status != tc.status {
				t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	if i, o := f.stored(); i != items || o != objects {
		t.Fatalf("refused requests wrote: items %d -> %d, objects %d -> %d", items, i, objects, o)
	}
}

// TestBotPluginsResolved: a bot's plugins name versions of the catalogue;
// each refusal (missing plugin or version, configuration off its schema,
// an interface or integration the bot does not back) is a 4xx with the
// reason, and leaves the bot as it was.
func TestBotPluginsResolved(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	s := newPluginSetup(f, tok)
	bot := f.createBot(tok, map[string]any{})
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"impl": map[string]any{"integrationId": s.intID}}})
	good := func(extra map[string]any) map[string]any {
		p := map[string]any{
			"id":           s.pluginID,
			"interfaces":   map[string]any{"creatable": map[string]any{"integrationId": s.intID}},
			"integrations": map[string]any{"chat": map[string]any{"integrationId": s.intID, "integrationAlias": "impl"}},
		}
		for k, v := range extra {
			p[k] = v
		}
		return map[string]any{"plugins": map[string]any{"rem": p}}
	}
	other := newFixture(t)
	foreign := other.createPlugin(other.AdminToken, pluginDef("foreignplug", "1.0.0", nil)).Str("plugin.id")
	before := jsonOf(f.getBot(bot))
	items, _ := f.stored()
	for _, tc := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"missing plugin", map[string]any{"plugins": map[string]any{"rem": map[string]any{"id": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}, 400, "not found"},
		{"another workspace's private plugin", map[string]any{"plugins": map[string]any{"rem": map[string]any{"id": foreign}}}, 400, "not found"},
		{"configuration off the schema", good(map[string]any{"configuration": map[string]any{"every": 5}}), 400, "plugins.rem.configuration"},
		{"interface the plugin lacks", good(map[string]any{"interfaces": map[string]any{"other": map[string]any{"integrationId": s.intID}}}), 400, "no interface"},
		{"integration not installed", good(map[string]any{"interfaces": map[string]any{"creatable": map[string]any{"integrationId": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}), 400, "not installed"},
		{"integration under a wrong alias", good(map[string]any{"integrations": map[string]any{"chat": map[string]any{"integrationId": s.intID, "integrationAlias": "nope"}}}), 400, "alias"},
		{"no id", map[string]any{"plugins": map[string]any{"rem": map[string]any{"enabled": true}}}, 400, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(tok, "PUT", "/v1/admin/bots/"+bot, tc.body)
			if r.Status != tc.status || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Raw, tc.status, tc.want)
			}
		})
	}
	if after := jsonOf(f.getBot(bot)); after != before {
		t.Fatalf("refused updates changed the bot:\n%s\n%s", before, after)
	}
	if i, _ := f.stored(); i != items {
		t.Fatalf("refused updates wrote items: %d -> %d", items, i)
	}
	u := f.updateBot(tok, bot, good(map[string]any{"enabled": false, "configuration": map[string]any{"every": "week"}}))
	p := u.Body["bot"].(map[string]any)["plugins"].(map[string]any)["rem"].(map[string]any)
	if p["enabled"] != false || p["configuration"].(map[string]any)["every"] != "week" || p["id"] != s.pluginID {
		t.Fatalf("plugin: %v", p)
	}
	got := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot, nil), 200, "getBot")
	if got.Str("bot.plugins.rem.version") != "1.0.0" || got.Str("bot.plugins.rem.integrations.chat.integrationAlias") != "impl" {
		t.Fatalf("getBot: %s", got.Raw)
	}
}

// TestPluginInterfacesStayPrivate: a plugin's dereferenced view lends only
// the interfaces its reader may read. Mallory, in her own workspace, names
// (by id) the private interface a victim's public plugin depends on in an
// integration of hers: neither the workspace view nor the hub's gives her
// its schema (a ReferenceNotFound, no schema), as getInterface gives her
// 404; and a shared plugin is refused an interface that is not public.
func TestPluginInterfacesStayPrivate(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	const secret = "SECRET_SCHEMA_c41b"
	iface := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("vault", "1.0.0", map[string]any{
		"public":   true,
		"entities": map[string]any{"item": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{secret: map[string]any{"type": "string"}}}}},
	})), 200, "createInterface").Str("interface.id")
	plugin := f.createPlugin(tok, pluginDef("vaulted", "1.0.0", map[string]any{
		"visibility": "public",
		"actions": map[string]any{"remind": map[string]any{
			"input":  map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"item": map[string]any{"$ref": "interface:vault/entities/item"}}}},
			"output": map[string]any{"schema": map[string]any{}},
		}},
		"dependencies": map[string]any{"interfaces": map[string]any{"vault": map[string]any{"id": iface}}},
	})).Str("plugin.id")
	// The interface goes private after the plugin was shared.
	f.Check(f.ws_(tok, "PUT", "/v1/admin/interfaces/"+iface, map[string]any{"public": false}), 200, "updateInterface")
	// Its owner still sees it through its own plugin.
	own := f.Check(f.ws_(tok, "POST", "/v1/admin/integrations", integrationDef("ownimpl", "1.0.0", map[string]any{
		"interfaces": map[string]any{"vault": map[string]any{"id": iface, "entities": map[string]any{}, "actions": map[string]any{}, "events": map[string]any{}, "channels": map[string]any{}}},
	})), 200, "createIntegration").Str("integration.id")
	if r := f.Check(f.ws_(tok, "GET", "/v1/admin/plugins/"+plugin+"/dereferenced?interfaces.vault="+own, nil), 200, "getDereferencedPlugin"); !strings.Contains(string(r.Raw), secret) {
		t.Fatalf("owner's view lacks its own interface: %s", r.Raw)
	}

	// Mallory: an account of her own (invited into a scratch workspace of
	// the victim's only to exist), working in her own workspace.
	scratch := newFixtureOn(f)
	scratch.Check(scratch.ws_(tok, "POST", "/v1/admin/workspace-members", map[string]any{"email": "mallory@example.com", "role": "owner"}), 200, "createWorkspaceMember")
	mallory := f.AccountToken("mallory@example.com")
	m := &fixture{Env: f.Env}
	m.ws = f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: mallory, Body: map[string]any{"name": "Mallory"}}), 200, "createWorkspace").Str("id")
	m.Check(m.ws_(mallory, "GET", "/v1/admin/interfaces/"+iface, nil), 404, "")
	hers := m.createIntegration(mallory, integrationDef("snoop", "1.0.0", map[string]any{
		"visibility": "public",
		"interfaces": map[string]any{"vault": map[string]any{"id": iface, "entities": map[string]any{}, "actions": map[string]any{}, "events": map[string]any{}, "channels": map[string]any{}}},
	})).Str("integration.id")
	for _, r := range []apitest.Response{
		m.ws_(mallory, "GET", "/v1/admin/plugins/"+plugin+"/dereferenced?interfaces.vault="+hers, nil),
		f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/plugins/" + plugin + "/dereferenced?interfaces.vault=" + hers, Token: mallory}),
	} {
		if strings.Contains(string(r.Raw), secret) || r.Status != 400 || r.Str("type") != "ReferenceNotFound" {
			t.Fatalf("mallory's dereferenced view: %d %s", r.Status, r.Raw)
		}
	}

	// A shared plugin may depend on public interfaces only.
	priv := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("closet", "1.0.0", nil)), 200, "createInterface").Str("interface.id")
	deps := map[string]any{"interfaces": map[string]any{"closet": map[string]any{"id": priv}}}
	for _, vis := range []string{"public", "unlisted"} {
		r := f.ws_(tok, "POST", "/v1/admin/plugins", pluginDef("closeted", "1.0.0", map[string]any{"visibility": vis, "dependencies": deps}))
		if r.Status != 400 || !strings.Contains(r.Str("message"), "dependencies.interfaces.closet") || !strings.Contains(r.Str("message"), "not public") {
			t.Fatalf("%s plugin on a private interface: %d %s", vis, r.Status, r.Raw)
		}
	}
	mine := f.createPlugin(tok, pluginDef("closeted", "1.0.0", map[string]any{"dependencies": deps})).Str("plugin.id")
	if r := f.ws_(tok, "PUT", "/v1/admin/plugins/"+mine, map[string]any{"visibility": "public"}); r.Status != 400 || !strings.Contains(r.Str("message"), "not public") {
		t.Fatalf("made public on a private interface: %d %s", r.Status, r.Raw)
	}
	if r := f.ws_(tok, "PUT", "/v1/admin/plugins/"+plugin, map[string]any{"title": "Vaulted"}); r.Status != 400 || !strings.Contains(r.Str("message"), "not public") {
		t.Fatalf("shared plugin updated on a now private interface: %d %s", r.Status, r.Raw)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/interfaces/"+priv, map[string]any{"public": true}), 200, "updateInterface")
	f.Check(f.ws_(tok, "PUT", "/v1/admin/plugins/"+mine, map[string]any{"visibility": "public"}), 200, "updatePlugin")
}

// A refused createPlugin (its version, or its shared name, taken: 409)
// stores no object: the slot and the name are checked before the code,
// icon and readme are written.
func TestRefusedPluginStoresNoObject(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	with := func(n int, extra map[string]any) map[string]any {
		e := map[string]any{"icon": b64(`<svg xmlns="http://www.w3.org/2000/svg" id="` + strings.Repeat("i", n) + `"></svg>`),
			"readme": b64("# Dup " + strings.Repeat("r", n)),
			"code":   map[string]any{"node": pluginNodeCode + strings.Repeat(" ", n), "browser": "export default {}" + strings.Repeat(" ", n)}}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	f.createPlugin(tok, pluginDef("dup", "1.0.0", with(0, nil)))
	f.createPlugin(tok, pluginDef("pubdup", "1.0.0", with(0, map[string]any{"visibility": "public"})))
	items, objects := f.stored()
	for n := 1; n <= 3; n++ {
		if r := f.ws_(tok, "POST", "/v1/admin/plugins", pluginDef("dup", "1.0.0", with(n, nil))); r.Status != 409 {
			t.Fatalf("same version again: %d %s", r.Status, r.Raw)
		}
	}
	other := newFixtureOn(f)
	other.ws = f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	items, _ = f.stored() // the workspace's items
	if r := other.ws_(tok, "POST", "/v1/admin/plugins", pluginDef("pubdup", "2.0.0", with(4, map[string]any{"visibility": "public"}))); r.Status != 409 {
		t.Fatalf("another workspace's shared name: %d %s", r.Status, r.Raw)
	}
	if i, o := f.stored(); i != items || o != objects {
		t.Fatalf("refused versions left %d items and %d objects (had %d, %d)", i-items, o-objects, items, objects)
	}
}

// A refused createIntegration (its version, or its shared name, taken:
// 409) stores no object either.
func TestRefusedIntegrationStoresNoObject(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	with := func(n int, extra map[string]any) map[string]any {
		e := map[string]any{"icon": b64(`<svg xmlns="http://www.w3.org/2000/svg" id="` + strings.Repeat("i", n) + `"></svg>`),
			"readme": b64("# Dup " + strings.Repeat("r", n)), "code": "module.exports = {}" + strings.Repeat(" ", n)}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	f.createIntegration(tok, integrationDef("dupint", "1.0.0", with(0, nil)))
	f.createIntegration(tok, integrationDef("pubdupint", "1.0.0", with(0, map[string]any{"visibility": "public"})))
	items, objects := f.stored()
	for n := 1; n <= 3; n++ {
		if r := f.ws_(tok, "POST", "/v1/admin/integrations", integrationDef("dupint", "1.0.0", with(n, nil))); r.Status != 409 {
			t.Fatalf("same version again: %d %s", r.Status, r.Raw)
		}
	}
	other := newFixtureOn(f)
	items, _ = f.stored() // the workspace's items
	if r := other.ws_(tok, "POST", "/v1/admin/integrations", integrationDef("pubdupint", "2.0.0", with(4, map[string]any{"visibility": "public"}))); r.Status != 409 {
		t.Fatalf("another workspace's shared name: %d %s", r.Status, r.Raw)
	}
	if i, o := f.stored(); i != items || o != objects {
		t.Fatalf("refused versions left %d items and %d objects (had %d, %d)", i-items, o-objects, items, objects)
	}
}

// A plugin's replaced files, and a deleted plugin's, leave the file
// storage; files it still names stay.
func TestPluginFilesCollected(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	_, empty := f.stored()
	id := f.createPlugin(tok, pluginDef("collected", "1.0.0", map[string]any{
		"icon": b64(`<svg xmlns="http://www.w3.org/2000/svg"></svg>`), "readme": b64("# One"),
		"code": map[string]any{"node": pluginNodeCode, "browser": "export default {}"}})).Str("plugin.id")
	_, full := f.stored()
	if full <= empty {
		t.Fatalf("a plugin with code, icon and readme stored nothing (%d, %d)", empty, full)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/plugins/"+id, map[string]any{"readme": b64("# Two")}), 200, "updatePlugin")
	if _, n := f.stored(); n != full {
		t.Fatalf("after replacing the readme: %d objects, want %d", n, full)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/plugins/"+id, map[string]any{"title": "same files"}), 200, "updatePlugin")
	if _, n := f.stored(); n != full {
		t.Fatalf("after an update naming the same files: %d objects, want %d", n, full)
	}
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/plugins/"+id, nil), 200, "deletePlugin")
	if _, n := f.stored(); n != empty {
		t.Fatalf("after the delete: %d objects, want %d", n, empty)
	}
}
