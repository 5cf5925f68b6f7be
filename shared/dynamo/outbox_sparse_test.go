package dynamo_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestSparseSweepIndex: under SparseSweep, with a dispatcher told of each
// commit (OnOutbox), a user's message's outbox entry (due at once) is in
// no sweep index, its shard named by the commit and listed by
// OutboxShards; a retry puts it in the index (found by DueShards when it
// comes due). Without OnOutbox (no dispatcher told) the entry is indexed
// as before, and so it is on a store without SparseSweep (AWS with
// OutboxSweepIndex full; AWS sparse: TestSparseSweepOnStream).
func TestSparseSweepIndex(t *testing.T) {
	env := apitest.New(t)
	ctx := context.Background()
	db := env.Platform.Store.Client()
	for _, c := range []struct {
		name          string
		sparse, woken bool
		indexed       bool
	}{
		{"sparse, woken", true, true, false},
		{"sparse, no dispatcher told", true, false, true},
		{"not sparse (AWS with OutboxSweepIndex full)", false, true, true},
	} {
		table := "sparse" + map[bool]string{true: "1", false: "0"}[c.sparse] + map[bool]string{true: "1", false: "0"}[c.woken]
		if err := dynamo.EnsureTable(ctx, db, table); err != nil {
			t.Fatal(err)
		}
		s := dynamo.New(db, table)
		if c.sparse {
			s.SparseSweep(func(prefix string) ([]string, error) { return env.Platform.Dynamo.PartitionKeys(table, prefix) })
		}
		var mu sync.Mutex
		var named []string
		if c.woken {
			s.OnOutbox(func(shards []string) { mu.Lock(); named = append(named, shards...); mu.Unlock() })
		}
		bot := platform.NewID(platform.PrefixBot)
		now := platform.FormatTime(time.Now())
		conv := platform.Conversation{ID: platform.NewID(platform.PrefixConversation), CreatedAt: now, UpdatedAt: now, Channel: "c", Tags: map[string]string{}}
		if err := s.CreateConversation(ctx, bot, conv); err != nil {
			t.Fatal(err)
		}
		user := platform.User{ID: platform.NewID(platform.PrefixUser), CreatedAt: now, UpdatedAt: now, Tags: map[string]string{}}
		if err := s.CreateUser(ctx, bot, user); err != nil {
			t.Fatal(err)
		}
		m := platform.Message{ID: platform.NewID(platform.PrefixMessage), CreatedAt: now, UpdatedAt: now, Type: "text", Payload: []byte(`{"text":"x"}`),
			Direction: "incoming", UserID: user.ID, ConversationID: conv.ID, Tags: map[string]string{}}
		if err := s.CreateMessage(ctx, bot, m); err != nil {
			t.Fatal(err)
		}
		shard := dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: conv.ID})
		due, err := s.DueShards(ctx, time.Now().Add(time.Hour), 100)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(due, shard); got != c.indexed {
			t.Errorf("%s: the entry in the sweep index: %v, want %v", c.name, got, c.indexed)
		}
		all, err := s.OutboxShards(ctx)
		if err != nil || !slices.Equal(all, []string{shard}) {
			t.Errorf("%s: OutboxShards = %v, %v; want [%s]", c.name, all, err, shard)
		}
		mu.Lock()
		if c.woken && !slices.Contains(named, shard) {
			t.Errorf("%s: the commit did not name its shard: %v", c.name, named)
		}
		mu.Unlock()
		// A retry's backoff: the entry is in the index from now on.
		ds, _, err := s.PendingDeliveries(ctx, shard, "", 10)
		if err != nil || len(ds) != 1 {
			t.Fatalf("%s: entries %v, %v", c.name, ds, err)
		}
		retry := time.Now().Add(time.Second)
		if err := s.RetryDelivery(ctx, ds[0], retry, "503"); err != nil {
			t.Fatal(err)
		}
		for _, at := range []struct {
			when time.Time
			want bool
		}{{retry.Add(-500 * time.Millisecond), false}, {retry.Add(time.Millisecond), true}} {
			due, err := s.DueShards(ctx, at.when, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Contains(due, shard); got != at.want {
				t.Errorf("%s: after the retry, due by %v: %v, want %v", c.name, at.when.Sub(retry), got, at.want)
			}
		}
	}
}

// TestRacedNotifyAsksNoSweep: two commits note their shards before either
// notifies; the first notify names both, and the second, finding none
// left, tells OnOutbox nothing. Before, it called OnOutbox with no shard,
// which the local dispatcher (WakeShards) takes as a request for a sweep
// of the whole sweep index.
func TestRacedNotifyAsksNoSweep(t *testing.T) {
	env := apitest.New(t)
	s := dynamo.New(env.Platform.Store.Client(), "raced")
	var calls [][]string
	s.OnOutbox(func(shards []string) { calls = append(calls, slices.Sorted(slices.Values(shards))) })
	entry := func(shard string) []types.TransactWriteItem {
		return []types.TransactWriteItem{{Put: &types.Put{Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: shard}, "sk": &types.AttributeValueMemberS{Value: "dlv"}}}}}
	}
	a, b := dynamo.Shard(platform.Delivery{BotID: "bot_a", ConversationID: "conv_a"}), dynamo.Shard(platform.Delivery{BotID: "bot_b", ConversationID: "conv_b"})
	s.NoteQueued(entry(a))
	s.NoteQueued(entry(b))
	s.NotifyOutbox() // a's commit: names both
	s.NotifyOutbox() // b's commit: nothing left
	want := [][]string{slices.Sorted(slices.Values([]string{a, b}))}
	if !slices.EqualFunc(calls, want, slices.Equal) {
		t.Fatalf("OnOutbox calls = %q, want %q (no call without a shard)", calls, want)
	}
}
