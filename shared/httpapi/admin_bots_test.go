package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awsscheduler "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/delivery"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/scheduler"
	"github.com/botforge/platform/shared/scheduler/schedulertest"
)

func (f *fixture) updateBot(token, id string, body any) apitest.Response {
	f.T.Helper()
	return f.Check(f.ws_(token, "PUT", "/v1/admin/bots/"+id, body), 200, "updateBot")
}

func (f *fixture) getBot(id string, headers ...string) map[string]any {
	f.T.Helper()
	h := map[string]string{"x-workspace-id": f.ws}
	for i := 0; i+1 < len(headers); i += 2 {
		h[headers[i]] = headers[i+1]
	}
	r := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + id, Token: f.AdminToken, Headers: h}), 200, "getBot")
	return r.Body["bot"].(map[string]any)
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestUpdateBotFullDefinition: updateBot takes every field of the spec's
// Bot, getBot answers it back, maps are patched entry by entry.
func TestUpdateBotFullDefinition(t *testing.T) {
	f := newFixture(t)
	id := f.createBot(f.AdminToken, map[string]any{"name": "before", "tags": map[string]string{"keep": "1", "drop": "2"}})
	def := map[string]any{
		"name": "Concierge", "description": "answers the door", "url": "https://bot.example.com/hook",
		"code": "export default {}", "alwaysAlive": true, "maxExecutionTime": 30, "dev": false,
		"tags":          map[string]string{"team": "qa", "drop": ""},
		"user":          map[string]any{"tags": map[string]any{"email": map[string]any{"title": "Email"}}},
		"conversation":  map[string]any{"tags": map[string]any{"topic": map[string]any{"title": "Topic", "description": "what about"}}},
		"message":       map[string]any{"tags": map[string]any{"source": map[string]any{}}},
		"states":        map[string]any{"counter": map[string]any{"type": "conversation", "schema": map[string]any{"type": "object"}, "expiry": 60000}},
		"events":        map[string]any{"doorbell": map[string]any{"title": "Doorbell", "schema": map[string]any{"type": "object"}, "attributes": map[string]any{"a": "b"}}},
		"actions":       map[string]any{"open": map[string]any{"title": "Open", "input": map[string]any{"schema": map[string]any{}}, "output": map[string]any{"schema": map[string]any{}}}},
		"configuration": map[string]any{"data": map[string]any{"floor": 3}, "schema": map[string]any{"type": "object"}},
		"subscriptions": map[string]any{"events": map[string]any{"doorbell": map[string]any{}}},
		"recurringEvents": map[string]any{"nightly": map[string]any{
			"schedule": map[string]any{"cron": "0 3 * * *"}, "type": "doorbell", "payload": map[string]any{"who": "cron"},
		}},
		"medias":             []map[string]string{{"url": "https://example.com/a.png", "name": "avatar"}},
		"secrets":            map[string]any{"API_TOKEN": "t0k3n"},
		"authentication":     "iam",
		"layers":             []string{},
		"shouldMergePlugins": false,
		"blocked":            false,
	}
	u := f.updateBot(f.AdminToken, id, def).Body["bot"].(map[string]any)
	got := f.getBot(id)
	if jsonOf(got) != jsonOf(u) {
		t.Fatalf("getBot differs from updateBot's answer:\n%s\n%s", jsonOf(got), jsonOf(u))
	}
	for _, k := range []string{"user", "conversation", "message", "states", "events", "actions", "configuration", "subscriptions", "medias"} {
		if jsonOf(got[k]) != jsonOf(def[k]) {
			t.Errorf("%s: got %s, want %s", k, jsonOf(got[k]), jsonOf(def[k]))
		}
	}
	if got["name"] != "Concierge" || got["description"] != "answers the door" || got["alwaysAlive"] != true ||
		got["maxExecutionTime"] != float64(30) || got["status"] != "active" || got["deployedAt"] == nil {
		t.Fatalf("scalars: %s", jsonOf(got))
	}
	if jsonOf(got["tags"]) != `{"keep":"1","team":"qa"}` {
		t.Fatalf("tags: %s", jsonOf(got["tags"]))
	}
	re := got["recurringEvents"].(map[string]any)["nightly"].(map[string]any)
	if re["failedAttempts"] != float64(0) || re["lastFailureReason"] != nil || jsonOf(re["payload"]) != `{"who":"cron"}` {
		t.Fatalf("recurring event: %v", re)
	}
	if jsonOf(got["secrets"]) != `["API_TOKEN"]` || strings.Contains(jsonOf(got), "t0k3n") {
		t.Fatalf("secrets: %v", got["secrets"])
	}

	// Entries patch one by one: null removes, others stay.
	u2 := f.updateBot(f.AdminToken, id, map[string]any{
		"states":        map[string]any{"counter": nil, "profile": map[string]any{"type": "user", "schema": map[string]any{}}},
		"user":          map[string]any{"tags": map[string]any{"email": nil}},
		"events":        map[string]any{"knock": map[string]any{"schema": map[string]any{}}},
		"url":           nil,
		"secrets":       map[string]any{"API_TOKEN": nil},
		"medias":        []any{},
		"subscriptions": map[string]any{"events": nil},
	}).Body["bot"].(map[string]any)
	if jsonOf(u2["states"]) != `{"profile":{"schema":{},"type":"user"}}` || jsonOf(u2["user"]) != `{"tags":{}}` {
		t.Fatalf("entry patch: states %s user %s", jsonOf(u2["states"]), jsonOf(u2["user"]))
	}
	if len(u2["events"].(map[string]any)) != 2 || u2["secrets"] != nil || len(u2["medias"].([]any)) != 0 || jsonOf(u2["subscriptions"]) != `{"events":null}` {
		t.Fatalf("after patch: %s", jsonOf(u2))
	}
	if u2["updatedAt"].(string) < u["updatedAt"].(string) {
		t.Fatal("updatedAt went back")
	}

	// A viewer reads the definition, not the signing secret.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	v := f.Check(f.ws_(viewer, "GET", "/v1/admin/bots/"+id, nil), 200, "getBot")
	if v.Str("bot.signingSecret") != "" || v.Str("bot.name") != "Concierge" {
		t.Fatalf("viewer's getBot: %s", v.Raw)
	}
	if f.getBot(id)["signingSecret"] == "" {
		t.Fatal("a developer does not see the signing secret")
	}
}

