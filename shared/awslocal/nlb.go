package awslocal

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/streamedge"
)

// The container tier behind a Network Load Balancer
// (StreamLoadBalancerType nlb, docs/deploy.md "Choosing the load
// balancer"), run here: the load balancer's stand-in passes each TCP
// connection through to the next task, writing first the proxy protocol v2
// header with the client's address as the NLB does; the tasks end TLS with
// a test certificate they read, as on AWS, from the Secrets Manager
// secret StreamTlsSecretArn names (served below, checked against
// StreamTaskRole). The certificate (one for 127.0.0.1 signed by a test CA,
// kept in <data-dir>/aws-local/stream-tls.pem) is what clients must trust:
// its CA (stream-ca.pem) in NODE_EXTRA_CA_CERTS for Node, in a browser
// profile's trust store (make webchat-e2e-aws-nlb), Stack.StreamCertificate
// for Go tests.

// StreamTLSSecretARN is the test certificate's secret, the stack's
// StreamTlsSecretArn when StreamLoadBalancerType is nlb and none is given.
var StreamTLSSecretARN = "arn:aws:secretsmanager:" + Region + ":" + Account + ":secret:" + StackName + "-stream-tls-AbCdEf"

// StreamTLSFile is the test certificate's file (with its key) under the
// data directory; StreamCAFile the certificate alone, what clients trust
// (NODE_EXTRA_CA_CERTS).
const (
	StreamTLSFile = "stream-tls.pem"
	StreamCAFile  = "stream-ca.pem"
)

// secretsManager is the Secrets Manager stand-in: GetSecretValue of the
// secrets it holds (the test certificate).
type secretsManager struct {
	mu      sync.Mutex
	secrets map[string][]byte
	version int
}

func (m *secretsManager) set(arn string, v []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secrets == nil {
		m.secrets = map[string][]byte{}
	}
	m.secrets[arn] = v
	m.version++
}

func (m *secretsManager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var in struct{ SecretId string }
	_ = json.NewDecoder(r.Body).Decode(&in)
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	target := r.Header.Get("X-Amz-Target")
	m.mu.Lock()
	v, ok := m.secrets[in.SecretId]
	version := m.version
	m.mu.Unlock()
	if target != "secretsmanager.GetSecretValue" {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "InvalidRequestException", "message": "aws-local: only GetSecretValue is served"})
		return
	}
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": "ResourceNotFoundException", "message": "Secrets Manager can't find the specified secret."})
		return
	}
	name := in.SecretId[strings.LastIndex(in.SecretId, ":")+1:]
	_ = json.NewEncoder(w).Encode(map[string]any{"ARN": in.SecretId, "Name": name, "SecretString": string(v),
		"VersionId": fmt.Sprintf("v%d", version), "VersionStages": []string{"AWSCURRENT"}, "CreatedDate": float64(time.Now().Unix())})
}

// secretsAuthz: GetSecretValue on the secret named.
func secretsAuthz(r *http.Request, body []byte) []authz {
	target := r.Header.Get("X-Amz-Target")
	var in struct{ SecretId string }
	_ = json.Unmarshal(body, &in)
	return []authz{{action: "secretsmanager:" + target[strings.LastIndex(target, ".")+1:], resource: in.SecretId}}
}

// streamTLS reads the test certificate from dir, or makes one there: a
// server certificate for 127.0.0.1 signed by a test CA (a browser refuses
// a self-signed CA as a server's certificate), the CA alone in
// StreamCAFile. Made again when it does not parse, has no CA or expires
// within a day.
func streamTLS(dir string) ([]byte, error) {
	p := filepath.Join(dir, StreamTLSFile)
	v, err := os.ReadFile(p)
	ca := testCA(v)
	if c, perr := tls.X509KeyPair(v, v); err != nil || perr != nil || ca == nil || c.Leaf == nil || time.Until(c.Leaf.NotAfter) < 24*time.Hour {
		if v, ca, err = streamedge.TestChain("127.0.0.1", "localhost"); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, v, 0o600); err != nil {
			return nil, err
		}
	}
	return v, os.WriteFile(filepath.Join(dir, StreamCAFile), ca, 0o644)
}

// testCA is the PEM of the CA certificates in v (nil when none).
func testCA(v []byte) []byte {
	var ca []byte
	for rest := v; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return ca
		}
		if c, err := x509.ParseCertificate(b.Bytes); b.Type == "CERTIFICATE" && err == nil && c.IsCA {
			ca = append(ca, pem.EncodeToMemory(b)...)
		}
	}
}

// passThrough is the NLB's stand-in: each accepted connection to the next
// task, its proxy protocol v2 header first, then the bytes both ways.
func passThrough(ln net.Listener, backends []string) {
	var next atomic.Uint64
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b := backends[int(next.Add(1)-1)%len(backends)]
		go func() {
			defer c.Close()
			t, err := net.DialTimeout("tcp", b, 10*time.Second)
			if err != nil {
				return
			}
			defer t.Close()
			if err := streamedge.SendHeader(t, c.RemoteAddr(), c.LocalAddr()); err != nil {
				return
			}
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(t, c); closeWrite(t); done <- struct{}{} }()
			go func() { _, _ = io.Copy(c, t); closeWrite(c); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// waitHealthyNLB is the NLB's health check of a task: a connection with a
// LOCAL proxy header, TLS (unverified, as the NLB's HTTPS checks are),
// GET /healthz answered 200.
func waitHealthyNLB(ctx context.Context, addr string, useTLS bool) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := healthCheckNLB(addr, useTLS)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("no health at %s within a minute: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func healthCheckNLB(addr string, useTLS bool) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if err := streamedge.SendLocalHeader(c); err != nil {
		return err
	}
	var rw net.Conn = c
	if useTLS {
		tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"})
		if err := tc.Handshake(); err != nil {
			return err
		}
		rw = tc
	}
	if _, err := fmt.Fprintf(rw, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", runtime.ServiceHealthPath, addr); err != nil {
		return err
	}
	line := make([]byte, 12)
	if _, err := io.ReadFull(rw, line); err != nil {
		return err
	}
	if string(line) != "HTTP/1.1 200" {
		return fmt.Errorf("health: %q", line)
	}
	return nil
}
