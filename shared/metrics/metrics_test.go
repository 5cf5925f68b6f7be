package metrics_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/botforge/platform/shared/metrics"
)

// docs/metrics.md lists every metric: the stack's alarms and dashboard are
// written from it.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range metrics.All() {
		if !strings.HasPrefix(m.Name, "platform_") {
			t.Errorf("%s: want the platform_ prefix", m.Name)
		}
		row := "| `" + m.Name + "` |"
		if !bytes.Contains(b, []byte(row)) {
			t.Errorf("docs/metrics.md has no row for %s", m.Name)
		}
		for _, l := range m.Labels {
			if !bytes.Contains(b, []byte("`"+l+"`")) {
				t.Errorf("docs/metrics.md does not name label %s of %s", l, m.Name)
			}
		}
	}
}

func TestAllowed(t *testing.T) {
	for _, tc := range []struct {
		name, remote, auth, token string
		ok                        bool
	}{
		{"loopback v4, no token configured", "127.0.0.1:5000", "", "", true},
		{"loopback v6", "[::1]:5000", "", "", true},
		{"other address, no token configured", "10.0.0.5:5000", "", "", false},
		{"other address with the token", "10.0.0.5:5000", "Bearer s3cret", "s3cret", true},
		{"loopback without the configured token", "127.0.0.1:5000", "", "s3cret", false},
		{"wrong token", "127.0.0.1:5000", "Bearer nope", "s3cret", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/metrics", nil)
			r.RemoteAddr = tc.remote
			r.Header.Set("X-Forwarded-For", "127.0.0.1") // never believed
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if err := metrics.Allowed(r, tc.token); (err == nil) != tc.ok {
				t.Fatalf("Allowed = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// The EMF lines carry the invocation's counts under the metric's name,
// with the namespace and the two dimension sets docs/metrics.md promises.
func TestFlushEMF(t *testing.T) {
	metrics.EnableEMF()
	var sink bytes.Buffer
	_ = metrics.FlushEMF(&sink, nil) // what earlier tests counted
	metrics.DeliveryFailures.Inc("event")
	metrics.DeliveryFailures.Add(2, "event")
	metrics.RequestDuration.Observe(0.25, "getBot")
	metrics.RequestDuration.Observe(0.25, "getBot")
	metrics.RequestDuration.Observe(1.5, "getBot")
	var out bytes.Buffer
	if err := metrics.FlushEMF(&out, map[string]string{"function": "chat"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %d:\n%s", len(lines), out.String())
	}
	docs := map[string]map[string]any{}
	for _, l := range lines {
		var d map[string]any
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatal(err)
		}
		cw := d["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if cw["Namespace"] != "BotPlatform" {
			t.Errorf("namespace %v", cw["Namespace"])
		}
		dims, _ := json.Marshal(cw["Dimensions"])
		name := cw["Metrics"].([]any)[0].(map[string]any)["Name"].(string)
		d["dims"] = string(dims)
		docs[name] = d
		if d["function"] != "chat" {
			t.Errorf("%s: function %v", name, d["function"])
		}
	}
	f := docs["platform_delivery_failures_total"]
	if f["platform_delivery_failures_total"] != 3.0 || f["kind"] != "event" || f["dims"] != `[[],["kind"]]` {
		t.Errorf("failures: %v", f)
	}
	h := docs["platform_request_duration_seconds"]
	if v, _ := json.Marshal(h["platform_request_duration_seconds"]); string(v) != `{"Counts":[2,1],"Values":[0.25,1.5]}` || h["dims"] != `[[],["op"]]` {
		t.Errorf("duration: %s %v", v, h)
	}
	out.Reset()
	if err := metrics.FlushEMF(&out, nil); err != nil || out.Len() != 0 {
		t.Errorf("a second flush wrote %q (%v): want nothing", out.String(), err)
	}
}

// BenchmarkRequestCount is what the request middleware adds per request:
// a counter, a histogram observation (EMF off, as locally).
func BenchmarkRequestCount(b *testing.B) {
	for b.Loop() {
		metrics.Requests.Inc("createMessage", "201")
		metrics.RequestDuration.Observe(0.012, "createMessage")
	}
}
