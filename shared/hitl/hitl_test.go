package hitl_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/hitl"
)

// fixture: a workspace with a bot that installed hitl, the bot's calls
// (the admin's token and x-bot-id, as an SDK bot under bp dev) and the
// agent API's.
type fixture struct {
	*apitest.Env
	t      *testing.T
	ws     string
	bot    string
	wsh    map[string]string
	bh     map[string]string
	sesses string // the agent API's sessions path
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{Env: apitest.New(t), t: t}
	pub := f.ok("GET", "/v1/admin/hub/integrations/hitl/latest", nil, nil, 200)
	intID := pub.Str("integration.id")
	if intID != builtin.IntegrationID(hitl.Name, hitl.Version) {
		t.Fatalf("hub: %s", pub.Raw)
	}
	if ifs := pub.Body["integration"].(map[string]any)["interfaces"].(map[string]any); ifs["hitl"].(map[string]any)["version"] != "2.1.0" {
		t.Fatalf("interfaces: %v", ifs)
	}
	f.ws = f.ok("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "support"}, 200).Str("id")
	f.wsh = map[string]string{"x-workspace-id": f.ws}
	f.bot = f.ok("POST", "/v1/admin/bots", f.wsh, map[string]any{"name": "b"}, 200).Str("bot.id")
	f.ok("PUT", "/v1/admin/bots/"+f.bot, f.wsh, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}}, 200)
	f.bh = map[string]string{"x-bot-id": f.bot}
	f.sesses = "/v1/admin/workspaces/" + f.ws + "/hitl/sessions"
	return f
}

func (f *fixture) as(tok, method, path string, hdr map[string]string, body any) apitest.Response {
	f.t.Helper()
	return f.Do(apitest.Req{Method: method, Path: path, Token: tok, Headers: hdr, Body: body})
}

func (f *fixture) ok(method, path string, hdr map[string]string, body any, status int) apitest.Response {
	f.t.Helper()
	return f.Check(f.as(f.AdminToken, method, path, hdr, body), status, "")
}

func (f *fixture) action(typ string, input map[string]any) map[string]any {
	f.t.Helper()
	return f.ok("POST", "/v1/chat/actions", f.bh, map[string]any{"type": typ, "input": input}, 200).Body["output"].(map[string]any)
}

