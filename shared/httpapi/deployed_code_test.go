package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// echoBundle is a deployed bot's code as bp deploy would send it (a
// CommonJS bundle whose default export has start(port)), written by hand
// with Node's http module only: on message_created it replies
// "<prefix> (<token kind>): <text>" through the API at BP_API_URL with
// BP_TOKEN, as the SDK's bot does, and logs what it got. behaviour may
// be "hang" (never answers message_created) or "throw" (throws at load).
func echoBundle(prefix, behaviour string) string {
	load := ""
	if behaviour == "throw" {
		load = "throw new Error('boom at load: the bundle is broken')\n"
	}
	return fmt.Sprintf(`'use strict'
const http = require('http')
%sconst PREFIX = %q, HANG = %t
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    if (req.url === '/health') { res.end('ok'); return }
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', () => {
      if (req.headers['x-bp-operation'] !== 'event_received' || req.headers['x-bp-type'] !== 'message_created') { res.end('{}'); return }
      if (HANG) { console.log('hanging on purpose'); return }
      const ev = JSON.parse(body).event
      console.log('got message ' + ev.payload.message.payload.text)
      const data = JSON.stringify({ conversationId: ev.conversationId, userId: req.headers['x-bot-id'], type: 'text', tags: {},
        payload: { text: PREFIX + ' (' + process.env.BP_TOKEN.slice(0, 7) + '): ' + ev.payload.message.payload.text } })
      const r = http.request(new URL('/v1/chat/messages', process.env.BP_API_URL), { method: 'POST', headers: {
        'content-type': 'application/json', authorization: 'Bearer ' + process.env.BP_TOKEN, 'x-bot-id': req.headers['x-bot-id'] } },
        (rr) => { rr.resume(); rr.on('end', () => { res.writeHead(rr.statusCode < 300 ? 200 : 500); res.end('{}') }) })
      r.on('error', (e) => { console.error('reply failed: ' + e.message); res.writeHead(500); res.end('{}') })
      r.end(data)
      if (ev.payload.message.payload.text === 'die') res.on('finish', () => { console.error('dying on purpose'); process.exit(7) })
    })
  }).listen(port, '127.0.0.1')
} } }
`, load, prefix, behaviour == "hang")
}

func needNode(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed: deployed code cannot run here")
	}
}

// deployedFixture is a bot deployed with code and no url, with a fake
// integration (a url on loopback) installed under "chan" to carry its
// conversation.
type deployedFixture struct {
	*runtimeFixture
	conv, user string
}

func newDeployedFixture(t *testing.T, code string, extra map[string]any) *deployedFixture {
	f := &runtimeFixture{fixture: newFixture(t)}
	f.Platform.Dispatcher.SetRetry(20*time.Millisecond, 2)
	f.integ = newReceiver(t, nil)
	f.intID = f.createIntegration(f.AdminToken, map[string]any{
		"name": "chan", "version": "1.0.0", "url": f.integ.srv.URL,
		"channels": map[string]any{"channel": map[string]any{"messages": map[string]any{"text": map[string]any{"schema": map[string]any{}}}}},
	}).Str("integration.id")
	f.botID = f.createBot(f.AdminToken, map[string]any{"name": "deployed"})
	body := map[string]any{"code": code, "integrations": map[string]any{"chan": map[string]any{"integrationId": f.intID, "enabled": true}}}
	for k, v := range extra {
		body[k] = v
	}
	f.updateBot(f.AdminToken, f.botID, body)
	d := &deployedFixture{runtimeFixture: f}
	d.conv = f.as(true, "POST", "/v1/chat/conversations/get-or-create", map[string]any{"channel": "channel", "tags": map[string]string{}}, 200).Str("conversation.id")
	d.user = f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	return d
}

// say writes a user's message (as the integration) and returns its event.
func (d *deployedFixture) say(text string) string {
	d.T.Helper()
	msg := d.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": d.conv, "userId": d.user, "type": "text",
		"payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201).Str("message.id")
	for _, e := range d.as(false, "GET", "/v1/chat/events?type=message_created", nil, 200).List("events") {
		if e.(map[string]any)["messageId"] == msg {
			return e.(map[string]any)["id"].(string)
		}
	}
	d.T.Fatalf("no event for message %s", msg)
	return ""
}

