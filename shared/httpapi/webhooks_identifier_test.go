package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/botforge/platform/shared/apitest"
)

// Real scripts of Botpress's Messenger integration (integrations/messenger
// extract.vrl and fallbackHandler.vrl).
const (
	messengerExtract = `. = parse_json!(.body)
pageId = null

if .object == "page" {
  pageId = .entry[0].id
}

pageId`
	messengerFallback = `q = parse_query_string!(.query)
challenge = q."hub.challenge"

{
  "headers": {
    "content-type": "application/json"
  },
  "body": challenge
}
`
)

// TestIntegrationLevelWebhook: one URL for every installation of an
// integration. The integration's extractScript reads the identifier from
// the request; the installation with that identifier (configureIntegration,
// or the x-bp-integration-identifier answer header) gets it as
// webhook_received and its answer comes back; with none, the
// fallbackHandlerScript answers (Meta's hub.challenge).
func TestIntegrationLevelWebhook(t *testing.T) {
	f := newFixture(t)
	var (
		mu    sync.Mutex
		calls []map[string]any // webhook_received: bot, alias, req
	)
	integ := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		if r.Header.Get("x-bp-operation") != "webhook_received" {
			w.Write([]byte("{}"))
			return
		}
		req := body["req"].(map[string]any)
		mu.Lock()
		calls = append(calls, map[string]any{"bot": r.Header.Get("x-bot-id"), "req": req})
		mu.Unlock()
		if req["path"] == "/oauth/done" {
			w.Header().Set("x-bp-integration-identifier", "PAGE-B")
		}
		w.WriteHeader(202)
		w.Write([]byte("handled by " + r.Header.Get("x-bot-id")))
	}))
	t.Cleanup(integ.Close)
	last := func() map[string]any {
		mu.Lock()
		defer mu.Unlock()
		if len(calls) == 0 {
			return nil
		}
		return calls[len(calls)-1]
	}
	intID := f.createIntegration(f.AdminToken, map[string]any{
		"name": "pages", "version": "1.0.0", "dev": true, "url": integ.URL,
		"identifier": map[string]any{"extractScript": messengerExtract, "fallbackHandlerScript": messengerFallback},
	}).Str("integration.id")
	install := func() (string, string) {
		bot := f.createBot(f.AdminToken, map[string]any{"dev": true, "url": "http://127.0.0.1:9"})
		u := f.Check(f.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{"fb": map[string]any{"integrationId": intID, "enabled": true}}}), 200, "updateBot")
		inst := u.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)
		return bot, inst["webhookUrl"].(string)
	}
	botA, _ := install()
	botB, hookB := install()
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/integrations/configure", Token: f.AdminToken,
		Headers: map[string]string{"x-bot-id": botA, "x-integration-alias": "fb"}, Body: map[string]any{"identifier": "PAGE-A"}}), 200, "configureIntegration")

	global := f.URL + "/webhooks/integration/id/" + intID
	page := func(id string) *strings.Reader {
		return strings.NewReader(`{"object":"page","entry":[{"id":"` + id + `","messaging":[]}]}`)
	}
	// Routed by the identifier the script reads.
	res, b := rawDo(t, "POST", global+"/messages?x=1", page("PAGE-A"), map[string]string{"Content-Type": "application/json"})
	if res.StatusCode != 202 || string(b) != "handled by "+botA {
		t.Fatalf("page A: %d %s", res.StatusCode, b)
	}
	if c := last(); c["bot"] != botA || c["req"].(map[string]any)["path"] != "/messages" || c["req"].(map[string]any)["query"] != "x=1" {
		t.Fatalf("relayed: %v", c)
	}
	// A body the extractScript cannot read names nobody: the fallback answers.
	if res, b = rawDo(t, "POST", global, strings.NewReader("not json"), nil); res.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("unreadable body: %d %q", res.StatusCode, b)
	}
	// No installation has PAGE-B yet: the fallback answers (no challenge: null body).
	res, b = rawDo(t, "POST", global, page("PAGE-B"), nil)
	if res.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("unknown page: %d %q", res.StatusCode, b)
	}
	// The verification challenge, answered by the fallback script.
	res, b = rawDo(t, "GET", global+"?hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=t", nil, nil)
	if res.StatusCode != 200 || string(b) != "1158201444" || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("challenge: %d %q %v", res.StatusCode, b, res.Header)
	}
	// The OAuth round trip names bot B's identifier by an answer header,
	// which is recorded and not relayed.
	res, _ = rawDo(t, "GET", hookB+"/oauth/done", nil, nil)
	if res.StatusCode != 202 || res.Header.Get("x-bp-integration-identifier") != "" {
		t.Fatalf("oauth: %d %v", res.StatusCode, res.Header)
	}
	res, b = rawDo(t, "POST", global, page("PAGE-B"), nil)
	if res.StatusCode != 202 || string(b) != "handled by "+botB {
		t.Fatalf("page B: %d %s", res.StatusCode, b)
	}
	// A new identifier replaces the old: PAGE-A no longer reaches bot A.
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/integrations/configure", Token: f.AdminToken,
		Headers: map[string]string{"x-bot-id": botA, "x-integration-alias": "fb"}, Body: map[string]any{"identifier": "PAGE-C"}}), 200, "configureIntegration")
	if res, b = rawDo(t, "POST", global, page("PAGE-A"), nil); res.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("old identifier: %d %s", res.StatusCode, b)
	}
	if res, b = rawDo(t, "POST", global, page("PAGE-C"), nil); res.StatusCode != 202 || string(b) != "handled by "+botA {
		t.Fatalf("new identifier: %d %s", res.StatusCode, b)
	}
	// Disabled: not routed.
	f.Check(f.updateBot(f.AdminToken, botA, map[string]any{"integrations": map[string]any{"fb": map[string]any{"enabled": false}}}), 200, "updateBot")
	if res, _ = rawDo(t, "POST", global, page("PAGE-C"), nil); res.StatusCode != 200 {
		t.Fatalf("disabled install: %d", res.StatusCode)
	}

	// Bad requests and addresses, in the error shape.
	plain := f.createIntegration(f.AdminToken, map[string]any{"name": "plain", "version": "1.0.0", "dev": true, "url": integ.URL}).Str("integration.id")
	for _, tc := range []struct {
		name, method, url, body string
		status                  int
		errType                 string
	}{
		{"unknown integration id", "POST", f.URL + "/webhooks/integration/id/int_01JAAAAAAAAAAAAAAAAAAAAAAA", "{}", 404, "ResourceNotFound"},
		{"unknown integration name", "POST", f.URL + "/webhooks/integration/global/nothing-here", "{}", 404, "ResourceNotFound"},
		{"integration without an extractScript", "POST", f.URL + "/webhooks/integration/id/" + plain, "{}", 404, "ResourceNotFound"},
		{"a dev integration is not global", "POST", f.URL + "/webhooks/integration/global/pages", "{}", 404, "ResourceNotFound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, b := rawDo(t, tc.method, tc.url, strings.NewReader(tc.body), nil)
			if res.StatusCode != tc.status {
				t.Fatalf("%d %s", res.StatusCode, b)
			}
			if typ, _ := errorOf(t, res, b); typ != tc.errType {
				t.Fatalf("type %s: %s", typ, b)
			}
		})
	}
}

