package llmbuiltin_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/llm/llmtest"
	"github.com/botforge/platform/shared/llmbuiltin"
)

// TestLLMIntegration: the built-in llm integration is in the hub,
// implements the llm interface, installs under the alias openai, and
// answers generateContent and listLanguageModels through callAction with
// the platform's provider.
func TestLLMIntegration(t *testing.T) {
	up := llmtest.New("llama-test", "other")
	t.Cleanup(up.Close)
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	f := apitest.New(t)
	do := func(method, path string, hdr map[string]string, body any, status int, op string) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), status, op)
	}
	pub := do("GET", "/v1/admin/hub/integrations/llm/latest", nil, nil, 200, "getPublicIntegration")
	intID := pub.Str("integration.id")
	iface, _ := pub.Body["integration"].(map[string]any)["interfaces"].(map[string]any)["llm"].(map[string]any)
	if intID != builtin.IntegrationID(llmbuiltin.Name, llmbuiltin.Version) || iface["name"] != "llm" || iface["version"] != "11.0.0" {
		t.Fatalf("hub: %s", pub.Raw)
	}
	if l := do("GET", "/v1/admin/hub/integrations?interfaceName=llm", nil, nil, 200, "listPublicIntegrations").List("integrations"); len(l) != 1 {
		t.Fatalf("implementations of llm: %v", l)
	}

	ws := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}, 200, "").Str("id")
	wsh := map[string]string{"x-workspace-id": ws, "x-multiple-integrations": "true"}
	bot := do("POST", "/v1/admin/bots", wsh, map[string]any{"name": "b"}, 200, "").Str("bot.id")
	do("PUT", "/v1/admin/bots/"+bot, wsh, map[string]any{"integrations": map[string]any{
		"openai": map[string]any{"integrationId": intID, "enabled": true, "configuration": map[string]any{}}}}, 200, "")
	inst := do("GET", "/v1/admin/bots/"+bot, wsh, nil, 200, "getBot").Body["bot"].(map[string]any)["integrations"].(map[string]any)["openai"].(map[string]any)
	if inst["status"] != "registered" || inst["name"] != "llm" {
		t.Fatalf("installation: %v", inst)
	}
	call := func(action string, input any) apitest.Response {
		t.Helper()
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": bot}, Body: map[string]any{"type": action, "input": input}})
	}

	models := call("openai:listLanguageModels", map[string]any{})
	out, _ := models.Body["output"].(map[string]any)
	ms, _ := out["models"].([]any)
	if models.Status != 200 || len(ms) != 2 || ms[0].(map[string]any)["id"] != "llama-test" {
		t.Fatalf("listLanguageModels: %d %s", models.Status, models.Raw)
	}

	// As plain Cognitive sends it (model: the id after "openai:"), with
	// fields the interface does not name.
	up.ToolCall("c1", "lookup", `{"q":"x"}`)
	r := call("openai:generateContent", map[string]any{
		"model": map[string]any{"id": "other"}, "systemPrompt": "sys", "temperature": 0.5, "maxTokens": 20,
		"responseFormat": "json_object", "stopSequences": []string{"Z"},
		"messages":   []any{map[string]any{"role": "user", "type": "text", "content": "hi"}},
		"tools":      []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "argumentsSchema": map[string]any{"type": "object"}}}},
		"toolChoice": map[string]any{"type": "any"},
		"signal":     map[string]any{}, "userId": "u1",
	})
	if r.Status != 200 {
		t.Fatalf("generateContent: %d %s", r.Status, r.Raw)
	}
	sent := up.Last().Body
	want := map[string]any{
		"model": "other", "temperature": 0.5, "max_tokens": 20.0, "stop": []any{"Z"},
		"response_format": map[string]any{"type": "json_object"}, "tool_choice": "required",
		"messages": []any{map[string]any{"role": "system", "content": "sys"}, map[string]any{"role": "user", "content": "hi"}},
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "parameters": map[string]any{"type": "object"}}}},
	}
	for k, v := range want {
		if !reflect.DeepEqual(sent[k], v) {
			t.Errorf("upstream %s = %#v, want %#v", k, sent[k], v)
		}
	}
	o := r.Body["output"].(map[string]any)
	choice := o["choices"].([]any)[0].(map[string]any)
	usage := o["usage"].(map[string]any)
	calls, _ := choice["toolCalls"].([]any)
	if o["provider"] != "openai" || o["model"] != "other" || choice["stopReason"] != "tool_calls" || choice["role"] != "assistant" ||
		len(calls) != 1 || !reflect.DeepEqual(calls[0], map[string]any{"id": "c1", "type": "function", "function": map[string]any{"name": "lookup", "arguments": map[string]any{"q": "x"}}}) ||
		usage["outputTokens"] == nil {
		t.Fatalf("output: %s", r.Raw)
	}

	// An unknown model and a failing provider answer in the error shape.
	if r := call("openai:generateContent", map[string]any{"model": map[string]any{"id": "nope"}, "messages": []any{map[string]any{"role": "user", "content": "x"}}}); r.Status != 400 || !strings.Contains(r.Str("message"), `"nope"`) {
		t.Fatalf("unknown model: %d %s", r.Status, r.Raw)
	}
	up.FailNext(503, 503, 503)
	if r := call("openai:generateContent", map[string]any{"messages": []any{map[string]any{"role": "user", "content": "x"}}}); r.Status != 502 {
		t.Fatalf("failing provider: %d %s", r.Status, r.Raw)
	}
}
