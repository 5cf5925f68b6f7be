package runtime

import (
	"context"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/botforge/platform/shared/metrics"
	"github.com/botforge/platform/shared/tracing"
)

// The AWS outlet of the platform's metrics (docs/metrics.md): every
// function counts into shared/metrics as the local platform does, and after
// each invocation writes what it counted as Embedded Metric Format lines
// on stdout, which CloudWatch Logs turns into metrics in the BotPlatform
// namespace. No CloudWatch call is made.

// metricsHandler wraps a function's handler: a cold start is counted at
// its first invocation, the metrics are flushed after each.
type metricsHandler struct {
	inner    lambda.Handler
	function string
	warm     atomic.Bool
}

func newMetricsHandler(h any) *metricsHandler {
	metrics.EnableEMF()
	return &metricsHandler{inner: lambda.NewHandler(h), function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
}

func (m *metricsHandler) begin() {
	if !m.warm.Swap(true) {
		metrics.ColdStarts.Inc(m.function)
	}
}

func (m *metricsHandler) end() {
	_ = metrics.FlushEMF(os.Stdout, map[string]string{"function": m.function})
	// The invocation's spans, before Lambda may freeze the process: one
	// datagram to the X-Ray daemon (shared/tracing), no round trip.
	_ = tracing.Flush(context.Background())
}

// Invoke runs one invocation.
func (m *metricsHandler) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	m.begin()
	defer m.end()
	return m.inner.Invoke(ctx, payload)
}

// startLambdaHandler is lambda.Start with the metrics' outlet.
func startLambdaHandler(h any) { lambda.Start(newMetricsHandler(h)) }

// metricsHTTP is the same around an http.Handler served by a function URL
// (the chat stream function: an invocation is one stream).
func metricsHTTP(h http.Handler) http.Handler {
	m := &metricsHandler{function: os.Getenv("AWS_LAMBDA_FUNCTION_NAME")}
	metrics.EnableEMF()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.begin()
		defer m.end()
		h.ServeHTTP(w, r)
	})
}
