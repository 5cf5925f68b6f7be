package transfer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/transfer"
)

// echoBundle is a deployed bot (a CommonJS bundle as bp deploy sends it):
// on message_created it replies "echo: <text>" through the API.
const echoBundle = `'use strict'
const http = require('http')
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    if (req.url === '/health') { res.end('ok'); return }
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', () => {
      if (req.headers['x-bp-operation'] !== 'event_received' || req.headers['x-bp-type'] !== 'message_created') { res.end('{}'); return }
      const ev = JSON.parse(body).event
      const data = JSON.stringify({ conversationId: ev.conversationId, userId: req.headers['x-bot-id'], type: 'text', tags: {},
        payload: { text: 'echo: ' + ev.payload.message.payload.text } })
      const r = http.request(new URL('/v1/chat/messages', process.env.BP_API_URL), { method: 'POST', headers: {
        'content-type': 'application/json', authorization: 'Bearer ' + process.env.BP_TOKEN, 'x-bot-id': req.headers['x-bot-id'] } },
        (rr) => { rr.resume(); rr.on('end', () => { res.writeHead(rr.statusCode < 300 ? 200 : 500); res.end('{}') }) })
      r.end(data)
    })
  }).listen(port, '127.0.0.1')
} } }
`

// side is one platform of a round trip: its environment and workspace.
type side struct {
	*apitest.Env
	ws    string
	integ *httptest.Server
	intID string
}

func newSide(t *testing.T) *side {
	return setupSide(t, &side{Env: apitest.New(t)})
}

// setupSide makes the side's workspace and its integration "chan" 1.0.0
// (integration definitions are not in an archive: the target has its own
// of the same name and version).
func setupSide(t *testing.T, s *side) *side {
	s.ws = s.call("POST", "/v1/admin/workspaces", "", map[string]any{"name": "Acme"}, 200).Str("id")
	s.integ = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	t.Cleanup(s.integ.Close)
	s.intID = s.call("POST", "/v1/admin/integrations", "", map[string]any{
		"name": "chan", "version": "1.0.0", "url": s.integ.URL,
		"configuration": map[string]any{"schema": map[string]any{"type": "object", "properties": map[string]any{"apiKey": map[string]any{"type": "string"}}}},
		"channels":      map[string]any{"channel": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}},
	}, 200).Str("integration.id")
	return s
}

func (s *side) req(method, path, bot string, body any, alias bool) apitest.Response {
	h := map[string]string{"x-workspace-id": s.ws}
	if bot != "" {
		h["x-bot-id"] = bot
	}
	if alias {
		h["x-integration-alias"] = "chan"
	}
	return s.Do(apitest.Req{Method: method, Path: path, Token: s.AdminToken, Body: body, Headers: h})
}

