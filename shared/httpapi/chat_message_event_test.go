package httpapi_test

import (
	"encoding/json"
	"testing"
	"time"
)

// TestMessageCreatedEventPayload: a user's message_created event, stored
// without a copy of its message, answers getEvent and listEvents with the
// message as it was created ({"message": ...}, as before), also after the
// message is updated or deleted (the event then keeps its own copy).
func TestMessageCreatedEventPayload(t *testing.T) {
	f := newChatFixture(t)
	conv, user := f.conversation("c", nil), f.user(nil)
	canon := func(v any) string {
		b, _ := json.Marshal(v)
		var x any
		_ = json.Unmarshal(b, &x)
		b, _ = json.Marshal(x)
		return string(b)
	}
	// eventOf lists the message's event once its delivery has ended (the
	// fixture's bot has no url: it fails), so that listEvents and getEvent
	// read one status; read while pending, the two could straddle the end.
	eventOf := func(msg string) map[string]any {
		t.Helper()
		var found map[string]any
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			r := f.call("GET", "/v1/chat/events?conversationId="+conv, nil, 200, "listEvents")
			found = nil
			for _, e := range r.Body["events"].([]any) {
				if e := e.(map[string]any); e["messageId"] == msg && e["type"] == "message_created" {
					found = e
				}
			}
			if found == nil {
				t.Fatalf("no message_created event of %s in %s", msg, r.Raw)
			}
			if found["status"] != "pending" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the event of %s still pending after 10 s: %s", msg, r.Raw)
			}
		}
		got := f.call("GET", "/v1/chat/events/"+found["id"].(string), nil, 200, "getEvent").Body["event"]
		if canon(got) != canon(found) {
			t.Errorf("getEvent and listEvents differ:\n%s\n%s", canon(got), canon(found))
		}
		return found
	}
	payloadText := func(e map[string]any) any {
		m, _ := e["payload"].(map[string]any)["message"].(map[string]any)
		p, _ := m["payload"].(map[string]any)
		return p["text"]
	}

	updated := f.message(conv, user, map[string]string{})
	created := f.call("GET", "/v1/chat/messages/"+updated, nil, 200, "getMessage").Body["message"]
	e := eventOf(updated)
	if got := e["payload"].(map[string]any)["message"]; canon(got) != canon(created) {
		t.Fatalf("event payload's message:\n got %s\nwant %s", canon(got), canon(created))
	}
	f.call("PUT", "/v1/chat/messages/"+updated, map[string]any{"payload": map[string]any{"text": "changed"}, "tags": map[string]string{}}, 200, "updateMessage")
	if e := eventOf(updated); payloadText(e) != "hi" || canon(e["payload"].(map[string]any)["message"]) != canon(created) {
		t.Errorf("after updateMessage, the event's payload is %s, want the message as created", canon(e["payload"]))
	}

	deleted := f.message(conv, user, map[string]string{})
	was := f.call("GET", "/v1/chat/messages/"+deleted, nil, 200, "getMessage").Body["message"]
	f.call("DELETE", "/v1/chat/messages/"+deleted, nil, 200, "deleteMessage")
	if e := eventOf(deleted); canon(e["payload"].(map[string]any)["message"]) != canon(was) {
		t.Errorf("after deleteMessage, the event's payload is %s, want the message", canon(e["payload"]))
	}
}
