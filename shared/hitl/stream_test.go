package hitl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/signin"
)

// inboxStream is an SSE client of a workspace's inbox stream: each event's
// data, in order.
type inboxStream struct {
	events chan map[string]string
	cancel context.CancelFunc
}

func openInbox(t *testing.T, url string) *inboxStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Origin", "https://console.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		cancel()
		t.Fatalf("inbox stream: %d %v", resp.StatusCode, resp.Header)
	}
	s := &inboxStream{events: make(chan map[string]string, 100), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer resp.Body.Close()
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && event == "inbox":
				var m map[string]string
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m)
				s.events <- m
			case line == "":
				event = ""
			}
		}
	}()
	return s
}

// next waits for the event of session id's change (others are skipped).
func (s *inboxStream) next(t *testing.T, id, change string) time.Time {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before %s of %s", change, id)
			}
			if m["sessionId"] == id && m["change"] == change {
				return time.Now()
			}
		case <-timeout:
			t.Fatalf("no %s event of %s on the inbox stream", change, id)
		}
	}
}

func (f *fixture) ticket(tok, ws string) apitest.Response {
	f.t.Helper()
	return f.as(tok, "POST", "/v1/admin/workspaces/"+ws+"/hitl/stream-ticket", nil, nil)
}

// TestHitlInboxStream: a member's ticket opens the workspace's inbox
// stream, which tells of every change of a session (started, the user's
// message, assigned, a reply, a note, closed) as it happens; the
// stream carries no transcript.
func TestHitlInboxStream(t *testing.T) {
	f := newFixture(t)
	tk := f.Check(f.ticket(f.AdminToken, f.ws), 200, "")
	u := tk.Str("url")
	if !strings.HasPrefix(u, "/v1/chat/hitl/workspaces/"+f.ws+"/stream?ticket=") || tk.Str("expiresAt") == "" {
		t.Fatalf("ticket: %s", tk.Raw)
	}
	s := openInbox(t, f.URL+u)

	uid := f.action("hitl:createUser", map[string]any{"name": "Ada"})["userId"].(string)
	conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "title": "secret title", "messageHistory": []any{}})["conversationId"].(string)
	s.next(t, conv, "started")
	sp := f.sesses + "/" + f.bot + "/" + conv

	// The bot relays the user's message: it reaches the integration
	// through the dispatcher; the event follows it.
	sent := time.Now()
	f.ok("POST", "/v1/chat/messages", f.bh, map[string]any{"conversationId": conv, "userId": f.bot, "type": "text",
		"payload": map[string]any{"text": "are you there?", "userId": uid}, "tags": map[string]string{}}, 201)
	got := s.next(t, conv, "message")
	t.Logf("the user's relayed message on the inbox stream %v after it was sent", got.Sub(sent))
	if un := f.ok("GET", f.sesses, nil, nil, 200).List("sessions")[0].(map[string]any)["unread"]; un != 1.0 {
		t.Fatalf("after the event, the list says unread %v", un)
	}

	f.ok("POST", sp+"/assign", nil, map[string]any{}, 200)
	s.next(t, conv, "assigned")
	f.ok("POST", sp+"/messages", nil, map[string]any{"type": "text", "payload": map[string]any{"text": "hello"}}, 200)
	s.next(t, conv, "reply")
	f.ok("POST", sp+"/notes", nil, map[string]any{"text": "vip"}, 200)
	s.next(t, conv, "note")
	f.ok("POST", sp+"/close", nil, nil, 200)
	s.next(t, conv, "closed")
}

