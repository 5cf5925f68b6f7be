package httpapi_test

import (
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// TestTasksKBAuditDynamoDBCalls pins the DynamoDB calls of the operations
// of tasks, activities, audit records, knowledge bases and importMessages,
// and of createMessage and createEvent with their usage counter (one more
// item in the same transaction, no extra call). Every bot-scoped call pays
// two GetItems (token, bot) and one for the membership; a user's message,
// created or imported, one more for its author (docs/data-model.md: a
// read, not a condition check billed as two writes).
func TestTasksKBAuditDynamoDBCalls(t *testing.T) {
	f := newChatFixture(t)
	rec := recordUsage(f.Env)
	conv := f.conversation("web", nil)
	user := f.user(nil)
	task := f.call("POST", "/v1/chat/tasks", map[string]any{"type": "t", "conversationId": conv}, 201, "createTask").Str("task.id")
	kb := f.call("POST", "/v1/files/knowledge-bases", map[string]any{"name": "k"}, 200, "createKnowledgeBase").Str("knowledgeBase.id")
	msg := func(text string, tags map[string]string, by []string) map[string]any {
		return map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": text},
			"tags": tags, "createdAt": "2024-01-01T00:00:00Z", "discriminateByTags": by}
	}
	type calls map[string]int
	bot := map[string]string{"x-bot-id": f.bot}
	ws := map[string]string{"x-workspace-id": f.ws}
	for _, tc := range []struct {
		op   string
		req  apitest.Req
		want calls
	}{
		{"createTask", apitest.Req{Method: "POST", Path: "/v1/chat/tasks", Headers: bot, Body: map[string]any{"type": "t", "conversationId": conv}}, calls{"GetItem": 4, "TransactWriteItems": 1}},
		{"getTask", apitest.Req{Method: "GET", Path: "/v1/chat/tasks/" + task, Headers: bot}, calls{"GetItem": 4}},
		{"listTasks", apitest.Req{Method: "GET", Path: "/v1/chat/tasks", Headers: bot}, calls{"GetItem": 3, "Query": 1}},
		{"updateTask", apitest.Req{Method: "PUT", Path: "/v1/chat/tasks/" + task, Headers: bot, Body: map[string]any{"status": "in_progress"}}, calls{"GetItem": 5, "TransactWriteItems": 1}},
		{"listActivities", apitest.Req{Method: "GET", Path: "/v1/admin/activities?botId=" + f.bot + "&taskId=" + task, Headers: ws}, calls{"GetItem": 4, "Query": 1}},
		{"getAuditRecords", apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + f.ws + "/audit-records"}, calls{"GetItem": 2, "Query": 1}},
		{"createKnowledgeBase", apitest.Req{Method: "POST", Path: "/v1/files/knowledge-bases", Headers: bot, Body: map[string]any{"name": "n"}}, calls{"GetItem": 4, "TransactWriteItems": 1}},
		{"listKnowledgeBases", apitest.Req{Method: "GET", Path: "/v1/files/knowledge-bases", Headers: bot}, calls{"GetItem": 3, "Query": 1}},
		{"updateKnowledgeBase", apitest.Req{Method: "PUT", Path: "/v1/files/knowledge-bases/" + kb, Headers: bot, Body: map[string]any{"name": "m"}}, calls{"GetItem": 5, "TransactWriteItems": 1}},
		{"createMessage", apitest.Req{Method: "POST", Path: "/v1/chat/messages", Headers: bot, Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": "x"}, "tags": map[string]string{}}}, calls{"GetItem": 4, "TransactWriteItems": 1}}, // no re-read of the bot after the write (rd36)
		{"createEvent", apitest.Req{Method: "POST", Path: "/v1/chat/events", Headers: bot, Body: map[string]any{"type": "x", "payload": map[string]any{}}}, calls{"GetItem": 4, "TransactWriteItems": 1}},
		// Two messages: the conversation and the user read once each, one
		// created directly, one through the getOrCreate claim; no re-read
		// of the bot after the writes (both conditional on the
		// conversation, as createMessage's; 8 GetItems before).
		{"importMessages", apitest.Req{Method: "POST", Path: "/v1/chat/messages/import-messages", Headers: bot, Body: map[string]any{"messages": []map[string]any{
			msg("a", map[string]string{}, []string{}), msg("b", map[string]string{"ext": "1"}, []string{"ext"})}}}, calls{"GetItem": 7, "Query": 2, "TransactWriteItems": 2}},
		{"deleteTask", apitest.Req{Method: "DELETE", Path: "/v1/chat/tasks/" + task, Headers: bot}, calls{"GetItem": 5, "Query": 1, "BatchWriteItem": 1}},
		{"deleteKnowledgeBase", apitest.Req{Method: "DELETE", Path: "/v1/files/knowledge-bases/" + kb, Headers: bot}, calls{"GetItem": 5, "Query": 1, "DeleteItem": 1}},
	} {
		t.Run(tc.op, func(t *testing.T) {
			tc.req.Token = f.AdminToken
			status := 200
			if tc.op == "createTask" || tc.op == "createMessage" || tc.op == "createEvent" {
				status = 201
			}
			f.Check(f.Do(tc.req), status, tc.op)
			u := rec.of(tc.op)
			t.Logf("%-20s %s", tc.op, u)
			total := 0
			for op, n := range tc.want {
				total += n
				if got := u.Calls(op); got != n {
					t.Errorf("%s: %d %s calls, want %d (all: %s)", tc.op, got, op, n, u)
				}
			}
			if u.Calls("") != total {
				t.Errorf("%s: %d calls in all, want %d (%s)", tc.op, u.Calls(""), total, u)
			}
		})
	}
}
