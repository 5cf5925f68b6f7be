package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
)

// sdkIntegration answers like an integration written with the SDK: by
// x-bp-operation. webhook_received answers 202 with an echo of the relayed
// request (or a plain-text challenge on /challenge); action_triggered runs
// the actions below.
type sdkIntegration struct {
	*httptest.Server
	mu    sync.Mutex
	calls []map[string]any // bodies, with "_op" and "_alias"
}

func newSDKIntegration(t *testing.T) *sdkIntegration {
	si := &sdkIntegration{}
	si.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		if body == nil {
			body = map[string]any{}
		}
		op := r.Header.Get("x-bp-operation")
		body["_op"], body["_alias"], body["_webhook"] = op, r.Header.Get("x-integration-alias"), r.Header.Get("x-webhook-id")
		si.mu.Lock()
		si.calls = append(si.calls, body)
		si.mu.Unlock()
		switch op {
		case "webhook_received":
			req, _ := body["req"].(map[string]any)
			if req["path"] == "/challenge" {
				w.Header().Set("Content-Type", "text/plain")
				w.Write([]byte("challenge-accepted"))
				return
			}
			if req["path"] == "/hang" {
				<-r.Context().Done()
				return
			}
			if req["path"] == "/crash" {
				// As the SDK answers: no Content-Type.
				w.Header()["Content-Type"] = nil
				w.WriteHeader(500)
				w.Write([]byte(`{"id":"err_1","code":400,"type":"Runtime","message":"An unexpected error occurred in the integration."}`))
				return
			}
			w.Header().Set("X-Echo", "yes")
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			w.WriteHeader(202)
			json.NewEncoder(w).Encode(req)
		case "action_triggered":
			input, _ := body["input"].(map[string]any)
			switch {
			case input["refuse"] == true:
				w.WriteHeader(400)
				w.Write([]byte(`{"id":"err_2","code":400,"type":"InvalidPayload","message":"refused: no such ticket"}`))
			case input["crash"] == true:
				w.WriteHeader(500)
				w.Write([]byte(`{"message":"boom"}`))
			case input["garbage"] == true:
				w.Write([]byte(`<html>not json</html>`))
			case input["hang"] == true:
				<-r.Context().Done()
			default:
				json.NewEncoder(w).Encode(map[string]any{"output": map[string]any{"type": body["type"], "echo": input}, "meta": map[string]any{"cost": 0}})
			}
		default:
			w.Write([]byte(`{}`))
		}
	}))
	t.Cleanup(si.Close)
	return si
}

func (si *sdkIntegration) last(op string) map[string]any {
	si.mu.Lock()
	defer si.mu.Unlock()
	for i := len(si.calls) - 1; i >= 0; i-- {
		if si.calls[i]["_op"] == op {
			return si.calls[i]
		}
	}
	return nil
}

// syncFixture: a bot with an SDK-like integration installed as "main".
type syncFixture struct {
	*fixture
	bot, intID, webhookURL string
	integration            *sdkIntegration
}

func newSyncFixture(t *testing.T, botDef map[string]any) *syncFixture {
	f := newFixture(t)
	si := newSDKIntegration(t)
	if botDef == nil {
		botDef = map[string]any{}
	}
	created := f.createIntegration(f.AdminToken, integrationDef("ticketing", "1.0.0", map[string]any{
		"url": si.URL, "maxExecutionTime": 1,
		"actions": map[string]any{
			"sendReminder": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}},
			"strict": map[string]any{"input": map[string]any{"schema": map[string]any{
				"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}, "required": []string{"n"},
			}}, "output": map[string]any{"schema": map[string]any{}}},
		},
	}))
	bot := f.createBot(f.AdminToken, botDef)
	u := f.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{
		"main": map[string]any{"integrationId": created.Str("integration.id"), "enabled": true, "configuration": map[string]any{}},
	}})
	inst := u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[created.Str("integration.id")].(map[string]any)
	if inst["status"] != "registered" {
		t.Fatalf("install: %v", inst)
	}
	reg := si.last("register")
	if reg == nil || reg["webhookUrl"] != inst["webhookUrl"] {
		t.Fatalf("register call %v, instance %v", reg, inst)
	}
	return &syncFixture{fixture: f, bot: bot, intID: created.Str("integration.id"), webhookURL: inst["webhookUrl"].(string), integration: si}
}

