package assistant_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/assistant"
	"github.com/botforge/platform/shared/llm/llmtest"
)

func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: deployed code cannot run here")
	}
}

// docs writes the test's documents: the answer (the refund window) is only
// in refunds.pdf; shipping.md is about something else.
func docs(t *testing.T) []string {
	dir := t.TempDir()
	files := map[string]string{
		"refunds.pdf": string(samplePDF([]string{"Refunds", "Customers of Zorblax Corp may ask for a refund within 37 days of delivery, with the receipt."})),
		"shipping.md": "# Shipping\n\nParcels leave the Zorblax warehouse every Tuesday by boat.\n",
	}
	var out []string
	for name, text := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

type chat struct {
	env        *apitest.Env
	bot, conv  string
	user       string
	lastTurnAt time.Time
}

// newChat opens a conversation of the bot's webchat as an end user's (the
// messages written as the webchat integration are the user's, incoming).
func newChat(t *testing.T, env *apitest.Env, bot string) *chat {
	c := &chat{env: env, bot: bot}
	h := map[string]string{"x-bot-id": bot, "x-integration-alias": "webchat"}
	c.conv = env.Check(env.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: env.AdminToken, Headers: h,
		Body: map[string]any{"channel": "channel", "tags": map[string]string{}}}), 201, "").Str("conversation.id")
	c.user = env.Check(env.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: env.AdminToken, Headers: h,
		Body: map[string]any{"tags": map[string]string{}}}), 201, "").Str("user.id")
	return c
}