// TestHitlInboxStreamTicket: the stream opens only with a valid ticket of
// its workspace's member, within its lifetime; a bot key or an end user
// gets no ticket; refusals are in the API's error shape.
func TestHitlInboxStreamTicket(t *testing.T) {
	f := newFixture(t)
	otherWS := f.ok("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "other"}, 200).Str("id")
	f.ok("POST", "/v1/admin/workspace-members", map[string]string{"x-workspace-id": f.ws}, map[string]any{"email": "viewer@example.com", "role": "viewer"}, 200)
	viewer := f.AccountToken("viewer@example.com")
	f.ok("POST", "/v1/admin/workspace-members", map[string]string{"x-workspace-id": otherWS}, map[string]any{"email": "out@example.com", "role": "owner"}, 200)
	outsider := f.AccountToken("out@example.com")
	botKey := f.ok("POST", "/v1/admin/bots/baks", f.wsh, map[string]any{"botId": f.bot}, 200).Str("value")

	// Who gets a ticket for f.ws.
	f.Check(f.ticket(viewer, f.ws), 200, "") // a viewer reads: any member
	for _, c := range []struct {
		name, tok string
		want      int
	}{{"another workspace's member", outsider, 404}, {"a bot key", botKey, 403}, {"no token", "", 401}} {
		if r := f.ticket(c.tok, f.ws); r.Status != c.want && !(c.want == 404 && r.Status == 403) {
			t.Errorf("%s: ticket answered %d %s", c.name, r.Status, r.Raw)
		}
	}

	path := "/v1/chat/hitl/workspaces/" + f.ws + "/stream?ticket="
	good := f.Check(f.ticket(f.AdminToken, f.ws), 200, "").Str("ticket")
	foreign := f.Check(f.ticket(outsider, otherWS), 200, "").Str("ticket")
	// A ticket past its lifetime: issued with a lifetime already over.
	hitl.TicketTTL = -time.Second
	expired := f.Check(f.ticket(f.AdminToken, f.ws), 200, "").Str("ticket")
	hitl.TicketTTL = time.Minute
	forged := hitl.Ticket([]byte("another key, not the platform's"), f.ws, "acc", "p:x", time.Now().Add(time.Minute))
	for _, c := range []struct {
		name, ticket string
		want         int
	}{
		{"none", "", 401},
		{"garbage", "abc", 401},
		{"tampered", good[:len(good)-2] + "AA", 401},
		{"forged", forged, 401},
		{"expired", expired, 401},
		{"another workspace's", foreign, 403},
	} {
		r := f.Do(apitest.Req{Method: "GET", Path: path + c.ticket})
		f.Check(r, c.want, "") // checks the error shape too
		if r.Status != c.want {
			t.Errorf("%s ticket: %d %s", c.name, r.Status, r.Raw)
		}
	}
	// A member removed since the ticket was issued opens nothing.
	vt := f.Check(f.ticket(viewer, f.ws), 200, "").Str("ticket")
	vid := f.Check(f.as(viewer, "GET", "/v1/admin/workspace-members/me", f.wsh, nil), 200, "").Str("id")
	f.ok("DELETE", "/v1/admin/workspace-members/"+vid, f.wsh, nil, 200)
	if r := f.Do(apitest.Req{Method: "GET", Path: path + vt}); r.Status != 403 {
		t.Errorf("a removed member's ticket: %d %s", r.Status, r.Raw)
	}
}

// ended waits until the stream ends (the server closed it), at most
// within; it answers how long it took.
func (s *inboxStream) ended(t *testing.T, what string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(within)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return time.Since(start)
			}
		case <-timeout:
			t.Fatalf("%s: the inbox stream still open after %v", what, within)
		}
	}
}

// streamStatus opens url and answers the status of its answer (the
// stream, if one opened, is closed at once).
func streamStatus(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// openInboxStreams reads the platform's open-streams gauge of inbox
// streams (/metrics).
func openInboxStreams(t *testing.T) int {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.RemoteAddr = "127.0.0.1:1"
	metrics.Handler().ServeHTTP(rec, req)
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		if v, ok := strings.CutPrefix(line, `platform_open_streams{transport="inbox"} `); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metrics: %q", line)
			}
			return int(n)
		}
	}
	return 0
}

// TestHitlInboxNotServed: a platform that does not serve the hitl
// integration says so in the ticket's answer (200, served false, a
// reason; no ticket, no url): the console polls instead of opening a
// stream that would be refused.
func TestHitlInboxNotServed(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "chat")
	e := apitest.New(t)
	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "w"}}), 200, "").Str("id")
	r := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces/" + ws + "/hitl/stream-ticket", Token: e.AdminToken}), 200, "")
	if r.Body["served"] != false || !strings.Contains(r.Str("reason"), "PLATFORM_BUILTINS") || r.Body["ticket"] != nil || r.Body["url"] != nil {
		t.Fatalf("ticket without hitl: %s", r.Raw)
	}
	// The agent API still answers (an empty inbox).
	l := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + ws + "/hitl/sessions", Token: e.AdminToken}), 200, "")
	if len(l.List("sessions")) != 0 {
		t.Fatalf("sessions: %s", l.Raw)
	}
	// A served platform says served: true.
	t.Setenv("PLATFORM_BUILTINS", "all")
	f := newFixture(t)
	if r := f.Check(f.ticket(f.AdminToken, f.ws), 200, ""); r.Body["served"] != true {
		t.Fatalf("ticket with hitl: %s", r.Raw)
	}
}

