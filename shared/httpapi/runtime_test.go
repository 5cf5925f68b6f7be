package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// receiver is a fake bot or integration on loopback: it records every call
// and answers with what answer says.
type receiver struct {
	mu     sync.Mutex
	calls  []received
	answer func(r received) (int, string)
	srv    *httptest.Server
}

type received struct {
	Header http.Header
	Body   map[string]any
}

func (r received) op() string  { return r.Header.Get("x-bp-operation") }
func (r received) typ() string { return r.Header.Get("x-bp-type") }

func newReceiver(t testing.TB, answer func(r received) (int, string)) *receiver {
	rc := &receiver{answer: answer}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		rec := received{Header: req.Header.Clone()}
		_ = json.Unmarshal(b, &rec.Body)
		rc.mu.Lock()
		rc.calls = append(rc.calls, rec)
		rc.mu.Unlock()
		status, body := 200, "{}"
		if rc.answer != nil {
			status, body = rc.answer(rec)
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// of returns the calls with the given operation (and type, if not "").
func (rc *receiver) of(op, typ string) []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []received
	for _, c := range rc.calls {
		if c.op() == op && (typ == "" || c.typ() == typ) {
			out = append(out, c)
		}
	}
	return out
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.calls)
}

// eventually polls cond for up to 15 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runtimeFixture is a bot at a fake bot's url with a fake integration
// installed under the alias "chan".
type runtimeFixture struct {
	*fixture
	bot, integ   *receiver
	botID, intID string
}

func newRuntimeFixture(t testing.TB, botAnswer func(r received) (int, string)) *runtimeFixture {
	f := &runtimeFixture{fixture: newFixture(t)}
	f.Platform.Dispatcher.SetRetry(20*time.Millisecond, 3)
	f.bot = newReceiver(t, botAnswer)
	f.integ = newReceiver(t, nil)
	f.intID = f.createIntegration(f.AdminToken, map[string]any{
		"name": "chan", "version": "1.0.0", "dev": true, "url": f.integ.srv.URL,
		"channels": map[string]any{"channel": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}},
	}).Str("integration.id")
	f.botID = f.createBot(f.AdminToken, map[string]any{"name": "rt", "dev": true, "url": f.bot.srv.URL,
		"states": map[string]any{"profile": map[string]any{"type": "user", "schema": map[string]any{}}}})
	f.Check(f.updateBot(f.AdminToken, f.botID, map[string]any{
		"integrations": map[string]any{"chan": map[string]any{"integrationId": f.intID, "enabled": true}}}), 200, "updateBot")
	return f
}

// as sends a Chat call for the bot, as the integration (alias header) when
// asIntegration.
func (f *runtimeFixture) as(asIntegration bool, method, path string, body any, status int) apitest.Response {
	f.T.Helper()
	h := map[string]string{"x-bot-id": f.botID}
	if asIntegration {
		h["x-integration-alias"] = "chan"
	}
	return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: h}), status, "")
}