// TestRecurringEventsAtMostOnceAMinute: a schedule that would fire more
// than once a minute is refused with a 400 naming the field, by createBot
// and updateBot, and leaves no schedule; one value of seconds is accepted.
func TestRecurringEventsAtMostOnceAMinute(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	re := func(cron string) map[string]any {
		return map[string]any{"r": map[string]any{"schedule": map[string]any{"cron": cron}, "type": "t", "payload": map[string]any{}}}
	}
	id := f.createBot(tok, map[string]any{"name": "steady"})
	for _, tc := range []struct {
		cron   string
		status int
	}{
		{"* * * * * *", 400},
		{"*/2 * * * * *", 400},
		{"0,30 * * * * *", 400},
		{"0-1 * * * * *", 400},
		{"* * * * *", 200},
		{"0 * * * * *", 200},
		{"30 */5 * * * *", 200},
		{"@hourly", 200},
	} {
		t.Run(tc.cron, func(t *testing.T) {
			for _, r := range []apitest.Response{
				f.ws_(tok, "POST", "/v1/admin/bots", map[string]any{"recurringEvents": re(tc.cron)}),
				f.ws_(tok, "PUT", "/v1/admin/bots/"+id, map[string]any{"recurringEvents": re(tc.cron)}),
			} {
				if r.Status != tc.status {
					t.Fatalf("got %d %s, want %d", r.Status, r.Raw, tc.status)
				}
				if tc.status == 400 && (r.Body["type"] != "InvalidPayload" ||
					!strings.Contains(r.Str("message"), `"recurringEvents.r.schedule.cron"`) ||
					!strings.Contains(r.Str("message"), "at most once a minute")) {
					t.Fatalf("refusal: %s", r.Raw)
				}
			}
		})
	}
	// Only the accepted ones were scheduled: the bot's one entry and one
	// per accepted createBot.
	for _, s := range f.Platform.Scheduler.Schedules() {
		if c, err := scheduler.ParseCron(s.Cron); err != nil || c.CheckFrequency() != nil {
			t.Fatalf("a schedule firing more than once a minute was made: %+v", s)
		}
	}
}

