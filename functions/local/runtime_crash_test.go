package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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
	bot := newKillBot(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	hdr, conv, user := botConversation(t, s, tok, bot.URL)
	msgID := sendText(t, s, tok, hdr, conv, user, "hi")
	// The first attempt is under way: kill the platform now.
	bot.waitAttempt(t)
	s.stop(syscall.SIGKILL)
	first := bot.seen(false)[0].ID

	bot.up.Store(true)
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
	if ok := bot.seen(true); len(ok) != 1 || ok[0].ID != first {
		t.Fatalf("delivered after the restart: %v, want the same event %s once", ok, first)
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

// killBot is a bot (or an integration) for the kill tests: it records each
// event (or message) it is sent and, until up is set, answers none (each
// request hangs until the platform that made it dies, so the platform is
// killed mid-delivery).
type killBot struct {
	*httptest.Server
	up atomic.Bool
	mu sync.Mutex
	// attempts are every event sent, in order; delivered those sent
	// while up (answered).
	attempts, delivered []sentEvent
}

// sentEvent is an event as the bot got it.
type sentEvent struct{ ID, MessageID string }

func newKillBot(t *testing.T) *killBot {
	k := &killBot{}
	k.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event sentEvent `json:"event"`
			// an integration's message_created: the message
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		if body.Event.ID == "" {
			if body.Message.ID == "" { // an integration's register: not a delivery
				_, _ = io.WriteString(w, "{}")
				return
			}
			body.Event.MessageID = body.Message.ID
		}
		up := k.up.Load()
		k.mu.Lock()
		k.attempts = append(k.attempts, body.Event)
		if up {
			k.delivered = append(k.delivered, body.Event)
		}
		k.mu.Unlock()
		if !up {
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(k.Close)
	return k
}

// seen returns a copy of the attempts (or, with delivered, of the events
// answered).
func (k *killBot) seen(delivered bool) []sentEvent {
	k.mu.Lock()
	defer k.mu.Unlock()
	if delivered {
		return slices.Clone(k.delivered)
	}
	return slices.Clone(k.attempts)
}

// waitAttempt waits until the bot has been sent an event.
func (k *killBot) waitAttempt(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); len(k.seen(false)) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 30 s")
		}
	}
}

// sendText writes a user's text message in conv and returns its id.
func sendText(t *testing.T, s *server, tok string, hdr map[string]string, conv, user, text string) string {
	t.Helper()
	st, m := try(s.url, "POST", "/v1/chat/messages", tok, hdr, map[string]any{
		"conversationId": conv, "userId": user,
		"type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}})
	if st != 201 {
		t.Fatalf("createMessage: %d %v", st, m)
	}
	return m["message"].(map[string]any)["id"].(string)
}
