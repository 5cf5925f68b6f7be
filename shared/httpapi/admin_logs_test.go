package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// logsQuery renders the query string of a log call.
func logsQuery(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}

func iso(t time.Time) string { return platform.FormatTime(t) }

// writeLogs writes lines to the platform's embedded log store.
func writeLogs(t testing.TB, e *apitest.Env, lines ...platform.LogLine) {
	t.Helper()
	if err := e.Platform.Logs.Write(context.Background(), lines...); err != nil {
		t.Fatal(err)
	}
}

// logMessages pages through a log call and returns the messages, in order;
// every page is validated against the reference.
func (f *fixture) logMessages(t testing.TB, token, path, query string) []string {
	t.Helper()
	e := *f.Env // reports to t (a subtest must not fail its parent)
	e.T = t
	op := "getBotLogs"
	if strings.Contains(path, "/integrations/") {
		op = "getIntegrationLogs"
	}
	var out []string
	next := ""
	for i := 0; ; i++ {
		q := query
		if next != "" {
			q += "&nextToken=" + url.QueryEscape(next)
		}
		r := e.Check(e.Do(apitest.Req{Method: "GET", Path: path + q, Token: token, Headers: map[string]string{"x-workspace-id": f.ws}}), 200, op)
		for _, l := range r.List("logs") {
			out = append(out, l.(map[string]any)["message"].(string))
		}
		if next = r.Str("nextToken"); next == "" {
			return out
		}
		if i > 1000 {
			t.Fatal("paging does not end")
		}
	}
}