// waitFor polls the agent API until cond holds on the session (the bot's
// messages reach the integration through the dispatcher, asynchronously).
func (f *fixture) waitFor(path, what string, cond func(apitest.Response) bool) apitest.Response {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := f.ok("GET", path, nil, nil, 200)
		if cond(r) {
			return r
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("%s: never: %s", what, r.Raw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (f *fixture) events(typ string) []any {
	return f.ok("GET", "/v1/chat/events?type="+typ, f.bh, nil, 200).List("events")
}

// TestHitlSession: the interface's actions, one session per user, the
// end user's relayed messages counted and shown, assign (hitlAssigned),
// reply (an incoming message of the agent's user), notes, close
// (hitlStopped), replies refused once closed, stopHitl from the bot.
func TestHitlSession(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Ada", "email": "ada@example.com"})["userId"].(string)
	start := map[string]any{"userId": uid, "title": "Refund", "description": "wants a refund", "messageHistory": []any{
		map[string]any{"source": map[string]any{"type": "user", "userId": uid}, "type": "text", "payload": map[string]any{"text": "I want a refund"}},
		map[string]any{"source": map[string]any{"type": "bot"}, "type": "text", "payload": map[string]any{"text": "Let me get a human"}},
	}}
	conv := f.action("hitl:startHitl", start)["conversationId"].(string)
	if again := f.action("hitl:startHitl", start)["conversationId"]; again != conv {
		t.Fatalf("starting twice gave %v and %v", conv, again)
	}
	c := f.ok("GET", "/v1/chat/conversations/"+conv, f.bh, nil, 200)
	if c.Str("conversation.channel") != "hitl" || c.Str("conversation.integration") != "hitl" {
		t.Fatalf("downstream conversation: %s", c.Raw)
	}
	list := f.ok("GET", f.sesses+"?status=waiting", nil, nil, 200)
	if s := list.List("sessions"); len(s) != 1 || s[0].(map[string]any)["title"] != "Refund" || s[0].(map[string]any)["botId"] != f.bot {
		t.Fatalf("waiting sessions: %s", list.Raw)
	}
	sp := f.sesses + "/" + f.bot + "/" + conv

	// The bot relays the end user's message (outgoing, payload.userId).
	f.ok("POST", "/v1/chat/messages", f.bh, map[string]any{"conversationId": conv, "userId": f.bot, "type": "text",
		"payload": map[string]any{"text": "are you there?", "userId": uid}, "tags": map[string]string{}}, 201)
	f.waitFor(f.sesses, "one unread message", func(r apitest.Response) bool {
		return len(r.List("sessions")) == 1 && r.List("sessions")[0].(map[string]any)["unread"] == 1.0
	})
	got := f.ok("GET", sp, nil, nil, 200)
	tr := got.List("transcript")
	if len(tr) != 3 || tr[0].(map[string]any)["role"] != "user" || tr[0].(map[string]any)["before"] != true ||
		tr[1].(map[string]any)["role"] != "bot" || tr[2].(map[string]any)["role"] != "user" ||
		!strings.Contains(fmt.Sprint(tr[2]), "are you there?") {
		t.Fatalf("transcript: %s", got.Raw)
	}
	if got.Str("session.status") != "waiting" || got.Body["session"].(map[string]any)["unread"] != 0.0 {
		t.Fatalf("read: %s", got.Raw)
	}

	// Assign to me: hitlAssigned to the bot, with the agent's user.
	as := f.ok("POST", sp+"/assign", nil, map[string]any{}, 200)
	agentUser := as.Str("session.agentUserId")
	if as.Str("session.status") != "assigned" || agentUser == "" {
		t.Fatalf("assign: %s", as.Raw)
	}
	ev := f.events("hitl:hitlAssigned")
	if len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]), agentUser) {
		t.Fatalf("hitlAssigned events: %v", ev)
	}
	if r := f.as(f.AdminToken, "GET", f.sesses+"?status=open", nil, nil); r.Status != 400 || !strings.Contains(r.Str("message"), "waiting, assigned, closed, mine") {
		t.Errorf("an unknown status: %d %s", r.Status, r.Raw)
	}
	if mine := f.ok("GET", f.sesses+"?status=mine", nil, nil, 200).List("sessions"); len(mine) != 1 {
		t.Fatalf("mine: %v", mine)
	}

	// Reply: an incoming message of the agent's user in the downstream
	// conversation (the bot relays it upstream).
	rep := f.ok("POST", sp+"/messages", nil, map[string]any{"type": "text", "payload": map[string]any{"text": "Hello, I am here"}}, 200)
	if rep.Str("message.direction") != "incoming" || rep.Str("message.userId") != agentUser {
		t.Fatalf("reply: %s", rep.Raw)
	}
	f.ok("POST", sp+"/messages", nil, map[string]any{"type": "image", "payload": map[string]any{"imageUrl": "https://example.com/a.png"}}, 200)
	msgs := f.ok("GET", "/v1/chat/messages?conversationId="+conv, f.bh, nil, 200).List("messages")
	if len(msgs) != 3 {
		t.Fatalf("downstream messages: %v", msgs)
	}
	for _, bad := range []map[string]any{
		{"type": "carousel", "payload": map[string]any{}},
		{"type": "text", "payload": "x"},
		{"type": "text", "payload": map[string]any{"text": "x"}, "extra": 1},
	} {
		if r := f.as(f.AdminToken, "POST", sp+"/messages", nil, bad); r.Status != 400 {
			t.Errorf("bad reply %v: %d %s", bad, r.Status, r.Raw)
		}
	}

	// Notes stay with the agents.
	n := f.ok("POST", sp+"/notes", nil, map[string]any{"text": "VIP customer"}, 200)
	if notes := n.Body["session"].(map[string]any)["notes"].([]any); len(notes) != 1 {
		t.Fatalf("notes: %s", n.Raw)
	}
	got = f.ok("GET", sp, nil, nil, 200)
	if tr := got.List("transcript"); len(tr) != 5 || tr[3].(map[string]any)["role"] != "agent" || tr[4].(map[string]any)["type"] != "image" {
		t.Fatalf("transcript after replies: %s", got.Raw)
	}

	// Close: hitlStopped to the bot; then replies are refused.
	cl := f.ok("POST", sp+"/close", nil, nil, 200)
	if cl.Str("session.status") != "closed" || cl.Str("session.closedBy") != "agent" {
		t.Fatalf("close: %s", cl.Raw)
	}
	if ev := f.events("hitl:hitlStopped"); len(ev) != 1 || !strings.Contains(fmt.Sprint(ev[0]), conv) {
		t.Fatalf("hitlStopped events: %v", ev)
	}
	for _, p := range []string{"/messages", "/assign", "/close"} {
		r := f.as(f.AdminToken, "POST", sp+p, nil, map[string]any{"type": "text", "payload": map[string]any{"text": "late"}})
		if p == "/assign" || p == "/close" {
			r = f.as(f.AdminToken, "POST", sp+p, nil, nil)
		}
		if r.Status != 409 || !strings.Contains(r.Str("message"), "closed") {
			t.Errorf("%s on a closed session: %d %s", p, r.Status, r.Raw)
		}
	}

	// A new start after the close is a new session; the bot's stopHitl
	// closes it (closedBy bot, no hitlStopped back).
	conv2 := f.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"].(string)
	if conv2 == conv {
		t.Fatal("a start after the close reopened the closed session")
	}
	f.action("hitl:stopHitl", map[string]any{"conversationId": conv2})
	if s := f.ok("GET", f.sesses+"/"+f.bot+"/"+conv2, nil, nil, 200); s.Str("session.status") != "closed" || s.Str("session.closedBy") != "bot" {
		t.Fatalf("after stopHitl: %s", s.Raw)
	}
	if ev := f.events("hitl:hitlStopped"); len(ev) != 1 {
		t.Fatalf("stopHitl echoed hitlStopped: %v", ev)
	}
	f.action("hitl:stopHitl", map[string]any{"conversationId": conv2}) // twice: nothing to do

	// Audit: each write names the member.
	recs := f.ok("GET", "/v1/admin/workspaces/"+f.ws+"/audit-records", nil, nil, 200)
	for _, op := range []string{"assignHitlSession", "replyHitlSession", "noteHitlSession", "closeHitlSession"} {
		if !strings.Contains(string(recs.Raw), `"value":"`+op+`"`) {
			t.Errorf("no audit record of %s: %s", op, recs.Raw)
		}
	}
	if strings.Contains(string(recs.Raw), `"userId":null`) {
		t.Errorf("an audit record names no member: %s", recs.Raw)
	}
}

