package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// chatSnapshot renders everything the bot's Chat API holds that the tests
// below might change, to compare before and after refused calls.
func (f *chatFixture) chatSnapshot(conv, user string) string {
	f.T.Helper()
	var b strings.Builder
	for _, p := range []string{
		"/v1/chat/conversations?pageSize=100",
		"/v1/chat/users?pageSize=100",
		"/v1/chat/messages?pageSize=100",
		"/v1/chat/events?pageSize=100",
		"/v1/chat/conversations/" + conv + "/participants",
		"/v1/chat/states/conversation/" + conv + "/strict",
		"/v1/chat/states/user/" + user + "/userState",
		"/v1/chat/tags/t/values?type=conversation",
	} {
		r := f.req("", "GET", p, nil)
		fmt.Fprintf(&b, "%s %d %s\n", p, r.Status, r.Raw)
	}
	return b.String()
}

// TestChatBadInputIsRefusedAndWritesNothing: every Chat operation answers
// bad input with a 4xx in the error shape (apitest checks the shape), and
// nothing changes.
func TestChatBadInputIsRefusedAndWritesNothing(t *testing.T) {
	f := newChatFixture(t)
	conv := f.conversation("web", map[string]string{"t": "v"})
	user := f.user(nil)
	msg := f.message(conv, user, nil)
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": user}, 200, "addParticipant")
	f.call("POST", "/v1/chat/states/conversation/"+conv+"/strict", map[string]any{"payload": map[string]any{"n": 1}}, 200, "setState")
	f.call("POST", "/v1/chat/states/user/"+user+"/userState", map[string]any{"payload": map[string]any{"n": 1}}, 200, "setState")
	before := f.chatSnapshot(conv, user)

	unknownConv, unknownUser := "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV", "user_01ARZ3NDEKTSV4RRFFQ69G5FAV"
	manyTags := map[string]string{}
	for i := 0; i < 41; i++ {
		manyTags[fmt.Sprint("k", i)] = "v"
	}
	long := strings.Repeat("x", 501)
	msgBody := func(change map[string]any) map[string]any {
		b := map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "x"}, "tags": map[string]string{}}
		for k, v := range change {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	huge := map[string]any{"text": strings.Repeat("y", 400_000)}
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"createConversation no channel", "POST", "/v1/chat/conversations", map[string]any{"tags": map[string]string{}}, 400},
		{"createConversation tags not an object", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": "x"}, 400},
		{"createConversation tag value not a string", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]any{"a": 1}}, 400},
		{"createConversation empty tag name", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]string{"": "x"}}, 400},
		{"createConversation too many tags", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": manyTags}, 400},
		{"createConversation tag value too long", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]string{"a": long}}, 400},
		{"createConversation unknown field", "POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]string{}, "x": 1}, 400},
		{"createConversation malformed JSON", "POST", "/v1/chat/conversations", `{"channel":`, 400},
		{"getConversation malformed id", "GET", "/v1/chat/conversations/nope", nil, 404},
		{"getConversation unknown id", "GET", "/v1/chat/conversations/" + unknownConv, nil, 404},
		{"listConversations bad sortField", "GET", "/v1/chat/conversations?sortField=name", nil, 400},
		{"listConversations bad sortDirection", "GET", "/v1/chat/conversations?sortDirection=up", nil, 400},
		{"listConversations tags not an object", "GET", "/v1/chat/conversations?tags=x", nil, 400},
		{"listConversations empty tag name", "GET", "/v1/chat/conversations?tags.=x", nil, 400},
		{"listConversations empty tag value", "GET", "/v1/chat/conversations?tags.a=", nil, 400},
		{"listConversations tag twice", "GET", "/v1/chat/conversations?tags.a=1&tags.a=2", nil, 400},
		{"listConversations bad afterDate", "GET", "/v1/chat/conversations?afterDate=yesterday", nil, 400},
		{"listConversations bad beforeDate", "GET", "/v1/chat/conversations?beforeDate=2024-13-01", nil, 400},
		{"listConversations negative minMessageCount", "GET", "/v1/chat/conversations?minMessageCount=-1", nil, 400},
		{"listConversations bad maxMessageCount", "GET", "/v1/chat/conversations?maxMessageCount=many", nil, 400},
		{"listConversations empty participant", "GET", "/v1/chat/conversations?participantIds=", nil, 400},
		{"listConversations pageSize 0", "GET", "/v1/chat/conversations?pageSize=0", nil, 400},
		{"listConversations pageSize 101", "GET", "/v1/chat/conversations?pageSize=101", nil, 400},
		{"listConversations forged token", "GET", "/v1/chat/conversations?nextToken=abc.def", nil, 400},
		{"updateConversation empty tag name", "PUT", "/v1/chat/conversations/" + conv, map[string]any{"tags": map[string]string{"": "x"}}, 400},
		{"updateConversation tag value not a string", "PUT", "/v1/chat/conversations/" + conv, map[string]any{"tags": map[string]any{"t": true}}, 400},
		{"updateConversation tag value too long", "PUT", "/v1/chat/conversations/" + conv, map[string]any{"tags": map[string]string{"t": long}}, 400},
		{"updateConversation too many tags", "PUT", "/v1/chat/conversations/" + conv, map[string]any{"tags": manyTags}, 400},
		{"updateConversation unknown field", "PUT", "/v1/chat/conversations/" + conv, map[string]any{"channel": "x"}, 400},
		{"updateConversation unknown id", "PUT", "/v1/chat/conversations/" + unknownConv, map[string]any{"tags": map[string]string{"a": "b"}}, 404},
		{"deleteConversation unknown id", "DELETE", "/v1/chat/conversations/" + unknownConv, nil, 404},
		{"getOrCreateConversation bad discriminateByTags", "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "c", "tags": map[string]string{"a": "1"}, "discriminateByTags": []string{"b"}}, 400},
		{"getOrCreateConversation no tags", "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "c"}, 400},
		{"addParticipant no userId", "POST", "/v1/chat/conversations/" + conv + "/participants", map[string]any{}, 400},
		{"addParticipant malformed userId", "POST", "/v1/chat/conversations/" + conv + "/participants", map[string]any{"userId": "u"}, 400},
		{"addParticipant unknown user", "POST", "/v1/chat/conversations/" + conv + "/participants", map[string]any{"userId": unknownUser}, 404},
		{"addParticipant unknown conversation", "POST", "/v1/chat/conversations/" + unknownConv + "/participants", map[string]any{"userId": user}, 404},
		{"getParticipant not a participant", "GET", "/v1/chat/conversations/" + conv + "/participants/" + unknownUser, nil, 404},
		{"removeParticipant not a participant", "DELETE", "/v1/chat/conversations/" + conv + "/participants/" + unknownUser, nil, 404},
		{"listParticipants unknown conversation", "GET", "/v1/chat/conversations/" + unknownConv + "/participants", nil, 404},
		{"createUser no tags", "POST", "/v1/chat/users", map[string]any{}, 400},
		{"createUser name too long", "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}, "name": strings.Repeat("n", 201)}, 400},
		{"createUser empty tag name", "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{"": "x"}}, 400},
		{"getUser unknown", "GET", "/v1/chat/users/" + unknownUser, nil, 404},
		{"updateUser name not a string", "PUT", "/v1/chat/users/" + user, map[string]any{"name": 3}, 400},
		{"updateUser unknown", "PUT", "/v1/chat/users/" + unknownUser, map[string]any{"name": "x"}, 404},
		{"deleteUser unknown", "DELETE", "/v1/chat/users/" + unknownUser, nil, 404},
		{"listUsers bad sortField", "GET", "/v1/chat/users?sortField=name", nil, 400},
		{"listUsers bad rangeField", "GET", "/v1/chat/users?rangeField=name", nil, 400},
		{"listUsers unknown conversation", "GET", "/v1/chat/users?conversationId=" + unknownConv, nil, 404},
		{"getOrCreateUser bad discriminateByTags", "POST", "/v1/chat/users/get-or-create", map[string]any{"tags": map[string]string{}, "discriminateByTags": []string{"b"}}, 400},
		{"createMessage no type", "POST", "/v1/chat/messages", msgBody(map[string]any{"type": nil}), 400},
		{"createMessage payload not an object", "POST", "/v1/chat/messages", msgBody(map[string]any{"payload": "hi"}), 400},
		{"createMessage malformed conversationId", "POST", "/v1/chat/messages", msgBody(map[string]any{"conversationId": "c"}), 400},
		{"createMessage unknown conversation", "POST", "/v1/chat/messages", msgBody(map[string]any{"conversationId": unknownConv}), 404},
		{"createMessage unknown user", "POST", "/v1/chat/messages", msgBody(map[string]any{"userId": unknownUser}), 404},
		{"createMessage bad origin", "POST", "/v1/chat/messages", msgBody(map[string]any{"origin": "human"}), 400},
		{"createMessage empty tag name", "POST", "/v1/chat/messages", msgBody(map[string]any{"tags": map[string]string{"": "x"}}), 400},
		{"createMessage too large", "POST", "/v1/chat/messages", msgBody(map[string]any{"payload": huge}), 413},
		{"getOrCreateMessage bad discriminateByTags", "POST", "/v1/chat/messages/get-or-create", msgBody(map[string]any{"discriminateByTags": []string{"z"}}), 400},
		{"getMessage unknown", "GET", "/v1/chat/messages/msg_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"updateMessage no tags", "PUT", "/v1/chat/messages/" + msg, map[string]any{"payload": map[string]any{}}, 400},
		{"updateMessage too large", "PUT", "/v1/chat/messages/" + msg, map[string]any{"tags": map[string]string{}, "payload": huge}, 413},
		{"deleteMessage unknown", "DELETE", "/v1/chat/messages/msg_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"listMessages unknown conversation", "GET", "/v1/chat/messages?conversationId=" + unknownConv, nil, 404},
		{"listMessages bad beforeDate", "GET", "/v1/chat/messages?beforeDate=soon", nil, 400},
		{"createEvent no payload", "POST", "/v1/chat/events", map[string]any{"type": "x"}, 400},
		{"createEvent unknown conversation", "POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}, "conversationId": unknownConv}, 404},
		{"getEvent unknown", "GET", "/v1/chat/events/evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"listEvents bad status", "GET", "/v1/chat/events?status=done", nil, 400},
		{"cancelScheduledEvent unknown", "DELETE", "/v1/chat/events/scheduled/evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"setState unknown type", "POST", "/v1/chat/states/task/" + conv + "/strict", map[string]any{"payload": map[string]any{"n": 2}}, 400},
		{"setState undeclared name", "POST", "/v1/chat/states/conversation/" + conv + "/nope", map[string]any{"payload": map[string]any{"n": 2}}, 400},
		{"setState payload failing the schema", "POST", "/v1/chat/states/conversation/" + conv + "/strict", map[string]any{"payload": map[string]any{"n": "2"}}, 400},
		{"setState unknown conversation", "POST", "/v1/chat/states/conversation/" + unknownConv + "/strict", map[string]any{"payload": map[string]any{"n": 2}}, 404},
		{"setState too large", "POST", "/v1/chat/states/user/" + user + "/userState", map[string]any{"payload": huge}, 413},
		{"patchState payload failing the schema", "PATCH", "/v1/chat/states/conversation/" + conv + "/strict", map[string]any{"payload": map[string]any{"other": 1}}, 400},
		{"setStateExpiry too long", "POST", "/v1/chat/states/conversation/" + conv + "/strict/expiry", map[string]any{"expiry": 2592000001}, 400},
		{"listTagValues no type", "GET", "/v1/chat/tags/t/values", nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.req("", tc.method, tc.path, tc.body)
			if r.Status != tc.status {
				t.Fatalf("%s %s: %d %s, want %d", tc.method, tc.path, r.Status, r.Raw, tc.status)
			}
		})
	}
	// A body that is not JSON.
	r := f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: f.AdminToken, Body: "tags=x",
		Headers: map[string]string{"x-bot-id": f.bot, "Content-Type": "text/plain"}})
	if r.Status != 415 {
		t.Fatalf("text body: %d %s", r.Status, r.Raw)
	}
	if after := f.chatSnapshot(conv, user); after != before {
		t.Fatalf("refused calls changed data:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// chatRequests lists one request per Chat operation on the fixture's records:
// reads first, then writes.
func chatRequests(conv, user, msg, event string) (reads, writes []apitest.Req) {
	r := func(method, path string, body any) apitest.Req {
		return apitest.Req{Method: method, Path: path, Body: body}
	}
	reads = []apitest.Req{
		r("GET", "/v1/chat/conversations", nil),
		r("GET", "/v1/chat/conversations/"+conv, nil),
		r("GET", "/v1/chat/conversations/"+conv+"/participants", nil),
		r("GET", "/v1/chat/conversations/"+conv+"/participants/"+user, nil),
		r("GET", "/v1/chat/users", nil),
		r("GET", "/v1/chat/users/"+user, nil),
		r("GET", "/v1/chat/messages", nil),
		r("GET", "/v1/chat/messages/"+msg, nil),
		r("GET", "/v1/chat/events", nil),
		r("GET", "/v1/chat/events/"+event, nil),
		r("GET", "/v1/chat/states/conversation/"+conv+"/convState", nil),
		r("GET", "/v1/chat/tags/t/values?type=conversation", nil),
	}
	writes = []apitest.Req{
		r("POST", "/v1/chat/conversations", map[string]any{"channel": "c", "tags": map[string]string{}}),
		r("PUT", "/v1/chat/conversations/"+conv, map[string]any{"tags": map[string]string{"w": "1"}}),
		r("POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "c", "tags": map[string]string{"w": "2"}}),
		r("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": user}),
		r("DELETE", "/v1/chat/conversations/"+conv+"/participants/"+user, nil),
		r("POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}),
		r("PUT", "/v1/chat/users/"+user, map[string]any{"name": "n"}),
		r("POST", "/v1/chat/users/get-or-create", map[string]any{"tags": map[string]string{"w": "1"}}),
		r("POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{}, "tags": map[string]string{}}),
		r("POST", "/v1/chat/messages/get-or-create", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{}, "tags": map[string]string{"w": "1"}}),
		r("PUT", "/v1/chat/messages/"+msg, map[string]any{"tags": map[string]string{"w": "1"}}),
		r("POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}}),
		r("DELETE", "/v1/chat/events/scheduled/"+event, nil),
		r("POST", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{"a": 1}}),
		r("PATCH", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{"a": 2}}),
		r("POST", "/v1/chat/states/conversation/"+conv+"/convState/get-or-set", map[string]any{"payload": map[string]any{"a": 3}}),
		r("POST", "/v1/chat/states/conversation/"+conv+"/convState/expiry", map[string]any{"expiry": 1000}),
		r("DELETE", "/v1/chat/messages/"+msg, nil),
		r("DELETE", "/v1/chat/users/"+user, nil),
		r("DELETE", "/v1/chat/conversations/"+conv, nil),
	}
	return reads, writes
}

// TestChatRolesAndTenancy: viewers read and cannot write; callers outside
// the bot's workspace, and another bot's API key, get 404; records of
// another bot are 404 through this bot.
func TestChatRolesAndTenancy(t *testing.T) {
	f := newChatFixture(t)
	conv := f.conversation("web", map[string]string{"t": "v"})
	user := f.user(nil)
	msg := f.message(conv, user, nil)
	f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": user}, 200, "addParticipant")
	f.call("POST", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{}}, 200, "setState")
	event := f.call("POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}, "schedule": map[string]any{"delay": 1000}}, 201, "createEvent").Str("event.id")
	reads, writes := chatRequests(conv, user, msg, event)

	viewer, _ := f.invite("viewer@example.com", "viewer")
	outsider, _ := newFixtureOn(f.fixture).invite("outsider@example.com", "owner")
	otherBot := f.createBot(f.AdminToken, chatBotDefinition)
	otherKey := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": otherBot}), 200, "createBotApiKey").Str("value")
	ownKey := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	send := func(token, bot string, rq apitest.Req) apitest.Response {
		rq.Token, rq.Headers = token, map[string]string{"x-bot-id": bot}
		return f.Do(rq)
	}
	for _, rq := range reads {
		if r := send(viewer, f.bot, rq); r.Status != 200 {
			t.Errorf("viewer %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
		if r := send(ownKey, f.bot, rq); r.Status != 200 {
			t.Errorf("bot key %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
	for _, rq := range append(reads, writes...) {
		if r := send(outsider, f.bot, rq); r.Status != 404 {
			t.Errorf("outsider %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
		if r := send(otherKey, f.bot, rq); r.Status != 404 {
			t.Errorf("other bot's key %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
		if r := send("", f.bot, rq); r.Status != 401 {
			t.Errorf("no token %s %s: %d", rq.Method, rq.Path, r.Status)
		}
	}
	for _, rq := range writes {
		if r := send(viewer, f.bot, rq); r.Status != 403 {
			t.Errorf("viewer writes %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
	// Through another bot (same workspace, same caller), this bot's records
	// do not exist.
	for _, rq := range reads {
		if strings.Contains(rq.Path, "?") || rq.Path == "/v1/chat/conversations" || rq.Path == "/v1/chat/users" || rq.Path == "/v1/chat/messages" || rq.Path == "/v1/chat/events" {
			continue // lists: empty there
		}
		if r := send(f.AdminToken, otherBot, rq); r.Status != 404 {
			t.Errorf("via another bot %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
	for _, p := range []string{"/v1/chat/conversations", "/v1/chat/users", "/v1/chat/messages", "/v1/chat/events", "/v1/chat/tags/t/values?type=conversation"} {
		r := send(f.AdminToken, otherBot, apitest.Req{Method: "GET", Path: p})
		if r.Status != 200 || strings.Contains(string(r.Raw), conv) || strings.Contains(string(r.Raw), user) || strings.Contains(string(r.Raw), `"v"`) {
			t.Errorf("another bot's list %s: %d %s", p, r.Status, r.Raw)
		}
	}
	for _, rq := range writes {
		r := send(f.AdminToken, otherBot, rq)
		if rq.Path == "/v1/chat/conversations" || rq.Path == "/v1/chat/users" || strings.HasSuffix(rq.Path, "get-or-create") || (rq.Path == "/v1/chat/events" && rq.Method == "POST") {
			continue // creations in the other bot: allowed, and their own
		}
		if r.Status != 404 {
			t.Errorf("write via another bot %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
	// The bot's own API key writes.
	for _, rq := range writes {
		if r := send(ownKey, f.bot, rq); r.Status >= 300 {
			t.Errorf("bot key writes %s %s: %d %s", rq.Method, rq.Path, r.Status, r.Raw)
		}
	}
}
