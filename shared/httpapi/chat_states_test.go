package httpapi_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
)

func TestStates(t *testing.T) {
	f := newChatFixture(t)
	conv, u := f.conversation("web", nil), f.user(nil)
	path := "/v1/chat/states/conversation/" + conv + "/convState"
	f.call("GET", path, nil, 404, "")
	s := f.call("POST", path, map[string]any{"payload": map[string]any{"a": 1, "b": 2}}, 200, "setState")
	if s.Str("state.conversationId") != conv || s.Str("state.type") != "conversation" || s.Str("state.botId") != f.bot || s.Str("state.expiresAt") != "" {
		t.Fatalf("setState: %s", s.Raw)
	}
	g := f.call("GET", path, nil, 200, "getState")
	if g.Str("state.id") != s.Str("state.id") || g.Body["meta"].(map[string]any)["cached"] != false {
		t.Fatalf("getState: %s", g.Raw)
	}
	// setState overrides the payload, patchState changes only passed keys.
	f.call("POST", path, map[string]any{"payload": map[string]any{"c": 3}}, 200, "setState")
	p := f.call("PATCH", path, map[string]any{"payload": map[string]any{"d": 4, "c": 30}}, 200, "patchState")
	payload := p.Body["state"].(map[string]any)["payload"].(map[string]any)
	if len(payload) != 2 || payload["c"] != float64(30) || payload["d"] != float64(4) || p.Str("state.id") != s.Str("state.id") {
		t.Fatalf("patchState: %s", p.Raw)
	}
	// getOrSet answers an existing state unchanged, creates a missing one.
	gs := f.call("POST", path+"/get-or-set", map[string]any{"payload": map[string]any{"z": 1}}, 200, "getOrSetState")
	if gs.Body["state"].(map[string]any)["payload"].(map[string]any)["c"] != float64(30) {
		t.Fatalf("getOrSetState changed a state: %s", gs.Raw)
	}
	us := f.call("POST", "/v1/chat/states/user/"+u+"/userState/get-or-set", map[string]any{"payload": map[string]any{"z": 1}}, 200, "getOrSetState")
	if us.Str("state.userId") != u {
		t.Fatalf("getOrSetState created: %s", us.Raw)
	}
	f.call("PATCH", "/v1/chat/states/user/"+f.user(nil)+"/userState", map[string]any{"payload": map[string]any{"a": 1}}, 404, "")
	// A bot's state.
	f.call("POST", "/v1/chat/states/bot/"+f.bot+"/botState", map[string]any{"payload": map[string]any{"v": 1}}, 200, "setState")
	f.call("GET", "/v1/chat/states/bot/"+f.bot+"/botState", nil, 200, "getState")
	// A null payload deletes.
	f.call("POST", path, map[string]any{"payload": nil}, 200, "setState")
	f.call("GET", path, nil, 404, "")
	f.call("POST", path, map[string]any{"payload": nil}, 200, "setState")

	// Schema validation, declarations, types and owners.
	strict := "/v1/chat/states/conversation/" + conv + "/strict"
	f.call("POST", strict, map[string]any{"payload": map[string]any{"n": 1}}, 200, "setState")
	for _, tc := range []struct {
		method, path string
		body         any
		status       int
		typ          string
	}{
		{"POST", strict, map[string]any{"payload": map[string]any{}}, 400, "InvalidPayload"},
		{"POST", strict, map[string]any{"payload": map[string]any{"n": "one"}}, 400, "InvalidPayload"},
		{"POST", strict, map[string]any{"payload": map[string]any{"n": 1, "extra": true}}, 400, "InvalidPayload"},
		{"PATCH", strict, map[string]any{"payload": map[string]any{"n": 1.5}}, 400, "InvalidPayload"},
		{"POST", strict + "/get-or-set", map[string]any{"payload": map[string]any{"m": 1}}, 400, "InvalidPayload"},
		{"POST", strict, map[string]any{"payload": "x"}, 400, "InvalidPayload"},
		{"POST", strict, map[string]any{}, 400, "InvalidPayload"},
		{"POST", "/v1/chat/states/conversation/" + conv + "/undeclared", map[string]any{"payload": map[string]any{}}, 400, "InvalidPayload"},
		{"GET", "/v1/chat/states/conversation/" + conv + "/undeclared", nil, 400, "InvalidPayload"},
		{"POST", "/v1/chat/states/user/" + conv + "/convState", map[string]any{"payload": map[string]any{}}, 400, "InvalidPayload"},
		{"POST", "/v1/chat/states/task/" + conv + "/convState", map[string]any{"payload": map[string]any{}}, 400, "InvalidPayload"},
		{"POST", "/v1/chat/states/nope/" + conv + "/convState", map[string]any{"payload": map[string]any{}}, 400, "InvalidPayload"},
		{"POST", "/v1/chat/states/conversation/" + conv + "/brokenDecl", map[string]any{"payload": map[string]any{}}, 400, "InvalidJsonSchema"},
		{"POST", "/v1/chat/states/conversation/conv_01ARZ3NDEKTSV4RRFFQ69G5FAV/convState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", "/v1/chat/states/conversation/" + u + "/convState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", "/v1/chat/states/user/user_01ARZ3NDEKTSV4RRFFQ69G5FAV/userState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", "/v1/chat/states/bot/bot_01ARZ3NDEKTSV4RRFFQ69G5FAV/botState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", "/v1/chat/states/workflow/wflow_01ARZ3NDEKTSV4RRFFQ69G5FAV/wfState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", "/v1/chat/states/integration/intver_01ARZ3NDEKTSV4RRFFQ69G5FAV/intState", map[string]any{"payload": map[string]any{}}, 404, "ResourceNotFound"},
		{"POST", strict + "/expiry", map[string]any{"expiry": 0}, 400, "InvalidPayload"},
		{"POST", strict + "/expiry", map[string]any{}, 400, "InvalidPayload"},
	} {
		r := f.req("", tc.method, tc.path, tc.body)
		if r.Status != tc.status || r.Str("type") != tc.typ {
			t.Errorf("%s %s %v: %d %s, want %d %s", tc.method, tc.path, tc.body, r.Status, r.Raw, tc.status, tc.typ)
		}
	}
	if g := f.call("GET", strict, nil, 200, "getState"); g.Body["state"].(map[string]any)["payload"].(map[string]any)["n"] != float64(1) {
		t.Fatalf("a refused write changed the state: %s", g.Raw)
	}
}

