package dynamo_test

import (
	"context"
	"testing"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestFailedStatusDuringConversationDeletion: a user's message_created
// event has no item of its own (derived from its message) until a failed
// delivery records its status. Once its conversation is marked for
// deletion, that record must not create the item: the deletion's sweep
// deletes the conversation's events, then its messages, in batches, and an
// item created between the two would outlive the conversation (found by
// the kill test TestConversationDeleteFinishesAfterKill: one event of the
// deleted conversation left). The status write answers not found instead,
// which the dispatcher takes as "gone with its conversation"; so does
// deleteMessage, whose write gives the event an item too.
func TestFailedStatusDuringConversationDeletion(t *testing.T) {
	stores, _ := embeddedStores(t)
	s := stores("statusdeleting")
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	c := newChatConversation(t, s, bot)
	m := userText(newChatUser(t, s, bot), c)
	if err := s.CreateMessage(ctx, bot, m); err != nil {
		t.Fatal(err)
	}
	ds, _, err := s.PendingDeliveries(ctx, dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: c}), "", 10)
	if err != nil || len(ds) != 1 || ds[0].EventID == "" {
		t.Fatalf("the message's delivery: %+v, %v", ds, err)
	}
	evt := ds[0].EventID
	if err := s.MarkConversationDeleting(ctx, bot, c); err != nil {
		t.Fatal(err)
	}
	why := "the bot has no URL"
	err = s.SetEventStatus(ctx, bot, evt, platform.EventFailed, &why)
	if err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("the failed status of an event of a conversation being deleted: %v, want not found or nothing", err)
	}
	// No item written: the event, if it still answers, is the one derived
	// from its message (pending while its entry is there), not a stored
	// failed one the sweep could miss.
	if e, err := s.GetEvent(ctx, bot, evt); err == nil && e.Status == platform.EventFailed {
		t.Fatalf("the event was stored failed after its conversation was marked for deletion: %+v", e)
	}
	// deleteMessage, whose write gives the event an item, likewise.
	if err := s.DeleteMessage(ctx, bot, m.ID); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("deleteMessage in a conversation being deleted: %v, want not found", err)
	}
	if e, err := s.GetEvent(ctx, bot, evt); err == nil && e.Status == platform.EventFailed {
		t.Fatalf("the event was stored after deleteMessage: %+v", e)
	}
	if err := s.DeleteConversation(ctx, bot, c); err != nil && platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatal(err)
	}
	if e, err := s.GetEvent(ctx, bot, evt); platform.TypeOf(err) != platform.ErrResourceNotFound {
		t.Fatalf("the deleted conversation's event after its deletion: %+v, %v; want not found", e, err)
	}
}
