package chatapi_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
)

// site is a bot with the chat integration installed, and a bot server
// that answers every user message with "echo: <text>".
type site struct {
	t          *testing.T
	f          *apitest.Env
	ws, botID  string
	intID      string
	webhookURL string
	events     chan botEvent // every event the bot got
}

// botEvent is an event as the bot got it.
type botEvent struct {
	Type           string          `json:"type"`
	ConversationID string          `json:"conversationId"`
	UserID         string          `json:"userId"`
	Payload        json.RawMessage `json:"payload"`
}

func newSite(t *testing.T, configuration map[string]any) *site {
	return newSiteOf(t, apitest.New(t), chatapi.Version, configuration)
}

// newSiteOf is newSite over f, installing version of the integration.
func newSiteOf(t *testing.T, f *apitest.Env, version string, configuration map[string]any) *site {
	s := &site{t: t, f: f, intID: builtin.IntegrationID(chatapi.Name, version), events: make(chan botEvent, 100)}
	s.ws = s.admin("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}, 200).Str("id")
	bot := httptest.NewServer(http.HandlerFunc(s.bot))
	t.Cleanup(bot.Close)
	s.botID = s.admin("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": s.ws}, map[string]any{"name": "echo", "dev": true, "url": bot.URL}, 200).Str("bot.id")
	s.install(configuration)
	return s
}

func (s *site) install(configuration map[string]any) {
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{
		s.intID: map[string]any{"enabled": true, "configuration": configuration}}}, 200)
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	s.webhookURL = b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)["webhookUrl"].(string)
}

func (s *site) admin(method, path string, hdr map[string]string, body any, status int) apitest.Response {
	s.t.Helper()
	return s.f.Check(s.f.Do(apitest.Req{Method: method, Path: path, Token: s.f.AdminToken, Headers: hdr, Body: body}), status, "")
}

