package main_test

import (
	"encoding/json"
	"fmt"
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

// TestDeliveriesInOrderAcrossKillDuringRemoval: the local dispatcher sends
// a conversation's next event while the previous one's outbox removal is
// still being made durable (dispatch.finishAside, shared/writelane). The
// real binary is killed with SIGKILL the moment the bot receives the k-th
// of a conversation's acknowledged messages, so the (k-1)-th's removal may
// not be durable yet. After the restart every message reaches the bot,
// each with its one event id (at least once, stable ids), and what is
// delivered again is delivered in order: the bot sees the first life's
// events 1..k in order, then a contiguous run j..n in order, j <= k: the
// k-th, whose delivery the kill interrupted, and before it those whose
// removals were not yet durable (a removal is lost only with every write
// after it: the (j-1)-th's was kept, so all before it were).
func TestDeliveriesInOrderAcrossKillDuringRemoval(t *testing.T) {
	const n, killAt = 24, 10
	var (
		mu     sync.Mutex
		seen   []string // message ids, in order of attempts
		events = map[string]map[string]bool{}
		pid    atomic.Int64
		second atomic.Bool
		gate   = make(chan struct{})
		killed = make(chan struct{})
	)
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event struct {
				ID        string `json:"id"`
				MessageID string `json:"messageId"`
			} `json:"event"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		<-gate // until every message is acknowledged
		mu.Lock()
		seen = append(seen, body.Event.MessageID)
		if events[body.Event.MessageID] == nil {
			events[body.Event.MessageID] = map[string]bool{}
		}
		events[body.Event.MessageID][body.Event.ID] = true
		k := len(seen)
		mu.Unlock()
		if !second.Load() && k >= killAt {
			if k == killAt {
				_ = syscall.Kill(int(pid.Load()), syscall.SIGKILL)
				close(killed)
			}
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer bot.Close()

	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	pid.Store(int64(s.cmd.Process.Pid))
	tok := adminToken(t, dir)
	hdr, conv, user := botConversation(t, s, tok, bot.URL)
	var msgs []string // in the order written
	for i := range n {
		st, m := try(s.url, "POST", "/v1/chat/messages", tok, hdr, map[string]any{
			"conversationId": conv, "userId": user,
			"type": "text", "payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}})
		if st != 201 {
			t.Fatalf("createMessage %d: %d %v", i, st, m)
		}
		msgs = append(msgs, m["message"].(map[string]any)["id"].(string))
	}
	close(gate)
	select {
	case <-killed:
	case <-time.After(60 * time.Second):
		t.Fatalf("the bot did not receive %d events within 60 s", killAt)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed process did not exit")
	}

	second.Store(true)
	mu.Lock()
	firstLife := len(seen)
	mu.Unlock()
	s = start(t, bin, dir)
	defer s.stop(syscall.SIGINT)
	for deadline := time.Now().Add(60 * time.Second); ; {
		mu.Lock()
		last := len(seen) > firstLife && seen[len(seen)-1] == msgs[n-1]
		mu.Unlock()
		if last {
			break
		}
		if time.Now().After(deadline) {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("the last message's event did not reach the bot within 60 s of the restart: %d attempts after it", len(seen)-firstLife)
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen[:firstLife], msgs[:killAt]) {
		t.Fatalf("before the kill: %v, want %v", seen[:firstLife], msgs[:killAt])
	}
	after := seen[firstLife:]
	j := slices.Index(msgs, after[0])
	if j < 0 || j > killAt-1 || !slices.Equal(after, msgs[j:]) {
		t.Fatalf("after the restart the bot got messages %v, want an in-order run from message %d at the latest to the last", indexes(msgs, after), killAt-1)
	}
	for i, m := range msgs {
		if len(events[m]) != 1 {
			t.Fatalf("message %d reached the bot with event ids %v, want one", i, events[m])
		}
	}
	t.Logf("delivered again from message %d (message %d's delivery was interrupted)", j, killAt-1)
}

func indexes(msgs, ids []string) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = slices.Index(msgs, id)
	}
	return out
}