// TestBotLogs: the filters, the window, newest-first paging with signed
// tokens, and the wire shape of getBotLogs.
func TestBotLogs(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	bot := f.createBot(tok, nil)
	other := f.createBot(tok, nil)
	now := time.Now().UTC().Truncate(time.Millisecond)
	src := platform.LogSource{Kind: platform.LogBot, ID: bot}
	var lines []platform.LogLine
	for i := 0; i < 45; i++ {
		lines = append(lines, platform.LogLine{
			Source: src, Time: now.Add(-time.Duration(45-i) * time.Minute),
			Level:   []string{"info", "warn", "error"}[i%3],
			Message: fmt.Sprintf("m%02d", i), UserID: fmt.Sprintf("user_%d", i%2),
			ConversationID: fmt.Sprintf("conv_%d", i%5), WorkflowID: fmt.Sprintf("wf_%d", i%4),
		})
	}
	lines = append(lines,
		platform.LogLine{Source: src, Time: now.Add(-30 * time.Second), Level: "error", Message: `weird "quote" | pipe \ backslash .* [regex]`},
		platform.LogLine{Source: platform.LogSource{Kind: platform.LogBot, ID: other}, Time: now.Add(-time.Minute), Message: "m99 of the other bot"},
	)
	writeLogs(t, f.Env, lines...)

	path := "/v1/admin/bots/" + bot + "/logs"
	start := iso(now.Add(-time.Hour))
	r := f.Check(f.ws_(tok, "GET", path+logsQuery("timeStart", start), nil), 200, "getBotLogs")
	logs := r.List("logs")
	if len(logs) != 20 || r.Str("nextToken") == "" {
		t.Fatalf("first page: %d lines, nextToken %q", len(logs), r.Str("nextToken"))
	}
	first := logs[0].(map[string]any)
	if first["message"] != lines[45].Message || first["level"] != "error" || first["timestamp"] != iso(lines[45].Time) {
		t.Fatalf("newest line first: %v", first)
	}
	second := logs[1].(map[string]any)
	if second["message"] != "m44" || second["userId"] != "user_0" || second["conversationId"] != "conv_4" || second["workflowId"] != "wf_0" {
		t.Fatalf("line fields: %v", second)
	}

	for _, tc := range []struct {
		name  string
		query []string
		want  func(l platform.LogLine) bool
	}{
		{"all", nil, func(platform.LogLine) bool { return true }},
		{"level", []string{"level", "warn"}, func(l platform.LogLine) bool { return l.Level == "warn" }},
		{"userId", []string{"userId", "user_1"}, func(l platform.LogLine) bool { return l.UserID == "user_1" }},
		{"conversationId", []string{"conversationId", "conv_3"}, func(l platform.LogLine) bool { return l.ConversationID == "conv_3" }},
		{"workflowId", []string{"workflowId", "wf_2"}, func(l platform.LogLine) bool { return l.WorkflowID == "wf_2" }},
		{"messageContains", []string{"messageContains", "m1"}, func(l platform.LogLine) bool { return strings.HasPrefix(l.Message, "m1") }},
		{"messageContains quote pipe", []string{"messageContains", `"quote" | pipe \`}, func(l platform.LogLine) bool { return strings.Contains(l.Message, "quote") }},
		{"messageContains regex", []string{"messageContains", `.*`}, func(l platform.LogLine) bool { return strings.Contains(l.Message, ".*") }},
		{"messageContains no match", []string{"messageContains", `m.`}, func(platform.LogLine) bool { return false }},
		{"combined", []string{"level", "error", "userId", "user_0"}, func(l platform.LogLine) bool { return l.Level == "error" && l.UserID == "user_0" }},
		{"window", []string{"timeEnd", iso(now.Add(-20 * time.Minute))}, func(l platform.LogLine) bool { return !l.Time.After(now.Add(-20 * time.Minute)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := append([]string{"timeStart", start, "pageSize", "7"}, tc.query...)
			got := f.logMessages(t, tok, path, logsQuery(q...))
			var want []string
			for i := len(lines) - 2; i >= 0; i-- { // newest first, this bot only
				if l := lines[i]; l.Time.After(now.Add(-time.Hour)) && tc.want(l) {
					want = append(want, l.Message)
				}
			}
			if len(want) == 0 && tc.name != "messageContains no match" {
				t.Fatal("the case selects nothing")
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("got %q\nwant %q", got, want)
			}
		})
	}

	// Tokens are signed and bound to the list and its filters.
	next := r.Str("nextToken")
	f.Check(f.ws_(tok, "GET", path+logsQuery("timeStart", start, "nextToken", next), nil), 200, "getBotLogs")
	for _, q := range []string{
		logsQuery("timeStart", start, "nextToken", next, "level", "info"),
		logsQuery("timeStart", iso(now.Add(-2*time.Hour)), "nextToken", next),
		logsQuery("timeStart", start, "nextToken", next+"x"),
		logsQuery("timeStart", start, "nextToken", "e30.abc"),
	} {
		if r := f.ws_(tok, "GET", path+q, nil); r.Status != 400 {
			t.Fatalf("%s: %d %s", q, r.Status, r.Raw)
		}
	}
	if r := f.ws_(tok, "GET", "/v1/admin/bots/"+other+"/logs"+logsQuery("timeStart", start, "nextToken", next), nil); r.Status != 400 {
		t.Fatalf("a token of another bot's logs: %d", r.Status)
	}
}

func TestLogsBadInput(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	path := "/v1/admin/bots/" + bot + "/logs"
	now := time.Now()
	for _, tc := range []struct{ name, query string }{
		{"no timeStart", ""},
		{"empty timeStart", "?timeStart="},
		{"timeStart not a time", logsQuery("timeStart", "yesterday")},
		{"timeStart date only", logsQuery("timeStart", "2025-01-01")},
		{"timeEnd not a time", logsQuery("timeStart", iso(now), "timeEnd", "soon")},
		{"timeEnd before timeStart", logsQuery("timeStart", iso(now), "timeEnd", iso(now.Add(-time.Second)))},
		{"unknown level", logsQuery("timeStart", iso(now), "level", "fatal")},
		{"userId not an id", logsQuery("timeStart", iso(now), "userId", `u" | limit 1`)},
		{"conversationId not an id", logsQuery("timeStart", iso(now), "conversationId", "a b")},
		{"workflowId not an id", logsQuery("timeStart", iso(now), "workflowId", "/.*/")},
		{"messageContains too long", logsQuery("timeStart", iso(now), "messageContains", strings.Repeat("x", 501))},
		{"messageContains not UTF-8", "?timeStart=" + url.QueryEscape(iso(now)) + "&messageContains=%ff"},
		{"pageSize 0", logsQuery("timeStart", iso(now), "pageSize", "0")},
		{"pageSize 101", logsQuery("timeStart", iso(now), "pageSize", "101")},
		{"repeated level", logsQuery("timeStart", iso(now)) + "&level=info&level=warn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(f.AdminToken, "GET", path+tc.query, nil)
			if r.Status != 400 || r.Str("type") != "InvalidPayload" {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
	// Offsets are accepted and read as UTC.
	f.Check(f.ws_(f.AdminToken, "GET", path+logsQuery("timeStart", "2025-01-01T10:00:00+02:00", "timeEnd", "2025-01-01T09:00:00.5Z"), nil), 200, "getBotLogs")
}

// TestLogsAndIssuesAccess: a bot's logs and issues are reached only through
// its workspace (anything else is 404), viewers read, only developers
// delete, and a bot API key reads its own bot's.
func TestLogsAndIssuesAccess(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	bot := f.createBot(tok, nil)
	sibling := f.createBot(tok, nil)
	writeLogs(t, f.Env, platform.LogLine{Source: platform.LogSource{Kind: platform.LogBot, ID: bot}, Message: "secret line"})
	is, err := f.Platform.Store.RecordBotFailure(context.Background(), bot, platform.BotFailure{Code: "c", Title: "t", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	q := logsQuery("timeStart", iso(time.Now().Add(-time.Hour)))

	// Another workspace of the same account, and an outsider's workspace.
	otherWS := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	// The outsider is invited into another workspace only.
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Token: tok, Headers: map[string]string{"x-workspace-id": otherWS},
		Body: map[string]any{"email": "outsider@example.com", "role": "owner"}}), 200, "createWorkspaceMember")
	outsider := f.AccountToken("outsider@example.com")
	outsiderWS := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outsider, Body: map[string]any{"name": "Theirs"}}), 200, "createWorkspace").Str("id")

	paths := []string{
		"/v1/admin/bots/" + bot + "/logs" + q,
		"/v1/admin/bots/" + bot + "/issues",
		"/v1/admin/bots/" + bot + "/issues/" + is.ID,
		"/v1/admin/bots/" + bot + "/issues/" + is.ID + "/events",
	}
	for _, p := range paths {
		for _, c := range []struct {
			name, token, ws string
		}{
			{"another workspace of the account", tok, otherWS},
			{"an outsider in their own workspace", outsider, outsiderWS},
			{"an outsider naming the bot's workspace", outsider, f.ws},
		} {
			r := f.Do(apitest.Req{Method: "GET", Path: p, Token: c.token, Headers: map[string]string{"x-workspace-id": c.ws}})
			if r.Status != 404 {
				t.Fatalf("%s, %s: %d %s", p, c.name, r.Status, r.Raw)
			}
		}
		// Unknown and malformed ids are 404 too.
		for _, bad := range []string{"bot_01HZZZZZZZZZZZZZZZZZZZZZZZ", "nope"} {
			if r := f.ws_(tok, "GET", strings.Replace(p, bot, bad, 1), nil); r.Status != 404 {
				t.Fatalf("%s with bot %s: %d", p, bad, r.Status)
			}
		}
	}
	// An issue of another bot of the same workspace is not this bot's.
	for _, p := range []string{"/issues/" + is.ID, "/issues/" + is.ID + "/events"} {
		if r := f.ws_(tok, "GET", "/v1/admin/bots/"+sibling+p, nil); r.Status != 404 {
			t.Fatalf("issue through a sibling bot: %d", r.Status)
		}
	}
	if r := f.ws_(tok, "DELETE", "/v1/admin/bots/"+sibling+"/issues/"+is.ID, nil); r.Status != 404 {
		t.Fatalf("delete through a sibling bot: %d", r.Status)
	}
	for _, bad := range []string{"iss_01HZZZZZZZZZZZZZZZZZZZZZZZ", "x"} {
		if r := f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+bad, nil); r.Status != 404 {
			t.Fatalf("unknown issue %s: %d", bad, r.Status)
		}
	}

	// A viewer reads, and may not delete.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	msgs := f.logMessages(t, viewer, "/v1/admin/bots/"+bot+"/logs", q)
	if len(msgs) != 1 || msgs[0] != "secret line" {
		t.Fatalf("viewer reads: %v", msgs)
	}
	f.Check(f.ws_(viewer, "GET", "/v1/admin/bots/"+bot+"/issues", nil), 200, "listBotIssues")
	if r := f.ws_(viewer, "DELETE", "/v1/admin/bots/"+bot+"/issues/"+is.ID, nil); r.Status != 403 {
		t.Fatalf("viewer deletes an issue: %d", r.Status)
	}

	// The bot's own API key reads its bot's logs and issues, not another's.
	key := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": bot}), 200, "createBotApiKey").Str("value")
	f.Check(f.ws_(key, "GET", paths[0], nil), 200, "getBotLogs")
	f.Check(f.ws_(key, "GET", paths[1], nil), 200, "listBotIssues")
	f.Check(f.ws_(key, "GET", paths[2], nil), 200, "getBotIssue")
	f.Check(f.ws_(key, "GET", paths[3], nil), 200, "listBotIssueEvents")
	if r := f.ws_(key, "GET", "/v1/admin/bots/"+sibling+"/logs"+q, nil); r.Status != 403 {
		t.Fatalf("bot key on a sibling's logs: %d", r.Status)
	}
	if r := f.ws_(key, "DELETE", "/v1/admin/bots/"+bot+"/issues/"+is.ID, nil); r.Status != 403 {
		t.Fatalf("bot key deletes an issue: %d", r.Status)
	}
	if r := f.Do(apitest.Req{Method: "GET", Path: paths[0]}); r.Status != 401 {
		t.Fatalf("no token: %d", r.Status)
	}
}

