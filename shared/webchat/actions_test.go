package webchat_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/webchat"
)

// alias is the installation's name in the bot's action types.
func (s *site) alias() string {
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	inst := b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)
	if a, ok := inst["alias"].(string); ok && a != "" {
		return a
	}
	return inst["name"].(string)
}

// platformID is the platform's id of the bot's conversation or user
// (kind "conversations" or "users") whose Webchat API id is fid, as the
// bot sees it ({{event.conversationId}}, {{event.userId}}).
func (s *site) platformID(kind, fid string) string {
	s.t.Helper()
	r := s.admin("GET", "/v1/chat/"+kind, map[string]string{"x-bot-id": s.botID}, nil, 200)
	for _, x := range r.List(kind) {
		m := x.(map[string]any)
		for k, v := range m["tags"].(map[string]any) {
			if (k == "fid" || strings.HasSuffix(k, ":fid")) && v == fid {
				return m["id"].(string)
			}
		}
	}
	s.t.Fatalf("no %s of the bot with fid %q", kind, fid)
	return ""
}

// action calls one of the webchat's actions as the bot does
// (client.callAction); an error answer is checked for the API's shape.
func (s *site) action(name string, input map[string]any) apitest.Response {
	s.t.Helper()
	return s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
		Body: map[string]any{"type": s.alias() + ":" + name, "input": input}})
}

// TestWebchatActions: the actions of Botpress's webchat integration reach
// the streams of their conversation, in the shapes the component reads
// (webchat_visibility {visibility}, webchat_config {config}, custom
// {event}), and no other conversation's stream.
func TestWebchatActions(t *testing.T) {
	s := newSite(t, map[string]any{})
	stA, a := s.initialize("", "")
	stB, b := s.initialize("", "")
	convA, convB := str(a, "conversation", "id"), str(b, "conversation", "id")
	pA, pB := s.platformID("conversations", convA), s.platformID("conversations", convB)

	cases := []struct {
		action string
		input  map[string]any
		signal string
		want   map[string]any // the signal's data besides conversationId
	}{
		{"showWebchat", nil, "webchat_visibility", map[string]any{"visibility": "show"}},
		{"hideWebchat", nil, "webchat_visibility", map[string]any{"visibility": "hide"}},
		{"toggleWebchat", nil, "webchat_visibility", map[string]any{"visibility": "toggle"}},
		{"configWebchat", map[string]any{"config": `{"botName":"Renamed","color":"#ff0000"}`}, "webchat_config",
			map[string]any{"config": map[string]any{"botName": "Renamed", "color": "#ff0000"}}},
		{"customEvent", map[string]any{"event": `{"type":"cart","items":[1,2],"nested":{"ok":true}}`}, "custom",
			map[string]any{"event": map[string]any{"type": "cart", "items": []any{1.0, 2.0}, "nested": map[string]any{"ok": true}}}},
		{"customEvent", map[string]any{"event": `"just a string"`}, "custom", map[string]any{"event": "just a string"}},
		{"startTypingIndicator", nil, "typing_started", map[string]any{}},
	}
	for _, tc := range cases {
		t.Run(tc.action+"/"+tc.signal, func(t *testing.T) {
			in := map[string]any{"conversationId": pA}
			for k, v := range tc.input {
				in[k] = v
			}
			if r := s.action(tc.action, in); r.Status != 200 {
				t.Fatalf("%s: %d %s", tc.action, r.Status, r.Raw)
			}
			got := stA.nextOf(t, tc.signal)
			want := map[string]any{"conversationId": convA}
			for k, v := range tc.want {
				want[k] = v
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Fatalf("%s on the stream: %s, want %s", tc.signal, gb, wb)
			}
		})
	}
	// B's stream saw none of them: its first signal is the one sent to B.
	if r := s.action("hideWebchat", map[string]any{"conversationId": pB}); r.Status != 200 {
		t.Fatalf("hideWebchat of B: %d %s", r.Status, r.Raw)
	}
	if sig := stB.next(t); sig["type"] != "webchat_visibility" || str(sig, "data", "conversationId") != convB || str(sig, "data", "visibility") != "hide" {
		t.Fatalf("B's first signal: %v (A's signals leaked, or B's is missing)", sig)
	}
}

