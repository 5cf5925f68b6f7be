package local_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

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
