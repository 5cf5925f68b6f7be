package httpapi_test

import "testing"

// In one conversation's outbox shard, events scheduled for later never
// hold up one due now written after them, and do not go out early; an
// event of another conversation is not held up either.
func TestRuntimeScheduledInAConversationDoNotBlock(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	conv := f.as(false, "POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201).Str("conversation.id")
	other := f.as(false, "POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201).Str("conversation.id")
	for range 3 {
		f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "later", "conversationId": conv, "payload": map[string]any{},
			"schedule": map[string]any{"delay": 600000}}, 201)
	}
	f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "now", "conversationId": conv, "payload": map[string]any{}}, 201)
	f.as(false, "POST", "/v1/chat/events", map[string]any{"type": "elsewhere", "conversationId": other, "payload": map[string]any{}}, 201)
	eventually(t, "the events due now arrive", func() bool {
		return len(f.bot.of("event_received", "now")) == 1 && len(f.bot.of("event_received", "elsewhere")) == 1
	})
	// They come first in the shard: sent early, they would have gone out
	// before the one due now.
	if n := len(f.bot.of("event_received", "later")); n != 0 {
		t.Fatalf("%d scheduled events went out early", n)
	}
}