func TestUpdateBotRefusals(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	id := f.createBot(tok, map[string]any{"name": "steady"})
	intID := f.createIntegration(tok, integrationDef("strict", "1.0.0", nil)).Str("integration.id")
	before := f.getBot(id)
	for _, tc := range []struct {
		name   string
		body   any
		status int
		want   string
	}{
		{"unknown field", map[string]any{"nope": 1}, 400, "nope"},
		{"empty name", map[string]any{"name": " "}, 400, "name"},
		{"bad url", map[string]any{"url": "not a url"}, 400, "url"},
		{"maxExecutionTime 0", map[string]any{"maxExecutionTime": 0}, 400, "maxExecutionTime"},
		{"bad secret name", map[string]any{"secrets": map[string]any{"bad-name": "x"}}, 400, "secrets.bad-name"},
		{"bad cron", map[string]any{"recurringEvents": map[string]any{"r": map[string]any{"schedule": map[string]any{"cron": "every day"}, "type": "t", "payload": map[string]any{}}}}, 400, "recurringEvents.r.schedule.cron"},
		{"empty type", map[string]any{"recurringEvents": map[string]any{"r": map[string]any{"schedule": map[string]any{"cron": "* * * * *"}, "type": "", "payload": map[string]any{}}}}, 400, "recurringEvents.r.type"},
		{"missing payload", map[string]any{"recurringEvents": map[string]any{"r": map[string]any{"schedule": map[string]any{"cron": "* * * * *"}, "type": "t"}}}, 400, "payload"},
		{"bad state type", map[string]any{"states": map[string]any{"s": map[string]any{"type": "planet", "schema": map[string]any{}}}}, 400, "states.s.type"},
		{"unknown integration", map[string]any{"integrations": map[string]any{"x": map[string]any{"integrationId": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ"}}}, 400, "not found"},
		{"alias without integrationId", map[string]any{"integrations": map[string]any{"nothing": map[string]any{"enabled": true}}}, 400, "integrationId"},
		{"unknown configuration type", map[string]any{"integrations": map[string]any{"s": map[string]any{"integrationId": intID, "configurationType": "nope"}}}, 400, "configurationType"},
		{"configuration against schema", map[string]any{"integrations": map[string]any{"s": map[string]any{"integrationId": intID, "configuration": map[string]any{"token": 5}}}}, 400, "integrations.s.configuration"},
		{"required configuration", map[string]any{"integrations": map[string]any{"s": map[string]any{"integrationId": intID, "configurationType": "oauth", "configuration": map[string]any{}}}}, 400, "clientId"},
		{"unknown channel", map[string]any{"integrations": map[string]any{"s": map[string]any{"integrationId": intID, "disabledChannels": []string{"fax"}}}}, 400, "fax"},
		{"bad plugin id", map[string]any{"plugins": map[string]any{"p": map[string]any{"id": "short"}}}, 400, "plugins.p.id"},
		{"unknown plugin", map[string]any{"plugins": map[string]any{"p": map[string]any{"id": "intver_01JZZZZZZZZZZZZZZZZZZZZZZZ", "interfaces": map[string]any{"creatable": map[string]any{"integrationId": intID}}}}}, 400, "not found"},
		{"malformed", `{"name":`, 400, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.ws_(tok, "PUT", "/v1/admin/bots/"+id, tc.body)
			if r.Status != tc.status || !strings.Contains(r.Str("message"), tc.want) {
				t.Fatalf("got %d %s, want %d mentioning %q", r.Status, r.Raw, tc.status, tc.want)
			}
		})
	}
	if after := f.getBot(id); jsonOf(after) != jsonOf(before) {
		t.Fatalf("refused updates changed the bot:\n%s\n%s", jsonOf(before), jsonOf(after))
	}
	if n := len(f.Platform.Scheduler.Schedules()); n != 0 {
		t.Fatalf("refused updates left %d schedules", n)
	}

	// Roles and tenancy: viewers and bot keys cannot update; other
	// workspaces do not see the bot.
	viewer, _ := f.invite("viewer@example.com", "viewer")
	f.Check(f.ws_(viewer, "PUT", "/v1/admin/bots/"+id, map[string]any{"name": "x"}), 403, "")
	key := f.Check(f.ws_(tok, "POST", "/v1/admin/bots/baks", map[string]any{"botId": id}), 200, "createBotApiKey").Str("value")
	f.Check(f.ws_(key, "PUT", "/v1/admin/bots/"+id, map[string]any{"name": "x"}), 403, "")
	outTok, _ := newFixtureOn(f).invite("eve@example.com", "owner")
	outWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outTok, Body: map[string]any{"name": "Eve"}}), 200, "createWorkspace").Str("id")
	for _, ws := range []string{f.ws, outWs} {
		r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + id, Token: outTok, Body: map[string]any{"name": "x"}, Headers: map[string]string{"x-workspace-id": ws}})
		if r.Status != 404 {
			t.Fatalf("outsider updateBot via %s: %d", ws, r.Status)
		}
	}
	// An outsider cannot install another workspace's private integration.
	outBot := (&fixture{Env: f.Env, ws: outWs}).createBot(outTok, nil)
	r := f.Do(apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + outBot, Token: outTok, Headers: map[string]string{"x-workspace-id": outWs},
		Body: map[string]any{"integrations": map[string]any{"s": map[string]any{"integrationId": intID}}}})
	if r.Status != 400 || !strings.Contains(r.Str("message"), "not found") {
		t.Fatalf("installing a foreign private integration: %d %s", r.Status, r.Raw)
	}
	f.Check(f.ws_(tok, "PUT", "/v1/admin/bots/bot_01JZZZZZZZZZZZZZZZZZZZZZZZ", map[string]any{}), 404, "")
}

