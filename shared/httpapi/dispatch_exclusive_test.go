package httpapi_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/localdynamo"
)

// TestLocalDeliveryTakesNoLease: over its embedded DynamoDB the local
// dispatcher is the only one (dispatch.Dispatcher.Exclusive): a message's
// delivery writes its outbox shard twice (the entry, put in the message's
// transaction: 2 units; its removal: 1), no lease in between (an fsync
// less before each delivery, on the reply's path).
func TestLocalDeliveryTakesNoLease(t *testing.T) {
	f := newRuntimeFixture(t, func(r received) (int, string) { return 200, "{}" })
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	defer ddb.CountUnits(false)
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)
	eventually(t, "the event is processed", func() bool {
		evs := f.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200).List("events")
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
	shard := localdynamo.Partition{Table: f.Platform.Env.Table, Key: "OUTBOX#" + f.botID + "#" + conv}
	eventually(t, "the entry is removed", func() bool { return ddb.Usage().Partitions[shard].Write >= 3 })
	if w := ddb.Usage().Partitions[shard].Write; w != 3 {
		t.Fatalf("the conversation's outbox shard took %.1f write units for one delivery, want 3 (put in a transaction, delete; no lease)", w)
	}
}

// TestInvocationCountedWhileTheBotWorks: the bot's invocation is counted
// while the call to the bot is under way (every attempt counts, answered
// or not), so its durable write is not one more fsync between the bot's
// answer and the conversation's next delivery (its reply). The fake bot
// waits, up to 5 s, for the count before it answers; counted after the
// answer, it would never see it.
func TestInvocationCountedWhileTheBotWorks(t *testing.T) {
	var f *runtimeFixture
	seen := make(chan int64, 1)
	f = newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			var n int64
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				c, err := f.Platform.Store.BotUsage(context.Background(), f.botID, time.Now())
				if err == nil && c.Invocations > 0 {
					n = c.Invocations
					break
				}
			}
			seen <- n
		}
		return 200, "{}"
	})
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201)
	select {
	case n := <-seen:
		if n != 1 {
			t.Fatalf("while the bot handled the event, its invocations counted %d, want 1 (counted during the call)", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the event did not reach the bot")
	}
	eventually(t, "the event is processed", func() bool {
		evs := f.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200).List("events")
		return len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed"
	})
	c, err := f.Platform.Store.BotUsage(context.Background(), f.botID, time.Now())
	if err != nil || c.Invocations != 1 {
		t.Fatalf("after the delivery: %d invocations (%v), want 1", c.Invocations, err)
	}
}

// TestSlowConversationHoldsBackNoOther: the local dispatcher works each
// conversation named by a commit at once, in its own goroutine: while the
// bot takes its time over one conversation's message, another
// conversation's message reaches it (before, a pass waited for all its
// shards, and what a commit named meanwhile waited for the slowest).
func TestSlowConversationHoldsBackNoOther(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	f := newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			m := r.Body["event"].(map[string]any)["payload"].(map[string]any)["message"].(map[string]any)
			if m["payload"].(map[string]any)["text"] == "slow" {
				select {
				case <-release:
				case <-time.After(20 * time.Second):
				}
			}
		}
		return 200, "{}"
	})
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	texts := func() []string {
		var out []string
		for _, r := range f.bot.of("event_received", "message_created") {
			m := r.Body["event"].(map[string]any)["payload"].(map[string]any)["message"].(map[string]any)
			out = append(out, m["payload"].(map[string]any)["text"].(string))
		}
		return out
	}
	send := func(tag, text string) {
		conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel",
			"tags": map[string]string{"id": tag}, "discriminateByTags": []string{"id"}}, 200).Str("conversation.id")
		f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201)
	}
	send("a", "slow")
	eventually(t, "the slow message reaches the bot", func() bool { return slices.Contains(texts(), "slow") })
	send("b", "fast")
	// Within 5 s: half the bot's time limit (10 s), after which the slow
	// call would give up and free the dispatcher anyway.
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(texts(), "fast") {
		if time.Now().After(deadline) {
			t.Fatalf("another conversation's message waited for the slow one: the bot got %q", texts())
		}
		time.Sleep(10 * time.Millisecond)
	}
	free()
}

// TestNextDeliveryDoesNotWaitForTheLog: a finished delivery's observer
// (its log line and its fsync, a bot issue, the hooks of OnDelivery) runs
// beside the conversation's next delivery over the local store: while the
// observer of a message's delivery is held, the next message of the same
// conversation reaches the bot (before, each delivery waited for its log
// line to be written: one fsync more on the reply's path).
func TestNextDeliveryDoesNotWaitForTheLog(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	defer free()
	held := make(chan struct{}, 1)
	f := newRuntimeFixture(t, func(r received) (int, string) { return 200, "{}" })
	f.Platform.OnDelivery(func(_ context.Context, r delivery.Result) {
		if r.Kind == "event" && r.EventType == "message_created" {
			select {
			case held <- struct{}{}: // the first one only
				select {
				case <-release:
				case <-time.After(20 * time.Second):
				}
			default:
			}
		}
	})
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	send := func(text string) {
		f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201)
	}
	send("one")
	select {
	case <-held:
	case <-time.After(15 * time.Second):
		t.Fatal("the first delivery was not observed")
	}
	send("two")
	// Within 5 s, while the first delivery's observer is still held.
	deadline := time.Now().Add(5 * time.Second)
	for len(f.bot.of("event_received", "message_created")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the conversation's next message waited for the previous delivery's log line: %d of 2 reached the bot", len(f.bot.of("event_received", "message_created")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	free()
}
