package webchat_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/webchat"
)

const adminSecret = "a-secret-of-the-site-0123456789"

// site is a bot with the webchat integration installed, and a bot server
// that answers every user message with "echo: <text>".
type site struct {
	t          *testing.T
	f          *apitest.Env
	ws, botID  string
	intID      string
	webhookURL string // = apiUrl + "/" + clientId
}

func newSite(t *testing.T, configuration map[string]any) *site {
	return newSiteOf(t, apitest.New(t), webchat.Version, configuration)
}

// newSiteOf is a site on platform f with the webchat's version installed.
func newSiteOf(t *testing.T, f *apitest.Env, version string, configuration map[string]any) *site {
	s := &site{t: t, f: f, intID: builtin.IntegrationID(webchat.Name, version)}
	s.ws = s.admin("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}, 200).Str("id")
	bot := httptest.NewServer(http.HandlerFunc(s.bot))
	t.Cleanup(bot.Close)
	s.botID = s.admin("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": s.ws}, map[string]any{"name": "echo", "dev": true, "url": bot.URL}, 200).Str("bot.id")
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{
		s.intID: map[string]any{"enabled": true, "configuration": configuration}}}, 200)
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	s.webhookURL = b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)["webhookUrl"].(string)
	return s
}

func (s *site) admin(method, path string, hdr map[string]string, body any, status int) apitest.Response {
	s.t.Helper()
	return s.f.Check(s.f.Do(apitest.Req{Method: method, Path: path, Token: s.f.AdminToken, Headers: hdr, Body: body}), status, "")
}

