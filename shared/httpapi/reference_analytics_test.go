package httpapi_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// TestBotAnalytics: trackAnalytics counts per bot, name and UTC day with
// an atomic add (concurrent calls all count); getBotAnalytics answers one
// record per day with those counts; a foreign bot is a 404, bad input 400
// with nothing counted.
func TestBotAnalytics(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	viewer, _ := f.invite("viewer@example.com", "viewer")
	other := newFixtureOn(f)
	foreign := other.createBot(f.AdminToken, map[string]any{"name": "o"})
	track := func(token string, body any) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/analytics", Token: token, Body: body, Headers: map[string]string{"x-bot-id": bot}})
	}
	start := time.Now().UTC()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := track(key, map[string]any{"name": "signup", "count": 2}); r.Status != 200 {
				t.Errorf("trackAnalytics: %d %s", r.Status, r.Raw)
			}
		}()
	}
	wg.Wait()
	f.Check(track(key, map[string]any{"name": "purchase", "count": 1}), 200, "trackAnalytics")
	for _, bad := range []struct {
		name   string
		token  string
		body   any
		status int
	}{
		{"count 0", key, map[string]any{"name": "signup", "count": 0}, 400},
		{"no name", key, map[string]any{"count": 1}, 400},
		{"count not an integer", key, map[string]any{"name": "signup", "count": 1.5}, 400},
		{"viewer", viewer, map[string]any{"name": "signup", "count": 1}, 403},
	} {
		r := track(bad.token, bad.body)
		if r.Status != bad.status {
			t.Fatalf("trackAnalytics %s: %d %s, want %d", bad.name, r.Status, r.Raw, bad.status)
		}
		checkError(t, r)
	}

	// A range around today, so that the counts are all in it even if UTC
	// midnight passed while tracking.
	from := start.AddDate(0, 0, -1).Format(time.DateOnly)
	to := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	get := func(token, id, query string) apitest.Response {
		return f.ws_(token, "GET", "/v1/admin/bots/"+id+"/analytics"+query, nil)
	}
	r := f.Check(get(viewer, bot, "?startDate="+from+"&endDate="+to), 200, "getBotAnalytics")
	recs := r.List("records")
	if len(recs) < 3 || recs[0].(map[string]any)["startDateTimeUtc"] != from+"T00:00:00.000Z" {
		t.Fatalf("getBotAnalytics: one record per day from %s to %s: %s", from, to, r.Raw)
	}
	sum := map[string]float64{}
	for _, rec := range recs {
		for name, n := range rec.(map[string]any)["customEvents"].(map[string]any) {
			sum[name] += n.(float64)
		}
	}
	if sum["signup"] != 16 || sum["purchase"] != 1 || len(sum) != 2 {
		t.Fatalf("counts: %v, want signup 16, purchase 1 (%s)", sum, r.Raw)
	}
	if first := recs[0].(map[string]any)["customEvents"].(map[string]any); len(first) != 0 {
		t.Fatalf("the day before the calls has counts: %s", r.Raw)
	}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot + "/analytics?startDate=" + to + "T10:00:00Z&endDate=" + to + "T11:00:00Z", Token: key, Headers: map[string]string{"x-workspace-id": f.ws}}), 200, "getBotAnalytics")
	// The counters go with the bot.
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := f.Platform.Store.PendingDeletions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deletions still pending", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := f.ItemsHolding(bot); len(left) > 0 {
		t.Fatalf("the deleted bot's items remain: %v", left)
	}
	for _, bad := range []struct {
		name, id, query string
		status          int
	}{
		{"foreign bot", foreign, "?startDate=" + from + "&endDate=" + to, 404},
		{"no dates", bot, "", 400},
		{"bad date", bot, "?startDate=yesterday&endDate=" + to, 400},
		{"end before start", bot, "?startDate=" + to + "&endDate=" + from, 400},
		{"too long", bot, "?startDate=2020-01-01&endDate=2024-01-01", 400},
	} {
		r := get(f.AdminToken, bad.id, bad.query)
		if r.Status != bad.status {
			t.Fatalf("getBotAnalytics %s: %d %s, want %d", bad.name, r.Status, r.Raw, bad.status)
		}
		checkError(t, r)
	}
}

// TestBotWebchat: a bot without the built-in webchat installed has no page
// (404 saying so; shared/webchat's TestWebchatPage covers one that has);
// a foreign bot is a 404 and a bad type a 400.
func TestBotWebchat(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "b"})
	foreign := newFixtureOn(f).createBot(f.AdminToken, map[string]any{"name": "o"})
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"own bot without webchat", "/v1/admin/bots/" + bot + "/webchat?type=preconfigured", 404},
		{"foreign bot", "/v1/admin/bots/" + foreign + "/webchat?type=preconfigured", 404},
		{"bad type", "/v1/admin/bots/" + bot + "/webchat?type=nope", 400},
		{"no type", "/v1/admin/bots/" + bot + "/webchat", 400},
	} {
		r := f.ws_(f.AdminToken, "GET", tc.path, nil)
		if r.Status != tc.status {
			t.Fatalf("getBotWebchat %s: %d %s, want %d", tc.name, r.Status, r.Raw, tc.status)
		}
		checkError(t, r)
	}
}
