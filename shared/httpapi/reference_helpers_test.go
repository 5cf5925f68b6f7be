package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestIntrospect: introspect names the bot's workspace, the bot and the
// caller (an account, or the bot of a bot API key); a bot the caller cannot
// act on is a 404, and bad input a 400.
func TestIntrospect(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	other := newFixtureOn(f)
	otherBot := other.createBot(f.AdminToken, map[string]any{"name": "o"})
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	me := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: viewer}), 200, "getAccount").Str("account.id")
	admin := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/account/me", Token: f.AdminToken}), 200, "getAccount").Str("account.id")

	for _, tc := range []struct {
		name   string
		token  string
		body   any
		status int
		user   string
	}{
		{"owner", f.AdminToken, map[string]any{"botId": bot}, 200, admin},
		{"viewer", viewer, map[string]any{"botId": bot}, 200, me},
		{"bot key", key, map[string]any{"botId": bot}, 200, bot},
		{"bot key, another bot", key, map[string]any{"botId": otherBot}, 404, ""},
		{"viewer, foreign workspace's bot", viewer, map[string]any{"botId": otherBot}, 404, ""},
		{"unknown bot", f.AdminToken, map[string]any{"botId": "bot_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 404, ""},
		{"no botId", f.AdminToken, map[string]any{}, 400, ""},
		{"botId not a string", f.AdminToken, map[string]any{"botId": 1}, 400, ""},
		{"no token", "", map[string]any{"botId": bot}, 401, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := *f.Env
			e.T = t
			r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/introspect", Token: tc.token, Body: tc.body}), tc.status, "introspect")
			if tc.status != 200 {
				checkError(t, r)
				return
			}
			if r.Str("botId") != bot || r.Str("workspaceId") != f.ws || r.Str("userId") != tc.user {
				t.Fatalf("introspect: %s, want bot %s workspace %s user %s", r.Raw, bot, f.ws, tc.user)
			}
		})
	}
}

// TestRunVrlRefused: runVrl is a documented refusal (no VRL evaluator for
// Go), in the error shape; bad input is still a 400.
func TestRunVrlRefused(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		typ    string
	}{
		{"script", map[string]any{"data": map[string]any{"a": 1}, "script": ".b = .a"}, 403, "Forbidden"},
		{"no script", map[string]any{"data": map[string]any{}}, 400, "InvalidPayload"},
		{"data not an object", map[string]any{"data": "x", "script": "."}, 400, "InvalidPayload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/helper/vrl", Token: f.AdminToken, Body: tc.body})
			if r.Status != tc.status || r.Str("type") != tc.typ {
				t.Fatalf("runVrl: %d %s, want %d %s", r.Status, r.Raw, tc.status, tc.typ)
			}
			checkError(t, r)
		})
	}
}

// checkError fails unless r is in the API's error shape {id, code, type, message}.
func checkError(t *testing.T, r apitest.Response) {
	t.Helper()
	id, _ := r.Body["id"].(string)
	typ, _ := r.Body["type"].(string)
	msg, _ := r.Body["message"].(string)
	code, _ := r.Body["code"].(float64)
	if len(id) < 5 || id[:4] != "err_" || typ == "" || msg == "" || int(code) != r.Status {
		t.Fatalf("error response not in the {id, code, type, message} shape: %d %s", r.Status, r.Raw)
	}
}
