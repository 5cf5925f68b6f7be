package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/delivery"
)

// fakeIntegration is an integration's server: it records every call,
// checks its signature with the integration's signing secret, and answers
// as its mode says (ok, fail, hang).
type fakeIntegration struct {
	*httptest.Server
	secret atomic.Value // string
	mode   atomic.Value // string
	mu     sync.Mutex
	calls  []integrationCallSeen
}

type integrationCallSeen struct {
	Operation, BotID, IntegrationID, Alias, WebhookID, ConfigType string
	Configuration                                                 map[string]any
	Body                                                          map[string]any
	SignatureOK                                                   bool
}

func newFakeIntegration(t *testing.T) *fakeIntegration {
	fi := &fakeIntegration{}
	fi.mode.Store("ok")
	fi.secret.Store("")
	fi.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		c := integrationCallSeen{
			Operation: r.Header.Get("x-bp-operation"), BotID: r.Header.Get("x-bot-id"),
			IntegrationID: r.Header.Get("x-integration-id"), Alias: r.Header.Get("x-integration-alias"),
			WebhookID: r.Header.Get("x-webhook-id"), ConfigType: r.Header.Get("x-bp-configuration-type"),
			SignatureOK: delivery.Verify(fi.secret.Load().(string), raw, r.Header.Get(delivery.SignatureHeader), time.Now(), 5*time.Minute),
		}
		_ = json.Unmarshal(raw, &c.Body)
		if cfg, err := decodeBase64JSON(r.Header.Get("x-bp-configuration")); err == nil {
			c.Configuration = cfg
		}
		fi.mu.Lock()
		fi.calls = append(fi.calls, c)
		fi.mu.Unlock()
		switch fi.mode.Load().(string) {
		case "fail":
			w.WriteHeader(400)
			w.Write([]byte(`{"message":"bad token"}`))
		case "hang":
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
			}
		default:
			w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(fi.Close)
	return fi
}

func (fi *fakeIntegration) seen() []integrationCallSeen {
	fi.mu.Lock()
	defer fi.mu.Unlock()
	return append([]integrationCallSeen(nil), fi.calls...)
}