// The message flow of the protocol: a user's message (written by the
// integration) reaches the bot as message_created with the message, its
// user and its conversation; the bot's reply reaches the integration's
// channel as message_created; the bot's own message never loops back.
func TestRuntimeMessageFlow(t *testing.T) {
	var f *runtimeFixture
	f = newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			go f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": ev["conversationId"], "userId": f.botID,
				"type": "text", "payload": map[string]any{"text": "echo"}, "tags": map[string]string{}}, 201)
		}
		return 200, "{}"
	})
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	msg := f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201).Str("message.id")

	eventually(t, "the reply reaches the integration", func() bool { return len(f.integ.of("message_created", "")) == 1 })
	got := f.bot.of("event_received", "message_created")
	if len(got) != 1 {
		t.Fatalf("bot received %d message_created", len(got))
	}
	in := got[0]
	if in.Header.Get("x-bot-id") != f.botID || in.Header.Get("x-bp-configuration") == "" || in.Header.Get("x-bot-user-id") != f.botID {
		t.Fatalf("bot headers: %v", in.Header)
	}
	ev := in.Body["event"].(map[string]any)
	p := ev["payload"].(map[string]any)
	if ev["type"] != "message_created" || ev["messageId"] != msg || p["message"].(map[string]any)["id"] != msg ||
		p["user"].(map[string]any)["id"] != user || p["conversation"].(map[string]any)["id"] != conv ||
		p["message"].(map[string]any)["direction"] != "incoming" {
		t.Fatalf("event: %v", in.Body)
	}
	out := f.integ.of("message_created", "")[0]
	if out.Header.Get("x-integration-alias") != "chan" || out.Header.Get("x-integration-id") != f.intID || out.Header.Get("x-bot-id") != f.botID || out.Header.Get("x-webhook-id") == "" {
		t.Fatalf("integration headers: %v", out.Header)
	}
	if out.Body["type"] != "text" || out.Body["message"].(map[string]any)["direction"] != "outgoing" ||
		out.Body["conversation"].(map[string]any)["id"] != conv || out.Body["user"].(map[string]any)["id"] != f.botID {
		t.Fatalf("integration body: %v", out.Body)
	}
	// The event is processed; the bot's reply made no event.
	eventually(t, "the event is processed", func() bool {
		l := f.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200)
		evs := l.List("events")
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
	time.Sleep(100 * time.Millisecond)
	if n := len(f.bot.of("event_received", "message_created")); n != 1 {
		t.Fatalf("the bot received %d message_created: its own message looped back", n)
	}
}

// createEvent reaches the bot (an integration's as <alias>:<type>);
// scheduled events when due; canceled ones never.
func TestRuntimeEvents(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "ping", "payload": map[string]any{"n": 1}}, 201)
	f.as(true, "POST", "/v1/chat/events", map[string]any{"type": "reacted", "payload": map[string]any{}}, 201)
	f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "later", "payload": map[string]any{}, "schedule": map[string]any{"delay": 300}}, 201)
	never := f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "never", "payload": map[string]any{}, "schedule": map[string]any{"delay": 300}}, 201).Str("event.id")
	f.as(false, "DELETE", "/v1/chat/events/scheduled/"+never, nil, 200)
	eventually(t, "the three events arrive", func() bool { return len(f.bot.of("event_received", "")) == 3 })
	var types []string
	for _, c := range f.bot.of("event_received", "") {
		types = append(types, c.typ())
		if c.Body["event"].(map[string]any)["type"] != c.typ() {
			t.Fatalf("x-bp-type %q for an event of type %v", c.typ(), c.Body["event"])
		}
	}
	slices.Sort(types) // events of no conversation go out independently
	if strings.Join(types, ",") != "chan:reacted,later,ping" {
		t.Fatalf("events delivered: %v", types)
	}
	time.Sleep(500 * time.Millisecond)
	if n := f.bot.count(); n != 3 {
		t.Fatalf("%d calls: the canceled event was delivered", n)
	}
}