func (s *side) call(method, path, bot string, body any, want int) apitest.Response {
	s.T.Helper()
	r := s.req(method, path, bot, body, false)
	if r.Status != want {
		s.T.Fatalf("%s %s: %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

type scale struct{ rows, messages, files int }

// seed fills the workspace with every kind of record the archive carries.
func seed(t *testing.T, s *side, sc scale) string {
	s.call("POST", "/v1/admin/workspace-members", "", map[string]any{"email": "dev@example.com", "role": "developer"}, 200)
	bot := s.call("POST", "/v1/admin/bots", "", map[string]any{"name": "support",
		"states": map[string]any{
			"profile": map[string]any{"type": "user", "schema": map[string]any{}},
			"context": map[string]any{"type": "conversation", "schema": map[string]any{}},
			"config":  map[string]any{"type": "bot", "schema": map[string]any{}},
		},
		"tags":   map[string]any{"team": "care"},
		"events": map[string]any{"ping": map[string]any{"schema": map[string]any{}}},
	}, 200).Str("bot.id")
	s.call("PUT", "/v1/admin/bots/"+bot, "", map[string]any{"integrations": map[string]any{"chan": map[string]any{
		"integrationId": s.intID, "enabled": true, "configuration": map[string]any{"apiKey": "s3cret"}}}}, 200)
	// Tables.
	s.call("POST", "/v1/tables", bot, map[string]any{"name": "itemsTable", "schema": map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string"}, "n": map[string]any{"type": "number"}}}, "tags": map[string]string{"k": "v"}}, 200)
	for done := 0; done < sc.rows; {
		n := min(1000, sc.rows-done)
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = map[string]any{"name": fmt.Sprintf("item %d", done+i), "n": done + i}
		}
		s.call("POST", "/v1/tables/itemsTable/rows", bot, map[string]any{"rows": rows}, 200)
		done += n
	}
	// A deleted row: ids keep their gap.
	s.call("POST", "/v1/tables/itemsTable/rows/delete", bot, map[string]any{"ids": []int{2}}, 200)
	// Knowledge bases and files.
	kbs := []string{
		s.call("POST", "/v1/files/knowledge-bases", bot, map[string]any{"name": "faq", "tags": map[string]string{}}, 200).Str("knowledgeBase.id"),
		s.call("POST", "/v1/files/knowledge-bases", bot, map[string]any{"name": "docs", "tags": map[string]string{}}, 200).Str("knowledgeBase.id"),
	}
	for i := 0; i < sc.files; i++ {
		content := strings.Repeat(fmt.Sprintf("Paragraph %d of file %d about refunds and shipping.\n\n", i, i), 20+i)
		r := s.call("PUT", "/v1/files", bot, map[string]any{"key": fmt.Sprintf("kb/doc-%02d.txt", i), "size": len(content), "contentType": "text/plain",
			"index": true, "tags": map[string]string{"kbId": kbs[i%2], "n": fmt.Sprint(i)}}, 200)
		req, _ := http.NewRequest("PUT", r.Str("file.uploadUrl"), strings.NewReader(content))
		req.Header.Set("Content-Type", "text/plain")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("upload: %v %v", err, resp)
		}
		resp.Body.Close()
	}
	// Users, conversations, participants, messages, events, states.
	var users, convs []string
	for i := 0; i < 10; i++ {
		users = append(users, s.req("POST", "/v1/chat/users", bot, map[string]any{"name": fmt.Sprintf("user %d", i), "tags": map[string]string{}}, true).Str("user.id"))
		convs = append(convs, s.req("POST", "/v1/chat/conversations", bot, map[string]any{"channel": "channel", "tags": map[string]string{}}, true).Str("conversation.id"))
		s.call("POST", "/v1/chat/conversations/"+convs[i]+"/participants", bot, map[string]any{"userId": users[i]}, 200)
		s.call("POST", "/v1/chat/states/user/"+users[i]+"/profile", bot, map[string]any{"payload": map[string]any{"plan": i}}, 200)
		s.call("POST", "/v1/chat/states/conversation/"+convs[i]+"/context", bot, map[string]any{"payload": map[string]any{"step": i}}, 200)
	}
	s.call("POST", "/v1/chat/states/bot/"+bot+"/config", bot, map[string]any{"payload": map[string]any{"mode": "live"}}, 200)
	for i := 0; i < 20; i++ {
		r := s.req("POST", "/v1/chat/messages", bot, map[string]any{"conversationId": convs[i%10], "userId": users[i%10], "type": "text",
			"payload": map[string]any{"text": fmt.Sprintf("live %d", i)}, "tags": map[string]string{}}, true)
		if r.Status != 201 {
			t.Fatalf("createMessage: %d %s", r.Status, r.Raw)
		}
	}
	for done := 20; done < sc.messages; {
		n := min(100, sc.messages-done)
		ms := make([]map[string]any, n)
		for i := range ms {
			k := done + i
			ms[i] = map[string]any{"conversationId": convs[k%10], "userId": users[k%10], "type": "text", "payload": map[string]any{"text": fmt.Sprintf("past %d", k)},
				"tags": map[string]string{}, "discriminateByTags": []string{}, "createdAt": time.Date(2025, 1, 1, 0, 0, k, 0, time.UTC).Format(time.RFC3339Nano)}
		}
		s.call("POST", "/v1/chat/messages/import-messages", bot, map[string]any{"messages": ms}, 200)
		done += n
	}
	s.call("POST", "/v1/chat/tasks", bot, map[string]any{"title": "call back", "description": "d", "type": "callback", "data": map[string]any{"x": 1},
		"conversationId": convs[0], "userId": users[0], "tags": map[string]string{}}, 201)
	s.call("POST", "/v1/chat/workflows", bot, map[string]any{"name": "onboarding", "input": map[string]any{}, "status": "pending",
		"conversationId": convs[1], "userId": users[1], "tags": map[string]string{}}, 201)
	// Deployed code last: the seeding above does not wake it.
	s.call("PUT", "/v1/admin/bots/"+bot, "", map[string]any{"code": echoBundle}, 200)
	return bot
}

// strip removes members named in drop at any depth.
func strip(v any, drop map[string]bool) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if drop[k] {
				delete(t, k)
				continue
			}
			t[k] = strip(x, drop)
		}
	case []any:
		for i := range t {
			t[i] = strip(t[i], drop)
		}
	}
	return v
}

