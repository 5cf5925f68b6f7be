package metrics

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/botforge/platform/shared/platform"
)

// EnvToken names the variable holding the bearer token of /metrics; unset,
// only loopback callers may read it.
const EnvToken = "PLATFORM_METRICS_TOKEN"

// Path is where the local platform serves the metrics.
const Path = "/metrics"

// gatherer refreshes the computed gauges before each scrape.
var gatherer = prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
	refresh()
	return Registry.Gather()
})

// Handler serves the metrics in the Prometheus exposition format.
func Handler() http.Handler {
	return promhttp.HandlerFor(gatherer, promhttp.HandlerOpts{Registry: Registry})
}

// Allowed says whether r may read the metrics: with a token configured,
// only a request bearing it (from anywhere); without, only one from a
// loopback address (the socket's peer, never a forwarded header). The
// error is an Unauthorized or Forbidden platform error.
func Allowed(r *http.Request, token string) error {
	if token != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return platform.Errorf(platform.ErrUnauthorized, "the metrics need the bearer token of %s", EnvToken)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return platform.Forbidden("the metrics are served to loopback callers only unless %s is set (then to its bearer token)", EnvToken)
	}
	return nil
}