// A bot answering 500 is retried with backoff until it answers; one
// answering 400 fails at once with the reason; one that never answers
// fails after the attempts, with the last reason; the platform stays
// healthy and nothing is lost.
func TestRuntimeRetriesAndFailures(t *testing.T) {
	var mu sync.Mutex
	fails := map[string]int{"flaky": 2}
	f := newRuntimeFixture(t, func(r received) (int, string) {
		typ := r.typ()
		mu.Lock()
		defer mu.Unlock()
		switch {
		case typ == "refused":
			return 400, `{"id":"err_1","code":400,"type":"InvalidPayload","message":"no handler for refused"}`
		case typ == "broken":
			return 500, "boom"
		case fails[typ] > 0:
			fails[typ]--
			return 500, "not yet"
		}
		return 200, "not even JSON"
	})
	ids := map[string]string{}
	for _, typ := range []string{"flaky", "refused", "broken", "fine"} {
		ids[typ] = f.as(false, "POST", "/v1/chat/events", map[string]any{"type": typ, "payload": map[string]any{}}, 201).Str("event.id")
	}
	status := func(typ string) (string, string) {
		e := f.as(false, "GET", "/v1/chat/events/"+ids[typ], nil, 200).Body["event"].(map[string]any)
		reason, _ := e["failureReason"].(string)
		return e["status"].(string), reason
	}
	eventually(t, "every event settles", func() bool {
		for typ := range ids {
			if s, _ := status(typ); s == "pending" {
				return false
			}
		}
		return true
	})
	for typ, want := range map[string]string{"flaky": "processed", "fine": "processed", "refused": "failed", "broken": "failed"} {
		if s, _ := status(typ); s != want {
			t.Errorf("%s: %s, want %s", typ, s, want)
		}
	}
	if _, why := status("refused"); !strings.Contains(why, "400") || !strings.Contains(why, "no handler") {
		t.Errorf("refused: reason %q", why)
	}
	if _, why := status("broken"); !strings.Contains(why, "500") {
		t.Errorf("broken: reason %q", why)
	}
	if n := len(f.bot.of("event_received", "flaky")); n != 3 {
		t.Errorf("flaky delivered %d times, want 3 (two 500s, then 200)", n)
	}
	if n := len(f.bot.of("event_received", "broken")); n != 3 {
		t.Errorf("broken tried %d times, want 3 attempts", n)
	}
	if n := len(f.bot.of("event_received", "refused")); n != 1 {
		t.Errorf("refused tried %d times, want 1 (a 4xx is not retried)", n)
	}
	// Every attempt carried the same event id.
	for _, c := range f.bot.of("event_received", "flaky") {
		if c.Body["event"].(map[string]any)["id"] != ids["flaky"] {
			t.Fatal("a retry changed the event id")
		}
	}
	f.as(false, "GET", "/v1/chat/events", nil, 200)
}

// Deliveries of one conversation keep their order, also when one of them
// needs retries.
func TestRuntimeOrderPerConversation(t *testing.T) {
	var mu sync.Mutex
	first := true
	f := newRuntimeFixture(t, func(r received) (int, string) {
		mu.Lock()
		defer mu.Unlock()
		if first {
			first = false
			return 503, "warming up"
		}
		return 200, "{}"
	})
	convs := []string{
		f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id"),
		f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id"),
	}
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	want := map[string][]string{}
	for i := range 20 {
		conv := convs[i%2]
		id := f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}}, 201).Str("message.id")
		want[conv] = append(want[conv], id)
	}
	eventually(t, "20 deliveries", func() bool {
		n := 0
		for _, c := range f.bot.of("event_received", "message_created") {
			if c.Header.Get("x-bp-type") == "message_created" {
				n++
			}
		}
		return n >= 21 // one 503, then 20
	})
	got := map[string][]string{}
	seen := map[string]bool{}
	for _, c := range f.bot.of("event_received", "message_created") {
		ev := c.Body["event"].(map[string]any)
		id := ev["messageId"].(string)
		if seen[id] {
			continue // the 503'd one, delivered again
		}
		seen[id] = true
		got[ev["conversationId"].(string)] = append(got[ev["conversationId"].(string)], id)
	}
	for _, conv := range convs {
		if strings.Join(got[conv], ",") != strings.Join(want[conv], ",") {
			t.Fatalf("conversation %s: delivered %v, written %v", conv, got[conv], want[conv])
		}
	}
}

