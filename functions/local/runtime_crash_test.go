package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestDeliveryAcrossKill: a user's message is acknowledged; the real binary
// is killed with SIGKILL while it is delivering it (the bot has not
// answered); after the restart the event is delivered at once (the dead
// process's lease does not hold it back), with the same event id, and ends
// processed.
func TestDeliveryAcrossKill(t *testing.T) {
	var up atomic.Bool
	var mu sync.Mutex
	var seen []string // event ids, in order of attempts
	var okIDs []string
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event struct {
				ID string `json:"id"`
			} `json:"event"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		seen = append(seen, body.Event.ID)
		if up.Load() {
			okIDs = append(okIDs, body.Event.ID)
		}
		mu.Unlock()
		if !up.Load() {
			// Hang until the platform goes away: it dies mid-delivery,
			// holding the delivery's lease.
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer bot.Close()

	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	hdr, conv, user := botConversation(t, s, tok, bot.URL)
	st, m := try(s.url, "POST", "/v1/chat/messages", tok, hdr, map[string]any{
		"conversationId": conv, "userId": user,
		"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}})
	if st != 201 {
		t.Fatalf("createMessage: %d %v", st, m)
	}
	msgID := m["message"].(map[string]any)["id"].(string)
	// The first attempt is under way: kill the platform now.
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.stop(syscall.SIGKILL)
	mu.Lock()
	first := seen[0]
	mu.Unlock()

	up.Store(true)
	s = start(t, bin, dir)
	var status string
	for deadline := time.Now().Add(60 * time.Second); ; {
		_, e := try(s.url, "GET", "/v1/chat/events/"+first, tok, hdr, nil)
		if ev, ok := e["event"].(map[string]any); ok {
			status, _ = ev["status"].(string)
			if ev["messageId"] != msgID {
				t.Fatalf("event %s is not the message's: %v", first, ev)
			}
		}
		if status == "processed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s is %q 60 s after the restart (a dead process's lease lasts minutes)", first, status)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(okIDs) != 1 || okIDs[0] != first {
		t.Fatalf("delivered after the restart: %v, want the same event %s once", okIDs, first)
	}
	s.stop(syscall.SIGINT)
}

// botConversation creates a workspace, a dev bot delivering to botURL, and
// a conversation and a user of it; it returns the bot's header and their
// ids.
func botConversation(t *testing.T, s *server, tok, botURL string) (hdr map[string]string, conv, user string) {
	t.Helper()
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "rt"})
	if st != 200 {
		t.Fatalf("createWorkspace: %d %v", st, w)
	}
	st, b := s.call("POST", "/v1/admin/bots", tok, w["id"].(string), map[string]any{"name": "rt", "dev": true, "url": botURL})
	if st != 200 {
		t.Fatalf("createBot: %d %v", st, b)
	}
	hdr = map[string]string{"x-bot-id": b["bot"].(map[string]any)["id"].(string)}
	st, c := try(s.url, "POST", "/v1/chat/conversations", tok, hdr, map[string]any{"channel": "web", "tags": map[string]string{}})
	if st != 201 {
		t.Fatalf("createConversation: %d %v", st, c)
	}
	st, u := try(s.url, "POST", "/v1/chat/users", tok, hdr, map[string]any{"tags": map[string]string{}})
	if st != 201 {
		t.Fatalf("createUser: %d %v", st, u)
	}
	return hdr, c["conversation"].(map[string]any)["id"].(string), u["user"].(map[string]any)["id"].(string)
}