func TestIntegrationLogs(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	intID := f.Check(f.ws_(tok, "POST", "/v1/admin/integrations", map[string]any{"name": "logger", "version": "0.1.0"}), 200, "createIntegration").Str("integration.id")
	now := time.Now().UTC()
	src := platform.LogSource{Kind: platform.LogIntegration, ID: intID}
	writeLogs(t, f.Env,
		platform.LogLine{Source: src, Time: now.Add(-2 * time.Minute), Level: "info", Message: "registered", UserID: "user_1"},
		platform.LogLine{Source: src, Time: now.Add(-time.Minute), Level: "error", Message: "webhook failed", ConversationID: "conv_1"},
	)
	path := "/v1/admin/integrations/" + intID + "/logs"
	start := iso(now.Add(-time.Hour))
	if got := f.logMessages(t, tok, path, logsQuery("timeStart", start)); strings.Join(got, ",") != "webhook failed,registered" {
		t.Fatalf("integration logs: %v", got)
	}
	if got := f.logMessages(t, tok, path, logsQuery("timeStart", start, "level", "error", "conversationId", "conv_1", "messageContains", "hook")); len(got) != 1 {
		t.Fatalf("filtered: %v", got)
	}
	// workflowId filters bot logs only.
	if r := f.ws_(tok, "GET", path+logsQuery("timeStart", start, "workflowId", "wf_1"), nil); r.Status != 400 {
		t.Fatalf("workflowId on integration logs: %d", r.Status)
	}
	if r := f.ws_(tok, "GET", path, nil); r.Status != 400 {
		t.Fatalf("no timeStart: %d", r.Status)
	}
	// The integration's own API key reads its logs.
	key := f.Check(f.ws_(tok, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": intID}), 200, "createIntegrationApiKey").Str("value")
	f.Check(f.ws_(key, "GET", path+logsQuery("timeStart", start), nil), 200, "getIntegrationLogs")

	// Another workspace cannot read them, even when the integration is
	// public (then it can read the integration itself).
	f.Check(f.ws_(tok, "PUT", "/v1/admin/integrations/"+intID, map[string]any{"public": true}), 200, "updateIntegration")
	other := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: tok, Body: map[string]any{"name": "Other"}}), 200, "createWorkspace").Str("id")
	get := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/integrations/" + intID, Token: tok, Headers: map[string]string{"x-workspace-id": other}})
	t.Logf("getIntegration of a public integration from another workspace: %d", get.Status)
	r := f.Do(apitest.Req{Method: "GET", Path: path + logsQuery("timeStart", start), Token: tok, Headers: map[string]string{"x-workspace-id": other}})
	if r.Status != 404 {
		t.Fatalf("another workspace reads the logs: %d %s", r.Status, r.Raw)
	}
	if r := f.ws_(tok, "GET", "/v1/admin/integrations/intver_01HZZZZZZZZZZZZZZZZZZZZZZZ/logs"+logsQuery("timeStart", start), nil); r.Status != 404 {
		t.Fatalf("unknown integration: %d", r.Status)
	}
}

