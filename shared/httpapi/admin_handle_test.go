package httpapi_test

import (
	"regexp"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestCheckHandleAvailability: PUT /v1/admin/workspaces/handle-availability
// is checkHandleAvailability (not updateWorkspace of a workspace of that
// id): a free handle is available, a taken or malformed one is not and
// comes with free suggestions, which updateWorkspace then accepts.
func TestCheckHandleAvailability(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	check := func(handle string) apitest.Response {
		t.Helper()
		return f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/handle-availability", Token: tok, Body: map[string]any{"handle": handle}})
	}
	if r := f.Check(check("acme-corp"), 200, "checkHandleAvailability"); r.Body["available"] != true || len(r.List("suggestions")) != 0 {
		t.Fatalf("free handle: %s", r.Raw)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/workspaces/"+f.ws, map[string]any{"handle": "acme-corp"}), 200, "updateWorkspace")

	valid := regexp.MustCompile(`^[0-9a-z][a-z0-9-_]+[0-9a-z]$`)
	second := newFixtureOn(f)
	for _, h := range []string{"acme-corp", "a", "-x_"} {
		r := f.Check(check(h), 200, "checkHandleAvailability")
		sug := r.List("suggestions")
		if r.Body["available"] != false || len(sug) == 0 {
			t.Fatalf("%q: %s", h, r.Raw)
		}
		for _, s := range sug {
			if !valid.MatchString(s.(string)) || s == "acme-corp" {
				t.Fatalf("%q: suggestion %q", h, s)
			}
		}
		if h == "acme-corp" {
			// A suggestion is free: another workspace takes it.
			f.Check(second.ws_(tok, "PUT", "/v1/admin/workspaces/"+second.ws, map[string]any{"handle": sug[0]}), 200, "updateWorkspace")
			if r := f.Check(check(sug[0].(string)), 200, "checkHandleAvailability"); r.Body["available"] != false {
				t.Fatalf("taken suggestion still available: %s", r.Raw)
			}
		}
	}
	// The workspace named by the path was not touched.
	if w := f.Check(f.ws_(tok, "GET", "/v1/admin/workspaces/"+f.ws, nil), 200, "getWorkspace"); w.Str("handle") != "acme-corp" || w.Str("name") != "Acme" {
		t.Fatalf("workspace: %s", w.Raw)
	}
	// A taken handle cannot be set by another workspace.
	f.Check(second.ws_(tok, "PUT", "/v1/admin/workspaces/"+second.ws, map[string]any{"handle": "acme-corp"}), 409, "")

	// Bad input: the reference's pattern, a missing handle; a bot key.
	for _, body := range []any{map[string]any{"handle": "Acme"}, map[string]any{}, map[string]any{"handle": 3}} {
		if r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/handle-availability", Token: tok, Body: body}); r.Status != 400 || r.Str("type") != "InvalidPayload" {
			t.Fatalf("%v: %d %s", body, r.Status, r.Raw)
		}
	}
	bot := f.createBot(tok, nil)
	bak := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	if r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/workspaces/handle-availability", Token: bak, Body: map[string]any{"handle": "zzz"}}); r.Status != 403 {
		t.Fatalf("bot key: %d %s", r.Status, r.Raw)
	}
}

// TestWorkspaceHandleTakenOnce: workspaces racing for one handle: exactly
// one gets it (a conditional write), the others 409.
func TestWorkspaceHandleTakenOnce(t *testing.T) {
	f := newFixture(t)
	wss := []*fixture{f}
	for i := 0; i < 5; i++ {
		wss = append(wss, newFixtureOn(f))
	}
	statuses := make([]int, len(wss))
	var wg sync.WaitGroup
	for i, w := range wss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = w.ws_(f.AdminToken, "PUT", "/v1/admin/workspaces/"+w.ws, map[string]any{"handle": "the-one"}).Status
		}()
	}
	wg.Wait()
	won := 0
	for _, s := range statuses {
		switch s {
		case 200:
			won++
		case 409:
		default:
			t.Fatalf("statuses %v", statuses)
		}
	}
	if won != 1 {
		t.Fatalf("%d workspaces got the handle: %v", won, statuses)
	}
}
