package httpapi_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
)

// TestChatDynamoDBCalls pins the DynamoDB calls of every Chat operation,
// called with the bot's API key (one GetItem authenticates it, one reads
// the bot; a personal access token adds the membership read): gets by id
// are one read more, creates one write call (a transaction counts as one).
func TestChatDynamoDBCalls(t *testing.T) {
	f := newChatFixture(t)
	rec := recordUsage(f.Env)
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	conv := f.conversation("web", map[string]string{"t": "v"})
	user := f.user(map[string]string{"t": "v"})
	msg := f.message(conv, user, map[string]string{"t": "v"})
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": user}, 200, "addParticipant")
	f.call("POST", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{}}, 200, "setState")
	event := f.call("POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}, "schedule": map[string]any{"delay": 1000}}, 201, "createEvent").Str("event.id")

	type calls map[string]int
	auth := calls{"GetItem": 2}
	// A call that wrote reads its bot again after the write (RecheckBot,
	// docs/data-model.md): one GetItem more in the writes below.
	plus := func(c calls) calls {
		out := calls{}
		for k, v := range auth {
			out[k] += v
		}
		for k, v := range c {
			out[k] += v
		}
		return out
	}
	for _, tc := range []struct {
		op     string
		req    apitest.Req
		status int
		want   calls // nil: measured and reported only
	}{
		// A conversation and its message counter item: one Query.
		{"getConversation", apitest.Req{Method: "GET", Path: "/v1/chat/conversations/" + conv}, 200, plus(calls{"Query": 1})},
		{"getUser", apitest.Req{Method: "GET", Path: "/v1/chat/users/" + user}, 200, plus(calls{"GetItem": 1})},
		{"getMessage", apitest.Req{Method: "GET", Path: "/v1/chat/messages/" + msg}, 200, plus(calls{"GetItem": 2})},
		{"getEvent", apitest.Req{Method: "GET", Path: "/v1/chat/events/" + event}, 200, plus(calls{"GetItem": 1})},
		{"getParticipant", apitest.Req{Method: "GET", Path: "/v1/chat/conversations/" + conv + "/participants/" + user}, 200, plus(calls{"BatchGetItem": 1})},
		{"getState", apitest.Req{Method: "GET", Path: "/v1/chat/states/conversation/" + conv + "/convState"}, 200, plus(calls{"BatchGetItem": 1})},
		{"createConversation", apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Body: map[string]any{"channel": "c", "tags": map[string]string{"a": "b"}}}, 201, plus(calls{"GetItem": 1, "TransactWriteItems": 1})},
		{"createUser", apitest.Req{Method: "POST", Path: "/v1/chat/users", Body: map[string]any{"tags": map[string]string{"a": "b"}}}, 201, plus(calls{"GetItem": 1, "TransactWriteItems": 1})},
		// The author (its record, strongly consistent), and no re-read of
		// the bot after: the transaction's condition on the conversation
		// hands a message racing deleteBot to the deletion (rd36).
		{"createMessage", apitest.Req{Method: "POST", Path: "/v1/chat/messages", Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"a": "b"}}}, 201, plus(calls{"GetItem": 1, "TransactWriteItems": 1})},
		{"createEvent", apitest.Req{Method: "POST", Path: "/v1/chat/events", Body: map[string]any{"type": "x", "payload": map[string]any{}, "conversationId": conv}}, 201, plus(calls{"GetItem": 1, "TransactWriteItems": 1})},
		// The page's message counter items: one BatchGetItem.
		{"listConversations", apitest.Req{Method: "GET", Path: "/v1/chat/conversations"}, 200, plus(calls{"Query": 1, "BatchGetItem": 1})},
		{"listConversations", apitest.Req{Method: "GET", Path: "/v1/chat/conversations?tags.t=v"}, 200, plus(calls{"Query": 1, "BatchGetItem": 1})},
		{"listUsers", apitest.Req{Method: "GET", Path: "/v1/chat/users"}, 200, plus(calls{"Query": 1})},
		{"listMessages", apitest.Req{Method: "GET", Path: "/v1/chat/messages?conversationId=" + conv}, 200, plus(calls{"Query": 2})},
		// The bot's messages: a Query per key of its list (the unsharded
		// one and 8 shards, merged); their conversations are checked live
		// (one conversation here: one GetItem; more: one BatchGetItem).
		{"listMessages", apitest.Req{Method: "GET", Path: "/v1/chat/messages"}, 200, plus(calls{"GetItem": 1, "Query": 9})},
		// The bot's events: a Query per key of its events list (the
		// unsharded one and 16 shards) and of its messages list (the
		// unsharded one and 8 shards: a user's message_created event has
		// no item of its own, derived from its message), merged: 26 per
		// batch read (a page reads one batch unless filters skip items);
		// the events the page's users' messages name (an item written when
		// the delivery failed, as here, or the message changed), one
		// BatchGetItem. (Before: 17 Queries, and one BatchGetItem of the
		// messages for the payloads.)
		{"listEvents", apitest.Req{Method: "GET", Path: "/v1/chat/events"}, 200, plus(calls{"Query": 26, "BatchGetItem": 1})},
		// A conversation's events: its list (gsi2) and its message copies,
		// one Query each; the events the copies name (a user's messages'
		// message_created events, no item nor list entry of their own
		// unless written since), one BatchGetItem; the payload is the
		// copy's (before: one BatchGetItem more, of the messages).
		{"listEvents", apitest.Req{Method: "GET", Path: "/v1/chat/events?conversationId=" + conv}, 200, plus(calls{"Query": 2, "BatchGetItem": 1})},
		{"listParticipants", apitest.Req{Method: "GET", Path: "/v1/chat/conversations/" + conv + "/participants"}, 200, plus(calls{"Query": 2, "BatchGetItem": 1})},
		{"listTagValues", apitest.Req{Method: "GET", Path: "/v1/chat/tags/t/values?type=conversation"}, 200, plus(calls{"Query": 1})},
		{"updateConversation", apitest.Req{Method: "PUT", Path: "/v1/chat/conversations/" + conv, Body: map[string]any{"tags": map[string]string{"x": "y"}}}, 200, plus(calls{"GetItem": 1, "Query": 1, "TransactWriteItems": 1})},
		{"updateUser", apitest.Req{Method: "PUT", Path: "/v1/chat/users/" + user, Body: map[string]any{"name": "n"}}, 200, plus(calls{"GetItem": 2, "TransactWriteItems": 1})},
		// + the GetItem of its message_created event (kept before the message changes).
		{"updateMessage", apitest.Req{Method: "PUT", Path: "/v1/chat/messages/" + msg, Body: map[string]any{"tags": map[string]string{"x": "y"}}}, 200, plus(calls{"GetItem": 3, "TransactWriteItems": 1})},
		{"addParticipant", apitest.Req{Method: "POST", Path: "/v1/chat/conversations/" + conv + "/participants", Body: map[string]any{"userId": user}}, 200, plus(calls{"GetItem": 1, "BatchGetItem": 1, "TransactWriteItems": 1})},
		{"setState", apitest.Req{Method: "POST", Path: "/v1/chat/states/conversation/" + conv + "/convState", Body: map[string]any{"payload": map[string]any{"a": 1}}}, 200, plus(calls{"GetItem": 2, "TransactWriteItems": 1})},
		{"patchState", apitest.Req{Method: "PATCH", Path: "/v1/chat/states/conversation/" + conv + "/convState", Body: map[string]any{"payload": map[string]any{"b": 1}}}, 200, plus(calls{"GetItem": 2, "TransactWriteItems": 1})},
		{"getOrSetState", apitest.Req{Method: "POST", Path: "/v1/chat/states/conversation/" + conv + "/convState/get-or-set", Body: map[string]any{"payload": map[string]any{}}}, 200, plus(calls{"GetItem": 1})},
		{"getOrCreateConversation", apitest.Req{Method: "POST", Path: "/v1/chat/conversations/get-or-create", Body: map[string]any{"channel": "g", "tags": map[string]string{"k": "1"}}}, 200, nil},
		// The claim (GetItem) and the conversation it names (Query).
		{"getOrCreateConversation", apitest.Req{Method: "POST", Path: "/v1/chat/conversations/get-or-create", Body: map[string]any{"channel": "g", "tags": map[string]string{"k": "1"}}}, 200, plus(calls{"GetItem": 1, "Query": 1})},
		{"getOrCreateUser", apitest.Req{Method: "POST", Path: "/v1/chat/users/get-or-create", Body: map[string]any{"tags": map[string]string{"k": "1"}}}, 200, nil},
		{"getOrCreateUser", apitest.Req{Method: "POST", Path: "/v1/chat/users/get-or-create", Body: map[string]any{"tags": map[string]string{"k": "1"}}}, 200, plus(calls{"GetItem": 2})},
		{"getOrCreateMessage", apitest.Req{Method: "POST", Path: "/v1/chat/messages/get-or-create", Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"k": "1"}}}, 200, nil},
		// A new message: the claim and the author (GetItem), the message
		// sought by its tags (Query), the write; no re-read of the bot
		// after it: its transaction's conditions on the conversation hand
		// a message racing deleteBot to the deletion, as createMessage's.
		{"getOrCreateMessage", apitest.Req{Method: "POST", Path: "/v1/chat/messages/get-or-create", Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"k": "2"}}}, 200, plus(calls{"GetItem": 2, "Query": 1, "TransactWriteItems": 1})},
		// The user's claim and record, the conversation's claim and
		// record (Query), the message's claim and tags (Query), the
		// write: the author is not read again (the user was just read),
		// nor the bot after the write (before: 2 GetItems more).
		{"initializeIncomingMessage", apitest.Req{Method: "POST", Path: "/v1/chat/initialize-incoming-message", Body: map[string]any{
			"user":         map[string]any{"tags": map[string]string{"k": "1"}, "discriminateByTags": []string{"k"}},
			"conversation": map[string]any{"channel": "g", "tags": map[string]string{"k": "1"}, "discriminateByTags": []string{"k"}},
			"message":      map[string]any{"type": "text", "payload": map[string]any{}, "tags": map[string]string{"k": "3"}, "discriminateByTags": []string{"k"}},
		}}, 200, plus(calls{"GetItem": 4, "Query": 2, "TransactWriteItems": 1})},
		// + the GetItem of its message_created event (kept before the message changes).
		{"deleteMessage", apitest.Req{Method: "DELETE", Path: "/v1/chat/messages/" + msg}, 200, plus(calls{"GetItem": 3, "TransactWriteItems": 1})},
		{"removeParticipant", apitest.Req{Method: "DELETE", Path: "/v1/chat/conversations/" + conv + "/participants/" + user}, 200, plus(calls{"GetItem": 1, "TransactWriteItems": 1})},
		{"deleteUser", apitest.Req{Method: "DELETE", Path: "/v1/chat/users/" + user}, 200, nil},
		{"deleteConversation", apitest.Req{Method: "DELETE", Path: "/v1/chat/conversations/" + conv}, 200, nil},
	} {
		tc.req.Token, tc.req.Headers = key, map[string]string{"x-bot-id": f.bot}
		if tc.op == "listEvents" {
			// An event still queued for delivery adds a read of its
			// queue entry (its status derived): wait until all are
			// delivered.
			waitNoPendingEvents(t, f, key)
		}
		f.Check(f.Do(tc.req), tc.status, tc.op)
		u := rec.of(tc.op)
		t.Logf("%-24s %-60.60s %s", tc.op, tc.req.Method+" "+strings.TrimPrefix(tc.req.Path, "/v1/chat"), u)
		if tc.want == nil {
			continue
		}
		total := 0
		for op, n := range tc.want {
			total += n
			if got := u.Calls(op); got != n {
				t.Errorf("%s %s: %d %s calls, want %d (all: %s)", tc.op, tc.req.Path, got, op, n, u)
			}
		}
		if u.Calls("") != total {
			t.Errorf("%s %s: %d calls in all, want %d (%s)", tc.op, tc.req.Path, u.Calls(""), total, u)
		}
	}
}

