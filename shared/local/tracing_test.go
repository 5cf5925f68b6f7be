package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/local"
)

// syncBuffer is a log destination read while the platform writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(s.b.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// TestOneTraceFromRequestToBotAndBack: a message sent with a W3C
// traceparent (as a webhook's caller or a client sends it) keeps its trace
// id through the outbox into the dispatcher's call to the bot (traceparent
// and X-Amzn-Trace-Id headers), and the bot's reply sent with that header
// is in the same trace; the platform's log lines of both requests carry it,
// and the answers name it (X-Trace-Id). A request without one gets a trace
// of its own, carried the same way.
func TestOneTraceFromRequestToBotAndBack(t *testing.T) {
	logs := &syncBuffer{}
	p, err := local.Open(context.Background(), t.TempDir(), "", slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler)
	t.Cleanup(func() { srv.Close(); p.Close() })
	token := p.FirstToken

	do := func(method, path string, hdr map[string]string, body any) (map[string]any, http.Header) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		if res.StatusCode >= 300 {
			t.Errorf("%s %s: %d %s", method, path, res.StatusCode, raw)
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out, res.Header
	}

	// The bot: records each event's trace headers, and answers a user's
	// message with a reply carrying the traceparent it was given.
	type call struct{ traceparent, xray string }
	calls := make(chan call, 10)
	var botID string
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event struct {
				Type    string `json:"type"`
				Payload struct {
					Message struct {
						ConversationID string `json:"conversationId"`
					} `json:"message"`
				} `json:"payload"`
			} `json:"event"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		ev := body.Event
		calls <- call{r.Header.Get("traceparent"), r.Header.Get("X-Amzn-Trace-Id")}
		if ev.Type == "message_created" {
			do("POST", "/v1/chat/messages", map[string]string{"x-bot-id": botID, "traceparent": r.Header.Get("traceparent")},
				map[string]any{"conversationId": ev.Payload.Message.ConversationID, "userId": botID, "type": "text", "payload": map[string]any{"text": "pong"}, "tags": map[string]string{}})
		}
		w.WriteHeader(200)
	}))
	defer bot.Close()

	ws, _ := do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "trace"})
	b, _ := do("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws["id"].(string)}, map[string]any{"name": "trace", "url": bot.URL, "dev": true})
	botID = b["bot"].(map[string]any)["id"].(string)
	h := map[string]string{"x-bot-id": botID}
	c, _ := do("POST", "/v1/chat/conversations", h, map[string]any{"channel": "web", "tags": map[string]string{}})
	u, _ := do("POST", "/v1/chat/users", h, map[string]any{"tags": map[string]string{}})
	conv, user := c["conversation"].(map[string]any)["id"].(string), u["user"].(map[string]any)["id"].(string)

	send := func(traceparent string) (string, call) {
		t.Helper()
		hdr := map[string]string{"x-bot-id": botID}
		if traceparent != "" {
			hdr["traceparent"] = traceparent
		}
		_, res := do("POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "ping"}, "tags": map[string]string{}})
		select {
		case got := <-calls:
			return res.Get("X-Trace-Id"), got
		case <-time.After(20 * time.Second):
			t.Fatal("the bot was not called within 20 s")
		}
		return "", call{}
	}

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	id, got := send("00-" + trace + "-00f067aa0ba902b7-01")
	if id != trace {
		t.Errorf("X-Trace-Id = %q, want the caller's %s", id, trace)
	}
	if !strings.HasPrefix(got.traceparent, "00-"+trace+"-") || strings.HasSuffix(got.traceparent, "-00f067aa0ba902b7-01") {
		t.Errorf("the bot's traceparent %q: want trace %s with the dispatcher's own span", got.traceparent, trace)
	}
	if !strings.HasPrefix(got.xray, "Root=1-"+trace[:8]+"-"+trace[8:]+";Parent=") {
		t.Errorf("the bot's X-Amzn-Trace-Id %q", got.xray)
	}
	// The bot's reply (an outgoing message: no event to the bot) is in the
	// trace: its request's log line carries the id, as the first's does.
	waitForOK(t, "the request lines of the message and of the bot's reply", func() bool {
		n := 0
		for _, l := range logs.lines() {
			if l["msg"] == "request" && l["path"] == "/v1/chat/messages" && l["traceId"] == trace {
				n++
			}
		}
		return n == 2
	})
	if t.Failed() {
		for _, l := range logs.lines() {
			t.Log(l)
		}
	}

	// Without a traceparent: a trace of its own, carried to the bot.
	id, got = send("")
	if len(id) != 32 || id == trace || !strings.HasPrefix(got.traceparent, "00-"+id+"-") {
		t.Errorf("a fresh trace: X-Trace-Id %q, the bot's traceparent %q", id, got.traceparent)
	}
}

func waitForOK(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Errorf("%s: not within 10 s", what)
			return
		}
	}
}