// ask sends the user's text and waits for the bot's answer to it.
func (c *chat) ask(t *testing.T, text string) (reply map[string]any) {
	t.Helper()
	h := map[string]string{"x-bot-id": c.bot, "x-integration-alias": "webchat"}
	id := c.env.Check(c.env.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: c.env.AdminToken, Headers: h,
		Body: map[string]any{"conversationId": c.conv, "userId": c.user, "type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}}}), 201, "").Str("message.id")
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := c.env.Check(c.env.Do(apitest.Req{Method: "GET", Path: "/v1/chat/messages?conversationId=" + c.conv, Token: c.env.AdminToken,
			Headers: map[string]string{"x-bot-id": c.bot}}), 200, "")
		for _, m := range r.List("messages") {
			m := m.(map[string]any)
			if tags, _ := m["tags"].(map[string]any); tags["assistantTurn"] == id {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer to %q within 30 s", text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func text(m map[string]any) string {
	p, _ := m["payload"].(map[string]any)
	s, _ := p["text"].(string)
	return s
}

// turn reads the bot's log line of the turn answered by reply (the
// emulator's way: getBotLogs, messageContains).
func turn(t *testing.T, env *apitest.Env, ws, bot, conv, replyID string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		q := "timeStart=" + time.Now().Add(-time.Hour).UTC().Format(time.RFC3339) + "&pageSize=100&messageContains=" +
			strings.ReplaceAll(strings.ReplaceAll(`assistant.turn {"conversationId":"`+conv+`"`, " ", "%20"), `"`, "%22")
		r := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot + "/logs?" + q, Token: env.AdminToken,
			Headers: map[string]string{"x-workspace-id": ws}}), 200, "")
		for _, l := range r.List("logs") {
			msg, _ := l.(map[string]any)["message"].(string)
			_, js, _ := strings.Cut(msg, " ")
			var tr map[string]any
			if json.Unmarshal([]byte(js), &tr) == nil && tr["replyId"] == replyID {
				return tr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no assistant.turn line for reply %s", replyID)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// messagesText is everything the provider was sent in one request.
func messagesText(r llmtest.Recorded) (system string, all []map[string]any) {
	msgs, _ := r.Body["messages"].([]any)
	for _, m := range msgs {
		m := m.(map[string]any)
		all = append(all, m)
		if m["role"] == "system" {
			system, _ = m["content"].(string)
		}
	}
	return system, all
}

// TestCreateAnswersFromDocuments: Create deploys the assistant (documents
// uploaded and indexed in a knowledge base, the code, the settings, the
// webchat) and the bot answers from the document holding the answer: the
// provider gets that passage and the instructions (not the unrelated
// document), the user gets the model's answer with its source, the turn's
// passages are in the bot's log, the follow-up carries the history, and a
// settings change applies to the next message.
func TestCreateAnswersFromDocuments(t *testing.T) {
	needNode(t)
	up := llmtest.New("tiny-model")
	t.Cleanup(up.Close)
	up.Reply(func(b llmtest.Body) any { return "The refund window is 37 days." })
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	env := apitest.New(t)

	s := assistant.Defaults()
	s.Instructions = "You are Zorblax's support assistant. Be brief."
	res, err := assistant.Create(context.Background(), assistant.Options{
		APIURL: env.URL, Token: env.AdminToken, Name: "Support", Documents: docs(t), Settings: s,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.BotID, "bot_") || !strings.Contains(res.WebchatURL, "/webhooks/") || res.KnowledgeBaseID == "" {
		t.Fatalf("result: %+v", res)
	}
	for _, d := range res.Documents {
		if d.Status != "indexing_completed" {
			t.Fatalf("document %s: %s %s", d.Path, d.Status, d.Reason)
		}
	}

	c := newChat(t, env, res.BotID)
	before := len(up.Requests())
	reply := c.ask(t, "How many days do I have to ask for a refund?")
	if got := text(reply); got != "The refund window is 37 days.\n\nSources: refunds.pdf" {
		t.Fatalf("the answer: %q", got)
	}
	if tags := reply["tags"].(map[string]any); tags["assistant"] != "answered" {
		t.Fatalf("tags: %v", tags)
	}
	reqs := up.Requests()[before:]
	if len(reqs) != 1 {
		t.Fatalf("%d provider calls, want 1", len(reqs))
	}
	system, msgs := messagesText(reqs[0])
	if !strings.Contains(system, "You are Zorblax's support assistant.") || !strings.Contains(system, "within 37 days of delivery") {
		t.Fatalf("the system message lacks the instructions or the passage: %q", system)
	}
	if strings.Contains(system, "Tuesday by boat") {
		t.Fatalf("the unrelated document was sent: %q", system)
	}
	if reqs[0].Body["model"] != "tiny-model" || msgs[len(msgs)-1]["content"] != "How many days do I have to ask for a refund?" {
		t.Fatalf("request: %v", reqs[0].Body)
	}
	tr := turn(t, env, res.WorkspaceID, res.BotID, c.conv, reply["id"].(string))
	ps, _ := tr["passages"].([]any)
	if tr["status"] != "answered" || len(ps) == 0 || ps[0].(map[string]any)["fileKey"] != "refunds.pdf" ||
		!strings.Contains(ps[0].(map[string]any)["content"].(string), "37 days") || tr["model"] != "openai:tiny-model" {
		t.Fatalf("the turn's log line: %v", tr)
	}

	// The follow-up carries the history.
	up.Reply(func(b llmtest.Body) any { return "Yes, with the receipt." })
	before = len(up.Requests())
	reply = c.ask(t, "Do I need the receipt for the refund?")
	if !strings.HasPrefix(text(reply), "Yes, with the receipt.") {
		t.Fatalf("the follow-up's answer: %q", text(reply))
	}
	_, msgs = messagesText(up.Requests()[before])
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m["role"].(string))
	}
	if strings.Join(roles, ",") != "system,user,assistant,user" || msgs[1]["content"] != "How many days do I have to ask for a refund?" ||
		!strings.HasPrefix(msgs[2]["content"].(string), "The refund window is 37 days.") {
		t.Fatalf("the follow-up's messages: %v", msgs)
	}

	// The model cannot answer: the fallback message.
	up.Reply(func(b llmtest.Body) any { return "CANNOT_ANSWER" })
	reply = c.ask(t, "What colour is the refund office?")
	if text(reply) != s.FallbackMessage || reply["tags"].(map[string]any)["assistant"] != "fallback" {
		t.Fatalf("the fallback: %q %v", text(reply), reply["tags"])
	}

	// Settings changed through updateBot apply to the next message.
	s2 := s
	s2.KBIDs = []string{res.KnowledgeBaseID}
	s2.CiteSources = false
	s2.Instructions = "Answer in French."
	env.Check(env.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + res.BotID, Token: env.AdminToken,
		Headers: map[string]string{"x-workspace-id": res.WorkspaceID}, Body: map[string]any{"configuration": map[string]any{"data": s2}}}), 200, "")
	up.Reply(nil) // echo
	before = len(up.Requests())
	reply = c.ask(t, "refund days?")
	system, _ = messagesText(up.Requests()[before])
	if text(reply) != "echo: refund days?" || !strings.HasPrefix(system, "Answer in French.") {
		t.Fatalf("after the settings change: %q, system %q", text(reply), system)
	}
}

// TestNoModelConfigured: without PLATFORM_LLM_URL the user is told, and the
// turn's log line says no-model.
func TestNoModelConfigured(t *testing.T) {
	needNode(t)
	t.Setenv("PLATFORM_LLM_URL", "")
	env := apitest.New(t)
	res, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "Mute", Settings: assistant.Defaults()})
	if err != nil {
		t.Fatal(err)
	}
	c := newChat(t, env, res.BotID)
	reply := c.ask(t, "hello?")
	if !strings.Contains(text(reply), "no language model is configured") || !strings.Contains(text(reply), "PLATFORM_LLM_URL") {
		t.Fatalf("the answer: %q", text(reply))
	}
	tr := turn(t, env, res.WorkspaceID, res.BotID, c.conv, reply["id"].(string))
	if tr["status"] != "no-model" || !strings.Contains(tr["error"].(string), "PLATFORM_LLM_URL") {
		t.Fatalf("the turn: %v", tr)
	}
}

