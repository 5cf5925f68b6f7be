package httpapi_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestPublicIntegrationsHub: the hub lists every workspace's public
// versions (not private, unlisted or dev ones) to any caller, without a
// workspace, in the reference's shapes, page by page; it reads public and
// unlisted versions by id and by name, and never a private one, not even
// for its own workspace.
func TestPublicIntegrationsHub(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	f.Check(f.ws_(tok, "PUT", "/v1/admin/workspaces/"+f.ws, map[string]any{"handle": "acme"}), 200, "updateWorkspace")
	private := f.createIntegration(tok, integrationDef("secretive", "1.0.0", nil)).Str("integration.id")
	pub10 := f.createIntegration(tok, integrationDef("shared", "1.0.0", map[string]any{"visibility": "public"})).Str("integration.id")
	pub11 := f.createIntegration(tok, integrationDef("shared", "1.1.0", map[string]any{"visibility": "public"})).Str("integration.id")
	unlisted := f.createIntegration(tok, integrationDef("quiet", "1.0.0", map[string]any{"visibility": "unlisted"})).Str("integration.id")
	dev := f.createIntegration(tok, integrationDef("devver", "0.0.1", map[string]any{"dev": true})).Str("integration.id")
	// Another workspace publishes too.
	other := newFixtureOn(f)
	zeta := other.createIntegration(tok, integrationDef("zeta", "2.0.0", map[string]any{"visibility": "public", "description": "Talks to Zeta"})).Str("integration.id")

	// An outsider: an account in no workspace, no x-workspace-id.
	outTok, _ := newFixtureOn(f).invite("eve@example.com", "viewer")
	hub := func(token, query string) apitest.Response {
		t.Helper()
		return f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/integrations" + query, Token: token})
	}
	ids := func(r apitest.Response) []string {
		var out []string
		for _, it := range r.List("integrations") {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	all := f.Check(hub(outTok, ""), 200, "listPublicIntegrations")
	if got := ids(all); len(got) != 3 || got[0] != zeta || got[1] != pub11 || got[2] != pub10 {
		t.Fatalf("hub (newest first) %v, want [%s %s %s]: %s", got, zeta, pub11, pub10, all.Raw)
	}
	first := all.List("integrations")[1].(map[string]any)
	ow := first["ownerWorkspace"].(map[string]any)
	if ow["id"] != f.ws || ow["name"] != "Acme" || ow["handle"] != "acme" || first["meta"].(map[string]any)["installs"] != float64(0) {
		t.Fatalf("owner and meta: %v", first)
	}
	if ow := all.List("integrations")[0].(map[string]any)["ownerWorkspace"].(map[string]any); ow["id"] != other.ws || ow["handle"] != nil {
		t.Fatalf("other owner: %v", ow)
	}

	// Paging, on the index (creation order) and in memory (sorted by name):
	// every listed version once, in order, and a token only continues its list.
	for _, q := range []struct{ query, op string }{{"", ""}, {"&sortBy=name", ""}, {"&direction=asc", ""}} {
		var seen []string
		var tok1 string
		next := ""
		for i := 0; i < 10; i++ {
			r := f.Check(hub(outTok, "?pageSize=1"+q.query+next), 200, "listPublicIntegrations")
			seen = append(seen, ids(r)...)
			n, _ := r.Body["meta"].(map[string]any)["nextToken"].(string)
			if n == "" {
				break
			}
			if tok1 == "" {
				tok1 = n
			}
			next = "&nextToken=" + url.QueryEscape(n)
		}
		if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] || seen[0] == seen[2] {
			t.Fatalf("pages of %q: %v", q.query, seen)
		}
		if q.query == "&sortBy=name" && (seen[0] != pub10 && seen[0] != pub11 || seen[2] != zeta) {
			t.Fatalf("by name: %v", seen)
		}
		if q.query == "&direction=asc" && seen[0] != pub10 {
			t.Fatalf("oldest first: %v", seen)
		}
		if r := hub(outTok, "?pageSize=1&name=shared&nextToken="+url.QueryEscape(tok1)); r.Status != 400 {
			t.Fatalf("token of another list: %d", r.Status)
		}
	}

	// Filters.
	for _, c := range []struct {
		query string
		want  []string
	}{
		{"?name=shared", []string{pub11, pub10}},
		{"?name=shared&version=latest", []string{pub11}},
		{"?name=shared&version=1.0.0", []string{pub10}},
		{"?version=latest&sortBy=name", []string{pub11, zeta}},
		{"?name=secretive", nil},
		{"?name=quiet", nil},
		{"?name=devver", nil},
		{"?search=zeta", []string{zeta}},
		{"?interfaceName=creatable&sortBy=name&direction=asc", []string{pub10, pub11, zeta}},
		{"?verificationStatus=pending", nil},
		{"?visibility=private", nil},
		{"?dev=true", nil},
	} {
		r := f.Check(hub(outTok, c.query), 200, "listPublicIntegrations")
		if got := ids(r); len(got) != len(c.want) || (len(got) > 0 && (got[0] != c.want[0] || got[len(got)-1] != c.want[len(c.want)-1])) {
			t.Errorf("%s: %v, want %v", c.query, got, c.want)
		}
		if c.query == "?search=zeta" && r.List("integrations")[0].(map[string]any)["matchedOn"].(map[string]any)["name"] != true {
			t.Errorf("matchedOn: %s", r.Raw)
		}
	}
	for _, q := range []string{"?sortBy=size", "?version=one", "?pageSize=0", "?limit=1000", "?nextToken=forged"} {
		if r := hub(outTok, q); r.Status != 400 {
			t.Errorf("%s: %d %s", q, r.Status, r.Raw)
		}
	}

	// By id and by name: public and unlisted, never private or dev, not
	// even for the owning workspace; no signing secret.
	for _, c := range []struct {
		path   string
		status int
		op     string
	}{
		{"/v1/admin/hub/integrations/" + pub10, 200, "getPublicIntegrationById"},
		{"/v1/admin/hub/integrations/" + unlisted, 200, "getPublicIntegrationById"},
		{"/v1/admin/hub/integrations/" + zeta, 200, "getPublicIntegrationById"},
		{"/v1/admin/hub/integrations/" + private, 404, ""},
		{"/v1/admin/hub/integrations/" + dev, 404, ""},
		{"/v1/admin/hub/integrations/intver_nope", 404, ""},
		{"/v1/admin/hub/integrations/shared/latest", 200, "getPublicIntegration"},
		{"/v1/admin/hub/integrations/shared/1.0.0", 200, "getPublicIntegration"},
		{"/v1/admin/hub/integrations/quiet/1.0.0", 200, "getPublicIntegration"},
		{"/v1/admin/hub/integrations/shared/9.0.0", 404, ""},
		{"/v1/admin/hub/integrations/secretive/1.0.0", 404, ""},
		{"/v1/admin/hub/integrations/secretive/latest", 404, ""},
		{"/v1/admin/hub/integrations/shared/^1.0.0", 400, ""},
	} {
		for _, token := range []string{outTok, tok} {
			r := f.Check(f.Do(apitest.Req{Method: "GET", Path: c.path, Token: token, Headers: map[string]string{"x-workspace-id": f.ws}}), c.status, c.op)
			if c.status != 200 {
				continue
			}
			in := r.Body["integration"].(map[string]any)
			if _, leaked := in["signingSecret"]; leaked || in["ownerWorkspace"] == nil {
				t.Fatalf("%s: %s", c.path, r.Raw)
			}
		}
	}
	if v := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/integrations/shared/latest", Token: outTok}), 200, "getPublicIntegration").Str("integration.id"); v != pub11 {
		t.Fatalf("latest: %s", v)
	}
	// A namespaced name (handle/name), its slash percent-encoded as the client sends it.
	ns := other.createIntegration(tok, integrationDef("acme/widget", "1.0.0", map[string]any{"visibility": "public"})).Str("integration.id")
	if v := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/integrations/acme%2Fwidget/1.0.0", Token: outTok}), 200, "getPublicIntegration").Str("integration.id"); v != ns {
		t.Fatalf("namespaced: %s", v)
	}

	// installedByBotId: the caller's bots only.
	bot := f.createBot(tok, nil)
	f.Check(hub(tok, "?installedByBotId="+bot), 200, "listPublicIntegrations")
	if r := hub(outTok, "?installedByBotId="+bot); r.Status != 404 {
		t.Fatalf("another workspace's bot: %d %s", r.Status, r.Raw)
	}
	// Any authenticated caller (a bot API key too); nobody without a token.
	bak := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	f.Check(hub(bak, ""), 200, "listPublicIntegrations")
	if r := hub("", ""); r.Status != 401 {
		t.Fatalf("anonymous: %d", r.Status)
	}
}

