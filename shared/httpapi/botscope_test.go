package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

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
