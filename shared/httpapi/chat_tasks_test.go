package httpapi_test

import (
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// taskItems lists the stored task records and activities, and the events,
// of a bot (what a refused task call must not change).
func taskItems(f *fixture, bot string) []string {
	var out []string
	for _, k := range f.ItemsHolding(bot) {
		if strings.HasPrefix(k, "TASK#") || strings.HasPrefix(k, "EVT#") {
			out = append(out, k)
		}
	}
	return out
}

// Tasks: created pending, changed by updateTask, timed out at timeoutAt;
// each change reaches the bot as a task_update event through the runtime,
// and is an activity of listActivities.
func TestTasks(t *testing.T) {
	f := newRuntimeFixture(t, nil)
	h := map[string]string{"x-bot-id": f.botID}
	do := func(method, path string, body any, status int, op string) apitest.Response {
		t.Helper()
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: h, Body: body}), status, op)
	}
	conv := f.as(false, "POST", "/v1/chat/conversations", map[string]any{"channel": "web", "tags": map[string]string{}}, 201).Str("conversation.id")
	user := f.as(false, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	cr := do("POST", "/v1/chat/tasks", map[string]any{"type": "handoff", "title": "Help", "conversationId": conv, "userId": user,
		"data": map[string]any{"n": 1}, "tags": map[string]string{"k": "v"}}, 201, "createTask")
	id := cr.Str("task.id")
	if cr.Str("task.status") != "pending" || cr.Str("task.timeoutAt") == "" || cr.Str("task.description") != "" {
		t.Fatalf("createTask: %s", cr.Raw)
	}
	updates := func(kind string) []map[string]any {
		var out []map[string]any
		for _, c := range f.bot.of("event_received", "task_update") {
			p := c.Body["event"].(map[string]any)["payload"].(map[string]any)
			if p["type"] == kind {
				out = append(out, p["task"].(map[string]any))
			}
		}
		return out
	}
	eventually(t, "task_created", func() bool { return len(updates("task_created")) == 1 })
	if got := updates("task_created")[0]; got["id"] != id || got["type"] != "handoff" {
		t.Fatalf("task_created: %v", got)
	}
	do("GET", "/v1/chat/tasks/"+id, nil, 200, "getTask")
	list := func(q string) int {
		return len(do("GET", "/v1/chat/tasks"+q, nil, 200, "listTasks").List("tasks"))
	}
	child := do("POST", "/v1/chat/tasks", map[string]any{"type": "sub", "conversationId": conv, "parentTaskId": id}, 201, "createTask").Str("task.id")
	for q, want := range map[string]int{"": 2, "?type=handoff": 1, "?status=pending": 2, "?status=completed": 0, "?tags.k=v": 1, "?tags.k=w": 0,
		"?parentTaskId=" + id: 1, "?conversationId=" + conv + "&userId=" + user: 1, "?status=pending&status=failed&pageSize=1": 1} {
		if n := list(q); n != want {
			t.Fatalf("listTasks%s: %d, want %d", q, n, want)
		}
	}
	up := do("PUT", "/v1/chat/tasks/"+id, map[string]any{"status": "in_progress", "description": "on it", "tags": map[string]string{"k": ""}}, 200, "updateTask")
	if up.Str("task.status") != "in_progress" || up.Str("task.description") != "on it" || up.Str("task.title") != "Help" || up.Str("task.tags.k") != "" {
		t.Fatalf("updateTask: %s", up.Raw)
	}
	eventually(t, "task_updated", func() bool { return len(updates("task_updated")) == 1 })
	do("PUT", "/v1/chat/tasks/"+id, map[string]any{"status": "completed"}, 200, "updateTask")
	do("PUT", "/v1/chat/tasks/"+id, map[string]any{"status": "in_progress"}, 400, "") // ended for good

	// Activities: one per status, newest first, in pages.
	acts := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/activities?botId="+f.botID+"&taskId="+id, nil), 200, "listActivities").List("activities")
	if len(acts) != 3 || acts[0].(map[string]any)["data"].(map[string]any)["to"] != "completed" || acts[2].(map[string]any)["data"].(map[string]any)["to"] != "pending" {
		t.Fatalf("activities: %v", acts)
	}
	p1 := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/activities?botId="+f.botID+"&taskId="+id+"&pageSize=2", nil), 200, "listActivities")
	tok := p1.Str("meta.nextToken")
	p2 := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/activities?botId="+f.botID+"&taskId="+id+"&pageSize=2&nextToken="+tok, nil), 200, "listActivities")
	if len(p1.List("activities")) != 2 || tok == "" || len(p2.List("activities")) != 1 || p2.Str("meta.nextToken") != "" {
		t.Fatalf("activity pages: %s %s", p1.Raw, p2.Raw)
	}

	// Timeout: the task ends with the status timeout, and the bot hears of it.
	short := do("POST", "/v1/chat/tasks", map[string]any{"type": "quick", "conversationId": conv,
		"timeoutAt": time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)}, 201, "createTask").Str("task.id")
	eventually(t, "task_timedout", func() bool { return len(updates("task_timedout")) == 1 })
	if g := do("GET", "/v1/chat/tasks/"+short, nil, 200, "getTask"); g.Str("task.status") != "timeout" || g.Str("task.failureReason") == "" {
		t.Fatalf("timed out task: %s", g.Raw)
	}

	// Bad input: a 4xx, nothing written (no task, activity or event).
	time.Sleep(100 * time.Millisecond)
	before := taskItems(f.fixture, f.botID)
	long := strings.Repeat("x", 65)
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
	}{
		{"no type", "POST", "/v1/chat/tasks", map[string]any{"conversationId": conv}, 400},
		{"no conversation", "POST", "/v1/chat/tasks", map[string]any{"type": "x"}, 400},
		{"empty type", "POST", "/v1/chat/tasks", map[string]any{"type": "", "conversationId": conv}, 400},
		{"unknown conversation", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": "conv_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 404},
		{"unknown user", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "userId": "user_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 404},
		{"unknown parent", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "parentTaskId": "task_01ARZ3NDEKTSV4RRFFQ69G5FAV"}, 404},
		{"title too long", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "title": long}, 400},
		{"bad timeoutAt", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "timeoutAt": "soon"}, 400},
		{"data not an object", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "data": 3}, 400},
		{"unknown field", "POST", "/v1/chat/tasks", map[string]any{"type": "x", "conversationId": conv, "status": "pending"}, 400},
		{"bad status", "PUT", "/v1/chat/tasks/" + child, map[string]any{"status": "done"}, 400},
		{"description too long", "PUT", "/v1/chat/tasks/" + child, map[string]any{"description": strings.Repeat("y", 257)}, 400},
		{"update unknown task", "PUT", "/v1/chat/tasks/task_01ARZ3NDEKTSV4RRFFQ69G5FAV", map[string]any{"title": "t"}, 404},
		{"update done task", "PUT", "/v1/chat/tasks/" + short, map[string]any{"status": "pending"}, 400},
		{"delete unknown task", "DELETE", "/v1/chat/tasks/task_01ARZ3NDEKTSV4RRFFQ69G5FAV", nil, 404},
		{"list bad status", "GET", "/v1/chat/tasks?status=done", nil, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			do(tc.method, tc.path, tc.body, tc.status, "")
			if after := taskItems(f.fixture, f.botID); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Fatalf("written: %v -> %v", before, after)
			}
		})
	}
	for _, q := range []string{"?botId=" + f.botID, "?taskId=" + id, "?botId=" + f.botID + "&taskId=task_01ARZ3NDEKTSV4RRFFQ69G5FAV"} {
		r := f.ws_(f.AdminToken, "GET", "/v1/admin/activities"+q, nil)
		if r.Status != 400 && r.Status != 404 {
			t.Fatalf("listActivities%s: %d", q, r.Status)
		}
	}

	// Roles: a viewer reads tasks and activities, writes none.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	vh := map[string]string{"x-bot-id": f.botID}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/tasks/" + id, Token: viewer, Headers: vh}), 200, "getTask")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/tasks", Token: viewer, Headers: vh, Body: map[string]any{"type": "x", "conversationId": conv}}), 403, "")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/chat/tasks/" + id, Token: viewer, Headers: vh, Body: map[string]any{"title": "x"}}), 403, "")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/tasks/" + id, Token: viewer, Headers: vh}), 403, "")
	f.Check(f.ws_(viewer, "GET", "/v1/admin/activities?botId="+f.botID+"&taskId="+id, nil), 200, "listActivities")

	// Tenancy: another workspace's bot sees none of these tasks, and the
	// activities of a task through another workspace's bot are not found.
	other := newFixtureOn(f.fixture)
	obot := other.createBot(other.AdminToken, map[string]any{"name": "other"})
	oh := map[string]string{"x-bot-id": obot}
	f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/tasks/" + id, Token: f.AdminToken, Headers: oh}), 404, "")
	f.Check(f.Do(apitest.Req{Method: "PUT", Path: "/v1/chat/tasks/" + id, Token: f.AdminToken, Headers: oh, Body: map[string]any{"title": "x"}}), 404, "")
	f.Check(f.Do(apitest.Req{Method: "DELETE", Path: "/v1/chat/tasks/" + id, Token: f.AdminToken, Headers: oh}), 404, "")
	if n := len(f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/tasks", Token: f.AdminToken, Headers: oh}), 200, "listTasks").List("tasks")); n != 0 {
		t.Fatalf("other bot lists %d tasks", n)
	}
	f.Check(other.ws_(other.AdminToken, "GET", "/v1/admin/activities?botId="+f.botID+"&taskId="+id, nil), 404, "")
	f.Check(other.ws_(other.AdminToken, "GET", "/v1/admin/activities?botId="+obot+"&taskId="+id, nil), 404, "")

	// Delete: the task and its activities are gone.
	do("DELETE", "/v1/chat/tasks/"+id, nil, 200, "deleteTask")
	do("GET", "/v1/chat/tasks/"+id, nil, 404, "")
	if left := f.ItemsHolding("TASK#" + f.botID + "#" + id); len(left) != 0 {
		t.Fatalf("left after deleteTask: %v", left)
	}
}