// TestHubReadsArePerPage: the unfiltered hub page and a name's versions
// read what they answer, not the whole public catalogue (no Scan, one Query
// page); interface lists likewise.
func TestHubReadsArePerPage(t *testing.T) {
	f := newFixture(t)
	rec := recordUsage(f.Env)
	tok := f.AdminToken
	for i := 0; i < 30; i++ {
		f.createIntegration(tok, integrationDef(fmt.Sprintf("pub%02d", i), "1.0.0", map[string]any{"visibility": "public"}))
		f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef(fmt.Sprintf("if%02d", i), "1.0.0", map[string]any{"public": true})), 200, "createInterface")
	}
	f.createIntegration(tok, integrationDef("pub07", "1.1.0", map[string]any{"visibility": "public"}))
	for _, c := range []struct {
		path, op       string
		n              int
		queries, items int // items: token + answered items + owner workspace (+ name claim and slots)
	}{
		{"/v1/admin/hub/integrations?pageSize=3", "listPublicIntegrations", 3, 1, 1 + 3 + 1},
		{"/v1/admin/hub/integrations?pageSize=3&direction=asc", "listPublicIntegrations", 3, 1, 1 + 3 + 1},
		{"/v1/admin/hub/integrations?name=pub07", "listPublicIntegrations", 2, 1, 1 + 1 + 2 + 2 + 1},
		{"/v1/admin/hub/interfaces?pageSize=3", "listPublicInterfaces", 3, 1, 1 + 3},
		{"/v1/admin/interfaces?pageSize=3", "listInterfaces", 3, 1, 1 + 1 + 3},
		{"/v1/admin/hub/interfaces?name=if07", "listPublicInterfaces", 1, 1, 1 + 1},
	} {
		r := f.Check(f.ws_(tok, "GET", c.path, nil), 200, c.op)
		n := len(r.List("integrations")) + len(r.List("interfaces"))
		u := rec.of(c.op)
		if n != c.n || u.Calls("Query") != c.queries || u.Calls("Scan") != 0 || u.ItemsRead > c.items {
			t.Errorf("%s: %d answered, %s, %d items read; want %d answered, %d Query, at most %d items", c.path, n, u, u.ItemsRead, c.n, c.queries, c.items)
		}
	}
}
