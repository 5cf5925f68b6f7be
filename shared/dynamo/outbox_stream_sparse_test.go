package dynamo_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestSparseSweepOnStream: the AWS build's store (SparseSweepOnStream)
// writes a user's message's outbox entry in no sweep index; the
// dispatcher's writes put it there: IndexEntry (due when it says, only
// while the lease it names is on the entry), LeaseIndexed (due at the
// lease's end); OutboxEntriesExist tells the entries still there.
func TestSparseSweepOnStream(t *testing.T) {
	stores, _ := embeddedStores(t)
	s := stores("sparsestream")
	s.SparseSweepOnStream()
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	user, conv := newChatUser(t, s, bot), newChatConversation(t, s, bot)
	if err := s.CreateMessage(ctx, bot, userText(user, conv)); err != nil {
		t.Fatal(err)
	}
	shard := dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: conv})
	due := func(at time.Time) bool {
		t.Helper()
		shards, err := s.DueShards(ctx, at, 100)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(shards, shard)
	}
	ds, _, indexed, err := s.PendingIndexed(ctx, shard, "", 10)
	if err != nil || len(ds) != 1 || indexed[0] || due(time.Now().Add(time.Hour)) {
		t.Fatalf("the message's entry: %v, indexed %v, %v; want one, in no index", ds, indexed, err)
	}
	now := time.Now()
	until := now.Add(3 * time.Minute)
	if ok, err := s.LeaseIndexed(ctx, ds[0], now, until); !ok || err != nil {
		t.Fatalf("LeaseIndexed: %v %v", ok, err)
	}
	if due(now.Add(time.Minute)) || !due(until.Add(time.Second)) {
		t.Fatal("after LeaseIndexed the entry is not in the index at its lease's end (and only then)")
	}
	if ok, err := s.IndexEntry(ctx, ds[0], now, until.UnixMilli()+1); ok || err != nil {
		t.Fatalf("IndexEntry under another lease: %v %v; want false", ok, err)
	}
	found, err := s.OutboxEntriesExist(ctx, [][2]string{{shard, ds[0].ID}, {shard, "dlv_gone"}, {shard, ds[0].ID}})
	if err != nil || !found[[2]string{shard, ds[0].ID}] || len(found) != 1 {
		t.Fatalf("OutboxEntriesExist: %v %v", found, err)
	}
	if err := s.FinishDelivery(ctx, ds[0]); err != nil {
		t.Fatal(err)
	}
	if ok, err := s.IndexEntry(ctx, ds[0], now, 0); ok || err != nil || due(until.Add(time.Second)) {
		t.Fatalf("IndexEntry of a removed entry: %v %v", ok, err)
	}

	// A second message: IndexEntry with no lease indexes it, due when told.
	if err := s.CreateMessage(ctx, bot, userText(user, conv)); err != nil {
		t.Fatal(err)
	}
	ds, _, _, err = s.PendingIndexed(ctx, shard, "", 10)
	if err != nil || len(ds) != 1 {
		t.Fatal(ds, err)
	}
	if ok, err := s.IndexEntry(ctx, ds[0], now, 0); !ok || err != nil || !due(now.Add(time.Second)) {
		t.Fatalf("IndexEntry: %v %v", ok, err)
	}
	if ok, err := s.IndexEntry(ctx, ds[0], now.Add(time.Hour), 0); ok || err != nil {
		t.Fatalf("IndexEntry of an indexed entry: %v %v; want false (its due time kept)", ok, err)
	}
}