func decodeBase64JSON(s string) (map[string]any, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// integrationDef is a small integration definition with a channel that
// requires tags, an action, an interface and a configuration schema.
func integrationDef(name, version string, extra map[string]any) map[string]any {
	d := map[string]any{
		"name": name, "version": version, "title": "Title of " + name, "description": "Sends messages to " + name,
		"configuration":  map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"token": map[string]any{"type": "string"}}}},
		"configurations": map[string]any{"oauth": map[string]any{"title": "OAuth", "schema": map[string]any{"type": "object", "required": []string{"clientId"}}}},
		"channels": map[string]any{"dm": map[string]any{
			"messages":     map[string]any{"text": map[string]any{"schema": map[string]any{"type": "object"}}},
			"conversation": map[string]any{"creation": map[string]any{"enabled": true, "requiredTags": []string{"userId"}}, "tags": map[string]any{"userId": map[string]any{"title": "User"}}},
		}},
		"actions":    map[string]any{"sendReminder": map[string]any{"title": "Send a reminder", "input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"events":     map[string]any{"reacted": map[string]any{"schema": map[string]any{}}},
		"states":     map[string]any{"creds": map[string]any{"type": "integration", "schema": map[string]any{}}},
		"entities":   map[string]any{"ticket": map[string]any{"schema": map[string]any{}}},
		"user":       map[string]any{"tags": map[string]any{"id": map[string]any{}}},
		"interfaces": map[string]any{"creatable": map[string]any{"id": "intver_01JAAAAAAAAAAAAAAAAAAAAAAA", "actions": map[string]any{"create": map[string]any{"name": "sendReminder"}}}},
		"identifier": map[string]any{"extractScript": "x"},
		"attributes": map[string]any{"category": "chat"},
		"secrets":    map[string]any{"API_KEY": "s3cret"},
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

func (f *fixture) createIntegration(token string, body map[string]any) apitest.Response {
	f.T.Helper()
	return f.Check(f.ws_(token, "POST", "/v1/admin/integrations", body), 200, "createIntegration")
}

// TestIntegrationLifecycle: create, read by id and by name, update, the
// immutability of versions, delete.
func TestIntegrationLifecycle(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	r := f.createIntegration(tok, integrationDef("acme", "1.0.0", map[string]any{"url": "https://acme.example.com", "maxExecutionTime": 5, "maxConcurrency": 3}))
	id := r.Str("integration.id")
	in := r.Body["integration"].(map[string]any)
	if in["signingSecret"] == "" || in["visibility"] != "private" || in["public"] != false || in["verificationStatus"] != "unapproved" ||
		in["lifecycleStatus"] != "published" || in["url"] != "https://acme.example.com" || in["maxConcurrency"] != float64(3) {
		t.Fatalf("created: %s", r.Raw)
	}
	if s := in["secrets"].([]any); len(s) != 1 || s[0] != "API_KEY" || strings.Contains(string(r.Raw), "s3cret") {
		t.Fatalf("secrets: %v in %s", s, r.Raw)
	}
	ch := in["channels"].(map[string]any)["dm"].(map[string]any)
	if ch["message"] == nil || ch["conversation"].(map[string]any)["creation"].(map[string]any)["requiredTags"].([]any)[0] != "userId" {
		t.Fatalf("channel normalized: %v", ch)
	}
	iface := in["interfaces"].(map[string]any)["creatable"].(map[string]any)
	if iface["name"] != "creatable" || iface["events"] == nil {
		t.Fatalf("interface normalized: %v", iface)
	}

	g := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration")
	if g.Str("integration.name") != "acme" || g.Str("integration.signingSecret") != r.Str("integration.signingSecret") {
		t.Fatalf("get: %s", g.Raw)
	}
	f.createIntegration(tok, integrationDef("acme", "1.2.0", nil))
	f.createIntegration(tok, integrationDef("acme", "1.10.0-beta.1", nil))
	byName := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/acme/1.0.0", nil), 200, "getIntegrationByName")
	if byName.Str("integration.id") != id {
		t.Fatalf("by name: %s", byName.Raw)
	}
	latest := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/acme/latest", nil), 200, "getIntegrationByName")
	if latest.Str("integration.version") != "1.10.0-beta.1" {
		t.Fatalf("latest: %s", latest.Str("integration.version"))
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/acme/9.9.9", nil), 404, "")
	f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/acme/not-a-version", nil), 400, "")

	// A version is created once.
	f.Check(f.ws_(tok, "POST", "/v1/admin/integrations", integrationDef("acme", "1.0.0", nil)), 409, "")

	u := f.Check(f.ws_(tok, "PUT", "/v1/admin/integrations/"+id, map[string]any{
		"title": "Acme 2", "url": nil, "actions": map[string]any{"sendReminder": nil, "ping": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"attributes": map[string]any{"category": nil, "tier": "gold"}, "secrets": map[string]any{"API_KEY": nil, "OTHER": "x"},
		"identifier": map[string]any{"extractScript": nil},
	}), 200, "updateIntegration")
	ui := u.Body["integration"].(map[string]any)
	acts := ui["actions"].(map[string]any)
	if ui["title"] != "Acme 2" || ui["url"] != "" || acts["ping"] == nil || acts["sendReminder"] != nil {
		t.Fatalf("update: %s", u.Raw)
	}
	if attrs := ui["attributes"].(map[string]any); attrs["tier"] != "gold" || attrs["category"] != nil {
		t.Fatalf("attributes: %v", attrs)
	}
	if s := ui["secrets"].([]any); len(s) != 1 || s[0] != "OTHER" {
		t.Fatalf("secrets after update: %v", s)
	}
	if idf := ui["identifier"].(map[string]any); len(idf) != 0 {
		t.Fatalf("identifier: %v", idf)
	}

	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+id, nil), 200, "deleteIntegration")
	f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+id, nil), 404, "")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+id, nil), 404, "")
	// The deleted version's slot is free again.
	f.createIntegration(tok, integrationDef("acme", "1.0.0", nil))
}

