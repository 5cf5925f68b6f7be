package tracing

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// The AWS outlet of the spans (docs/metrics.md, "Tracing"): on Lambda,
// with active tracing, the runtime runs the X-Ray daemon beside the
// function and names it in AWS_XRAY_DAEMON_ADDRESS. The spans go to it as
// OTLP over UDP, the way AWS's own OpenTelemetry distributions for Lambda
// export them (their "X-Ray UDP span exporter"): one datagram of
//
//	{"format":"json","version":1}\n T1S <base64 of an OTLP ExportTraceServiceRequest>
//
// per batch (T1S: sampled spans). A datagram on the link-local interface
// costs microseconds and no round trip; Lambda's daemon sends them on to
// X-Ray after the invocation, so nothing waits on X-Ray on the request
// path, no credentials are signed in the function, and no extension
// process (the ADOT collector layer) runs beside it.

// EnvTraceExport names where the spans go on AWS: "xray" (to the X-Ray
// daemon at AWS_XRAY_DAEMON_ADDRESS) or "none".
const EnvTraceExport = "PLATFORM_TRACE_EXPORT"

// EnvTraceSampleRatio is the share of traces recorded (0 to 1, default 1).
const EnvTraceSampleRatio = "PLATFORM_TRACE_SAMPLE_RATIO"

const (
	udpHeader = `{"format":"json","version":1}` + "\n"
	// udpSampled prefixes the base64 OTLP spans of sampled traces.
	udpSampled = "T1S"
	// maxDatagram keeps a datagram within what the daemon reads at once
	// (64 KiB): a larger batch is sent in parts.
	maxDatagram = 60 << 10
)

// daemonAddress is the UDP address of AWS_XRAY_DAEMON_ADDRESS, which is
// either host:port or "tcp:host:port udp:host:port".
func daemonAddress(v string) string {
	for _, f := range strings.Fields(v) {
		if a, ok := strings.CutPrefix(f, "udp:"); ok {
			return a
		}
		if !strings.HasPrefix(f, "tcp:") {
			return f
		}
	}
	return ""
}

// udpClient is an otlptrace.Client writing the spans to the X-Ray daemon.
type udpClient struct {
	addr string
	mu   sync.Mutex
	conn net.Conn
}

func newUDPClient(addr string) *udpClient { return &udpClient{addr: addr} }

func (c *udpClient) Start(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		return nil
	}
	conn, err := net.Dial("udp", c.addr)
	if err != nil {
		return err
	}
	c.conn = conn
	return nil
}

func (c *udpClient) Stop(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		return nil
	}
	err := c.conn.Close()
	c.conn = nil
	return err
}

