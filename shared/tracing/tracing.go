// Package tracing gives every request one trace id (OpenTelemetry) and
// carries it: from the incoming request's headers (W3C traceparent, or
// AWS's X-Amzn-Trace-Id), through the outbox entries the request queued,
// into the dispatcher's call to the bot or integration (both headers
// again), and onto every log line written with the request's context
// (LogHandler). Locally the spans go to an OTLP endpoint when
// OTEL_EXPORTER_OTLP_ENDPOINT is set; on AWS to Lambda's X-Ray daemon
// (xray.go), with X-Ray's ids (docs/metrics.md, "Tracing").
package tracing

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TraceIDHeader is the response header naming the request's trace id.
const TraceIDHeader = "X-Trace-Id"

var (
	once     sync.Once
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	shutdown = func(context.Context) error { return nil }
	flush    = func(context.Context) error { return nil }
	// exporting: the spans go somewhere (Flush has work to do).
	exporting bool
)

// setup installs the tracer provider. Ids are X-Ray's (xrayIDs); a trace
// is recorded or not by its id (TraceIDRatioBased, EnvTraceSampleRatio,
// default all), so that every function of a request decides alike
// whatever flag a caller sent. The spans go to the X-Ray daemon when
// EnvTraceExport is xray (on AWS), else over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set, else nowhere (the ids are still carried and logged).
func setup() {
	once.Do(func() {
		ratio := 1.0
		if v, err := strconv.ParseFloat(os.Getenv(EnvTraceSampleRatio), 64); err == nil && v >= 0 && v <= 1 {
			ratio = v
		}
		byID := sdktrace.TraceIDRatioBased(ratio)
		opts := []sdktrace.TracerProviderOption{
			sdktrace.WithIDGenerator(xrayIDs{}),
			sdktrace.WithSampler(sdktrace.ParentBased(byID, sdktrace.WithRemoteParentNotSampled(byID))),
			sdktrace.WithResource(serviceResource()),
		}
		var exp sdktrace.SpanExporter
		var err error
		if addr, ok := exportToXRay(); ok {
			if exp, err = otlptrace.New(context.Background(), newUDPClient(addr)); err == nil {
				opts = append(opts, sdktrace.WithSpanProcessor(&invocationSpans{exp: exp}))
			}
		} else if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			if exp, err = otlptracehttp.New(context.Background()); err == nil {
				opts = append(opts, sdktrace.WithBatcher(exp))
			}
		}
		if err != nil {
			slog.Error("tracing: the exporter", "err", err)
		}
		exporting = err == nil && exp != nil
		tp := sdktrace.NewTracerProvider(opts...)
		shutdown, flush = tp.Shutdown, tp.ForceFlush
		otel.SetTracerProvider(tp)
		// X-Ray's header first: a W3C traceparent, when both are sent, wins.
		prop = propagation.NewCompositeTextMapPropagator(XRay{}, propagation.TraceContext{})
		otel.SetTextMapPropagator(prop)
		tracer = tp.Tracer("github.com/botforge/platform")
	})
}

// serviceResource names the process in its spans: the Lambda function, or
// the platform.
func serviceResource() *resource.Resource {
	if fn := os.Getenv("AWS_LAMBDA_FUNCTION_NAME"); fn != "" {
		return resource.NewSchemaless(attribute.String("service.name", fn), attribute.String("cloud.provider", "aws"),
			attribute.String("cloud.platform", "aws_lambda"), attribute.String("faas.name", fn))
	}
	return resource.NewSchemaless(attribute.String("service.name", "botforge-platform"))
}

// Shutdown flushes the spans not yet exported.
func Shutdown(ctx context.Context) error { setup(); return shutdown(ctx) }

// Flush exports the spans ended so far: a Lambda function calls it at the
// end of each invocation, before the runtime may freeze the process. With
// no exporter it costs nothing.
func Flush(ctx context.Context) error {
	setup()
	if !exporting {
		return nil
	}
	return flush(ctx)
}

// StartRequest starts the span of an incoming request, a child of the
// trace its headers name, or the root of a new one.
func StartRequest(r *http.Request, name string) (context.Context, trace.Span) {
	setup()
	ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// Start starts a span within ctx's trace.
func Start(ctx context.Context, name string, kind trace.SpanKind) (context.Context, trace.Span) {
	setup()
	return tracer.Start(ctx, name, trace.WithSpanKind(kind))
}

// TraceID is ctx's trace id ("" for none).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}

// Parent renders ctx's span as a W3C traceparent ("" for none), what an
// outbox entry keeps of the request that queued it.
func Parent(ctx context.Context) string {
	setup()
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// WithParent continues the trace of a traceparent in ctx ("" leaves ctx).
func WithParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// Inject writes ctx's trace into an outgoing request's headers
// (traceparent and X-Amzn-Trace-Id).
func Inject(ctx context.Context, h http.Header) {
	setup()
	prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// LogHandler adds the trace id of the record's context to every log line
// (attribute traceId).
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := TraceID(ctx); id != "" {
		r.AddAttrs(slog.String("traceId", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{h.Handler.WithAttrs(as)}
}
func (h logHandler) WithGroup(n string) slog.Handler { return logHandler{h.Handler.WithGroup(n)} }

// XRay is the propagator of AWS's X-Amzn-Trace-Id header
// (Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=1): the same 128-bit
// trace id as W3C's, written the X-Ray way.
type XRay struct{}

const xrayHeader = "X-Amzn-Trace-Id"

// Inject writes the header.
func (XRay) Inject(ctx context.Context, c propagation.TextMapCarrier) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	t := sc.TraceID().String()
	sampled := "0"
	if sc.IsSampled() {
		sampled = "1"
	}
	c.Set(xrayHeader, "Root=1-"+t[:8]+"-"+t[8:]+";Parent="+sc.SpanID().String()+";Sampled="+sampled)
}

// Extract reads the header.
func (XRay) Extract(ctx context.Context, c propagation.TextMapCarrier) context.Context {
	v := c.Get(xrayHeader)
	if v == "" {
		return ctx
	}
	var root, parent string
	sampled := false
	for _, part := range strings.Split(v, ";") {
		k, val, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = val
		case "Parent":
			parent = val
		case "Sampled":
			sampled = val == "1"
		}
	}
	fields := strings.Split(root, "-")
	if len(fields) != 3 || fields[0] != "1" {
		return ctx
	}
	tid, err := trace.TraceIDFromHex(fields[1] + fields[2])
	if err != nil {
		return ctx
	}
	cfg := trace.SpanContextConfig{TraceID: tid, Remote: true}
	sid, err := trace.SpanIDFromHex(parent)
	if err != nil {
		// A root without a parent (API Gateway's header): the span
		// started next is the trace's root, with this trace id
		// (xrayIDs), rather than the child of a span that never was.
		return context.WithValue(ctx, rootKey{}, tid)
	}
	cfg.SpanID = sid
	if sampled {
		cfg.TraceFlags = trace.FlagsSampled
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(cfg))
}

// Fields names the header.
func (XRay) Fields() []string { return []string{xrayHeader} }