// TestCreateRefusesBadInput: a missing document fails before anything is
// created; a bad token is the API's 401.
func TestCreateRefusesBadInput(t *testing.T) {
	env := apitest.New(t)
	_, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "X", Documents: []string{"/nonexistent.pdf"}})
	if err == nil || !strings.Contains(err.Error(), "nonexistent.pdf") {
		t.Fatalf("missing document: %v", err)
	}
	r := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces", Token: env.AdminToken}), 200, "")
	for _, w := range r.List("workspaces") {
		ws := w.(map[string]any)["id"].(string)
		bots := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots", Token: env.AdminToken, Headers: map[string]string{"x-workspace-id": ws}}), 200, "")
		if n := len(bots.List("bots")); n != 0 {
			t.Fatalf("a bot was created: %d", n)
		}
	}
	_, err = assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: "bp_pat_nope", Name: "X"})
	var ae *assistant.APIError
	if !asAPIError(err, &ae) || ae.Status != 401 {
		t.Fatalf("bad token: %v", err)
	}
}

// TestHandover: with handover on (the hitl integration installed by
// Create), a user asking for a human gets the handoff text and a waiting
// session in the agents' inbox, with the conversation's history; the
// user's next message goes to the agent, not to the model; so does a
// question the model cannot answer in another conversation.
func TestHandover(t *testing.T) {
	needNode(t)
	up := llmtest.New("tiny-model")
	t.Cleanup(up.Close)
	up.Reply(func(b llmtest.Body) any { return "CANNOT_ANSWER" })
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	env := apitest.New(t)
	s := assistant.Defaults()
	s.Handover = true
	res, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "Helpdesk", Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	// The handoff text is said first (as the plugin does), the session
	// started right after: wait for it.
	sessions := func(want int) []any {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			ss := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + res.WorkspaceID + "/hitl/sessions?status=waiting", Token: env.AdminToken}), 200, "").List("sessions")
			if len(ss) == want {
				return ss
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting sessions, want %d", len(ss), want)
			}
		}
	}
	c := newChat(t, env, res.BotID)
	if got := text(c.ask(t, "I want to talk to a human please")); got != "Transferring you to a human agent..." {
		t.Fatalf("the handoff: %q", got)
	}
	sess := sessions(1)[0].(map[string]any)
	calls := len(up.Requests())
	h := map[string]string{"x-bot-id": res.BotID, "x-integration-alias": "webchat"}
	env.Check(env.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: env.AdminToken, Headers: h,
		Body: map[string]any{"conversationId": c.conv, "userId": c.user, "type": "text", "payload": map[string]any{"text": "my order is late"}, "tags": map[string]string{}}}), 201, "")
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + res.WorkspaceID + "/hitl/sessions/" + res.BotID + "/" + sess["conversationId"].(string), Token: env.AdminToken}), 200, "")
		b, _ := json.Marshal(r.Body)
		if strings.Contains(string(b), "my order is late") && strings.Contains(string(b), "I want to talk to a human please") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent's transcript lacks the user's messages: %s", b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(up.Requests()) != calls {
		t.Fatal("the model was asked during the handover")
	}

	// The model cannot answer: handed over too.
	c2 := newChat(t, env, res.BotID)
	if got := text(c2.ask(t, "What is the meaning of life?")); got != "Transferring you to a human agent..." {
		t.Fatalf("the handoff after CANNOT_ANSWER: %q", got)
	}
	sessions(2)
}