// TestWebchatUserData: the component's updateUser({data}) (PUT /users/me
// {userData}) is kept and answered as the user's `data`, and the bot reads
// it with getUserData; null removes it.
func TestWebchatUserData(t *testing.T) {
	s := newSite(t, map[string]any{})
	_, a := s.initialize("", "")
	key, uid := str(a, "user", "userKey"), str(a, "user", "id")
	pUser := s.platformID("users", uid)

	if out := s.action("getUserData", map[string]any{"userId": pUser}); out.Status != 200 || len(out.Body["output"].(map[string]any)["userData"].(map[string]any)) != 0 {
		t.Fatalf("getUserData before any: %d %s", out.Status, out.Raw)
	}
	up := s.must("PUT", "/users/me", key, map[string]any{"name": "John", "userData": map[string]any{"email": "john@example.com", "age": 42, "vip": true}}, 200)
	want := map[string]any{"email": "john@example.com", "age": "42", "vip": "true"}
	wb, _ := json.Marshal(want)
	for what, u := range map[string]map[string]any{"PUT /users/me": up["user"].(map[string]any), "GET /users/me": s.must("GET", "/users/me", key, nil, 200)["user"].(map[string]any)} {
		if gb, _ := json.Marshal(u["data"]); string(gb) != string(wb) || u["name"] != "John" || u["id"] != uid {
			t.Fatalf("%s: %v, want data %s", what, u, wb)
		}
	}
	out := s.action("getUserData", map[string]any{"userId": pUser})
	if gb, _ := json.Marshal(out.Body["output"]); out.Status != 200 || string(gb) != `{"userData":`+string(wb)+`}` {
		t.Fatalf("getUserData: %d %s, want userData %s", out.Status, out.Raw, wb)
	}
	// A name alone keeps the data; null removes it.
	s.must("PUT", "/users/me", key, map[string]any{"name": "Johnny"}, 200)
	if out := s.action("getUserData", map[string]any{"userId": pUser}); len(out.Body["output"].(map[string]any)["userData"].(map[string]any)) != 3 {
		t.Fatalf("getUserData after a name change: %s", out.Raw)
	}
	s.must("PUT", "/users/me", key, map[string]any{"userData": nil}, 200)
	if out := s.action("getUserData", map[string]any{"userId": pUser}); len(out.Body["output"].(map[string]any)["userData"].(map[string]any)) != 0 {
		t.Fatalf("getUserData after userData null: %s", out.Raw)
	}
}

