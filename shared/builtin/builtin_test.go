package builtin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
)

// echo is a built-in integration of the test: a channel, an action, a
// webhook that starts conversations through the in-process API, and a
// record of what it was told.
type echo struct {
	mu         sync.Mutex
	registered []string // "register <alias>", "unregister <alias>"
	sent       chan builtin.Outgoing
	failures   int // SendMessage fails this many times first, transiently
	attempts   int
}

func (e *echo) Definition() platform.Integration {
	return platform.Integration{
		Name: "echotest", Version: "1.0.0", Title: "Echo", Description: "a test's built-in integration",
		Channels:      map[string]json.RawMessage{"channel": json.RawMessage(`{"messages":{"text":{"schema":{}}},"message":{"tags":{}},"conversation":{"tags":{"room":{}},"creation":{"enabled":true,"requiredTags":[]}}}`)},
		Actions:       map[string]json.RawMessage{"ping": json.RawMessage(`{"input":{"schema":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}},"output":{"schema":{}}}`)},
		Configuration: json.RawMessage(`{"identifier":{"required":false},"schema":{"type":"object","properties":{"greeting":{"type":"string"}}}}`),
	}
}

func (e *echo) ServeWebhook(w http.ResponseWriter, r *http.Request, in builtin.Install, path string) {
	if path != "/start" {
		builtin.WriteError(w, platform.NotFound("route", path))
		return
	}
	var u struct {
		User platform.User `json:"user"`
	}
	if err := in.API.Call(r.Context(), in, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, &u); err != nil {
		builtin.WriteError(w, err)
		return
	}
	var c struct {
		Conversation platform.Conversation `json:"conversation"`
	}
	err := in.API.Call(r.Context(), in, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{"room": "r1"}}, &c)
	if err != nil {
		builtin.WriteError(w, err)
		return
	}
	var cfg map[string]any
	_ = json.Unmarshal(in.Instance.Configuration, &cfg)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"user": u.User.ID, "conversation": c.Conversation, "greeting": cfg["greeting"], "webhookUrl": in.WebhookURL})
}

func (e *echo) SendMessage(ctx context.Context, in builtin.Install, m builtin.Outgoing) error {
	e.mu.Lock()
	e.attempts++
	fail := e.failures > 0
	if fail {
		e.failures--
	}
	e.mu.Unlock()
	if fail {
		return context.DeadlineExceeded
	}
	e.sent <- m
	return nil
}

func (e *echo) RunAction(ctx context.Context, in builtin.Install, action string, input json.RawMessage) (json.RawMessage, error) {
	var v struct{ N float64 }
	_ = json.Unmarshal(input, &v)
	if v.N < 0 {
		return nil, platform.Invalid("n must not be negative")
	}
	return json.Marshal(map[string]any{"double": v.N * 2, "bot": in.Bot.ID})
}

func (e *echo) Register(ctx context.Context, in builtin.Install) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.registered = append(e.registered, "register "+in.Instance.Alias)
	return nil
}

func (e *echo) Unregister(ctx context.Context, in builtin.Install) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.registered = append(e.registered, "unregister "+in.Instance.Alias)
	return nil
}

func (e *echo) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.registered...)
}

