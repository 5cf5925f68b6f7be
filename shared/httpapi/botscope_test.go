package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/httpapi"
)

// TestBotScope checks the x-bot-id scope of Chat, Tables and Files: the bot
// must belong to a workspace of the caller, or be the bot API key's own bot.
func TestBotScope(t *testing.T) {
	f := newFixture(t)
	probe := httptest.NewServer(httpapi.NewBotScopeProbe(httpapi.Config{Store: f.Platform.Store, PagingKey: []byte("0123456789abcdef")}))
	defer probe.Close()

	botA := f.createBot(f.AdminToken, nil)
	botB := f.createBot(f.AdminToken, nil)
	keyA := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": botA}), 200, "createBotApiKey").Str("value")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	outsider, _ := newFixtureOn(f).invite("outsider@example.com", "owner")

	call := func(method, token, bot string) int {
		req, _ := http.NewRequest(method, probe.URL+"/probe", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if bot != "" {
			req.Header.Set("x-bot-id", bot)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, tc := range []struct {
		name          string
		method, token string
		bot           string
		want          int
	}{
		{"owner reads", "GET", f.AdminToken, botA, 200},
		{"owner writes", "POST", f.AdminToken, botA, 200},
		{"viewer reads", "GET", viewer, botA, 200},
		{"viewer cannot write", "POST", viewer, botA, 403},
		{"outsider gets 404", "GET", outsider, botA, 404},
		{"outsider write gets 404", "POST", outsider, botA, 404},
		{"own bot key reads", "GET", keyA, botA, 200},
		{"own bot key writes", "POST", keyA, botA, 200},
		{"bot key on another bot", "GET", keyA, botB, 404},
		{"unknown bot", "GET", f.AdminToken, "bot_01ARZ3NDEKTSV4RRFFQ69G5FAV", 404},
		{"malformed bot id", "GET", f.AdminToken, "nope", 404},
		{"missing x-bot-id", "GET", f.AdminToken, "", 400},
		{"no token", "GET", "", botA, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := call(tc.method, tc.token, tc.bot); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
	// A deleted bot is out of scope at once, even for its own key.
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+botA, nil), 200, "deleteBot")
	if got := call("GET", f.AdminToken, botA); got != 404 {
		t.Fatalf("deleted bot: %d", got)
	}
}

// TestBotScopeForIntegrationKeys: an integration API key acts, through
// x-bot-id, for the bots that installed its integration, and only those.
func TestBotScopeForIntegrationKeys(t *testing.T) {
	f := newFixture(t)
	probe := httptest.NewServer(httpapi.NewBotScopeProbe(httpapi.Config{Store: f.Platform.Store, PagingKey: []byte("0123456789abcdef")}))
	defer probe.Close()
	intID := f.createIntegration(f.AdminToken, integrationDef("acting", "1.0.0", nil)).Str("integration.id")
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": intID}), 200, "createIntegrationApiKey").Str("value")
	installed := f.createBot(f.AdminToken, map[string]any{"dev": true})
	f.updateBot(f.AdminToken, installed, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true}}})
	other := f.createBot(f.AdminToken, map[string]any{"dev": true})

	call := func(method, bot string) int {
		req, _ := http.NewRequest(method, probe.URL+"/probe", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("x-bot-id", bot)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := call("GET", installed); got != 200 {
		t.Fatalf("integration key on a bot that installed it, read: %d", got)
	}
	if got := call("POST", installed); got != 200 {
		t.Fatalf("integration key on a bot that installed it, write: %d", got)
	}
	if got := call("GET", other); got != 404 {
		t.Fatalf("integration key on a bot that did not install it: %d", got)
	}
}

// TestIntegrationKeyNamesOnlyItsOwnInstallation: the body's (deprecated)
// integrationName of createConversation, getOrCreateConversation,
// createUser and getOrCreateUser is held, for an integration's API key, to
// that integration's own installations on the bot, as its headers are:
// another installed integration, or the console's emulator channel, is a
// 403 that writes nothing.
func TestIntegrationKeyNamesOnlyItsOwnInstallation(t *testing.T) {
	f := newFixture(t)
	def := func(name string) map[string]any {
		return map[string]any{"name": name, "version": "1.0.0", "dev": true, "url": "http://127.0.0.1:9",
			"channels": map[string]any{"dm": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}}}
	}
	a := f.createIntegration(f.AdminToken, def("inta")).Str("integration.id")
	b := f.createIntegration(f.AdminToken, def("intb")).Str("integration.id")
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": a}), 200, "createIntegrationApiKey").Str("value")
	bot := f.createBot(f.AdminToken, map[string]any{"dev": true})
	f.Check(f.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{
		"inta": map[string]any{"integrationId": a, "enabled": true}, "intb": map[string]any{"integrationId": b, "enabled": true}}}), 200, "updateBot")
	do := func(method, path string, body map[string]any) apitest.Response {
		return f.Do(apitest.Req{Method: method, Path: path, Token: key, Headers: map[string]string{"x-bot-id": bot}, Body: body})
	}
	count := func(path, list string) int {
		return len(f.Check(f.Do(apitest.Req{Method: "GET", Path: path, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": bot}}), 200, "").List(list))
	}
	for _, name := range []string{"intb", "emulator", "nothing"} {
		for _, tc := range []struct{ method, path string }{
			{"POST", "/v1/chat/conversations"}, {"POST", "/v1/chat/conversations/get-or-create"},
			{"POST", "/v1/chat/users"}, {"POST", "/v1/chat/users/get-or-create"},
		} {
			body := map[string]any{"tags": map[string]string{}, "integrationName": name}
			if strings.Contains(tc.path, "conversations") {
				body["channel"] = "dm"
			}
			if r := do(tc.method, tc.path, body); r.Status != 403 || r.Str("type") != "Forbidden" {
				t.Fatalf("%s %s as %q: %d %s", tc.method, tc.path, name, r.Status, r.Raw)
			}
		}
	}
	if n, m := count("/v1/chat/conversations", "conversations"), count("/v1/chat/users", "users"); n != 0 || m != 0 {
		t.Fatalf("refused calls wrote %d conversations, %d users", n, m)
	}
	// Its own installation, by name or by header, is fine.
	f.Check(do("POST", "/v1/chat/conversations", map[string]any{"channel": "dm", "tags": map[string]string{}, "integrationName": "inta"}), 201, "createConversation")
	f.Check(do("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}, "integrationName": "inta"}), 201, "createUser")
}