// bot is the bot's url: it answers each user's text with an echo.
func (s *site) bot(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Event struct {
			Type           string `json:"type"`
			ConversationID string `json:"conversationId"`
			Payload        struct {
				Message struct {
					Type    string         `json:"type"`
					Payload map[string]any `json:"payload"`
				} `json:"message"`
			} `json:"payload"`
		} `json:"event"`
	}
	var ev struct {
		Event botEvent `json:"event"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &in)
	_ = json.Unmarshal(body, &ev)
	w.WriteHeader(200)
	select {
	case s.events <- ev.Event:
	default:
	}
	if r.Header.Get("x-bp-type") != "message_created" {
		return
	}
	text, _ := in.Event.Payload.Message.Payload["text"].(string)
	go s.f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: s.f.AdminToken, Headers: map[string]string{"x-bot-id": s.botID},
		Body: map[string]any{"conversationId": in.Event.ConversationID, "userId": s.botID, "type": "text", "payload": map[string]any{"text": "echo: " + text}, "tags": map[string]string{}}})
}

// chat calls the Chat API of the installation; an error must be in the
// API's shape.
func (s *site) chat(method, path, key string, body any) (int, map[string]any) {
	s.t.Helper()
	hdr := map[string]string{}
	if key != "" {
		hdr["x-user-key"] = key
	}
	r := s.f.Do(apitest.Req{Method: method, URL: s.webhookURL + path, Headers: hdr, Body: body})
	return r.Status, r.Body
}

func (s *site) must(method, path, key string, body any, status int) map[string]any {
	s.t.Helper()
	got, out := s.chat(method, path, key, body)
	if got != status {
		s.t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	return out
}

// stream is an open listenConversation.
type stream struct {
	signals  chan map[string]any
	pings    chan struct{} // "data: ping"
	comments chan string   // ": ..." lines
	res      *http.Response
	done     chan struct{}
}

func (s *site) listen(key, conv string) *stream {
	s.t.Helper()
	req, _ := http.NewRequest("GET", s.webhookURL+"/conversations/"+conv+"/listen", nil)
	req.Header.Set("x-user-key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		s.t.Fatalf("listen: %d %s", res.StatusCode, b)
	}
	st := &stream{signals: make(chan map[string]any, 64), pings: make(chan struct{}, 1024), comments: make(chan string, 1024), res: res, done: make(chan struct{})}
	s.t.Cleanup(func() { res.Body.Close() })
	go func() {
		defer close(st.done)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				if strings.HasPrefix(line, ":") {
					select {
					case st.comments <- line:
					default:
					}
				}
				continue
			}
			if data == "ping" {
				select {
				case st.pings <- struct{}{}:
				default:
				}
				continue
			}
			var sig map[string]any
			if json.Unmarshal([]byte(data), &sig) == nil {
				st.signals <- sig
			}
		}
	}()
	return st
}

// next waits for the stream's next signal.
func (st *stream) next(t *testing.T) map[string]any {
	t.Helper()
	select {
	case sig := <-st.signals:
		return sig
	case <-time.After(10 * time.Second):
		t.Fatal("no signal on the stream")
	}
	return nil
}

// TestChatAPI: a user of the Chat API, through the installation's webhook
// URL: a key, a conversation, a stream, a turn with the bot's reply on the
// stream, participants, events, deletion; another user refused.
func TestChatAPI(t *testing.T) {
	s := newSite(t, map[string]any{})
	if !strings.HasPrefix(s.webhookURL, s.f.URL+"/webhooks/whk_") {
		t.Fatalf("webhookUrl: %s", s.webhookURL)
	}
	s.must("GET", "/hello/", "", nil, 200)

	u := s.must("POST", "/users", "", map[string]any{"name": "Ada"}, 201)
	key := u["key"].(string)
	me := u["user"].(map[string]any)
	if me["name"] != "Ada" || me["id"] == "" {
		t.Fatalf("createUser: %v", u)
	}
	got := s.must("POST", "/users/get-or-create", key, map[string]any{}, 201)["user"].(map[string]any)
	if got["id"] != me["id"] {
		t.Fatalf("get-or-create with the key: %v, want %v", got, me)
	}
	s.must("PUT", "/users/me", key, map[string]any{"name": "Ada L."}, 200)
	if n := s.must("GET", "/users/me", key, nil, 200)["user"].(map[string]any)["name"]; n != "Ada L." {
		t.Fatalf("updated name: %v", n)
	}

	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	same := s.must("POST", "/conversations/get-or-create", key, map[string]any{"id": conv}, 201)["conversation"].(map[string]any)["id"]
	if same != conv {
		t.Fatalf("get-or-create of the conversation: %v", same)
	}
	st := s.listen(key, conv)

	msg := s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "hi"}}, 201)["message"].(map[string]any)
	if msg["userId"] != me["id"] || msg["conversationId"] != conv || msg["payload"].(map[string]any)["text"] != "hi" {
		t.Fatalf("createMessage: %v", msg)
	}
	// The user's own message and the bot's reply, in either order: the
	// user's is published once its createMessage is answered, and a bot
	// quick enough can have its reply published first (docs/chat-api.md,
	// "Order on the stream").
	own, reply := st.next(t), st.next(t)
	if d, _ := own["data"].(map[string]any); d != nil && d["isBot"] == true {
		own, reply = reply, own
	}
	if own["type"] != "message_created" || own["data"].(map[string]any)["isBot"] != false || own["data"].(map[string]any)["id"] != msg["id"] {
		t.Fatalf("the user's own message on the stream: %v", own)
	}
	rd := reply["data"].(map[string]any)
	if reply["type"] != "message_created" || rd["isBot"] != true || rd["payload"].(map[string]any)["text"] != "echo: hi" ||
		rd["payload"].(map[string]any)["type"] != "text" || rd["conversationId"] != conv || rd["userId"] != s.botID {
		t.Fatalf("the bot's reply on the stream: %v", reply)
	}
	msgs := s.must("GET", "/conversations/"+conv+"/messages", key, nil, 200)["messages"].([]any)
	if len(msgs) != 2 {
		t.Fatalf("listMessages: %v", msgs)
	}
	s.must("GET", "/messages/"+msg["id"].(string), key, nil, 200)

	// Another user: refused from Ada's conversation, until added.
	other := s.must("POST", "/users", "", map[string]any{"id": "bob"}, 201)
	bobKey := other["key"].(string)
	if other["user"].(map[string]any)["id"] != "bob" {
		t.Fatalf("a chosen id: %v", other)
	}
	s.must("POST", "/users", "", map[string]any{"id": "bob"}, 409)
	for _, c := range []struct{ method, path string }{
		{"GET", "/conversations/" + conv}, {"GET", "/conversations/" + conv + "/messages"},
		{"GET", "/messages/" + msg["id"].(string)}, {"GET", "/conversations/" + conv + "/listen"},
		{"DELETE", "/conversations/" + conv},
	} {
		if code, out := s.chat(c.method, c.path, bobKey, nil); code != 403 {
			t.Errorf("%s %s as another user: %d %v, want 403", c.method, c.path, code, out)
		}
	}
	if code, _ := s.chat("POST", "/messages", bobKey, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "x"}}); code != 403 {
		t.Errorf("another user's message: %d", code)
	}
	s.must("POST", "/conversations/"+conv+"/participants", key, map[string]any{"userId": "bob"}, 200)
	if sig := st.next(t); sig["type"] != "participant_added" || sig["data"].(map[string]any)["participantId"] != "bob" {
		t.Fatalf("participant_added: %v", sig)
	}
	parts := s.must("GET", "/conversations/"+conv+"/participants", bobKey, nil, 200)["participants"].([]any)
	if len(parts) != 2 {
		t.Fatalf("participants: %v", parts)
	}
	s.must("GET", "/conversations/"+conv+"/participants/bob", key, nil, 200)
	s.must("DELETE", "/conversations/"+conv+"/participants/bob", key, nil, 200)
	if sig := st.next(t); sig["type"] != "participant_removed" {
		t.Fatalf("participant_removed: %v", sig)
	}
	s.must("GET", "/conversations/"+conv+"/participants/bob", key, nil, 404)

	// Events.
	ev := s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{"clicked": "yes"}}, 201)["event"].(map[string]any)
	if sig := st.next(t); sig["type"] != "event_created" || sig["data"].(map[string]any)["payload"].(map[string]any)["clicked"] != "yes" {
		t.Fatalf("event_created: %v", sig)
	}
	if got := s.must("GET", "/events/"+ev["id"].(string), key, nil, 200)["event"].(map[string]any); got["conversationId"] != conv || got["userId"] != me["id"] {
		t.Fatalf("getEvent: %v", got)
	}
	s.must("GET", "/events/"+ev["id"].(string), bobKey, nil, 403)

	// Deleting a message, then the conversation: the stream ends.
	s.must("DELETE", "/messages/"+msg["id"].(string), key, nil, 200)
	if sig := st.next(t); sig["type"] != "message_deleted" || sig["data"].(map[string]any)["id"] != msg["id"] {
		t.Fatalf("message_deleted: %v", sig)
	}
	if list := s.must("GET", "/conversations", key, nil, 200)["conversations"].([]any); len(list) != 1 {
		t.Fatalf("listConversations: %v", list)
	}
	s.must("DELETE", "/conversations/"+conv, key, nil, 200)
	select {
	case <-st.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a deleted conversation stays open")
	}
	s.must("GET", "/conversations/"+conv, key, nil, 404)
	s.must("DELETE", "/users/me", key, nil, 200)
	s.must("GET", "/users/me", key, nil, 404)
}

// TestChatAPIRefusals: bad keys, bad input, limits: a clear 4xx in the
// API's error shape.
func TestChatAPIRefusals(t *testing.T) {
	s := newSite(t, map[string]any{})
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	parts := strings.Split(key, ".")
	forged := signed([]byte("not the secret"), `{"id":"someone"}`)
	cases := []struct {
		name         string
		method, path string
		key          string
		body         any
		status       int
	}{
		{"no key", "GET", "/users/me", "", nil, 401},
		{"garbage key", "GET", "/users/me", "nope", nil, 401},
		{"tampered payload", "GET", "/users/me", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"id":"x"}`)) + "." + parts[2], nil, 401},
		{"key signed with another secret", "GET", "/users/me", forged, nil, 401},
		{"unknown operation", "GET", "/nope", key, nil, 405},
		{"unknown conversation", "GET", "/conversations/nope", key, nil, 404},
		{"bad message type", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "nope"}}, 400},
		{"empty text", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": ""}}, 400},
		{"unknown field", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "x"}, "extra": 1}, 400},
		{"too large", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": strings.Repeat("x", chatapi.MaxBody)}}, 413},
		{"bloc item without its field", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "bloc", "items": []any{map[string]any{"type": "text"}}}}, 400},
		{"bloc item of a type blocs have not", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "bloc", "items": []any{map[string]any{"type": "card", "title": "x"}}}}, 400},
		{"bloc item not an object", "POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "bloc", "items": []any{"text"}}}, 400},
		{"bad chosen id", "POST", "/users", "", map[string]any{"id": "a b"}, 400},
		{"profile too long", "POST", "/users", "", map[string]any{"profile": strings.Repeat("p", 1001)}, 400},
		{"an id in get-or-create (the user is the key's)", "POST", "/users/get-or-create", key, map[string]any{"id": "bob"}, 400},
		{"an id in an update of me (it cannot change)", "PUT", "/users/me", key, map[string]any{"id": "bob"}, 400},
	}
	for _, c := range cases {
		if code, out := s.chat(c.method, c.path, c.key, c.body); code != c.status {
			t.Errorf("%s: %d %v, want %d", c.name, code, out, c.status)
		}
	}
	// A key of one installation is nothing to another's.
	other := newSite(t, map[string]any{})
	if code, _ := other.chat("GET", "/users/me", key, nil); code != 401 {
		t.Errorf("a key of another installation: %d, want 401", code)
	}
	// Listener limit per key.
	for i := 0; i < chatapi.MaxListeners; i++ {
		s.listen(key, conv)
	}
	if code, out := s.chat("GET", "/conversations/"+conv+"/listen", key, nil); code != 429 {
		t.Errorf("one stream too many: %d %v, want 429", code, out)
	}
	// Rate: the burst, then 429 (no refill meanwhile, however slow the
	// machine).
	chatapi.RatePerSecond = 0.001
	defer func() { chatapi.RatePerSecond = 20 }()
	limited := false
	for i := 0; i < chatapi.Burst+10 && !limited; i++ {
		code, _ := s.chat("GET", "/users/me", key, nil)
		limited = code == 429
	}
	if !limited {
		t.Errorf("no 429 after %d requests", chatapi.Burst+10)
	}
}