// TestBuiltinIntegration: a built-in integration is published in the hub,
// installed like any integration, and served in-process: its webhook, its
// actions, the bot's messages in its conversations and its registrations.
func TestBuiltinIntegration(t *testing.T) {
	f := apitest.New(t)
	e := &echo{sent: make(chan builtin.Outgoing, 4)}
	f.Platform.Builtins.Add(e)
	ctx := context.Background()
	if err := f.Platform.Builtins.Publish(ctx, f.Platform.Store); err != nil {
		t.Fatal(err)
	}
	// Idempotent: a second process publishing changes nothing.
	if err := f.Platform.Builtins.Publish(ctx, f.Platform.Store); err != nil {
		t.Fatalf("publishing again: %v", err)
	}
	do := func(method, path string, hdr map[string]string, body any, status int, op string) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), status, op)
	}

	pub := do("GET", "/v1/admin/hub/integrations/echotest/latest", nil, nil, 200, "getPublicIntegration")
	intID := pub.Str("integration.id")
	if intID != builtin.IntegrationID("echotest", "1.0.0") || pub.Str("integration.ownerWorkspace.name") != builtin.WorkspaceName {
		t.Fatalf("hub: %s", pub.Raw)
	}
	ws := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}, 200, "").Str("id")
	wsh := map[string]string{"x-workspace-id": ws}
	botID := do("POST", "/v1/admin/bots", wsh, map[string]any{"name": "b"}, 200, "").Str("bot.id")
	do("PUT", "/v1/admin/bots/"+botID, wsh, map[string]any{"integrations": map[string]any{
		intID: map[string]any{"enabled": true, "configuration": map[string]any{"greeting": "hi"}}}}, 200, "")

	bot := do("GET", "/v1/admin/bots/"+botID, wsh, nil, 200, "getBot")
	inst, _ := bot.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
	webhookURL, _ := inst["webhookUrl"].(string)
	if inst["status"] != "registered" || !strings.HasPrefix(webhookURL, f.URL+"/webhooks/whk_") {
		t.Fatalf("installation: %v", inst)
	}
	if got := e.calls(); len(got) != 1 || got[0] != "register echotest" {
		t.Fatalf("register calls: %v", got)
	}

	// The webhook, served in-process; the integration calls the Chat API
	// as its installation (the conversation is its, tags in its view).
	res := f.Do(apitest.Req{Method: "POST", Path: strings.TrimPrefix(webhookURL, f.URL) + "/start", Body: "{}"})
	if res.Status != 200 || res.Body["greeting"] != "hi" || res.Body["webhookUrl"] != webhookURL {
		t.Fatalf("webhook: %d %s", res.Status, res.Raw)
	}
	conv := res.Body["conversation"].(map[string]any)
	if conv["integration"] != "echotest" || conv["tags"].(map[string]any)["room"] != "r1" {
		t.Fatalf("the integration's conversation: %v", conv)
	}
	convID := conv["id"].(string)
	miss := f.Do(apitest.Req{Method: "GET", Path: strings.TrimPrefix(webhookURL, f.URL) + "/nope"})
	if miss.Status != 404 {
		t.Fatalf("the integration's own 404: %d %s", miss.Status, miss.Raw)
	}
	// The bot sees the tags with the alias.
	bh := map[string]string{"x-bot-id": botID}
	if got := do("GET", "/v1/chat/conversations/"+convID, bh, nil, 200, "").Body["conversation"].(map[string]any)["tags"]; got.(map[string]any)["echotest:room"] != "r1" {
		t.Fatalf("the bot's view of the tags: %v", got)
	}

	// The bot's message in that conversation reaches the integration in-process.
	do("POST", "/v1/chat/messages", bh, map[string]any{"conversationId": convID, "userId": botID, "type": "text",
		"payload": map[string]any{"text": "hello"}, "tags": map[string]string{}}, 201, "")
	select {
	case m := <-e.sent:
		if m.Conversation.ID != convID || m.Conversation.Tags["room"] != "r1" || m.User.ID != botID || !strings.Contains(string(m.Message.Payload), "hello") {
			t.Fatalf("outgoing: %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the bot's message never reached the built-in integration")
	}

	// Actions: answered in-process; input checked against the schema first.
	act := do("POST", "/v1/chat/actions", bh, map[string]any{"type": "echotest:ping", "input": map[string]any{"n": 21}}, 200, "callAction")
	if out := act.Body["output"].(map[string]any); out["double"] != 42.0 || out["bot"] != botID {
		t.Fatalf("action: %s", act.Raw)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"input not matching the schema", map[string]any{"type": "echotest:ping", "input": map[string]any{}}, 400},
		{"the integration's own refusal", map[string]any{"type": "echotest:ping", "input": map[string]any{"n": -1}}, 400},
		{"no such action", map[string]any{"type": "echotest:nope", "input": map[string]any{}}, 400},
		{"no such alias", map[string]any{"type": "other:ping", "input": map[string]any{"n": 1}}, 404},
	} {
		r := f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: f.AdminToken, Headers: bh, Body: tc.body})
		if r.Status != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, r.Status, r.Raw, tc.status)
		}
	}

	// Disabled: its webhook is gone (404). Removed: unregister is called.
	do("PUT", "/v1/admin/bots/"+botID, wsh, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": false}}}, 200, "")
	if r := f.Do(apitest.Req{Method: "POST", Path: strings.TrimPrefix(webhookURL, f.URL) + "/start", Body: "{}"}); r.Status != 404 {
		t.Fatalf("a disabled installation's webhook: %d %s", r.Status, r.Raw)
	}
	do("PUT", "/v1/admin/bots/"+botID, wsh, map[string]any{"integrations": map[string]any{intID: nil}}, 200, "")
	if got := e.calls(); len(got) != 2 || got[1] != "unregister echotest" {
		t.Fatalf("calls after removing: %v", got)
	}
	if r := f.Do(apitest.Req{Method: "POST", Path: strings.TrimPrefix(webhookURL, f.URL) + "/start", Body: "{}"}); r.Status != 404 {
		t.Fatalf("a removed installation's webhook: %d %s", r.Status, r.Raw)
	}
}