// compareReads calls read operations on both sides and fails on the first
// answer that differs (besides the members each names as expected to).
type reader struct {
	t    *testing.T
	a, b *side
	bot  string
	n    int
}

func (r *reader) same(method, path string, body any, drop ...string) apitest.Response {
	r.t.Helper()
	ra := r.a.req(method, path, r.bot, body, false)
	rb := r.b.req(method, path, r.bot, body, false)
	if ra.Status != 200 || rb.Status != 200 {
		r.t.Fatalf("%s %s: %d on the source, %d on the target: %s / %s", method, path, ra.Status, rb.Status, ra.Raw, rb.Raw)
	}
	d := map[string]bool{}
	for _, k := range drop {
		d[k] = true
	}
	var va, vb any
	json.Unmarshal(ra.Raw, &va)
	json.Unmarshal(rb.Raw, &vb)
	va, vb = strip(va, d), strip(vb, d)
	if !reflect.DeepEqual(va, vb) {
		ja, _ := json.Marshal(va)
		jb, _ := json.Marshal(vb)
		r.t.Fatalf("%s %s differs:\nsource %s\ntarget %s", method, path, trunc(ja), trunc(jb))
	}
	r.n++
	return ra
}

func trunc(b []byte) string {
	if len(b) > 3000 {
		return string(b[:3000]) + "..."
	}
	return string(b)
}

// all pages of a list, compared page by page (the same nextTokens are not
// expected: they are signed by each platform) by following each side.
func (r *reader) list(path, field string, drop ...string) []map[string]any {
	r.t.Helper()
	var out []map[string]any
	collect := func(s *side) []any {
		var all []any
		tok := ""
		for {
			p := path
			if tok != "" {
				sep := "?"
				if strings.Contains(p, "?") {
					sep = "&"
				}
				p += sep + "nextToken=" + tok
			}
			res := s.req("GET", p, r.bot, nil, false)
			if res.Status != 200 {
				r.t.Fatalf("GET %s: %d %s", p, res.Status, res.Raw)
			}
			all = append(all, res.List(field)...)
			m, _ := res.Body["meta"].(map[string]any)
			tok, _ = m["nextToken"].(string)
			if tok == "" {
				return all
			}
		}
	}
	la, lb := collect(r.a), collect(r.b)
	d := map[string]bool{}
	for _, k := range drop {
		d[k] = true
	}
	if len(la) != len(lb) {
		r.t.Fatalf("%s: %d on the source, %d on the target", path, len(la), len(lb))
	}
	for i := range la {
		if !reflect.DeepEqual(strip(la[i], d), strip(lb[i], d)) {
			ja, _ := json.Marshal(la[i])
			jb, _ := json.Marshal(lb[i])
			r.t.Fatalf("%s [%d] differs:\nsource %s\ntarget %s", path, i, ja, jb)
		}
		m, _ := la[i].(map[string]any)
		out = append(out, m)
	}
	r.n++
	return out
}

func export(t *testing.T, s *side, out, pass string) transfer.Report {
	t.Helper()
	rep, err := transfer.Export{Client: &transfer.Client{URL: s.URL, Token: s.AdminToken}, Workspace: s.ws, Out: out, Passphrase: pass}.Run(context.Background())
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return rep
}

func importInto(t *testing.T, s *side, in, pass string, dry bool) transfer.ImportReport {
	t.Helper()
	rep, err := transfer.Import{Client: &transfer.Client{URL: s.URL, Token: s.AdminToken}, Workspace: s.ws, In: in, Passphrase: pass, DryRun: dry}.Run(context.Background())
	if err != nil {
		t.Fatalf("import: %v (%+v)", err, rep)
	}
	return rep
}

// TestRoundTrip: a workspace with every kind of record, exported from one
// platform and imported into another, answers every read the same on
// both (ids, contents, order, counts); importing again changes nothing;
// the bot still answers a user's message.
func TestRoundTrip(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "none")
	sc := scale{rows: 10000, messages: 1000, files: 50}
	if testing.Short() {
		sc = scale{rows: 1500, messages: 150, files: 6}
	}
	roundTrip(t, newSide(t), newSide(t), sc)
}

