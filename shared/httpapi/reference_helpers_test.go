package httpapi_test

import (
	"strings"
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

// TestRunVrl: runVrl runs the script on data (the platform's VRL subset)
// and answers data as the script left it with the script's value; a script
// that does not compile or fails, and bad input, are 400 in the error shape.
func TestRunVrl(t *testing.T) {
	f := newFixture(t)
	run := func(body any) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/helper/vrl", Token: f.AdminToken, Body: body})
	}
	r := f.Check(run(map[string]any{"data": map[string]any{"a": 1, "s": "x"}, "script": "b = to_int!(.a) + 1\n.b = b\n.s = upcase!(.s)\nb * 2"}), 200, "runVrl")
	if r.Body["result"] != float64(4) || r.Body["data"].(map[string]any)["b"] != float64(2) || r.Body["data"].(map[string]any)["s"] != "X" {
		t.Fatalf("runVrl: %s", r.Raw)
	}
	// A Botpress extractScript (messenger), as the platform runs it on a webhook.
	r = f.Check(run(map[string]any{"data": map[string]any{"body": `{"object":"page","entry":[{"id":"P1"}]}`},
		"script": ". = parse_json!(.body)\npageId = null\nif .object == \"page\" {\n  pageId = .entry[0].id\n}\npageId"}), 200, "runVrl")
	if r.Body["result"] != "P1" || r.Body["data"].(map[string]any)["object"] != "page" {
		t.Fatalf("extractScript: %s", r.Raw)
	}
	for _, tc := range []struct {
		name, want string
		body       any
	}{
		{"no script", "script", map[string]any{"data": map[string]any{}}},
		{"data not an object", "data", map[string]any{"data": "x", "script": "."}},
		{"syntax error", "1:6", map[string]any{"data": map[string]any{}, "script": ".a = = 1"}},
		{"unknown function", "nope", map[string]any{"data": map[string]any{}, "script": "nope(1)"}},
		{"unhandled error", "fallible", map[string]any{"data": map[string]any{}, "script": "parse_json(.a)"}},
		{"failing call", "failed", map[string]any{"data": map[string]any{"a": "{"}, "script": "parse_json!(.a)"}},
		{"abort", "failed", map[string]any{"data": map[string]any{}, "script": "abort"}},
		{"root not an object", "object", map[string]any{"data": map[string]any{}, "script": ". = 5"}},
		{"runaway", "memory limit", map[string]any{"data": map[string]any{}, "script": "\"abc\" * 100000000000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(tc.body)
			if r.Status != 400 || r.Str("type") != "InvalidPayload" || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("runVrl: %d %s, want 400 InvalidPayload mentioning %q", r.Status, r.Raw, tc.want)
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
