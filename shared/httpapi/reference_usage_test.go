package httpapi_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/platform"
)

// TestUsage: the usage operations answer the counts the platform keeps
// (bots, integration versions, members, table rows), 0 for what it does
// not count; a foreign workspace or bot is a 404; bad types and periods
// are 400.
func TestUsage(t *testing.T) {
	f := newTablesFixture(t) // a workspace and one bot
	second := f.createBot(f.AdminToken, map[string]any{"name": "second"})
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.createIntegration(f.AdminToken, integrationDef("counted", "1.0.0", nil))
	f.createTable("countedTable", tschema(map[string]any{"n": tcol("number")}))
	f.rows("countedTable", map[string]any{"n": 1}, map[string]any{"n": 2}, map[string]any{"n": 3})
	other := newFixtureOn(f.fixture)
	stranger, _ := other.invite("stranger@example.com", "owner")
	foreignBot := other.createBot(f.AdminToken, map[string]any{"name": "theirs"})
	period := time.Now().UTC().Format("2006-01")

	get := func(token, id, typ string) apitest.Response {
		return f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + id + "?type=" + typ, Token: token})
	}
	for _, tc := range []struct {
		id, typ string
		want    float64
	}{
		{f.ws, "bot_count", 2},
		{f.ws, "integrations_owned_count", 1},
		{f.ws, "workspace_member_count", 2},
		{f.ws, "table_row_count", 3}, // the sum over its bots
		{f.bot, "table_row_count", 3},
		{second, "table_row_count", 0},
		{f.ws, "ai_spend", 0},
		{f.bot, "invocation_calls", 0},
	} {
		r := f.Check(get(viewer, tc.id, tc.typ), 200, "getUsage")
		u := r.Body["usage"].(map[string]any)
		if u["value"].(float64) != tc.want || u["id"] != tc.id || u["type"] != tc.typ || u["period"] != period {
			t.Fatalf("getUsage %s %s: %s, want value %v", tc.id, tc.typ, r.Raw, tc.want)
		}
	}
	if r := f.Check(get(viewer, f.bot, "file_max_size_bytes"), 200, "getUsage"); r.Body["usage"].(map[string]any)["quota"].(float64) <= 0 {
		t.Fatalf("file_max_size_bytes has the platform's file size limit as quota: %s", r.Raw)
	}

	ws := "/v1/admin/workspaces/" + f.ws
	ok := func(op, path string) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: "GET", Path: path, Token: viewer}), 200, op)
	}
	if r := ok("getMultipleUsages", "/v1/admin/usages/multiple?ids="+f.ws+"&types=bot_count&types=workspace_member_count"); len(r.List("usages")) != 2 {
		t.Fatalf("getMultipleUsages: %s", r.Raw)
	}
	if r := ok("listUsageHistory", "/v1/admin/usages/"+f.ws+"/history?type=bot_count"); len(r.List("usages")) != 1 {
		t.Fatalf("listUsageHistory: %s", r.Raw)
	}
	if r := ok("listUsageActivity", "/v1/admin/usages/"+f.bot+"/activity?type=invocation_calls"); len(r.List("data")) != 0 {
		t.Fatalf("listUsageActivity: %s", r.Raw)
	}
	ok("listUsageActivityDaily", "/v1/admin/usages/"+f.bot+"/daily-activity?type=invocation_calls")
	if r := ok("getWorkspaceQuota", ws+"/quota?type=bot_count"); r.Str("quota.type") != "bot_count" {
		t.Fatalf("getWorkspaceQuota: %s", r.Raw)
	}
	if r := ok("listWorkspaceQuotas", ws+"/quotas"); len(r.List("quotas")) != 15 {
		t.Fatalf("listWorkspaceQuotas: %s", r.Raw)
	}
	if r := ok("listWorkspaceUsages", ws+"/usages?type=table_row_count"); len(r.List("usages")) != 2 {
		t.Fatalf("listWorkspaceUsages per bot: %s", r.Raw)
	}
	byBot := ok("breakDownWorkspaceUsageByBot", ws+"/usages/by-bot?type=table_row_count")
	got := map[string]float64{}
	for _, e := range byBot.List("data") {
		m := e.(map[string]any)
		got[m["botId"].(string)] = m["value"].(float64)
	}
	if len(got) != 2 || got[f.bot] != 3 || got[second] != 0 {
		t.Fatalf("breakDownWorkspaceUsageByBot: %s", byBot.Raw)
	}
	if r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/usages/quota-completion", Token: f.AdminToken}), 200, "getAllWorkspaceQuotaCompletion"); r.Body[f.ws] == nil || r.Body[other.ws] == nil {
		t.Fatalf("getAllWorkspaceQuotaCompletion: %s", r.Raw)
	}

	for _, bad := range []struct {
		name   string
		token  string
		path   string
		status int
	}{
		{"foreign workspace", viewer, "/v1/admin/usages/" + other.ws + "?type=bot_count", 404},
		{"foreign bot", viewer, "/v1/admin/usages/" + foreignBot + "?type=table_row_count", 404},
		{"stranger's view of ours", stranger, "/v1/admin/usages/" + f.bot + "?type=table_row_count", 404},
		{"unknown id", viewer, "/v1/admin/usages/nope?type=bot_count", 404},
		{"unknown type", viewer, "/v1/admin/usages/" + f.ws + "?type=nope", 400},
		{"no type", viewer, "/v1/admin/usages/" + f.ws, 400},
		{"workspace type for a bot", viewer, "/v1/admin/usages/" + f.bot + "?type=bot_count", 400},
		{"past period", viewer, "/v1/admin/usages/" + f.ws + "?type=bot_count&period=2001-01", 400},
		{"bad period", viewer, "/v1/admin/usages/" + f.ws + "?type=bot_count&period=soon", 400},
		{"multiple: foreign id", viewer, "/v1/admin/usages/multiple?ids=" + f.ws + "," + other.ws + "&types=bot_count", 404},
		{"multiple: no types", viewer, "/v1/admin/usages/multiple?ids=" + f.ws, 400},
		{"quota of a foreign workspace", viewer, "/v1/admin/workspaces/" + other.ws + "/quota?type=bot_count", 404},
		{"quota: bad type", viewer, ws + "/quota?type=nope", 400},
		{"by bot: workspace type", viewer, ws + "/usages/by-bot?type=bot_count", 400},
		{"activity of a foreign bot", viewer, "/v1/admin/usages/" + foreignBot + "/activity?type=invocation_calls", 404},
	} {
		r := f.Do(apitest.Req{Method: "GET", Path: bad.path, Token: bad.token})
		if r.Status != bad.status {
			t.Fatalf("%s: %d %s, want %d", bad.name, r.Status, r.Raw, bad.status)
		}
		checkError(t, r)
	}
}