// TestIntegrationVisibilityAcrossWorkspaces: other workspaces see public
// (and, by id or name, unlisted) integrations without their signing
// secret, never private ones, and change none.
func TestIntegrationVisibilityAcrossWorkspaces(t *testing.T) {
	f := newFixture(t)
	private := f.createIntegration(f.AdminToken, integrationDef("secretive", "1.0.0", nil)).Str("integration.id")
	public := f.createIntegration(f.AdminToken, integrationDef("shared", "1.0.0", map[string]any{"visibility": "public"})).Str("integration.id")
	unlisted := f.createIntegration(f.AdminToken, integrationDef("quiet", "1.0.0", map[string]any{"visibility": "unlisted"})).Str("integration.id")
	f.createIntegration(f.AdminToken, integrationDef("shared", "0.9.0", map[string]any{"public": true}))

	// An outsider with their own workspace.
	outTok, _ := newFixtureOn(f).invite("eve@example.com", "owner")
	outWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outTok, Body: map[string]any{"name": "Eve"}}), 200, "createWorkspace").Str("id")
	out := &fixture{Env: f.Env, ws: outWs}

	l := out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations", nil), 200, "listIntegrations")
	names := map[string]bool{}
	for _, it := range l.List("integrations") {
		m := it.(map[string]any)
		names[m["name"].(string)] = true
		ow := m["ownerWorkspace"].(map[string]any)
		if ow["id"] != f.ws || ow["name"] != "Acme" {
			t.Fatalf("ownerWorkspace: %v", ow)
		}
	}
	if !names["shared"] || names["secretive"] || names["quiet"] || len(l.List("integrations")) != 2 {
		t.Fatalf("outsider's list: %s", l.Raw)
	}
	g := out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/"+public, nil), 200, "getIntegration")
	if _, shown := g.Body["integration"].(map[string]any)["signingSecret"]; shown {
		t.Fatalf("another workspace sees the signing secret: %s", g.Raw)
	}
	out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/"+unlisted, nil), 200, "getIntegration")
	out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/quiet/latest", nil), 200, "getIntegrationByName")
	if v := out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/shared/latest", nil), 200, "getIntegrationByName").Str("integration.version"); v != "1.0.0" {
		t.Fatalf("latest public: %s", v)
	}
	for _, r := range []apitest.Req{
		{Method: "GET", Path: "/v1/admin/integrations/" + private},
		{Method: "GET", Path: "/v1/admin/integrations/secretive/1.0.0"},
		{Method: "GET", Path: "/v1/admin/integrations/secretive/latest"},
		{Method: "PUT", Path: "/v1/admin/integrations/" + private, Body: map[string]any{"title": "x"}},
		{Method: "DELETE", Path: "/v1/admin/integrations/" + private},
		{Method: "GET", Path: "/v1/admin/integrations/iaks?integrationId=" + private},
		{Method: "POST", Path: "/v1/admin/integrations/iaks", Body: map[string]any{"integrationId": private}},
		{Method: "POST", Path: "/v1/admin/integrations/request-verification", Body: map[string]any{"integrationId": private}},
		{Method: "GET", Path: "/v1/admin/integrations?installedByBotId=" + f.createBot(f.AdminToken, nil)},
	} {
		r.Token, r.Headers = outTok, map[string]string{"x-workspace-id": outWs}
		if got := f.Do(r); got.Status != 404 {
			t.Errorf("outsider %s %s: %d %s, want 404", r.Method, r.Path, got.Status, got.Raw)
		}
	}
	for _, r := range []apitest.Req{
		{Method: "PUT", Path: "/v1/admin/integrations/" + public, Body: map[string]any{"title": "x"}},
		{Method: "DELETE", Path: "/v1/admin/integrations/" + public},
		{Method: "POST", Path: "/v1/admin/integrations/iaks", Body: map[string]any{"integrationId": public}},
	} {
		r.Token, r.Headers = outTok, map[string]string{"x-workspace-id": outWs}
		if got := f.Do(r); got.Status != 403 {
			t.Errorf("outsider %s %s: %d %s, want 403", r.Method, r.Path, got.Status, got.Raw)
		}
	}
	// The outsider's workspace cannot publish the name another workspace publishes.
	out.Check(out.ws_(outTok, "POST", "/v1/admin/integrations", integrationDef("shared", "2.0.0", map[string]any{"visibility": "public"})), 409, "")
	// Privately, it may use the name: its own version comes first for it.
	mine := out.createIntegration(outTok, integrationDef("shared", "0.1.0", nil)).Str("integration.id")
	if got := out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/shared/latest", nil), 200, "getIntegrationByName").Str("integration.id"); got != mine {
		t.Fatalf("own version first: got %s", got)
	}
	// Making the public version private hides it at once.
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+public, map[string]any{"visibility": "private"}), 200, "updateIntegration")
	out.Check(out.ws_(outTok, "GET", "/v1/admin/integrations/"+public, nil), 404, "")
}

