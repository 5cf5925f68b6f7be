package awslocal

import (
	"encoding/hex"
	"net"
	"sync"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/botforge/platform/shared/tracing"
)

// The X-Ray daemon's stand-in: on AWS, Lambda runs the daemon beside each
// function with active tracing and names its UDP address in
// AWS_XRAY_DAEMON_ADDRESS; the functions send their spans there (OTLP over
// UDP, shared/tracing). Here one UDP socket on loopback takes them for
// every function, and keeps them (Spans) where the daemon would send them
// on to X-Ray.

// Span is one span a function sent.
type Span struct {
	TraceID, SpanID, ParentID string // hex; ParentID "" for a root
	Name                      string
	Kind                      string // SERVER, CLIENT, INTERNAL...
	// Service is the function (its resource's service.name).
	Service string
}

type xrayDaemon struct {
	conn  *net.UDPConn
	mu    sync.Mutex
	spans []Span
	done  chan struct{}
}

func startXRayDaemon() (*xrayDaemon, error) {
	conn, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	// Bursts of datagrams while a test reads them late: a large buffer.
	_ = conn.SetReadBuffer(4 << 20)
	d := &xrayDaemon{conn: conn, done: make(chan struct{})}
	go d.serve()
	return d, nil
}

func (d *xrayDaemon) addr() string { return d.conn.LocalAddr().String() }

func (d *xrayDaemon) serve() {
	defer close(d.done)
	buf := make([]byte, 64<<10)
	for {
		n, _, err := d.conn.ReadFromUDP(buf)
		if err != nil {
			return
		}
		rs, ok := tracing.DecodeDatagram(buf[:n])
		if !ok {
			continue // a segment document, or noise: not kept
		}
		d.keep(rs)
	}
}

func (d *xrayDaemon) keep(rs []*tracepb.ResourceSpans) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range rs {
		service := ""
		for _, a := range r.GetResource().GetAttributes() {
			if a.Key == "service.name" {
				service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range r.ScopeSpans {
			for _, sp := range ss.Spans {
				kind := sp.Kind.String()
				if len(kind) > len("SPAN_KIND_") {
					kind = kind[len("SPAN_KIND_"):]
				}
				d.spans = append(d.spans, Span{
					TraceID: hex.EncodeToString(sp.TraceId), SpanID: hex.EncodeToString(sp.SpanId),
					ParentID: hex.EncodeToString(sp.ParentSpanId), Name: sp.Name, Kind: kind, Service: service,
				})
			}
		}
	}
}

func (d *xrayDaemon) close() error {
	err := d.conn.Close()
	<-d.done
	return err
}

// Spans are the spans the stack's functions sent to the X-Ray daemon's
// stand-in so far.
func (s *Stack) Spans() []Span {
	s.xray.mu.Lock()
	defer s.xray.mu.Unlock()
	return append([]Span(nil), s.xray.spans...)
}