// TestIntegrationInstallAndRegistration: installing an integration makes
// a registration call to its url, signed with its signing secret; the
// outcome moves the instance; a hanging integration ends outcome_unknown
// and is never retried until an administrator reconciles it.
func TestIntegrationInstallAndRegistration(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	fi := newFakeIntegration(t)
	created := f.createIntegration(tok, integrationDef("chatty", "1.0.0", map[string]any{"url": fi.URL, "maxExecutionTime": 1}))
	intID := created.Str("integration.id")
	fi.secret.Store(created.Str("integration.signingSecret"))
	bot := f.createBot(tok, nil)

	var results []delivery.Result
	var rmu sync.Mutex
	f.Platform.OnDelivery(func(_ context.Context, r delivery.Result) {
		rmu.Lock()
		results = append(results, r)
		rmu.Unlock()
	})

	// Install under an alias: registration reaches the integration, signed.
	u := f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{
		"main": map[string]any{"integrationId": intID, "enabled": true, "configuration": map[string]any{"token": "abc"}},
	}})
	calls := fi.seen()
	if len(calls) != 1 {
		t.Fatalf("registration calls: %+v", calls)
	}
	c := calls[0]
	if c.Operation != "register" || !c.SignatureOK || c.BotID != bot || c.IntegrationID != intID || c.Alias != "main" ||
		c.Configuration["token"] != "abc" || !strings.HasSuffix(c.Body["webhookUrl"].(string), "/"+c.WebhookID) {
		t.Fatalf("registration call: %+v", c)
	}
	inst := u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
	if inst["status"] != "registered" || inst["statusReason"] != nil || inst["webhookId"] != c.WebhookID || inst["name"] != "chatty" || inst["enabled"] != true {
		t.Fatalf("instance after registration: %v", inst)
	}
	// Keyed by alias on demand.
	byAlias := f.getBot(bot, "x-multiple-integrations", "true")["integrations"].(map[string]any)
	if _, ok := byAlias["main"]; !ok || len(byAlias) != 1 {
		t.Fatalf("keyed by alias: %v", byAlias)
	}
	rmu.Lock()
	if len(results) != 1 || results[0].Kind != "register" || results[0].Outcome != delivery.Delivered {
		t.Fatalf("observed: %+v", results)
	}
	rmu.Unlock()

	// Disabling calls nothing; the same configuration again calls nothing.
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"enabled": false}}})
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{intID: map[string]any{"configuration": map[string]any{"token": "abc"}}}})
	if n := len(fi.seen()); n != 1 {
		t.Fatalf("%d calls after disable and same configuration", n)
	}

	// A failing integration: the instance ends registration_failed, with the reason.
	fi.mode.Store("fail")
	u = f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"enabled": true, "configuration": map[string]any{"token": "xyz"}}}})
	inst = u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
	if inst["status"] != "registration_failed" || !strings.Contains(fmt.Sprint(inst["statusReason"]), "answered 400") {
		t.Fatalf("failed registration: %v", inst)
	}

	// A hanging integration: outcome_unknown, the instance stays pending.
	fi.mode.Store("hang")
	start := time.Now()
	u = f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"configuration": map[string]any{"token": "slow"}}}})
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("updateBot waited %s for a hanging integration", d)
	}
	inst = u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
	reason := fmt.Sprint(inst["statusReason"])
	if inst["status"] != "registration_pending" || !strings.Contains(reason, "outcome unknown") {
		t.Fatalf("hanging registration: %v", inst)
	}
	opID := reason[strings.Index(reason, "intop_") : strings.Index(reason, "intop_")+32]
	op := f.Check(f.ws_(tok, "GET", "/v1/admin/integration-operations/"+opID, nil), 200, "")
	if op.Str("operation.status") != "outcome_unknown" || op.Str("operation.type") != "register" || op.Str("operation.deadline") == "" || op.Str("operation.error.message") == "" {
		t.Fatalf("operation: %s", op.Raw)
	}
	// Never retried: no new call, even when the bot is read or updated again.
	n := len(fi.seen())
	time.Sleep(1500 * time.Millisecond)
	f.updateBot(tok, bot, map[string]any{"name": "again"})
	if len(fi.seen()) != n {
		t.Fatal("an operation of unknown outcome was retried")
	}
	list := f.Check(f.ws_(tok, "GET", "/v1/admin/bots/"+bot+"/integration-operations", nil), 200, "")
	if ops := list.List("operations"); len(ops) != 3 || ops[0].(map[string]any)["id"] != opID {
		t.Fatalf("bot operations: %s", list.Raw)
	}

	// Reconciliation: administrators only, then once.
	dev, _ := f.invite("dev@example.com", "developer")
	f.Check(f.ws_(dev, "POST", "/v1/admin/integration-operations/"+opID+"/reconcile", map[string]any{"status": "succeeded"}), 403, "")
	f.Check(f.ws_(tok, "POST", "/v1/admin/integration-operations/"+opID+"/reconcile", map[string]any{"status": "maybe"}), 400, "")
	f.Check(f.ws_(tok, "POST", "/v1/admin/integration-operations/"+opID+"/reconcile", map[string]any{"status": "succeeded", "extra": 1}), 400, "")
	rec := f.Check(f.ws_(tok, "POST", "/v1/admin/integration-operations/"+opID+"/reconcile", map[string]any{"status": "succeeded", "note": "checked their logs"}), 200, "")
	if rec.Str("operation.status") != "succeeded" || rec.Str("operation.reconciliation.note") != "checked their logs" {
		t.Fatalf("reconciled: %s", rec.Raw)
	}
	f.Check(f.ws_(tok, "POST", "/v1/admin/integration-operations/"+opID+"/reconcile", map[string]any{"status": "failed"}), 409, "")
	inst = f.getBot(bot)["integrations"].(map[string]any)[intID].(map[string]any)
	if inst["status"] != "registered" {
		t.Fatalf("after reconciliation: %v", inst)
	}
	// Another workspace cannot read it.
	outTok, _ := newFixtureOn(f).invite("eve@example.com", "owner")
	outWs := f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: outTok, Body: map[string]any{"name": "Eve"}}), 200, "createWorkspace").Str("id")
	if r := f.Do(apitest.Req{Method: "GET", Path: "/v1/admin/integration-operations/" + opID, Token: outTok, Headers: map[string]string{"x-workspace-id": outWs}}); r.Status != 404 {
		t.Fatalf("foreign operation: %d", r.Status)
	}

	// Installed, the integration cannot be deleted; removed, it is
	// unregistered and can.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+intID, nil), 409, "")
	fi.mode.Store("ok")
	u = f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"main": nil}})
	if len(u.Body["bot"].(map[string]any)["integrations"].(map[string]any)) != 0 {
		t.Fatalf("after removal: %s", u.Raw)
	}
	last := fi.seen()[len(fi.seen())-1]
	if last.Operation != "unregister" || !last.SignatureOK {
		t.Fatalf("unregistration: %+v", last)
	}
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+intID, nil), 200, "deleteIntegration")
}