// TestHitlInboxStreamCut: an open inbox stream ends within
// hitl.StreamCheckEvery when its member is removed from the workspace,
// when the personal access token that asked for its ticket is revoked,
// and when the sign-in session that asked for it ends.
func TestHitlInboxStreamCut(t *testing.T) {
	old := hitl.StreamCheckEvery
	hitl.StreamCheckEvery = 100 * time.Millisecond
	t.Cleanup(func() { hitl.StreamCheckEvery = old })
	const bound = 5 * time.Second // the check's period, with room for a loaded machine
	f := newFixture(t)
	open := func(tok string, hdr map[string]string) *inboxStream {
		t.Helper()
		r := f.Check(f.as(tok, "POST", "/v1/admin/workspaces/"+f.ws+"/hitl/stream-ticket", hdr, nil), 200, "")
		return openInbox(t, f.URL+r.Str("url"))
	}

	// A member removed.
	f.ok("POST", "/v1/admin/workspace-members", f.wsh, map[string]any{"email": "agent@example.com", "role": "developer"}, 200)
	agent := f.AccountToken("agent@example.com")
	s := open(agent, nil)
	kept := open(f.AdminToken, nil) // another member's stream stays
	mid := f.Check(f.as(agent, "GET", "/v1/admin/workspace-members/me", f.wsh, nil), 200, "").Str("id")
	f.ok("DELETE", "/v1/admin/workspace-members/"+mid, f.wsh, nil, 200)
	t.Logf("removed member's stream ended %v after the removal", s.ended(t, "member removed", bound))

	// A token revoked: a second token of the admin's asks for the ticket.
	pat := f.ok("POST", "/v1/admin/account/pats", nil, map[string]any{"note": "inbox"}, 200)
	s = open(pat.Str("pat.value"), nil)
	f.ok("DELETE", "/v1/admin/account/pats/"+pat.Str("pat.id"), nil, nil, 200)
	t.Logf("revoked token's stream ended %v after the revocation", s.ended(t, "token revoked", bound))

	// A sign-in session ended (sign-out): the console's own credential.
	b, err := os.ReadFile(filepath.Join(f.DataDir, "setup-link"))
	if err != nil {
		t.Fatal(err)
	}
	link := strings.TrimSpace(string(b))
	tok := link[strings.Index(link, "/#/setup/")+len("/#/setup/"):]
	in := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/auth/links/" + tok, Body: map[string]any{"password": "correct horse battery"}}), 200, "")
	var cookie string
	for _, c := range (&http.Response{Header: in.Header}).Cookies() {
		if c.Name == signin.CookieName {
			cookie = c.Value
		}
	}
	sh := map[string]string{"Cookie": signin.CookieName + "=" + cookie, signin.CSRFHeader: in.Str("csrfToken"), "x-workspace-id": f.ws}
	s = open("", sh)
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/auth/signout", Headers: sh}), 200, "")
	t.Logf("ended session's stream ended %v after the sign-out", s.ended(t, "session ended", bound))

	// The admin's own stream was never cut.
	select {
	case _, ok := <-kept.events:
		if !ok {
			t.Fatal("the other member's stream ended too")
		}
	default:
	}
}

// TestHitlInboxStreamLimits: inbox streams are held in the platform's
// shared limits (per member in a workspace, per workspace), refused 429
// past them in the API's error shape, given back when a stream ends, and
// counted in platform_open_streams{transport="inbox"}.
func TestHitlInboxStreamLimits(t *testing.T) {
	pm, pw := hitl.MaxStreamsPerMember, hitl.MaxStreamsPerWorkspace
	hitl.MaxStreamsPerMember, hitl.MaxStreamsPerWorkspace = 2, 3
	t.Cleanup(func() { hitl.MaxStreamsPerMember, hitl.MaxStreamsPerWorkspace = pm, pw })
	f := newFixture(t)
	f.ok("POST", "/v1/admin/workspace-members", f.wsh, map[string]any{"email": "v@example.com", "role": "viewer"}, 200)
	viewer := f.AccountToken("v@example.com")
	url := func(tok string) string {
		return f.URL + f.Check(f.ticket(tok, f.ws), 200, "").Str("url")
	}
	before := openInboxStreams(t)
	a1, a2 := openInbox(t, url(f.AdminToken)), openInbox(t, url(f.AdminToken))
	_ = a2
	if n := openInboxStreams(t) - before; n != 2 {
		t.Fatalf("open inbox streams: %d more, want 2", n)
	}
	// The member's third: refused (a ticket opens several streams, the
	// limit bounds them).
	au := url(f.AdminToken)
	if st := streamStatus(t, au); st != 429 {
		t.Fatalf("the member's third stream: %d", st)
	}
	r := f.Do(apitest.Req{Method: "GET", Path: au[len(f.URL):]})
	f.Check(r, 429, "")
	if !strings.Contains(r.Str("message"), "limit per member") {
		t.Fatalf("refusal: %s", r.Raw)
	}
	// Another member: one more, then the workspace is full.
	openInbox(t, url(viewer))
	r = f.Do(apitest.Req{Method: "GET", Path: url(viewer)[len(f.URL):]})
	f.Check(r, 429, "")
	if !strings.Contains(r.Str("message"), "limit per workspace") {
		t.Fatalf("refusal: %s", r.Raw)
	}
	if n := openInboxStreams(t) - before; n != 3 {
		t.Fatalf("open inbox streams: %d more, want 3", n)
	}
	// A stream closed gives its slot back.
	a1.cancel()
	deadline := time.Now().Add(10 * time.Second)
	for streamStatus(t, url(viewer)) != 200 {
		if time.Now().After(deadline) {
			t.Fatal("the closed stream's slot never came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