// replies are the texts the bot sent to the integration's channel.
func (d *deployedFixture) replies() []string {
	var out []string
	for _, c := range d.integ.of("message_created", "") {
		p, _ := c.Body["payload"].(map[string]any)
		s, _ := p["text"].(string)
		out = append(out, s)
	}
	return out
}

func (d *deployedFixture) waitReply(t *testing.T, want string) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, "the reply "+want, func() bool {
		for _, r := range d.replies() {
			if r == want {
				return true
			}
		}
		return false
	})
	return time.Since(start)
}

// eventOutcome waits for an event to settle and returns its status and
// failure reason.
func (d *deployedFixture) eventOutcome(t *testing.T, id string, within time.Duration) (string, string) {
	t.Helper()
	var status, reason string
	deadline := time.Now().Add(within)
	for {
		e := d.as(false, "GET", "/v1/chat/events/"+id, nil, 200).Body["event"].(map[string]any)
		status, _ = e["status"].(string)
		reason, _ = e["failureReason"].(string)
		if status != "pending" {
			return status, reason
		}
		if time.Now().After(deadline) {
			t.Fatalf("event %s still pending after %s", id, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeployedBotAnswers: a bot deployed with code and no url answers a
// user's message through the runtime (the platform runs its code in a
// Node.js worker, with a bot API key as BP_TOKEN, never the owner's
// token); its output is the bot's log; a redeploy changes its behaviour
// and replaces the worker.
func TestDeployedBotAnswers(t *testing.T) {
	needNode(t)
	d := newDeployedFixture(t, echoBundle("v1", ""), nil)
	d.say("hello")
	cold := d.waitReply(t, "v1 (bp_bak_): hello")
	d.say("again")
	warm := d.waitReply(t, "v1 (bp_bak_): again")
	t.Logf("first reply after deploy (cold start) %s, next reply (warm) %s", cold.Round(time.Millisecond), warm.Round(time.Millisecond))

	// Its stdout is the bot's log.
	q := logsQuery("timeStart", iso(time.Now().Add(-time.Hour)), "timeEnd", iso(time.Now().Add(time.Minute)))
	eventually(t, "the worker's output in getBotLogs", func() bool {
		for _, m := range d.logMessages(t, d.AdminToken, "/v1/admin/bots/"+d.botID+"/logs", q) {
			if m == "got message hello" {
				return true
			}
		}
		return false
	})

	// A redeploy: the next message meets the new code, in one worker.
	d.updateBot(d.AdminToken, d.botID, map[string]any{"code": echoBundle("v2", "")})
	d.say("third")
	d.waitReply(t, "v2 (bp_bak_): third")
	eventually(t, "one worker left", func() bool { return len(d.Platform.Workers.Running()) == 1 })
	for _, r := range d.replies() {
		if strings.HasPrefix(r, "v1") && strings.HasSuffix(r, "third") {
			t.Fatalf("the old code answered after the redeploy: %v", d.replies())
		}
	}

	// Closing the platform stops its workers.
	d.Platform.Workers.Close()
	if n := len(d.Platform.Workers.Running()); n != 0 {
		t.Fatalf("%d workers after Close", n)
	}
}

// TestWorkerLifecycle: a worker that exits is started again by the next
// event; an idle worker is stopped, and started again when needed.
func TestWorkerLifecycle(t *testing.T) {
	needNode(t)
	d := newDeployedFixture(t, echoBundle("v1", ""), nil)
	d.say("die")
	d.waitReply(t, "v1 (bp_bak_): die")
	eventually(t, "the worker exits", func() bool { return len(d.Platform.Workers.Running()) == 0 })
	d.say("back")
	d.waitReply(t, "v1 (bp_bak_): back")
	q := logsQuery("timeStart", iso(time.Now().Add(-time.Hour)), "timeEnd", iso(time.Now().Add(time.Minute)), "level", "warn")
	eventually(t, "the exit in the bot's logs", func() bool {
		for _, m := range d.logMessages(t, d.AdminToken, "/v1/admin/bots/"+d.botID+"/logs", q) {
			if strings.Contains(m, "exit status 7") {
				return true
			}
		}
		return false
	})

	d2 := newDeployedFixture(t, echoBundle("idle", ""), nil)
	// Before its first worker; longer than a cold worker's first call
	// on a busy machine (idle counts from a call's start: at 300 ms the
	// janitor stopped a worker in the middle of its call, 1 run in 30).
	d2.Platform.Workers.Idle = 1500 * time.Millisecond
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		q := logsQuery("timeStart", iso(time.Now().Add(-time.Hour)), "timeEnd", iso(time.Now().Add(time.Minute)))
		for _, m := range d2.logMessages(t, d2.AdminToken, "/v1/admin/bots/"+d2.botID+"/logs", q) {
			t.Log("bot log:", m)
		}
	})
	d2.say("one")
	d2.waitReply(t, "idle (bp_bak_): one")
	eventually(t, "the idle worker stops", func() bool { return len(d2.Platform.Workers.Running()) == 0 })
	d2.say("two")
	d2.waitReply(t, "idle (bp_bak_): two")
}

// TestDeployedCodeFailures: code that throws at load, and code that never
// answers, fail their events with a clear reason, within the bot's
// maxExecutionTime and the retries; the platform stays healthy and a good
// deploy then answers.
func TestDeployedCodeFailures(t *testing.T) {
	needNode(t)
	t.Run("throws at load", func(t *testing.T) {
		d := newDeployedFixture(t, echoBundle("x", "throw"), nil)
		ev := d.say("hello")
		status, reason := d.eventOutcome(t, ev, 30*time.Second)
		if status != "failed" || !strings.Contains(reason, "failed to start") || !strings.Contains(reason, "boom at load") {
			t.Fatalf("event %s: %q", status, reason)
		}
		d.Check(d.ws_(d.AdminToken, "GET", "/v1/admin/bots/"+d.botID, nil), 200, "getBot")
		d.updateBot(d.AdminToken, d.botID, map[string]any{"code": echoBundle("fixed", "")})
		d.say("after")
		d.waitReply(t, "fixed (bp_bak_): after")
	})
	t.Run("hangs", func(t *testing.T) {
		d := newDeployedFixture(t, echoBundle("x", "hang"), map[string]any{"maxExecutionTime": 1})
		start := time.Now()
		ev := d.say("hello")
		status, reason := d.eventOutcome(t, ev, 30*time.Second)
		if status != "failed" || reason == "" {
			t.Fatalf("event %s: %q", status, reason)
		}
		// 2 attempts of 1 s each, and short retries between.
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("the hung worker held the event %s", took)
		}
		t.Logf("hung worker: event failed after %s: %s", time.Since(start).Round(time.Millisecond), reason)
		d.Check(d.ws_(d.AdminToken, "GET", "/v1/admin/bots/"+d.botID, nil), 200, "getBot")
	})
}

// TestDeployedCodeWithoutNode: on a machine without Node.js the platform
// runs, and a deployed bot's events fail saying why.
func TestDeployedCodeWithoutNode(t *testing.T) {
	f := newFixture(t)
	f.Platform.Workers.Node = "/nonexistent/node"
	f.Platform.Dispatcher.SetRetry(20*time.Millisecond, 2)
	bot := f.createBot(f.AdminToken, map[string]any{"name": "nonode"})
	f.updateBot(f.AdminToken, bot, map[string]any{"code": echoBundle("v1", "")})
	h := map[string]string{"x-bot-id": bot}
	ev := f.Check(f.Do(reqOf("POST", "/v1/chat/events", f.AdminToken, h, map[string]any{"type": "ping", "payload": map[string]any{}})), 201, "").Str("event.id")
	var reason string
	eventually(t, "the event fails", func() bool {
		e := f.Check(f.Do(reqOf("GET", "/v1/chat/events/"+ev, f.AdminToken, h, nil)), 200, "").Body["event"].(map[string]any)
		reason, _ = e["failureReason"].(string)
		return e["status"] == "failed"
	})
	if !strings.Contains(reason, "Node.js is not installed") {
		t.Fatalf("failure reason %q", reason)
	}
	// callAction to the bot says the same, as a 502.
	r := f.Do(reqOf("POST", "/v1/chat/actions", f.AdminToken, h, map[string]any{"type": "ping", "input": map[string]any{}}))
	if r.Status != 502 || !strings.Contains(r.Str("message"), "Node.js is not installed") {
		t.Fatalf("callAction: %d %s", r.Status, r.Raw)
	}
}

func reqOf(method, path, token string, h map[string]string, body any) apitest.Req {
	return apitest.Req{Method: method, Path: path, Token: token, Headers: h, Body: body}
}

// integrationBundle is an integration's deployed code (start(port), as
// the SDK's integration): it registers, and answers its webhook with what
// it runs as.
const integrationBundle = `'use strict'
const http = require('http')
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', () => {
      const op = req.headers['x-bp-operation']
      if (op === 'register') { console.log('registered at ' + JSON.parse(body).webhookUrl); res.end('{}'); return }
      if (op === 'webhook_received') {
        const r = JSON.parse(body).req
        res.writeHead(200, { 'content-type': 'text/plain' })
        res.end('hook ' + process.env.BP_TOKEN.slice(0, 7) + ' ' + process.env.SECRET_API_KEY + ' ' + (process.env.BP_WEBHOOK_URL ? 'webhook-url' : '') + ' ' + r.body)
        return
      }
      res.end('{}')
    })
  }).listen(port, '127.0.0.1')
} } }
`

// TestDeployedIntegration: an integration deployed with code (no url) is
// installed, registers through its worker (with an integration API key,
// its secrets and BP_WEBHOOK_URL) and answers its webhook; its output is
// the integration's log.
func TestDeployedIntegration(t *testing.T) {
	needNode(t)
	f := newFixture(t)
	intID := f.createIntegration(f.AdminToken, map[string]any{
		"name": "coded", "version": "1.0.0", "code": integrationBundle, "secrets": map[string]any{"API_KEY": "s3cr3t"},
	}).Str("integration.id")
	bot := f.createBot(f.AdminToken, map[string]any{"name": "uses-coded"})
	f.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{"coded": map[string]any{"integrationId": intID, "enabled": true}}})
	b := f.getBot(bot, "x-multiple-integrations", "true")
	inst := b["integrations"].(map[string]any)["coded"].(map[string]any)
	if inst["status"] != "registered" {
		t.Fatalf("installation: %v", inst)
	}
	hook := func(want string) {
		t.Helper()
		res, err := http.Post(inst["webhookUrl"].(string), "text/plain", strings.NewReader("ping"))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(got) != want {
			t.Fatalf("webhook: %d %q, want %q", res.StatusCode, got, want)
		}
	}
	hook("hook bp_iak_ s3cr3t webhook-url ping")
	// New secrets reach the code: the worker is replaced.
	f.Check(f.ws_(f.AdminToken, "PUT", "/v1/admin/integrations/"+intID, map[string]any{"secrets": map[string]any{"API_KEY": "n3w"}}), 200, "updateIntegration")
	hook("hook bp_iak_ n3w webhook-url ping")
	if n := len(f.Platform.Workers.Running()); n != 1 {
		t.Fatalf("%d workers after the secret changed", n)
	}
	q := logsQuery("timeStart", iso(time.Now().Add(-time.Hour)), "timeEnd", iso(time.Now().Add(time.Minute)))
	eventually(t, "the worker's output in getIntegrationLogs", func() bool {
		for _, m := range f.logMessages(t, f.AdminToken, "/v1/admin/integrations/"+intID+"/logs", q) {
			if strings.HasPrefix(m, "registered at http") {
				return true
			}
		}
		return false
	})
}