// TestBuiltinSendRetried: a Sender's transient failure is retried, as a
// channel integration's 5xx is.
func TestBuiltinSendRetried(t *testing.T) {
	f := apitest.New(t)
	f.Platform.Dispatcher.SetRetry(10*time.Millisecond, 5)
	e := &echo{sent: make(chan builtin.Outgoing, 4), failures: 2}
	f.Platform.Builtins.Add(e)
	if err := f.Platform.Builtins.Publish(context.Background(), f.Platform.Store); err != nil {
		t.Fatal(err)
	}
	do := func(method, path string, hdr map[string]string, body any, status int) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), status, "")
	}
	intID := builtin.IntegrationID("echotest", "1.0.0")
	ws := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}, 200).Str("id")
	wsh := map[string]string{"x-workspace-id": ws}
	botID := do("POST", "/v1/admin/bots", wsh, map[string]any{"name": "b"}, 200).Str("bot.id")
	do("PUT", "/v1/admin/bots/"+botID, wsh, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true}}}, 200)
	bot := do("GET", "/v1/admin/bots/"+botID, wsh, nil, 200)
	webhookURL := bot.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)["webhookUrl"].(string)
	res := f.Do(apitest.Req{Method: "POST", Path: strings.TrimPrefix(webhookURL, f.URL) + "/start", Body: "{}"})
	convID := res.Body["conversation"].(map[string]any)["id"].(string)
	bh := map[string]string{"x-bot-id": botID}
	do("POST", "/v1/chat/messages", bh, map[string]any{"conversationId": convID, "userId": botID, "type": "text",
		"payload": map[string]any{"text": "retried"}, "tags": map[string]string{}}, 201)
	select {
	case m := <-e.sent:
		if !strings.Contains(string(m.Message.Payload), "retried") {
			t.Fatalf("outgoing: %+v", m)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.attempts != 3 {
			t.Fatalf("attempts: %d, want 2 failures and a success", e.attempts)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a transient failure was not retried")
	}
}

// TestBuiltinNameTaken: a public name a workspace published first stays
// that workspace's: publishing says so, and the hub keeps its version.
func TestBuiltinNameTaken(t *testing.T) {
	f := apitest.New(t)
	do := func(method, path string, hdr map[string]string, body any, status int) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), status, "")
	}
	ws := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "first"}, 200).Str("id")
	wsh := map[string]string{"x-workspace-id": ws}
	do("PUT", "/v1/admin/workspaces/"+ws, wsh, map[string]any{"handle": "first"}, 200)
	theirs := do("POST", "/v1/admin/integrations", wsh, map[string]any{"name": "echotest", "version": "1.0.0", "public": true}, 200).Str("integration.id")
	f.Platform.Builtins.Add(&echo{})
	err := f.Platform.Builtins.Publish(context.Background(), f.Platform.Store)
	if err == nil || !strings.Contains(err.Error(), "echotest") {
		t.Fatalf("publishing a taken name: %v", err)
	}
	if got := do("GET", "/v1/admin/hub/integrations/echotest/latest", nil, nil, 200).Str("integration.id"); got != theirs {
		t.Fatalf("the hub's echotest is %s, want the workspace's %s", got, theirs)
	}
}