func signed(key []byte, payload string) string {
	msg := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(payload))
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msg))
	return msg + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// TestChatAPIPersonalMode: with encryptionKey the client signs its own
// key, its user id is the one it chose, and POST /users is refused.
func TestChatAPIPersonalMode(t *testing.T) {
	s := newSite(t, map[string]any{"encryptionKey": "s3cret"})
	s.must("POST", "/users", "", map[string]any{}, 403)
	key := signed([]byte("s3cret"), `{"id":"customer-42"}`)
	u := s.must("POST", "/users/get-or-create", key, map[string]any{"name": "C"}, 201)["user"].(map[string]any)
	if u["id"] != "customer-42" {
		t.Fatalf("personal mode user: %v", u)
	}
	again := s.must("POST", "/users/get-or-create", key, map[string]any{}, 201)["user"].(map[string]any)
	if again["id"] != "customer-42" || again["createdAt"] != u["createdAt"] {
		t.Fatalf("the same user again: %v vs %v", again, u)
	}
	if code, _ := s.chat("GET", "/users/me", signed([]byte("other"), `{"id":"customer-42"}`), nil); code != 401 {
		t.Fatalf("a key signed with another key: %d", code)
	}
	conv := s.must("POST", "/conversations/get-or-create", key, map[string]any{"id": "ticket-7"}, 201)["conversation"].(map[string]any)["id"]
	if conv != "ticket-7" {
		t.Fatalf("chosen conversation id: %v", conv)
	}
}