// TestWebchatActionRefusals: bad inputs of the actions and of the user's
// data get a 4xx in the API's error shape, and write nothing.
func TestWebchatActionRefusals(t *testing.T) {
	s := newSite(t, map[string]any{})
	st, a := s.initialize("", "")
	key, conv, uid := str(a, "user", "userKey"), str(a, "conversation", "id"), str(a, "user", "id")
	pConv, pUser := s.platformID("conversations", conv), s.platformID("users", uid)
	other := newSite(t, map[string]any{})
	_, o := other.initialize("", "")
	foreignConv := other.platformID("conversations", str(o, "conversation", "id"))

	actions := []struct {
		name, action string
		input        map[string]any
		status       int
	}{
		{"no conversationId", "showWebchat", map[string]any{}, 400},
		{"an unknown conversation", "hideWebchat", map[string]any{"conversationId": "conv_nothere"}, 404},
		{"another bot's conversation", "toggleWebchat", map[string]any{"conversationId": foreignConv}, 404},
		{"customEvent without event", "customEvent", map[string]any{"conversationId": pConv}, 400},
		{"customEvent of invalid JSON", "customEvent", map[string]any{"conversationId": pConv, "event": "{not json"}, 400},
		{"customEvent of two JSON values", "customEvent", map[string]any{"conversationId": pConv, "event": "{} {}"}, 400},
		{"customEvent of an object, not a string", "customEvent", map[string]any{"conversationId": pConv, "event": map[string]any{"a": 1}}, 400},
		{"customEvent too large", "customEvent", map[string]any{"conversationId": pConv, "event": `"` + strings.Repeat("x", 20000) + `"`}, 400},
		{"configWebchat of an array", "configWebchat", map[string]any{"conversationId": pConv, "config": "[1]"}, 400},
		{"configWebchat of invalid JSON", "configWebchat", map[string]any{"conversationId": pConv, "config": "{"}, 400},
		{"getUserData without userId", "getUserData", map[string]any{}, 400},
		{"getUserData of an unknown user", "getUserData", map[string]any{"userId": "user_nothere"}, 404},
		{"an unknown action", "openWebchat", map[string]any{"conversationId": pConv}, 400},
	}
	for _, tc := range actions {
		t.Run(tc.name, func(t *testing.T) {
			if r := s.action(tc.action, tc.input); r.Status != tc.status {
				t.Fatalf("%d %s, want %d", r.Status, r.Raw, tc.status)
			}
		})
	}
	// None of them reached the stream: the next signal is this one.
	if r := s.action("showWebchat", map[string]any{"conversationId": pConv}); r.Status != 200 {
		t.Fatalf("showWebchat: %d %s", r.Status, r.Raw)
	}
	if sig := st.next(t); sig["type"] != "webchat_visibility" || str(sig, "data", "visibility") != "show" {
		t.Fatalf("first signal after the refusals: %v", sig)
	}

	bodies := []struct {
		name   string
		key    string
		body   any
		status int
	}{
		{"no key", "", map[string]any{"userData": map[string]any{"a": "b"}}, 401},
		{"nested userData", key, map[string]any{"userData": map[string]any{"a": map[string]any{"b": "c"}}}, 400},
		{"userData an array", key, map[string]any{"userData": []any{"a"}}, 400},
		{"signed userData", key, map[string]any{"userData": "eyJhbGciOiJIUzI1NiJ9.e30.x"}, 400},
		{"userData too large", key, map[string]any{"userData": map[string]any{"a": strings.Repeat("x", 600)}}, 400},
		{"attributes", key, map[string]any{"attributes": map[string]any{"a": "b"}}, 400},
		{"an unknown field", key, map[string]any{"profiles": "x"}, 400},
		{"a name not a string", key, map[string]any{"name": 3, "userData": map[string]any{"a": "b"}}, 400},
	}
	for _, tc := range bodies {
		t.Run("PUT /users/me "+tc.name, func(t *testing.T) {
			if got, out := s.call("PUT", "/users/me", tc.key, nil, tc.body); got != tc.status {
				t.Fatalf("%d %v, want %d", got, out, tc.status)
			}
		})
	}
	// Nothing was written by the refused bodies.
	if out := s.action("getUserData", map[string]any{"userId": pUser}); out.Status != 200 || len(out.Body["output"].(map[string]any)["userData"].(map[string]any)) != 0 {
		t.Fatalf("userData after refused bodies: %d %s", out.Status, out.Raw)
	}
}

// earlier is the webchat's first published version, 4.5.2: the typing
// actions only, as a platform that ran it has it stored.
type earlier struct{ *webchat.Integration }

func (e earlier) Definition() platform.Integration {
	d := e.Integration.Definition()
	d.Version = "4.5.2"
	d.Actions = map[string]json.RawMessage{"startTypingIndicator": d.Actions["startTypingIndicator"], "stopTypingIndicator": d.Actions["stopTypingIndicator"]}
	return d
}

