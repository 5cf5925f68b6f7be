package httpapi_test

import (
	"net/url"
	"sync"
	"testing"
	"time"
)

func messageCount(f *chatFixture, conv string) float64 {
	f.T.Helper()
	r := f.call("GET", "/v1/chat/conversations/"+conv, nil, 200, "getConversation")
	n, _ := r.Body["conversation"].(map[string]any)["messageCount"].(float64)
	return n
}

func TestMessages(t *testing.T) {
	f := newChatFixture(t)
	conv, other := f.conversation("web", nil), f.conversation("web", nil)
	u := f.user(nil)
	body := map[string]any{"conversationId": conv, "userId": u, "type": "text", "payload": map[string]any{"text": "hello"}, "tags": map[string]string{"ext": "m1", "empty": ""}}
	r := f.call("POST", "/v1/chat/messages", body, 201, "createMessage")
	m1 := r.Str("message.id")
	if r.Str("message.direction") != "outgoing" || r.Str("message.payload.text") != "hello" || r.Str("message.tags.ext") != "m1" {
		t.Fatalf("createMessage: %s", r.Raw)
	}
	if _, ok := r.Body["message"].(map[string]any)["tags"].(map[string]any)["empty"]; ok {
		t.Fatalf("empty tag stored: %s", r.Raw)
	}
	// Written by an integration: incoming. The bot itself may be the author.
	in := f.Check(f.req("", "POST", "/v1/chat/messages", body, "x-integration-id", "intver_1"), 201, "createMessage")
	if in.Str("message.direction") != "incoming" {
		t.Fatalf("direction: %s", in.Raw)
	}
	byBot := map[string]any{"conversationId": conv, "userId": f.bot, "type": "text", "payload": map[string]any{"text": "bot"}, "tags": map[string]string{}}
	m3 := f.call("POST", "/v1/chat/messages", byBot, 201, "createMessage").Str("message.id")
	if messageCount(f, conv) != 3 {
		t.Fatalf("messageCount: %v", messageCount(f, conv))
	}
	if g := f.call("GET", "/v1/chat/messages/"+m1, nil, 200, "getMessage"); g.Str("message.createdAt") != r.Str("message.createdAt") {
		t.Fatalf("getMessage: %s", g.Raw)
	}

	// Update: tags merge, payload replaced.
	time.Sleep(2 * time.Millisecond)
	up := f.call("PUT", "/v1/chat/messages/"+m1, map[string]any{"tags": map[string]string{"ext": "", "seen": "yes"}, "payload": map[string]any{"text": "edited"}}, 200, "updateMessage")
	if up.Str("message.payload.text") != "edited" || up.Str("message.tags.seen") != "yes" || up.Str("message.tags.ext") != "" || up.Str("message.updatedAt") <= r.Str("message.updatedAt") {
		t.Fatalf("updateMessage: %s", up.Raw)
	}
	if l := f.call("GET", "/v1/chat/messages?tags.ext=m1", nil, 200, "listMessages"); !sameIDs(ids(l, "messages"), []string{in.Str("message.id")}) {
		t.Fatalf("tag index after update: %s", l.Raw)
	}
	if l := f.call("GET", "/v1/chat/messages?conversationId="+conv+"&tags.seen=yes", nil, 200, "listMessages"); !sameIDs(ids(l, "messages"), []string{m1}) {
		t.Fatalf("conversation and tag: %s", l.Raw)
	}
	if g := f.call("GET", "/v1/chat/messages?conversationId="+conv, nil, 200, "listMessages"); g.List("messages")[2].(map[string]any)["payload"].(map[string]any)["text"] != "edited" {
		t.Fatalf("the conversation's copy is not updated: %s", g.Raw)
	}

	// Lists: most recent first, by conversation, with inclusive dates.
	o1 := f.message(other, u, nil)
	all, _ := f.listAll("/v1/chat/messages", 2, "listMessages", "messages")
	if !sameIDs(all, []string{o1, m3, in.Str("message.id"), m1}) {
		t.Fatalf("listMessages: %v", all)
	}
	inConv, _ := f.listAll("/v1/chat/messages?conversationId="+conv, 2, "listMessages", "messages")
	if !sameIDs(inConv, []string{m3, in.Str("message.id"), m1}) {
		t.Fatalf("listMessages by conversation: %v", inConv)
	}
	at := url.QueryEscape(r.Str("message.createdAt"))
	if l := f.call("GET", "/v1/chat/messages?conversationId="+conv+"&beforeDate="+at, nil, 200, "listMessages"); ids(l, "messages")[len(ids(l, "messages"))-1] != m1 {
		t.Fatalf("beforeDate is inclusive: %s", l.Raw)
	}
	if l := f.call("GET", "/v1/chat/messages?afterDate="+at, nil, 200, "listMessages"); len(l.List("messages")) != 4 {
		t.Fatalf("afterDate is inclusive: %s", l.Raw)
	}

	// Delete uncounts.
	f.call("DELETE", "/v1/chat/messages/"+m1, nil, 200, "deleteMessage")
	f.call("DELETE", "/v1/chat/messages/"+m1, nil, 404, "")
	f.call("GET", "/v1/chat/messages/"+m1, nil, 404, "")
	if messageCount(f, conv) != 2 {
		t.Fatalf("messageCount after delete: %v", messageCount(f, conv))
	}

	// Refused: unknown conversation or user (nothing counted), bad ids.
	for _, b := range []map[string]any{
		{"conversationId": "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "userId": u, "type": "text", "payload": map[string]any{}, "tags": map[string]string{}},
		{"conversationId": conv, "userId": "user_01ARZ3NDEKTSV4RRFFQ69G5FAV", "type": "text", "payload": map[string]any{}, "tags": map[string]string{}},
		{"conversationId": conv, "userId": "bot_01ARZ3NDEKTSV4RRFFQ69G5FAV", "type": "text", "payload": map[string]any{}, "tags": map[string]string{}},
	} {
		f.call("POST", "/v1/chat/messages", b, 404, "")
	}
	if messageCount(f, conv) != 2 {
		t.Fatalf("refused messages counted: %v", messageCount(f, conv))
	}
}

// TestMessageCountIsExact: 100 parallel creations in one conversation
// count 100; then parallel deletions and creations keep the count exact.
func TestMessageCountIsExact(t *testing.T) {
	f := newChatFixture(t)
	conv, u := f.conversation("web", nil), f.user(nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		msgs []string
	)
	create := func() {
		defer wg.Done()
		r := f.req("", "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": u, "type": "text", "payload": map[string]any{}, "tags": map[string]string{}})
		if r.Status != 201 {
			t.Errorf("createMessage: %d %s", r.Status, r.Raw)
			return
		}
		mu.Lock()
		msgs = append(msgs, r.Str("message.id"))
		mu.Unlock()
	}
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go create()
	}
	wg.Wait()
	if n := messageCount(f, conv); n != 100 {
		t.Fatalf("messageCount after 100 parallel creations: %v", n)
	}
	// 30 deletions (each twice, concurrently) and 20 creations at once.
	doomed := append([]string{}, msgs[:30]...)
	for _, m := range doomed {
		for k := 0; k < 2; k++ {
			wg.Add(1)
			go func(m string) {
				defer wg.Done()
				if r := f.req("", "DELETE", "/v1/chat/messages/"+m, nil); r.Status != 200 && r.Status != 404 {
					t.Errorf("deleteMessage: %d %s", r.Status, r.Raw)
				}
			}(m)
		}
	}
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go create()
	}
	wg.Wait()
	if n := messageCount(f, conv); n != 90 {
		t.Fatalf("messageCount after parallel deletions and creations: %v", n)
	}
	listed, _ := f.listAll("/v1/chat/messages?conversationId="+conv, 100, "listMessages", "messages")
	if len(listed) != 90 {
		t.Fatalf("%d messages listed", len(listed))
	}
}

