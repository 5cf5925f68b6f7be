package httpapi_test

import (
	"strings"
	"testing"
	"time"
)

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestEvents(t *testing.T) {
	f := newChatFixture(t)
	conv, u := f.conversation("web", nil), f.user(nil)
	m := f.message(conv, u, nil)
	r := f.call("POST", "/v1/chat/events", map[string]any{"type": "custom:ping", "payload": map[string]any{"n": 1}, "conversationId": conv, "userId": u, "messageId": m}, 201, "createEvent")
	e1 := r.Str("event.id")
	if r.Str("event.status") != "pending" || r.Body["event"].(map[string]any)["failureReason"] != nil || r.Str("event.conversationId") != conv {
		t.Fatalf("createEvent: %s", r.Raw)
	}
	if g := f.call("GET", "/v1/chat/events/"+e1, nil, 200, "getEvent"); g.Str("event.messageId") != m {
		t.Fatalf("getEvent: %s", g.Raw)
	}
	e2 := f.call("POST", "/v1/chat/events", map[string]any{"type": "custom:pong", "payload": map[string]any{}}, 201, "createEvent").Str("event.id")
	s := f.call("POST", "/v1/chat/events", map[string]any{"type": "custom:later", "payload": map[string]any{}, "schedule": map[string]any{"delay": 60000}}, 201, "createEvent")
	e3 := s.Str("event.id")
	if s.Str("event.status") != "scheduled" {
		t.Fatalf("scheduled event: %s", s.Raw)
	}

	// The user's message made a message_created event for the bot.
	created, _ := f.listAll("/v1/chat/events?type=message_created", 10, "listEvents", "events")
	if len(created) != 1 {
		t.Fatalf("message_created events: %v", created)
	}
	e0 := created[0]
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{e3, e2, e1, e0}},
		{"?type=custom:pong", []string{e2}},
		{"?conversationId=" + conv, []string{e1, e0}},
		{"?userId=" + u, []string{e1, e0}},
		{"?messageId=" + m, []string{e1, e0}},
		{"?status=scheduled", []string{e3}},
	} {
		if got, _ := f.listAll("/v1/chat/events"+tc.query, 1, "listEvents", "events"); !sameIDs(got, tc.want) {
			t.Errorf("listEvents%s: %v, want %v", tc.query, got, tc.want)
		}
	}

	f.call("DELETE", "/v1/chat/events/scheduled/"+e3, nil, 200, "cancelScheduledEvent")
	if g := f.call("GET", "/v1/chat/events/"+e3, nil, 200, "getEvent"); g.Str("event.status") != "canceled" {
		t.Fatalf("canceled: %s", g.Raw)
	}
	f.call("DELETE", "/v1/chat/events/scheduled/"+e3, nil, 404, "")
	f.call("DELETE", "/v1/chat/events/scheduled/"+e1, nil, 404, "")

	// Links to records that do not exist in the bot are refused, nothing written.
	for _, b := range []map[string]any{
		{"type": "x", "payload": map[string]any{}, "conversationId": "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"type": "x", "payload": map[string]any{}, "userId": "user_01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"type": "x", "payload": map[string]any{}, "messageId": "msg_01ARZ3NDEKTSV4RRFFQ69G5FAV00"},
		{"type": "x", "payload": map[string]any{}, "workflowId": "wflow_01ARZ3NDEKTSV4RRFFQ69G5FAV"},
		{"type": "x", "payload": map[string]any{}, "conversationId": conv, "userId": "user_01ARZ3NDEKTSV4RRFFQ69G5FAV"},
	} {
		f.call("POST", "/v1/chat/events", b, 404, "")
	}
	for _, b := range []map[string]any{
		{"type": "x"},
		{"type": "x", "payload": "no"},
		{"type": "x", "payload": map[string]any{}, "schedule": map[string]any{}},
		{"type": "x", "payload": map[string]any{}, "schedule": map[string]any{"dateTime": "not a date, but long enough"}},
		{"type": "x", "payload": map[string]any{}, "schedule": map[string]any{"delay": 1, "dateTime": "2030-01-01T00:00:00.000Z"}},
		{"type": "x", "payload": map[string]any{}, "conversationId": "short"},
	} {
		f.call("POST", "/v1/chat/events", b, 400, "")
	}
	// This bot has no url: its events fail, with the reason.
	waitFor(t, func() bool {
		g := f.call("GET", "/v1/chat/events/"+e1, nil, 200, "getEvent")
		reason, _ := g.Body["event"].(map[string]any)["failureReason"].(string)
		return g.Str("event.status") == "failed" && strings.Contains(reason, "no url")
	})
	if got, _ := f.listAll("/v1/chat/events", 10, "listEvents", "events"); len(got) != 4 {
		t.Fatalf("refused events written: %v", got)
	}
	f.call("GET", "/v1/chat/events/evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404, "")
	f.call("GET", "/v1/chat/events?status=bogus", nil, 400, "")
}
