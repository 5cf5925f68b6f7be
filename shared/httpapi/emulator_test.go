package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/platform"
)

// The console's emulator (docs/console.md): with the developer's own
// token, x-bot-id and x-integration-alias: emulator, a bot with no
// installation of that name gets the user's message as message_created;
// its reply is stored and its delivery acknowledged in-process
// (delivered, no call made), never failed.
func TestRuntimeEmulatorChannel(t *testing.T) {
	f := newFixture(t)
	var mu sync.Mutex
	var results []delivery.Result
	f.Platform.OnDelivery(func(_ context.Context, r delivery.Result) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	})
	var botID string
	as := func(emulator bool, method, path string, body any, status int) apitest.Response {
		t.Helper()
		h := map[string]string{"x-bot-id": botID}
		if emulator {
			h["x-integration-alias"] = platform.EmulatorIntegration
		}
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: h}), status, "")
	}
	bot := newReceiver(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			go as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": ev["conversationId"], "userId": botID,
				"type": "text", "payload": map[string]any{"text": "echo"}, "tags": map[string]string{}}, 201)
		}
		return 200, "{}"
	})
	botID = f.createBot(f.AdminToken, map[string]any{"name": "emu", "dev": true, "url": bot.srv.URL})

	conv := as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201)
	if conv.Str("conversation.integration") != "emulator" {
		t.Fatalf("conversation: %v", conv.Body)
	}
	convID := conv.Str("conversation.id")
	user := as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	msg := as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": convID, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)
	if msg.Str("message.direction") != "incoming" {
		t.Fatalf("the emulator's message is incoming: %v", msg.Body)
	}

	eventually(t, "the bot gets message_created", func() bool { return len(bot.of("event_received", "message_created")) == 1 })
	eventually(t, "the reply's delivery is acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range results {
			if r.Kind == "message_created" && r.Name == "emulator" {
				if r.Outcome != delivery.Delivered {
					t.Fatalf("the reply's delivery: %+v", r)
				}
				return true
			}
		}
		return false
	})
	msgs := as(false, "GET", "/v1/chat/messages?conversationId="+convID, nil, 200)
	if n := len(msgs.Body["messages"].([]any)); n != 2 {
		t.Fatalf("messages: %d, want the user's and the reply", n)
	}
	ev := as(false, "GET", "/v1/chat/events?conversationId="+convID, nil, 200)
	evs := ev.Body["events"].([]any)
	eventually(t, "the message_created event is processed", func() bool {
		evs = as(false, "GET", "/v1/chat/events?conversationId="+convID, nil, 200).Body["events"].([]any)
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
	// Only the bot's own reply went out: nothing was called but the bot.
	if n := bot.count(); n != 1 {
		t.Fatalf("calls to the bot: %d", n)
	}
}

// The local platform serves the console at "/" and "/console/..." (no
// token; the tunnel never claims them), beside the API.
func TestLocalPlatformServesTheConsole(t *testing.T) {
	e := apitest.New(t)
	for path, typ := range map[string]string{"/": "text/html", "/console/app.js": "text/javascript", "/console/vendor/preact.module.js": "text/javascript"} {
		res, err := http.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), typ) || res.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("GET %s: %d %q, CSP %q", path, res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Content-Security-Policy"))
		}
	}
	res, err := http.Get(e.URL + "/console/nope.js")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 404 {
		t.Errorf("GET /console/nope.js: %d", res.StatusCode)
	}
}
