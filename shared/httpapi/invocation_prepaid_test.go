package httpapi_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// prepaidFixture is a runtime fixture whose bot holds a message_created
// of text "block" until release, fails "fail" always and "flaky" once.
type prepaidFixture struct {
	*runtimeFixture
	gate struct {
		sync.Mutex
		ch chan struct{}
	}
	user string
}

// release lets the held calls answer (later ones are held again).
func (f *prepaidFixture) release() {
	f.gate.Lock()
	defer f.gate.Unlock()
	close(f.gate.ch)
	f.gate.ch = make(chan struct{})
}

func (f *prepaidFixture) held() <-chan struct{} {
	f.gate.Lock()
	defer f.gate.Unlock()
	return f.gate.ch
}

func newPrepaidFixture(t *testing.T) *prepaidFixture {
	p := &prepaidFixture{}
	p.gate.ch = make(chan struct{})
	t.Cleanup(p.release)
	var mu sync.Mutex
	flaked := map[string]bool{}
	f := newRuntimeFixture(t, func(r received) (int, string) {
		if r.op() != "event_received" || r.typ() != "message_created" {
			return 200, "{}"
		}
		m := r.Body["event"].(map[string]any)["payload"].(map[string]any)["message"].(map[string]any)
		switch m["payload"].(map[string]any)["text"] {
		case "block":
			select {
			case <-p.held():
			case <-time.After(20 * time.Second):
			}
		case "fail":
			return 500, "{}"
		case "flaky":
			mu.Lock()
			defer mu.Unlock()
			if id := m["id"].(string); !flaked[id] {
				flaked[id] = true
				return 500, "{}"
			}
		}
		return 200, "{}"
	})
	p.runtimeFixture = f
	p.user = p.newUser()
	return p
}

func (f *prepaidFixture) newConv() string {
	return f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
}

func (f *prepaidFixture) newUser() string {
	return f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
}

func (f *prepaidFixture) send(conv, user, text string) string {
	return f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201).Str("message.id")
}

// atBot counts the message_created calls the bot got of text.
func (f *prepaidFixture) atBot(text string) int {
	n := 0
	for _, c := range f.bot.of("event_received", "message_created") {
		m := c.Body["event"].(map[string]any)["payload"].(map[string]any)["message"].(map[string]any)
		if text == "" || m["payload"].(map[string]any)["text"] == text {
			n++
		}
	}
	return n
}

func (f *prepaidFixture) invocations() int64 {
	f.T.Helper()
	c, err := f.Platform.Store.BotUsage(context.Background(), f.botID, time.Now())
	if err != nil {
		f.T.Fatal(err)
	}
	return c.Invocations
}

// drained waits until the conversations' outbox shards are empty: every
// delivery ended, its count or refund written with its entry's removal.
func (f *prepaidFixture) drained(t *testing.T, convs ...string) {
	t.Helper()
	eventually(t, "every delivery ended", func() bool {
		for _, c := range convs {
			ds, _, err := f.Platform.Store.PendingDeliveries(context.Background(), dynamo.Shard(platform.Delivery{BotID: f.botID, ConversationID: c}), "", 10)
			if err != nil || len(ds) > 0 {
				return false
			}
		}
		return true
	})
}

// eventOf is the message_created event of message msg, as listEvents has it.
func (f *prepaidFixture) eventOf(msg string) map[string]any {
	for _, e := range f.as(false, "GET", "/v1/chat/events?type=message_created&pageSize=100", nil, 200).List("events") {
		if ev := e.(map[string]any); ev["messageId"] == msg {
			return ev
		}
	}
	return nil
}

