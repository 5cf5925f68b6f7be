package chatapi_test

// The Chat API as Botpress's own chat integration (issue 35): a removed
// participant stops hearing, only the owner removes and never itself,
// client-chosen ids keep Botpress's rule, custom events both ways, and
// blocs in the client's shape.

import (
	"context"
	"encoding/json"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/platform"
)

// user makes a user of the installation (with id, when not empty) and
// answers its key.
func (s *site) user(id string) string {
	s.t.Helper()
	body := map[string]any{}
	if id != "" {
		body["id"] = id
	}
	return s.must("POST", "/users", "", body, 201)["key"].(string)
}

// alias is the installation's alias (the prefix of its actions and events).
func (s *site) alias() string {
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	inst := b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)
	if a, ok := inst["alias"].(string); ok && a != "" {
		return a
	}
	return inst["name"].(string)
}

// botEvent waits for the bot's next event of type typ.
func (s *site) botEvent(typ string) botEvent {
	s.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-s.events:
			if ev.Type == typ {
				return ev
			}
		case <-deadline:
			s.t.Fatalf("the bot got no %s event", typ)
		}
	}
}

// TestChatAPIRemovedParticipantStopsHearing: removing a participant ends
// its streams of the conversation (SSE and WebSocket alike) at once, while
// the owner's stream goes on; the removed user hears nothing more.
func TestChatAPIRemovedParticipantStopsHearing(t *testing.T) {
	s := newSite(t, map[string]any{})
	owner := s.user("owner")
	bob := s.user("bob")
	conv := s.must("POST", "/conversations", owner, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	s.must("POST", "/conversations/"+conv+"/participants", owner, map[string]any{"userId": "bob"}, 200)
	// Bob's stream of another conversation of his own: it stays.
	own := s.must("POST", "/conversations", bob, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	bobOwn := s.listen(bob, own)
	ownerSt := s.listen(owner, conv)
	bobSt := s.listen(bob, conv)

	// A message both hear.
	s.must("POST", "/messages", owner, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "before"}}, 201)
	for _, st := range []*stream{ownerSt, bobSt} {
		if sig := st.next(t); sig["type"] != "message_created" {
			t.Fatalf("before the removal: %v", sig)
		}
	}

	removed := time.Now()
	s.must("DELETE", "/conversations/"+conv+"/participants/bob", owner, nil, 200)
	select {
	case <-bobSt.done:
		t.Logf("removed participant's stream ended %s after the removal's answer", time.Since(removed))
	case <-time.After(time.Second):
		t.Fatal("the removed participant's stream is still open a second after the removal")
	}
	s.must("POST", "/messages", owner, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "after"}}, 201)
	for sig := ownerSt.next(t); sig["type"] != "message_created"; sig = ownerSt.next(t) {
		if sig["type"] != "participant_removed" {
			t.Fatalf("the owner's stream: %v", sig)
		}
	}
	close(bobSt.signals)
	for sig := range bobSt.signals {
		if sig["type"] != "message_created" {
			continue
		}
		if text := sig["data"].(map[string]any)["payload"].(map[string]any)["text"]; text != "before" && text != "echo: before" {
			t.Fatalf("the removed participant heard %q", text)
		}
	}
	// Bob cannot listen again; his other conversation's stream is open.
	if code, out := s.chat("GET", "/conversations/"+conv+"/listen", bob, nil); code != 403 {
		t.Fatalf("a removed participant listens again: %d %v", code, out)
	}
	select {
	case <-bobOwn.done:
		t.Fatal("the removed user's stream of another conversation ended")
	default:
	}

	// Over WebSocket too.
	s.must("POST", "/conversations/"+conv+"/participants", owner, map[string]any{"userId": "bob"}, 200)
	conn := s.dialWS(bob, conv)
	s.must("DELETE", "/conversations/"+conv+"/participants/bob", owner, nil, 200)
	readErr := make(chan error, 1)
	go func() {
		for {
			if _, _, err := conn.Read(t.Context()); err != nil {
				readErr <- err
				return
			}
		}
	}()
	select {
	case err := <-readErr:
		t.Logf("removed participant's WebSocket: %v", err)
	case <-time.After(time.Second):
		t.Fatal("the removed participant's WebSocket is still open a second after the removal")
	}
}

