package httpapi_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// TestScheduledRegister: configureIntegration's scheduleRegisterCall has
// register() called again on that schedule, with the installation's
// webhookUrl, its result recorded on the installation; a changed schedule
// replaces the old one, and an uninstalled integration is called no more.
func TestScheduledRegister(t *testing.T) {
	var refuse atomic.Bool
	f := newRuntimeFixture(t, nil)
	f.integ.answer = func(r received) (int, string) {
		if r.op() == "register" && refuse.Load() {
			return 400, `{"id":"err_1","code":400,"type":"InvalidPayload","message":"the provider refused the token"}`
		}
		return 200, "{}"
	}
	install := func() map[string]any {
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + f.botID, Token: f.AdminToken,
			Headers: map[string]string{"x-workspace-id": f.ws, "x-multiple-integrations": "true"}}), 200, "getBot")
		return r.Body["bot"].(map[string]any)["integrations"].(map[string]any)["chan"].(map[string]any)
	}
	registers := func() int { return len(f.integ.of("register", "")) }
	// Moves the dispatcher's clock and waits for it to settle: every entry
	// due by then has gone out (each run queues its next one period after
	// the moved clock, so one run per chain at most).
	start := time.Now()
	at := func(h int) {
		f.Platform.Dispatcher.SetClock(func() time.Time { return start.Add(time.Duration(h) * time.Hour) })
		f.Platform.Dispatcher.Wake()
	}
	settle := func(want int, what string) {
		t.Helper()
		eventually(t, what, func() bool { return registers() == want })
		time.Sleep(300 * time.Millisecond) // and nothing more
		if got := registers(); got != want {
			t.Fatalf("%s: %d register calls, want %d", what, got, want)
		}
	}

	base := registers() // the install's own
	f.as(true, "POST", "/v1/chat/integrations/configure", map[string]any{"scheduleRegisterCall": "daily"}, 200)
	at(12)
	settle(base, "not due after 12 hours")
	at(25)
	settle(base+1, "due after a day")
	got := f.integ.of("register", "")[base]
	if got.Body["webhookUrl"] != install()["webhookUrl"] || got.Header.Get("x-integration-alias") != "chan" {
		t.Fatalf("register %v %v, install %v", got.Body, got.Header, install())
	}
	// The same schedule again changes nothing: one chain.
	f.as(true, "POST", "/v1/chat/integrations/configure", map[string]any{"scheduleRegisterCall": "daily"}, 200)
	at(50)
	settle(base+2, "the next day")

	// A refusal is recorded as the install's own registration's would be;
	// the schedule goes on.
	refuse.Store(true)
	at(75)
	settle(base+3, "the third day")
	if in := install(); in["status"] != "registration_failed" || in["statusReason"] == nil {
		t.Fatalf("after a refused register: %v", in)
	}
	refuse.Store(false)
	at(100)
	settle(base+4, "the fourth day")
	if in := install(); in["status"] != "registered" {
		t.Fatalf("after a register: %v", in)
	}

	// A new schedule replaces the old: the daily chain (next due at 124 h)
	// ends without a call; the hourly one (its first due an hour after the
	// change, by the real clock) runs once per move of the clock.
	f.as(true, "POST", "/v1/chat/integrations/configure", map[string]any{"scheduleRegisterCall": "hourly"}, 200)
	at(125)
	settle(base+5, "the hourly schedule, once; the daily one, stale")
	at(126)
	settle(base+6, "the next hour")

	// Uninstalled: nothing more.
	f.Check(f.updateBot(f.AdminToken, f.botID, map[string]any{"integrations": map[string]any{"chan": nil}}), 200, "updateBot")
	at(500)
	settle(base+6, "after the uninstall")
}
