package chatrelay_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/hitl"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/runtime"
)

// TestHitlInboxAcrossFunctions: the inbox's live updates as on AWS
// (docs/hitl.md "Live updates"): the admin function issues the stream
// ticket, whose url is the streaming function's; the streaming function
// serves the inbox stream with it (and refuses a bad ticket); a session
// started through the Chat function and a note written through the admin
// function reach the stream through the table and the fan-out.
func TestHitlInboxAcrossFunctions(t *testing.T) {
	fast(t)
	c := newCloud(t, time.Minute)
	f := c.f
	key := bytes.Repeat([]byte{7}, 32)
	area := func(hub chatapi.Hub, streamURL string, a httpapi.Area) http.Handler {
		return httpapi.New(httpapi.Config{Store: f.Platform.Store, PagingKey: key, ChatStreamURL: streamURL,
			Builtins: runtime.BuiltinsWith(hub, nil, f.Platform.Store, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, a)
	}
	streamRelay := chatrelay.New(c.db, c.table, nil)
	stream := httptest.NewServer(functionURL(streamRelay.Streaming(area(streamRelay, "", httpapi.AreaChat)), c.timeout))
	t.Cleanup(stream.Close)
	chatFn := httptest.NewServer(area(chatrelay.New(c.db, c.table, nil), stream.URL+"/", httpapi.AreaChat))
	t.Cleanup(chatFn.Close)
	adminFn := httptest.NewServer(area(chatrelay.New(c.db, c.table, nil), stream.URL+"/", httpapi.AreaAdmin))
	t.Cleanup(adminFn.Close)

	do := func(base, method, path string, hdr map[string]string, body any, want int) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, URL: base + path, Token: f.AdminToken, Headers: hdr, Body: body}), want, "")
	}
	ws := do(f.URL, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "desk"}, 200).Str("id")
	wsh := map[string]string{"x-workspace-id": ws}
	bot := do(f.URL, "POST", "/v1/admin/bots", wsh, map[string]any{"name": "b"}, 200).Str("bot.id")
	do(f.URL, "PUT", "/v1/admin/bots/"+bot, wsh, map[string]any{"integrations": map[string]any{
		builtin.IntegrationID(hitl.Name, hitl.Version): map[string]any{"enabled": true, "configuration": map[string]any{}}}}, 200)

	tk := do(adminFn.URL, "POST", "/v1/admin/workspaces/"+ws+"/hitl/stream-ticket", nil, nil, 200)
	u := tk.Str("url")
	if !strings.HasPrefix(u, stream.URL+"/v1/chat/hitl/workspaces/"+ws+"/stream?ticket=") {
		t.Fatalf("the ticket's url is not the stream host's: %s", tk.Raw)
	}
	bad := f.Do(apitest.Req{Method: "GET", URL: stream.URL + "/v1/chat/hitl/workspaces/" + ws + "/stream?ticket=" + tk.Str("ticket") + "x"})
	f.Check(bad, 401, "")

	res, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("inbox stream on the streaming function: %d %v", res.StatusCode, res.Header)
	}
	events := make(chan map[string]string, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var m map[string]string
				_ = json.Unmarshal([]byte(d), &m)
				events <- m
			}
		}
	}()
	waitFor(t, func() bool { return len(c.holders(hitl.Topic(ws))) == 1 }, "the streaming invocation holding the inbox topic")
	next := func(id, change string) {
		t.Helper()
		timeout := time.After(10 * time.Second)
		for {
			select {
			case m, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended before %s", change)
				}
				if m["change"] == change && (id == "" || m["sessionId"] == id) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s event on the streaming function's inbox stream", change)
			}
		}
	}

	bh := map[string]string{"x-bot-id": bot}
	uid := do(chatFn.URL, "POST", "/v1/chat/actions", bh, map[string]any{"type": "hitl:createUser", "input": map[string]any{"name": "Ada"}}, 200).Str("output.userId")
	sent := time.Now()
	conv := do(chatFn.URL, "POST", "/v1/chat/actions", bh, map[string]any{"type": "hitl:startHitl", "input": map[string]any{"userId": uid, "messageHistory": []any{}}}, 200).Str("output.conversationId")
	next(conv, "started")
	t.Logf("startHitl in the Chat function -> on the streaming function's inbox stream: %s (poll every %s)", time.Since(sent), chatrelay.PollEvery)

	sent = time.Now()
	do(adminFn.URL, "POST", "/v1/admin/workspaces/"+ws+"/hitl/sessions/"+bot+"/"+conv+"/notes", nil, map[string]any{"text": "vip"}, 200)
	next(conv, "note")
	t.Logf("a note in the admin function -> on the stream: %s", time.Since(sent))
}