// TestInstallByIDAndConcurrency: installing keyed by integration id (the
// alias is then the integration's name), and concurrent installs count
// exactly.
func TestInstallByIDAndConcurrency(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	intID := f.createIntegration(tok, integrationDef("plain", "1.0.0", nil)).Str("integration.id")
	bot := f.createBot(tok, map[string]any{"dev": true})
	u := f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true}}})
	inst := u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
	// No url: registration fails, saying why.
	if inst["status"] != "registration_failed" || !strings.Contains(fmt.Sprint(inst["statusReason"]), "no url") {
		t.Fatalf("instance: %v", inst)
	}
	if _, ok := f.getBot(bot, "x-multiple-integrations", "true")["integrations"].(map[string]any)["plain"]; !ok {
		t.Fatal("the alias of an install by id is the integration's name")
	}
	// Plugins refer to installed integrations and their interfaces.
	ifaceID := f.Check(f.ws_(tok, "POST", "/v1/admin/interfaces", interfaceDef("creatable", "1.0.0", nil)), 200, "createInterface").Str("interface.id")
	pluginID := f.createPlugin(tok, pluginDef("reminders", "1.0.0", map[string]any{"dependencies": map[string]any{
		"interfaces":   map[string]any{"creatable": map[string]any{"id": ifaceID}},
		"integrations": map[string]any{"chat": map[string]any{"name": "plain", "version": "1.0.0"}},
	}})).Str("plugin.id")
	u = f.updateBot(tok, bot, map[string]any{"plugins": map[string]any{"reminders": map[string]any{
		"id": pluginID, "configuration": map[string]any{"every": "day"},
		"interfaces":   map[string]any{"creatable": map[string]any{"integrationId": intID}},
		"integrations": map[string]any{"chat": map[string]any{"integrationId": intID, "integrationAlias": "plain"}},
	}}})
	p := u.Body["bot"].(map[string]any)["plugins"].(map[string]any)["reminders"].(map[string]any)
	ifc := p["interfaces"].(map[string]any)["creatable"].(map[string]any)
	if p["enabled"] != true || ifc["interfaceId"] != ifaceID || ifc["integrationAlias"] != "plain" || p["name"] != "reminders" || p["version"] != "1.0.0" {
		t.Fatalf("plugin: %v", p)
	}

	// Concurrent installs under distinct aliases, and concurrent tag
	// updates: nothing lost, the install counter exact.
	const n = 8
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f.updateBot(tok, bot, map[string]any{
				"integrations": map[string]any{fmt.Sprintf("a%d", i): map[string]any{"integrationId": intID}},
				"tags":         map[string]string{fmt.Sprintf("t%d", i): "x"},
			})
		}(i)
	}
	wg.Wait()
	got := f.getBot(bot, "x-multiple-integrations", "true")
	if len(got["integrations"].(map[string]any)) != n+1 || len(got["tags"].(map[string]any)) != n {
		t.Fatalf("after concurrent updates: %d integrations, %d tags", len(got["integrations"].(map[string]any)), len(got["tags"].(map[string]any)))
	}
	rec, err := f.Platform.Store.GetIntegration(context.Background(), intID)
	if err != nil || rec.InstallCount != n+1 {
		t.Fatalf("installCount %d, want %d (%v)", rec.InstallCount, n+1, err)
	}
	// Deleting the bot uncounts its installs.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	if rec, _ := f.Platform.Store.GetIntegration(context.Background(), intID); rec.InstallCount != 0 {
		t.Fatalf("installCount after deleteBot: %d", rec.InstallCount)
	}
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/integrations/"+intID, nil), 200, "deleteIntegration")
}

// botServer is a bot's url: it records deliveries, checks their signature
// with the bot's signing secret, and fails while failing is set.
type botServer struct {
	*httptest.Server
	secret  atomic.Value
	failing atomic.Bool
	mu      sync.Mutex
	got     []botDelivery
}

type botDelivery struct {
	Operation, Type, BotID string
	Event                  map[string]any
	SignatureOK            bool
	At                     time.Time
}

func newBotServer(t *testing.T) *botServer {
	b := &botServer{}
	b.secret.Store("")
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Event map[string]any `json:"event"`
		}
		_ = json.Unmarshal(raw, &body)
		b.mu.Lock()
		b.got = append(b.got, botDelivery{
			Operation: r.Header.Get("x-bp-operation"), Type: r.Header.Get("x-bp-type"), BotID: r.Header.Get("x-bot-id"),
			Event: body.Event, At: time.Now(),
			SignatureOK: delivery.Verify(b.secret.Load().(string), raw, r.Header.Get(delivery.SignatureHeader), time.Now(), 5*time.Minute),
		})
		b.mu.Unlock()
		if b.failing.Load() {
			w.WriteHeader(503)
			w.Write([]byte("down for maintenance"))
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *botServer) deliveries() []botDelivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]botDelivery(nil), b.got...)
}