// TestHitlStartOnce: concurrent starts for one user give one session.
func TestHitlStartOnce(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Bo"})["userId"].(string)
	var mu sync.Mutex
	got := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := f.as(f.AdminToken, "POST", "/v1/chat/actions", f.bh, map[string]any{"type": "hitl:startHitl", "input": map[string]any{"userId": uid, "messageHistory": []any{}}})
			mu.Lock()
			defer mu.Unlock()
			if r.Status != 200 {
				t.Errorf("start: %d %s", r.Status, r.Raw)
				return
			}
			got[r.Body["output"].(map[string]any)["conversationId"].(string)] = true
		}()
	}
	wg.Wait()
	if len(got) != 1 {
		t.Fatalf("concurrent starts gave %d sessions: %v", len(got), got)
	}
	if s := f.ok("GET", f.sesses, nil, nil, 200).List("sessions"); len(s) != 1 {
		t.Fatalf("sessions: %v", s)
	}
	convs := f.ok("GET", "/v1/chat/conversations?integrationName=hitl", f.bh, nil, 200).List("conversations")
	if len(convs) != 1 {
		t.Fatalf("the losers' conversations were left: %d", len(convs))
	}
}

// TestHitlAccess: members only, the lowest answering role (default
// developer); a viewer reads; another workspace's member, a bot key and an
// end user's key get nothing on any operation.
func TestHitlAccess(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Cy"})["userId"].(string)
	conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"].(string)
	sp := f.sesses + "/" + f.bot + "/" + conv

	invite := func(ws, email, role string) string {
		f.ok("POST", "/v1/admin/workspace-members", map[string]string{"x-workspace-id": ws}, map[string]any{"email": email, "role": role}, 200)
		return f.AccountToken(email)
	}
	viewer := invite(f.ws, "viewer@example.com", "viewer")
	billing := invite(f.ws, "billing@example.com", "billing")
	dev := invite(f.ws, "dev@example.com", "developer")
	otherWS := f.ok("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "other"}, 200).Str("id")
	outsider := invite(otherWS, "outsider@example.com", "owner")
	botKey := f.ok("POST", "/v1/admin/bots/baks", f.wsh, map[string]any{"botId": f.bot}, 200).Str("value")
	// A real end user's key: a user of the bot's chat integration.
	chatID := f.ok("GET", "/v1/admin/hub/integrations/chat/latest", nil, nil, 200).Str("integration.id")
	f.ok("PUT", "/v1/admin/bots/"+f.bot, f.wsh, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true, "configuration": map[string]any{}}}}, 200)
	chatURL := f.ok("GET", "/v1/admin/bots/"+f.bot, f.wsh, nil, 200).Body["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)["webhookUrl"].(string)
	endUserKey := f.Check(f.Do(apitest.Req{Method: "POST", URL: chatURL + "/users", Body: map[string]any{}}), 201, "").Str("key")
	if endUserKey == "" {
		t.Fatal("no end user key")
	}

	ops := []struct {
		method, path string
		body         any
		write        bool
	}{
		{"GET", f.sesses, nil, false},
		{"GET", sp, nil, false},
		{"POST", sp + "/notes", map[string]any{"text": "n"}, true},
		{"POST", sp + "/assign", map[string]any{}, true},
		{"POST", sp + "/messages", map[string]any{"type": "text", "payload": map[string]any{"text": "hi"}}, true},
		{"POST", sp + "/close", nil, true},
	}
	for _, op := range ops {
		for _, who := range []struct {
			name, tok string
			want      []int
		}{
			{"another workspace's member", outsider, []int{404}},
			{"a bot key", botKey, []int{403}},
			{"an end user's key", endUserKey, []int{401}},
			{"no token", "", []int{401}},
		} {
			r := f.as(who.tok, op.method, op.path, nil, op.body)
			if r.Status != who.want[0] {
				t.Errorf("%s %s by %s: %d %s", op.method, op.path, who.name, r.Status, r.Raw)
			}
		}
		for _, who := range []struct{ name, tok string }{{"viewer", viewer}, {"billing", billing}} {
			r := f.as(who.tok, op.method, op.path, nil, op.body)
			if want := map[bool]int{false: 200, true: 403}[op.write]; r.Status != want {
				t.Errorf("%s %s by a %s: %d %s, want %d", op.method, op.path, who.name, r.Status, r.Raw, want)
			}
		}
	}
	// Unknown sessions, and a session named under another workspace's path.
	otherBot := f.ok("POST", "/v1/admin/bots", map[string]string{"x-workspace-id": otherWS}, map[string]any{"name": "o"}, 200).Str("bot.id")
	for _, p := range []string{
		f.sesses + "/" + f.bot + "/conv_nope",
		f.sesses + "/" + f.bot + "/nope",
		f.sesses + "/" + otherBot + "/" + conv,
		"/v1/admin/workspaces/" + otherWS + "/hitl/sessions/" + f.bot + "/" + conv,
	} {
		if r := f.as(f.AdminToken, "GET", p, nil, nil); r.Status != 404 {
			t.Errorf("GET %s: %d %s", p, r.Status, r.Raw)
		}
	}
	// Assign to another member who may answer; not to a viewer.
	devID := f.as(dev, "GET", "/v1/admin/account/me", nil, nil).Str("account.id")
	if devID == "" {
		devID = f.as(dev, "GET", "/v1/admin/account/me", nil, nil).Str("id")
	}
	as := f.ok("POST", sp+"/assign", nil, map[string]any{"accountId": devID}, 200)
	if as.Str("session.assigneeId") != devID || as.Str("session.assigneeEmail") != "dev@example.com" {
		t.Fatalf("assign to another member: %s", as.Raw)
	}
	if mine := f.as(dev, "GET", f.sesses+"?status=mine", nil, nil); len(mine.List("sessions")) != 1 {
		t.Fatalf("the developer's sessions: %s", mine.Raw)
	}
	viewerID := f.as(viewer, "GET", "/v1/admin/account/me", nil, nil).Str("account.id")
	if r := f.as(f.AdminToken, "POST", sp+"/assign", nil, map[string]any{"accountId": viewerID}); r.Status != 400 {
		t.Errorf("assign to a viewer: %d %s", r.Status, r.Raw)
	}
	if r := f.as(dev, "POST", sp+"/messages", nil, map[string]any{"type": "text", "payload": map[string]any{"text": "dev here"}}); r.Status != 200 {
		t.Errorf("the developer's reply: %d %s", r.Status, r.Raw)
	}
}

