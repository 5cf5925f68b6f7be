package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// TestDeliveryCarriesItsMessage: a user's message travels in its
// message_created delivery (issue 36: the delivery reads no MSG# item, one
// read unit less per message); a message updated before its delivery
// reaches the bot as updated, a deleted one fails its event as before
// (its conversation's counter item says a message changed: the delivery
// reads the message again).
func TestDeliveryCarriesItsMessage(t *testing.T) {
	f := newFixture(t)
	bs := newBotServer(t)
	bot := f.createBot(f.AdminToken, map[string]any{"url": bs.URL})
	chat := func(method, path string, body any, status int, op string) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Body: body, Headers: map[string]string{"x-bot-id": bot}}), status, op)
	}
	user := chat("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201, "createUser").Str("user.id")
	conv := chat("POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201, "createConversation").Str("conversation.id")
	message := func(text string) string {
		return chat("POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201, "createMessage").Str("message.id")
	}
	payloadText := func(d botDelivery) any {
		p, _ := d.Event["payload"].(map[string]any)
		m, _ := p["message"].(map[string]any)
		pl, _ := m["payload"].(map[string]any)
		return pl["text"]
	}

	// Delivered without reading the message, created by createMessage
	// or by getOrCreateMessage.
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	const n = 6
	for i := 0; i < n/2; i++ {
		message("hi")
		chat("POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"},
			"tags": map[string]string{"k": fmt.Sprint(i)}, "discriminateByTags": []string{"k"}}, 200, "getOrCreateMessage")
	}
	got := bs.waitFor(t, n, 30*time.Second)
	u := ddb.Usage()
	ddb.CountUnits(false)
	for p, c := range u.Partitions {
		if p.Table == f.Platform.Env.Table && len(p.Key) > 4 && p.Key[:4] == "MSG#" && c.Read > 0 {
			t.Errorf("the delivery read %s (%.1f units): the message was not carried", p.Key, c.Read)
		}
	}
	if payloadText(got[0]) != "hi" {
		t.Fatalf("delivered: %+v", got[0].Event)
	}

	// Updated while its delivery waits for a retry: delivered as updated.
	bs.failing.Store(true)
	upd := message("before")
	bs.waitFor(t, n+1, 30*time.Second)
	chat("PUT", "/v1/chat/messages/"+upd, map[string]any{"payload": map[string]any{"text": "after"}, "tags": map[string]string{}}, 200, "updateMessage")
	bs.failing.Store(false)
	got = bs.waitFor(t, n+2, 30*time.Second)
	if txt := payloadText(got[n+1]); txt != "after" {
		t.Errorf("a message updated before its delivery reached the bot as %q, want \"after\"", txt)
	}

	// Deleted while its delivery waits: its event fails, saying so.
	bs.failing.Store(true)
	gone := message("doomed")
	bs.waitFor(t, n+3, 30*time.Second)
	chat("DELETE", "/v1/chat/messages/"+gone, nil, 200, "deleteMessage")
	bs.failing.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var status, reason any
		for _, e := range chat("GET", "/v1/chat/events?conversationId="+conv, nil, 200, "listEvents").List("events") {
			if e := e.(map[string]any); e["messageId"] == gone {
				status, reason = e["status"], e["failureReason"]
			}
		}
		if status == "failed" {
			if reason != "the message was deleted before it could be delivered" {
				t.Errorf("failure reason %q", reason)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted message's event: %v, want failed", status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if d := bs.deliveries(); len(d) != n+3 {
		t.Errorf("%d deliveries, want %d (the deleted message's not sent again)", len(d), n+3)
	}
}

// TestOutgoingDeliveryCarriesItsMessage: a bot's message reaches its
// conversation's integration without a read of the message either (the
// outbox entry carries it, as a user's message's: message_carry.go), and
// as getMessage reads it.
func TestOutgoingDeliveryCarriesItsMessage(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	conv := f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	ddb := f.Platform.Dynamo
	ddb.CountUnits(true)
	const n = 3
	var ids []string
	for i := 0; i < n; i++ {
		ids = append(ids, f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": f.botID, "type": "text",
			"payload": map[string]any{"text": fmt.Sprint("reply ", i)}, "tags": map[string]string{}}, 201).Str("message.id"))
	}
	eventually(t, "the replies reach the integration", func() bool { return len(f.integ.of("message_created", "")) == n })
	u := ddb.Usage()
	ddb.CountUnits(false)
	for p, c := range u.Partitions {
		if p.Table == f.Platform.Env.Table && strings.HasPrefix(p.Key, "MSG#") && c.Read > 0 {
			t.Errorf("the delivery read %s (%.1f units): the message was not carried", p.Key, c.Read)
		}
	}
	for i, got := range f.integ.of("message_created", "") {
		want := f.as(false, "GET", "/v1/chat/messages/"+ids[i], nil, 200).Body["message"]
		if fmt.Sprint(got.Body["message"]) != fmt.Sprint(want) {
			t.Errorf("delivered %v, want the message as getMessage reads it, %v", got.Body["message"], want)
		}
	}
}
