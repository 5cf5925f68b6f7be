package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
)

// TestMessageEventsDerived: a user's message_created event has no item of
// its own while its message is there (derived from the message,
// docs/data-model.md, "Items per message"), yet getEvent and listEvents
// answer what the writes made, compared here with a list built from the
// write calls' answers alone: every event of the bot newest first, at
// page sizes 1, 2, 3 and 100, under every filter (type, userId,
// messageId, status, conversationId, and two together), with each
// listed event equal to getEvent's; delivered events processed, a
// delivery the bot refused failed with its reason, one the bot is still
// handling pending; an updated message's event keeps the message as
// created, a deleted message's is still there (also one updated first,
// and a failed one), listed once; the bot's own messages and
// an imported one have none.
func TestMessageEventsDerived(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	text := func(r received) string {
		ev, _ := r.Body["event"].(map[string]any)
		p, _ := ev["payload"].(map[string]any)
		m, _ := p["message"].(map[string]any)
		mp, _ := m["payload"].(map[string]any)
		s, _ := mp["text"].(string)
		return s
	}
	f := newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			switch text(r) {
			case "fail":
				return 400, `{"id":"err_1","code":400,"type":"InvalidPayload","message":"refused here"}`
			case "hold":
				<-release
			}
		}
		return 200, "{}"
	})
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the fake bot closes
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		var x any
		_ = json.Unmarshal(b, &x)
		b, _ = json.Marshal(x)
		return string(b)
	}

	type expected struct {
		id, typ, conv, user, msg, created, status string
		message                                   any // the payload's message, for message_created
	}
	var want []*expected
	conv := func() string {
		return f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	}
	c := []string{conv(), conv()}
	u := []string{
		f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id"),
		f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id"),
	}
	send := func(conv, user, txt string) *expected {
		r := f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": txt}, "tags": map[string]string{}}, 201)
		m := r.Body["message"].(map[string]any)
		e := &expected{id: "evt_" + strings.TrimPrefix(m["id"].(string), "msg_"), typ: "message_created", conv: conv, user: user,
			msg: m["id"].(string), created: m["createdAt"].(string), status: "processed", message: m}
		if txt == "fail" {
			e.status = "failed"
		}
		want = append(want, e)
		return e
	}
	var msgs []*expected
	for i := range 6 {
		txt := fmt.Sprintf("m%d", i)
		if i == 2 || i == 4 {
			txt = "fail"
		}
		msgs = append(msgs, send(c[i%2], u[(i/2)%2], txt))
		// The bot's own message: no event.
		f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": c[0], "userId": f.botID, "type": "text",
			"payload": map[string]any{"text": "reply"}, "tags": map[string]string{}}, 201)
		if i%3 == 0 {
			r := f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{"n": i}, "conversationId": c[0]}, 201)
			ev := r.Body["event"].(map[string]any)
			want = append(want, &expected{id: ev["id"].(string), typ: "x", conv: c[0], created: ev["createdAt"].(string), status: "processed"})
		}
	}
	// An imported message: no event.
	f.as(false, "POST", "/v1/chat/messages/import-messages", map[string]any{"messages": []map[string]any{{"conversationId": c[1], "userId": u[0], "type": "text",
		"payload": map[string]any{"text": "old"}, "tags": map[string]string{}, "createdAt": "2024-01-01T10:00:00.000Z", "discriminateByTags": []string{}}}}, 200)

	get := func(id string) map[string]any {
		return f.as(false, "GET", "/v1/chat/events/"+id, nil, 200).Body["event"].(map[string]any)
	}
	eventually(t, "every event settles", func() bool {
		for _, e := range want {
			if get(e.id)["status"] == "pending" {
				return false
			}
		}
		return true
	})
	// Changed and deleted after delivery: the events stay as created.
	f.as(false, "PUT", "/v1/chat/messages/"+msgs[0].msg, map[string]any{"payload": map[string]any{"text": "changed"}, "tags": map[string]string{}}, 200)
	f.as(false, "DELETE", "/v1/chat/messages/"+msgs[1].msg, nil, 200)
	// Updated, then deleted; failed, then deleted.
	f.as(false, "PUT", "/v1/chat/messages/"+msgs[3].msg, map[string]any{"payload": map[string]any{"text": "changed"}, "tags": map[string]string{}}, 200)
	f.as(false, "DELETE", "/v1/chat/messages/"+msgs[3].msg, nil, 200)
	f.as(false, "DELETE", "/v1/chat/messages/"+msgs[2].msg, nil, 200)
	// One the bot is still handling: pending.
	held := send(conv(), u[0], "hold")
	held.status = "pending"
	eventually(t, "the held event reaches the bot", func() bool {
		for _, r := range f.bot.of("event_received", "message_created") {
			if text(r) == "hold" {
				return true
			}
		}
		return false
	})

	sort.Slice(want, func(i, j int) bool {
		if want[i].created != want[j].created {
			return want[i].created > want[j].created
		}
		return want[i].id > want[j].id
	})
	byID := map[string]*expected{}
	for _, e := range want {
		byID[e.id] = e
	}
	check := func(what string, got map[string]any) {
		t.Helper()
		e := byID[got["id"].(string)]
		if e == nil {
			t.Errorf("%s: event %s not expected: %s", what, got["id"], canon(got))
			return
		}
		str := func(k string) string { s, _ := got[k].(string); return s }
		if str("type") != e.typ || str("conversationId") != e.conv || str("userId") != e.user || str("messageId") != e.msg ||
			str("createdAt") != e.created || str("status") != e.status {
			t.Errorf("%s: %s, want type %s conversation %s user %s message %s createdAt %s status %s", what, canon(got), e.typ, e.conv, e.user, e.msg, e.created, e.status)
		}
		reason, _ := got["failureReason"].(string)
		if (e.status == "failed") != strings.Contains(reason, "refused here") {
			t.Errorf("%s: %s: failureReason %q with status %s", what, e.id, reason, e.status)
		}
		if e.message != nil {
			p, _ := got["payload"].(map[string]any)
			if canon(p["message"]) != canon(e.message) {
				t.Errorf("%s: %s: payload's message %s, want %s", what, e.id, canon(p["message"]), canon(e.message))
			}
		}
	}
	gets := map[string]string{}
	for _, e := range want {
		g := get(e.id)
		check("getEvent", g)
		gets[e.id] = canon(g)
	}

	list := func(query string, size int) []map[string]any {
		var out []map[string]any
		token := ""
		for range 100 {
			p := fmt.Sprintf("/v1/chat/events?pageSize=%d%s", size, query)
			if token != "" {
				p += "&nextToken=" + url.QueryEscape(token)
			}
			r := f.as(false, "GET", p, nil, 200)
			for _, v := range r.List("events") {
				out = append(out, v.(map[string]any))
			}
			if token = r.Str("meta.nextToken"); token == "" {
				return out
			}
		}
		t.Fatalf("listEvents%s: more than 100 pages", query)
		return nil
	}
	filters := []struct {
		query string
		keep  func(e *expected) bool
	}{
		{"", func(*expected) bool { return true }},
		{"&type=message_created", func(e *expected) bool { return e.typ == "message_created" }},
		{"&type=x", func(e *expected) bool { return e.typ == "x" }},
		{"&conversationId=" + c[0], func(e *expected) bool { return e.conv == c[0] }},
		{"&conversationId=" + c[1], func(e *expected) bool { return e.conv == c[1] }},
		{"&conversationId=" + held.conv, func(e *expected) bool { return e.conv == held.conv }},
		{"&userId=" + u[0], func(e *expected) bool { return e.user == u[0] }},
		{"&userId=" + u[1], func(e *expected) bool { return e.user == u[1] }},
		{"&messageId=" + msgs[0].msg, func(e *expected) bool { return e.msg == msgs[0].msg }},
		{"&messageId=" + msgs[1].msg, func(e *expected) bool { return e.msg == msgs[1].msg }},
		{"&messageId=" + msgs[2].msg, func(e *expected) bool { return e.msg == msgs[2].msg }},
		{"&status=processed", func(e *expected) bool { return e.status == "processed" }},
		{"&status=failed", func(e *expected) bool { return e.status == "failed" }},
		{"&status=pending", func(e *expected) bool { return e.status == "pending" }},
		{"&type=message_created&status=failed", func(e *expected) bool { return e.typ == "message_created" && e.status == "failed" }},
		{"&userId=" + u[1] + "&conversationId=" + c[1], func(e *expected) bool { return e.user == u[1] && e.conv == c[1] }},
	}
	for _, fl := range filters {
		var ids []string
		for _, e := range want {
			if fl.keep(e) {
				ids = append(ids, e.id)
			}
		}
		if fl.query == "" && len(ids) != 9 { // 7 users' messages, 2 created events
			t.Fatalf("expected %d events, want 9", len(ids))
		}
		for _, size := range []int{1, 2, 3, 100} {
			got := list(fl.query, size)
			var gotIDs []string
			for _, g := range got {
				gotIDs = append(gotIDs, g["id"].(string))
				if canon(g) != gets[g["id"].(string)] {
					t.Errorf("listEvents%s pageSize %d lists %s, getEvent answers %s", fl.query, size, canon(g), gets[g["id"].(string)])
				}
			}
			if !sameIDs(gotIDs, ids) {
				t.Errorf("listEvents%s pageSize %d: %v, want %v", fl.query, size, gotIDs, ids)
			}
		}
	}

	once.Do(func() { close(release) })
	eventually(t, "the held event is processed", func() bool { return get(held.id)["status"] == "processed" })
}