// TestWebchatEarlierVersion: over a store where 4.5.2 was published, the
// hub's latest is this version; a bot that installed 4.5.2 is still served
// (its page's API, its typing actions) but has not the new actions until
// it moves to the new version.
func TestWebchatEarlierVersion(t *testing.T) {
	f := apitest.New(t)
	if err := f.Platform.Store.CreateIntegration(context.Background(), builtin.Record(earlier{webchat.New(nil, nil)}, platform.Now())); err != nil {
		t.Fatal(err)
	}
	if v := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/integrations/webchat/latest", Token: f.AdminToken}), 200, "").Str("integration.version"); v != webchat.Version {
		t.Fatalf("latest webchat: %q, want %q", v, webchat.Version)
	}
	s := newSiteOf(t, f, "4.5.2", map[string]any{})
	st, a := s.initialize("", "")
	pConv := s.platformID("conversations", str(a, "conversation", "id"))
	if r := s.action("startTypingIndicator", map[string]any{"conversationId": pConv}); r.Status != 200 {
		t.Fatalf("startTypingIndicator on 4.5.2: %d %s", r.Status, r.Raw)
	}
	st.nextOf(t, "typing_started")
	if r := s.action("showWebchat", map[string]any{"conversationId": pConv}); r.Status != 400 {
		t.Fatalf("showWebchat on 4.5.2: %d %s, want 400 (not in its definition)", r.Status, r.Raw)
	}
	// Moved to the new version: the same installation has the action.
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{
		s.alias(): map[string]any{"integrationId": builtin.IntegrationID(webchat.Name, webchat.Version), "enabled": true, "configuration": map[string]any{}}}}, 200)
	s.intID = builtin.IntegrationID(webchat.Name, webchat.Version)
	if r := s.action("showWebchat", map[string]any{"conversationId": pConv}); r.Status != 200 {
		t.Fatalf("showWebchat after the move to %s: %d %s", webchat.Version, r.Status, r.Raw)
	}
}

// TestWebchatGetOrCreateUser: the hitl plugin's action gives one webchat
// user per agent, named and pictured as given (the latest), a participant
// of the conversation; a conversation that is not a webchat one is 400.
func TestWebchatGetOrCreateUser(t *testing.T) {
	s := newSite(t, map[string]any{})
	_, a := s.initialize("", "")
	conv := s.platformID("conversations", str(a, "conversation", "id"))
	in := map[string]any{"name": "Alice", "pictureUrl": "https://example.com/alice.png",
		"user": map[string]any{"id": "user_downstream1", "conversationId": conv}}
	r := s.action("getOrCreateUser", in)
	uid, _ := r.Body["output"].(map[string]any)["userId"].(string)
	if r.Status != 200 || uid == "" {
		t.Fatalf("getOrCreateUser: %d %s", r.Status, r.Raw)
	}
	bh := map[string]string{"x-bot-id": s.botID}
	u := s.admin("GET", "/v1/chat/users/"+uid, bh, nil, 200)
	if u.Str("user.name") != "Alice" || u.Str("user.pictureUrl") != "https://example.com/alice.png" {
		t.Fatalf("the agent's webchat user: %s", u.Raw)
	}
	s.admin("GET", "/v1/chat/conversations/"+conv+"/participants/"+uid, bh, nil, 200)
	in["name"] = "Alice B."
	r = s.action("getOrCreateUser", in)
	if again := r.Body["output"].(map[string]any)["userId"]; again != uid {
		t.Fatalf("twice: %v then %v", uid, again)
	}
	if u := s.admin("GET", "/v1/chat/users/"+uid, bh, nil, 200); u.Str("user.name") != "Alice B." {
		t.Fatalf("renamed: %s", u.Raw)
	}
	other := s.admin("POST", "/v1/chat/conversations", bh, map[string]any{"channel": "x", "tags": map[string]any{}}, 201).Str("conversation.id")
	for _, bad := range []map[string]any{
		{"user": map[string]any{"id": "u", "conversationId": other}},
		{"user": map[string]any{"id": "u"}},
		{"name": "x"},
	} {
		if r := s.action("getOrCreateUser", bad); r.Status != 400 {
			t.Errorf("%v: %d %s", bad, r.Status, r.Raw)
		}
	}
}
