package httpapi_test

import (
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
)

// Usage counters and quotas: messages, events, invocations (deliveries to
// the bot) and file storage bytes are counted per bot and month, read
// through the usage operations, and an operator's quota refuses what
// passes it with 403 QuotaExceeded, writing nothing, also under
// concurrency.
func TestUsageCountsAndQuotas(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	store := f.Platform.Store
	t.Cleanup(func() { store.SetLimits(dynamo.Limits{}) })
	h := map[string]string{"x-bot-id": f.botID}
	counts := func() dynamo.BotUsageCounts {
		t.Helper()
		c, err := store.BotUsage(t.Context(), f.botID, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	usage := func(id, typ string) (value, quota float64) {
		t.Helper()
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + id + "?type=" + typ, Token: f.AdminToken}), 200, "getUsage")
		u := r.Body["usage"].(map[string]any)
		return u["value"].(float64), u["quota"].(float64)
	}

	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	message := func() apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID, "x-integration-alias": "chan"},
			Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}})
	}
	event := func() apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/events", Token: f.AdminToken, Headers: h, Body: map[string]any{"type": "custom", "payload": map[string]any{}}})
	}
	for range 3 {
		f.Check(message(), 201, "createMessage")
	}
	f.Check(event(), 201, "createEvent")
	f.Check(event(), 201, "createEvent")
	// 3 messages; 5 events (3 message_created, 2 custom), all delivered.
	eventually(t, "5 deliveries", func() bool { return f.bot.count() == 5 })
	eventually(t, "5 invocations counted", func() bool { return counts().Invocations == 5 })
	if c := counts(); c.Messages != 3 || c.Events != 5 {
		t.Fatalf("counts: %+v, want 3 messages, 5 events", c)
	}
	if v, q := usage(f.botID, "invocation_calls"); v != 5 || q != 0 {
		t.Fatalf("invocation_calls of the bot: %v (quota %v)", v, q)
	}
	if v, _ := usage(f.ws, "invocation_calls"); v != 5 {
		t.Fatalf("invocation_calls of the workspace: %v", v)
	}

	// Storage: the bytes of the bot's files, moved by upserts and deletes.
	up := func(key string, size int) apitest.Response {
		return f.Do(apitest.Req{Method: "PUT", Path: "/v1/files", Token: f.AdminToken, Headers: h, Body: map[string]any{"key": key, "size": size}})
	}
	a := f.Check(up("a.txt", 100), 200, "upsertFile").Str("file.id")
	f.Check(up("b.txt", 50), 200, "upsertFile")
	f.Check(up("b.txt", 20), 200, "upsertFile") // a new generation: 50 -> 20
	if v, _ := usage(f.botID, "storage_count"); v != 120 {
		t.Fatalf("storage_count: %v, want 120", v)
	}
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/files/" + a, Token: f.AdminToken, Headers: h}), 200, "deleteFile")
	if v, _ := usage(f.botID, "storage_count"); v != 20 {
		t.Fatalf("storage_count after delete: %v, want 20", v)
	}

	// Quotas: one more message, event and 30 bytes are allowed; the next
	// are refused and write nothing.
	store.SetLimits(dynamo.Limits{MessagesPerMonth: 4, EventsPerMonth: 7, StorageBytes: 50})
	if _, q := usage(f.botID, "storage_count"); q != 50 {
		t.Fatalf("storage_count quota: %v", q)
	}
	// The 4th message also makes the 6th event (message_created).
	f.Check(message(), 201, "createMessage")
	f.Check(event(), 201, "createEvent")
	f.Check(up("c.txt", 30), 200, "upsertFile")
	// The bot has its 7th event before the dispatcher counts that
	// invocation (after the bot's answer): wait for the count too.
	eventually(t, "7 deliveries, counted", func() bool { return f.bot.count() == 7 && counts().Invocations == 7 })
	before := counts()
	msgs := func() int {
		return len(f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/messages?pageSize=100", Token: f.AdminToken, Headers: h}), 200, "listMessages").List("messages"))
	}
	evts := func() int {
		return len(f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/events?pageSize=100", Token: f.AdminToken, Headers: h}), 200, "listEvents").List("events"))
	}
	nm, ne := msgs(), evts()
	for _, tc := range []struct {
		name string
		call func() apitest.Response
	}{
		{"message", message},
		{"event", event},
		{"file", func() apitest.Response { return up("d.txt", 1) }},
		{"bigger file", func() apitest.Response { return up("c.txt", 31) }},
		{"import", func() apitest.Response {
			return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Token: f.AdminToken, Headers: h, Body: map[string]any{"messages": []map[string]any{{
				"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "x"}, "tags": map[string]string{}, "createdAt": "2024-01-01T00:00:00Z", "discriminateByTags": []string{}}}}})
		}},
	} {
		r := tc.call()
		if r.Status != 403 || r.Body["type"] != "QuotaExceeded" {
			t.Fatalf("%s past the quota: %d %s", tc.name, r.Status, r.Raw)
		}
	}
	if after := counts(); after != before || msgs() != nm || evts() != ne {
		t.Fatalf("refused writes counted or wrote: %+v -> %+v, %d -> %d messages, %d -> %d events", before, after, nm, msgs(), ne, evts())
	}
	f.Check(up("c.txt", 10), 200, "upsertFile") // smaller: always allowed
	if v, _ := usage(f.botID, "storage_count"); v != 30 {
		t.Fatalf("storage_count: %v, want 30", v)
	}

	// Concurrency: with room for 5 more messages, 20 at once make exactly 5.
	store.SetLimits(dynamo.Limits{MessagesPerMonth: before.Messages + 5})
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := message()
			mu.Lock()
			statuses[r.Status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[201] != 5 || statuses[403] != 15 || counts().Messages != before.Messages+5 || msgs() != nm+5 {
		t.Fatalf("concurrent messages: %v, counted %d", statuses, counts().Messages)
	}

	// Invocations: past the quota an event is stored but not delivered; it
	// fails with the reason.
	eventually(t, "12 deliveries", func() bool { return f.bot.count() == 12 })
	store.SetLimits(dynamo.Limits{InvocationsPerMonth: 1})
	sent := f.bot.count()
	id := f.Check(event(), 201, "createEvent").Str("event.id")
	eventually(t, "the event fails", func() bool {
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/events/" + id, Token: f.AdminToken, Headers: h}), 200, "getEvent")
		return r.Str("event.status") == "failed"
	})
	if f.bot.count() != sent {
		t.Fatal("an event past the invocations quota reached the bot")
	}

	// getBotAnalytics of today: the same counts, users' and bot's messages apart.
	f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": f.botID, "type": "text",
		"payload": map[string]any{"text": "from the bot"}, "tags": map[string]string{}}, 201)
	c := counts()
	today := time.Now().UTC().Format(time.DateOnly)
	r := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+f.botID+"/analytics?startDate="+today+"&endDate="+today, nil), 200, "getBotAnalytics")
	rec := r.List("records")[0].(map[string]any)
	if rec["messages"] != float64(c.Messages) || rec["userMessages"] != float64(c.Messages-1) || rec["botMessages"] != float64(1) || rec["events"] != float64(c.Events) || rec["newUsers"] != float64(1) {
		t.Fatalf("analytics of today: %v, counters %+v", rec, c)
	}
}