func TestGetOrCreateMessage(t *testing.T) {
	f := newChatFixture(t)
	conv, other, u := f.conversation("web", nil), f.conversation("web", nil), f.user(nil)
	body := func(c, ext string) map[string]any {
		return map[string]any{"conversationId": c, "userId": u, "type": "text", "payload": map[string]any{"text": ext}, "tags": map[string]string{"ext": ext}}
	}
	a := f.call("POST", "/v1/chat/messages/get-or-create", body(conv, "1"), 200, "getOrCreateMessage").Str("message.id")
	if b := f.call("POST", "/v1/chat/messages/get-or-create", body(conv, "1"), 200, "getOrCreateMessage").Str("message.id"); b != a {
		t.Fatalf("second call made another message: %s %s", a, b)
	}
	if b := f.call("POST", "/v1/chat/messages/get-or-create", body(other, "1"), 200, "getOrCreateMessage").Str("message.id"); b == a {
		t.Fatal("another conversation's message answered")
	}
	plain := f.message(conv, u, map[string]string{"ext": "2"})
	if b := f.call("POST", "/v1/chat/messages/get-or-create", body(conv, "2"), 200, "getOrCreateMessage").Str("message.id"); b != plain {
		t.Fatal("existing message not found")
	}
	// Concurrent calls agree, and count once.
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[string]bool{}
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.req("", "POST", "/v1/chat/messages/get-or-create", body(conv, "3"))
			if r.Status != 200 {
				t.Errorf("%d %s", r.Status, r.Raw)
				return
			}
			mu.Lock()
			seen[r.Str("message.id")] = true
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(seen) != 1 || messageCount(f, conv) != 3 {
		t.Fatalf("%d messages, count %v", len(seen), messageCount(f, conv))
	}
	f.call("POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "userId": u, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"ext": "9"}}, 404, "")
	f.call("POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": conv, "userId": u, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"ext": "9"}, "discriminateByTags": []string{"x"}}, 400, "")
}