// TestPrepaidInvocationsCountAttempts: a user's message counts its
// delivery's invocation in its own usage write (one write call fewer per
// delivery); what the API reports is still the attempts that reached the
// bot, exactly: a retried delivery counts each attempt, a delivery that
// never reaches the bot (its user, message or conversation deleted before
// it went out) counts nothing, and a delivery at the bot when its
// conversation is deleted counts its call.
func TestPrepaidInvocationsCountAttempts(t *testing.T) {
	f := newPrepaidFixture(t)
	conv, conv2 := f.newConv(), f.newConv()
	other := f.newUser()
	f.send(conv, f.user, "block") // holds conv's later deliveries back
	f.send(conv2, f.user, "block")
	eventually(t, "both held at the bot", func() bool { return f.atBot("block") == 2 })
	f.send(conv, f.user, "flaky")           // 2 attempts
	f.send(conv, other, "by a user gone")   // never sent
	gone := f.send(conv, f.user, "gone")    // never sent
	failing := f.send(conv, f.user, "fail") // 3 attempts (the fixture's retry policy), all fail
	f.send(conv2, f.user, "queued")         // never sent: its conversation goes
	// 7 messages, each pre-paid: the count runs ahead of the bot's calls
	// until the deliveries end.
	if n := f.invocations(); n != 7 {
		t.Fatalf("%d invocations counted with 7 users' messages written, want 7 (pre-paid)", n)
	}
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/users/" + other, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "deleteUser")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/messages/" + gone, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "deleteMessage")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/conversations/" + conv2, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "deleteConversation")
	// The deleted conversation's queued delivery gave its count back; its
	// head, at the bot, is the dispatcher's to settle.
	if n := f.invocations(); n != 6 {
		t.Fatalf("%d invocations counted after the conversation's deletion, want 6", n)
	}
	f.release()
	f.drained(t, conv, conv2)
	calls := f.atBot("")
	if calls != 7 || f.atBot("flaky") != 2 || f.atBot("fail") != 3 || f.atBot("gone") != 0 || f.atBot("by a user gone") != 0 || f.atBot("queued") != 0 {
		t.Fatalf("the bot got %d message_created calls (%d flaky, %d fail), want 7 (2, 3)", calls, f.atBot("flaky"), f.atBot("fail"))
	}
	if ev := f.eventOf(failing); ev == nil || ev["status"] != "failed" {
		t.Fatalf("the failing message's event: %v", ev)
	}
	all := len(f.bot.of("event_received", ""))
	if n := f.invocations(); n != int64(all) {
		t.Fatalf("%d invocations counted, the bot was called %d times (%d message_created)", n, all, calls)
	}
	r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + f.botID + "?type=invocation_calls", Token: f.AdminToken}), 200, "getUsage")
	if v := r.Body["usage"].(map[string]any)["value"]; v != float64(all) {
		t.Fatalf("getUsage invocation_calls: %v, want %d", v, all)
	}
}

// TestPrepaidInvocationAtTheQuota: under an invocations quota, messages
// are not pre-paid (the dispatcher counts each attempt, as before); a
// delivery pre-paid before the quota was set is allowed exactly as it
// would have been had it not been counted yet: with room for one, it goes
// out and the next is refused; with none, it is refused and its count
// given back.
func TestPrepaidInvocationAtTheQuota(t *testing.T) {
	f := newPrepaidFixture(t)
	store := f.Platform.Store
	t.Cleanup(func() { store.SetLimits(dynamo.Limits{}) })
	conv := f.newConv()

	// Room for the queued delivery, counted already: it goes out.
	f.send(conv, f.user, "block")
	eventually(t, "held at the bot", func() bool { return f.atBot("block") == 1 })
	f.send(conv, f.user, "one")
	used := f.invocations() // the held delivery's and the queued one's
	store.SetLimits(dynamo.Limits{InvocationsPerMonth: used})
	next := f.send(conv, f.user, "two") // under the quota: not pre-paid
	if n := f.invocations(); n != used {
		t.Fatalf("a message under an invocations quota pre-paid its delivery: %d -> %d", used, n)
	}
	f.release()
	f.drained(t, conv)
	if f.atBot("one") != 1 || f.atBot("two") != 0 {
		t.Fatalf("at the quota of %d: %d calls of the pre-paid delivery (want 1), %d of the next (want 0)", used, f.atBot("one"), f.atBot("two"))
	}
	if ev := f.eventOf(next); ev == nil || ev["status"] != "failed" || !strings.Contains(ev["failureReason"].(string), "quota") {
		t.Fatalf("the delivery past the quota: %v", ev)
	}
	if n := f.invocations(); n != used {
		t.Fatalf("%d invocations counted, want %d", n, used)
	}

	// No room: the queued pre-paid delivery is refused, its count given
	// back.
	store.SetLimits(dynamo.Limits{})
	f.send(conv, f.user, "block")
	eventually(t, "held at the bot again", func() bool { return f.atBot("block") == 2 })
	queued := f.send(conv, f.user, "three")
	if n := f.invocations(); n != used+2 {
		t.Fatalf("%d invocations counted, want %d (two pre-paid)", n, used+2)
	}
	store.SetLimits(dynamo.Limits{InvocationsPerMonth: used + 1})
	f.release()
	f.drained(t, conv)
	if f.atBot("three") != 0 {
		t.Fatal("a pre-paid delivery past the quota reached the bot")
	}
	if ev := f.eventOf(queued); ev == nil || ev["status"] != "failed" || !strings.Contains(ev["failureReason"].(string), "quota") {
		t.Fatalf("the pre-paid delivery past the quota: %v", ev)
	}
	if n := f.invocations(); n != used+1 {
		t.Fatalf("%d invocations counted, want %d (the refused one given back)", n, used+1)
	}
}

