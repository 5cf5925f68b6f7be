// Package metricse2e scrapes the local platform's /metrics with a real
// Prometheus server (Debian's prometheus package) on loopback while a
// workload runs, and queries it over its HTTP API (make metrics-e2e;
// docs/metrics.md). Without METRICS_E2E=1 it is skipped: `go test ./...`
// needs nothing installed beyond Go.
package metricse2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

func need(t *testing.T, bin string) string {
	t.Helper()
	if os.Getenv("METRICS_E2E") != "1" {
		t.Skip("METRICS_E2E=1 runs it (make metrics-e2e)")
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		t.Fatalf("%s not found: apt-get install -y prometheus", bin)
	}
	return p
}

// freePort finds a loopback port for Prometheus to listen on.
func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// prometheus runs a Prometheus server scraping target every second.
type prometheus struct {
	t    *testing.T
	addr string
}

func startPrometheus(t *testing.T, target string) *prometheus {
	bin := need(t, "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: platform\n    metrics_path: /metrics\n    static_configs:\n      - targets: ['%s']\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", logs.String())
		}
	})
	p := &prometheus{t: t, addr: addr}
	p.waitFor("prometheus ready", func() bool {
		res, err := http.Get("http://" + addr + "/-/ready")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	// Ready is not scraping yet: wait for the target to be up.
	p.waitFor("the platform scraped", func() bool { v, ok := p.query(`up{job="platform"}`); return ok && v == 1 })
	return p
}

// query runs an instant query; ok is false when it has no value (yet).
func (p *prometheus) query(q string) (float64, bool) {
	res, err := http.Get("http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, false
	}
	defer res.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || body.Status != "success" {
		p.t.Fatalf("query %s: %v %s", q, err, body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, false
	}
	s, _ := body.Data.Result[0].Value[1].(string)
	v, err := strconv.ParseFloat(s, 64)
	return v, err == nil
}

// waitFor polls cond for up to 60 s (a scrape every second).
func (p *prometheus) waitFor(what string, cond func() bool) {
	p.t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			p.t.Fatalf("%s: not within 60 s", what)
		}
	}
}

// expect waits until the query's value is want.
func (p *prometheus) expect(q string, want float64) {
	p.t.Helper()
	var last float64
	var had bool
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if last, had = p.query(q); had && last == want {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("%s = %v (value: %v), want %v within 60 s", q, last, had, want)
		}
	}
}

// bot answers the platform's deliveries: status, after waiting for hold to
// be closed when it is set.
type bot struct {
	status int
	hold   chan struct{}
	calls  atomic.Int32
}

func (b *bot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	b.calls.Add(1)
	if b.hold != nil {
		<-b.hold
	}
	w.WriteHeader(b.status)
}