// TestBotIssuesGrouping: 50 concurrent failures of one code make one issue
// with eventsCount 50 (and its latest events); other codes make their own
// issues; deleting an issue deletes its events, and the next failure of
// its code opens a new issue.
func TestBotIssuesGrouping(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	bot := f.createBot(tok, nil)
	// The store the failures are recorded with waits after each read, so
	// that concurrent failures all read before any of them writes: the
	// first occurrences really race to create the issue.
	store := slowReads(f.Env, 30*time.Millisecond)
	failure := func(code string, i int) platform.BotFailure {
		return platform.BotFailure{
			Code: code, Title: "The bot answered with HTTP 500", Description: "It failed.",
			GroupedData: map[string]platform.IssueValue{"statusCode": {Raw: "500", Pretty: "500 Internal Server Error"}},
			Data:        map[string]platform.IssueValue{"n": {Raw: fmt.Sprint(i)}},
		}
	}
	const n = 50
	var wg sync.WaitGroup
	var failed, creations atomic.Int32
	ids := make([]string, n)
	ready := make(chan struct{}) // all at once
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, u := dynamo.WithUsage(context.Background())
			defer func() { creations.Add(int32(u.Calls("TransactWriteItems"))) }()
			<-ready
			is, err := store.RecordBotFailure(ctx, bot, failure("bot_http_500", i))
			if err != nil {
				t.Error(err)
				failed.Add(1)
				return
			}
			ids[i] = is.ID
		}()
	}
	close(ready)
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	// The first occurrences raced: several tried to create the issue.
	t.Logf("%d concurrent failures: %d attempts to create the issue", n, creations.Load())
	if creations.Load() < 10 {
		t.Fatalf("only %d attempts to create the issue: the failures did not race", creations.Load())
	}
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("two issues for one code: %s and %s", ids[0], id)
		}
	}
	if _, err := store.RecordBotFailure(context.Background(), bot, failure("bot_no_answer", 0)); err != nil {
		t.Fatal(err)
	}

	l := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues", nil), 200, "listBotIssues")
	issues := l.List("issues")
	if len(issues) != 2 {
		t.Fatalf("issues: %s", l.Raw)
	}
	// Newest first: the second code's issue, then the grouped one.
	grouped := issues[1].(map[string]any)
	if grouped["id"] != ids[0] || grouped["code"] != "bot_http_500" || grouped["eventsCount"] != float64(n) ||
		grouped["category"] != "user_code" || grouped["resolutionLink"] != nil || grouped["title"] != "The bot answered with HTTP 500" {
		t.Fatalf("grouped issue: %v", grouped)
	}
	if grouped["lastSeenAt"].(string) < grouped["createdAt"].(string) {
		t.Fatalf("lastSeenAt before createdAt: %v", grouped)
	}
	g := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+ids[0], nil), 200, "getBotIssue")
	if g.Body["issue"].(map[string]any)["eventsCount"] != float64(n) || g.Str("issue.groupedData.statusCode.pretty") != "500 Internal Server Error" {
		t.Fatalf("getBotIssue: %s", g.Raw)
	}
	ev := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+ids[0]+"/events", nil), 200, "listBotIssueEvents")
	events := ev.List("issueEvents")
	if len(events) != n {
		t.Fatalf("%d events, want %d", len(events), n)
	}
	seen := map[string]bool{}
	for i, e := range events {
		m := e.(map[string]any)
		seen[m["data"].(map[string]any)["n"].(map[string]any)["raw"].(string)] = true
		if i > 0 && m["createdAt"].(string) > events[i-1].(map[string]any)["createdAt"].(string) {
			t.Fatal("events not newest first")
		}
	}
	if len(seen) != n {
		t.Fatalf("events of %d distinct failures, want %d", len(seen), n)
	}

	// Pagination of the issue list.
	p1 := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues?pageSize=1", nil), 200, "listBotIssues")
	p2 := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues?pageSize=1&nextToken="+url.QueryEscape(p1.Str("meta.nextToken")), nil), 200, "listBotIssues")
	if len(p1.List("issues")) != 1 || len(p2.List("issues")) != 1 || p2.List("issues")[0].(map[string]any)["id"] != ids[0] {
		t.Fatalf("pages: %s / %s", p1.Raw, p2.Raw)
	}
	if r := f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues?nextToken=garbage", nil); r.Status != 400 {
		t.Fatalf("bad token: %d", r.Status)
	}

	// Delete: gone with its events; the same code then opens a new issue.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot+"/issues/"+ids[0], nil), 200, "deleteBotIssue")
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+ids[0], nil), 404, "")
	f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+ids[0]+"/events", nil), 404, "")
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot+"/issues/"+ids[0], nil), 404, "")
	is, err := store.RecordBotFailure(context.Background(), bot, failure("bot_http_500", 99))
	if err != nil {
		t.Fatal(err)
	}
	if is.ID == ids[0] || is.EventsCount != 1 {
		t.Fatalf("after deletion: %+v", is)
	}
	ev = f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+is.ID+"/events", nil), 200, "listBotIssueEvents")
	if len(ev.List("issueEvents")) != 1 {
		t.Fatalf("events of the new issue: %s", ev.Raw)
	}
}

