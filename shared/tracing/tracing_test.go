package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/botforge/platform/shared/tracing"
)

// An X-Ray header (as API Gateway and Lambda send it) is continued: the
// same 128-bit trace id, written back the X-Ray way and the W3C way.
func TestXRayHeaderContinued(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	ctx, span := tracing.StartRequest(r, "test")
	defer span.End()
	if id := tracing.TraceID(ctx); id != "5759e988bd862e3fe1be46a994272793" {
		t.Fatalf("trace id %q", id)
	}
	h := httptest.NewRecorder().Header()
	tracing.Inject(ctx, h)
	if got := h.Get("X-Amzn-Trace-Id"); len(got) < 40 || got[:40] != "Root=1-5759e988-bd862e3fe1be46a994272793" {
		t.Errorf("X-Amzn-Trace-Id %q", got)
	}
	if got := h.Get("traceparent"); len(got) < 35 || got[:35] != "00-5759e988bd862e3fe1be46a994272793" {
		t.Errorf("traceparent %q", got)
	}
	// A log line written with the context carries the id.
	var buf bytes.Buffer
	slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).InfoContext(ctx, "x")
	var line map[string]any
	_ = json.Unmarshal(buf.Bytes(), &line)
	if line["traceId"] != "5759e988bd862e3fe1be46a994272793" {
		t.Errorf("log line %s", buf.String())
	}
	// Without one: a trace of its own; a bad header is ignored.
	r = httptest.NewRequest("GET", "/", nil)
	r.Header.Set("X-Amzn-Trace-Id", "Root=garbage")
	ctx, span2 := tracing.StartRequest(r, "test")
	defer span2.End()
	if id := tracing.TraceID(ctx); len(id) != 32 {
		t.Errorf("fresh trace id %q", id)
	}
	if tracing.TraceID(context.Background()) != "" {
		t.Error("a context without a span has a trace id")
	}
}

// BenchmarkStartRequest is what a request's trace costs (no exporter).
func BenchmarkStartRequest(b *testing.B) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	for b.Loop() {
		_, span := tracing.StartRequest(r, "x")
		span.End()
	}
}
