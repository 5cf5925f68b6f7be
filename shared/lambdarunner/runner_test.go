package lambdarunner_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/lambdarunner"
	"github.com/botforge/platform/shared/lambdarunner/lambdatest"
	"github.com/botforge/platform/shared/platform"
)

func needNode(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
}

// fakeSource serves bundles from memory and mints numbered keys.
type fakeSource struct {
	mu      sync.Mutex
	code    map[string][]byte
	minted  []string
	revoked int      // RevokeOthers calls
	dropped []string // keys revoked themselves
}

func (s *fakeSource) Code(_ context.Context, key string) ([]byte, error) {
	return s.code[key], nil
}

func (s *fakeSource) mint(kind string) (lambdarunner.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tok := kind + strconv.Itoa(len(s.minted)+1)
	s.minted = append(s.minted, tok)
	return lambdarunner.Key{Token: tok,
		RevokeOthers: func() { s.mu.Lock(); s.revoked++; s.mu.Unlock() },
		Revoke:       func() { s.mu.Lock(); s.dropped = append(s.dropped, tok); s.mu.Unlock() }}, nil
}

func (s *fakeSource) BotToken(context.Context, platform.Bot) (lambdarunner.Key, error) {
	return s.mint("bp_bak_test")
}

func (s *fakeSource) IntegrationToken(context.Context, platform.Integration) (lambdarunner.Key, error) {
	return s.mint("bp_iak_test")
}