// dialWS opens listenConversation over WebSocket.
func (s *site) dialWS(key, conv string) *websocket.Conn {
	s.t.Helper()
	u := "ws" + strings.TrimPrefix(s.webhookURL, "http") + "/conversations/" + conv + "/listen?x-user-key=" + url.QueryEscape(key)
	conn, _, err := websocket.Dial(s.t.Context(), u, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { conn.CloseNow() })
	return conn
}

// TestChatAPIOnlyOwnerRemoves: only the conversation's owner removes
// participants (403 for another participant), and removing the owner is a
// 400 InvalidPayload that leaves it in.
func TestChatAPIOnlyOwnerRemoves(t *testing.T) {
	s := newSite(t, map[string]any{})
	owner, bob, carol := s.user("owner"), s.user("bob"), s.user("carol")
	conv := s.must("POST", "/conversations", owner, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	for _, u := range []string{"bob", "carol"} {
		s.must("POST", "/conversations/"+conv+"/participants", owner, map[string]any{"userId": u}, 200)
	}
	for _, c := range []struct {
		name, key, target, typ string
		status                 int
	}{
		{"a participant removes another", bob, "carol", "Forbidden", 403},
		{"a participant removes the owner", bob, "owner", "Forbidden", 403},
		{"a participant removes itself", bob, "bob", "Forbidden", 403},
		{"the owner removes itself", owner, "owner", "InvalidPayload", 400},
	} {
		code, out := s.chat("DELETE", "/conversations/"+conv+"/participants/"+c.target, c.key, nil)
		if code != c.status || out["type"] != c.typ {
			t.Errorf("%s: %d %v, want %d %s", c.name, code, out, c.status, c.typ)
		}
	}
	s.must("GET", "/conversations/"+conv, owner, nil, 200)
	parts := s.must("GET", "/conversations/"+conv+"/participants", owner, nil, 200)["participants"].([]any)
	if len(parts) != 3 {
		t.Fatalf("participants after refused removals: %v", parts)
	}
	s.must("DELETE", "/conversations/"+conv+"/participants/carol", owner, nil, 200)
	s.must("GET", "/conversations/"+conv, bob, nil, 200)
	s.must("GET", "/conversations/"+conv, carol, nil, 403)
}

// TestChatAPIChosenIDs: ids a client chooses keep Botpress's rule
// ([a-zA-Z0-9_\-\\/], 1 to 70 characters): outside it, 400 InvalidPayload
// stating the rule, for users, conversations and personal-mode keys.
func TestChatAPIChosenIDs(t *testing.T) {
	s := newSite(t, map[string]any{})
	key := s.user("")
	max := strings.Repeat("a", 70)
	for _, c := range []struct {
		name, method, path, key string
		body                    map[string]any
		status                  int
	}{
		{"createUser +", "POST", "/users", "", map[string]any{"id": "invalid+abc"}, 400},
		{"createUser 71", "POST", "/users", "", map[string]any{"id": max + "b"}, 400},
		{"createUser .", "POST", "/users", "", map[string]any{"id": "a.b"}, 400},
		{"createUser empty", "POST", "/users", "", map[string]any{"id": ""}, 400},
		{"createUser 70", "POST", "/users", "", map[string]any{"id": max}, 201},
		{"createUser all allowed", "POST", "/users", "", map[string]any{"id": `Az09_-\/x`}, 201},
		{"createConversation +", "POST", "/conversations", key, map[string]any{"id": "invalid+abc"}, 400},
		{"createConversation 71", "POST", "/conversations", key, map[string]any{"id": max + "b"}, 400},
		{"createConversation @", "POST", "/conversations", key, map[string]any{"id": "a@b"}, 400},
		{"createConversation 70", "POST", "/conversations", key, map[string]any{"id": max}, 201},
		{"getOrCreateConversation +", "POST", "/conversations/get-or-create", key, map[string]any{"id": "invalid+abc"}, 400},
		{"getOrCreateConversation 71", "POST", "/conversations/get-or-create", key, map[string]any{"id": max + "c"}, 400},
		{"getOrCreateConversation empty", "POST", "/conversations/get-or-create", key, map[string]any{"id": ""}, 400},
		{"getOrCreateConversation allowed", "POST", "/conversations/get-or-create", key, map[string]any{"id": `order/12\3_a-b`}, 201},
	} {
		code, out := s.chat(c.method, c.path, c.key, c.body)
		if code != c.status {
			t.Errorf("%s: %d %v, want %d", c.name, code, out, c.status)
			continue
		}
		if c.status == 400 {
			msg, _ := out["message"].(string)
			if out["type"] != "InvalidPayload" || !strings.Contains(msg, "1 to 70 characters") || !strings.Contains(msg, `"_", "-", "\" and "/"`) {
				t.Errorf("%s: %v, want InvalidPayload stating the rule", c.name, out)
			}
		}
	}

	// Personal mode: a well-signed key of an id outside the rule is an
	// invalid id, not a bad key.
	p := newSite(t, map[string]any{"encryptionKey": "s3cret"})
	for _, id := range []string{strings.Repeat("x", 123), "invalid+abc"} {
		code, out := p.chat("POST", "/users/get-or-create", signed([]byte("s3cret"), `{"id":"`+id+`"}`), map[string]any{})
		if code != 400 || out["type"] != "InvalidPayload" || !strings.Contains(out["message"].(string), "1 to 70 characters") {
			t.Errorf("personal key of id %.20q...: %d %v, want 400 InvalidPayload stating the rule", id, code, out)
		}
	}
	p.must("POST", "/users/get-or-create", signed([]byte("s3cret"), `{"id":"`+max+`"}`), map[string]any{}, 201)
}

// TestChatAPICustomEvents: the user's createEvent reaches the bot as
// <alias>:custom {userId, conversationId, payload} (the bot's ids), the
// client still sees its payload; the bot's callAction('<alias>:sendEvent')
// reaches the stream as event_created from the bot.
func TestChatAPICustomEvents(t *testing.T) {
	s := newSite(t, map[string]any{})
	key := s.user("ada")
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)

	ev := s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{"clicked": "buy"}}, 201)["event"].(map[string]any)
	if !reflect.DeepEqual(ev["payload"], map[string]any{"clicked": "buy"}) || ev["conversationId"] != conv || ev["userId"] != "ada" {
		t.Fatalf("createEvent's answer: %v", ev)
	}
	got := s.botEvent(s.alias() + ":custom")
	var payload map[string]any
	_ = json.Unmarshal(got.Payload, &payload)
	want := map[string]any{"userId": got.UserID, "conversationId": got.ConversationID, "payload": map[string]any{"clicked": "buy"}}
	if !reflect.DeepEqual(payload, want) || got.UserID == "" || got.ConversationID == "" {
		t.Fatalf("the bot's custom event: %+v (payload %v), want payload %v", got, payload, want)
	}
	if sig := st.next(t); sig["type"] != "event_created" || !reflect.DeepEqual(sig["data"].(map[string]any)["payload"], map[string]any{"clicked": "buy"}) {
		t.Fatalf("the user's event on the stream: %v", sig)
	}
	if e := s.must("GET", "/events/"+ev["id"].(string), key, nil, 200)["event"].(map[string]any); !reflect.DeepEqual(e["payload"], map[string]any{"clicked": "buy"}) {
		t.Fatalf("getEvent: %v", e)
	}

	// The bot's event to the client.
	r := s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
		Body: map[string]any{"type": s.alias() + ":sendEvent", "input": map[string]any{"conversationId": got.ConversationID, "payload": map[string]any{"show": "cart", "n": 2}}}})
	s.f.Check(r, 200, "")
	sig := st.next(t)
	d, _ := sig["data"].(map[string]any)
	if sig["type"] != "event_created" || d["isBot"] != true || d["userId"] != s.botID || d["conversationId"] != conv ||
		!reflect.DeepEqual(d["payload"], map[string]any{"show": "cart", "n": float64(2)}) || d["id"] != nil || d["createdAt"] == nil {
		t.Fatalf("sendEvent on the stream: %v", sig)
	}
	// Refusals: no payload, not a conversation of the Chat API.
	for _, input := range []map[string]any{{"conversationId": got.ConversationID}, {"conversationId": "conv_nope", "payload": map[string]any{}}} {
		r := s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
			Body: map[string]any{"type": s.alias() + ":sendEvent", "input": input}})
		if r.Status/100 != 4 {
			t.Errorf("sendEvent %v: %d %s, want a 4xx", input, r.Status, r.Raw)
		}
	}
}