// TestHitlSurvivesRestart: sessions are in the store: a new platform over
// the same data finds them, and the open claim still holds.
func TestHitlSurvivesRestart(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Di"})["userId"].(string)
	conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "title": "T", "messageHistory": []any{}})["conversationId"].(string)
	f.Close()
	g := &fixture{Env: apitest.Open(t, f.DataDir), t: t, ws: f.ws, bot: f.bot, bh: f.bh, wsh: f.wsh, sesses: f.sesses}
	g.AdminToken = f.AdminToken
	if s := g.ok("GET", g.sesses+"/"+g.bot+"/"+conv, nil, nil, 200); s.Str("session.title") != "T" || s.Str("session.status") != "waiting" {
		t.Fatalf("after a restart: %s", s.Raw)
	}
	if again := g.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"]; again != conv {
		t.Fatalf("after a restart, a start gave %v, not the open %s", again, conv)
	}
}

// TestHitlLongHistory: a history larger than a record holds keeps its
// newest items (the start does not fail).
func TestHitlLongHistory(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Flo"})["userId"].(string)
	hist := []any{}
	for i := 0; i < 150; i++ {
		hist = append(hist, map[string]any{"source": map[string]any{"type": "bot"}, "type": "text", "payload": map[string]any{"text": fmt.Sprintf("%03d %s", i, strings.Repeat("x", 3000))}})
	}
	conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": hist})["conversationId"].(string)
	tr := f.ok("GET", f.sesses+"/"+f.bot+"/"+conv, nil, nil, 200).List("transcript")
	if len(tr) == 0 || len(tr) >= 150 || !strings.HasPrefix(tr[len(tr)-1].(map[string]any)["payload"].(map[string]any)["text"].(string), "149 ") {
		t.Fatalf("the history kept: %d items", len(tr))
	}
}