// TestDeployedHandlerBundle: a bundle exporting only handler(req) (Lambda
// style) runs too; callAction reaches it and answers its output.
func TestDeployedHandlerBundle(t *testing.T) {
	needNode(t)
	f := newFixture(t)
	code := `exports.handler = async (req) => {
  if (req.headers['x-bp-operation'] !== 'action_triggered') return { status: 200, body: '{}' }
  const { type, input } = JSON.parse(req.body)
  return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify({ output: { action: type, pong: input.x, path: req.path } }) }
}`
	bot := f.createBot(f.AdminToken, map[string]any{"name": "handler-only", "code": code})
	r := f.Check(f.Do(reqOf("POST", "/v1/chat/actions", f.AdminToken, map[string]string{"x-bot-id": bot}, map[string]any{"type": "ping", "input": map[string]any{"x": 7}})), 200, "callAction")
	out, _ := r.Body["output"].(map[string]any)
	if out["action"] != "ping" || out["pong"] != float64(7) || out["path"] != "/" {
		t.Fatalf("callAction: %s", r.Raw)
	}
}

// failingRegisterBundle answers as an SDK 0.10 integration (the SDK of CLI
// 0.8.59) does when its register handler throws: an exception it did not
// expect is logged with console.error and answered 400 with the SDK's
// generic RuntimeError; a RuntimeError the handler throws is answered with
// its own message. Its webhook logs an error and answers 500.
const failingRegisterBundle = `'use strict'
const http = require('http')
module.exports = { default: { start(port) {
  http.createServer((req, res) => {
    let body = ''
    req.on('data', (c) => { body += c })
    req.on('end', async () => {
      const op = req.headers['x-bp-operation']
      const cfg = JSON.parse(Buffer.from(req.headers['x-bp-configuration'] || 'e30=', 'base64').toString())
      await new Promise((r) => setTimeout(r, 5))
      if (op === 'register' && cfg.mode === 'runtime') {
        res.writeHead(400).end(JSON.stringify({ id: 'err_1', code: 400, type: 'Runtime', message: 'Telegram said: 401 Unauthorized (check the bot token)' }))
        return
      }
      if (op === 'register' || op === 'webhook_received' || op === 'action_triggered') {
        const e = new Error('getaddrinfo ENOTFOUND api.telegram.org')
        e.code = 'ENOTFOUND'
        console.error(e)
        res.writeHead(op === 'webhook_received' ? 500 : 400).end(JSON.stringify({ id: 'err_2', code: 400, type: 'Runtime',
          message: 'An unexpected error occurred in the integration. Bot owners: Check logs for more informations. Integration owners: throw a RuntimeError to return a custom error message instead.' }))
        return
      }
      res.end('{}')
    })
  }).listen(port, '127.0.0.1')
} } }
`

