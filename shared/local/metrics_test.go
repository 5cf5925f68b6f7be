package local_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/metrics"
)

// TestMetricsEndpoint: /metrics answers the Prometheus exposition to a
// loopback caller; with PLATFORM_METRICS_TOKEN set, only to its bearer
// (401 in the API's error shape otherwise).
func TestMetricsEndpoint(t *testing.T) {
	get := func(url, token string) (int, string) {
		req, _ := http.NewRequest("GET", url+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	e := apitest.New(t)
	if st, body := get(e.URL, ""); st != 200 || !strings.Contains(body, "# TYPE platform_cold_starts_total counter") {
		t.Fatalf("loopback, no token: %d %.200s", st, body)
	}
	t.Setenv(metrics.EnvToken, "s3cret")
	e2 := apitest.New(t)
	if st, body := get(e2.URL, ""); st != 401 || !strings.Contains(body, `"type":"Unauthorized"`) {
		t.Fatalf("without the token: %d %s", st, body)
	}
	if st, _ := get(e2.URL, "wrong"); st != 401 {
		t.Fatalf("a wrong token: %d", st)
	}
	if st, body := get(e2.URL, "s3cret"); st != 200 || !strings.Contains(body, "platform_cold_starts_total") {
		t.Fatalf("with the token: %d %.200s", st, body)
	}
}

// TestMetricsSeriesOperations: the health page's operations answer the
// series to a signed-in account (a bot's to its workspace's members only),
// refuse a bad window with 400 and a missing token with 401.
func TestMetricsSeriesOperations(t *testing.T) {
	e := apitest.New(t)
	e.Platform.Series.Sample(time.Now())
	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "m"}}), 200, "").Str("id")
	bot := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": ws}, Body: map[string]any{"name": "m"}}), 200, "").Str("bot.id")
	h := map[string]string{"x-bot-id": bot}
	conv := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: e.AdminToken, Headers: h, Body: map[string]any{"channel": "web", "tags": map[string]string{}}}), 201, "").Str("conversation.id")
	e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: e.AdminToken, Headers: h, Body: map[string]any{"conversationId": conv, "userId": bot,
		"type": "text", "payload": map[string]any{"text": "x"}, "tags": map[string]string{}}}), 201, "")
	e.Platform.Series.Sample(time.Now())

	r := e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/metrics?window=hour", Token: e.AdminToken}), 200, "")
	charts, _ := r.Body["charts"].(map[string]any)
	if r.Body["available"] != true || charts["requests"] == nil || charts["outboxAge"] == nil || len(r.List("times")) < 1 {
		t.Fatalf("platform series: %s", r.Raw)
	}
	r = e.Check(e.Do(apitest.Req{Method: "GET", Path: "/v1/admin/bots/" + bot + "/metrics", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": ws}}), 200, "")
	msgs := r.Body["charts"].(map[string]any)["messages"].(map[string]any)["lines"].(map[string]any)["messages"].([]any)
	if len(msgs) < 1 || msgs[len(msgs)-1].(float64) != 1 {
		t.Fatalf("bot series: %s", r.Raw)
	}
	for _, tc := range []struct {
		name, path, token string
		hdr               map[string]string
		want              int
	}{
		{"no token", "/v1/admin/metrics", "", nil, 401},
		{"bad window", "/v1/admin/metrics?window=week", e.AdminToken, nil, 400},
		{"a bot of another workspace", "/v1/admin/bots/" + bot + "/metrics", e.AdminToken, map[string]string{"x-workspace-id": "wkspace_nope"}, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.Check(e.Do(apitest.Req{Method: "GET", Path: tc.path, Token: tc.token, Headers: tc.hdr}), tc.want, "")
		})
	}
}