// slowReads is the platform's store over a DynamoDB client that waits d
// after every GetItem answer.
func slowReads(e *apitest.Env, d time.Duration) *dynamo.Store {
	opts := e.Platform.Store.Client().Options()
	client := dynamodb.New(opts, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("slowReads", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				if _, ok := in.Parameters.(*dynamodb.GetItemInput); ok {
					time.Sleep(d)
				}
				return out, md, err
			}), middleware.After)
		})
	})
	return dynamo.New(client, e.Platform.Env.Table)
}

// TestBotIssueEventsKeepTheLatest: an issue keeps its latest
// MaxIssueEvents events and counts them all.
func TestBotIssueEventsKeepTheLatest(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	var id string
	for i := 0; i < platform.MaxIssueEvents+20; i++ {
		is, err := f.Platform.Store.RecordBotFailure(context.Background(), bot, platform.BotFailure{
			Code: "c", Title: "t", Description: "d", Data: map[string]platform.IssueValue{"n": {Raw: fmt.Sprintf("%03d", i)}},
			At: time.Now().Add(time.Duration(i) * time.Millisecond),
		})
		if err != nil {
			t.Fatal(err)
		}
		id = is.ID
	}
	ev := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+bot+"/issues/"+id+"/events", nil), 200, "listBotIssueEvents")
	events := ev.List("issueEvents")
	if len(events) != platform.MaxIssueEvents {
		t.Fatalf("%d events kept", len(events))
	}
	newest := events[0].(map[string]any)["data"].(map[string]any)["n"].(map[string]any)["raw"]
	oldest := events[len(events)-1].(map[string]any)["data"].(map[string]any)["n"].(map[string]any)["raw"]
	if newest != fmt.Sprintf("%03d", platform.MaxIssueEvents+19) || oldest != "020" {
		t.Fatalf("kept events %v..%v", newest, oldest)
	}
	g := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+bot+"/issues/"+id, nil), 200, "getBotIssue")
	if g.Body["issue"].(map[string]any)["eventsCount"] != float64(platform.MaxIssueEvents+20) {
		t.Fatalf("eventsCount: %s", g.Raw)
	}
}