// TestDeployedRegisterFailureReason: a registration that fails says why in
// the installation's statusReason: the cause the integration's code logged
// when it answered only the SDK's generic error (the worker's shim returns
// the first console.error line of that request), else the message of its
// own error answer. The logged line is the platform's: a webhook's caller
// never gets it; callAction's refusal says it.
func TestDeployedRegisterFailureReason(t *testing.T) {
	needNode(t)
	f := newFixture(t)
	intID := f.createIntegration(f.AdminToken, map[string]any{
		"name": "acme/telegram", "version": "0.4.5", "code": failingRegisterBundle,
		"configuration": map[string]any{"schema": map[string]any{"type": "object"}},
		"actions":       map[string]any{"sendIt": map[string]any{"input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
	}).Str("integration.id")
	for _, tc := range []struct {
		mode       string
		says, not_ []string
	}{
		{"unexpected", []string{"registration failed: answered 400: Error: getaddrinfo ENOTFOUND api.telegram.org", `answered "An unexpected error occurred in the integration."`}, []string{"Bot owners"}},
		{"runtime", []string{"registration failed: answered 400: Telegram said: 401 Unauthorized (check the bot token)"}, []string{"logged", "{"}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			bot := f.createBot(f.AdminToken, map[string]any{"name": "uses-" + tc.mode})
			u := f.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{"mode": tc.mode}}}})
			inst := u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
			reason, _ := inst["statusReason"].(string)
			if inst["status"] != "registration_failed" {
				t.Fatalf("installation: %v", inst)
			}
			for _, s := range tc.says {
				if !strings.Contains(reason, s) {
					t.Fatalf("statusReason %q does not say %q", reason, s)
				}
			}
			for _, s := range tc.not_ {
				if strings.Contains(reason, s) {
					t.Fatalf("statusReason %q says %q", reason, s)
				}
			}
			if tc.mode != "unexpected" {
				return
			}
			res, err := http.Post(inst["webhookUrl"].(string), "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != 500 || res.Header.Get("X-Bp-Logged-Error") != "" {
				t.Fatalf("webhook answer: %d %v", res.StatusCode, res.Header)
			}
			// callAction's refusal says the logged cause too.
			r := f.Do(reqOf("POST", "/v1/chat/actions", f.AdminToken, map[string]string{"x-bot-id": bot}, map[string]any{"type": "telegram:sendIt", "input": map[string]any{}}))
			if r.Status != 400 || !strings.Contains(r.Str("message"), "ENOTFOUND api.telegram.org") {
				t.Fatalf("callAction: %d %s", r.Status, r.Raw)
			}
		})
	}
}
