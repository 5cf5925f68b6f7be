package tracing

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// daemon is a UDP socket standing for the X-Ray daemon.
func daemon(t testing.TB) *net.UDPConn {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadBuffer(4 << 20)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// provider is the tracer provider setup makes on AWS, exporting to addr.
func provider(t testing.TB, addr string) *sdktrace.TracerProvider {
	exp, err := otlptrace.New(context.Background(), newUDPClient(addr))
	if err != nil {
		t.Fatal(err)
	}
	byID := sdktrace.TraceIDRatioBased(1)
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(xrayIDs{}), sdktrace.WithSpanProcessor(&invocationSpans{exp: exp}),
		sdktrace.WithSampler(sdktrace.ParentBased(byID, sdktrace.WithRemoteParentNotSampled(byID))), sdktrace.WithResource(serviceResource()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// TestSpansToTheDaemon: an invocation's spans reach the daemon in one
// datagram at Flush (the end of the invocation), in X-Ray's UDP framing
// with the OTLP spans, the request's trace id and the parent links kept;
// a batch too large for one datagram is sent in several.
func TestSpansToTheDaemon(t *testing.T) {
	d := daemon(t)
	tp := provider(t, d.LocalAddr().String())
	tr := tp.Tracer("test")
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1")
	ctx := XRay{}.Extract(r.Context(), headerCarrier(r.Header))
	ctx, req := tr.Start(ctx, "createMessage", trace.WithSpanKind(trace.SpanKindServer))
	_, call := tr.Start(ctx, "DynamoDB.TransactWriteItems", trace.WithSpanKind(trace.SpanKindClient))
	call.End()
	req.End()
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	_ = d.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := d.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(buf[:n]), "{\"format\":\"json\",\"version\":1}\nT1S") {
		t.Fatalf("datagram %q", buf[:min(n, 60)])
	}
	rs, ok := DecodeDatagram(buf[:n])
	if !ok || spanCount(rs) != 2 {
		t.Fatalf("decoded %v, %d spans", ok, spanCount(rs))
	}
	spans := rs[0].ScopeSpans[0].Spans
	for _, sp := range spans {
		if fmt.Sprintf("%x", sp.TraceId) != "5759e988bd862e3fe1be46a994272793" {
			t.Errorf("span %s: trace %x", sp.Name, sp.TraceId)
		}
	}
	if fmt.Sprintf("%x", spans[1].ParentSpanId) != "53995c3f42cd8ad8" || string(spans[0].ParentSpanId) != string(spans[1].SpanId) {
		t.Errorf("parents: request's %x, call's %x (request %x)", spans[1].ParentSpanId, spans[0].ParentSpanId, spans[1].SpanId)
	}

	// A large batch: several datagrams, each within the limit, all spans.
	for i := range 400 {
		_, sp := tr.Start(ctx, strings.Repeat("x", 200)+fmt.Sprint(i))
		sp.End()
	}
	if err := tp.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, datagrams := 0, 0
	for got < 400 {
		_ = d.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := d.Read(buf)
		if err != nil {
			t.Fatalf("%d spans in %d datagrams: %v", got, datagrams, err)
		}
		if n > maxDatagram {
			t.Errorf("datagram of %d bytes", n)
		}
		rs, _ := DecodeDatagram(buf[:n])
		got += spanCount(rs)
		datagrams++
	}
	if datagrams < 2 {
		t.Errorf("400 spans of ~250 bytes in %d datagram(s)", datagrams)
	}
}

// An X-Ray root without a parent (API Gateway's header) makes the next
// span the trace's root, with that trace id; new ids are X-Ray's (the
// start's time in their first 4 bytes).
func TestXRayRootAndIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(xrayIDs{}))
	ctx := XRay{}.Extract(context.Background(), headerCarrier{"X-Amzn-Trace-Id": {"Root=1-5759e988-bd862e3fe1be46a994272793"}})
	_, sp := tp.Tracer("t").Start(ctx, "root")
	ro := sp.(sdktrace.ReadOnlySpan)
	if ro.SpanContext().TraceID().String() != "5759e988bd862e3fe1be46a994272793" || ro.Parent().IsValid() {
		t.Errorf("trace %s, parent %v", ro.SpanContext().TraceID(), ro.Parent())
	}
	tid, _ := xrayIDs{}.NewIDs(context.Background())
	if at := int64(binary.BigEndian.Uint32(tid[:4])); at < time.Now().Unix()-5 || at > time.Now().Unix() {
		t.Errorf("trace id %s: not X-Ray's (time %d)", tid, at)
	}
	for _, c := range []struct{ in, want string }{
		{"169.254.79.129:2000", "169.254.79.129:2000"},
		{"tcp:127.0.0.1:2000 udp:127.0.0.2:2001", "127.0.0.2:2001"},
		{"", ""},
	} {
		if got := daemonAddress(c.in); got != c.want {
			t.Errorf("daemonAddress(%q) = %q", c.in, got)
		}
	}
}

type headerCarrier map[string][]string

func (h headerCarrier) Get(k string) string {
	for kk, v := range h {
		if strings.EqualFold(kk, k) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}
func (h headerCarrier) Set(k, v string) { h[k] = []string{v} }
func (h headerCarrier) Keys() []string {
	var ks []string
	for k := range h {
		ks = append(ks, k)
	}
	return ks
}

// BenchmarkInvocationExported is what one request's tracing costs on AWS:
// its request span and two DynamoDB calls' spans, exported at the end of
// the invocation (Flush: one datagram to the daemon).
func BenchmarkInvocationExported(b *testing.B) {
	d := daemon(b)
	go func() {
		buf := make([]byte, 64<<10)
		for {
			if _, err := d.Read(buf); err != nil {
				return
			}
		}
	}()
	benchInvocation(b, provider(b, d.LocalAddr().String()))
}

// BenchmarkInvocationNotExported is the same with no exporter (locally
// without OTLP, or TraceExport none).
func BenchmarkInvocationNotExported(b *testing.B) {
	benchInvocation(b, sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(xrayIDs{})))
}

// benchInvocation reports the process's CPU time per invocation too
// (cpu-ns/op, from getrusage): on a loaded machine the wall time per
// invocation is mostly waiting for a core.
func benchInvocation(b *testing.B, tp *sdktrace.TracerProvider) {
	tr := tp.Tracer("bench")
	before := cpuTime()
	defer func() { b.ReportMetric(float64((cpuTime()-before).Nanoseconds())/float64(b.N), "cpu-ns/op") }()
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Set("X-Amzn-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793")
	for b.Loop() {
		ctx := XRay{}.Extract(r.Context(), headerCarrier(r.Header))
		ctx, req := tr.Start(ctx, "createMessage", trace.WithSpanKind(trace.SpanKindServer))
		for range 2 {
			_, call := tr.Start(ctx, "DynamoDB.TransactWriteItems", trace.WithSpanKind(trace.SpanKindClient))
			call.End()
		}
		req.End()
		_ = tp.ForceFlush(context.Background())
	}
}

func cpuTime() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
