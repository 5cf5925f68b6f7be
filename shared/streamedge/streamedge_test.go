package streamedge_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/streamedge"
)

// secret is a rotatable certificate value, as the Secrets Manager secret
// or SSM parameter holds it.
type secret struct {
	mu    sync.Mutex
	value []byte
}

func (s *secret) set(v []byte) { s.mu.Lock(); s.value = v; s.mu.Unlock() }
func (s *secret) fetch(context.Context) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value, nil
}

func selfSigned(t *testing.T) []byte {
	t.Helper()
	v, err := streamedge.SelfSigned("127.0.0.1", "localhost")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// serve runs an HTTP server on the edge's listener answering each
// request's client address (clientip.Of, through a resolver that trusts
// no proxy, as the task's when the stack's TrustedProxies is empty).
func serve(t *testing.T, c streamedge.Config) (addr string, certs *streamedge.Certs) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ln, certs, err := streamedge.Listen(ctx, raw, c)
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := clientip.Parse("")
	srv := &http.Server{Handler: rv.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, clientip.Of(r))
	}))}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { cancel(); _ = srv.Close() })
	return raw.Addr().String(), certs
}

// get sends GET / on a new connection to addr: first the proxy header
// (none, LOCAL, or one naming client), then TLS with pool trusted.
func get(addr string, header string, client string, pool *x509.CertPool, xff string) (string, *x509.Certificate, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	switch header {
	case "local":
		err = streamedge.SendLocalHeader(conn)
	case "proxy":
		src, _ := net.ResolveTCPAddr("tcp", client)
		err = streamedge.SendHeader(conn, src, conn.RemoteAddr())
	}
	if err != nil {
		return "", nil, err
	}
	var rw net.Conn = conn
	var leaf *x509.Certificate
	if pool != nil {
		tc := tls.Client(conn, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: []string{"http/1.1"}})
		if err := tc.Handshake(); err != nil {
			return "", nil, err
		}
		leaf = tc.ConnectionState().PeerCertificates[0]
		rw = tc
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	if err := req.Write(rw); err != nil {
		return "", nil, err
	}
	res, err := http.ReadResponse(bufio.NewReader(rw), req)
	if err != nil {
		return "", nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), leaf, err
}

func poolOf(t *testing.T, v []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(v) {
		t.Fatal("no certificate")
	}
	return p
}

// TestProxyProtocolAndTLS: behind the Network Load Balancer the task's
// client address is the proxy header's, whatever X-Forwarded-For says; a
// connection without the header is refused; a health check's (LOCAL
// header) is served; a connection from outside the load balancer's
// ranges is closed.
func TestProxyProtocolAndTLS(t *testing.T) {
	s := &secret{value: selfSigned(t)}
	addr, _ := serve(t, streamedge.Config{TLSSecret: "test", ProxyFrom: []string{"127.0.0.0/8"}, FetchCerts: s.fetch})
	pool := poolOf(t, s.value)

	got, _, err := get(addr, "proxy", "203.0.113.7:40000", pool, "198.51.100.1, 198.51.100.2")
	if err != nil || got != "203.0.113.7" {
		t.Fatalf("with the header and a forged X-Forwarded-For: %q %v, want 203.0.113.7", got, err)
	}
	got, _, err = get(addr, "proxy", "[2001:db8::5]:40000", pool, "")
	if err != nil || got != "2001:db8::5" {
		t.Fatalf("an IPv6 client: %q %v", got, err)
	}
	if got, _, err = get(addr, "local", "", pool, ""); err != nil || got != "127.0.0.1" {
		t.Fatalf("a health check (LOCAL): %q %v, want the socket's peer", got, err)
	}
	if got, _, err = get(addr, "none", "", pool, ""); err == nil {
		t.Fatalf("without the header: answered %q, want the connection refused", got)
	}

	// The same, the header required from another range: a connection from
	// loopback is closed, header or not.
	other, _ := serve(t, streamedge.Config{TLSSecret: "test", ProxyFrom: []string{"10.0.0.0/8"}, FetchCerts: s.fetch})
	if got, _, err = get(other, "proxy", "203.0.113.7:1", pool, ""); err == nil {
		t.Fatalf("a header from outside the load balancer's ranges: answered %q", got)
	}
}