// TestDeliveryFailuresBecomeLogsAndIssues: a recurring event delivered to a
// bot that fails is logged in the bot's logs and grouped into a bot issue;
// once the bot recovers, deliveries are logged as delivered.
func TestDeliveryFailuresBecomeLogsAndIssues(t *testing.T) {
	f := newFixture(t)
	f.Platform.Scheduler.AllowSubMinute() // every second, to see firings within seconds
	tok := f.AdminToken
	var failing atomic.Bool
	failing.Store(true)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() {
			w.WriteHeader(500)
			w.Write([]byte("boom"))
		}
	}))
	t.Cleanup(srv.Close)
	every := map[string]any{"schedule": map[string]any{"cron": "* * * * * *"}, "type": "tick", "payload": map[string]any{}}
	bot := f.Check(f.ws_(tok, "POST", "/v1/admin/bots", map[string]any{"url": srv.URL, "recurringEvents": map[string]any{"tick": every}}), 200, "createBot").Str("bot.id")
	start := iso(time.Now().Add(-time.Minute))

	var issue map[string]any
	deadline := time.Now().Add(8 * time.Second)
	for time.Now().Before(deadline) {
		l := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues", nil), 200, "listBotIssues")
		if is := l.List("issues"); len(is) == 1 && is[0].(map[string]any)["eventsCount"].(float64) >= 2 {
			issue = is[0].(map[string]any)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if issue == nil {
		t.Fatalf("no issue after %d failed deliveries", hits.Load())
	}
	if issue["code"] != "bot_http_500" || issue["category"] != "user_code" ||
		issue["groupedData"].(map[string]any)["url"].(map[string]any)["raw"] != srv.URL {
		t.Fatalf("issue: %v", issue)
	}
	ev := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/issues/"+issue["id"].(string)+"/events", nil), 200, "listBotIssueEvents")
	data := ev.List("issueEvents")[0].(map[string]any)["data"].(map[string]any)
	if data["recurringEvent"].(map[string]any)["raw"] != "tick" || !strings.Contains(data["error"].(map[string]any)["raw"].(string), "500") {
		t.Fatalf("event data: %v", data)
	}
	errs := f.logMessages(t, tok, "/v1/admin/bots/"+bot+"/logs", logsQuery("timeStart", start, "level", "error"))
	if len(errs) < 2 || !strings.Contains(errs[0], `recurring event "tick"`) || !strings.Contains(errs[0], "answered 500: boom") {
		t.Fatalf("error lines: %q", errs)
	}

	failing.Store(false)
	deadline = time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if got := f.logMessages(t, tok, "/v1/admin/bots/"+bot+"/logs", logsQuery("timeStart", start, "level", "info", "messageContains", "delivered to the bot")); len(got) > 0 {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("no delivered line after the bot recovered")
}

// TestLogsAndIssuesDynamoDBCalls pins the DynamoDB calls of each operation
// (besides the token and membership reads every call makes).
func TestLogsAndIssuesDynamoDBCalls(t *testing.T) {
	f := newFixture(t)
	rec := recordUsage(f.Env)
	bot := f.createBot(f.AdminToken, nil)
	is, err := f.Platform.Store.RecordBotFailure(context.Background(), bot, platform.BotFailure{Code: "c", Title: "t", Description: "d"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op, method, path string
		want             map[string]int
	}{
		{"getBotLogs", "GET", "/v1/admin/bots/" + bot + "/logs" + logsQuery("timeStart", iso(time.Now().Add(-time.Hour))), map[string]int{"GetItem": 3}},
		{"listBotIssues", "GET", "/v1/admin/bots/" + bot + "/issues", map[string]int{"GetItem": 3, "Query": 1}},
		{"getBotIssue", "GET", "/v1/admin/bots/" + bot + "/issues/" + is.ID, map[string]int{"GetItem": 4}},
		{"listBotIssueEvents", "GET", "/v1/admin/bots/" + bot + "/issues/" + is.ID + "/events", map[string]int{"GetItem": 4, "Query": 1}},
		{"deleteBotIssue", "DELETE", "/v1/admin/bots/" + bot + "/issues/" + is.ID, map[string]int{"GetItem": 4, "TransactWriteItems": 1, "Query": 1, "BatchWriteItem": 1}},
	} {
		f.Check(f.ws_(f.AdminToken, tc.method, tc.path, nil), 200, tc.op)
		u := rec.of(tc.op)
		total := 0
		for op, n := range tc.want {
			total += n
			if got := u.Calls(op); got != n {
				t.Errorf("%s: %d %s, want %d (%s)", tc.op, got, op, n, u)
			}
		}
		if u.Calls("") != total {
			t.Errorf("%s: %s, want %v", tc.op, u, tc.want)
		}
		t.Logf("%-20s %s", tc.op, u)
	}
	// Recording a failure: GetItem, UpdateItem, PutItem once the issue exists.
	ctx, u := dynamo.WithUsage(context.Background())
	if _, err := f.Platform.Store.RecordBotFailure(ctx, bot, platform.BotFailure{Code: "c2", Title: "t", Description: "d"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("RecordBotFailure (first)  %s", u)
	ctx, u = dynamo.WithUsage(context.Background())
	if _, err := f.Platform.Store.RecordBotFailure(ctx, bot, platform.BotFailure{Code: "c2", Title: "t", Description: "d"}); err != nil {
		t.Fatal(err)
	}
	if u.Calls("GetItem") != 1 || u.Calls("UpdateItem") != 1 || u.Calls("PutItem") != 1 || u.Calls("") != 3 {
		t.Errorf("RecordBotFailure (again): %s", u)
	}
	t.Logf("RecordBotFailure (again)  %s", u)
}

// BenchmarkGetBotLogs: getBotLogs end to end on the local platform, a
// one-hour window, with history lines of the bot outside the window
// (sub-benchmarks of 10,000 and 100,000): time and lines read per page.
func BenchmarkGetBotLogs(b *testing.B) {
	for _, history := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("history=%d", history), func(b *testing.B) {
			e := apitest.New(b)
			f := &fixture{Env: e}
			f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "bench"}}), 200, "createWorkspace").Str("id")
			bot := f.createBot(e.AdminToken, nil)
			src := platform.LogSource{Kind: platform.LogBot, ID: bot}
			now := time.Now().UTC()
			// The window: the last hour, 1,000 lines (one every 3.6 s).
			// The history: 20 days before it, evenly.
			lines := make([]platform.LogLine, 0, history+1000)
			for i := 0; i < 1000; i++ {
				lines = append(lines, platform.LogLine{Source: src, Time: now.Add(-time.Duration(i) * 3600 * time.Millisecond), Level: "info", Message: fmt.Sprintf("recent line %d of a bot doing its work", i)})
			}
			step := 20 * 24 * time.Hour / time.Duration(history)
			for i := 0; i < history; i++ {
				lines = append(lines, platform.LogLine{Source: src, Time: now.Add(-time.Hour - time.Second - time.Duration(i)*step), Level: "info", Message: fmt.Sprintf("old line %d of a bot doing its work", i)})
			}
			writeLogs(b, e, lines...)
			path := "/v1/admin/bots/" + bot + "/logs" + logsQuery("timeStart", iso(now.Add(-time.Hour)), "timeEnd", iso(now), "pageSize", "100")
			// Each iteration reads the first page and the next one.
			scanned := e.Platform.Logs.Scanned()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r := f.Do(apitest.Req{Method: "GET", Path: path, Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": f.ws}})
				if r.Status != 200 || len(r.List("logs")) != 100 {
					b.Fatalf("%d %s", r.Status, r.Raw)
				}
				r = f.Do(apitest.Req{Method: "GET", Path: path + "&nextToken=" + url.QueryEscape(r.Str("nextToken")), Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": f.ws}})
				if r.Status != 200 || len(r.List("logs")) != 100 {
					b.Fatalf("%d %s", r.Status, r.Raw)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(e.Platform.Logs.Scanned()-scanned)/float64(2*b.N), "lines-read/page")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(2*b.N), "µs/page")
		})
	}
}

// TestDeleteBotIssues: the cleanup for a deleted bot removes its issues,
// their code items and events, and no other bot's.
func TestDeleteBotIssues(t *testing.T) {
	f := newFixture(t)
	bot := f.createBot(f.AdminToken, nil)
	other := f.createBot(f.AdminToken, nil)
	store := f.Platform.Store
	ctx := context.Background()
	var ids []string
	for _, b := range []string{bot, bot, other} {
		is, err := store.RecordBotFailure(ctx, b, platform.BotFailure{Code: "c" + fmt.Sprint(len(ids)), Title: "t", Description: "d"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, is.ID)
	}
	if err := store.DeleteBotIssues(ctx, bot); err != nil {
		t.Fatal(err)
	}
	if l := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+bot+"/issues", nil), 200, "listBotIssues"); len(l.List("issues")) != 0 {
		t.Fatalf("issues left: %s", l.Raw)
	}
	for _, id := range ids[:2] {
		if evs, err := store.ListBotIssueEvents(ctx, id); err != nil || len(evs) != 0 {
			t.Fatalf("events left: %v %v", evs, err)
		}
	}
	// The same code opens a new issue; the other bot keeps its own.
	if is, err := store.RecordBotFailure(ctx, bot, platform.BotFailure{Code: "c0", Title: "t", Description: "d"}); err != nil || is.ID == ids[0] {
		t.Fatalf("after cleanup: %+v %v", is, err)
	}
	if l := f.Check(f.ws_(f.AdminToken, "GET", "/v1/admin/bots/"+other+"/issues", nil), 200, "listBotIssues"); len(l.List("issues")) != 1 {
		t.Fatalf("the other bot's issues: %s", l.Raw)
	}
}
