package httpapi_test

import (
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

func interfaceDef(name, version string, extra map[string]any) map[string]any {
	d := map[string]any{
		"name": name, "version": version,
		"entities":     map[string]any{"item": map[string]any{"title": "Item", "schema": map[string]any{"type": "object"}}},
		"actions":      map[string]any{"create": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"events":       map[string]any{"created": map[string]any{"schema": map[string]any{}}},
		"channels":     map[string]any{"main": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}},
		"nameTemplate": map[string]any{"script": "{{item}}", "language": "handlebars"},
		"attributes":   map[string]any{"kind": "crud"},
		"sdkVersion":   "0.10.10",
	}
	for k, v := range extra {
		d[k] = v
	}
	return d
}

// TestInterfaceLifecycle: create, read by id and by name, versions created
// once, patch, list with filters and pages, delete; bad input is 400.
func TestInterfaceLifecycle(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	c := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.0.0", nil)), 200, "createInterface")
	id := c.Str("interface.id")
	if c.Str("interface.title") != "creatable" || c.Str("interface.nameTemplate.language") != "handlebars" || c.Str("interface.attributes.kind") != "crud" || c.Body["interface"].(map[string]any)["public"] != false {
		t.Fatalf("created: %s", c.Raw)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/"+id, nil), 200, "getInterface")
	// Ids carry the prefix the CLI recognizes as an id (Botpress's, shared
	// with integration versions); one kind's id is never found as the other.
	if !strings.HasPrefix(id, "intver_") {
		t.Fatalf("interface id %q", id)
	}
	integ := f.createIntegration(tok, integrationDef("impl", "1.0.0", nil)).Str("integration.id")
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/"+integ, nil), 404, "")
	f.Check(f.ws_(tok, "PUT", "/v1/admin/interfaces/"+integ, map[string]any{"title": "x"}), 404, "")
	f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+id, nil), 404, "")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+id, nil), 404, "")
	v11 := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.1.0", map[string]any{"title": "Creatable"})), 200, "createInterface").Str("interface.id")
	f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("listable", "0.1.0", nil)), 200, "createInterface")
	if got := f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/creatable/1.0.0", nil), 200, "getInterfaceByName").Str("interface.id"); got != id {
		t.Fatalf("by name: %s", got)
	}
	if got := f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/creatable/latest", nil), 200, "getInterfaceByName").Str("interface.id"); got != v11 {
		t.Fatalf("latest: %s", got)
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/creatable/2.0.0", nil), 404, "")
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/creatable/^1", nil), 400, "")
	// A version is created once.
	if r := f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.0.0", nil)); r.Status != 409 || r.Str("type") != "AlreadyExists" {
		t.Fatalf("same version twice: %d %s", r.Status, r.Raw)
	}

	u := f.Check(f.ws_(tok, "PUT", "/v1/admin/interfaces/"+id, map[string]any{
		"actions":      map[string]any{"create": nil, "update": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"attributes":   map[string]any{"kind": nil, "tier": "gold"},
		"nameTemplate": nil, "description": "Makes things",
	}), 200, "updateInterface")
	ui := u.Body["interface"].(map[string]any)
	acts := ui["actions"].(map[string]any)
	if acts["create"] != nil || acts["update"] == nil || ui["nameTemplate"] != nil || ui["description"] != "Makes things" ||
		ui["attributes"].(map[string]any)["tier"] != "gold" || ui["attributes"].(map[string]any)["kind"] != nil || ui["entities"].(map[string]any)["item"] == nil {
		t.Fatalf("update: %s", u.Raw)
	}

	ids := func(r apitest.Response) []string {
		var out []string
		for _, it := range r.List("interfaces") {
			out = append(out, it.(map[string]any)["id"].(string))
		}
		return out
	}
	for _, q := range []struct {
		query string
		n     int
	}{{"", 3}, {"?name=creatable", 2}, {"?name=creatable&version=1.1.0", 1}, {"?version=0.1.0", 1}, {"?name=creat", 0}, {"?name=nope", 0}} {
		if got := ids(f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces"+q.query, nil), 200, "listInterfaces")); len(got) != q.n {
			t.Errorf("list%s: %v, want %d", q.query, got, q.n)
		}
	}
	var seen []string
	next := ""
	for i := 0; i < 5; i++ {
		r := f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces?pageSize=1"+next, nil), 200, "listInterfaces")
		seen = append(seen, ids(r)...)
		n, _ := r.Body["meta"].(map[string]any)["nextToken"].(string)
		if n == "" {
			break
		}
		next = "&nextToken=" + url.QueryEscape(n)
	}
	if len(seen) != 3 || seen[0] != id || seen[1] != v11 {
		t.Fatalf("pages: %v", seen)
	}

	// Bad input.
	big := strings.Repeat("x", 400<<10)
	for _, b := range []struct {
		body   any
		status int
	}{
		{interfaceDef("Not Ok", "1.0.0", nil), 400},
		{interfaceDef("fine", "v1", nil), 400},
		{map[string]any{"version": "1.0.0"}, 400},
		{interfaceDef("fine", "1.0.0", map[string]any{"colour": "red"}), 400},
		{interfaceDef("fine", "1.0.0", map[string]any{"actions": map[string]any{"a": map[string]any{}}}), 400},
		{interfaceDef("fine", "1.0.0", map[string]any{"entities": map[string]any{"big": map[string]any{"schema": map[string]any{"description": big}}}}), 413},
	} {
		if r := f.ws_(tok, "POST", "/v1/admin/interfaces", b.body); r.Status != b.status {
			t.Errorf("%v: %d %s, want %d", b.body, r.Status, r.Raw, b.status)
		}
	}
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/fine/latest", nil), 404, "")
	for _, q := range []string{"?version=x", "?pageSize=101", "?nextToken=forged"} {
		f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces"+q, nil), 400, "")
	}

	f.Check(f.ws_(tok, "DELETE", "/v1/admin/interfaces/"+id, nil), 200, "deleteInterface")
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/"+id, nil), 404, "")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/interfaces/"+id, nil), 404, "")
	f.Check(f.ws_(tok, "GET", "/v1/admin/interfaces/creatable/1.0.0", nil), 404, "")
	// The deleted version's slot is free again.
	f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.0.0", nil)), 200, "createInterface")
}