func (b *botServer) waitFor(t *testing.T, n int, within time.Duration) []botDelivery {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if d := b.deliveries(); len(d) >= n {
			return d
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%d deliveries in %s, want %d", len(b.deliveries()), within, n)
	return nil
}

// TestRecurringEventsDelivered: a recurring event every second reaches the
// bot's url, signed; a failing bot raises failedAttempts; removing the
// entry, then the bot, stops the deliveries.
func TestRecurringEventsDelivered(t *testing.T) {
	f := newFixture(t)
	f.Platform.Scheduler.AllowSubMinute() // every second, to see firings within seconds
	tok := f.AdminToken
	bs := newBotServer(t)
	every := map[string]any{"schedule": map[string]any{"cron": "* * * * * *"}, "type": "heartbeat", "payload": map[string]any{"n": 1}}
	r := f.Check(f.ws_(tok, "POST", "/v1/admin/bots", map[string]any{"url": bs.URL, "recurringEvents": map[string]any{"beat": every}}), 200, "createBot")
	bot := r.Str("bot.id")
	bs.secret.Store(r.Str("bot.signingSecret"))

	d := bs.waitFor(t, 2, 5*time.Second)[0]
	if d.Operation != "event_received" || d.Type != "heartbeat" || d.BotID != bot || !d.SignatureOK {
		t.Fatalf("delivery: %+v", d)
	}
	if d.Event["type"] != "heartbeat" || jsonOf(d.Event["payload"]) != `{"n":1}` || d.Event["status"] != "pending" || !strings.HasPrefix(d.Event["id"].(string), "evt_") {
		t.Fatalf("event: %v", d.Event)
	}
	// The event is stored where the Chat API reads events.
	ev := f.Check(f.Do(apitest.Req{Method: "GET", Path: "/v1/chat/events/" + d.Event["id"].(string), Token: tok, Headers: map[string]string{"x-bot-id": bot}}), 200, "getEvent")
	if ev.Str("event.type") != "heartbeat" || ev.Str("event.createdAt") != d.Event["createdAt"] {
		t.Fatalf("getEvent: %s", ev.Raw)
	}

	// A failing bot: failedAttempts grows, the reason is kept.
	bs.failing.Store(true)
	deadline := time.Now().Add(6 * time.Second)
	var re map[string]any
	for time.Now().Before(deadline) {
		re = f.getBot(bot)["recurringEvents"].(map[string]any)["beat"].(map[string]any)
		if re["failedAttempts"].(float64) >= 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if re["failedAttempts"].(float64) < 2 || !strings.Contains(fmt.Sprint(re["lastFailureReason"]), "503") {
		t.Fatalf("after failures: %v", re)
	}
	// Recovering resets them.
	bs.failing.Store(false)
	deadline = time.Now().Add(6 * time.Second)
	for time.Now().Before(deadline) {
		re = f.getBot(bot)["recurringEvents"].(map[string]any)["beat"].(map[string]any)
		if re["failedAttempts"].(float64) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if re["failedAttempts"].(float64) != 0 || re["lastFailureReason"] != nil {
		t.Fatalf("after recovery: %v", re)
	}

	// A second entry, then the first removed: only the second keeps firing.
	f.updateBot(tok, bot, map[string]any{"recurringEvents": map[string]any{
		"beat": nil, "tock": map[string]any{"schedule": map[string]any{"cron": "* * * * * *"}, "type": "tock", "payload": map[string]any{}},
	}})
	if s := f.Platform.Scheduler.Schedules(); len(s) != 1 || s[0].Name != platform.ScheduleName(bot, "tock") {
		t.Fatalf("schedules: %+v", s)
	}
	time.Sleep(1200 * time.Millisecond) // a firing in flight may still land
	since := time.Now()
	time.Sleep(2500 * time.Millisecond)
	for _, d := range bs.deliveries() {
		if d.At.After(since) && d.Type != "tock" {
			t.Fatalf("a removed recurring event was delivered: %+v", d)
		}
	}
	if n := countAfter(bs.deliveries(), since); n < 1 {
		t.Fatal("the remaining recurring event stopped")
	}

	// Deleting the bot deletes its schedules: deliveries stop.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	if s := f.Platform.Scheduler.Schedules(); len(s) != 0 {
		t.Fatalf("schedules after deleteBot: %+v", s)
	}
	time.Sleep(1200 * time.Millisecond)
	since = time.Now()
	time.Sleep(2 * time.Second)
	if n := countAfter(bs.deliveries(), since); n != 0 {
		t.Fatalf("%d deliveries after deleteBot", n)
	}
}

func countAfter(ds []botDelivery, t time.Time) int {
	n := 0
	for _, d := range ds {
		if d.At.After(t) {
			n++
		}
	}
	return n
}

// TestSchedulesOnEventBridge: against a fake EventBridge Scheduler
// endpoint, the API creates, updates and deletes one schedule per
// recurring event, with the translated cron, the function as target and
// the event's input.
func TestSchedulesOnEventBridge(t *testing.T) {
	e := apitest.New(t)
	fake := schedulertest.New()
	defer fake.Close()
	eb := &scheduler.EventBridge{
		Client: awsscheduler.New(awsscheduler.Options{Region: "us-east-1", BaseEndpoint: aws.String(fake.URL),
			Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}),
		Group: "platform", TargetARN: "arn:aws:lambda:us-east-1:1:function:scheduler", RoleARN: "arn:aws:iam::1:role/scheduler-invoke",
	}
	srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: e.Platform.Store, PagingKey: []byte("0123456789abcdef"), Scheduler: eb}, httpapi.AreaAdmin))
	defer srv.Close()
	e.URL = srv.URL
	f := &fixture{Env: e}
	f.ws = e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "eb"}}), 200, "createWorkspace").Str("id")
	tok := e.AdminToken
	rev := func(cron, typ string) map[string]any {
		return map[string]any{"schedule": map[string]any{"cron": cron}, "type": typ, "payload": map[string]any{"k": "v"}}
	}
	bot := f.createBot(tok, map[string]any{"recurringEvents": map[string]any{"daily": rev("0 8 * * 1-5", "standup")}})
	s := fake.Schedules()
	if len(s) != 1 {
		t.Fatalf("schedules: %+v", s)
	}
	if s[0].Name != platform.ScheduleName(bot, "daily") || s[0].GroupName != "platform" || s[0].ScheduleExpression != "cron(0 8 ? * 2-6 *)" ||
		s[0].Target.Arn != eb.TargetARN || s[0].Target.RoleArn != eb.RoleARN || s[0].ScheduleExpressionTimezone != "UTC" {
		t.Fatalf("schedule: %+v", s[0])
	}
	var in platform.RecurringInput
	if err := json.Unmarshal([]byte(s[0].Target.Input), &in); err != nil || in.BotID != bot || in.Event != "daily" || in.Cron != "0 8 * * 1-5" || in.ScheduledAt == "" {
		t.Fatalf("input %s: %v", s[0].Target.Input, err)
	}

	// Changed cron: updated. New entry: created. Removed entry: deleted.
	f.updateBot(tok, bot, map[string]any{"recurringEvents": map[string]any{"daily": rev("30 9 * * *", "standup"), "hourly": rev("@hourly", "tick")}})
	f.updateBot(tok, bot, map[string]any{"recurringEvents": map[string]any{"daily": nil}})
	s = fake.Schedules()
	if len(s) != 1 || s[0].Name != platform.ScheduleName(bot, "hourly") || s[0].ScheduleExpression != "cron(0 * * * ? *)" {
		t.Fatalf("after updates: %+v", s)
	}
	var ops []string
	for _, c := range fake.Calls() {
		ops = append(ops, fmt.Sprintf("%s:%d", c.Op, c.Status))
	}
	if want := "CreateSchedule:200 CreateSchedule:409 UpdateSchedule:200 CreateSchedule:200 DeleteSchedule:200"; strings.Join(ops, " ") != want {
		t.Fatalf("calls: %s\nwant:  %s", strings.Join(ops, " "), want)
	}
	// What EventBridge cannot run is refused, before any call.
	n := len(fake.Calls())
	for _, cron := range []string{"*/5 * * * * *", "0 0 1 * 1"} {
		r := f.ws_(tok, "PUT", "/v1/admin/bots/"+bot, map[string]any{"recurringEvents": map[string]any{"x": rev(cron, "t")}})
		if r.Status != 400 {
			t.Fatalf("cron %q: %d %s", cron, r.Status, r.Raw)
		}
	}
	if len(fake.Calls()) != n {
		t.Fatal("a refused cron reached EventBridge")
	}
	// Deleting the bot deletes its schedules.
	f.Check(f.ws_(tok, "DELETE", "/v1/admin/bots/"+bot, nil), 200, "deleteBot")
	if s := fake.Schedules(); len(s) != 0 {
		t.Fatalf("after deleteBot: %+v", s)
	}
}

