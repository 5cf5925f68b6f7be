package httpapi_test

import (
	"context"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

// TestEventsKeptForTheirRetention: an event is answered until
// EventRetention after its creation (or its scheduled time, when later),
// then getEvent answers 404 and listEvents leaves it out, whether or not
// DynamoDB's TTL has deleted it yet (locally it never does).
func TestEventsKeptForTheirRetention(t *testing.T) {
	f := newChatFixture(t)
	now := time.Now().UTC()
	old := f.call("POST", "/v1/chat/events", map[string]any{"type": "old", "payload": map[string]any{}}, 201, "createEvent").Str("event.id")
	later := platform.FormatTime(now.Add(40 * 24 * time.Hour))
	scheduled := f.call("POST", "/v1/chat/events", map[string]any{"type": "later", "payload": map[string]any{}, "schedule": map[string]any{"dateTime": later}}, 201, "createEvent").Str("event.id")

	listed := func() map[string]bool {
		out := map[string]bool{}
		for _, e := range f.call("GET", "/v1/chat/events?pageSize=100", nil, 200, "listEvents").List("events") {
			out[e.(map[string]any)["id"].(string)] = true
		}
		return out
	}
	for _, tc := range []struct {
		name      string
		at        time.Duration // after now
		oldKept   bool
		schedKept bool
	}{
		{"fresh", 0, true, true},
		{"just before the retention", platform.EventRetention - time.Minute, true, true},
		{"past the retention", platform.EventRetention + time.Minute, false, true},
		{"past the retention of the scheduled time", 40*24*time.Hour + platform.EventRetention + time.Minute, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restore := platform.Clock
			defer func() { platform.Clock = restore }()
			platform.Clock = func() time.Time { return restore().Add(tc.at) }
			for _, e := range []struct {
				id   string
				kept bool
			}{{old, tc.oldKept}, {scheduled, tc.schedKept}} {
				want := 404
				if e.kept {
					want = 200
				}
				if r := f.req("", "GET", "/v1/chat/events/"+e.id, nil); r.Status != want {
					t.Fatalf("getEvent %s: %d %s, want %d", e.id, r.Status, r.Raw, want)
				}
				if got := listed()[e.id]; got != e.kept {
					t.Fatalf("listEvents lists %s: %v, want %v", e.id, got, e.kept)
				}
			}
		})
	}
}

// TestIssueEventsKeptForTheirRetention: listBotIssueEvents answers an
// issue's events until IssueEventRetention after each was recorded.
func TestIssueEventsKeptForTheirRetention(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	bot := f.createBot(tok, nil)
	store := f.Platform.Store
	start := time.Now().UTC()
	var issue string
	for i, at := range []time.Time{start, start.Add(10 * 24 * time.Hour)} {
		is, err := store.RecordBotFailure(context.Background(), bot, platform.BotFailure{Code: "c", Title: "t", Description: "d", At: at})
		if err != nil {
			t.Fatal(i, err)
		}
		issue = is.ID
	}
	path := "/v1/admin/bots/" + bot + "/issues/" + issue + "/events"
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{11 * 24 * time.Hour, 2},
		{platform.IssueEventRetention + time.Minute, 1},
		{platform.IssueEventRetention + 10*24*time.Hour + time.Minute, 0},
	} {
		restore := platform.Clock
		platform.Clock = func() time.Time { return restore().Add(tc.at) }
		r := f.Check(f.ws_(tok, "GET", path, nil), 200, "listBotIssueEvents")
		platform.Clock = restore
		if n := len(r.List("issueEvents")); n != tc.want {
			t.Fatalf("after %s: %d issue events, want %d: %s", tc.at, n, tc.want, r.Raw)
		}
	}
}

// TestExpiredEventsPrunedLocally: locally nothing deletes expired items,
// so each recurring-event firing deletes some of its bot's expired events:
// after a few firings none of them is stored any more.
func TestExpiredEventsPrunedLocally(t *testing.T) {
	f := newChatFixture(t)
	f.Platform.Scheduler.AllowSubMinute() // every second, to see firings within seconds
	restore := platform.Clock
	platform.Clock = func() time.Time { return restore().Add(-platform.EventRetention - time.Hour) }
	for i := 0; i < 6; i++ {
		f.call("POST", "/v1/chat/events", map[string]any{"type": "old", "payload": map[string]any{}}, 201, "createEvent")
	}
	platform.Clock = restore
	every := map[string]any{"schedule": map[string]any{"cron": "* * * * * *"}, "type": "tick", "payload": map[string]any{}}
	f.updateBot(f.AdminToken, f.bot, map[string]any{"recurringEvents": map[string]any{"tick": every}})

	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := len(f.call("GET", "/v1/chat/events?pageSize=100&type=tick", nil, 200, "listEvents").List("events"))
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d firings in 10 s", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	f.updateBot(f.AdminToken, f.bot, map[string]any{"recurringEvents": map[string]any{"tick": nil}})
	time.Sleep(1500 * time.Millisecond) // a firing in flight may still land
	if left, err := f.Platform.Store.DeleteExpiredEvents(ctx, f.bot, 100); err != nil || left != 0 {
		t.Fatalf("expired events still stored after the firings: %d (%v)", left, err)
	}
}