// TestInterfaceTenancyAndHub: another workspace's private interface is
// 404 to every operation; a public one is readable by all (and in the
// hub), changeable only by its workspace, its name one workspace's;
// viewers read, developers write.
func TestInterfaceTenancyAndHub(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	private := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("hidden", "1.0.0", nil)), 200, "createInterface").Str("interface.id")
	public := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("acme-llm", "1.0.0", map[string]any{"public": true})), 200, "createInterface").Str("interface.id")

	outTok, _ := newFixtureOn(f).invite("eve@example.com", "viewer")
	outWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outTok, Body: map[string]any{"name": "Eve"}}), 200, "createWorkspace").Str("id")
	out := &fixture{Env: f.Env, ws: outWs}

	for _, r := range []apitest.Req{
		{Method: "GET", Path: "/v1/admin/interfaces/" + private},
		{Method: "GET", Path: "/v1/admin/interfaces/hidden/1.0.0"},
		{Method: "GET", Path: "/v1/admin/interfaces/hidden/latest"},
		{Method: "PUT", Path: "/v1/admin/interfaces/" + private, Body: map[string]any{"title": "x"}},
		{Method: "DELETE", Path: "/v1/admin/interfaces/" + private},
		{Method: "GET", Path: "/v1/admin/hub/interfaces/" + private},
		{Method: "GET", Path: "/v1/admin/hub/interfaces/hidden/1.0.0"},
	} {
		r.Token, r.Headers = outTok, map[string]string{"x-workspace-id": outWs}
		if got := f.Do(r); got.Status != 404 {
			t.Errorf("outsider %s %s: %d %s, want 404", r.Method, r.Path, got.Status, got.Raw)
		}
	}
	if l := out.Check(out.ws_(outTok, "GET", "/v1/admin/interfaces", nil), 200, "listInterfaces"); len(l.List("interfaces")) != 0 {
		t.Fatalf("outsider's list: %s", l.Raw)
	}
	out.Check(out.ws_(outTok, "GET", "/v1/admin/interfaces/"+public, nil), 200, "getInterface")
	if got := out.Check(out.ws_(outTok, "GET", "/v1/admin/interfaces/acme-llm/latest", nil), 200, "getInterfaceByName").Str("interface.id"); got != public {
		t.Fatalf("public by name: %s", got)
	}
	for _, r := range []apitest.Req{
		{Method: "PUT", Path: "/v1/admin/interfaces/" + public, Body: map[string]any{"title": "x"}},
		{Method: "DELETE", Path: "/v1/admin/interfaces/" + public},
	} {
		r.Token, r.Headers = outTok, map[string]string{"x-workspace-id": outWs}
		if got := f.Do(r); got.Status != 403 {
			t.Errorf("outsider %s %s: %d %s, want 403", r.Method, r.Path, got.Status, got.Raw)
		}
	}
	// The public name is the first workspace's; privately, others may use it.
	out.Check(out.ws_(outTok, "POST", "/v1/admin/interfaces", interfaceDef("acme-llm", "2.0.0", map[string]any{"public": true})), 409, "")
	mine := out.Check(out.ws_(outTok, "POST", "/v1/admin/interfaces", interfaceDef("acme-llm", "0.5.0", nil)), 200, "createInterface").Str("interface.id")
	if got := out.Check(out.ws_(outTok, "GET", "/v1/admin/interfaces/acme-llm/latest", nil), 200, "getInterfaceByName").Str("interface.id"); got != mine {
		t.Fatalf("own version first: %s", got)
	}
	out.Check(out.ws_(outTok, "PUT", "/v1/admin/interfaces/"+mine, map[string]any{"public": true}), 409, "")

	// The hub: public versions of every workspace, to any caller.
	hub := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces", Token: outTok}), 200, "listPublicInterfaces")
	// (beside the platform's standard interfaces, shared/hubstd; another
	// workspace's private versions never)
	var listed []any
	for _, it := range hub.List("interfaces") {
		if m := it.(map[string]any); m["name"] == "acme-llm" || m["id"] == mine {
			listed = append(listed, m["id"])
		}
	}
	if len(listed) != 1 || listed[0] != public {
		t.Fatalf("hub: %s", hub.Raw)
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces?name=acme-llm&version=1.0.0", Token: outTok}), 200, "listPublicInterfaces")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/" + public, Token: outTok}), 200, "getPublicInterfaceById")
	if got := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/acme-llm/latest", Token: outTok}), 200, "getPublicInterface").Str("interface.id"); got != public {
		t.Fatalf("hub by name: %s", got)
	}
	// Made private, it leaves the hub.
	f.Check(f.ws_(tok, "PUT", "/v1/admin/interfaces/"+public, map[string]any{"public": false}), 200, "updateInterface")
	if l := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces?name=acme-llm", Token: outTok}), 200, "listPublicInterfaces").List("interfaces"); len(l) != 0 {
		t.Fatalf("hub after unpublishing: %v", l)
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/" + public, Token: outTok}), 404, "")

	// Roles: a viewer reads, does not write.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.Check(f.ws_(viewer, "GET", "/v1/admin/interfaces", nil), 200, "listInterfaces")
	for _, r := range []struct{ method, path string }{{"POST", "/v1/admin/interfaces"}, {"PUT", "/v1/admin/interfaces/" + private}, {"DELETE", "/v1/admin/interfaces/" + private}} {
		var body any
		if r.method != "DELETE" {
			body = interfaceDef("viewers", "1.0.0", nil)
			if r.method == "PUT" {
				body = map[string]any{"title": "x"}
			}
		}
		if got := f.ws_(viewer, r.method, r.path, body); got.Status != 403 {
			t.Errorf("viewer %s %s: %d", r.method, r.path, got.Status)
		}
	}
}

