package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
)

// importMessages: each message is created with its createdAt unless one of
// its conversation matches its discriminating tags; nothing reaches the
// bot; bad input writes nothing.
func TestImportMessages(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	live := f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "live"}, "tags": map[string]string{"ext": "1"}}, 201).Str("message.id")

	msg := func(text, at string, tags map[string]string, by []string) map[string]any {
		return map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": text},
			"tags": tags, "createdAt": at, "discriminateByTags": by}
	}
	imp := func(status int, msgs ...map[string]any) apitest.Response {
		t.Helper()
		op := ""
		if status == 200 {
			op = "importMessages"
		}
		return f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Token: f.AdminToken,
			Headers: map[string]string{"x-bot-id": f.botID}, Body: map[string]any{"messages": msgs}}), status, op)
	}
	batch := []map[string]any{
		msg("already there", "2024-01-01T10:00:00.000Z", map[string]string{"ext": "1"}, []string{"ext"}),
		msg("old one", "2024-01-01T10:01:00.000Z", map[string]string{"ext": "2"}, []string{"ext"}),
		msg("no key", "2024-01-01T10:02:00.000Z", map[string]string{}, []string{}),
	}
	r := imp(200, batch...)
	got := r.List("messages")
	if len(got) != 3 || got[0].(map[string]any)["id"] != live {
		t.Fatalf("import: %s", r.Raw)
	}
	old := got[1].(map[string]any)
	if old["createdAt"] != "2024-01-01T10:01:00.000Z" || old["direction"] != "incoming" || old["payload"].(map[string]any)["text"] != "old one" {
		t.Fatalf("imported message: %v", old)
	}
	// Again: matched ones are found, the one without keys is created anew.
	again := imp(200, batch...).List("messages")
	if again[1].(map[string]any)["id"] != old["id"] || again[2].(map[string]any)["id"] == got[2].(map[string]any)["id"] {
		t.Fatalf("second import: %v", again)
	}
	// Listed by their createdAt (oldest last), and none reached the bot.
	list := func() []any {
		return f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/messages?conversationId=" + conv, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "listMessages").List("messages")
	}
	ms := list()
	if len(ms) != 4 || ms[0].(map[string]any)["id"] != live || ms[3].(map[string]any)["id"] != old["id"] {
		t.Fatalf("listMessages: %v", ms)
	}
	time.Sleep(300 * time.Millisecond)
	// Only the live message reached the bot.
	for _, c := range f.bot.of("event_received", "message_created") {
		if id := c.Body["event"].(map[string]any)["messageId"]; id != live {
			t.Fatalf("imported message %v delivered to the bot", id)
		}
	}
	if n := len(f.integ.of("message_created", "")); n != 0 {
		t.Fatalf("%d deliveries to the integration", n)
	}

	// Bad input: a 4xx, nothing written.
	msgItems := func() string {
		var out []string
		for _, k := range f.ItemsHolding(f.botID) {
			if strings.HasPrefix(k, "MSG#") || strings.HasPrefix(k, "CLAIM#") || strings.HasPrefix(k, "EVT#") {
				out = append(out, k)
			}
		}
		return strings.Join(out, ",")
	}
	before := msgItems()
	good := msg("fine", "2024-01-02T00:00:00.000Z", map[string]string{"ext": "9"}, []string{"ext"})
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	other := f.createBot(f.AdminToken, map[string]any{"name": "other"})
	otherConv := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": other},
		Body: map[string]any{"channel": "web", "tags": map[string]string{}}}), 201, "createConversation").Str("conversation.id")
	many := make([]map[string]any, 101)
	for i := range many {
		many[i] = good
	}
	for _, tc := range []struct {
		name   string
		msgs   []map[string]any
		status int
	}{
		{"unknown conversation", []map[string]any{good, with("conversationId", "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV")}, 404},
		{"another bot's conversation", []map[string]any{good, with("conversationId", otherConv)}, 404},
		{"unknown user", []map[string]any{good, with("userId", "user_01ARZ3NDEKTSV4RRFFQ69G5FAV")}, 404},
		{"bad createdAt", []map[string]any{good, with("createdAt", "yesterday")}, 400},
		{"no createdAt", []map[string]any{good, with("createdAt", nil)}, 400},
		{"discriminator not a tag", []map[string]any{good, with("discriminateByTags", []string{"nope"})}, 400},
		{"no payload", []map[string]any{good, with("payload", nil)}, 400},
		{"empty type", []map[string]any{good, with("type", "")}, 400},
		{"unknown field", []map[string]any{good, with("origin", "x")}, 400},
		{"more than 100", many, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			imp(tc.status, tc.msgs...)
			if after := msgItems(); after != before {
				t.Fatalf("written:\n%s\n->\n%s", before, after)
			}
		})
	}
	// Roles: a viewer may not import.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Token: viewer, Headers: map[string]string{"x-bot-id": f.botID},
		Body: map[string]any{"messages": []map[string]any{good}}}), 403, "")
}

// importMessages checks every message's size and the messages quota for
// the whole batch before the first write: a batch whose second message is
// too large (413), or which the quota has no room for (403), writes none.
func TestImportMessagesChecksAllBeforeWriting(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	store := f.Platform.Store
	t.Cleanup(func() { store.SetLimits(dynamo.Limits{}) })
	h := map[string]string{"x-bot-id": f.botID}
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	msg := func(text string) map[string]any {
		return map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": text},
			"tags": map[string]string{}, "createdAt": "2024-01-01T10:00:00.000Z", "discriminateByTags": []string{}}
	}
	imp := func(msgs ...map[string]any) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Token: f.AdminToken, Headers: h, Body: map[string]any{"messages": msgs}})
	}
	listed := func() int {
		return len(f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/messages?conversationId=" + conv, Token: f.AdminToken, Headers: h}), 200, "listMessages").List("messages"))
	}
	if r := imp(msg("fine"), msg(strings.Repeat("x", 450_000))); r.Status != 413 {
		t.Fatalf("oversized second message: %d %s", r.Status, r.Raw)
	}
	if n := listed(); n != 0 {
		t.Fatalf("an import refused for size wrote %d messages", n)
	}
	// Room for 2 more messages this month: a batch of 3 writes none, a
	// batch of 2 is imported.
	used, err := store.BotUsage(t.Context(), f.botID, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	store.SetLimits(dynamo.Limits{MessagesPerMonth: used.Messages + 2})
	if r := imp(msg("a"), msg("b"), msg("c")); r.Status != 403 || r.Body["type"] != "QuotaExceeded" {
		t.Fatalf("batch over the quota: %d %s", r.Status, r.Raw)
	}
	if n := listed(); n != 0 {
		t.Fatalf("an import refused by the quota wrote %d messages", n)
	}
	f.Check(imp(msg("a"), msg("b")), 200, "importMessages")
	if n := listed(); n != 2 {
		t.Fatalf("%d messages after an import of 2", n)
	}
}