func newRunner(t *testing.T, endpoint string, src lambdarunner.Source) *lambdarunner.Runner {
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	return &lambdarunner.Runner{
		Lambda: lambda.NewFromConfig(cfg, func(o *lambda.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		IAM:    iam.NewFromConfig(cfg, func(o *iam.Options) { o.BaseEndpoint = aws.String(endpoint) }),
		Source: src, Prefix: "st-code-", RolePath: "/st-code/",
		BoundaryARN: "arn:aws:iam::123456789012:policy/st-code-boundary",
		BotLogGroup: "/platform/st/bots", IntegrationLogGroup: "/platform/st/integrations",
		LogsARN:                "arn:aws:logs:eu-west-1:123456789012:log-group:",
		MaxReservedConcurrency: 10,
		Poll:                   time.Millisecond, Wait: 5 * time.Second, RoleWait: 5 * time.Second,
	}
}

// An SDK-style bot bundle: default.start(port) serves HTTP, routed by the
// x-bp-operation header as the SDK routes; it echoes what it got and logs.
const sdkBundle = `'use strict'
const http = require('http')
exports.default = { start (port) {
  http.createServer((req, res) => {
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      console.info('got', req.headers['x-bp-operation'], 'for', req.headers['x-bot-id'])
      res.writeHead(200, { 'content-type': 'application/json', 'x-answer': 'VERSION' })
      res.end(JSON.stringify({ op: req.headers['x-bp-operation'], body: Buffer.concat(chunks).toString(), token: process.env.BP_TOKEN, api: process.env.BP_API_URL, secret: process.env.SECRET_API_KEY, version: 'VERSION' }))
    })
  }).listen(port, '127.0.0.1')
} }
`

func TestDeployInvokeRemove(t *testing.T) {
	needNode(t)
	f := lambdatest.New(t)
	f.RoleNotReady, f.PendingPolls = 2, 2
	src := &fakeSource{code: map[string][]byte{
		"code/bots/bot_1/aaa.js": []byte(strings.ReplaceAll(sdkBundle, "VERSION", "v1")),
		"code/bots/bot_1/bbb.js": []byte(strings.ReplaceAll(sdkBundle, "VERSION", "v2")),
	}}
	r := newRunner(t, f.URL, src)
	ctx := context.Background()
	b := platform.Bot{ID: "bot_1", WorkspaceID: "wkspace_1", CodeKey: "code/bots/bot_1/aaa.js", SecretValues: map[string]string{"API_KEY": "s3cret"}}

	// First deployment: role, policy, function (retried while the role
	// is not assumable), waits until Active, then revokes older keys.
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	want := []string{"Lambda.GetFunction st-code-bot_1", "IAM.CreateRole st-code-bot_1", "IAM.PutRolePolicy st-code-bot_1",
		"Lambda.CreateFunction st-code-bot_1", "Lambda.CreateFunction st-code-bot_1", "Lambda.CreateFunction st-code-bot_1",
		"Lambda.GetFunction st-code-bot_1", "Lambda.GetFunction st-code-bot_1"}
	if got := f.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls:\n got %q\nwant %q", got, want)
	}
	role := f.Bodies("IAM.CreateRole")[0]
	if role["Path"] != "/st-code/" || role["PermissionsBoundary"] != r.BoundaryARN || !strings.Contains(role["AssumeRolePolicyDocument"].(string), `"Service":"lambda.amazonaws.com"`) {
		t.Fatalf("role: %v", role)
	}
	var pol struct {
		Statement []struct {
			Action   []string
			Resource string
		}
	}
	if err := json.Unmarshal([]byte(f.Policy("st-code-bot_1")), &pol); err != nil || len(pol.Statement) != 1 ||
		!reflect.DeepEqual(pol.Statement[0].Action, []string{"logs:CreateLogStream", "logs:PutLogEvents"}) ||
		pol.Statement[0].Resource != "arn:aws:logs:eu-west-1:123456789012:log-group:/platform/st/bots:log-stream:*/st-code-bot_1[*" {
		t.Fatalf("role policy: %s", f.Policy("st-code-bot_1"))
	}
	created := f.Bodies("Lambda.CreateFunction")[2]
	env := created["Environment"].(map[string]any)["Variables"].(map[string]any)
	if created["Runtime"] != "nodejs22.x" || !reflect.DeepEqual(created["Architectures"], []any{"arm64"}) || created["Handler"] != "index.handler" ||
		created["Role"] != "arn:aws:iam::123456789012:role/st-code/st-code-bot_1" ||
		created["LoggingConfig"].(map[string]any)["LogGroup"] != "/platform/st/bots" {
		t.Fatalf("created: %v", created)
	}
	if env["BP_TOKEN"] != "bp_bak_test1" || env["BP_API_URL"] != "https://api.example.com" || env["SECRET_API_KEY"] != "s3cret" ||
		env["BP_BOT_ID"] != "bot_1" || env["BP_CODE_VERSION"] != lambdarunner.Version(b.CodeKey, b.SecretValues) {
		t.Fatalf("env: %v", env)
	}
	if src.revoked != 1 {
		t.Fatalf("older keys revoked %d times", src.revoked)
	}

	// Deploying what runs: one read.
	if err := r.DeployBot(ctx, b, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	if got := f.Calls(); !reflect.DeepEqual(got, []string{"Lambda.GetFunction st-code-bot_1"}) {
		t.Fatalf("calls of a deployment of what runs: %q", got)
	}

	// A call: through the delivery client, as the dispatcher makes it.
	client := r.Client(delivery.Client(false))
	send := func(b platform.Bot) delivery.Response {
		u, err := r.BotURL(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		return delivery.Send(ctx, client, delivery.Request{URL: u, Body: []byte(`{"event":{"id":"evt_1"}}`),
			Header: http.Header{"X-Bot-Id": {b.ID}, "X-Bp-Operation": {"event_received"}}, Timeout: 20 * time.Second})
	}
	res := send(b)
	var got map[string]string
	if err := json.Unmarshal(res.Body, &got); res.Outcome != delivery.Delivered || err != nil {
		t.Fatalf("call: %+v (%s)", res, res.Body)
	}
	if got["op"] != "event_received" || got["body"] != `{"event":{"id":"evt_1"}}` || got["token"] != "bp_bak_test1" || got["secret"] != "s3cret" ||
		got["version"] != "v1" || res.Header.Get("X-Answer") != "v1" {
		t.Fatalf("answer: %v %v", got, res.Header)
	}
	// Its console output: log lines of the bot, in the shape the log
	// queries read.
	var line map[string]string
	if len(f.Logs()) == 0 || json.Unmarshal([]byte(f.Logs()[len(f.Logs())-1]), &line) != nil ||
		line["botId"] != "bot_1" || line["level"] != "info" || line["message"] != "got event_received for bot_1" || !strings.HasPrefix(line["id"], "log_") || len(line["id"]) != 30 {
		t.Fatalf("logs: %q", f.Logs())
	}
	f.Calls()

	// New code and a changed secret: code, then configuration; the key stays.
	b2 := b
	b2.CodeKey, b2.SecretValues = "code/bots/bot_1/bbb.js", map[string]string{"API_KEY": "other"}
	// A caller that read the new record before the function changed is
	// told to retry (503), not served by the old code.
	if res := send(b2); res.StatusCode != 503 || !strings.Contains(string(res.Body), "being updated") {
		t.Fatalf("call of a version not deployed yet: %+v %s", res, res.Body)
	}
	f.Calls()
	if err := r.DeployBot(ctx, b2, "https://api.example.com"); err != nil {
		t.Fatal(err)
	}
	calls := f.Calls()
	if calls[0] != "Lambda.GetFunction st-code-bot_1" || !contains(calls, "Lambda.UpdateFunctionCode st-code-bot_1") ||
		!contains(calls, "Lambda.UpdateFunctionConfiguration st-code-bot_1") || contains(calls, "IAM.CreateRole st-code-bot_1") ||
		index(calls, "Lambda.UpdateFunctionCode st-code-bot_1") > index(calls, "Lambda.UpdateFunctionConfiguration st-code-bot_1") {
		t.Fatalf("calls of an update: %q", calls)
	}
	upd := f.Bodies("Lambda.UpdateFunctionConfiguration")[0]
	env = upd["Environment"].(map[string]any)["Variables"].(map[string]any)
	if env["BP_TOKEN"] != "bp_bak_test1" || env["SECRET_API_KEY"] != "other" || len(src.minted) != 1 {
		t.Fatalf("updated env: %v (minted %v)", env, src.minted)
	}
	if res := send(b2); res.Outcome != delivery.Delivered || !strings.Contains(string(res.Body), `"version":"v2"`) || !strings.Contains(string(res.Body), `"secret":"other"`) {
		t.Fatalf("call after the update: %+v %s", res, res.Body)
	}

	// Throttled (its concurrency used up): a retryable 503.
	f.SetThrottle(true)
	if res := send(b2); res.StatusCode != 503 || res.Outcome != delivery.Failed || !strings.Contains(string(res.Body), "concurrency limit") {
		t.Fatalf("throttled: %+v", res)
	}
	f.SetThrottle(false)
	f.Calls()

	// An address this runner did not issue (a url a user set to another
	// tenant's function, or one of another process) invokes nothing.
	f.Calls()
	good, _ := r.BotURL(ctx, b2)
	flip := "0"
	if strings.HasSuffix(good, "0") {
		flip = "1"
	}
	other := newRunner(t, f.URL, src)
	forged, _ := other.BotURL(ctx, b2)
	for _, u := range []string{
		"http://lambda.invalid/st-code-bot_1/" + lambdarunner.Version(b2.CodeKey, b2.SecretValues),
		good[:len(good)-1] + flip, forged, good + "/x",
	} {
		res := delivery.Send(ctx, client, delivery.Request{URL: u, Body: []byte(`{}`), Timeout: 5 * time.Second})
		if res.Outcome != delivery.Failed || !strings.Contains(res.Err, "not an address of deployed code") {
			t.Fatalf("%s: %+v", u, res)
		}
	}
	if got := f.Calls(); len(got) != 0 {
		t.Fatalf("forged addresses made calls: %q", got)
	}

	// Removal: function, policy, role; again: nothing to remove, no error.
	for range 2 {
		if err := r.RemoveBot(ctx, "bot_1"); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Calls(); !reflect.DeepEqual(got[:3], []string{"Lambda.DeleteFunction st-code-bot_1", "IAM.DeleteRolePolicy st-code-bot_1", "IAM.DeleteRole st-code-bot_1"}) {
		t.Fatalf("removal: %q", got)
	}
	// A call to a removed function: a retryable answer saying so.
	if res := send(b2); res.StatusCode != 503 || !strings.Contains(string(res.Body), "no function") {
		t.Fatalf("call of a removed function: %+v %s", res, res.Body)
	}
}

// A deployment racing another of the same bot (the function created in
// between its read and its CreateFunction): it fails saying so and revokes
// the key it minted, not the other's.
func TestConcurrentCreation(t *testing.T) {
	f := lambdatest.New(t)
	f.Conflict = 1
	src := &fakeSource{code: map[string][]byte{"k": []byte(`exports.handler = async () => ({})`)}}
	r := newRunner(t, f.URL, src)
	err := r.DeployBot(context.Background(), platform.Bot{ID: "bot_1", CodeKey: "k"}, "https://api.example.com")
	if err == nil || !strings.Contains(err.Error(), "being created by another deployment") {
		t.Fatalf("err %v", err)
	}
	if src.revoked != 0 || !reflect.DeepEqual(src.dropped, []string{"bp_bak_test1"}) {
		t.Fatalf("revoked others %d times, dropped %v", src.revoked, src.dropped)
	}
}

// An integration's maxConcurrency is its function's reserved concurrency:
// set, changed, removed; an account that cannot spare it fails the
// deployment saying so, and the next deployment tries again.
func TestMaxConcurrencyOnAWS(t *testing.T) {
	f := lambdatest.New(t)
	src := &fakeSource{code: map[string][]byte{"k": []byte(`exports.handler = async () => ({})`)}}
	r := newRunner(t, f.URL, src)
	ctx := context.Background()
	n := int64(3)
	i := platform.Integration{ID: "intver_1", CodeKey: "k", MaxConcurrency: &n}
	deploy := func() error { return r.DeployIntegration(ctx, i, "https://api.example.com") }
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 3 {
		t.Fatalf("err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	f.Calls()
	if err := deploy(); err != nil || !reflect.DeepEqual(f.Calls(), []string{"Lambda.GetFunction st-code-intver_1"}) {
		t.Fatalf("a deployment of what runs: %v", err)
	}
	n = 5
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 5 {
		t.Fatalf("changed: err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	i.MaxConcurrency = nil
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 0 || !contains(f.Calls(), "Lambda.DeleteFunctionConcurrency st-code-intver_1") {
		t.Fatalf("removed: err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	f.RefuseConcurrency = true
	i.MaxConcurrency = &n
	if err := deploy(); err == nil || !strings.Contains(err.Error(), "maxConcurrency 5 could not be applied") {
		t.Fatalf("refused: %v", err)
	}
	f.RefuseConcurrency = false
	f.Calls()
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 5 || !contains(f.Calls(), "Lambda.PutFunctionConcurrency st-code-intver_1") {
		t.Fatalf("the next deployment: %v", err)
	}
}

// The operator's cap (PLATFORM_CODE_MAX_RESERVED_CONCURRENCY) bounds what
// an integration's maxConcurrency reserves: min(maxConcurrency, cap); a cap
// of 0 reserves nothing (and removes what was reserved).
func TestMaxReservedConcurrencyCapped(t *testing.T) {
	f := lambdatest.New(t)
	src := &fakeSource{code: map[string][]byte{"k": []byte(`exports.handler = async () => ({})`)}}
	r := newRunner(t, f.URL, src)
	ctx := context.Background()
	n := int64(900)
	i := platform.Integration{ID: "intver_1", CodeKey: "k", MaxConcurrency: &n}
	deploy := func() error { return r.DeployIntegration(ctx, i, "https://api.example.com") }
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 10 {
		t.Fatalf("capped: err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	n = 4
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 4 {
		t.Fatalf("under the cap: err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	r.MaxReservedConcurrency = 0
	n = 900
	f.Calls()
	if err := deploy(); err != nil || f.Reserved("st-code-intver_1") != 0 || contains(f.Calls(), "Lambda.PutFunctionConcurrency st-code-intver_1") {
		t.Fatalf("cap 0: err %v, reserved %d", err, f.Reserved("st-code-intver_1"))
	}
	g := platform.Integration{ID: "intver_2", CodeKey: "k", MaxConcurrency: &n}
	if err := r.DeployIntegration(ctx, g, "https://api.example.com"); err != nil || f.Reserved("st-code-intver_2") != 0 || contains(f.Calls(), "Lambda.PutFunctionConcurrency st-code-intver_2") {
		t.Fatalf("cap 0, new function: err %v, reserved %d", err, f.Reserved("st-code-intver_2"))
	}
}

func contains(s []string, v string) bool { return index(s, v) >= 0 }

func index(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// A handler-style integration bundle, one that throws at load, and one
// whose handler crashes the process: the same outcomes as the local
// worker's (an answer; a failure saying why; a call sent and not answered).
func TestIntegrationAndFailures(t *testing.T) {
	needNode(t)
	f := lambdatest.New(t)
	src := &fakeSource{code: map[string][]byte{
		"ok.js":    []byte(`exports.handler = async (req) => { console.warn('webhook', req.headers['x-bp-operation']); return { status: 202, body: JSON.stringify({ hook: process.env.BP_WEBHOOK_URL, id: process.env.BP_INTEGRATION_ID, token: process.env.BP_TOKEN, method: req.method }) } }`),
		"load.js":  []byte(`throw new Error('boom at load')`),
		"crash.js": []byte(`exports.handler = async () => { process.exit(7) }`),
		"throw.js": []byte(`exports.handler = async () => { throw new Error('bad input') }`),
		// As an SDK integration answers an exception it did not expect:
		// the cause logged, a generic error answered.
		"sdkfail.js": []byte(`module.exports = { default: { start (port) { require('http').createServer((req, res) => {
  req.on('data', () => {}); req.on('end', () => {
    console.error(new Error('getaddrinfo ENOTFOUND api.telegram.org'))
    res.writeHead(400).end(JSON.stringify({ id: 'err_1', code: 400, type: 'Runtime', message: 'An unexpected error occurred in the integration. Bot owners: Check logs.' }))
  }) }).listen(port, '127.0.0.1') } } }`),
	}}
	r := newRunner(t, f.URL, src)
	ctx := context.Background()
	client := r.Client(delivery.Client(false))
	call := func(i platform.Integration) delivery.Response {
		if err := r.DeployIntegration(ctx, i, "https://api.example.com/"); err != nil {
			t.Fatal(err)
		}
		u, err := r.IntegrationURL(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		return delivery.Send(ctx, client, delivery.Request{URL: u, Body: []byte(`{}`), Header: http.Header{"X-Bp-Operation": {"webhook_received"}}, Timeout: 20 * time.Second})
	}
	i := platform.Integration{ID: "intver_1", CodeKey: "ok.js"}
	res := call(i)
	if res.StatusCode != 202 || res.Outcome != delivery.Delivered ||
		string(res.Body) != `{"hook":"https://api.example.com/webhooks","id":"intver_1","token":"bp_iak_test1","method":"POST"}` {
		t.Fatalf("integration: %+v %s", res, res.Body)
	}
	if c := f.Bodies("Lambda.CreateFunction")[0]; c["LoggingConfig"].(map[string]any)["LogGroup"] != "/platform/st/integrations" || c["FunctionName"] != "st-code-intver_1" {
		t.Fatalf("integration function: %v", c)
	}
	var line map[string]string
	if json.Unmarshal([]byte(f.Logs()[len(f.Logs())-1]), &line) != nil || line["integrationId"] != "intver_1" || line["level"] != "warn" || line["message"] != "webhook webhook_received" {
		t.Fatalf("integration logs: %q", f.Logs())
	}

	for _, c := range []struct {
		key, outcome, reason string
	}{
		{"load.js", string(delivery.OutcomeUnknown), "sent, then Post \"http://lambda.invalid/st-code-intver_1/"},
		{"crash.js", string(delivery.OutcomeUnknown), "the deployed code failed: the runtime exited"},
		{"throw.js", string(delivery.Failed), "answered 500"},
		{"sdkfail.js", string(delivery.Failed), `answered 400: Error: getaddrinfo ENOTFOUND api.telegram.org (logged by the code, which answered "An unexpected error occurred in the integration.")`},
	} {
		i.CodeKey = c.key
		res := call(i)
		if string(res.Outcome) != c.outcome || !strings.Contains(res.Err, c.reason) {
			t.Errorf("%s: %+v", c.key, res)
		}
		if c.key == "load.js" && !strings.Contains(res.Err, "the deployed code failed to load: boom at load") {
			t.Errorf("%s: %+v", c.key, res)
		}
		if c.key == "throw.js" && !strings.Contains(string(res.Body), "the deployed code threw: bad input") {
			t.Errorf("%s: %s", c.key, res.Body)
		}
	}
}

func TestFunctionNames(t *testing.T) {
	r := &lambdarunner.Runner{Prefix: "a-long-stack-name-for-a-platform-code-"}
	long, err := r.FunctionName("int", "intver_01JDB2N0Q0QXWZ8V8J5D3M2XKQ")
	if err != nil || len(long) != 64 || !strings.HasPrefix(long, r.Prefix+"i") {
		t.Fatalf("a long name: %q %v", long, err)
	}
	if other, _ := r.FunctionName("int", "intver_01JDB2N0Q0QXWZ8V8J5D3M2XKR"); other == long {
		t.Fatal("two ids, one name")
	}
	r.Prefix = "an-extremely-long-stack-name-of-this-platform-code-"
	if _, err := r.BotURL(context.Background(), platform.Bot{ID: "bot_01JDB2N0Q0QXWZ8V8J5D3M2XKQ", CodeKey: "k"}); err == nil {
		t.Fatal("an address of a function that cannot exist")
	}
	// The address changes with the code and with the secrets, not with
	// the order of the secrets.
	a := lambdarunner.Version("k", map[string]string{"A": "1", "B": "2"})
	if a != lambdarunner.Version("k", map[string]string{"B": "2", "A": "1"}) || a == lambdarunner.Version("k2", map[string]string{"A": "1", "B": "2"}) ||
		a == lambdarunner.Version("k", map[string]string{"A": "1", "B": "3"}) || a == lambdarunner.Version("k", map[string]string{"A": "12"}) {
		t.Fatal("versions")
	}
}