// TestChatAPICORS: browser origins the installation allows get CORS
// answers with credentials and x-user-key allowed; others are refused.
func TestChatAPICORS(t *testing.T) {
	s := newSite(t, map[string]any{"allowedOrigins": []string{"https://shop.example"}})
	pre := func(origin string) *http.Response {
		req, _ := http.NewRequest("OPTIONS", s.webhookURL+"/users/me", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "x-user-key")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	ok := pre("https://shop.example")
	if ok.StatusCode != 204 || ok.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" ||
		ok.Header.Get("Access-Control-Allow-Credentials") != "true" || !strings.Contains(ok.Header.Get("Access-Control-Allow-Headers"), "x-user-key") {
		t.Fatalf("allowed preflight: %d %v", ok.StatusCode, ok.Header)
	}
	if bad := pre("https://evil.example"); bad.StatusCode != 403 || bad.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("refused preflight: %d %v", bad.StatusCode, bad.Header)
	}
}

// TestChatAPIStreamEndsWhenDisabled: disabling the installation closes
// its streams (within CheckEvery); a removed installation's too.
func TestChatAPIStreamEndsWhenDisabled(t *testing.T) {
	chatapi.CheckEvery = 100 * time.Millisecond
	defer func() { chatapi.CheckEvery = 10 * time.Second }()
	s := newSite(t, map[string]any{})
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{
		s.intID: map[string]any{"enabled": false}}}, 200)
	select {
	case <-st.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a disabled installation stays open")
	}
	if code, _ := s.chat("GET", "/users/me", key, nil); code != 404 {
		t.Fatalf("a disabled installation's Chat API: %d, want 404", code)
	}
}