// TestUsageHistoryOfInvocations: invocation_calls, counted per bot and
// month, has a history: every month counted, newest first, the current
// period first even when empty; for a workspace, summed over its bots.
func TestUsageHistoryOfInvocations(t *testing.T) {
	f := newFixture(t)
	botA := f.createBot(f.AdminToken, nil)
	botB := f.createBot(f.AdminToken, nil)
	store := f.Platform.Store
	now := time.Now().UTC()
	count := func(bot string, at time.Time, n int) {
		restore := platform.Clock
		platform.Clock = func() time.Time { return at }
		defer func() { platform.Clock = restore }()
		for range n {
			if err := store.CountInvocation(t.Context(), bot); err != nil {
				t.Fatal(err)
			}
		}
	}
	twoAgo, oneAgo := now.AddDate(0, -2, -now.Day()+1), now.AddDate(0, -1, -now.Day()+1)
	count(botA, twoAgo, 3)
	count(botB, twoAgo, 2)
	count(botA, oneAgo, 1)
	count(botA, now, 4)
	history := func(id string) []string {
		r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/usages/" + id + "/history?type=invocation_calls", Token: f.AdminToken}), 200, "listUsageHistory")
		var out []string
		for _, u := range r.List("usages") {
			m := u.(map[string]any)
			out = append(out, fmt.Sprintf("%s=%v", m["period"], m["value"]))
		}
		return out
	}
	p := func(t time.Time, n int) string { return fmt.Sprintf("%s=%d", t.Format("2006-01"), n) }
	if got, want := history(botA), []string{p(now, 4), p(oneAgo, 1), p(twoAgo, 3)}; !slices.Equal(got, want) {
		t.Fatalf("bot A: %v, want %v", got, want)
	}
	if got, want := history(botB), []string{p(now, 0), p(twoAgo, 2)}; !slices.Equal(got, want) {
		t.Fatalf("bot B: %v, want %v", got, want)
	}
	if got, want := history(f.ws), []string{p(now, 4), p(oneAgo, 1), p(twoAgo, 5)}; !slices.Equal(got, want) {
		t.Fatalf("workspace: %v, want %v", got, want)
	}
}
