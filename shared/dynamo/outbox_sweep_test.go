package dynamo_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestSweepSeesPastHeldEntries: a sweep (DueShards, 200 entries of a
// bucket a page, as the dispatcher reads) names a shard with an entry due
// even when more than a page of the bucket's due entries come before it in
// the index's order and cannot be worked: entries leased by invocations
// under way (or dead, until their leases run out), or a backlog of one
// shard held behind its head. Before, the sweep read one page of each
// bucket and the entry behind them went unseen until they were gone.
func TestSweepSeesPastHeldEntries(t *testing.T) {
	env := apitest.New(t)
	db := env.Platform.Store.Client()
	sweepSeesPastHeldEntries(t, func(t *testing.T, table string) *dynamo.Store {
		if err := dynamo.EnsureTable(context.Background(), db, table); err != nil {
			t.Fatal(err)
		}
		return dynamo.New(db, table)
	})
}

// TestSweepSeesPastHeldEntriesOnMoto: the same on moto_server, whose
// index pages (Limit, LastEvaluatedKey of a GSI query) are DynamoDB's.
func TestSweepSeesPastHeldEntriesOnMoto(t *testing.T) {
	sweepSeesPastHeldEntries(t, motoStore)
}

func sweepSeesPastHeldEntries(t *testing.T, storeOn func(t *testing.T, table string) *dynamo.Store) {
	ctx := context.Background()
	bot := platform.NewID(platform.PrefixBot)
	// Conversations whose shards share one sweep bucket.
	var convs []string
	bucket := ""
	for len(convs) < 252 {
		c := platform.NewID(platform.PrefixConversation)
		b := dynamo.SweepBucketOf("OUTBOX#" + bot + "#" + c)
		if bucket == "" {
			bucket = b
		}
		if b == bucket {
			convs = append(convs, c)
		}
	}
	now := time.Now()
	entry := func(conv string, due time.Time) platform.Delivery {
		return platform.Delivery{ID: platform.NewID(dynamo.PrefixDelivery), Kind: platform.DeliverEvent, BotID: bot, ConversationID: conv,
			CreatedAt: platform.FormatTime(due), DueAt: platform.FormatTime(due)}
	}
	for i, c := range []struct {
		name  string
		held  func() []platform.Delivery
		lease int64
	}{
		{"250 leased entries first", func() []platform.Delivery {
			var ds []platform.Delivery
			for j, conv := range convs[:250] {
				ds = append(ds, entry(conv, now.Add(-time.Hour+time.Duration(j)*time.Millisecond)))
			}
			return ds
		}, now.Add(time.Hour).UnixMilli()},
		{"250 entries of one shard first", func() []platform.Delivery {
			var ds []platform.Delivery
			for j := range 250 {
				ds = append(ds, entry(convs[250], now.Add(-time.Hour+time.Duration(j)*time.Millisecond)))
			}
			return ds
		}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := storeOn(t, "sweep"+string(rune('a'+i)))
			if err := s.PutOutboxEntries(ctx, c.held(), c.lease); err != nil {
				t.Fatal(err)
			}
			due := entry(convs[251], now.Add(-time.Minute))
			if err := s.PutOutboxEntries(ctx, []platform.Delivery{due}, 0); err != nil {
				t.Fatal(err)
			}
			shards, err := s.DueShards(ctx, now, 200)
			if err != nil {
				t.Fatal(err)
			}
			if want := dynamo.Shard(due); !slices.Contains(shards, want) {
				t.Fatalf("the sweep names %d shards, not %s, whose entry is due", len(shards), want)
			}
			if c.lease > 0 && len(shards) != 1 {
				t.Fatalf("the sweep names %d shards, want 1 (the others' entries are leased)", len(shards))
			}
		})
	}
}
