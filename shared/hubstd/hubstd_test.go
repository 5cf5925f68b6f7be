package hubstd_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/hubstd"
)

// TestStandardInterfacesPublished: a fresh platform's hub has the standard
// interfaces, readable by name as `bp interfaces get` reads them, and an
// integration implementing llm deploys with the interface resolved.
func TestStandardInterfacesPublished(t *testing.T) {
	e := apitest.New(t)
	for _, tc := range []struct{ name, version, action string }{
		{"llm", "11.0.0", "generateContent"},
		{"speech-to-text", "2.0.2", "transcribeAudio"},
		{"text-to-image", "2.1.2", "generateImage"},
		{"listable", "0.0.3", "list"},
		{"creatable", "0.0.3", "create"},
		{"readable", "0.0.3", "read"},
		{"updatable", "0.0.3", "update"},
		{"deletable", "0.0.3", "delete"},
		{"typing-indicator", "0.0.4", "startTypingIndicator"},
		{"hitl", "2.1.0", "startHitl"},
		{"proactive-user", "0.0.3", "getOrCreateUser"},
		{"proactive-conversation", "0.0.4", "getOrCreateConversation"},
	} {
		r := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/" + tc.name + "/latest", Token: e.AdminToken}), 200, "getPublicInterface")
		i := r.Body["interface"].(map[string]any)
		actions, _ := i["actions"].(map[string]any)
		if i["version"] != tc.version || i["id"] != hubstd.InterfaceID(tc.name, tc.version) || actions[tc.action] == nil {
			t.Errorf("%s: %s", tc.name, r.Raw)
		}
	}
	llm := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/interfaces/llm/11.0.0", Token: e.AdminToken}), 200, "getPublicInterface").Body["interface"].(map[string]any)
	in := llm["actions"].(map[string]any)["generateContent"].(map[string]any)["input"].(map[string]any)["schema"].(map[string]any)
	if _, ok := in["properties"].(map[string]any)["messages"]; !ok {
		t.Fatalf("llm's generateContent input schema: %v", in)
	}

	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "Impl"}}), 200, "createWorkspace").Str("id")
	h := map[string]string{"x-workspace-id": ws}
	e.Check(e.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/" + ws, Token: e.AdminToken, Body: map[string]any{"handle": "impl"}}), 200, "updateWorkspace")
	// As `bp deploy` of an integration implementing llm sends it.
	body := map[string]any{
		"name": "impl/my-llm", "version": "0.1.0",
		"actions": map[string]any{
			"generateContent":    map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}},
			"listLanguageModels": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}},
		},
		"entities": map[string]any{"modelRef": map[string]any{"schema": map[string]any{}}},
		"interfaces": map[string]any{"llm": map[string]any{
			"id":       llm["id"],
			"entities": map[string]any{"modelRef": map[string]any{"name": "modelRef"}},
			"actions":  map[string]any{"generateContent": map[string]any{"name": "generateContent"}, "listLanguageModels": map[string]any{"name": "listLanguageModels"}},
			"events":   map[string]any{}, "channels": map[string]any{},
		}},
	}
	// `bp interfaces get llm` (CLI 0.8.59): getInterfaceByName in the workspace.
	if r := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/interfaces/llm/latest", Token: e.AdminToken, Headers: h}), 200, "getInterfaceByName"); r.Str("interface.id") != llm["id"] {
		t.Fatalf("bp interfaces get llm: %s", r.Raw)
	}
	r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/integrations", Token: e.AdminToken, Headers: h, Body: body}), 200, "createIntegration")
	got := r.Body["integration"].(map[string]any)["interfaces"].(map[string]any)["llm"].(map[string]any)
	if got["name"] != "llm" || got["version"] != "11.0.0" {
		t.Fatalf("the implemented interface: %v", got)
	}
}
