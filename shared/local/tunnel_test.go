package local_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/local"
)

// The tunnel of `bp dev --tunnelUrl <platform>` in the local platform (the
// server of `go run ./functions/local`, with its connection guard): a Go
// WebSocket client plays the CLI.

// TestTunnelOutlivesConnectionLimits: a tail's WebSocket is not cut by the
// limits on slow and idle connections (here 300 ms), and the runtime's
// dispatcher delivers a user's message to a bot whose url is
// <platform>/<tunnelId>, through the tunnel, as it does to `bp dev`'s bot.
func TestTunnelOutlivesConnectionLimits(t *testing.T) {
	addr, tok := running(t, quick)
	base := "http://" + addr
	const tunnelID = "3b0e7c52-9d4f-4a8e-b1c6-2f5a7d9e0c13"

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws://"+addr+"/"+tunnelID, &websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {"tunnel-client"}}})
	if err != nil {
		t.Fatalf("the tail could not connect: %v", err)
	}
	send := func(v any) {
		b, _ := json.Marshal(v)
		if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
			t.Fatalf("tail write: %v", err)
		}
	}
	// Silent for four times every limit (headers, idle, transfer grace:
	// 300 ms; the CLI says hello every 5 s), then a hello.
	time.Sleep(1200 * time.Millisecond)
	send(map[string]string{"type": "hello"})

	do := caller(t, ctx, base, tok)
	_, bot, hdr := messageToTunnelBot(do, base+"/"+tunnelID, "through the tunnel")

	// The delivery arrives as a request message.
	var req struct {
		Type, ID, Method, Path string
		Headers                map[string]any
		Body                   string
	}
	for req.Type != "request" {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatalf("no delivery through the tunnel: %v", err)
		}
		if err := json.Unmarshal(data, &req); err != nil {
			t.Fatal(err)
		}
	}
	if req.Method != "POST" || req.Path != "/" || req.Headers["x-bp-operation"] != "event_received" ||
		req.Headers["x-bp-type"] != "message_created" || req.Headers["x-bot-id"] != bot ||
		!bytes.Contains([]byte(req.Body), []byte(`"through the tunnel"`)) {
		t.Fatalf("delivery %+v", req)
	}
	send(map[string]any{"type": "response", "requestId": req.ID, "status": 200, "body": "{}"})

	// Delivered: the event ends processed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		evs := do("GET", "/v1/chat/events?type=message_created", hdr, nil, 200)["events"].([]any)
		if len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the event did not end processed: %v", evs)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The platform stops (the test's cleanup) with the tail connected:
	// the tail is told (1001) and the stop does not wait for it.
	go func() {
		for {
			if _, _, err := conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
}

// TestDeliveryWaitsForTheTunnel: while `bp dev` is not connected (not yet,
// or reconnecting), a delivery to its tunnel is answered 502, which the
// dispatcher retries: once the tail connects, the event arrives and ends
// processed (a 4xx would have failed it for good).
func TestDeliveryWaitsForTheTunnel(t *testing.T) {
	addr, tok := running(t, local.Limits{})
	base := "http://" + addr
	const tunnelID = "6c1f0a3e-2b7d-4c9a-8e5f-1d3b7a9c0e24"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	do := caller(t, ctx, base, tok)
	ws, bot, hdr := messageToTunnelBot(do, base+"/"+tunnelID, "before the tail")

	// The first attempt finds no tail: the bot's logs say so (the
	// dispatcher logs every delivery). Then the tail connects.
	since := time.Now().Add(-time.Hour).UTC().Format("2006-01-02T15:04:05.000Z")
	for {
		logs := do("GET", "/v1/admin/bots/"+bot+"/logs?timeStart="+since, map[string]string{"x-workspace-id": ws}, nil, 200)["logs"].([]any)
		failed := false
		for _, l := range logs {
			m, _ := l.(map[string]any)["message"].(string)
			failed = failed || strings.Contains(m, "502") && strings.Contains(m, "no client is connected to tunnel")
		}
		if failed {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no failed attempt in the bot's logs: %v", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if evs := do("GET", "/v1/chat/events?type=message_created", hdr, nil, 200)["events"].([]any); len(evs) != 1 || evs[0].(map[string]any)["status"] != "pending" {
		t.Fatalf("after a 502 the event waits for a retry: %v", evs)
	}
	conn, _, err := websocket.Dial(ctx, "ws://"+addr+"/"+tunnelID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	_, data, err := conn.Read(ctx)
	if err != nil {
		t.Fatalf("the retried delivery did not come through the tunnel: %v", err)
	}
	var req struct{ ID, Body string }
	_ = json.Unmarshal(data, &req)
	if !bytes.Contains([]byte(req.Body), []byte("before the tail")) {
		t.Fatalf("delivery %s", data)
	}
	b, _ := json.Marshal(map[string]any{"type": "response", "requestId": req.ID, "status": 200, "body": "{}"})
	if err := conn.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for {
		evs := do("GET", "/v1/chat/events?type=message_created", hdr, nil, 200)["events"].([]any)
		if len(evs) == 1 && evs[0].(map[string]any)["status"] == "processed" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the event did not end processed: %v", evs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() {
		for {
			if _, _, err := conn.Read(context.Background()); err != nil {
				return
			}
		}
	}()
}

// apiCall is a call of the platform's API: its answer's JSON, the test
// failing on another status than want.
type apiCall func(method, path string, hdr map[string]string, body any, want int) map[string]any

// caller calls the platform at base with token tok.
func caller(t *testing.T, ctx context.Context, base, tok string) apiCall {
	return func(method, path string, hdr map[string]string, body any, want int) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %v", method, path, res.StatusCode, out)
		}
		return out
	}
}

// messageToTunnelBot makes a workspace and a dev bot whose url is url (a
// tunnel of the platform) and writes a user's message to it, which the
// dispatcher then delivers: the workspace, the bot and its Chat headers.
func messageToTunnelBot(do apiCall, url, text string) (ws, bot string, hdr map[string]string) {
	ws = do("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "tunnel"}, 200)["id"].(string)
	bot = do("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws},
		map[string]any{"name": "dev", "dev": true, "url": url}, 200)["bot"].(map[string]any)["id"].(string)
	hdr = map[string]string{"x-bot-id": bot}
	conv := do("POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"]
	user := do("POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"]
	do("POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user,
		"type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201)
	return ws, bot, hdr
}