// TestChatAPIRemovedInstallation: removing the installation ends its
// streams at once (its unregister), not at the next check.
func TestChatAPIRemovedInstallation(t *testing.T) {
	s := newSite(t, map[string]any{})
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{s.intID: nil}}, 200)
	select {
	case <-st.done:
	case <-time.After(chatapi.CheckEvery / 2):
		t.Fatal("the stream of a removed installation stays open")
	}
}

// TestChatAPIStreamKeepsBusy: a stream sends a comment line every
// KeepAlive and "data: ping" every PingEvery.
func TestChatAPIStreamKeepsBusy(t *testing.T) {
	chatapi.PingEvery, chatapi.KeepAlive = 200*time.Millisecond, 50*time.Millisecond
	defer func() { chatapi.PingEvery, chatapi.KeepAlive = 30*time.Second, 3*time.Second }()
	s := newSite(t, map[string]any{})
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := s.listen(key, conv)
	for want := 3; want > 0; {
		select {
		case c := <-st.comments:
			if c == ": ka" {
				want--
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no keep-alive comments")
		}
	}
	select {
	case <-st.pings:
	case <-time.After(5 * time.Second):
		t.Fatal("no ping")
	}
}

// TestChatAPIWebSocketListen: listenConversation({protocol: 'websocket'}):
// the key in the query string, one text message per signal (the JSON of
// an SSE frame's data); a foreign origin or another user's key refused.
func TestChatAPIWebSocketListen(t *testing.T) {
	s := newSite(t, map[string]any{"allowedOrigins": []string{"https://shop.example"}})
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	other := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	wsURL := "ws" + strings.TrimPrefix(s.webhookURL, "http") + "/conversations/" + conv + "/listen?x-user-key="
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	for _, c := range []struct {
		name, key, origin string
		status            int
	}{
		{"another user's key", other, "", 403},
		{"no key", "", "", 401},
		{"an origin not allowed", key, "https://evil.example", 403},
	} {
		h := http.Header{}
		if c.origin != "" {
			h.Set("Origin", c.origin)
		}
		_, res, err := websocket.Dial(ctx, wsURL+url.QueryEscape(c.key), &websocket.DialOptions{HTTPHeader: h})
		if err == nil || res == nil || res.StatusCode != c.status {
			t.Errorf("%s: %v %v, want %d", c.name, err, res, c.status)
		}
	}

	conn, _, err := websocket.Dial(ctx, wsURL+url.QueryEscape(key), &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://shop.example"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "ws"}}, 201)
	var got []string
	for len(got) < 2 {
		_, b, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v (got %v)", err, got)
		}
		var sig struct {
			Type string
			Data struct {
				IsBot   bool
				Payload map[string]any
			}
		}
		if err := json.Unmarshal(b, &sig); err != nil {
			t.Fatalf("a message that is not a signal: %q", b)
		}
		got = append(got, fmt.Sprintf("%s %v %v", sig.Type, sig.Data.IsBot, sig.Data.Payload["text"]))
	}
	if got[0] != "message_created false ws" || got[1] != "message_created true echo: ws" {
		t.Fatalf("signals: %v", got)
	}
}