// TestAssistantCodeRoute: GET /v1/admin/assistant gives the console the
// embedded code, its version, the defaults and the definition; signed-in
// accounts only.
func TestAssistantCodeRoute(t *testing.T) {
	env := apitest.New(t)
	r := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/assistant", Token: env.AdminToken}), 200, "")
	if r.Str("code") != assistant.Code || r.Str("version") != assistant.Version() || r.Str("defaults.model") != "best" {
		t.Fatalf("answer: version %q, defaults %v", r.Str("version"), r.Body["defaults"])
	}
	if _, ok := r.Body["definition"].(map[string]any)["states"]; !ok {
		t.Fatalf("definition: %v", r.Body["definition"])
	}
	env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/assistant"}), 401, "")
}

// TestHistoryFitsTheWindow: the history sent with a question is cut,
// oldest first, to the model's context (PLATFORM_LLM_INPUT_MAX_TOKENS as
// /v2/cognitive/models lists it) less the reply's room, so a long
// conversation never makes the platform refuse the prompt (400 over the
// context) and the user still gets answers.
func TestHistoryFitsTheWindow(t *testing.T) {
	needNode(t)
	up := llmtest.New("tiny-model")
	t.Cleanup(up.Close)
	up.Reply(func(b llmtest.Body) any { return "ok" })
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	t.Setenv("PLATFORM_LLM_INPUT_MAX_TOKENS", "1400")
	env := apitest.New(t)
	s := assistant.Defaults()
	s.MaxTokens = 200
	s.CiteSources = false
	res, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "Long", Settings: s})
	if err != nil {
		t.Fatal(err)
	}
	c := newChat(t, env, res.BotID)
	long := func(n int) string { return fmt.Sprintf("question %d: %s end", n, strings.Repeat("lorem ipsum ", 160)) } // about 500 tokens
	for i := 1; i <= 3; i++ {
		if got := text(c.ask(t, long(i))); got != "ok" {
			t.Fatalf("answer %d: %q", i, got)
		}
	}
	_, msgs := messagesText(up.Last())
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m["role"].(string))
	}
	// Room for one earlier question and its answer, not two.
	if strings.Join(roles, ",") != "system,user,assistant,user" || msgs[1]["content"] != long(2) || msgs[3]["content"] != long(3) {
		t.Fatalf("the third question's messages: %v", roles)
	}
}

