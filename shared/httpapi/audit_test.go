package httpapi_test

import (
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// Audit records: every successful Admin write in a workspace is recorded
// (who, which operation, which resource, when), newest first; a refused or
// failed write, a read and a dry run are not.
func TestAuditRecords(t *testing.T) {
	f := newFixture(t)
	records := func(token string) []map[string]any {
		t.Helper()
		var out []map[string]any
		path := "/v1/admin/workspaces/" + f.ws + "/audit-records?pageSize=2"
		for tok := ""; ; {
			p := path
			if tok != "" {
				p += "&nextToken=" + tok
			}
			r := f.Check(f.Do(apitest.Req{Method: "GET", Path: p, Token: token}), 200, "getAuditRecords")
			for _, x := range r.List("records") {
				out = append(out, x.(map[string]any))
			}
			if tok = r.Str("meta.nextToken"); tok == "" {
				return out
			}
		}
	}
	if r := records(f.AdminToken); len(r) != 1 || r[0]["action"] != "CREATE_WORKSPACE" || r[0]["resourceId"] != f.ws {
		t.Fatalf("records before any write but createWorkspace: %v", r)
	}
	bot := f.createBot(f.AdminToken, map[string]any{"name": "audited"})
	f.Check(f.updateBot(f.AdminToken, bot, map[string]any{"tags": map[string]string{"a": "b"}}), 200, "updateBot")
	_, member := f.invite("dev@example.com", "developer")
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/workspace-members/"+member, map[string]any{"role": "viewer"}), 200, "updateWorkspaceMember")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + f.ws, Token: f.AdminToken, Body: map[string]any{"name": "Renamed"}}), 200, "updateWorkspace")
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")

	// Not recorded: reads, refused and failed writes, dry runs.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	n := len(records(f.AdminToken))
	for _, tc := range []struct {
		name, token, method, path string
		body                      any
		status                    int
	}{
		{"read", f.AdminToken, "GET", "/v1/admin/bots", nil, 200},
		{"bad body", f.AdminToken, "POST", "/v1/admin/bots", map[string]any{"name": 3}, 400},
		{"unknown bot", f.AdminToken, "DELETE", "/v1/admin/bots/bot_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"viewer", viewer, "POST", "/v1/admin/bots", map[string]any{}, 403},
		{"dry run", f.AdminToken, "POST", "/v1/admin/integrations/validate", map[string]any{"name": "x", "version": "1.0.0"}, 0},
	} {
		r := f.ws_(tc.token, tc.method, tc.path, tc.body)
		if tc.status != 0 && r.Status != tc.status {
			t.Fatalf("%s: %d %s", tc.name, r.Status, r.Raw)
		}
		if m := len(records(f.AdminToken)); m != n {
			t.Fatalf("%s: %d records, want %d", tc.name, m, n)
		}
	}

	got := records(f.AdminToken)
	want := []struct{ action, value, resource string }{
		{"ADD_WORKSPACE_MEMBER", "createWorkspaceMember", ""},
		{"DELETE_BOT", "deleteBot", bot},
		{"UPDATE_WORKSPACE", "updateWorkspace", f.ws},
		{"UPDATE_WORKSPACE_MEMBER", "updateWorkspaceMember", member},
		{"ADD_WORKSPACE_MEMBER", "createWorkspaceMember", member},
		{"UPDATE_BOT", "updateBot", bot},
		{"CREATE_BOT", "createBot", bot},
		{"CREATE_WORKSPACE", "createWorkspace", f.ws},
	}
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		r := got[i]
		if r["action"] != w.action || r["value"] != w.value || (w.resource != "" && r["resourceId"] != w.resource) {
			t.Fatalf("record %d: %v, want %v", i, r, w)
		}
		if r["userEmail"] != "admin@localhost" || r["userId"] == nil || r["recordedAt"] == "" {
			t.Fatalf("record %d: who/when: %v", i, r)
		}
		if i > 0 && r["recordedAt"].(string) > got[i-1]["recordedAt"].(string) {
			t.Fatalf("not newest first: %v", got)
		}
	}
	if got[6]["resourceName"] != "audited" || got[7]["resourceName"] != "Acme" {
		t.Fatalf("createBot record: %v", got[6])
	}

	// A write with an integration's own key: recorded, with no user and the
	// key in the value.
	integ := f.createIntegration(f.AdminToken, integrationDef("audited", "1.0.0", nil)).Str("integration.id")
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": integ}), 200, "createIntegrationApiKey").Str("value")
	f.Check(f.ws_(key, "PUT", "/v1/admin/integrations/"+integ, map[string]any{"title": "By key"}), 200, "updateIntegration")
	byKey := records(f.AdminToken)[0]
	if byKey["userId"] != nil || byKey["userEmail"] != nil || byKey["resourceId"] != integ || byKey["action"] != "UNKNOWN" ||
		!strings.HasPrefix(byKey["value"].(string), "updateIntegration by integration key iak_") || strings.Contains(byKey["value"].(string), key) {
		t.Fatalf("record of a key's write: %v", byKey)
	}

	// Roles: administrators and owners read the log; others do not.
	dev, _ := f.invite("dev2@example.com", "developer")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/audit-records", Token: dev}), 403, "")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/audit-records", Token: viewer}), 403, "")
	// Tenancy: another workspace's log is its own; a non-member's is a 404.
	other := newFixtureOn(f)
	if r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + other.ws + "/audit-records", Token: f.AdminToken}), 200, "getAuditRecords"); len(r.List("records")) != 1 || r.List("records")[0].(map[string]any)["action"] != "CREATE_WORKSPACE" {
		t.Fatalf("other workspace's records: %s", r.Raw)
	}
	theirs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: viewer, Body: map[string]any{"name": "Theirs"}}), 200, "createWorkspace").Str("id")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + theirs + "/audit-records", Token: f.AdminToken}), 404, "")
}