func (f *syncFixture) chat(token, method, path string, body any, headers ...string) apitest.Response {
	f.T.Helper()
	h := map[string]string{"x-bot-id": f.bot}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	return f.Do(apitest.Req{Method: method, Path: path, Token: token, Body: body, Headers: h})
}

// rawDo sends a request with no token to the platform and returns the
// answer with its body.
func rawDo(t *testing.T, method, url string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// errorOf decodes an answer in the API's error shape, failing otherwise.
func errorOf(t *testing.T, res *http.Response, b []byte) (string, string) {
	t.Helper()
	var e struct {
		ID, Type, Message string
		Code              int
	}
	if err := json.Unmarshal(b, &e); err != nil || !strings.HasPrefix(e.ID, "err_") || e.Code != res.StatusCode || e.Message == "" {
		t.Fatalf("not the error shape: %d %s", res.StatusCode, b)
	}
	return e.Type, e.Message
}

// TestWebhookIngress: the webhookUrl an installation's register call got
// reaches the integration as webhook_received, with method, path below the
// webhook id, raw query, headers and raw body; the integration's answer
// comes back verbatim. Bad addresses and bodies get the error shape.
func TestWebhookIngress(t *testing.T) {
	f := newSyncFixture(t, nil)
	whk := f.webhookURL[strings.LastIndex(f.webhookURL, "/")+1:]
	if !strings.HasPrefix(f.webhookURL, f.URL+"/webhooks/whk_") {
		t.Fatalf("webhookUrl %q is not under %s/webhooks/", f.webhookURL, f.URL)
	}

	// The relay, both ways.
	res, b := rawDo(t, "POST", f.webhookURL+"/events/new?a=1&b=%20x", strings.NewReader(`{"update_id":7} not json either`),
		map[string]string{"X-Provider-Signature": "sig", "Content-Type": "text/plain"})
	if res.StatusCode != 202 || res.Header.Get("X-Echo") != "yes" || len(res.Header.Values("Set-Cookie")) != 2 {
		t.Fatalf("relayed answer: %d %v %s", res.StatusCode, res.Header, b)
	}
	var echoed map[string]any
	if err := json.Unmarshal(b, &echoed); err != nil {
		t.Fatalf("relayed body %s", b)
	}
	hdr, _ := echoed["headers"].(map[string]any)
	if echoed["method"] != "POST" || echoed["path"] != "/events/new" || echoed["query"] != "a=1&b=%20x" ||
		echoed["body"] != `{"update_id":7} not json either` || hdr["x-provider-signature"] != "sig" || hdr["content-type"] != "text/plain" {
		t.Fatalf("webhook_received req: %v", echoed)
	}
	if call := f.integration.last("webhook_received"); call["_alias"] != "main" || call["_webhook"] != whk {
		t.Fatalf("webhook_received context: %v", call)
	}
	// Any method; no path below the id is "/"; a text answer stays text.
	res, b = rawDo(t, "GET", f.webhookURL+"/challenge?hub.challenge=1", nil, nil)
	if res.StatusCode != 200 || string(b) != "challenge-accepted" || res.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("challenge: %d %q %v", res.StatusCode, b, res.Header)
	}
	rawDo(t, "PUT", f.webhookURL, nil, nil)
	if req := f.integration.last("webhook_received")["req"].(map[string]any); req["path"] != "/" || req["method"] != "PUT" {
		t.Fatalf("bare webhook: %v", req)
	}
	// The global OAuth redirect goes to the installation named by state.
	res, b = rawDo(t, "GET", f.URL+"/webhooks/oauth/callback?code=xyz&state="+whk, nil, nil)
	if res.StatusCode != 202 || !strings.Contains(string(b), `"path":"/oauth/callback"`) || f.integration.last("webhook_received")["_webhook"] != whk {
		t.Fatalf("oauth: %d %s", res.StatusCode, b)
	}
	// The integration's own error answer is relayed too (the provider retries).
	res, b = rawDo(t, "POST", f.webhookURL+"/crash", strings.NewReader("{}"), nil)
	if res.StatusCode != 500 || !strings.Contains(string(b), "unexpected error occurred in the integration") || res.Header.Get("Content-Type") != "" {
		t.Fatalf("integration error: %d %s", res.StatusCode, b)
	}

	for _, tc := range []struct {
		name, method, url string
		body              io.Reader
		status            int
		typ, says         string
	}{
		{"unknown webhook id", "POST", f.URL + "/webhooks/whk_01JZZZZZZZZZZZZZZZZZZZZZZZ", nil, 404, "ResourceNotFound", "webhook"},
		{"not a webhook id", "POST", f.URL + "/webhooks/bot_123/x", nil, 404, "ResourceNotFound", "webhook"},
		{"oauth without state", "GET", f.URL + "/webhooks/oauth/callback?code=1", nil, 400, "InvalidPayload", "state"},
		{"oauth with an unknown state", "GET", f.URL + "/webhooks/oauth/callback?state=whk_nope", nil, 404, "ResourceNotFound", "webhook"},
		{"body over 1 MiB", "POST", f.webhookURL, strings.NewReader(strings.Repeat("x", 1<<20+1)), 413, "PayloadTooLarge", "exceed"},
		{"integration too slow (maxExecutionTime 1 s)", "POST", f.webhookURL + "/hang", strings.NewReader("{}"), 504, "OperationTimeout", "did not answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			defer func() {
				if d := time.Since(start); d > 5*time.Second {
					t.Errorf("took %s", d)
				}
			}()
			res, b := rawDo(t, tc.method, tc.url, tc.body, nil)
			typ, msg := errorOf(t, res, b)
			if res.StatusCode != tc.status || typ != tc.typ || !strings.Contains(msg, tc.says) {
				t.Fatalf("%d %s %s", res.StatusCode, typ, msg)
			}
		})
	}

	// Integration down: 502 with the reason, in the error shape.
	f.integration.Close()
	res, b = rawDo(t, "POST", f.webhookURL, strings.NewReader("{}"), nil)
	if typ, msg := errorOf(t, res, b); res.StatusCode != 502 || typ != "BadGateway" || !strings.Contains(msg, "could not be called") {
		t.Fatalf("integration down: %d %s", res.StatusCode, b)
	}

	// Disabled, then removed, then the bot deleted: the webhook is gone.
	f.updateBot(f.AdminToken, f.bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"enabled": false}}})
	if res, b = rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 404 || !strings.Contains(string(b), "disabled") {
		t.Fatalf("disabled: %d %s", res.StatusCode, b)
	}
	f.updateBot(f.AdminToken, f.bot, map[string]any{"integrations": map[string]any{"main": nil}})
	if res, b = rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 404 {
		t.Fatalf("removed: %d %s", res.StatusCode, b)
	}
}

