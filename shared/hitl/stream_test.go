package hitl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/hitl"
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
	forged := hitl.Ticket([]byte("another key, not the platform's"), f.ws, "acc", time.Now().Add(time.Minute))
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