// TestCertificateRotation: a new value of the secret is served from the
// next handshake after a reload; a value that is no certificate keeps the
// one served; the reload runs on its own on the interval.
func TestCertificateRotation(t *testing.T) {
	first, second := selfSigned(t), selfSigned(t)
	s := &secret{value: first}
	addr, certs := serve(t, streamedge.Config{TLSSecret: "test", ProxyFrom: []string{"127.0.0.0/8"}, FetchCerts: s.fetch, Reload: time.Hour})
	serial := func(pool *x509.CertPool) string {
		t.Helper()
		_, leaf, err := get(addr, "proxy", "203.0.113.7:1", pool, "")
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	leafOf := func(v []byte) string {
		b, _ := pem.Decode(v)
		c, _ := x509.ParseCertificate(b.Bytes)
		return c.SerialNumber.String()
	}
	if got := serial(poolOf(t, first)); got != leafOf(first) {
		t.Fatalf("serial %s, want the first certificate's", got)
	}
	s.set(second)
	if changed, err := certs.Reload(context.Background()); err != nil || !changed {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if got := serial(poolOf(t, second)); got != leafOf(second) {
		t.Fatalf("after rotation: serial %s, want the second certificate's", got)
	}
	s.set([]byte("-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n"))
	if _, err := certs.Reload(context.Background()); err == nil {
		t.Fatal("a broken value loaded")
	}
	if got := serial(poolOf(t, second)); got != leafOf(second) {
		t.Fatalf("after a broken value: serial %s, want the second still", got)
	}
	if changed, _ := certs.Reload(context.Background()); changed || certs.Loads() != 2 {
		t.Fatalf("loads %d", certs.Loads())
	}

	// On the interval, with no call.
	third := selfSigned(t)
	s2 := &secret{value: first}
	addr2, certs2 := serve(t, streamedge.Config{TLSSecret: "test", FetchCerts: s2.fetch, Reload: 10 * time.Millisecond})
	s2.set(third)
	deadline := time.Now().Add(20 * time.Second)
	for certs2.Loads() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the certificate was not read again on the interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, leaf, err := get(addr2, "none", "", poolOf(t, third), ""); err != nil || leaf.SerialNumber.String() != leafOf(third) {
		t.Fatalf("after the interval: %v", err)
	}
}

// TestFromEnv: the task's variables.
func TestFromEnv(t *testing.T) {
	t.Setenv(streamedge.EnvTLSSecret, " arn:aws:secretsmanager:eu-west-1:123456789012:secret:tls-AbCdEf ")
	t.Setenv(streamedge.EnvProxyProtocol, "10.0.0.0/8, 172.16.0.0/12,")
	t.Setenv(streamedge.EnvTLSReload, "")
	c, err := streamedge.FromEnv()
	if err != nil || c.TLSSecret != "arn:aws:secretsmanager:eu-west-1:123456789012:secret:tls-AbCdEf" ||
		strings.Join(c.ProxyFrom, ",") != "10.0.0.0/8,172.16.0.0/12" || c.Reload != streamedge.DefaultReload {
		t.Fatalf("%+v %v", c, err)
	}
	t.Setenv(streamedge.EnvTLSReload, "soon")
	if _, err := streamedge.FromEnv(); err == nil {
		t.Fatal("a reload interval that is no duration accepted")
	}
	if _, err := streamedge.AWSFetcher(context.Background(), "arn:aws:s3:::bucket/key"); err == nil {
		t.Fatal("an S3 ARN accepted")
	}
	if _, err := streamedge.AWSFetcher(context.Background(), "tls"); err == nil {
		t.Fatal("a name that is no ARN accepted")
	}
}
