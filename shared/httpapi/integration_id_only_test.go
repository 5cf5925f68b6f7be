package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// sdk010Integration is an integration written the SDK 0.10 way (the SDK of
// CLI 0.8.59, on which Botpress's open-source telegram, twilio and webhook
// integrations of August 2024 are built): its API calls carry its
// integration key, x-bot-id and x-integration-id only, never
// x-integration-alias. On webhook_received it does what telegram's handler
// does with a provider's update {chatId, fromId, text}: getOrCreateUser,
// getOrCreateConversation and getOrCreateMessage with its own (unprefixed)
// tags; "/event" emits an event instead. register answers what register
// says.
type sdk010Integration struct {
	*httptest.Server
	api, key string // set once the integration and its key exist
	register func() (int, string)

	mu      sync.Mutex
	replies []map[string]any // message_created bodies (the bot's messages)
	errs    []string         // API calls that failed
}

func newSDK010Integration(t *testing.T) *sdk010Integration {
	si := &sdk010Integration{}
	si.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		switch r.Header.Get("x-bp-operation") {
		case "register":
			status, answer := 200, "{}"
			if si.register != nil {
				status, answer = si.register()
			}
			w.WriteHeader(status)
			io.WriteString(w, answer)
		case "webhook_received":
			req, _ := body["req"].(map[string]any)
			var update struct{ ChatID, FromID, Text string }
			_ = json.Unmarshal([]byte(fmt.Sprint(req["body"])), &update)
			call := func(method, path string, in any) map[string]any {
				return si.call(r.Header.Get("x-bot-id"), r.Header.Get("x-integration-id"), method, path, in)
			}
			if req["path"] == "/event" {
				call("POST", "/v1/chat/events", map[string]any{"type": "typing", "payload": map[string]any{"chatId": update.ChatID}})
				call("POST", "/v1/chat/events", map[string]any{"type": "telegram:seen", "payload": map[string]any{}})
				io.WriteString(w, "{}")
				return
			}
			user, _ := call("POST", "/v1/chat/users/get-or-create", map[string]any{"tags": map[string]string{"id": update.FromID}})["user"].(map[string]any)
			conv, _ := call("POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{"chatId": update.ChatID}})["conversation"].(map[string]any)
			if user != nil && conv != nil {
				call("POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": conv["id"], "userId": user["id"], "type": "text",
					"payload": map[string]any{"text": update.Text}, "tags": map[string]string{"id": update.ChatID + "-1", "chatId": update.ChatID}, "discriminateByTags": []string{"id"}})
			}
			io.WriteString(w, "{}")
		case "message_created":
			si.mu.Lock()
			si.replies = append(si.replies, body)
			si.mu.Unlock()
			io.WriteString(w, "{}")
		default:
			io.WriteString(w, "{}")
		}
	}))
	t.Cleanup(si.Close)
	return si
}