// TestChatAPIBlocs: a bloc the bot writes as Botpress's (items {type,
// payload}) reaches the stream and listMessages in the client's shape
// (items {type, ...payload}), every item type; a client's bloc reaches
// the bot in Botpress's shape.
func TestChatAPIBlocs(t *testing.T) {
	s := newSite(t, map[string]any{})
	key := s.user("ada")
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)
	// The conversation's platform id, from the bot's side.
	s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{}}, 201)
	convID := s.botEvent(s.alias() + ":custom").ConversationID
	st.next(t) // the event's signal

	botItems := []any{
		map[string]any{"type": "text", "payload": map[string]any{"text": "Hi"}},
		map[string]any{"type": "markdown", "payload": map[string]any{"markdown": "**Hi**"}},
		map[string]any{"type": "image", "payload": map[string]any{"imageUrl": "https://x.example/i.png"}},
		map[string]any{"type": "audio", "payload": map[string]any{"audioUrl": "https://x.example/a.mp3"}},
		map[string]any{"type": "video", "payload": map[string]any{"videoUrl": "https://x.example/v.mp4"}},
		map[string]any{"type": "file", "payload": map[string]any{"fileUrl": "https://x.example/f.pdf", "title": "F"}},
		map[string]any{"type": "location", "payload": map[string]any{"latitude": 45.5, "longitude": -73.6, "address": "Here", "title": "T"}},
	}
	clientItems := []any{
		map[string]any{"type": "text", "text": "Hi"},
		map[string]any{"type": "markdown", "markdown": "**Hi**"},
		map[string]any{"type": "image", "imageUrl": "https://x.example/i.png"},
		map[string]any{"type": "audio", "audioUrl": "https://x.example/a.mp3"},
		map[string]any{"type": "video", "videoUrl": "https://x.example/v.mp4"},
		map[string]any{"type": "file", "fileUrl": "https://x.example/f.pdf", "title": "F"},
		map[string]any{"type": "location", "latitude": 45.5, "longitude": -73.6, "address": "Here", "title": "T"},
	}
	s.f.Check(s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
		Body: map[string]any{"conversationId": convID, "userId": s.botID, "type": "bloc", "payload": map[string]any{"items": botItems}, "tags": map[string]string{}}}), 201, "")
	sig := st.next(t)
	d, _ := sig["data"].(map[string]any)
	want := map[string]any{"type": "bloc", "items": clientItems}
	if sig["type"] != "message_created" || d["isBot"] != true || !reflect.DeepEqual(d["payload"], want) {
		t.Fatalf("the bot's bloc on the stream: %v, want payload %v", sig, want)
	}
	msgs := s.must("GET", "/conversations/"+conv+"/messages", key, nil, 200)["messages"].([]any)
	if len(msgs) != 1 || !reflect.DeepEqual(msgs[0].(map[string]any)["payload"], want) {
		t.Fatalf("the bot's bloc in listMessages: %v", msgs)
	}

	// The client's bloc: the bot reads Botpress's shape, the client its own.
	m := s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": want}, 201)["message"].(map[string]any)
	if !reflect.DeepEqual(m["payload"], want) {
		t.Fatalf("createMessage's answer of a bloc: %v", m["payload"])
	}
	got := s.botEvent("message_created")
	var p struct {
		Message struct {
			Type    string         `json:"type"`
			Payload map[string]any `json:"payload"`
		} `json:"message"`
	}
	_ = json.Unmarshal(got.Payload, &p)
	if p.Message.Type != "bloc" || !reflect.DeepEqual(p.Message.Payload["items"], botItems) {
		t.Fatalf("the client's bloc as the bot got it: %+v, want items %v", p.Message, botItems)
	}
	if g := s.must("GET", "/messages/"+m["id"].(string), key, nil, 200)["message"].(map[string]any); !reflect.DeepEqual(g["payload"], want) {
		t.Fatalf("getMessage of the client's bloc: %v", g["payload"])
	}
}

