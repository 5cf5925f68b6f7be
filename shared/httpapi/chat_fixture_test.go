package httpapi_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// chatBotDefinition declares the states the chat tests use.
var chatBotDefinition = map[string]any{
	"name": "chat-bot",
	"states": map[string]any{
		"convState":  map[string]any{"type": "conversation", "schema": map[string]any{"type": "object"}},
		"userState":  map[string]any{"type": "user", "schema": map[string]any{"type": "object"}},
		"botState":   map[string]any{"type": "bot", "schema": map[string]any{}},
		"wfState":    map[string]any{"type": "workflow", "schema": map[string]any{}},
		"intState":   map[string]any{"type": "integration", "schema": map[string]any{}},
		"expiring":   map[string]any{"type": "user", "schema": map[string]any{}, "expiry": 60000},
		"strict":     map[string]any{"type": "conversation", "schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []any{"n"}, "additionalProperties": false}},
		"brokenDecl": map[string]any{"type": "conversation", "schema": map[string]any{"type": 12}},
	},
}

// chatFixture is a platform with a workspace and a bot, calling the Chat
// API of that bot.
type chatFixture struct {
	*fixture
	bot string
}

func newChatFixture(t *testing.T) *chatFixture {
	f := newFixture(t)
	return &chatFixture{fixture: f, bot: f.createBot(f.AdminToken, chatBotDefinition)}
}

// req sends a Chat request to the fixture's bot with token (the admin's
// when empty) and extra headers.
func (f *chatFixture) req(token, method, path string, body any, headers ...string) apitest.Response {
	f.T.Helper()
	if token == "" {
		token = f.AdminToken
	}
	h := map[string]string{"x-bot-id": f.bot}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return f.Do(apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: h})
}

// call sends a request as the admin and checks its status and shape.
func (f *chatFixture) call(method, path string, body any, status int, op string) apitest.Response {
	f.T.Helper()
	return f.Check(f.req("", method, path, body), status, op)
}

func (f *chatFixture) conversation(channel string, tags map[string]string) string {
	f.T.Helper()
	if tags == nil {
		tags = map[string]string{}
	}
	return f.call("POST", "/v1/chat/conversations", map[string]any{"channel": channel, "tags": tags}, 201, "createConversation").Str("conversation.id")
}

func (f *chatFixture) user(tags map[string]string) string {
	f.T.Helper()
	if tags == nil {
		tags = map[string]string{}
	}
	return f.call("POST", "/v1/chat/users", map[string]any{"tags": tags}, 201, "createUser").Str("user.id")
}

func (f *chatFixture) message(conv, user string, tags map[string]string) string {
	f.T.Helper()
	if tags == nil {
		tags = map[string]string{}
	}
	body := map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "hi"}, "tags": tags}
	return f.call("POST", "/v1/chat/messages", body, 201, "createMessage").Str("message.id")
}

// ids returns the ids of the records of a list response's field.
func ids(r apitest.Response, field string) []string {
	var out []string
	for _, v := range r.List(field) {
		m, _ := v.(map[string]any)
		id, _ := m["id"].(string)
		out = append(out, id)
	}
	return out
}

// listAll pages through a list (pageSize size) and returns every id and
// the number of pages.
func (f *chatFixture) listAll(path string, size int, op, field string) ([]string, int) {
	f.T.Helper()
	var all []string
	token, pages := "", 0
	for {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p := fmt.Sprintf("%s%spageSize=%d", path, sep, size)
		if token != "" {
			p += "&nextToken=" + url.QueryEscape(token)
		}
		r := f.call("GET", p, nil, 200, op)
		pages++
		all = append(all, ids(r, field)...)
		if len(r.List(field)) > size {
			f.T.Fatalf("%s: page larger than pageSize", op)
		}
		token = r.Str("meta.nextToken")
		if token == "" {
			return all, pages
		}
		if pages > 1000 {
			f.T.Fatalf("%s: too many pages", op)
		}
	}
}

func sameIDs(got, want []string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
