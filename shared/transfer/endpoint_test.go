package transfer_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestImportOperationRefusesBadInput: the import operations answer bad
// input and callers below administrator with a 4xx in the API's error
// shape, and a kind they do not import is skipped, not an error.
func TestImportOperationRefusesBadInput(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	s := newSide(t)
	s.call("POST", "/v1/admin/workspace-members", "", map[string]any{"email": "dev@example.com", "role": "developer"}, 200)
	dev := s.AccountToken("dev@example.com")
	ws := map[string]string{"x-workspace-id": s.ws}
	cases := []struct {
		name, path, token string
		body              any
		want              int
	}{
		{"not JSON", "/v1/admin/transfer/import", s.AdminToken, "{", 400},
		{"unknown member", "/v1/admin/transfer/import", s.AdminToken, map[string]any{"entries": []any{}, "x": 1}, 400},
		{"entries not an array", "/v1/admin/transfer/import", s.AdminToken, map[string]any{"entries": 3}, 400},
		{"a developer", "/v1/admin/transfer/import", dev, map[string]any{"entries": []any{}}, 403},
		{"no token", "/v1/admin/transfer/import", "", map[string]any{"entries": []any{}}, 401},
		{"a chat entry at the Files area's", "/v1/files/transfer/import/files", s.AdminToken, map[string]any{"entries": []any{map[string]any{"seq": 1, "kind": "user", "data": map[string]any{}}}}, 400},
		{"a developer at the Files area's", "/v1/files/transfer/import/files", dev, map[string]any{"entries": []any{}}, 403},
	}
	for _, c := range cases {
		r := s.Do(apitest.Req{Method: "POST", Path: c.path, Token: c.token, Body: c.body, Headers: ws})
		if r.Status != c.want {
			t.Errorf("%s: %d, want %d: %s", c.name, r.Status, c.want, r.Raw)
		}
	}
	r := s.call("POST", "/v1/admin/transfer/import", "", map[string]any{"entries": []any{
		map[string]any{"seq": 1, "kind": "hologram", "id": "x", "data": map[string]any{}},
		map[string]any{"seq": 2, "kind": "user", "bot": "bot_01M8HB2QJ4ZN7AM6FXKKSTEK77", "id": "u", "data": map[string]any{"id": "not-ours"}},
	}}, 200)
	res := r.List("results")
	if len(res) != 2 || res[0].(map[string]any)["outcome"] != "skipped" || res[1].(map[string]any)["outcome"] != "failed" {
		t.Fatalf("results: %s", r.Raw)
	}
}
