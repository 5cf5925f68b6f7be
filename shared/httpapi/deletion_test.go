package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/httpapi"
)

// waitSwept waits (bounded) until the platform's sweeper has finished every
// pending deletion.
func waitSwept(t *testing.T, f *chatFixture) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := f.Platform.Store.PendingDeletions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deletions still pending", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeleteBotDeletesItsData: deleteBot leaves nothing of the bot stored:
// conversations, messages, participants, users, states, events, files (and
// their contents), tables and rows are deleted in the background, and a
// count of the stored items holding any of their ids is 0. Another bot's
// data stays.
func TestDeleteBotDeletesItsData(t *testing.T) {
	f := newChatFixture(t)
	other := f.createBot(f.AdminToken, chatBotDefinition)
	ff := &filesFixture{fixture: f.fixture, bot: f.bot}
	tf := &tablesFixture{fixture: f.fixture, bot: f.bot}

	ids := []string{f.bot}
	for c := 0; c < 3; c++ {
		conv := f.conversation("web", map[string]string{"topic": "t"})
		user := f.user(map[string]string{"u": "x"})
		f.call("POST", "/v1/chat/conversations/"+conv+"/participants", map[string]any{"userId": user}, 200, "addParticipant")
		ids = append(ids, conv, user)
		for m := 0; m < 4; m++ {
			ids = append(ids, f.message(conv, user, map[string]string{"k": "v"}))
		}
		f.call("POST", "/v1/chat/states/conversation/"+conv+"/convState", map[string]any{"payload": map[string]any{"a": 1}}, 200, "setState")
		f.call("POST", "/v1/chat/states/user/"+user+"/userState", map[string]any{"payload": map[string]any{"a": 1}}, 200, "setState")
		ev := f.call("POST", "/v1/chat/events", map[string]any{"type": "x", "payload": map[string]any{}, "conversationId": conv}, 201, "createEvent")
		ids = append(ids, ev.Str("event.id"))
	}
	f.call("POST", "/v1/chat/states/bot/"+f.bot+"/botState", map[string]any{"payload": map[string]any{"a": 1}}, 200, "setState")
	// A task with an activity, a knowledge base (usage counters exist already).
	task := f.call("POST", "/v1/chat/tasks", map[string]any{"type": "t", "conversationId": ids[1]}, 201, "createTask").Str("task.id")
	f.call("PUT", "/v1/chat/tasks/"+task, map[string]any{"status": "in_progress"}, 200, "updateTask")
	kb := f.call("POST", "/v1/files/knowledge-bases", map[string]any{"name": "kb"}, 200, "createKnowledgeBase").Str("knowledgeBase.id")
	ids = append(ids, task, kb)
	f.call("POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "g", "tags": map[string]string{"k": "1"}}, 200, "getOrCreateConversation")
	up := ff.upsert(map[string]any{"key": "doc.txt", "size": 5, "tags": map[string]any{"kind": "doc"}})
	objKey := objectKey(t, up.Str("file.uploadUrl"))
	if st := put(t, up.Str("file.uploadUrl"), up.Str("file.contentType"), []byte("hello")); st != 200 {
		t.Fatalf("upload: %d", st)
	}
	ids = append(ids, up.Str("file.id"))
	tableID := tf.createTable("crumbsTable", map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}})
	tf.rows("crumbsTable", map[string]any{"n": 1}, map[string]any{"n": 2})
	ids = append(ids, tableID)
	keep := f.Check(f.Do(apiReq("POST", "/v1/chat/conversations", f.AdminToken, other, map[string]any{"channel": "web", "tags": map[string]string{}})), 201, "createConversation").Str("conversation.id")

	before := len(f.ItemsHolding(ids...))
	if before < 40 || !ff.objectExists(objKey) {
		t.Fatalf("fixture: %d items, object there: %v", before, ff.objectExists(objKey))
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+f.bot, nil), 200, "deleteBot")
	waitSwept(t, f)
	if left := f.ItemsHolding(ids...); len(left) > 0 {
		t.Fatalf("%d of %d items of the deleted bot remain, e.g. %s", len(left), before, strings.Join(left[:min(len(left), 10)], ", "))
	}
	if ff.objectExists(objKey) {
		t.Fatal("the deleted bot's file contents remain in the bucket")
	}
	f.Check(f.Do(apiReq("GET", "/v1/chat/conversations/"+keep, f.AdminToken, other, nil)), 200, "getConversation")
	t.Logf("deleteBot: %d items of the bot before, 0 after the sweep", before)
}

// apiReq is a request on a bot's behalf (x-bot-id).
func apiReq(method, path, token, bot string, body any) apitest.Req {
	return apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: map[string]string{"x-bot-id": bot}}
}

// TestDeleteBotInLambdaDeletesBeforeAnswering: where nothing runs in the
// background (Lambda), deleteBot deletes the bot's data before answering.
func TestDeleteBotInLambdaDeletesBeforeAnswering(t *testing.T) {
	f := newChatFixture(t)
	conv := f.conversation("web", nil)
	user := f.user(nil)
	ids := []string{f.bot, conv, user}
	for i := 0; i < 30; i++ {
		ids = append(ids, f.message(conv, user, nil))
	}
	lambda := httptest.NewServer(httpapi.New(httpapi.Config{
		Store: f.Platform.Store, PagingKey: make([]byte, 32), Files: nil,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, httpapi.AreaAdmin))
	defer lambda.Close()
	req, _ := http.NewRequest("DELETE", lambda.URL+"/v1/admin/bots/"+f.bot, nil)
	req.Header.Set("Authorization", "Bearer "+f.AdminToken)
	req.Header.Set("x-workspace-id", f.ws)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("deleteBot: %d", res.StatusCode)
	}
	if left := f.ItemsHolding(ids...); len(left) > 0 {
		t.Fatalf("deleteBot answered with %d items of the bot still stored, e.g. %v", len(left), left[:min(3, len(left))])
	}
}