// TestWebhookGoneWithItsBot: deleting a bot ends its webhooks.
func TestWebhookGoneWithItsBot(t *testing.T) {
	f := newSyncFixture(t, nil)
	if res, _ := rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 202 {
		t.Fatalf("before: %d", res.StatusCode)
	}
	f.Check(f.ws_(f.AdminToken, "DELETE", "/v1/admin/bots/"+f.bot, nil), 200, "deleteBot")
	if res, b := rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 404 {
		t.Fatalf("after the bot's deletion: %d %s", res.StatusCode, b)
	}
}

// fakeSDKBot answers action_triggered like an SDK bot with the action
// "ping" (and "Action X not found", 400, for any other).
func fakeSDKBot(t *testing.T, seen chan<- http.Header) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Type  string         `json:"type"`
			Input map[string]any `json:"input"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		select {
		case seen <- r.Header.Clone():
		default:
		}
		if r.Header.Get("x-bp-operation") != "action_triggered" || body.Type != "ping" {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"id":"err_3","code":400,"type":"InvalidPayload","message":"Action %s not found"}`, body.Type)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"output": map[string]any{"pong": body.Input["x"]}})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestCallAction: "<alias>:<action>" runs the installed integration's
// action, an unprefixed type the bot's own; each answers its output, and
// every refusal or failure is a 4xx or 5xx with the reason.
func TestCallAction(t *testing.T) {
	seen := make(chan http.Header, 8)
	bot := fakeSDKBot(t, seen)
	f := newSyncFixture(t, map[string]any{"url": bot.URL})
	tok := f.AdminToken

	r := f.Check(f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "main:sendReminder", "input": map[string]any{"x": 1}}), 200, "callAction")
	if jsonOf(r.Body) != `{"meta":{"cached":false},"output":{"echo":{"x":1},"type":"sendReminder"}}` {
		t.Fatalf("integration action: %s", r.Raw)
	}
	if c := f.integration.last("action_triggered"); c["_alias"] != "main" || c["type"] != "sendReminder" {
		t.Fatalf("action_triggered call: %v", c)
	}
	r = f.Check(f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "ping", "input": map[string]any{"x": "y"}}), 200, "callAction")
	if jsonOf(r.Body) != `{"meta":{"cached":false},"output":{"pong":"y"}}` {
		t.Fatalf("bot action: %s", r.Raw)
	}
	h := <-seen
	// The bot's own API key may call it too (the token of a hosted bot).
	bak := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": f.bot}), 200, "createBotApiKey").Str("value")
	f.Check(f.chat(bak, "POST", "/v1/chat/actions", map[string]any{"type": "main:sendReminder", "input": map[string]any{}}), 200, "callAction")
	if h.Get("x-bot-id") != f.bot || h.Get("x-bp-operation") != "action_triggered" || h.Get("x-bp-type") == "" || h.Get("x-bp-configuration") == "" {
		t.Fatalf("bot action headers: %v", h)
	}

	for _, tc := range []struct {
		name   string
		body   any
		status int
		typ    string
		says   string
	}{
		{"alias not installed", map[string]any{"type": "other:sendReminder", "input": map[string]any{}}, 404, "ResourceNotFound", `alias "other"`},
		{"unknown integration action", map[string]any{"type": "main:nope", "input": map[string]any{}}, 400, "InvalidPayload", `no action "nope"`},
		{"input not matching the action's schema", map[string]any{"type": "main:strict", "input": map[string]any{"n": "one"}}, 400, "InvalidPayload", "input"},
		{"no input", map[string]any{"type": "main:sendReminder"}, 400, "InvalidPayload", "input"},
		{"input not an object", map[string]any{"type": "main:sendReminder", "input": 3}, 400, "InvalidPayload", "input"},
		{"empty alias", map[string]any{"type": ":x", "input": map[string]any{}}, 400, "InvalidPayload", "type"},
		{"integration refuses", map[string]any{"type": "main:sendReminder", "input": map[string]any{"refuse": true}}, 400, "Runtime", "refused: no such ticket"},
		{"integration fails", map[string]any{"type": "main:sendReminder", "input": map[string]any{"crash": true}}, 502, "BadGateway", "boom"},
		{"integration answers garbage", map[string]any{"type": "main:sendReminder", "input": map[string]any{"garbage": true}}, 502, "BadGateway", "not a JSON object"},
		{"integration too slow (maxExecutionTime 1 s)", map[string]any{"type": "main:sendReminder", "input": map[string]any{"hang": true}}, 504, "OperationTimeout", "did not answer"},
		{"bot refuses its unknown action", map[string]any{"type": "pong", "input": map[string]any{}}, 400, "Runtime", "Action pong not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := f.chat(tok, "POST", "/v1/chat/actions", tc.body)
			if r.Status != tc.status || r.Str("type") != tc.typ || !strings.Contains(r.Str("message"), tc.says) {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}

	// A bot that declares its actions is held to them, before any call.
	f.updateBot(tok, f.bot, map[string]any{"actions": map[string]any{"ping": map[string]any{
		"input":  map[string]any{"schema": map[string]any{"type": "object", "required": []string{"x"}}},
		"output": map[string]any{"schema": map[string]any{}},
	}}})
	if r := f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "pong", "input": map[string]any{}}); r.Status != 400 || !strings.Contains(r.Str("message"), `no action "pong"`) {
		t.Fatalf("undeclared bot action: %d %s", r.Status, r.Raw)
	}
	if r := f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "ping", "input": map[string]any{}}); r.Status != 400 || r.Str("type") != "InvalidPayload" {
		t.Fatalf("bot action input: %d %s", r.Status, r.Raw)
	}
	// A bot without a url cannot run its actions.
	f.updateBot(tok, f.bot, map[string]any{"url": ""})
	if r := f.chat(tok, "POST", "/v1/chat/actions", map[string]any{"type": "ping", "input": map[string]any{"x": 1}}); r.Status != 502 || !strings.Contains(r.Str("message"), "no url") {
		t.Fatalf("bot without url: %d %s", r.Status, r.Raw)
	}
}