// TestOrphanScheduleDeletesItself: a schedule whose bot is gone (its
// deletion failed, say) deletes itself when it fires, once old enough.
func TestOrphanScheduleDeletesItself(t *testing.T) {
	e := apitest.New(t)
	e.Platform.Scheduler.AllowSubMinute()
	name := platform.ScheduleName("bot_01JZZZZZZZZZZZZZZZZZZZZZZZ", "gone")
	old := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	err := e.Platform.Scheduler.CreateSchedule(context.Background(), platform.Schedule{Name: name, Cron: "* * * * * *",
		Input: platform.RecurringInput{BotID: "bot_01JZZZZZZZZZZZZZZZZZZZZZZZ", Event: "gone", Cron: "* * * * * *", ScheduledAt: old}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(e.Platform.Scheduler.Schedules()) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the orphan schedule is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBotDynamoDBCalls pins the DynamoDB calls of updateBot and getBot.
func TestBotDynamoDBCalls(t *testing.T) {
	f := newFixture(t)
	rec := recordUsage(f.Env)
	tok := f.AdminToken
	intID := f.createIntegration(tok, integrationDef("counted", "1.0.0", nil)).Str("integration.id")
	bot := f.createBot(tok, nil)
	for _, tc := range []struct {
		name, op string
		req      apitest.Req
		want     map[string]int
	}{
		{"getBot without integrations", "getBot", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot}, map[string]int{"GetItem": 3}},
		{"updateBot of a field", "updateBot", apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + bot, Body: map[string]any{"name": "n"}}, map[string]int{"GetItem": 3, "TransactWriteItems": 1}},
		{"updateBot installing (disabled)", "updateBot", apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + bot, Body: map[string]any{"integrations": map[string]any{"c": map[string]any{"integrationId": intID, "enabled": false}}}}, map[string]int{"GetItem": 3, "BatchGetItem": 1, "TransactWriteItems": 1}},
		{"getBot with integrations", "getBot", apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot}, map[string]int{"GetItem": 3, "BatchGetItem": 1}},
		{"getIntegration", "getIntegration", apitest.Req{Method: "GET", Path: "/v1/admin/integrations/" + intID}, map[string]int{"GetItem": 3}},
		{"listIntegrations", "listIntegrations", apitest.Req{Method: "GET", Path: "/v1/admin/integrations"}, map[string]int{"GetItem": 2, "Query": 2, "BatchGetItem": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req.Token, tc.req.Headers = tok, map[string]string{"x-workspace-id": f.ws}
			f.Check(f.Do(tc.req), 200, tc.op)
			u := rec.of(tc.op)
			total := 0
			for op, n := range tc.want {
				total += n
				if got := u.Calls(op); got != n {
					t.Errorf("%d %s calls, want %d (all: %s)", got, op, n, u)
				}
			}
			if u.Calls("") != total {
				t.Errorf("%d calls in all, want %d (%s)", u.Calls(""), total, u)
			}
			t.Logf("%-34s %s", tc.name, u)
		})
	}
}