// call is one API call as the SDK 0.10 client makes it.
func (si *sdk010Integration) call(botID, integrationID, method, path string, in any) map[string]any {
	b, _ := json.Marshal(in)
	req, _ := http.NewRequest(method, si.api+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+si.key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("x-bot-id", botID)
	req.Header.Set("x-integration-id", integrationID)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		si.fail(err.Error())
		return nil
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		si.fail(fmt.Sprintf("%s %s: %d %s", method, path, res.StatusCode, raw))
		return nil
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

func (si *sdk010Integration) fail(msg string) {
	si.mu.Lock()
	si.errs = append(si.errs, msg)
	si.mu.Unlock()
}

func (si *sdk010Integration) state() ([]map[string]any, []string) {
	si.mu.Lock()
	defer si.mu.Unlock()
	return append([]map[string]any(nil), si.replies...), append([]string(nil), si.errs...)
}

// sdk010Fixture: a bot (a fake at a url that answers every user message)
// with the SDK 0.10 integration published as "acme/telegram" (the name CLI
// 0.8.59 gives it outside Botpress's workspaces) and installed as CLI
// 0.8.59's bp deploy installs it: keyed by its integration id.
type sdk010Fixture struct {
	*fixture
	integ        *sdk010Integration
	bot          *receiver
	botID, intID string
}

func newSDK010Fixture(t *testing.T) *sdk010Fixture {
	f := &sdk010Fixture{fixture: newFixture(t)}
	f.Platform.Dispatcher.SetRetry(20*time.Millisecond, 3)
	f.integ = newSDK010Integration(t)
	f.intID = f.createIntegration(f.AdminToken, map[string]any{
		"name": "acme/telegram", "version": "0.4.5", "url": f.integ.URL,
		"channels": map[string]any{"channel": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}},
		"events":   map[string]any{"typing": map[string]any{"schema": map[string]any{}}, "seen": map[string]any{"schema": map[string]any{}}},
	}).Str("integration.id")
	f.integ.api = f.URL
	f.integ.key = f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": f.intID}), 200, "createIntegrationApiKey").Str("value")
	f.bot = newReceiver(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			go f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID},
				Body: map[string]any{"conversationId": ev["conversationId"], "userId": f.botID, "type": "text", "payload": map[string]any{"text": "You said: hi"}, "tags": map[string]string{}}})
		}
		return 200, "{}"
	})
	f.botID = f.createBot(f.AdminToken, map[string]any{"name": "echo", "url": f.bot.srv.URL})
	return f
}

// install installs the integration keyed by its id (no alias), as CLI
// 0.8.59 does, and returns getBot's instance.
func (f *sdk010Fixture) install() map[string]any {
	f.T.Helper()
	u := f.updateBot(f.AdminToken, f.botID, map[string]any{"integrations": map[string]any{f.intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}})
	return u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[f.intID].(map[string]any)
}

// TestIntegrationIDOnly: an SDK 0.10 integration, which names itself by
// x-integration-id alone, is its installation's caller as if it had sent
// the alias: a provider's webhook becomes message_created at the bot with
// the tags prefixed by the official name (the handle-prefixed
// "acme/telegram" installs as "telegram"); the bot's reply reaches the
// integration's channel handler with its tags unprefixed; its events reach
// the bot as telegram:<type>, a type already prefixed once.
func TestIntegrationIDOnly(t *testing.T) {
	f := newSDK010Fixture(t)
	inst := f.install()
	if inst["status"] != "registered" || inst["name"] != "acme/telegram" {
		t.Fatalf("install: %v", inst)
	}
	aliases := f.getBot(f.botID, "x-multiple-integrations", "true")["integrations"].(map[string]any)
	if _, ok := aliases["telegram"]; !ok || len(aliases) != 1 {
		t.Fatalf("installed under %v, not the official name \"telegram\"", aliases)
	}

	res, b := rawDo(t, "POST", inst["webhookUrl"].(string), strings.NewReader(`{"chatId":"555","fromId":"77","text":"hi"}`), nil)
	if res.StatusCode != 200 {
		t.Fatalf("webhook: %d %s", res.StatusCode, b)
	}
	eventually(t, "the reply reaches the integration's channel", func() bool { r, _ := f.integ.state(); return len(r) == 1 })
	replies, errs := f.integ.state()
	if len(errs) > 0 {
		t.Fatalf("the integration's API calls failed: %v", errs)
	}
	got := f.bot.of("event_received", "message_created")
	if len(got) != 1 {
		t.Fatalf("bot received %d message_created", len(got))
	}
	p := got[0].Body["event"].(map[string]any)["payload"].(map[string]any)
	convTags := p["conversation"].(map[string]any)["tags"].(map[string]any)
	userTags := p["user"].(map[string]any)["tags"].(map[string]any)
	msg := p["message"].(map[string]any)
	if convTags["telegram:chatId"] != "555" || len(convTags) != 1 || userTags["telegram:id"] != "77" ||
		msg["tags"].(map[string]any)["telegram:chatId"] != "555" || msg["direction"] != "incoming" {
		t.Fatalf("the bot's view: %v", p)
	}
	if c := p["conversation"].(map[string]any); c["integration"] != "telegram" || c["channel"] != "channel" {
		t.Fatalf("conversation: %v", c)
	}
	reply := replies[0]
	if reply["type"] != "text" || reply["payload"].(map[string]any)["text"] != "You said: hi" ||
		reply["conversation"].(map[string]any)["tags"].(map[string]any)["chatId"] != "555" {
		t.Fatalf("the integration got: %v", reply)
	}

	// Events: prefixed once.
	rawDo(t, "POST", inst["webhookUrl"].(string)+"/event", strings.NewReader(`{"chatId":"555"}`), nil)
	eventually(t, "the events reach the bot", func() bool {
		return len(f.bot.of("event_received", "telegram:typing")) == 1 && len(f.bot.of("event_received", "telegram:seen")) == 1
	})
	if _, errs := f.integ.state(); len(errs) > 0 {
		t.Fatalf("the integration's API calls failed: %v", errs)
	}
}