// TestHitlDeletedWithTheBot: a deleted bot's sessions and claims go with
// its data, and the workspace's list no longer shows them.
func TestHitlDeletedWithTheBot(t *testing.T) {
	f := newFixture(t)
	uid := f.action("hitl:createUser", map[string]any{"name": "Gus"})["userId"].(string)
	conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"].(string)
	hitlItems := func() []string {
		var out []string
		for _, k := range f.ItemsHolding(conv) {
			if strings.Contains(k, "HITL#") {
				out = append(out, k)
			}
		}
		return out
	}
	if n := len(hitlItems()); n < 2 {
		t.Fatalf("fixture: %d hitl items", n)
	}
	f.ok("DELETE", "/v1/admin/bots/"+f.bot, f.wsh, nil, 200)
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, err := f.Platform.Store.PendingDeletions(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d deletions still pending", n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left := hitlItems(); len(left) > 0 {
		t.Fatalf("the deleted bot's hitl items remain: %v", left)
	}
	if s := f.ok("GET", f.sesses, nil, nil, 200).List("sessions"); len(s) != 0 {
		t.Fatalf("listed after the bot's deletion: %v", s)
	}
}

// TestHitlAgentRoleSetting: PLATFORM_HITL_AGENT_ROLE sets the lowest role
// that answers; viewer (or nonsense) is the default, developer.
func TestHitlAgentRoleSetting(t *testing.T) {
	for _, tc := range []struct {
		setting      string
		devMayAnswer bool
	}{
		{"manager", false},
		{"billing", true},
		{"viewer", true},
		{"nonsense", true},
	} {
		t.Run(tc.setting, func(t *testing.T) {
			t.Setenv("PLATFORM_HITL_AGENT_ROLE", tc.setting)
			f := newFixture(t)
			uid := f.action("hitl:createUser", map[string]any{"name": "Hal"})["userId"].(string)
			conv := f.action("hitl:startHitl", map[string]any{"userId": uid, "messageHistory": []any{}})["conversationId"].(string)
			f.ok("POST", "/v1/admin/workspace-members", f.wsh, map[string]any{"email": "dev@example.com", "role": "developer"}, 200)
			f.ok("POST", "/v1/admin/workspace-members", f.wsh, map[string]any{"email": "viewer@example.com", "role": "viewer"}, 200)
			sp := f.sesses + "/" + f.bot + "/" + conv
			r := f.as(f.AccountToken("dev@example.com"), "POST", sp+"/notes", nil, map[string]any{"text": "n"})
			if want := map[bool]int{true: 200, false: 403}[tc.devMayAnswer]; r.Status != want {
				t.Errorf("a developer's note: %d %s, want %d", r.Status, r.Raw, want)
			}
			if r := f.as(f.AccountToken("viewer@example.com"), "POST", sp+"/notes", nil, map[string]any{"text": "n"}); r.Status != 403 {
				t.Errorf("a viewer's note: %d %s", r.Status, r.Raw)
			}
		})
	}
}