// TestConversationRequiredTags: a conversation created on a channel of an
// installed integration must carry the tags the channel requires.
func TestConversationRequiredTags(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	intID := f.createIntegration(tok, integrationDef("tagged", "1.0.0", nil)).Str("integration.id")
	bot := f.createBot(tok, nil)
	f.updateBot(tok, bot, map[string]any{"integrations": map[string]any{"main": map[string]any{"integrationId": intID, "enabled": false}}})
	create := func(body map[string]any, headers ...string) apitest.Response {
		h := map[string]string{"x-bot-id": bot}
		for i := 0; i+1 < len(headers); i += 2 {
			h[headers[i]] = headers[i+1]
		}
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: tok, Headers: h, Body: body})
	}
	for _, integration := range []string{"main", "tagged"} { // by alias, by name
		r := create(map[string]any{"channel": "dm", "tags": map[string]string{}, "integrationName": integration})
		if r.Status != 400 || !strings.Contains(r.Str("message"), "userId") {
			t.Fatalf("%s without the required tag: %d %s", integration, r.Status, r.Raw)
		}
		f.Check(create(map[string]any{"channel": "dm", "tags": map[string]string{"userId": "u1"}, "integrationName": integration}), 201, "createConversation")
	}
	f.Check(create(map[string]any{"channel": "dm", "tags": map[string]string{}}, "x-integration-alias", "main"), 400, "")
	if r := create(map[string]any{"channel": "fax", "tags": map[string]string{}, "integrationName": "main"}); r.Status != 400 || !strings.Contains(r.Str("message"), "fax") {
		t.Fatalf("unknown channel: %d %s", r.Status, r.Raw)
	}
	// An integration the bot has not installed requires nothing.
	f.Check(create(map[string]any{"channel": "web", "tags": map[string]string{}, "integrationName": "webchat"}), 201, "createConversation")
}

// TestDevIntegrationsOnDevBotsOnly: a dev integration installs on a dev
// bot only, and keeps the bot dev.
func TestDevIntegrationsOnDevBotsOnly(t *testing.T) {
	f := newFixture(t)
	tok := f.AdminToken
	dev := f.createIntegration(tok, integrationDef("local", "0.0.1", map[string]any{"dev": true})).Str("integration.id")
	prodBot := f.createBot(tok, nil)
	r := f.ws_(tok, "PUT", "/v1/admin/bots/"+prodBot, map[string]any{"integrations": map[string]any{"l": map[string]any{"integrationId": dev, "enabled": false}}})
	if r.Status != 400 || !strings.Contains(r.Str("message"), "dev bot") {
		t.Fatalf("dev integration on a production bot: %d %s", r.Status, r.Raw)
	}
	devBot := f.createBot(tok, map[string]any{"dev": true})
	f.updateBot(tok, devBot, map[string]any{"integrations": map[string]any{"l": map[string]any{"integrationId": dev, "enabled": false}}})
	if r := f.ws_(tok, "PUT", "/v1/admin/bots/"+devBot, map[string]any{"dev": false}); r.Status != 400 {
		t.Fatalf("a bot with a dev integration made production: %d %s", r.Status, r.Raw)
	}
}