// A state with an expiry that runs out reaches the bot as state_expired
// (once, with the state); one renewed before it runs out does not, until
// its new expiry.
func TestRuntimeStateExpired(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	user := f.as(false, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	path := "/v1/chat/states/user/" + user + "/profile"
	f.as(false, "POST", path, map[string]any{"payload": map[string]any{"v": 1}, "expiry": 300}, 200)
	// Renewed at once, with a longer expiry: the first check finds it renewed.
	f.as(false, "POST", path, map[string]any{"payload": map[string]any{"v": 2}, "expiry": 1200}, 200)
	time.Sleep(700 * time.Millisecond)
	if n := len(f.bot.of("event_received", "state_expired")); n != 0 {
		t.Fatalf("state_expired delivered %d times before the renewed expiry", n)
	}
	eventually(t, "state_expired arrives", func() bool { return len(f.bot.of("event_received", "state_expired")) == 1 })
	ev := f.bot.of("event_received", "state_expired")[0].Body["event"].(map[string]any)
	st := ev["payload"].(map[string]any)["state"].(map[string]any)
	if st["name"] != "profile" || ev["userId"] != user || st["payload"].(map[string]any)["v"] != float64(2) {
		t.Fatalf("state_expired event: %v", ev)
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(f.bot.of("event_received", "state_expired")); n != 1 {
		t.Fatalf("state_expired delivered %d times", n)
	}
	f.as(false, "GET", path, nil, 404)
}

// Deliveries due later (scheduled events, states' expiries) never hold up
// what is due now, however many wait.
func TestRuntimeScheduledDoNotBlock(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	for i := range 250 {
		f.as(false, "POST", "/v1/chat/events", map[string]any{"type": fmt.Sprint("later", i), "payload": map[string]any{}, "schedule": map[string]any{"delay": 600000}}, 201)
	}
	f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "now", "payload": map[string]any{}}, 201)
	eventually(t, "the event due now arrives", func() bool { return len(f.bot.of("event_received", "now")) == 1 })
	if n := f.bot.count(); n != 1 {
		t.Fatalf("%d calls: scheduled events went out early", n)
	}
}

// Workflows: created pending, they start in the bot (workflow_update /
// workflow_started); picked up again after listening (workflow_continued);
// timed out at timeoutAt (workflow_timedout); getOrCreate answers the
// running one; the reference's rules on status and eventId.
func TestRuntimeWorkflows(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	conv := f.as(false, "POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201).Str("conversation.id")
	cr := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/workflows", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID},
		Body: map[string]any{"name": "onboarding", "status": "pending", "conversationId": conv, "input": map[string]any{"step": 1}, "tags": map[string]string{"k": "v"}}}), 201, "createWorkflow")
	id := cr.Str("workflow.id")
	updates := func(kind string) []received {
		var out []received
		for _, c := range f.bot.of("event_received", "workflow_update") {
			p := c.Body["event"].(map[string]any)["payload"].(map[string]any)
			if p["type"] == kind {
				out = append(out, c)
			}
		}
		return out
	}
	eventually(t, "workflow_started", func() bool { return len(updates("workflow_started")) == 1 })
	if w := updates("workflow_started")[0].Body["event"].(map[string]any)["payload"].(map[string]any)["workflow"].(map[string]any); w["id"] != id || w["name"] != "onboarding" {
		t.Fatalf("workflow_started: %v", w)
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/workflows/" + id, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "getWorkflow")
	list := func(q string) int {
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/workflows" + q, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "listWorkflows")
		return len(r.List("workflows"))
	}
	if list("") != 1 || list("?name=onboarding&statuses=pending") != 1 || list("?statuses=completed") != 0 || list("?tags.k=v&conversationId="+conv) != 1 || list("?tags.k=w") != 0 {
		t.Fatal("listWorkflows filters")
	}
	put := func(body map[string]any, status int) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/chat/workflows/" + id, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}, Body: body}), status, "")
	}
	put(map[string]any{"status": "in_progress"}, 400) // needs the event id
	put(map[string]any{"status": "listening"}, 200)
	put(map[string]any{"status": "in_progress", "eventId": "evt_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 200)
	eventually(t, "workflow_continued", func() bool { return len(updates("workflow_continued")) == 1 })
	// getOrCreate answers the running workflow, not a new one.
	goc := func() string {
		return f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/workflows/get-or-create", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID},
			Body: map[string]any{"name": "onboarding", "status": "pending", "conversationId": conv, "tags": map[string]string{"k": "v"}}}), 200, "getOrCreateWorkflow").Str("workflow.id")
	}
	first := goc()
	if second := goc(); second != first {
		t.Fatalf("getOrCreate made two workflows: %s %s", first, second)
	}
	done := put(map[string]any{"status": "completed", "output": map[string]any{"ok": true}}, 200)
	if done.Str("workflow.completedAt") == "" {
		t.Fatalf("completed: %s", done.Raw)
	}
	put(map[string]any{"status": "in_progress", "eventId": "evt_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 400) // ended for good

	// Timeout: it ends timedout, and the bot hears of it.
	short := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/workflows", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID},
		Body: map[string]any{"name": "quick", "status": "listening", "timeoutAt": time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)}}), 201, "createWorkflow").Str("workflow.id")
	eventually(t, "workflow_timedout", func() bool { return len(updates("workflow_timedout")) == 1 })
	g := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/workflows/" + short, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "getWorkflow")
	if g.Str("workflow.status") != "timedout" {
		t.Fatalf("timed out workflow: %s", g.Raw)
	}
	// Bad input, nothing written.
	for _, b := range []map[string]any{{"status": "pending"}, {"name": "x", "status": "done"}, {"name": "x", "status": "pending", "timeoutAt": "soon"}} {
		f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/workflows", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}, Body: b}), 400, "")
	}
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/workflows", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID},
		Body: map[string]any{"name": "x", "status": "pending", "conversationId": "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV"}}), 404, "")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/workflows/" + short, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "deleteWorkflow")
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/workflows/" + short, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 404, "")
	if n := list(""); n != 2 {
		t.Fatalf("%d workflows listed, want 2", n)
	}
}