func roundTrip(t *testing.T, a, b *side, sc scale) {
	start := time.Now()
	bot := seed(t, a, sc)
	t.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))
	prepareTarget(b)

	dir := t.TempDir()
	file := filepath.Join(dir, "acme.bfa")
	start = time.Now()
	ex := export(t, a, file, "correct horse")
	t.Logf("export: %d entries, %d bytes in %s; notes: %v", ex.Entries, ex.Bytes, time.Since(start).Round(time.Millisecond), ex.Notes)

	dry := importInto(t, b, file, "correct horse", true)
	if dry.Created == 0 || dry.Conflicts != 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	if n := len(b.call("GET", "/v1/admin/bots", "", nil, 200).List("bots")); n != 0 {
		t.Fatalf("the dry run wrote: %d bots", n)
	}
	start = time.Now()
	im := importInto(t, b, file, "correct horse", false)
	t.Logf("import: %+v in %s", im, time.Since(start).Round(time.Millisecond))
	if im.Conflicts != 0 || im.Failed != 0 {
		t.Fatalf("import: %+v", im)
	}

	waitIndexed(t, b, bot, sc.files)
	r := &reader{t: t, a: a, b: b, bot: bot}
	compareAll(r, sc)
	t.Logf("%d read operations answer the same on both platforms", r.n)

	// Again: nothing changes.
	again := importInto(t, b, file, "correct horse", false)
	if again.Created != 0 || again.Conflicts != 0 || again.Failed != 0 {
		t.Fatalf("a second import changed something: %+v", again)
	}
	compareAll(r, sc)

	// A record changed on the target is a conflict, reported and kept.
	users := b.call("GET", "/v1/chat/users", bot, nil, 200).List("users")
	uid := users[0].(map[string]any)["id"].(string)
	b.call("PUT", "/v1/chat/users/"+uid, bot, map[string]any{"name": "renamed"}, 200)
	third := importInto(t, b, file, "correct horse", false)
	if third.Conflicts != 1 || third.Created != 0 {
		t.Fatalf("a changed user: %+v", third)
	}
	if n := b.call("GET", "/v1/chat/users/"+uid, bot, nil, 200).Str("user.name"); n != "renamed" {
		t.Fatalf("the conflict overwrote the target: %q", n)
	}

	// The bot answers on the target.
	if _, err := exec.LookPath("node"); err != nil {
		t.Log("node is not installed: the deployed bot's answer is not checked")
		return
	}
	conv := b.call("GET", "/v1/chat/conversations", bot, nil, 200).List("conversations")[0].(map[string]any)["id"].(string)
	parts := b.call("GET", "/v1/chat/conversations/"+conv+"/participants", bot, nil, 200).List("participants")
	user := parts[0].(map[string]any)["id"].(string)
	res := b.req("POST", "/v1/chat/messages", bot, map[string]any{"conversationId": conv, "userId": user, "type": "text",
		"payload": map[string]any{"text": "are you there?"}, "tags": map[string]string{}}, true)
	if res.Status != 201 {
		t.Fatalf("createMessage: %d %s", res.Status, res.Raw)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, m := range b.call("GET", "/v1/chat/messages?conversationId="+conv, bot, nil, 200).List("messages") {
			p, _ := m.(map[string]any)["payload"].(map[string]any)
			if p["text"] == "echo: are you there?" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the imported bot did not answer within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitIndexed waits for the target's files to leave indexing.
func waitIndexed(t *testing.T, s *side, bot string, n int) {
	deadline := time.Now().Add(60 * time.Second)
	for {
		done := 0
		tok := ""
		for {
			p := "/v1/files"
			if tok != "" {
				p += "?nextToken=" + tok
			}
			r := s.call("GET", p, bot, nil, 200)
			for _, f := range r.List("files") {
				st := f.(map[string]any)["status"]
				if st == "indexing_completed" || st == "upload_completed" || st == "indexing_failed" {
					done++
				}
			}
			m, _ := r.Body["meta"].(map[string]any)
			tok, _ = m["nextToken"].(string)
			if tok == "" {
				break
			}
		}
		if done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d files indexed after 60s", done, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func compareAll(r *reader, sc scale) {
	t := r.t
	bot := r.bot
	// Admin: the bot, its definition (the installation points at each
	// platform's own integration of the same name and version).
	r.list("/v1/admin/bots", "bots", "updatedAt", "deployedAt")
	r.same("GET", "/v1/admin/bots/"+bot, nil, "updatedAt", "deployedAt", "signingSecret", "webhookId", "id", "integrations", "createdBy")
	r.same("GET", "/v1/admin/bots/"+bot+"/bot-json", nil, "integrationId")
	mem := r.a.call("GET", "/v1/admin/workspace-members", "", nil, 200).List("members")
	memB := r.b.call("GET", "/v1/admin/workspace-members", "", nil, 200).List("members")
	if len(mem) != len(memB) {
		t.Fatalf("members: %d on the source, %d on the target", len(mem), len(memB))
	}
	// Tables: every row, in order.
	r.list("/v1/tables", "tables")
	r.same("GET", "/v1/tables/itemsTable", nil)
	rows := 0
	for off := 0; ; off += 1000 {
		res := r.same("POST", "/v1/tables/itemsTable/rows/find", map[string]any{"limit": 1000, "offset": off})
		n := len(res.List("rows"))
		rows += n
		if n < 1000 {
			break
		}
	}
	if rows != sc.rows-1 {
		t.Fatalf("%d rows, want %d", rows, sc.rows-1)
	}
	r.same("GET", "/v1/tables/itemsTable/row?id=1", nil)
	r.same("POST", "/v1/tables/itemsTable/rows/find", map[string]any{"filter": map[string]any{"n": map[string]any{"$gte": 500}}, "limit": 5, "orderBy": "n", "orderDirection": "desc"})
	// Files: records, contents, tags, passages, search; knowledge bases.
	files := r.list("/v1/files", "files", "url", "updatedAt")
	if len(files) != sc.files {
		t.Fatalf("%d files, want %d", len(files), sc.files)
	}
	for _, f := range files {
		id := f["id"].(string)
		r.same("GET", "/v1/files/"+id, nil, "url", "updatedAt")
		// Passage ids name the indexing run: the target indexes again (same
		// passages, in the same order, under its own run).
		r.list("/v1/files/"+id+"/passages", "passages", "id")
		ca := download(t, r.a, bot, id)
		cb := download(t, r.b, bot, id)
		if !bytes.Equal(ca, cb) || len(ca) == 0 {
			t.Fatalf("file %s: %d bytes on the source, %d on the target, or they differ", id, len(ca), len(cb))
		}
	}
	r.same("GET", "/v1/files/tags", nil)
	r.same("GET", "/v1/files/tags/kbId/values", nil)
	r.same("GET", "/v1/files/search?query=refunds", nil, "url", "updatedAt")
	r.list("/v1/files/knowledge-bases", "knowledgeBases")
	// Chat.
	users := r.list("/v1/chat/users", "users")
	convs := r.list("/v1/chat/conversations", "conversations")
	msgs := 0
	for _, c := range convs {
		id := c["id"].(string)
		r.same("GET", "/v1/chat/conversations/"+id, nil)
		r.list("/v1/chat/conversations/"+id+"/participants", "participants")
		msgs += len(r.list("/v1/chat/messages?conversationId="+id, "messages"))
		r.same("GET", "/v1/chat/states/conversation/"+id+"/context", nil)
	}
	if msgs != sc.messages {
		t.Fatalf("%d messages, want %d", msgs, sc.messages)
	}
	for _, u := range users {
		id := u["id"].(string)
		r.same("GET", "/v1/chat/users/"+id, nil)
		r.same("GET", "/v1/chat/states/user/"+id+"/profile", nil)
	}
	r.same("GET", "/v1/chat/states/bot/"+bot+"/config", nil)
	r.list("/v1/chat/messages", "messages")
	evs := r.list("/v1/chat/events", "events")
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	r.same("GET", "/v1/chat/events/"+evs[0]["id"].(string), nil)
	r.list("/v1/chat/tasks", "tasks")
	r.list("/v1/chat/workflows", "workflows")
}

func download(t *testing.T, s *side, bot, id string) []byte {
	u := s.call("GET", "/v1/files/"+id, bot, nil, 200).Str("file.url")
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}

var _ = sort.Strings

func eventTypes(s *side, bot string) []string {
	var out []string
	for _, e := range s.call("GET", "/v1/chat/events", bot, nil, 200).List("events") {
		m := e.(map[string]any)
		out = append(out, fmt.Sprint(m["type"], " ", m["id"], " ", m["status"]))
	}
	return out
}

// prepareTarget gives the target the account of the source's member (an
// account of another of its workspaces): members are imported for
// accounts the target knows.
func prepareTarget(b *side) {
	other := b.call("POST", "/v1/admin/workspaces", "", map[string]any{"name": "Other"}, 200).Str("id")
	b.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspace-members", Token: b.AdminToken, Body: map[string]any{"email": "dev@example.com", "role": "viewer"}, Headers: map[string]string{"x-workspace-id": other}})
}