// TestIntegrationIDOnlyAmbiguous: the same integration installed twice on
// one bot cannot be told apart by its id: its calls are refused with a 400
// that says why and what to send, never guessed; with x-integration-alias
// they pass. An id the bot has not installed names no installation (a
// personal token's call, as before): its tags stay unprefixed.
func TestIntegrationIDOnlyAmbiguous(t *testing.T) {
	f := newSDK010Fixture(t)
	f.install()
	f.updateBot(f.AdminToken, f.botID, map[string]any{"integrations": map[string]any{"tg2": map[string]any{"integrationId": f.intID, "enabled": true}}})
	other := f.createIntegration(f.AdminToken, integrationDef("other", "1.0.0", nil)).Str("integration.id")
	chat := func(token string, headers map[string]string) apitest.Response {
		headers["x-bot-id"] = f.botID
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users/get-or-create", Token: token, Headers: headers, Body: map[string]any{"tags": map[string]string{"id": "1"}}})
	}
	for _, tc := range []struct {
		name    string
		token   string
		headers map[string]string
		status  int
		typ     string
		says    []string
	}{
		{"integration key, id only", f.integ.key, map[string]string{"x-integration-id": f.intID}, 400, "InvalidPayload", []string{"installed 2 times", "telegram, tg2", "x-integration-alias"}},
		{"personal token, id only", f.AdminToken, map[string]string{"x-integration-id": f.intID}, 400, "InvalidPayload", []string{"installed 2 times"}},
		{"integration key, alias", f.integ.key, map[string]string{"x-integration-id": f.intID, "x-integration-alias": "tg2"}, 200, "", nil},
		{"id not installed", f.AdminToken, map[string]string{"x-integration-id": other}, 200, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := chat(tc.token, tc.headers)
			if r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if tc.typ == "" {
				// Each caller sees the tag as it wrote it.
				if r.Str("user.tags.id") != "1" {
					t.Fatalf("tags: %s", r.Raw)
				}
				return
			}
			if r.Str("type") != tc.typ {
				t.Fatalf("error type: %s", r.Raw)
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Str("message"), s) {
					t.Fatalf("message %q does not say %q", r.Str("message"), s)
				}
			}
		})
	}
	// configureIntegration by the key alone is ambiguous too.
	r := f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/integrations/configure", Token: f.integ.key,
		Headers: map[string]string{"x-bot-id": f.botID}, Body: map[string]any{"scheduleRegisterCall": "daily"}})
	if r.Status != 400 || !strings.Contains(r.Str("message"), "installed 2 times") {
		t.Fatalf("configure by key alone: %d %s", r.Status, r.Raw)
	}
}
