package httpapi_test

import (
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestValidateIntegrationDryRuns: validateIntegrationCreation and
// validateIntegrationUpdate (bp deploy --dryRun) answer what
// createIntegration and updateIntegration would (same status and error
// type for each body), and write nothing.
func TestValidateIntegrationDryRuns(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	existing := f.createIntegration(tok, integrationDef("acme", "1.0.0", nil)).Str("integration.id")
	other := newFixtureOn(f)
	other.createIntegration(tok, integrationDef("taken", "1.0.0", map[string]any{"visibility": "public"}))
	foreignPublic := other.createIntegration(tok, integrationDef("taken", "1.1.0", map[string]any{"visibility": "public"})).Str("integration.id")
	foreignPrivate := other.createIntegration(tok, integrationDef("theirs", "1.0.0", nil)).Str("integration.id")
	mineNamedTaken := f.createIntegration(tok, integrationDef("taken", "0.1.0", nil)).Str("integration.id")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	big := strings.Repeat("x", 400<<10)

	creations := []struct {
		name   string
		token  string
		body   map[string]any
		status int
		typ    string
	}{
		{"new version", tok, integrationDef("acme", "2.0.0", nil), 200, ""},
		{"version exists", tok, integrationDef("acme", "1.0.0", nil), 409, "AlreadyExists"},
		{"name published by another workspace", tok, integrationDef("taken", "3.0.0", map[string]any{"visibility": "public"}), 409, "AlreadyExists"},
		{"bad name", tok, integrationDef("Not A Name", "1.0.0", nil), 400, "InvalidPayload"},
		{"bad version", tok, integrationDef("acme", "one", nil), 400, "InvalidPayload"},
		{"unknown field", tok, integrationDef("acme", "3.0.0", map[string]any{"colour": "red"}), 400, "InvalidPayload"},
		{"public dev version", tok, integrationDef("acme", "3.0.0", map[string]any{"dev": true, "visibility": "public"}), 400, "InvalidPayload"},
		{"too large", tok, integrationDef("acme", "3.0.0", map[string]any{"entities": map[string]any{"big": map[string]any{"schema": map[string]any{"description": big}}}}), 413, ""},
		{"viewer", viewer, integrationDef("acme", "3.0.0", nil), 403, "Forbidden"},
	}
	for _, c := range creations {
		t.Run("create/"+c.name, func(t *testing.T) {
			dry := f.ws_(c.token, "POST", "/v1/admin/integrations/validate", c.body)
			if c.status == 200 {
				f.Check(dry, 200, "validateIntegrationCreation")
				if string(dry.Raw) != "{}\n" {
					t.Fatalf("dry run body: %q", dry.Raw)
				}
				// Nothing was written: the version does not exist yet.
				f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+c.body["name"].(string)+"/"+c.body["version"].(string), nil), 404, "")
			}
			real := f.ws_(c.token, "POST", "/v1/admin/integrations", c.body)
			if dry.Status != c.status || real.Status != c.status || dry.Str("type") != real.Str("type") || (c.typ != "" && dry.Str("type") != c.typ) {
				t.Fatalf("dry run %d %s, real %d %s, want %d %s", dry.Status, dry.Raw, real.Status, real.Raw, c.status, c.typ)
			}
		})
	}

	updates := []struct {
		name   string
		token  string
		id     string
		body   map[string]any
		status int
	}{
		{"title", tok, existing, map[string]any{"title": "Acme renamed"}, 200},
		{"bad maxExecutionTime", tok, existing, map[string]any{"maxExecutionTime": 0}, 400},
		{"bad secret name", tok, existing, map[string]any{"secrets": map[string]any{"lower": "x"}}, 400},
		{"publish a name another workspace publishes", tok, mineNamedTaken, map[string]any{"visibility": "public"}, 409},
		{"another workspace's public version", tok, foreignPublic, map[string]any{"title": "x"}, 403},
		{"another workspace's private version", tok, foreignPrivate, map[string]any{"title": "x"}, 404},
		{"unknown id", tok, "intver_01JAAAAAAAAAAAAAAAAAAAAAAA", map[string]any{"title": "x"}, 404},
		{"viewer", viewer, existing, map[string]any{"title": "x"}, 403},
	}
	for _, c := range updates {
		t.Run("update/"+c.name, func(t *testing.T) {
			before := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+existing, nil), 200, "getIntegration").Str("integration.updatedAt")
			dry := f.ws_(c.token, "PUT", "/v1/admin/integrations/"+c.id+"/validate", c.body)
			if c.status == 200 {
				f.Check(dry, 200, "validateIntegrationUpdate")
				g := f.Check(f.ws_(tok, "GET", "/v1/admin/integrations/"+existing, nil), 200, "getIntegration")
				if g.Str("integration.title") == "Acme renamed" || g.Str("integration.updatedAt") != before {
					t.Fatalf("the dry run wrote: %s", g.Raw)
				}
			}
			real := f.ws_(c.token, "PUT", "/v1/admin/integrations/"+c.id, c.body)
			if dry.Status != c.status || real.Status != c.status || dry.Str("type") != real.Str("type") {
				t.Fatalf("dry run %d %s, real %d %s, want %d", dry.Status, dry.Raw, real.Status, real.Raw, c.status)
			}
		})
	}

	// The integration's own key may validate its updates, as it may update.
	iak := f.Check(f.ws_(tok, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": existing}), 200, "createIntegrationApiKey").Str("value")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/integrations/" + existing + "/validate", Token: iak,
		Headers: map[string]string{"x-workspace-id": f.ws}, Body: map[string]any{"title": "By itself"}}), 200, "validateIntegrationUpdate")
}