func TestListIntegrationsFilters(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	mk := func(name, version string, extra map[string]any) string {
		return f.createIntegration(tok, integrationDef(name, version, extra)).Str("integration.id")
	}
	alpha1 := mk("alpha", "1.0.0", nil)
	alpha2 := mk("alpha", "2.0.0", map[string]any{"visibility": "public"})
	beta := mk("beta", "0.1.0", map[string]any{"interfaces": map[string]any{}, "actions": map[string]any{}, "description": "nothing to see"})
	dev := mk("gamma", "0.0.1", map[string]any{"dev": true})
	mk("delta", "3.0.0", map[string]any{"description": "the hub for reminders", "interfaces": map[string]any{}, "actions": map[string]any{}})

	ids := func(q string) []string {
		t.Helper()
		r := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations"+q, nil), 200, "listIntegrations")
		var out []string
		for _, it := range r.List("integrations") {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	same := func(q string, want ...string) {
		t.Helper()
		got := ids(q)
		sort.Strings(got)
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: got %v, want %v", q, got, want)
		}
	}
	same("?name=alpha", alpha1, alpha2)
	same("?name=alpha&version=1.0.0", alpha1)
	same("?name=alpha&version=latest", alpha2)
	same("?dev=true", dev)
	same("?visibility=public", alpha2)
	same("?interfaceId=intver_01JAAAAAAAAAAAAAAAAAAAAAAA", alpha1, alpha2)
	same("?interfaceName=creatable", alpha1, alpha2)
	same("?interfaceName=creat")
	same("?verificationStatus=pending")
	if got := ids("?sortBy=name&direction=asc&version=latest"); len(got) != 3 || got[0] != alpha2 || got[1] != beta {
		t.Errorf("sorted by name: %v", got)
	}
	if got := ids("?sortBy=createdAt&direction=asc"); len(got) != 4 || got[0] != alpha1 {
		t.Errorf("sorted by creation: %v", got)
	}

	// Search: name, title, description, actions, interfaces; matchedOn says which.
	r := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations?search=REMINDER", nil), 200, "listIntegrations")
	got := map[string]map[string]any{}
	for _, it := range r.List("integrations") {
		m := it.(map[string]any)
		got[m["name"].(string)+"@"+m["version"].(string)] = m["matchedOn"].(map[string]any)
	}
	if len(got) != 3 || got["delta@3.0.0"]["description"] != true || fmt.Sprint(got["alpha@1.0.0"]["actions"]) != "[sendReminder]" {
		t.Fatalf("search: %s", r.Raw)
	}
	if m := got["alpha@2.0.0"]; m["name"] != false || m["title"] != false {
		t.Fatalf("matchedOn: %v", m)
	}
	if strings.Contains(string(f.Check(f.ws_(tok, "GET", "/v1/admin/integrations", nil), 200, "listIntegrations").Raw), "matchedOn") {
		t.Fatal("matchedOn without a search")
	}
	same("?search=creat", alpha1, alpha2) // the interface's name

	// Installs: installedByBotId lists a bot's, installCount sorts.
	bot := f.createBot(tok, nil)
	f.Check(f.ws_(tok, "PUT", "/v1/admin/bots/"+bot, map[string]any{"integrations": map[string]any{
		"b": map[string]any{"integrationId": beta, "enabled": false},
	}}), 200, "updateBot")
	same("?installedByBotId="+bot, beta)
	if got := ids("?sortBy=installCount&direction=desc"); len(got) != 4 || got[0] != beta {
		t.Errorf("by install count: %v", got)
	}
	if got := ids("?sortBy=popularity"); len(got) != 4 || got[0] != beta {
		t.Errorf("by popularity: %v", got)
	}

	// Pagination with limit (or pageSize), and tokens bound to their list.
	var all []string
	next := ""
	for pages := 0; ; pages++ {
		q := "?limit=2&sortBy=name"
		if next != "" {
			q += "&nextToken=" + url.QueryEscape(next)
		}
		r := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations"+q, nil), 200, "listIntegrations")
		for _, it := range r.List("integrations") {
			all = append(all, it.(map[string]any)["id"].(string))
		}
		if next = r.Str("meta.nextToken"); next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("no end")
		}
		f.Check(f.ws_(tok, "GET", "/v1/admin/integrations?limit=2&sortBy=createdAt&nextToken="+url.QueryEscape(next), nil), 400, "")
	}
	if len(all) != 4 || all[0] != alpha1 || all[1] != alpha2 {
		t.Fatalf("paged: %v", all)
	}
	for _, q := range []string{"?sortBy=stars", "?direction=up", "?visibility=unlisted", "?limit=0", "?limit=101", "?limit=x", "?dev=perhaps", "?verificationStatus=ok", "?version=one", "?installedByBotId=bot_nope"} {
		r := f.ws_(tok, "GET", "/v1/admin/integrations"+q, nil)
		if r.Status/100 != 4 {
			t.Errorf("%s: %d %s", q, r.Status, r.Raw)
		}
	}
}