// TestInterfaceVersionCreatedOnce: concurrent creations of one name and
// version: exactly one succeeds (the slot's conditional write), the others
// 409, and one record exists.
func TestInterfaceVersionCreatedOnce(t *testing.T) {
	f := newFixture(t)
	const n = 8
	statuses := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses <- f.ws_(f.AdminToken, "POST", "/v1/admin/interfaces", interfaceDef("racy", "1.0.0", nil)).Status
		}()
	}
	wg.Wait()
	close(statuses)
	won := 0
	for s := range statuses {
		if s == 200 {
			won++
		} else if s != 409 {
			t.Fatalf("status %d", s)
		}
	}
	if l := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/interfaces?name=racy", nil), 200, "listInterfaces").List("interfaces"); won != 1 || len(l) != 1 {
		t.Fatalf("%d creations succeeded, %d records", won, len(l))
	}
}

// TestWorkspaceWithInterfacesIsNotDeleted: a workspace keeps its interfaces
// (the public ones in the hub) from being orphaned: deleting it is refused
// until they are deleted.
func TestWorkspaceWithInterfacesIsNotDeleted(t *testing.T) {
	f := newFixture(t)
	id := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/interfaces", interfaceDef("kept", "1.0.0", map[string]any{"public": true})), 200, "createInterface").Str("interface.id")
	if r := f.ws_(f.AdminToken, "DELETE", "/v1/admin/workspaces/"+f.ws, nil); r.Status != 409 || r.Str("type") != "ReferenceConstraint" {
		t.Fatalf("delete with an interface: %d %s", r.Status, r.Raw)
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/" + id, Token: f.AdminToken}), 200, "getPublicInterfaceById")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/interfaces/"+id, nil), 200, "deleteInterface")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/workspaces/"+f.ws, nil), 200, "deleteWorkspace")
}