// UploadTraces sends the spans in as few datagrams as fit.
func (c *udpClient) UploadTraces(ctx context.Context, rs []*tracepb.ResourceSpans) error {
	if err := c.Start(ctx); err != nil {
		return err
	}
	var errs []error
	for _, d := range datagrams(rs) {
		c.mu.Lock()
		_, err := c.conn.Write(d)
		c.mu.Unlock()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// datagrams renders the spans as datagrams of at most maxDatagram bytes,
// halving a batch until it fits (a single span larger than that is sent
// alone, and the daemon drops it).
func datagrams(rs []*tracepb.ResourceSpans) [][]byte {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceRequest{ResourceSpans: rs})
	if err != nil {
		return nil
	}
	n := len(udpHeader) + len(udpSampled) + base64.StdEncoding.EncodedLen(len(b))
	if n <= maxDatagram || spanCount(rs) <= 1 {
		d := make([]byte, 0, n)
		d = append(d, udpHeader...)
		d = append(d, udpSampled...)
		return [][]byte{base64.StdEncoding.AppendEncode(d, b)}
	}
	a, z := split(rs)
	return append(datagrams(a), datagrams(z)...)
}

func spanCount(rs []*tracepb.ResourceSpans) (n int) {
	for _, r := range rs {
		for _, s := range r.ScopeSpans {
			n += len(s.Spans)
		}
	}
	return n
}

// split halves the spans, each half keeping its resource and scope.
func split(rs []*tracepb.ResourceSpans) (a, z []*tracepb.ResourceSpans) {
	half := spanCount(rs) / 2
	for _, r := range rs {
		ra := &tracepb.ResourceSpans{Resource: r.Resource, SchemaUrl: r.SchemaUrl}
		rz := &tracepb.ResourceSpans{Resource: r.Resource, SchemaUrl: r.SchemaUrl}
		for _, s := range r.ScopeSpans {
			k := min(half, len(s.Spans))
			half -= k
			if k > 0 {
				ra.ScopeSpans = append(ra.ScopeSpans, &tracepb.ScopeSpans{Scope: s.Scope, SchemaUrl: s.SchemaUrl, Spans: s.Spans[:k]})
			}
			if k < len(s.Spans) {
				rz.ScopeSpans = append(rz.ScopeSpans, &tracepb.ScopeSpans{Scope: s.Scope, SchemaUrl: s.SchemaUrl, Spans: s.Spans[k:]})
			}
		}
		if len(ra.ScopeSpans) > 0 {
			a = append(a, ra)
		}
		if len(rz.ScopeSpans) > 0 {
			z = append(z, rz)
		}
	}
	return a, z
}

// DecodeDatagram reads the spans of one datagram sent to the daemon (what
// aws-local's stand-in of the daemon does); ok is false for anything else
// (an X-Ray segment document, say).
func DecodeDatagram(d []byte) (spans []*tracepb.ResourceSpans, ok bool) {
	rest, found := strings.CutPrefix(string(d), udpHeader)
	if !found {
		return nil, false
	}
	body, found := strings.CutPrefix(rest, udpSampled)
	if !found {
		return nil, false
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return nil, false
	}
	var req coltracepb.ExportTraceServiceRequest
	if proto.Unmarshal(b, &req) != nil {
		return nil, false
	}
	return req.ResourceSpans, true
}

// xrayIDs makes trace ids X-Ray takes as its own: the first 4 bytes are
// the start's Unix time in seconds (X-Ray's "1-<8 hex>-<24 hex>"), the
// rest random. The TraceIDRatioBased sampler reads the last 8 bytes, which
// stay random.
type xrayIDs struct{}

// rootKey holds the trace id of an X-Ray header naming a root and no
// parent: the next root span's.
type rootKey struct{}

func (xrayIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if t, ok := ctx.Value(rootKey{}).(trace.TraceID); ok {
		return t, newSpanID()
	}
	var t trace.TraceID
	binary.BigEndian.PutUint32(t[:4], uint32(time.Now().Unix()))
	binary.BigEndian.PutUint32(t[4:8], rand.Uint32())
	binary.BigEndian.PutUint64(t[8:], rand.Uint64())
	return t, newSpanID()
}

func (xrayIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() (s trace.SpanID) {
	for !s.IsValid() {
		binary.BigEndian.PutUint64(s[:], rand.Uint64())
	}
	return s
}

// exportToXRay says whether this process sends its spans to the daemon,
// and where.
func exportToXRay() (string, bool) {
	if os.Getenv(EnvTraceExport) != "xray" {
		return "", false
	}
	a := daemonAddress(os.Getenv("AWS_XRAY_DAEMON_ADDRESS"))
	return a, a != ""
}

// invocationSpans is the span processor of the X-Ray outlet: the spans
// ended during an invocation wait in memory, and Flush (the invocation's
// end) exports them at once in the caller's goroutine, one datagram. A
// batch processor would hand them to a goroutine of its own and wait for
// it, which costs more than the datagram on a busy machine; and Lambda
// freezes the process between invocations, so nothing may be left for
// later. Spans piling up without a Flush (a long stream) are sent every
// maxPending.
type invocationSpans struct {
	exp     sdktrace.SpanExporter
	mu      sync.Mutex
	pending []sdktrace.ReadOnlySpan
}

const maxPending = 512

func (p *invocationSpans) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (p *invocationSpans) OnEnd(s sdktrace.ReadOnlySpan) {
	if !s.SpanContext().IsSampled() {
		return
	}
	p.mu.Lock()
	p.pending = append(p.pending, s)
	full := len(p.pending) >= maxPending
	p.mu.Unlock()
	if full {
		_ = p.ForceFlush(context.Background())
	}
}

func (p *invocationSpans) ForceFlush(ctx context.Context) error {
	p.mu.Lock()
	spans := p.pending
	p.pending = nil
	p.mu.Unlock()
	if len(spans) == 0 {
		return nil
	}
	return p.exp.ExportSpans(ctx, spans)
}

func (p *invocationSpans) Shutdown(ctx context.Context) error {
	err := p.ForceFlush(ctx)
	return errors.Join(err, p.exp.Shutdown(ctx))
}