func TestIntegrationAPIKeys(t *testing.T) {
	f := newFixture(t)
	id := f.createIntegration(f.AdminToken, integrationDef("keyed", "1.0.0", nil)).Str("integration.id")
	other := f.createIntegration(f.AdminToken, integrationDef("other", "1.0.0", nil)).Str("integration.id")
	k := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": id, "note": "ci"}), 200, "createIntegrationApiKey")
	key := k.Str("value")
	if !strings.HasPrefix(key, "bp_iak_") || k.Str("note") != "ci" {
		t.Fatalf("created: %s", k.Raw)
	}
	l := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/iaks?integrationId="+id, nil), 200, "listIntegrationApiKeys")
	if len(l.List("iaks")) != 1 || strings.Contains(string(l.Raw), key) {
		t.Fatalf("list: %s", l.Raw)
	}
	if n := len(f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/iaks?integrationId="+other, nil), 200, "listIntegrationApiKeys").List("iaks")); n != 0 {
		t.Fatalf("other integration's keys: %d", n)
	}
	f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/iaks", nil), 400, "")

	// The key acts as its integration: it reads and updates it, nothing else.
	g := f.Check(f.ws_(key, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration")
	if g.Str("integration.signingSecret") == "" {
		t.Fatal("the integration's own key does not see its signing secret")
	}
	f.Check(f.ws_(key, "PUT", "/v1/admin/integrations/"+id, map[string]any{"title": "By key"}), 200, "updateIntegration")
	f.Check(f.ws_(key, "GET", "/v1/admin/integrations/"+other, nil), 404, "")
	for _, r := range []apitest.Req{
		{Method: "GET", Path: "/v1/admin/integrations"},
		{Method: "DELETE", Path: "/v1/admin/integrations/" + id},
		{Method: "POST", Path: "/v1/admin/integrations", Body: integrationDef("x", "1.0.0", nil)},
		{Method: "GET", Path: "/v1/admin/bots"},
		{Method: "GET", Path: "/v1/admin/account/me"},
		{Method: "GET", Path: "/v1/admin/integrations/iaks?integrationId=" + id},
	} {
		r.Token, r.Headers = key, map[string]string{"x-workspace-id": f.ws}
		if got := f.Do(r); got.Status != 403 {
			t.Errorf("IAK %s %s: %d, want 403", r.Method, r.Path, got.Status)
		}
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/integrations/iaks/"+k.Str("id"), nil), 200, "deleteIntegrationApiKey")
	f.Check(f.ws_(key, "GET", "/v1/admin/integrations/"+id, nil), 401, "")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/integrations/iaks/"+k.Str("id"), nil), 404, "")

	// Deleting an integration revokes its keys.
	k2 := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": other}), 200, "createIntegrationApiKey").Str("value")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/integrations/"+other, nil), 200, "deleteIntegration")
	f.Check(f.ws_(k2, "GET", "/v1/admin/integrations/"+other, nil), 401, "")
}

func TestIntegrationRolesAndBadInput(t *testing.T) {
	f := newFixture(t)
	id := f.createIntegration(f.AdminToken, integrationDef("roles", "1.0.0", map[string]any{"visibility": "public"})).Str("integration.id")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	// Viewers read, without the signing secret.
	g := f.Check(f.ws_(viewer, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration")
	if _, shown := g.Body["integration"].(map[string]any)["signingSecret"]; shown {
		t.Fatal("a viewer sees the signing secret")
	}
	f.Check(f.ws_(viewer, "GET", "/v1/admin/integrations", nil), 200, "listIntegrations")
	for _, r := range []apitest.Req{
		{Method: "POST", Path: "/v1/admin/integrations", Body: integrationDef("v", "1.0.0", nil)},
		{Method: "PUT", Path: "/v1/admin/integrations/" + id, Body: map[string]any{"title": "x"}},
		{Method: "DELETE", Path: "/v1/admin/integrations/" + id},
		{Method: "POST", Path: "/v1/admin/integrations/request-verification", Body: map[string]any{"integrationId": id}},
		{Method: "GET", Path: "/v1/admin/integrations/iaks?integrationId=" + id},
		{Method: "POST", Path: "/v1/admin/integrations/iaks", Body: map[string]any{"integrationId": id}},
	} {
		r.Token, r.Headers = viewer, map[string]string{"x-workspace-id": f.ws}
		if got := f.Do(r); got.Status != 403 {
			t.Errorf("viewer %s %s: %d, want 403", r.Method, r.Path, got.Status)
		}
	}

	for _, tc := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"no name", map[string]any{"version": "1.0.0"}, 400, "name"},
		{"bad name", map[string]any{"name": "Not OK", "version": "1.0.0"}, 400, "name"},
		{"bad version", map[string]any{"name": "ok", "version": "1.0"}, 400, "version"},
		{"bad url", map[string]any{"name": "ok", "version": "1.0.0", "url": "ftp://x"}, 400, "url"},
		{"dev and public", map[string]any{"name": "ok", "version": "1.0.0", "dev": true, "visibility": "public"}, 400, "visibility"},
		{"bad secret name", map[string]any{"name": "ok", "version": "1.0.0", "secrets": map[string]any{"lower": "x"}}, 400, "secrets.lower"},
		{"unknown field", map[string]any{"name": "ok", "version": "1.0.0", "nope": 1}, 400, "nope"},
		{"bad state type", map[string]any{"name": "ok", "version": "1.0.0", "states": map[string]any{"s": map[string]any{"type": "bot", "schema": map[string]any{}}}}, 400, "states.s.type"},
		{"channel without messages", map[string]any{"name": "ok", "version": "1.0.0", "channels": map[string]any{"c": map[string]any{}}}, 400, "messages"},
		{"bad maxExecutionTime", map[string]any{"name": "ok", "version": "1.0.0", "maxExecutionTime": 0}, 400, "maxExecutionTime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", tc.body)
			if r.Status != tc.status || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Raw, tc.status, tc.want)
			}
		})
	}
	if n := len(f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations", nil), 200, "listIntegrations").List("integrations")); n != 1 {
		t.Fatalf("refused creations wrote %d integrations", n-1)
	}
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+id, map[string]any{"visibility": "secret"}), 400, "")
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/intver_nope", map[string]any{"title": "x"}), 404, "")

	// Verification: requested for a public version, once.
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/request-verification", map[string]any{"integrationId": id}), 200, "requestIntegrationVerification")
	if s := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration").Str("integration.verificationStatus"); s != "pending" {
		t.Fatalf("verification status %s", s)
	}
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/request-verification", map[string]any{"integrationId": id}), 200, "requestIntegrationVerification")
	priv := f.createIntegration(f.AdminToken, integrationDef("priv", "1.0.0", nil)).Str("integration.id")
	f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/request-verification", map[string]any{"integrationId": priv}), 400, "")
}