// TestIntegrationKeyActsForItsInstallsOnly: an integration API key's
// x-integration-id and x-integration-alias must name its own installation.
func TestIntegrationKeyActsForItsInstallsOnly(t *testing.T) {
	f := newSyncFixture(t, nil)
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": f.intID}), 200, "createIntegrationApiKey").Str("value")
	other := f.createIntegration(f.AdminToken, integrationDef("other", "1.0.0", nil)).Str("integration.id")
	f.updateBot(f.AdminToken, f.bot, map[string]any{"integrations": map[string]any{"second": map[string]any{"integrationId": other, "enabled": false}}})
	body := map[string]any{"tags": map[string]string{"id": "7"}}
	for _, tc := range []struct {
		name    string
		headers []string
		status  int
	}{
		{"own alias and id", []string{"x-integration-alias", "main", "x-integration-id", f.intID}, 200},
		{"own alias", []string{"x-integration-alias", "main"}, 200},
		{"no headers", nil, 200},
		{"another integration's alias", []string{"x-integration-alias", "second"}, 403},
		{"an alias not installed", []string{"x-integration-alias", "ghost"}, 403},
		{"another integration's id", []string{"x-integration-alias", "main", "x-integration-id", other}, 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.chat(key, "POST", "/v1/chat/users/get-or-create", body, tc.headers...)
			if r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
}

// TestConfigureIntegration: an integration records its identifier on its
// installation, which getBot then shows; null clears it.
func TestConfigureIntegration(t *testing.T) {
	f := newSyncFixture(t, nil)
	tok := f.AdminToken
	identifier := func() any {
		return f.getBot(f.bot, "x-multiple-integrations", "true")["integrations"].(map[string]any)["main"].(map[string]any)["identifier"]
	}
	f.Check(f.chat(tok, "POST", "/v1/chat/integrations/configure", map[string]any{"identifier": "T0123", "scheduleRegisterCall": "daily"},
		"x-integration-alias", "main", "x-integration-id", f.intID), 200, "configureIntegration")
	if got := identifier(); got != "T0123" {
		t.Fatalf("identifier %v", got)
	}
	// By integration id alone (an integration key or x-integration-id).
	f.Check(f.chat(tok, "POST", "/v1/chat/integrations/configure", map[string]any{"identifier": nil}, "x-integration-id", f.intID), 200, "configureIntegration")
	if got := identifier(); got != nil {
		t.Fatalf("identifier after null: %v", got)
	}
	for _, tc := range []struct {
		name    string
		body    any
		headers []string
		status  int
	}{
		{"not from an integration", map[string]any{"identifier": "x"}, nil, 400},
		{"alias not installed", map[string]any{"identifier": "x"}, []string{"x-integration-alias", "ghost"}, 404},
		{"bad schedule", map[string]any{"scheduleRegisterCall": "sometimes"}, []string{"x-integration-alias", "main"}, 400},
		{"identifier not a string", map[string]any{"identifier": 3}, []string{"x-integration-alias", "main"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := f.chat(tok, "POST", "/v1/chat/integrations/configure", tc.body, tc.headers...); r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
}

// TestInitializeIncomingMessage: user, conversation and message are got or
// created in one call, as the three getOrCreate calls would; the same call
// again finds them.
func TestInitializeIncomingMessage(t *testing.T) {
	f := newSyncFixture(t, nil)
	tok := f.AdminToken
	body := map[string]any{
		"user":         map[string]any{"tags": map[string]string{"id": "u7"}, "discriminateByTags": []string{"id"}, "name": "Ann"},
		"conversation": map[string]any{"channel": "dm", "tags": map[string]string{"userId": "u7"}, "discriminateByTags": []string{"userId"}},
		"message":      map[string]any{"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{"id": "m1"}, "discriminateByTags": []string{"id"}},
	}
	first := f.Check(f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", body, "x-integration-alias", "main"), 200, "initializeIncomingMessage")
	user, conv, msg := first.Str("user.id"), first.Str("conversation.id"), first.Str("message.id")
	if user == "" || conv == "" || msg == "" || first.Str("message.userId") != user || first.Str("message.conversationId") != conv ||
		first.Str("message.direction") != "incoming" || first.Str("conversation.integration") != "main" || first.Str("user.name") != "Ann" {
		t.Fatalf("first: %s", first.Raw)
	}
	again := f.Check(f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", body, "x-integration-alias", "main"), 200, "initializeIncomingMessage")
	if again.Str("user.id") != user || again.Str("conversation.id") != conv || again.Str("message.id") != msg {
		t.Fatalf("again: %s", again.Raw)
	}
	// The message is the one getMessage reads; by ids, without a message.
	f.Check(f.chat(tok, "GET", "/v1/chat/messages/"+msg, nil), 200, "getMessage")
	byID := f.Check(f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", map[string]any{"userId": user, "conversationId": conv}), 200, "initializeIncomingMessage")
	if byID.Str("user.id") != user || byID.Str("conversation.id") != conv || byID.Body["message"] != nil {
		t.Fatalf("by ids: %s", byID.Raw)
	}
	for _, tc := range []struct {
		name   string
		body   map[string]any
		status int
	}{
		{"user and userId", map[string]any{"userId": user, "user": body["user"], "conversationId": conv}, 400},
		{"no conversation", map[string]any{"userId": user}, 400},
		{"unknown user id", map[string]any{"userId": "user_01JZZZZZZZZZZZZZZZZZZZZZZZ", "conversationId": conv}, 404},
		{"channel the integration lacks", map[string]any{"userId": user, "conversation": map[string]any{"channel": "sms", "tags": map[string]string{}, "discriminateByTags": []string{}}}, 400},
		{"message without type", map[string]any{"userId": user, "conversationId": conv, "message": map[string]any{"payload": map[string]any{}, "tags": map[string]string{}, "discriminateByTags": []string{}}}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", tc.body, "x-integration-alias", "main"); r.Status != tc.status {
				t.Fatalf("%d %s", r.Status, r.Raw)
			}
		})
	}
}

// TestInitializeIncomingMessageChecksEveryBodyFirst: a refused
// conversation or message body leaves nothing behind (the user and the
// conversation are only got or created once every body is checked), and a
// message that is not an object is a 400. Before, the user was created
// before the conversation's body was read, and "message": null was a 500.
func TestInitializeIncomingMessageChecksEveryBodyFirst(t *testing.T) {
	f := newSyncFixture(t, nil)
	tok := f.AdminToken
	user := map[string]any{"tags": map[string]string{"id": "u-refused"}, "discriminateByTags": []string{"id"}}
	conv := map[string]any{"channel": "dm", "tags": map[string]string{"userId": "u-refused"}, "discriminateByTags": []string{"userId"}}
	msg := map[string]any{"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}, "discriminateByTags": []string{}}
	for _, tc := range []struct {
		name string
		body map[string]any
		want string // in the error's message
	}{
		{"a channel the integration lacks", map[string]any{"user": user, "conversation": map[string]any{"channel": "sms", "tags": map[string]string{}, "discriminateByTags": []string{}}}, "sms"},
		{"a conversation that is not an object", map[string]any{"user": user, "conversation": []int{1}}, `"conversation"`},
		{"a message without type", map[string]any{"user": user, "conversation": conv, "message": map[string]any{"payload": map[string]any{}, "tags": map[string]string{}, "discriminateByTags": []string{}}}, `"message"`},
		{"a message with a tag it does not discriminate by", map[string]any{"user": user, "conversation": conv, "message": map[string]any{"type": "text", "payload": map[string]any{"text": "x"}, "tags": map[string]string{}, "discriminateByTags": []string{"id"}}}, "id"},
		{"a null message", map[string]any{"user": user, "conversation": conv, "message": nil}, `"message"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", tc.body, "x-integration-alias", "main")
			if r.Status != 400 || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("%d %s, want 400 naming %s", r.Status, r.Raw, tc.want)
			}
			if users := f.Check(f.chat(tok, "GET", "/v1/chat/users?tags.main:id=u-refused", nil), 200, "listUsers").List("users"); len(users) != 0 {
				t.Fatalf("the refused call created the user: %v", users)
			}
			if convs := f.Check(f.chat(tok, "GET", "/v1/chat/conversations?tags.main:userId=u-refused", nil), 200, "listConversations").List("conversations"); len(convs) != 0 {
				t.Fatalf("the refused call created the conversation: %v", convs)
			}
		})
	}
	// The same bodies, all valid, create the three: the filters above
	// find them.
	ok := f.Check(f.chat(tok, "POST", "/v1/chat/initialize-incoming-message", map[string]any{"user": user, "conversation": conv, "message": msg}, "x-integration-alias", "main"), 200, "initializeIncomingMessage")
	if ok.Str("message.userId") != ok.Str("user.id") || ok.Str("message.conversationId") != ok.Str("conversation.id") || ok.Str("user.id") == "" || ok.Str("conversation.id") == "" {
		t.Fatalf("valid: %s", ok.Raw)
	}
	users := f.Check(f.chat(tok, "GET", "/v1/chat/users?tags.main:id=u-refused", nil), 200, "listUsers").List("users")
	convs := f.Check(f.chat(tok, "GET", "/v1/chat/conversations?tags.main:userId=u-refused", nil), 200, "listConversations").List("conversations")
	if len(users) != 1 || len(convs) != 1 {
		t.Fatalf("after the valid call: %d users, %d conversations, want 1 and 1", len(users), len(convs))
	}
}

// TestRuntimeDynamoDBCalls pins the DynamoDB calls of the synchronous
// runtime paths: a webhook costs its lookup, the bot and the integration
// (3 GetItem, no write); callAction to an integration the token, the
// membership, the bot and the integration (4 GetItem), the record of the
// run (1 PutItem, listActionRuns) and the bot read again after that write
// (1 GetItem, RecheckBot); to the bot itself, 3 GetItem.
func TestRuntimeDynamoDBCalls(t *testing.T) {
	bot := fakeSDKBot(t, nil)
	f := newSyncFixture(t, map[string]any{"url": bot.URL})
	rec := recordUsage(f.Env)
	if res, b := rawDo(t, "POST", f.webhookURL, strings.NewReader("{}"), nil); res.StatusCode != 202 {
		t.Fatalf("webhook: %d %s", res.StatusCode, b)
	}
	if u := rec.of("webhook_received"); u == nil || u.Calls("GetItem") != 3 || u.Calls("") != 3 {
		t.Errorf("webhook: %v, want GetItem=3", u)
	}
	f.Check(f.chat(f.AdminToken, "POST", "/v1/chat/actions", map[string]any{"type": "main:sendReminder", "input": map[string]any{}}), 200, "callAction")
	if u := rec.of("callAction"); u.Calls("GetItem") != 5 || u.Calls("PutItem") != 1 || u.Calls("") != 6 {
		t.Errorf("callAction to an integration: %v, want GetItem=5 PutItem=1", u)
	}
	f.Check(f.chat(f.AdminToken, "POST", "/v1/chat/actions", map[string]any{"type": "ping", "input": map[string]any{}}), 200, "callAction")
	if u := rec.of("callAction"); u.Calls("GetItem") != 3 || u.Calls("") != 3 {
		t.Errorf("callAction to the bot: %v, want GetItem=3", u)
	}
}

// TestWebhookLookupRestoredAtRegistration: an installation whose lookup
// item is missing (made before lookup items existed) gets its webhook
// address back at its next registration.
func TestWebhookLookupRestoredAtRegistration(t *testing.T) {
	f := newSyncFixture(t, nil)
	whk := f.webhookURL[strings.LastIndex(f.webhookURL, "/")+1:]
	_, err := f.Platform.Store.Client().DeleteItem(t.Context(), &dynamodb.DeleteItemInput{
		TableName: aws.String(f.Platform.Env.Table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "WEBHOOK#" + whk}, "sk": &types.AttributeValueMemberS{Value: "WEBHOOK"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res, _ := rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 404 {
		t.Fatalf("without its lookup item: %d", res.StatusCode)
	}
	f.updateBot(f.AdminToken, f.bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"configuration": map[string]any{"v": 2}}}})
	if res, b := rawDo(t, "POST", f.webhookURL, nil, nil); res.StatusCode != 202 {
		t.Fatalf("after a new registration: %d %s", res.StatusCode, b)
	}
}