// TestPrometheusScrapesWorkload: a real Prometheus scrapes the platform
// while messages go to three bots: one answering 200, one answering 500
// (retried, then failed), one that stalls. Request and delivery counters,
// the latency histogram and the outbox age move as the workload says;
// promtool finds nothing wrong with the exposition.
func TestPrometheusScrapesWorkload(t *testing.T) {
	need(t, "promtool")
	e := apitest.New(t)
	e.Platform.Dispatcher.SetRetry(20*time.Millisecond, 2) // the failing bot's 2 attempts, quickly
	u, _ := url.Parse(e.URL)
	prom := startPrometheus(t, u.Host)

	ws := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/workspaces", Token: e.AdminToken, Body: map[string]any{"name": "metrics"}}), 200, "").Str("id")
	newBot := func(name string, b *bot) (string, string, string) {
		srv := httptestServer(t, b)
		id := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/admin/bots", Token: e.AdminToken, Headers: map[string]string{"x-workspace-id": ws},
			Body: map[string]any{"name": name, "dev": true, "url": srv}}), 200, "").Str("bot.id")
		h := map[string]string{"x-bot-id": id}
		conv := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/conversations", Token: e.AdminToken, Headers: h, Body: map[string]any{"channel": "web", "tags": map[string]string{}}}), 201, "").Str("conversation.id")
		user := e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/users", Token: e.AdminToken, Headers: h, Body: map[string]any{"tags": map[string]string{}}}), 201, "").Str("user.id")
		return id, conv, user
	}
	send := func(botID, conv, user string, n int) {
		for i := range n {
			e.Check(e.Do(apitest.Req{Method: "POST", Path: "/v1/chat/messages", Token: e.AdminToken, Headers: map[string]string{"x-bot-id": botID},
				Body: map[string]any{"conversationId": conv, "userId": user, "type": "text", "payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}}}), 201, "")
		}
	}
	good, failing, stalled := &bot{status: 200}, &bot{status: 500}, &bot{status: 200, hold: make(chan struct{})}
	gID, gConv, gUser := newBot("good", good)
	fID, fConv, fUser := newBot("failing", failing)
	sID, sConv, sUser := newBot("stalled", stalled)

	// Nothing has been delivered yet; the outbox is empty.
	prom.expect(`platform_outbox_oldest_age_seconds`, 0)
	prom.expect(`sum(platform_requests_total{op="createMessage"}) or vector(0)`, 0)

	send(gID, gConv, gUser, 12)
	send(fID, fConv, fUser, 3)
	prom.expect(`sum(platform_requests_total{op="createMessage",code="201"})`, 15)
	prom.expect(`sum(platform_request_duration_seconds_count{op="createMessage"})`, 15)
	prom.expect(`platform_messages_total{bot="`+gID+`"}`, 12)
	prom.expect(`platform_events_total{bot="`+fID+`"}`, 3)
	prom.expect(`platform_deliveries_total{kind="event",result="delivered"}`, 12)
	// The failing bot: each message tried twice (one retry), then failed.
	prom.expect(`platform_delivery_retries_total{kind="event"}`, 3)
	prom.expect(`platform_delivery_failures_total{kind="event"}`, 3)
	prom.expect(`platform_deliveries_total{kind="event",result="failed"}`, 3)
	// The histogram's quantiles are answers, not NaN: every createMessage
	// took less than the 60 s bucket.
	prom.expect(`sum(platform_request_duration_seconds_bucket{op="createMessage",le="60"})`, 15)
	if v, ok := prom.query(`histogram_quantile(0.5, sum by (le) (platform_request_duration_seconds_bucket{op="createMessage"}))`); !ok || math.IsNaN(v) || v <= 0 || v > 60 {
		t.Errorf("median createMessage latency = %v (%v)", v, ok)
	}
	prom.expect(`platform_outbox_oldest_age_seconds`, 0) // all of it out

	// A stalled delivery: the outbox age grows while the bot holds it...
	send(sID, sConv, sUser, 1)
	prom.waitFor("the stalled bot called", func() bool { return stalled.calls.Load() == 1 })
	prom.waitFor("outbox age past 2 s", func() bool { v, ok := prom.query(`platform_outbox_oldest_age_seconds`); return ok && v > 2 })
	prom.expect(`platform_deliveries_total{kind="event",result="delivered"}`, 12)
	// ...and falls back to 0 once it answers.
	close(stalled.hold)
	prom.expect(`platform_deliveries_total{kind="event",result="delivered"}`, 13)
	prom.expect(`platform_outbox_oldest_age_seconds`, 0)
	if v, ok := prom.query(`max_over_time(platform_outbox_oldest_age_seconds[5m])`); !ok || v <= 2 {
		t.Errorf("max outbox age over the run = %v, want > 2", v)
	}
	// The dispatcher's lag was observed for every attempt.
	prom.expect(`sum(platform_dispatch_lag_seconds_count{kind="event"})`, 12+6+1)

	// promtool finds nothing wrong in the exposition.
	res, err := http.Get(e.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cmd := exec.Command("promtool", "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	if out, err := cmd.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
