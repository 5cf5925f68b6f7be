package httpapi_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
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

// TestWritesRacingDeleteBotLeaveNothing: four kinds of writers (messages,
// conversations, table rows, files; three of each) run while the bot is
// deleted. A write that read the bot before deleteBot and committed after
// it answers 404 and what it stored goes with the bot: once the deletion
// is swept, no stored item holds the bot's id or the id of anything a
// writer created, acknowledged or not.
func TestWritesRacingDeleteBotLeaveNothing(t *testing.T) {
	for round := 0; round < 3; round++ {
		t.Run(fmt.Sprint("round ", round), func(t *testing.T) { racingDeleteBot(t) })
	}
}

func racingDeleteBot(t *testing.T) {
	f := newChatFixture(t)
	tf := &tablesFixture{fixture: f.fixture, bot: f.bot}
	table := tf.createTable("raceTable", map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}})
	conv := f.conversation("web", nil)
	user := f.user(nil)
	writers := []struct {
		name   string
		method string
		path   string
		body   func(i int) any
		id     string // the created id's path in the answer
	}{
		{"messages", "POST", "/v1/chat/messages", func(i int) any {
			return map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}}
		}, "message.id"},
		{"conversations", "POST", "/v1/chat/conversations", func(i int) any {
			return map[string]any{"channel": "web", "tags": map[string]string{}}
		}, "conversation.id"},
		{"rows", "POST", "/v1/tables/raceTable/rows", func(i int) any {
			return map[string]any{"rows": []any{map[string]any{"n": i}}}
		}, ""},
		{"files", "PUT", "/v1/files", func(i int) any {
			return map[string]any{"key": fmt.Sprintf("race-%d.txt", i), "size": 1}
		}, "file.id"},
	}
	var (
		mu      sync.Mutex
		ids     = []string{f.bot, table, conv, user}
		writes  atomic.Int64
		late    atomic.Int64 // acknowledged after deleteBot answered
		deleted atomic.Bool
		wg      sync.WaitGroup
	)
	for _, w := range writers {
		for g := 0; g < 3; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g * 100000; ; i++ {
					r := f.Do(apiReq(w.method, w.path, f.AdminToken, f.bot, w.body(i)))
					if r.Status >= 300 {
						if r.Status != 404 {
							t.Errorf("%s: %d %s; want 404 once the bot is gone", w.name, r.Status, r.Raw)
						}
						return
					}
					writes.Add(1)
					if deleted.Load() {
						late.Add(1)
					}
					if w.id != "" {
						mu.Lock()
						ids = append(ids, r.Str(w.id))
						mu.Unlock()
					}
				}
			}()
		}
	}
	// Delete once every writer is under way (12 writers, 5 writes each).
	for deadline := time.Now().Add(20 * time.Second); writes.Load() < 60; {
		if time.Now().After(deadline) {
			t.Fatalf("the writers wrote only %d times", writes.Load())
		}
		time.Sleep(time.Millisecond)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+f.bot, nil), 200, "deleteBot")
	deleted.Store(true)
	wg.Wait()
	waitSwept(t, f)
	if left := f.ItemsHolding(ids...); len(left) > 0 {
		t.Fatalf("%d items of the deleted bot remain after the sweep, e.g. %s", len(left), strings.Join(left[:min(len(left), 10)], ", "))
	}
	t.Logf("%d writes, %d acknowledged after deleteBot answered; nothing left", writes.Load(), late.Load())
}

// TestWriteHeldAcrossDeleteBotLeavesNothing: writes whose bot was read
// (the call authenticated) before deleteBot, and which commit only after
// the deletion was swept: each holds its body (Expect: 100-continue: the
// server asks for it once the call is authorized) while the bot is deleted
// and swept, then sends it. Each answers 404 and, once swept again,
// nothing of the bot stays in storage.
func TestWriteHeldAcrossDeleteBotLeavesNothing(t *testing.T) {
	f := newChatFixture(t)
	tf := &tablesFixture{fixture: f.fixture, bot: f.bot}
	table := tf.createTable("heldTable", map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}})
	conv := f.conversation("web", nil)
	user := f.user(nil)
	u, _ := url.Parse(f.URL)
	type held struct {
		name string
		conn net.Conn
		br   *bufio.Reader
		body []byte
	}
	var calls []held
	for _, w := range []struct {
		name, method, path string
		body               any
	}{
		{"createMessage", "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "late"}, "tags": map[string]string{}}},
		{"createConversation", "POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}},
		{"createTableRows", "POST", "/v1/tables/heldTable/rows", map[string]any{"rows": []any{map[string]any{"n": 1}}}},
		{"upsertFile", "PUT", "/v1/files", map[string]any{"key": "late.txt", "size": 1}},
	} {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		body, _ := json.Marshal(w.body)
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nx-bot-id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nExpect: 100-continue\r\n\r\n",
			w.method, w.path, u.Host, f.AdminToken, f.bot, len(body))
		br := bufio.NewReader(conn)
		// The server asks for the body once the call is authorized: the
		// bot has been read.
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
			t.Fatalf("%s: %q %v; want 100 Continue", w.name, line, err)
		}
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		calls = append(calls, held{w.name, conn, br, body})
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+f.bot, nil), 200, "deleteBot")
	waitSwept(t, f)
	for _, c := range calls {
		if _, err := c.conn.Write(c.body); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(c.br, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		msg, _ := io.ReadAll(res.Body)
		if res.StatusCode != 404 {
			t.Errorf("%s committed after the bot's deletion: %d %s; want 404", c.name, res.StatusCode, msg)
		}
	}
	waitSwept(t, f)
	if left := f.ItemsHolding(f.bot, table, conv, user); len(left) > 0 {
		t.Fatalf("%d items of the deleted bot remain, e.g. %s", len(left), strings.Join(left[:min(len(left), 10)], ", "))
	}
}