// TestIntegrationLevelWebhookByName: a shared integration's global URL
// names it; its installations in any workspace are reached, and an
// identifier of another workspace's integration of the same name is not.
func TestIntegrationLevelWebhookByName(t *testing.T) {
	f := newFixture(t)
	integ := newReceiver(t, func(r received) (int, string) { return 202, `"` + r.Header.Get("x-bot-id") + `"` })
	def := map[string]any{"name": "pages", "version": "1.0.0", "url": integ.srv.URL, "visibility": "public",
		"identifier": map[string]any{"extractScript": messengerExtract}}
	intID := f.createIntegration(f.AdminToken, def).Str("integration.id")
	other := newFixtureOn(f)
	bot := other.createBot(f.AdminToken, map[string]any{"dev": true, "url": "http://127.0.0.1:9"})
	f.Check(other.updateBot(f.AdminToken, bot, map[string]any{"integrations": map[string]any{"fb": map[string]any{"integrationId": intID, "enabled": true}}}), 200, "updateBot")
	f.Check(f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/integrations/configure", Token: f.AdminToken,
		Headers: map[string]string{"x-bot-id": bot, "x-integration-alias": "fb"}, Body: map[string]any{"identifier": "P9"}}), 200, "configureIntegration")
	res, b := rawDo(t, "POST", f.URL+"/webhooks/integration/global/pages", strings.NewReader(`{"object":"page","entry":[{"id":"P9"}]}`), nil)
	if res.StatusCode != 202 || string(b) != `"`+bot+`"` {
		t.Fatalf("by name: %d %s", res.StatusCode, b)
	}
	// The bot's developer in the other workspace, acting as the integration
	// with a personal access token (as bp dev calls), may not claim an
	// identifier: it would route a provider's calls for another tenant's
	// page to their bot. The integration's own key may.
	devTok, _ := other.invite("dev@other.example", "developer")
	configure := func(tok, identifier string) apitest.Response {
		return f.Do(apitest.Req{Method: "POST", Path: "/v1/chat/integrations/configure", Token: tok,
			Headers: map[string]string{"x-bot-id": bot, "x-integration-alias": "fb"}, Body: map[string]any{"identifier": identifier}})
	}
	if r := configure(devTok, "P8"); r.Status != 403 || r.Str("type") != "Forbidden" {
		t.Fatalf("identifier from a PAT of another workspace: %d %s", r.Status, r.Raw)
	}
	key := f.Check(f.ws_(f.AdminToken, "POST", "/v1/admin/integrations/iaks", map[string]any{"integrationId": intID}), 200, "createIntegrationApiKey").Str("value")
	f.Check(configure(key, "P8"), 200, "configureIntegration")
	res, b = rawDo(t, "POST", f.URL+"/webhooks/integration/global/pages", strings.NewReader(`{"object":"page","entry":[{"id":"P8"}]}`), nil)
	if res.StatusCode != 202 || string(b) != `"`+bot+`"` {
		t.Fatalf("identifier set by the integration's key: %d %s", res.StatusCode, b)
	}

	// No fallback script: a body the extractScript cannot read is 400, in
	// the error shape, with the script's reason.
	res, b = rawDo(t, "POST", f.URL+"/webhooks/integration/global/pages", strings.NewReader("not json"), nil)
	if res.StatusCode != 400 || !strings.Contains(string(b), "parse_json") {
		t.Fatalf("unreadable body: %d %s", res.StatusCode, b)
	}
	// An unknown identifier is 404.
	res, b = rawDo(t, "POST", f.URL+"/webhooks/integration/global/pages", strings.NewReader(`{"object":"page","entry":[{"id":"P0"}]}`), nil)
	if res.StatusCode != 404 {
		t.Fatalf("unknown identifier: %d %s", res.StatusCode, b)
	}
}