// bot.subscriptions: with a map of events, the integration and custom
// events it does not name are not delivered (status ignored); the
// platform's own events always are.
func TestRuntimeSubscriptions(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	f.Check(f.updateBot(f.AdminToken, f.botID, map[string]any{"subscriptions": map[string]any{"events": map[string]any{"chan:reacted": map[string]any{}}}}), 200, "updateBot")
	wanted := f.as(true, "POST", "/v1/chat/events", map[string]any{"type": "reacted", "payload": map[string]any{}}, 201).Str("event.id")
	unwanted := f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "custom", "payload": map[string]any{}}, 201).Str("event.id")
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
	status := func(id string) string {
		return f.as(false, "GET", "/v1/chat/events/"+id, nil, 200).Str("event.status")
	}
	eventually(t, "the events settle", func() bool {
		return status(wanted) == "processed" && status(unwanted) == "ignored" && len(f.bot.of("event_received", "message_created")) == 1
	})
	if n := len(f.bot.of("event_received", "custom")); n != 0 {
		t.Fatalf("an unsubscribed event was delivered %d times", n)
	}
}

// An integration writes and reads its tags unprefixed; the bot sees them
// as <alias>:<tag>; filters and discriminators follow; what the platform
// sends the integration is unprefixed again.
func TestRuntimeIntegrationTagView(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{"id": "42"}, "discriminateByTags": []string{"id"}}, 200)
	id := conv.Str("conversation.id")
	if tags := conv.Body["conversation"].(map[string]any)["tags"].(map[string]any); tags["id"] != "42" || len(tags) != 1 {
		t.Fatalf("the integration's view: %s", conv.Raw)
	}
	again := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{"id": "42"}, "discriminateByTags": []string{"id"}}, 200)
	if again.Str("conversation.id") != id {
		t.Fatal("getOrCreate by the integration's tag made a second conversation")
	}
	bot := f.as(false, "GET", "/v1/chat/conversations/"+id, nil, 200)
	if tags := bot.Body["conversation"].(map[string]any)["tags"].(map[string]any); tags["chan:id"] != "42" || len(tags) != 1 {
		t.Fatalf("the bot's view: %s", bot.Raw)
	}
	if l := f.as(true, "GET", "/v1/chat/conversations?tags.id=42", nil, 200); len(l.List("conversations")) != 1 {
		t.Fatalf("the integration's filter: %s", l.Raw)
	}
	if l := f.as(false, "GET", "/v1/chat/conversations?tags.chan:id=42", nil, 200); len(l.List("conversations")) != 1 {
		t.Fatalf("the bot's filter: %s", l.Raw)
	}
	// The bot writes in the conversation; the integration gets it unprefixed.
	f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": id, "userId": f.botID, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
	eventually(t, "message_created reaches the integration", func() bool { return len(f.integ.of("message_created", "")) == 1 })
	if tags := f.integ.of("message_created", "")[0].Body["conversation"].(map[string]any)["tags"].(map[string]any); tags["id"] != "42" {
		t.Fatalf("what the integration got: %v", tags)
	}
}