// TestPrepaidInvocationGivenBackWithoutURL: a delivery that fails unsent
// because its bot has no url any more counts nothing: its pre-paid
// invocation is given back.
func TestPrepaidInvocationGivenBackWithoutURL(t *testing.T) {
	f := newPrepaidFixture(t)
	conv := f.newConv()
	f.send(conv, f.user, "block")
	eventually(t, "held at the bot", func() bool { return f.atBot("block") == 1 })
	queued := f.send(conv, f.user, "no url")
	f.Check(f.updateBot(f.AdminToken, f.botID, map[string]any{"url": nil}), 200, "updateBot")
	if n := f.invocations(); n != 2 {
		t.Fatalf("%d invocations counted, want 2 (pre-paid)", n)
	}
	f.release()
	f.drained(t, conv)
	if ev := f.eventOf(queued); ev == nil || ev["status"] != "failed" || !strings.Contains(ev["failureReason"].(string), "no url") {
		t.Fatalf("the delivery to a bot without url: %v", ev)
	}
	if n, calls := f.invocations(), len(f.bot.of("event_received", "")); n != int64(calls) || calls != 1 {
		t.Fatalf("%d invocations counted, the bot was called %d times, want 1 and 1", n, calls)
	}
}

// TestPrepaidThroughGetOrCreateMessage: getOrCreateMessage pre-pays its
// new message's delivery as createMessage does (one invocation counted
// with the message, none by the dispatcher for the call that reaches the
// bot), finding the existing message counts nothing, and a new one whose
// delivery never reaches the bot (its message deleted while queued behind
// a held one) gives its count back: the count equals the bot's calls.
func TestPrepaidThroughGetOrCreateMessage(t *testing.T) {
	f := newPrepaidFixture(t)
	conv := f.newConv()
	getOrCreate := func(text, key string, want int) string {
		t.Helper()
		return f.as(true, "POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": conv, "userId": f.user, "type": "text",
			"payload": map[string]any{"text": text}, "tags": map[string]string{"k": key}, "discriminateByTags": []string{"k"}}, want).Str("message.id")
	}
	getOrCreate("block", "a", 200)
	eventually(t, "held at the bot", func() bool { return f.atBot("block") == 1 })
	if n := f.invocations(); n != 1 {
		t.Fatalf("%d invocations counted after getOrCreateMessage created one, want 1 (pre-paid)", n)
	}
	getOrCreate("block", "a", 200) // found: nothing new
	gone := getOrCreate("gone", "b", 200)
	if n := f.invocations(); n != 2 {
		t.Fatalf("%d invocations counted after a found and a created message, want 2", n)
	}
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/messages/" + gone, Token: f.AdminToken, Headers: map[string]string{"x-bot-id": f.botID}}), 200, "deleteMessage")
	f.release()
	f.drained(t, conv)
	if f.atBot("block") != 1 || f.atBot("gone") != 0 {
		t.Fatalf("the bot got %d calls of the held message and %d of the deleted one, want 1 and 0", f.atBot("block"), f.atBot("gone"))
	}
	all := len(f.bot.of("event_received", ""))
	if n := f.invocations(); n != int64(all) || all != 1 {
		t.Fatalf("%d invocations counted, the bot was called %d times, want 1 and 1", n, all)
	}
}
