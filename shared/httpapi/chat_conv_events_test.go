package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestConversationEventsThroughMessages: a user's message_created event
// has no entry of its own in its conversation's events list (it lists
// through its message's copy, docs/data-model.md, "Items per message"),
// yet listEvents?conversationId= answers, page by page at any page size,
// exactly the conversation's events of the bot-wide list in its order:
// users' messages' events, events created on the conversation, the event
// of a deleted message; none for the bot's own messages or an imported
// one. Deleting the conversation deletes its message_created events.
func TestConversationEventsThroughMessages(t *testing.T) {
	f := newChatFixture(t)
	conv, other, user := f.conversation("c", nil), f.conversation("c", nil), f.user(nil)
	var deleted string
	for i := range 4 {
		m := f.message(conv, user, nil)
		if i == 1 {
			deleted = m
		}
		f.message(other, user, nil)
		f.call("POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": f.bot, "type": "text", "payload": map[string]any{"text": "bot"}, "tags": map[string]string{}}, 201, "createMessage")
		if i%2 == 0 {
			f.call("POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}, "conversationId": conv}, 201, "createEvent")
		}
	}
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.bot},
		Body: map[string]any{"messages": []map[string]any{{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "old"},
			"tags": map[string]string{}, "createdAt": "2024-01-01T10:00:00.000Z", "discriminateByTags": []string{}}}}}), 200, "importMessages")
	f.call("DELETE", "/v1/chat/messages/"+deleted, nil, 200, "deleteMessage")

	inConv := func() []string {
		var want []string
		all, _ := f.listAll("/v1/chat/events", 100, "listEvents", "events")
		for _, id := range all {
			if f.call("GET", "/v1/chat/events/"+id, nil, 200, "getEvent").Str("event.conversationId") == conv {
				want = append(want, id)
			}
		}
		return want
	}
	want := inConv()
	if len(want) != 6 { // 4 users' messages (one deleted since), 2 created
		t.Fatalf("the bot-wide list has %d events of the conversation, want 6: %v", len(want), want)
	}
	for _, size := range []int{1, 2, 3, 100} {
		got, _ := f.listAll("/v1/chat/events?conversationId="+conv, size, "listEvents", "events")
		if !sameIDs(got, want) {
			t.Errorf("pageSize %d: listEvents?conversationId= answers %v, want %v", size, got, want)
		}
	}

	f.call("DELETE", "/v1/chat/conversations/"+conv, nil, 200, "deleteConversation")
	if left := inConv(); len(left) != 0 {
		t.Errorf("after deleteConversation, its events are still listed: %v", left)
	}
	for _, id := range want {
		if r := f.req("", "GET", "/v1/chat/events/"+id, nil); r.Status != 404 {
			t.Errorf("getEvent %s of a deleted conversation: %d, want 404", id, r.Status)
		}
	}
}