// bot answers each user's text with an echo.
func (s *site) bot(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Event struct {
			ConversationID string `json:"conversationId"`
			Payload        struct {
				Message struct {
					Payload map[string]any `json:"payload"`
				} `json:"message"`
			} `json:"payload"`
		} `json:"event"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.WriteHeader(200)
	if r.Header.Get("x-bp-type") != "message_created" {
		return
	}
	text, _ := in.Event.Payload.Message.Payload["text"].(string)
	// Answered after the delivery, as a bot does; a reply racing the end
	// of a test is dropped (not a failure of the test that ended).
	b, _ := json.Marshal(map[string]any{"conversationId": in.Event.ConversationID, "userId": s.botID, "type": "text", "payload": map[string]any{"text": "echo: " + text}, "tags": map[string]string{}})
	go func() {
		req, _ := http.NewRequest("POST", s.f.URL+"/v1/chat/messages", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+s.f.AdminToken)
		req.Header.Set("x-bot-id", s.botID)
		req.Header.Set("Content-Type", "application/json")
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
		}
	}()
}

// call calls the Webchat API with a user key and other headers; an error
// must be in the API's shape.
func (s *site) call(method, path, key string, hdr map[string]string, body any) (int, map[string]any) {
	s.t.Helper()
	h := map[string]string{}
	if key != "" {
		h["x-user-key"] = key
	}
	for k, v := range hdr {
		h[k] = v
	}
	r := s.f.Do(apitest.Req{Method: method, URL: s.webhookURL + path, Headers: h, Body: body})
	return r.Status, r.Body
}

func (s *site) must(method, path, key string, body any, status int) map[string]any {
	s.t.Helper()
	got, out := s.call(method, path, key, nil, body)
	if got != status {
		s.t.Fatalf("%s %s: %d %v, want %d", method, path, got, out, status)
	}
	return out
}

// stream is an open /initialize.
type stream struct {
	signals chan map[string]any
	done    chan struct{} // closed when the server ends the stream
}

// initialize opens GET /initialize as the webchat client does (key and
// conversation optional) and answers the stream and its init data.
func (s *site) initialize(key, conv string) (*stream, map[string]any) {
	s.t.Helper()
	u := s.webhookURL + "/initialize"
	if conv != "" {
		u += "?conversationId=" + conv
	}
	req, _ := http.NewRequest("GET", u, nil)
	if key != "" {
		req.Header.Set("x-user-key", key)
	}
	req.Header.Set("timeout", "60000") // as the client sends it
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(res.Body)
		s.t.Fatalf("initialize: %d %s", res.StatusCode, b)
	}
	s.t.Cleanup(func() { res.Body.Close() })
	st := &stream{signals: make(chan map[string]any, 64), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		sc := bufio.NewScanner(res.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "ping" {
				continue
			}
			var sig map[string]any
			if json.Unmarshal([]byte(data), &sig) == nil {
				st.signals <- sig
			}
		}
	}()
	first := st.next(s.t)
	if first["type"] != "init" {
		s.t.Fatalf("first event: %v, want init", first)
	}
	return st, first["data"].(map[string]any)
}

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

// nextOf skips signals until one of type typ.
func (st *stream) nextOf(t *testing.T, typ string) map[string]any {
	t.Helper()
	for {
		if sig := st.next(t); sig["type"] == typ {
			return sig["data"].(map[string]any)
		}
	}
}

// turnOf reads the next two message_created of a turn: the user's own
// message and the bot's reply, in either order. The user's is published
// once its createMessage is answered, and a bot quick enough can have its
// reply published first (docs/chat-api.md, "Order on the stream").
func (st *stream) turnOf(t *testing.T) (own, reply map[string]any) {
	t.Helper()
	for range 2 {
		m := st.nextOf(t, "message_created")
		if m["isBot"] == true {
			if reply != nil {
				t.Fatalf("two bot messages in a turn: %v, %v", reply, m)
			}
			reply = m
		} else {
			if own != nil {
				t.Fatalf("two user messages in a turn: %v, %v", own, m)
			}
			own = m
		}
	}
	return own, reply
}

func str(m map[string]any, path ...string) string {
	var v any = m
	for _, p := range path {
		mm, _ := v.(map[string]any)
		v = mm[p]
	}
	s, _ := v.(string)
	return s
}

// TestWebchatAPI: the webchat component's startup and a conversation,
// through the installation's webhook URL (apiUrl/clientId): /initialize
// with no key (a new user and conversation, init first), conversation
// started (isInitial), a turn with the bot's reply on the stream, the
// history on a new /initialize with the key (isInitial false), feedback,
// an update of the user's own message, typing signals from the bot's
// action, metrics.
func TestWebchatAPI(t *testing.T) {
	s := newSite(t, map[string]any{"adminSecret": adminSecret})
	if !strings.Contains(s.webhookURL, "/webhooks/whk_") {
		t.Fatalf("webhookUrl: %s", s.webhookURL)
	}
	st, init := s.initialize("", "")
	key := str(init, "user", "userKey")
	conv := str(init, "conversation", "id")
	uid := str(init, "user", "id")
	if key == "" || conv == "" || uid == "" || len(init["messages"].([]any)) != 0 {
		t.Fatalf("init: %v", init)
	}
	if ps := init["participants"].([]any); len(ps) != 1 || ps[0].(map[string]any)["id"] != uid {
		t.Fatalf("init participants: %v", ps)
	}
	started := s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "conversation_started", "data": map[string]any{}}}, 201)
	if v := started["event"].(map[string]any)["payload"].(map[string]any)["data"].(map[string]any)["status"].(map[string]any)["isInitial"]; v != true {
		t.Fatalf("conversation_started of a new conversation: %v", started)
	}
	st.nextOf(t, "event_created")

	msg := s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "hello"},
		"metadata": map[string]any{"clientMessageId": "c1"}}, 201)["message"].(map[string]any)
	own, reply := st.turnOf(t)
	if own["id"] != msg["id"] || own["isBot"] != false || str(own, "metadata", "clientMessageId") != "c1" {
		t.Fatalf("the user's message on the stream: %v", own)
	}
	if reply["isBot"] != true || str(reply, "payload", "text") != "echo: hello" || reply["userId"] != s.botID {
		t.Fatalf("the bot's reply: %v", reply)
	}

	// A reload: the same user and conversation, the history in init.
	st2, init2 := s.initialize(key, conv)
	if str(init2, "conversation", "id") != conv || str(init2, "user", "id") != uid || len(init2["messages"].([]any)) != 2 {
		t.Fatalf("init after a reload: %v", init2)
	}
	again := s.must("POST", "/events", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "conversation_started", "data": map[string]any{}}}, 201)
	if v := again["event"].(map[string]any)["payload"].(map[string]any)["data"].(map[string]any)["status"].(map[string]any)["isInitial"]; v != false {
		t.Fatalf("conversation_started of a conversation with messages: %v", again)
	}

	// Feedback on the bot's message: both streams see message_updated.
	s.must("PUT", "/messages/"+str(reply, "id")+"/feedback", key, map[string]any{"value": "positive", "comment": "great"}, 200)
	for _, x := range []*stream{st, st2} {
		up := x.nextOf(t, "message_updated")
		if up["id"] != reply["id"] || str(up, "feedback", "value") != "positive" || str(up, "feedback", "comment") != "great" {
			t.Fatalf("feedback on the stream: %v", up)
		}
	}
	s.must("DELETE", "/messages/"+str(reply, "id")+"/feedback", key, nil, 200)
	if up := st.nextOf(t, "message_updated"); up["feedback"] != nil {
		t.Fatalf("feedback removed: %v", up)
	}

	// The user updates their own message, not the bot's.
	upd := s.must("PUT", "/messages/"+str(msg, "id"), key, map[string]any{"payload": map[string]any{"type": "text", "text": "hello!"}}, 200)["message"].(map[string]any)
	if str(upd, "payload", "text") != "hello!" || str(upd, "metadata", "clientMessageId") != "c1" {
		t.Fatalf("updateMessage: %v", upd)
	}
	if up := st.nextOf(t, "message_updated"); str(up, "payload", "text") != "hello!" {
		t.Fatalf("message_updated: %v", up)
	}

	// The bot types: its action reaches the streams.
	var alias string
	b := s.admin("GET", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, nil, 200)
	inst := b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[s.intID].(map[string]any)
	alias, _ = inst["name"].(string)
	if a, ok := inst["alias"].(string); ok && a != "" {
		alias = a
	}
	var platformConv string
	{
		r := s.admin("GET", "/v1/chat/conversations?integrationName="+alias, map[string]string{"x-bot-id": s.botID}, nil, 200)
		for _, c := range r.Body["conversations"].([]any) {
			platformConv = c.(map[string]any)["id"].(string)
		}
	}
	for _, tc := range []struct{ action, signal string }{{"startTypingIndicator", "typing_started"}, {"stopTypingIndicator", "typing_stopped"}} {
		s.admin("POST", "/v1/chat/actions", map[string]string{"x-bot-id": s.botID}, map[string]any{"type": alias + ":" + tc.action, "input": map[string]any{"conversationId": platformConv}}, 200)
		if d := st.nextOf(t, tc.signal); d["conversationId"] != conv {
			t.Fatalf("%s: %v", tc.signal, d)
		}
	}

	// Metrics are accepted (and dropped).
	s.must("POST", "/p", "", map[string]any{"duration": 12, "event": "load", "properties": map[string]any{}}, 200)
}

// TestWebchatRefusals: bad keys, another user's conversation and message,
// bad bodies, the admin secret, CORS.
func TestWebchatRefusals(t *testing.T) {
	s := newSite(t, map[string]any{"adminSecret": adminSecret, "allowedOrigins": []string{"https://shop.example"}})
	_, a := s.initialize("", "")
	keyA, convA := str(a, "user", "userKey"), str(a, "conversation", "id")
	msgA := s.must("POST", "/messages", keyA, map[string]any{"conversationId": convA, "payload": map[string]any{"type": "text", "text": "mine"}}, 201)["message"].(map[string]any)["id"].(string)
	_, b := s.initialize("", "")
	keyB := str(b, "user", "userKey")
	other := newSite(t, map[string]any{})
	_, o := other.initialize("", "")
	foreign := str(o, "user", "userKey")

	cases := []struct {
		name, method, path, key string
		hdr                     map[string]string
		body                    any
		status                  int
	}{
		{"no key", "POST", "/messages", "", nil, map[string]any{"conversationId": convA, "payload": map[string]any{"type": "text", "text": "x"}}, 401},
		{"a key of another installation", "GET", "/users/me", foreign, nil, nil, 401},
		{"a tampered key", "GET", "/users/me", keyA[:len(keyA)-2] + "xx", nil, nil, 401},
		{"another user's conversation", "POST", "/messages", keyB, nil, map[string]any{"conversationId": convA, "payload": map[string]any{"type": "text", "text": "x"}}, 403},
		{"feedback on another user's message", "PUT", "/messages/" + msgA + "/feedback", keyB, nil, map[string]any{"value": "negative"}, 403},
		{"update of another user's message", "PUT", "/messages/" + msgA, keyB, nil, map[string]any{"payload": map[string]any{"type": "text", "text": "x"}}, 403},
		{"feedback of no value", "PUT", "/messages/" + msgA + "/feedback", keyA, nil, map[string]any{"value": "meh"}, 400},
		{"a message's type changed", "PUT", "/messages/" + msgA, keyA, nil, map[string]any{"payload": map[string]any{"type": "image", "imageUrl": "x"}}, 400},
		{"user key without the admin secret", "POST", "/users/key", "", nil, map[string]any{"id": "alice"}, 401},
		{"user key with a wrong admin secret", "POST", "/users/key", "", map[string]string{"x-admin-secret": "nope"}, map[string]any{"id": "alice"}, 401},
		{"user key of a bad id", "POST", "/users/key", "", map[string]string{"x-admin-secret": adminSecret}, map[string]any{"id": "a b"}, 400},
		{"user key already expired", "POST", "/users/key", "", map[string]string{"x-admin-secret": adminSecret}, map[string]any{"id": "alice", "expiresAt": 1000}, 400},
		{"a file too large", "POST", "/files", keyA, nil, map[string]any{"key": "big.bin", "size": webchat.MaxFileSize + 1}, 413},
		{"a file with no name", "POST", "/files", keyA, nil, map[string]any{"key": "", "size": 3}, 400},
		{"a file without a key", "POST", "/files", "", nil, map[string]any{"key": "a.txt", "size": 3}, 401},
		{"preflight of an origin not allowed", "OPTIONS", "/messages", "", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}, nil, 403},
		{"an unknown route", "GET", "/nothing/here", keyA, nil, nil, 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got, out := s.call(tc.method, tc.path, tc.key, tc.hdr, tc.body); got != tc.status {
				t.Fatalf("%d %v, want %d", got, out, tc.status)
			}
		})
	}
	// No admin secret configured: POST /users/key is refused.
	if got, _ := other.call("POST", "/users/key", "", map[string]string{"x-admin-secret": adminSecret}, map[string]any{"id": "alice"}); got != 403 {
		t.Fatalf("users/key without adminSecret configured: %d", got)
	}

	// An allowed origin's preflight names the client's headers.
	req, _ := http.NewRequest("OPTIONS", s.webhookURL+"/initialize", nil)
	req.Header.Set("Origin", "https://shop.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "https://shop.example" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "timeout") || !strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "x-user-key") {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
}

// TestWebchatUserKey: a site that signs its users in makes their keys with
// the admin secret; the webchat then runs as that user.
func TestWebchatUserKey(t *testing.T) {
	s := newSite(t, map[string]any{"adminSecret": adminSecret})
	got, out := s.call("POST", "/users/key", "", map[string]string{"x-admin-secret": adminSecret},
		map[string]any{"id": "alice", "expiresAt": time.Now().Add(time.Hour).UnixMilli()})
	if got != 200 {
		t.Fatalf("users/key: %d %v", got, out)
	}
	_, init := s.initialize(out["key"].(string), "")
	if str(init, "user", "id") != "alice" || str(init, "user", "userKey") != out["key"] {
		t.Fatalf("init as alice: %v", init)
	}
}

// TestWebchatFile: an upload as the component does it: POST /files, a PUT
// of the bytes to the presigned URL (x-amz-tagging as the component sends
// it), then the file's url serves them, and a file message carries it.
func TestWebchatFile(t *testing.T) {
	s := newSite(t, map[string]any{})
	st, init := s.initialize("", "")
	key, conv := str(init, "user", "userKey"), str(init, "conversation", "id")
	content := []byte("hello, file")
	out := s.must("POST", "/files", key, map[string]any{"size": len(content), "key": "abc123-notes.txt", "accessPolicies": []string{"public_content"},
		"index": false, "tags": map[string]any{"source": "integration", "integrationName": "webchat", "conversation": conv, "user": str(init, "user", "id")},
		"expiresAt": time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)}, 201)
	file := out["file"].(map[string]any)
	up, ct, fileURL := str(file, "uploadUrl"), str(file, "contentType"), str(file, "url")
	if up == "" || fileURL == "" || file["id"] == nil || !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("createFile: %v", out)
	}
	req, _ := http.NewRequest("PUT", up, bytes.NewReader(content))
	req.Header.Set("x-amz-tagging", "public=true")
	req.Header.Set("content-type", ct)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	eb, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("PUT to the upload url: %d %s", res.StatusCode, eb)
	}
	got, err := http.Get(fileURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(got.Body)
	got.Body.Close()
	if got.StatusCode != 200 || !bytes.Equal(b, content) {
		t.Fatalf("GET the file's url: %d %q", got.StatusCode, b)
	}
	s.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "file", "fileUrl": fileURL, "title": "notes.txt"}}, 201)
	if m := st.nextOf(t, "message_created"); str(m, "payload", "fileUrl") != fileURL {
		t.Fatalf("the file message: %v", m)
	}
}

// TestWebchatPage: getBotWebchat answers the hosted page's URL and embed
// codes; the page loads only assets of its own origin, each served, with
// the checksums of the vendored packages, under a strict CSP, and holds no
// secret.
func TestWebchatPage(t *testing.T) {
	s := newSite(t, map[string]any{"adminSecret": adminSecret})
	hdr := map[string]string{"x-workspace-id": s.ws}
	page := s.admin("GET", "/v1/admin/bots/"+s.botID+"/webchat?type=sharableUrl", hdr, nil, 200).Str("code")
	if page != s.webhookURL+"/" {
		t.Fatalf("sharableUrl: %q, want %q", page, s.webhookURL+"/")
	}
	for _, typ := range []string{"preconfigured", "fullscreen"} {
		if code := s.admin("GET", "/v1/admin/bots/"+s.botID+"/webchat?type="+typ, hdr, nil, 200).Str("code"); !strings.Contains(code, `<iframe src="`+page+`"`) {
			t.Fatalf("%s: %s", typ, code)
		}
	}
	clientID := s.webhookURL[strings.LastIndexByte(s.webhookURL, '/')+1:]
	if code := s.admin("GET", "/v1/admin/bots/"+s.botID+"/webchat?type=configurable", hdr, nil, 200).Str("code"); !strings.Contains(code, `clientId="`+clientID+`"`) || !strings.Contains(code, `apiUrl="`+s.f.URL+`/webhooks"`) {
		t.Fatalf("configurable: %s", code)
	}

	res, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	csp := res.Header.Get("Content-Security-Policy")
	if res.StatusCode != 200 || !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "script-src 'self';") || !strings.Contains(csp, "connect-src 'self';") {
		t.Fatalf("page: %d CSP %q", res.StatusCode, csp)
	}
	html := string(body)
	if strings.Contains(html, adminSecret) || !strings.Contains(html, `data-client-id="`+clientID+`"`) || !strings.Contains(html, `data-api-url="`+s.f.URL+`/webhooks"`) {
		t.Fatalf("page: %s", html)
	}
	// Every src and href: this origin, served.
	var refs []string
	for _, attr := range []string{`src="`, `href="`} {
		for rest := html; ; {
			i := strings.Index(rest, attr)
			if i < 0 {
				break
			}
			rest = rest[i+len(attr):]
			refs = append(refs, rest[:strings.IndexByte(rest, '"')])
		}
	}
	if len(refs) != 8 {
		t.Fatalf("page references %d assets: %v", len(refs), refs)
	}
	sums := readSums(t)
	for _, ref := range refs {
		if !strings.HasPrefix(ref, "/webhooks/"+clientID+"/assets/") {
			t.Fatalf("asset %q is not of this installation's origin and path", ref)
		}
		r, err := http.Get(s.f.URL + ref)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || len(b) == 0 || r.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Fatalf("asset %s: %d", ref, r.StatusCode)
		}
		name := strings.TrimPrefix(ref, "/webhooks/"+clientID+"/assets/")
		name, _, _ = strings.Cut(name, "?")
		if want, vendored := sums[name]; vendored && sha256hex(b) != want {
			t.Fatalf("vendored %s: sha256 %s, SHA256SUMS says %s", name, sha256hex(b), want)
		}
		if strings.Contains(string(b), "fonts.googleapis.com") && name != "webchat.js" {
			t.Fatalf("%s names a font of another origin", name)
		}
	}
	if len(sums) != 4 {
		t.Fatalf("SHA256SUMS: %v", sums)
	}
	if got, _ := s.call("GET", "/assets/nothing.js", "", nil, nil); got != 404 {
		t.Fatalf("unknown asset: %d", got)
	}
}

// TestWebchatRemovedInstallation: removing the installation ends its
// /initialize streams at once, and its API and page answer 404.
func TestWebchatRemovedInstallation(t *testing.T) {
	s := newSite(t, map[string]any{})
	st, _ := s.initialize("", "")
	s.admin("PUT", "/v1/admin/bots/"+s.botID, map[string]string{"x-workspace-id": s.ws}, map[string]any{"integrations": map[string]any{s.intID: nil}}, 200)
	select {
	case <-st.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream of a removed installation stays open")
	}
	if got, _ := s.call("GET", "/initialize", "", nil, nil); got != 404 {
		t.Fatalf("initialize after removal: %d", got)
	}
	if got, _ := s.call("GET", "/", "", nil, nil); got != 404 {
		t.Fatalf("the page after removal: %d", got)
	}
}

// TestWebchatPageStreamURL: where another host serves the streams
// (PLATFORM_CHAT_STREAM_URL; on AWS the stack's ChatStreamUrl, as API
// Gateway cannot hold the component's /initialize stream), getBotWebchat's
// page and embed codes are there, the webhook URL's page redirects there,
// and there the page, its Webchat API and its stream share that origin
// (CSP connect-src 'self'); the component's startup and a turn go through
// that host (here a proxy standing for it, counting what it serves).
func TestWebchatPageStreamURL(t *testing.T) {
	var target atomic.Pointer[url.URL]
	var through atomic.Int64
	streams := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		through.Add(1)
		p := httputil.NewSingleHostReverseProxy(target.Load())
		p.FlushInterval = -1
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(streams.Close)
	t.Setenv("PLATFORM_CHAT_STREAM_URL", streams.URL+"/")
	s := newSite(t, map[string]any{"adminSecret": adminSecret})
	u, _ := url.Parse(s.f.URL)
	target.Store(u)
	clientID := s.webhookURL[strings.LastIndexByte(s.webhookURL, '/')+1:]
	page := streams.URL + "/webhooks/" + clientID + "/"

	hdr := map[string]string{"x-workspace-id": s.ws}
	if got := s.admin("GET", "/v1/admin/bots/"+s.botID+"/webchat?type=sharableUrl", hdr, nil, 200).Str("code"); got != page {
		t.Fatalf("sharableUrl: %q, want %q", got, page)
	}
	if code := s.admin("GET", "/v1/admin/bots/"+s.botID+"/webchat?type=configurable", hdr, nil, 200).Str("code"); !strings.Contains(code, `apiUrl="`+streams.URL+`/webhooks"`) {
		t.Fatalf("configurable: %s", code)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(s.webhookURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusFound || res.Header.Get("Location") != page {
		t.Fatalf("the webhook URL's page: %d Location %q, want 302 to %s", res.StatusCode, res.Header.Get("Location"), page)
	}
	if n := through.Load(); n != 0 {
		t.Fatalf("%d requests through the streams' host before the page's", n)
	}

	res, err = noRedirect.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); res.StatusCode != 200 || !strings.Contains(csp, "connect-src 'self';") {
		t.Fatalf("page: %d CSP %q", res.StatusCode, csp)
	}
	if html := string(body); !strings.Contains(html, `data-api-url="`+streams.URL+`/webhooks"`) || !strings.Contains(html, `data-client-id="`+clientID+`"`) {
		t.Fatalf("page: %s", html)
	}

	// The component: apiUrl/clientId.
	c := *s
	c.webhookURL = streams.URL + "/webhooks/" + clientID
	before := through.Load()
	st, init := c.initialize("", "")
	key, conv := str(init, "user", "userKey"), str(init, "conversation", "id")
	c.must("POST", "/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "hello"}}, 201)
	if _, reply := st.turnOf(t); reply["isBot"] != true || str(reply, "payload", "text") != "echo: hello" {
		t.Fatalf("the bot's reply: %v", reply)
	}
	if n := through.Load() - before; n != 2 {
		t.Fatalf("%d requests through the streams' host, want the stream and the message", n)
	}
}