// TestCreateChecksTheModelFirst: a model the platform does not have stops
// Create before anything is created, naming the platform's models; an id,
// an alias or a model's name passes; without a model configured nothing is
// checked (the assistant tells its users). The route behind it answers any
// signed-in account, before a bot exists.
func TestCreateChecksTheModelFirst(t *testing.T) {
	up := llmtest.New("tiny-model")
	t.Cleanup(up.Close)
	t.Setenv("PLATFORM_LLM_URL", up.BaseURL())
	env := apitest.New(t)
	m := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/assistant/models", Token: env.AdminToken}), 200, "")
	if m.Body["available"] != true || len(m.List("models")) != 1 {
		t.Fatalf("models: %s", m.Raw)
	}
	s := assistant.Defaults()
	s.Model = "no-such-model"
	_, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "Typo", Settings: s})
	if err == nil || !strings.Contains(err.Error(), `"no-such-model"`) || !strings.Contains(err.Error(), "openai:tiny-model") {
		t.Fatalf("unknown model: %v", err)
	}
	if n := len(env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces", Token: env.AdminToken}), 200, "").List("workspaces")); n != 0 {
		t.Fatalf("%d workspaces were created", n)
	}
	for _, ok := range []string{"openai:tiny-model", "tiny-model", "best"} {
		ws := env.Check(env.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: env.AdminToken, Body: map[string]any{"name": ok}}), 200, "").Str("id")
		s.Model = ok
		res, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Workspace: ws, Name: ok, Settings: s})
		if err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
		bot := env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + res.BotID, Token: env.AdminToken, Headers: map[string]string{"x-workspace-id": ws}}), 200, "")
		if bot.Str("bot.tags.assistant") != "v1" || bot.Str("bot.configuration.data.model") != ok {
			t.Fatalf("%s: the bot: %s", ok, bot.Raw)
		}
	}

	t.Setenv("PLATFORM_LLM_URL", "")
	bare := apitest.New(t)
	m = bare.Check(bare.Do(apitest.Req{Method: "GET", Path: "/v1/admin/assistant/models", Token: bare.AdminToken}), 200, "")
	if m.Body["available"] != false || !strings.Contains(m.Str("reason"), "PLATFORM_LLM_URL") {
		t.Fatalf("no model: %s", m.Raw)
	}
	s.Model = "anything"
	if _, err := assistant.Create(context.Background(), assistant.Options{APIURL: bare.URL, Token: bare.AdminToken, Name: "Mute", Settings: s}); err != nil {
		t.Fatalf("without a model nothing is checked: %v", err)
	}
	if r := bare.Do(apitest.Req{Method: "GET", Path: "/v1/admin/assistant/models"}); r.Status != 401 {
		t.Fatalf("without a token: %d", r.Status)
	}
}

// TestCreateLeavesNothingHalfMade: a step failing after the bot exists (the
// handover asked on a platform that does not serve hitl) deletes the bot
// and the workspace Create made for it, and says so.
func TestCreateLeavesNothingHalfMade(t *testing.T) {
	t.Setenv("PLATFORM_BUILTINS", "webchat")
	env := apitest.New(t)
	s := assistant.Defaults()
	s.Handover = true
	_, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Name: "Half", Settings: s})
	if err == nil || !strings.Contains(err.Error(), "hitl") || !strings.Contains(err.Error(), "was deleted") {
		t.Fatalf("the error: %v", err)
	}
	if n := len(env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces", Token: env.AdminToken}), 200, "").List("workspaces")); n != 0 {
		t.Fatalf("%d workspaces left", n)
	}
	// In a workspace of the caller's: the bot goes, the workspace stays.
	ws := env.Check(env.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: env.AdminToken, Body: map[string]any{"name": "Mine"}}), 200, "").Str("id")
	if _, err := assistant.Create(context.Background(), assistant.Options{APIURL: env.URL, Token: env.AdminToken, Workspace: ws, Name: "Half", Settings: s}); err == nil {
		t.Fatal("created")
	}
	if n := len(env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots", Token: env.AdminToken, Headers: map[string]string{"x-workspace-id": ws}}), 200, "").List("bots")); n != 0 {
		t.Fatalf("%d bots left", n)
	}
	env.Check(env.Do(apitest.Req{Method: "GET", Path: "/v1/admin/workspaces/" + ws, Token: env.AdminToken}), 200, "")
}