func TestStateExpiry(t *testing.T) {
	f := newChatFixture(t)
	u := f.user(nil)
	path := "/v1/chat/states/user/" + u + "/expiring"
	// The declared expiry (60 s) applies by default, and restarts on writes.
	s := f.call("POST", path, map[string]any{"payload": map[string]any{"a": 1}}, 200, "setState")
	updated, _ := time.Parse(platform.TimeFormat, s.Str("state.updatedAt"))
	if s.Str("state.expiresAt") != platform.FormatTime(updated.Add(time.Minute)) || s.Body["state"].(map[string]any)["expiry"] != float64(60000) {
		t.Fatalf("declared expiry: %s", s.Raw)
	}
	e := f.call("POST", path+"/expiry", map[string]any{"expiry": 1000}, 200, "setStateExpiry")
	if e.Body["state"].(map[string]any)["expiry"] != float64(1000) {
		t.Fatalf("setStateExpiry: %s", e.Raw)
	}
	// An expired state is not answered, though DynamoDB has not removed it.
	restore := platform.Clock
	defer func() { platform.Clock = restore }()
	platform.Clock = func() time.Time { return restore().Add(2 * time.Second) }
	f.call("GET", path, nil, 404, "")
	f.call("PATCH", path, map[string]any{"payload": map[string]any{"b": 1}}, 404, "")
	n := f.call("POST", path+"/get-or-set", map[string]any{"payload": map[string]any{"fresh": true}}, 200, "getOrSetState")
	if n.Str("state.id") == s.Str("state.id") || n.Body["state"].(map[string]any)["payload"].(map[string]any)["fresh"] != true {
		t.Fatalf("expired state answered: %s", n.Raw)
	}
	platform.Clock = restore
	// expiry null removes the expiry.
	x := f.call("POST", path+"/expiry", map[string]any{"expiry": nil}, 200, "setStateExpiry")
	if x.Str("state.expiresAt") != "" {
		t.Fatalf("expiry removed: %s", x.Raw)
	}
	f.call("POST", "/v1/chat/states/user/"+f.user(nil)+"/expiring/expiry", map[string]any{"expiry": 5}, 404, "")
}

// TestPatchStateConcurrently: 50 parallel patches, each setting its own
// key, all land.
func TestPatchStateConcurrently(t *testing.T) {
	f := newChatFixture(t)
	conv := f.conversation("web", nil)
	path := "/v1/chat/states/conversation/" + conv + "/convState"
	f.call("POST", path, map[string]any{"payload": map[string]any{}}, 200, "setState")
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if r := f.req("", "PATCH", path, map[string]any{"payload": map[string]any{fmt.Sprintf("k%02d", i): i}}); r.Status != 200 {
				t.Errorf("patchState: %d %s", r.Status, r.Raw)
			}
		}(i)
	}
	wg.Wait()
	payload := f.call("GET", path, nil, 200, "getState").Body["state"].(map[string]any)["payload"].(map[string]any)
	if len(payload) != 50 {
		t.Fatalf("%d keys after 50 parallel patches: %v", len(payload), payload)
	}
}