// earlier is the chat integration as 0.5.5 published it: no action.
type earlier struct{ *chatapi.Integration }

func (e earlier) Definition() platform.Integration {
	d := e.Integration.Definition()
	d.Version = "0.5.5"
	d.Actions = nil
	return d
}

// TestChatAPIEarlierVersion: over a store where 0.5.5 was published, the
// hub's latest is this version; a bot that installed 0.5.5 is still
// served, without sendEvent (400) until it moves to the new version.
func TestChatAPIEarlierVersion(t *testing.T) {
	f := apitest.New(t)
	if err := f.Platform.Store.CreateIntegration(context.Background(), builtin.Record(earlier{chatapi.New(nil, nil)}, platform.Now())); err != nil {
		t.Fatal(err)
	}
	if v := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/hub/integrations/chat/latest", Token: f.AdminToken}), 200, "").Str("integration.version"); v != chatapi.Version {
		t.Fatalf("latest chat: %q, want %q", v, chatapi.Version)
	}
	s := newSiteOf(t, f, "0.5.5", map[string]any{})
	key := s.user("ada")
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)
	s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{}}, 201)
	convID := s.botEvent(s.alias() + ":custom").ConversationID
	st.next(t)
	send := func() apitest.Response {
		return s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/actions", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
			Body: map[string]any{"type": s.alias() + ":sendEvent", "input": map[string]any{"conversationId": convID, "payload": map[string]any{"k": "v"}}}})
	}
	if r := send(); r.Status != 400 {
		t.Fatalf("sendEvent on 0.5.5: %d %s, want 400 (not in its definition)", r.Status, r.Raw)
	}
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{
		s.alias(): map[string]any{"integrationId": builtin.IntegrationID(chatapi.Name, chatapi.Version), "enabled": true, "configuration": map[string]any{}}}}, 200)
	// The move is a new installation (a new webhook URL, whose keys are
	// its own): a user of it listens, and the bot's sendEvent reaches it.
	s.intID = builtin.IntegrationID(chatapi.Name, chatapi.Version)
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	s.webhookURL = b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)["webhookUrl"].(string)
	key = s.user("bo")
	conv = s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st = s.listen(key, conv)
	s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{}}, 201)
	convID = s.botEvent(s.alias() + ":custom").ConversationID
	st.next(t)
	if r := send(); r.Status != 200 {
		t.Fatalf("sendEvent after the move to %s: %d %s", chatapi.Version, r.Status, r.Raw)
	}
	if sig := st.next(t); sig["type"] != "event_created" || sig["data"].(map[string]any)["isBot"] != true {
		t.Fatalf("sendEvent on the stream after the move: %v", sig)
	}
}
