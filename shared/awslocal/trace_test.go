package awslocal_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
)

// TestSpansToXRayDaemon: the stack run whole as `make aws-local` runs it,
// its functions exporting their spans to the X-Ray daemon's stand-in as
// they do on Lambda (OTLP over UDP, TraceExport xray). A user's message
// through the API Gateway stand-in → the chat function → the table's
// stream → the dispatcher → the bot's process → the bot's reply call:
// every span of every function is in the one trace, and each names its
// parent: the caller's span, the chat function's request, the dispatcher's
// delivery (the bot's traceparent), the DynamoDB calls within each.
func TestSpansToXRayDaemon(t *testing.T) {
	s := startStackWith(t, awslocal.Options{})
	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "traces"}, 200)["id"].(string)

	// The bot's process: answers a user's message with a reply sent with
	// the traceparent it was given (as the platform's bot SDKs carry it).
	type given struct{ traceparent, xray string }
	calls := make(chan given, 10)
	var botID string
	reply := func(conv, traceparent string) {
		b, _ := json.Marshal(map[string]any{"conversationId": conv, "userId": botID, "type": "text", "payload": map[string]any{"text": "pong"}, "tags": map[string]string{}})
		req, _ := http.NewRequest("POST", s.URL+"/v1/chat/messages", bytes.NewReader(b))
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-bot-id", botID)
		req.Header.Set("traceparent", traceparent)
		if res, err := http.DefaultClient.Do(req); err != nil {
			t.Errorf("the bot's reply: %v", err)
		} else if res.Body.Close(); res.StatusCode != 201 {
			t.Errorf("the bot's reply: %d", res.StatusCode)
		}
	}
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Event struct {
				Type    string `json:"type"`
				Payload struct {
					Message struct {
						ConversationID string `json:"conversationId"`
						UserID         string `json:"userId"`
					} `json:"message"`
				} `json:"payload"`
			} `json:"event"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		calls <- given{r.Header.Get("traceparent"), r.Header.Get("X-Amzn-Trace-Id")}
		if m := body.Event.Payload.Message; body.Event.Type == "message_created" && m.UserID != botID {
			reply(m.ConversationID, r.Header.Get("traceparent"))
		}
		w.WriteHeader(200)
	}))
	defer bot.Close()
	botID = s.call(t, "POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws}, map[string]any{"name": "traces", "url": bot.URL}, 200)["bot"].(map[string]any)["id"].(string)
	hdr := map[string]string{"x-bot-id": botID}
	conv := s.call(t, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"].(string)
	user := s.call(t, "POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"].(string)

	const trace, caller = "5759e988bd862e3fe1be46a994272793", "00f067aa0ba902b7"
	s.call(t, "POST", "/v1/chat/messages", map[string]string{"x-bot-id": botID, "traceparent": "00-" + trace + "-" + caller + "-01"},
		map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "ping"}, "tags": map[string]string{}}, 201)
	var got given
	select {
	case got = <-calls:
	case <-time.After(90 * time.Second):
		t.Fatal("the bot was not called within 90 s")
	}

	// Wait for the spans of the three invocations: the message's, the
	// dispatcher's, the reply's.
	of := func() (spans []awslocal.Span) {
		for _, sp := range s.Spans() {
			if sp.TraceID == trace {
				spans = append(spans, sp)
			}
		}
		return spans
	}
	var spans []awslocal.Span
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		spans = of()
		requests, deliveries := 0, 0
		for _, sp := range spans {
			if sp.Name == "createMessage" && sp.Kind == "SERVER" {
				requests++
			}
			if sp.Name == "deliver event" {
				deliveries++
			}
		}
		if requests == 2 && deliveries == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the spans of the message, its delivery and the reply: not within 90 s; %+v", spans)
		}
	}

	byID := map[string]awslocal.Span{}
	for _, sp := range spans {
		byID[sp.SpanID] = sp
	}
	var message, delivery, replied awslocal.Span
	for _, sp := range spans {
		switch {
		case sp.Name == "createMessage" && sp.ParentID == caller:
			message = sp
		case sp.Name == "createMessage":
			replied = sp
		case sp.Name == "deliver event":
			delivery = sp
		}
	}
	if !strings.HasSuffix(message.Service, "-chat") {
		t.Errorf("the message's request span: %+v (want the chat function's, child of the caller's %s)", message, caller)
	}
	if !strings.HasSuffix(delivery.Service, "-dispatcher") || delivery.Kind != "CLIENT" || delivery.ParentID != message.SpanID {
		t.Errorf("the delivery span %+v: want the dispatcher's, child of the message's request %s", delivery, message.SpanID)
	}
	if got.traceparent != "00-"+trace+"-"+delivery.SpanID+"-01" {
		t.Errorf("the bot was given traceparent %q, want the delivery span's %s", got.traceparent, delivery.SpanID)
	}
	if !strings.HasPrefix(got.xray, "Root=1-"+trace[:8]+"-"+trace[8:]+";Parent="+delivery.SpanID) {
		t.Errorf("the bot was given X-Amzn-Trace-Id %q", got.xray)
	}
	if !strings.HasSuffix(replied.Service, "-chat") || replied.ParentID != delivery.SpanID {
		t.Errorf("the reply's request span %+v: want the chat function's, child of the delivery %s", replied, delivery.SpanID)
	}
	// Every span's parent is one of the trace's spans (or the caller's),
	// and each request wrote the conversation through DynamoDB within it.
	dynamoUnder := map[string]int{}
	for _, sp := range spans {
		if _, ok := byID[sp.ParentID]; !ok && sp.ParentID != caller {
			t.Errorf("span %+v: its parent is no span of the trace", sp)
		}
		if strings.HasPrefix(sp.Name, "DynamoDB.") {
			if sp.Kind != "CLIENT" {
				t.Errorf("span %+v: a DynamoDB call is a client span", sp)
			}
			for p := byID[sp.ParentID]; ; p = byID[p.ParentID] {
				if p.SpanID == "" || p.Name == "createMessage" {
					dynamoUnder[p.SpanID]++
					break
				}
			}
		}
	}
	if dynamoUnder[message.SpanID] == 0 || dynamoUnder[replied.SpanID] == 0 {
		t.Errorf("DynamoDB spans under the message's request %d, the reply's %d; want some in each", dynamoUnder[message.SpanID], dynamoUnder[replied.SpanID])
	}
	if t.Failed() {
		for _, sp := range spans {
			t.Logf("%+v", sp)
		}
	}
}
