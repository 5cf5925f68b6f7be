package dynamo_test

import (
	"context"
	"testing"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestPrepaidInvocation: a user's message counts its delivery's bot
// invocation in its own usage write, and its outbox entry says so
// (Prepaid). What the dispatcher does with it, step by step, on a table
// no dispatcher works (so the test plays the dispatcher):
//   - an attempt that reached the bot writes nothing: a crash (kill -9)
//     before the entry's removal leaves it Prepaid, and its redelivery is
//     covered by the same count (counted once for the two calls);
//   - a retry after an attempt that reached the bot clears the mark (the
//     next attempts are counted by the dispatcher);
//   - a retry after an attempt that did not reach the bot keeps it;
//   - an entry removed unused gives the invocation back, once, however
//     often its removal is repeated (a crash before the removal was known);
//   - deleting the conversation gives back those of its queued entries,
//     except the head, which may be at the bot: the dispatcher settles it.
func TestPrepaidInvocation(t *testing.T) {
	stores, _ := embeddedStores(t)
	s := stores("prepaid")
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	now := platform.FormatTime(time.Now())
	conv := func() string { return newChatConversation(t, s, bot) }
	user := newChatUser(t, s, bot)
	send := func(convID string) {
		t.Helper()
		if err := s.CreateMessage(ctx, bot, userText(user, convID)); err != nil {
			t.Fatal(err)
		}
	}
	entries := func(convID string) []platform.Delivery {
		t.Helper()
		ds, _, err := s.PendingDeliveries(ctx, dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: convID}), "", 100)
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	head := func(convID string) platform.Delivery {
		t.Helper()
		ds := entries(convID)
		if len(ds) == 0 {
			t.Fatal("no entry")
		}
		return ds[0]
	}
	invocations := func(want int64, when string) {
		t.Helper()
		c, err := s.BotUsage(ctx, bot, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if c.Invocations != want {
			t.Fatalf("%s: %d invocations counted, want %d", when, c.Invocations, want)
		}
	}
	// A bot's own message is not pre-paid: the dispatcher counts its
	// deliveries (none to the bot).
	c := conv()
	m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"x"}`),
		Direction: "outgoing", UserID: bot, ConversationID: c, Tags: map[string]string{}}
	if err := s.CreateMessage(ctx, bot, m); err != nil {
		t.Fatal(err)
	}
	// (in the conversation's integration lane)
	out, _, err := s.PendingDeliveries(ctx, dynamo.Shard(platform.Delivery{Kind: platform.DeliverOutgoing, BotID: bot, ConversationID: c}), "", 100)
	if err != nil || len(out) != 1 || len(entries(c)) != 0 {
		t.Fatalf("the bot's message's entry: %d in the integration lane, %d in the bot's (%v), want 1, 0", len(out), len(entries(c)), err)
	}
	if out[0].Prepaid {
		t.Fatal("the bot's own message's delivery is pre-paid")
	}
	invocations(0, "after the bot's message")
	if err := s.FinishDelivery(ctx, out[0]); err != nil {
		t.Fatal(err)
	}

	// 1. Reached the bot; kill -9 before the removal; delivered again.
	send(c)
	invocations(1, "after a user's message")
	d := head(c)
	if !d.Prepaid {
		t.Fatal("a user's message's delivery is not pre-paid")
	}
	if d = head(c); !d.Prepaid {
		t.Fatal("after a crash the entry is no longer pre-paid")
	}
	invocations(1, "after the redelivery (covered by the same count)")
	d.Prepaid = false // used
	if err := s.FinishDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	invocations(1, "after the removal of a used entry")

	// 2. Reached the bot and failed: retried, the mark cleared.
	send(c)
	d = head(c)
	d.Prepaid = false
	if err := s.RetryDelivery(ctx, d, time.Now(), "500"); err != nil {
		t.Fatal(err)
	}
	if d = head(c); d.Prepaid || d.Attempts != 1 {
		t.Fatalf("after a retry of an attempt that reached the bot: prepaid %v, attempts %d", d.Prepaid, d.Attempts)
	}
	if err := s.FinishDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	invocations(2, "after a retried delivery (its later attempts are the dispatcher's)")

	// 3. Did not reach the bot (a transient read failure): retried, still
	// pre-paid; then ended unsent: given back, once.
	send(c)
	d = head(c)
	if err := s.RetryDelivery(ctx, d, time.Now(), "read failed"); err != nil {
		t.Fatal(err)
	}
	if d = head(c); !d.Prepaid {
		t.Fatal("an attempt that did not reach the bot used the pre-paid invocation")
	}
	invocations(3, "before the unsent delivery ends")
	for range 2 { // the second: a redelivery after a crash that lost the answer
		if err := s.FinishDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
		invocations(2, "after an unsent delivery's removal")
	}

	// 4. The conversation deleted with two deliveries queued: the second
	// is given back with its removal, the head is left to the dispatcher.
	c2 := conv()
	send(c2)
	send(c2)
	invocations(4, "with two queued")
	if err := s.DeleteConversation(ctx, bot, c2); err != nil {
		t.Fatal(err)
	}
	invocations(3, "after the conversation's deletion")
	left := entries(c2)
	if len(left) != 1 || !left[0].Prepaid {
		t.Fatalf("after the conversation's deletion: %+v, want its pre-paid head", left)
	}
	if err := s.FinishDelivery(ctx, left[0]); err != nil { // failed unsent: its conversation is gone
		t.Fatal(err)
	}
	invocations(2, "after the head's removal")
	if len(entries(c2)) != 0 {
		t.Fatal("the head was not removed")
	}
}