// TestConcurrentIntegrationWrites: concurrent creations of one version
// make one, concurrent updates lose nothing.
func TestConcurrentIntegrationWrites(t *testing.T) {
	f := newFixture(t)
	const n = 8
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			statuses[i] = f.ws_(f.AdminToken, "POST", "/v1/admin/integrations", integrationDef("race", "1.0.0", nil)).Status
		}(i)
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		if s == 200 {
			created++
		} else if s != 409 {
			t.Fatalf("status %d", s)
		}
	}
	if created != 1 {
		t.Fatalf("%d creations of one version", created)
	}
	id := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/race/1.0.0", nil), 200, "getIntegrationByName").Str("integration.id")
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+id, map[string]any{"attributes": map[string]any{fmt.Sprintf("k%d", i): "v"}}), 200, "updateIntegration")
		}(i)
	}
	wg.Wait()
	attrs := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/integrations/"+id, nil), 200, "getIntegration").Body["integration"].(map[string]any)["attributes"].(map[string]any)
	if len(attrs) != n+1 {
		t.Fatalf("attributes after %d concurrent updates: %v", n, attrs)
	}
}

// TestWorkspaceWithIntegrationsIsNotDeleted: deleting a workspace would
// orphan its integrations (public ones stay listed), so it is refused until
// they are deleted.
func TestWorkspaceWithIntegrationsIsNotDeleted(t *testing.T) {
	f := newFixture(t)
	r := f.Check(f.createIntegration(f.AdminToken, integrationDef("orphan", "1.0.0", nil)), 200, "createIntegration")
	id := r.Str("integration.id")
	path := "/v1/admin/workspaces/" + f.ws
	if r := f.Do(apitest.Req{Method: "DELETE", Path: path, Token: f.AdminToken}); r.Status != 409 || !strings.Contains(r.Str("message"), "integrations") {
		t.Fatalf("delete workspace with an integration: %d %s", r.Status, r.Raw)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/integrations/"+id, nil), 200, "deleteIntegration")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: path, Token: f.AdminToken}), 200, "deleteWorkspace")
}

// TestWorkspaceDeleteRacesIntegrationCreate: a workspace deleted while an
// integration is being created in it either refuses (409: the integration
// was counted first) or makes the creation fail; never do both succeed,
// which would leave the integration in a deleted workspace.
func TestWorkspaceDeleteRacesIntegrationCreate(t *testing.T) {
	f := newFixture(t)
	both := 0
	for trial := 0; trial < 30; trial++ {
		ws := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: f.AdminToken, Body: map[string]any{"name": "race"}}), 200, "createWorkspace").Str("id")
		hdr := map[string]string{"x-workspace-id": ws}
		var created, deleted int
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			created = f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/integrations", Token: f.AdminToken, Headers: hdr,
				Body: integrationDef(fmt.Sprintf("race%d", trial), "1.0.0", map[string]any{"visibility": "public"})}).Status
		}()
		go func() {
			defer wg.Done()
			<-start
			deleted = f.Do(apitest.Req{Method: "DELETE", Path: "/v1/admin/workspaces/" + ws, Token: f.AdminToken}).Status
		}()
		close(start)
		wg.Wait()
		if created == 200 && deleted == 200 {
			both++
		}
		if created >= 500 || deleted >= 500 {
			t.Fatalf("trial %d: create %d, delete %d", trial, created, deleted)
		}
	}
	if both > 0 {
		t.Fatalf("in %d of 30 trials the integration was created in a workspace deleted at the same time", both)
	}
}
