package httpapi_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A conversation has one ordered lane per receiver (docs/runtime.md, "In
// order per conversation"): the bot's reply reaches the integration as it
// is created, while the bot's handler still runs (an LLM call after "Let
// me check..."), not once the handler returns.
func TestReplyReachesIntegrationWhileBotWorks(t *testing.T) {
	release := make(chan struct{})
	var returned atomic.Bool
	var f *runtimeFixture
	f = newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": ev["conversationId"], "userId": f.botID,
				"type": "text", "payload": map[string]any{"text": "let me check"}, "tags": map[string]string{}}, 201)
			select { // works on (at most 8 s: under the bot's 10 s timeout)
			case <-release:
			case <-time.After(8 * time.Second):
			}
			returned.Store(true)
		}
		return 200, "{}"
	})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // before the receivers close
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)

	eventually(t, "the reply reaches the integration", func() bool { return len(f.integ.of("message_created", "")) == 1 || returned.Load() })
	if returned.Load() {
		t.Fatal("the reply reached the integration only once the bot's handler returned")
	}
	once.Do(func() { close(release) })
	eventually(t, "the event is processed", func() bool {
		evs := f.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200).List("events")
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
}

// Each lane keeps its order, and a retry of one lane's head holds back
// that lane only: the integration answers 503 to the bot's first reply
// while the conversation's next user messages reach the bot, in order;
// then the bot's replies reach it in the order they were created.
func TestLanesInOrderRetryHoldsItsOwn(t *testing.T) {
	var failing atomic.Bool
	failing.Store(true)
	var f *runtimeFixture
	f = newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			msg := ev["payload"].(map[string]any)["message"].(map[string]any)
			if msg["payload"].(map[string]any)["text"] == "u0" {
				for i := range 3 {
					f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": ev["conversationId"], "userId": f.botID,
						"type": "text", "payload": map[string]any{"text": fmt.Sprint("r", i)}, "tags": map[string]string{}}, 201)
				}
			}
		}
		return 200, "{}"
	})
	f.Platform.Dispatcher.SetRetry(200*time.Millisecond, 10) // the 503s outlast the user's messages
	f.integ.answer = func(r received) (int, string) {
		if failing.Load() {
			return 503, "down"
		}
		return 200, "{}"
	}
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	send := func(text string) string {
		return f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201).Str("message.id")
	}
	texts := func(calls []received, text func(received) string) []string {
		var out []string
		for _, c := range calls {
			out = append(out, text(c))
		}
		return out
	}
	botText := func(c received) string {
		ev := c.Body["event"].(map[string]any)
		return ev["payload"].(map[string]any)["message"].(map[string]any)["payload"].(map[string]any)["text"].(string)
	}
	integText := func(c received) string { return c.Body["payload"].(map[string]any)["text"].(string) }

	send("u0")
	eventually(t, "the integration is sent the first reply", func() bool { return len(f.integ.of("message_created", "")) >= 1 })
	send("u1")
	send("u2")
	eventually(t, "the bot gets the user's next messages while the integration's lane retries", func() bool {
		return len(f.bot.of("event_received", "message_created")) == 3
	})
	if got := texts(f.bot.of("event_received", "message_created"), botText); !slices.Equal(got, []string{"u0", "u1", "u2"}) {
		t.Fatalf("the bot's lane: %v, want u0, u1, u2", got)
	}
	for _, c := range f.integ.of("message_created", "") {
		if integText(c) != "r0" {
			t.Fatalf("the integration was sent %q while the first reply was retried: %v", integText(c), texts(f.integ.of("message_created", ""), integText))
		}
	}
	failing.Store(false)
	eventually(t, "the three replies reach the integration", func() bool {
		return slices.Contains(texts(f.integ.of("message_created", ""), integText), "r2")
	})
	got := slices.Compact(texts(f.integ.of("message_created", ""), integText)) // r0's 503s, then r0 once answered
	if !slices.Equal(got, []string{"r0", "r1", "r2"}) {
		t.Fatalf("the integration's lane: %v, want r0 (retried), r1, r2", got)
	}
}

// Deleting a bot purges both lanes of its conversations: a user's message
// whose delivery the bot keeps refusing (its lane's entry retried) and the
// bot's reply the integration keeps refusing (the integration lane's)
// leave no outbox entry once the bot's deletion is swept.
func TestBotDeletionRemovesBothLanes(t *testing.T) {
	f := newRuntimeFixture(t, func(r received) (int, string) { return 503, "down" })
	f.integ.answer = func(r received) (int, string) { return 503, "down" }
	f.Platform.Dispatcher.SetRetry(time.Second, 100) // refused all along the test
	conv := f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)
	f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": f.botID, "type": "text",
		"payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
	lanes := func() (toBot, toIntegration int) {
		for _, k := range f.ItemsHolding(f.botID) {
			switch {
			case strings.HasPrefix(k, "OUTBOX#"+f.botID+"#"+conv+"#out / "):
				toIntegration++
			case strings.HasPrefix(k, "OUTBOX#"+f.botID+"#"+conv+" / "):
				toBot++
			}
		}
		return
	}
	eventually(t, "both lanes hold an entry refused at least once", func() bool {
		b, i := lanes()
		return b == 1 && i == 1 && len(f.bot.of("event_received", "")) > 0 && len(f.integ.of("message_created", "")) > 0
	})
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+f.botID, nil), 200, "deleteBot")
	eventually(t, "the bot's deletion is swept", func() bool {
		n, err := f.Platform.Store.PendingDeletions(context.Background())
		return err == nil && n == 0
	})
	if b, i := lanes(); b != 0 || i != 0 {
		t.Fatalf("after the bot's deletion: %d entries in the bot's lane, %d in the integration's; want none", b, i)
	}
}
