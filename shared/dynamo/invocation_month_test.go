package dynamo_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// TestPrepaidRefundInTheMonthThatCountedIt: a user's message written in the
// last milliseconds of a month counts its delivery's invocation in that
// month; the delivery ending unused in the next month gives it back to the
// month that counted it, never to the new one (which would go below zero
// while the old one keeps a count nothing used). The clock steps 1 ms at
// each reading, and the message is written at every offset from 40 ms
// before the month's end to the end itself, so the month turns between any
// two of the write's readings of the clock (the delivery's creation time
// and the usage write's month among them) at one offset or another.
func TestPrepaidRefundInTheMonthThatCountedIt(t *testing.T) {
	stores, _ := embeddedStores(t)
	s := stores("prepaidmonth")
	ctx := context.Background()
	restore := platform.Clock
	defer func() { platform.Clock = restore }()
	var (
		mu  sync.Mutex
		now time.Time
	)
	platform.Clock = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	setClock := func(at time.Time) {
		mu.Lock()
		now = at
		mu.Unlock()
	}
	end := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // November's end
	for offset := 40; offset >= 0; offset-- {
		bot := platform.NewID(platform.PrefixBot)
		setClock(end.Add(-time.Duration(offset) * time.Millisecond))
		c := newChatConversation(t, s, bot)
		m := userText(newChatUser(t, s, bot), c)
		if err := s.CreateMessage(ctx, bot, m); err != nil {
			t.Fatal(err)
		}
		ds, _, err := s.PendingDeliveries(ctx, dynamo.Shard(platform.Delivery{BotID: bot, ConversationID: c}), "", 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || !ds[0].Prepaid {
			t.Fatalf("offset %d ms: entries %+v, want one pre-paid", offset, ds)
		}
		// Ended unsent a day later (its bot had no URL, say): given back.
		setClock(end.Add(24 * time.Hour))
		if err := s.FinishDelivery(ctx, ds[0]); err != nil {
			t.Fatal(err)
		}
		nov, err := s.BotUsage(ctx, bot, end.Add(-time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		dec, err := s.BotUsage(ctx, bot, end.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if nov.Invocations != 0 || dec.Invocations != 0 {
			t.Errorf("offset %d ms: after the refund, November counts %d invocations and December %d, want 0 and 0", offset, nov.Invocations, dec.Invocations)
		}
	}
}