// waitNoPendingEvents waits until no event of the fixture's bot is pending
// delivery (the dispatcher delivers in the background: under load, after
// the next request).
func waitNoPendingEvents(t *testing.T, f *chatFixture, key string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/events?status=pending", Token: key, Headers: map[string]string{"x-bot-id": f.bot}}), 200, "listEvents")
		if len(res.List("events")) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events still pending delivery after 30 s: %v", res.List("events"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkChatThroughput measures getConversation and createMessage end to
// end on the local platform (HTTP on loopback, the embedded DynamoDB with
// its fsynced journal), with 8 parallel clients per core (-cpu sets the
// cores), and reports requests per second and DynamoDB calls per request.
func BenchmarkChatThroughput(b *testing.B) {
	e := apitest.New(b)
	fx := &fixture{Env: e}
	fx.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
	f := &chatFixture{fixture: fx, bot: fx.createBot(e.AdminToken, chatBotDefinition)}
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	conv, user := f.conversation("web", nil), f.user(nil)
	var mu sync.Mutex
	calls := 0
	e.Platform.OnUsage(func(op string, u *dynamo.Usage) {
		mu.Lock()
		calls += u.Calls("")
		mu.Unlock()
	})
	for _, tc := range []struct {
		name string
		req  apitest.Req
		want int
	}{
		{"getConversation", apitest.Req{Method: "GET", Path: "/v1/chat/conversations/" + conv}, 200},
		{"createMessage", apitest.Req{Method: "POST", Path: "/v1/chat/messages", Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}}, 201},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tc.req.Token, tc.req.Headers = key, map[string]string{"x-bot-id": f.bot}
			mu.Lock()
			calls = 0
			mu.Unlock()
			start := time.Now()
			b.SetParallelism(8) // 8 clients per core
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := e.Do(tc.req); r.Status != tc.want {
						b.Errorf("%d %s", r.Status, r.Raw)
					}
				}
			})
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
			mu.Lock()
			b.ReportMetric(float64(calls)/float64(b.N), "ddb-calls/op")
			mu.Unlock()
		})
	}
}
