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

// TestQueuedDeliveryAcrossKill: the window the sparse sweep index opens
// (docs/runtime.md, "The sparse sweep index"). A conversation's first
// message is at its bot (which does not answer); its second is
// acknowledged and waits behind it in the conversation's outbox shard,
// never attempted, its entry in no sweep index. The real binary is killed
// with SIGKILL. After the restart both go out, in order, each delivered
// once after it: the dispatcher that starts lists the store's outbox
// shards, not the sweep index.
func TestQueuedDeliveryAcrossKill(t *testing.T) {
	var up atomic.Bool
	var mu sync.Mutex
	var attempts, okMsgs, okEvents []string // message ids, event ids
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event struct {
				ID        string `json:"id"`
				MessageID string `json:"messageId"`
			} `json:"event"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		attempts = append(attempts, body.Event.MessageID)
		if up.Load() {
			okMsgs = append(okMsgs, body.Event.MessageID)
			okEvents = append(okEvents, body.Event.ID)
		}
		mu.Unlock()
		if !up.Load() {
			<-r.Context().Done() // hangs until the platform dies
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
	send := func(text string) string {
		t.Helper()
		st, m := try(s.url, "POST", "/v1/chat/messages", tok, hdr, map[string]any{
			"conversationId": conv, "userId": user,
			"type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}})
		if st != 201 {
			t.Fatalf("createMessage: %d %v", st, m)
		}
		return m["message"].(map[string]any)["id"].(string)
	}
	first := send("one")
	// The first is at the bot: the second waits behind it.
	for deadline := time.Now().Add(30 * time.Second); ; {
		mu.Lock()
		n := len(attempts)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no delivery attempt within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := send("two")
	s.stop(syscall.SIGKILL)
	mu.Lock()
	if !slices.Equal(attempts, []string{first}) {
		t.Fatalf("attempts before the kill: %v, want the first message's only", attempts)
	}
	mu.Unlock()

	up.Store(true)
	s = start(t, bin, dir)
	defer s.stop(syscall.SIGINT)
	want := []string{first, second}
	for deadline := time.Now().Add(60 * time.Second); ; {
		mu.Lock()
		got := slices.Clone(okMsgs)
		mu.Unlock()
		if len(got) >= 2 {
			if !slices.Equal(got, want) {
				t.Fatalf("delivered after the restart: %v, want %v (in order, once each)", got, want)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered 60 s after the restart: %v, want %v (the second, queued, is lost)", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Each ends processed (the entries removed once delivered).
	mu.Lock()
	evs := slices.Clone(okEvents)
	mu.Unlock()
	for _, id := range evs {
		for deadline := time.Now().Add(30 * time.Second); ; {
			_, e := try(s.url, "GET", "/v1/chat/events/"+id, tok, hdr, nil)
			ev, _ := e["event"].(map[string]any)
			if ev != nil && ev["status"] == "processed" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("event %s: %v 30 s after its delivery, want processed", id, ev)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