// Child workflows: when a child ends (completed, failed, cancelled, timed
// out) its parent hears child_workflow_finished, and child_workflow_deleted
// when it is deleted; the payload names the parent as workflow and the
// child as childWorkflow.
func TestRuntimeChildWorkflows(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	wf := func(method, path string, body any, status int) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}, Body: body}), status, "")
	}
	parent := wf("POST", "/v1/chat/workflows", map[string]any{"name": "parent", "status": "listening"}, 201).Str("workflow.id")
	child := func(name string, extra map[string]any) string {
		b := map[string]any{"name": name, "status": "listening", "parentWorkflowId": parent}
		for k, v := range extra {
			b[k] = v
		}
		return wf("POST", "/v1/chat/workflows", b, 201).Str("workflow.id")
	}
	heard := func(kind, childID string) []map[string]any {
		var out []map[string]any
		for _, c := range f.bot.of("event_received", "workflow_update") {
			ev := c.Body["event"].(map[string]any)
			p := ev["payload"].(map[string]any)
			cw, _ := p["childWorkflow"].(map[string]any)
			if p["type"] == kind && cw != nil && cw["id"] == childID {
				if w := p["workflow"].(map[string]any); w["id"] != parent {
					t.Fatalf("%s names %v, not the parent", kind, w["id"])
				}
				out = append(out, p)
			}
		}
		return out
	}
	done := child("done", nil)
	wf("PUT", "/v1/chat/workflows/"+done, map[string]any{"status": "completed", "output": map[string]any{"n": 1}}, 200)
	eventually(t, "child_workflow_finished (completed)", func() bool { return len(heard("child_workflow_finished", done)) == 1 })
	if cw := heard("child_workflow_finished", done)[0]["childWorkflow"].(map[string]any); cw["status"] != "completed" {
		t.Fatalf("child: %v", cw)
	}
	// An update of a child that already ended says nothing more.
	wf("PUT", "/v1/chat/workflows/"+done, map[string]any{"tags": map[string]string{"k": "v"}}, 200)

	quick := child("quick", map[string]any{"timeoutAt": time.Now().Add(200 * time.Millisecond).UTC().Format(time.RFC3339Nano)})
	eventually(t, "child_workflow_finished (timed out)", func() bool { return len(heard("child_workflow_finished", quick)) == 1 })

	wf("DELETE", "/v1/chat/workflows/"+done, nil, 200)
	eventually(t, "child_workflow_deleted", func() bool { return len(heard("child_workflow_deleted", done)) == 1 })

	// A workflow without a parent tells nobody; a child whose parent is gone neither.
	lone := wf("POST", "/v1/chat/workflows", map[string]any{"name": "lone", "status": "listening"}, 201).Str("workflow.id")
	orphan := child("orphan", nil)
	wf("DELETE", "/v1/chat/workflows/"+parent, nil, 200)
	wf("PUT", "/v1/chat/workflows/"+lone, map[string]any{"status": "failed", "failureReason": "x"}, 200)
	wf("PUT", "/v1/chat/workflows/"+orphan, map[string]any{"status": "cancelled"}, 200)
	time.Sleep(300 * time.Millisecond)
	if n := len(heard("child_workflow_finished", done)); n != 1 {
		t.Fatalf("child_workflow_finished of %s heard %d times", done, n)
	}
	if n := len(heard("child_workflow_finished", orphan)); n != 0 {
		t.Fatalf("an orphan's end was told %d times", n)
	}
}
