package chatapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
)

// TestTraceFromWebhookToBotAndBack: a user's message through the Chat API
// (the built-in integration's webhook, /webhooks/<id>/messages) sent with a
// W3C traceparent: the message_created event reaches the bot's endpoint in
// the same trace (traceparent and X-Amzn-Trace-Id), and the bot's reply,
// sent with the traceparent it got, is answered in that trace too
// (X-Trace-Id).
func TestTraceFromWebhookToBotAndBack(t *testing.T) {
	f := apitest.New(t)
	type seen struct{ traceparent, xray, replyTrace string }
	got := make(chan seen, 10)
	var botID string
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Event struct {
				ConversationID string `json:"conversationId"`
			} `json:"event"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &in)
		if r.Header.Get("x-bp-type") != "message_created" {
			w.WriteHeader(200)
			return
		}
		tp := r.Header.Get("traceparent")
		res := f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: f.AdminToken, Headers: map[string]string{"x-bot-id": botID, "traceparent": tp},
			Body: map[string]any{"conversationId": in.Event.ConversationID, "userId": botID, "type": "text", "payload": map[string]any{"text": "pong"}, "tags": map[string]string{}}})
		w.WriteHeader(200)
		reply := ""
		if res.Status == 201 {
			reply = res.Header.Get("X-Trace-Id")
		}
		got <- seen{tp, r.Header.Get("X-Amzn-Trace-Id"), reply}
	}))
	defer bot.Close()
	adm := func(method, path string, hdr map[string]string, body any) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), 200, "")
	}
	ws := adm("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "trace"}).Str("id")
	botID = adm("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws}, map[string]any{"name": "trace", "dev": true, "url": bot.URL}).Str("bot.id")
	intID := builtin.IntegrationID(chatapi.Name, chatapi.Version)
	adm("PUT", "/v1/admin/bots/"+botID, map[string]string{"x-workspace-id": ws}, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}})
	hook := adm("GET", "/v1/admin/bots/"+botID, map[string]string{"x-workspace-id": ws}, nil).Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)["webhookUrl"].(string)

	chat := func(method, path, key string, hdr map[string]string, body any, want int) apitest.Response {
		t.Helper()
		h := map[string]string{}
		for k, v := range hdr {
			h[k] = v
		}
		if key != "" {
			h["x-user-key"] = key
		}
		return f.Check(f.Do(apitest.Req{Method: method, URL: hook + path, Headers: h, Body: body}), want, "")
	}
	key := chat("POST", "/users", "", nil, map[string]any{}, 201).Body["key"].(string)
	conv := chat("POST", "/conversations", key, nil, map[string]any{}, 201).Body["conversation"].(map[string]any)["id"].(string)
	const trace = "0af7651916cd43dd8448eb211c80319c"
	chat("POST", "/messages", key, map[string]string{"traceparent": "00-" + trace + "-b7ad6b7169203331-01"},
		map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "ping"}}, 201)
	select {
	case s := <-got:
		if !strings.HasPrefix(s.traceparent, "00-"+trace+"-") {
			t.Errorf("the bot's call: traceparent %q, want trace %s", s.traceparent, trace)
		}
		if !strings.HasPrefix(s.xray, "Root=1-"+trace[:8]+"-"+trace[8:]+";") {
			t.Errorf("the bot's call: X-Amzn-Trace-Id %q", s.xray)
		}
		if s.replyTrace != trace {
			t.Errorf("the bot's reply answered in trace %q, want %s", s.replyTrace, trace)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the bot got no message_created within 20 s")
	}
}