// TestIntegrationImplementsInterface: an integration declaring an interface
// by id (as the CLI's deploy does) carries the interface's name and version
// from the catalogue, and lists filter on them; another workspace's private
// interface is not resolved (nothing about it leaks).
func TestIntegrationImplementsInterface(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	private := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.2.0", nil)), 200, "createInterface").Str("interface.id")
	public := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("acme-llm", "3.0.0", map[string]any{"public": true})), 200, "createInterface").Str("interface.id")
	impl := func(key, id string) map[string]any {
		return map[string]any{key: map[string]any{"id": id, "actions": map[string]any{"create": map[string]any{"name": "sendReminder"}}}}
	}
	iface := func(r apitest.Response, key string) map[string]any {
		return r.Body["integration"].(map[string]any)["interfaces"].(map[string]any)[key].(map[string]any)
	}
	r := f.createIntegration(tok, integrationDef("impl", "1.0.0", map[string]any{"interfaces": impl("creatable<item>", private)}))
	if e := iface(r, "creatable<item>"); e["name"] != "creatable" || e["version"] != "1.2.0" || e["id"] != private {
		t.Fatalf("resolved: %v", e)
	}
	id := r.Str("integration.id")
	for _, q := range []string{"?interfaceName=creatable", "?interfaceId=" + private} {
		if l := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations"+q, nil), 200, "listIntegrations").List("integrations"); len(l) != 1 || l[0].(map[string]any)["id"] != id {
			t.Fatalf("%s: %v", q, l)
		}
	}
	u := f.Check(f.ws_(tok, "PUT", "/v1/admin/integrations/"+id, map[string]any{"interfaces": impl("chat", public)}), 200, "updateIntegration")
	if e := iface(u, "chat"); e["name"] != "acme-llm" || e["version"] != "3.0.0" {
		t.Fatalf("resolved on update: %v", e)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/integrations/"+id+"/validate", map[string]any{"interfaces": impl("chat2", public)}), 200, "validateIntegrationUpdate")

	other := newFixtureOn(f)
	o := other.createIntegration(tok, integrationDef("theirs", "1.0.0", map[string]any{"interfaces": map[string]any{
		"a": impl("a", private)["a"], "b": impl("b", public)["b"],
	}}))
	if a, b := iface(o, "a"), iface(o, "b"); a["name"] != "a" || a["version"] != "" || b["name"] != "acme-llm" || b["version"] != "3.0.0" {
		t.Fatalf("another workspace: a %v, b %v", a, b)
	}
}
