// Package streamedge is the edge of the container stream tier when its
// load balancer is a Network Load Balancer passing TCP through
// (StreamLoadBalancer nlb, docs/deploy.md "Stream tiers"): the task ends
// TLS itself, with a certificate read from a Secrets Manager secret or an
// SSM SecureString parameter and read again on an interval (rotation
// needs no restart), and learns the client's address from the proxy
// protocol v2 header the load balancer writes first on each connection
// (parsed by github.com/pires/go-proxyproto). The connection's remote
// address is then the client's, so clientip.Peer, and every per-address
// limit, sees the address the load balancer saw; X-Forwarded-For is
// written by the client and believed only behind the operator's
// TrustedProxies.
//
// With an Application Load Balancer (the default) none of this is on: the
// load balancer ends TLS and appends X-Forwarded-For.
package streamedge

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	proxyproto "github.com/pires/go-proxyproto"
)

// The task's environment (template.yaml's StreamTaskDefinition).
const (
	// EnvTLSSecret: the ARN of the secret or SecureString parameter whose
	// value is the certificate chain and its private key, PEM. Empty: no
	// TLS (the load balancer ends it, or plain HTTP).
	EnvTLSSecret = "PLATFORM_STREAM_TLS_SECRET"
	// EnvTLSReload: how often the secret is read again (a Go duration;
	// default DefaultReload).
	EnvTLSReload = "PLATFORM_STREAM_TLS_RELOAD"
	// EnvProxyProtocol: the addresses (CIDRs) a proxy protocol v2 header
	// is required from: the load balancer's. A connection from them
	// without the header is refused; a connection from anywhere else is
	// closed. Empty: no proxy protocol.
	EnvProxyProtocol = "PLATFORM_PROXY_PROTOCOL"
)

// DefaultReload is how often the certificate is read again when
// EnvTLSReload is unset: a rotated certificate is served within it.
const DefaultReload = 5 * time.Minute

// headerTimeout bounds the wait for a connection's proxy header (the load
// balancer writes it first, at once).
const headerTimeout = 5 * time.Second

// Config is the edge's configuration.
type Config struct {
	TLSSecret  string
	Reload     time.Duration
	ProxyFrom  []string
	FetchCerts Fetcher // nil: read TLSSecret from AWS
}

// FromEnv reads the configuration from the environment.
func FromEnv() (Config, error) {
	c := Config{TLSSecret: strings.TrimSpace(os.Getenv(EnvTLSSecret)), Reload: DefaultReload}
	if v := os.Getenv(EnvTLSReload); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%s %q: want a positive duration such as 5m", EnvTLSReload, v)
		}
		c.Reload = d
	}
	for _, s := range strings.Split(os.Getenv(EnvProxyProtocol), ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.ProxyFrom = append(c.ProxyFrom, s)
		}
	}
	return c, nil
}

// Fetcher reads the certificate's PEM (chain and key).
type Fetcher func(ctx context.Context) ([]byte, error)

// AWSFetcher reads the secret or parameter named by its ARN: Secrets
// Manager's GetSecretValue for a secretsmanager ARN, SSM's GetParameter
// (decrypted) for an ssm one. The task role may read that one only.
func AWSFetcher(ctx context.Context, name string) (Fetcher, error) {
	a, err := arn.Parse(name)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not an ARN: %v", EnvTLSSecret, name, err)
	}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, err
	}
	switch a.Service {
	case "secretsmanager":
		c := secretsmanager.NewFromConfig(cfg)
		return func(ctx context.Context) ([]byte, error) {
			out, err := c.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(name)})
			if err != nil {
				return nil, err
			}
			if out.SecretString != nil {
				return []byte(*out.SecretString), nil
			}
			return out.SecretBinary, nil
		}, nil
	case "ssm":
		c := ssm.NewFromConfig(cfg)
		return func(ctx context.Context) ([]byte, error) {
			out, err := c.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
			if err != nil {
				return nil, err
			}
			return []byte(aws.ToString(out.Parameter.Value)), nil
		}, nil
	}
	return nil, fmt.Errorf("%s %q: want a Secrets Manager secret's or an SSM parameter's ARN", EnvTLSSecret, name)
}

// Certs holds the served certificate and reads it again on an interval.
type Certs struct {
	fetch Fetcher
	cur   atomic.Pointer[tls.Certificate]
	pem   atomic.Pointer[[]byte]
	loads atomic.Int64
}

// LoadCerts reads the certificate once (an error if it cannot be read or
// is no certificate and key: the task does not start without one).
func LoadCerts(ctx context.Context, fetch Fetcher) (*Certs, error) {
	c := &Certs{fetch: fetch}
	if _, err := c.Reload(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Reload reads the certificate again and serves it from the next
// handshake when it changed (changed: true). A failed read or a value that
// is not a certificate and key keeps the one served.
func (c *Certs) Reload(ctx context.Context) (changed bool, err error) {
	value, err := c.fetch(ctx)
	if err != nil {
		return false, fmt.Errorf("reading the certificate: %w", err)
	}
	if old := c.pem.Load(); old != nil && bytes.Equal(*old, value) {
		return false, nil
	}
	// The value holds the chain and the key: X509KeyPair takes the
	// CERTIFICATE blocks of one argument and the PRIVATE KEY of the other.
	cert, err := tls.X509KeyPair(value, value)
	if err != nil {
		return false, fmt.Errorf("the certificate's value is not a PEM certificate chain and private key: %w", err)
	}
	c.cur.Store(&cert)
	c.pem.Store(&value)
	c.loads.Add(1)
	return true, nil
}

// Loads counts the certificates loaded (the first and each change).
func (c *Certs) Loads() int64 { return c.loads.Load() }

// Run reads the certificate every interval until ctx ends.
func (c *Certs) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if changed, err := c.Reload(ctx); err != nil {
			slog.Default().Error("stream tls: keeping the served certificate", "err", err)
		} else if changed {
			slog.Default().Info("stream tls: a new certificate is served")
		}
	}
}

// TLSConfig serves the current certificate (HTTP/2 and HTTP/1.1).
func (c *Certs) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cur.Load(), nil
		},
	}
}

// Listen wraps ln as the configuration asks: proxy protocol first (the
// header precedes the TLS handshake on the wire), then TLS. The
// certificate is read again every c.Reload until ctx ends.
func Listen(ctx context.Context, ln net.Listener, c Config) (net.Listener, *Certs, error) {
	if len(c.ProxyFrom) > 0 {
		policy, err := proxyproto.TrustProxyHeaderFromRanges(c.ProxyFrom)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", EnvProxyProtocol, err)
		}
		ln = &proxyproto.Listener{Listener: ln, ConnPolicy: policy, ReadHeaderTimeout: headerTimeout}
	}
	if c.TLSSecret == "" {
		return ln, nil, nil
	}
	fetch := c.FetchCerts
	if fetch == nil {
		f, err := AWSFetcher(ctx, c.TLSSecret)
		if err != nil {
			return nil, nil, err
		}
		fetch = f
	}
	certs, err := LoadCerts(ctx, fetch)
	if err != nil {
		return nil, nil, err
	}
	every := c.Reload
	if every <= 0 {
		every = DefaultReload
	}
	go certs.Run(ctx, every)
	return tls.NewListener(ln, certs.TLSConfig()), certs, nil
}

// SendHeader writes the proxy protocol v2 header a Network Load Balancer
// writes first on a connection to its target: the client's address and
// the one it connected to (aws-local's stand-in, tests).
func SendHeader(w io.Writer, client, dest net.Addr) error {
	h := proxyproto.HeaderProxyFromAddrs(2, client, dest)
	_, err := h.WriteTo(w)
	return err
}

// SendLocalHeader writes the header of a health check's connection: the
// LOCAL command, no client address (the load balancer's own).
func SendLocalHeader(w io.Writer) error {
	h := &proxyproto.Header{Version: 2, Command: proxyproto.LOCAL, TransportProtocol: proxyproto.UNSPEC}
	_, err := h.WriteTo(w)
	return err
}

// SelfSigned is a certificate for hosts and its key, PEM, valid for a day
// (tests). It is its own CA, which Go and Node accept as a server's
// certificate but Firefox does not (a CA used as an end entity): a browser
// trusts TestChain's CA.
func SelfSigned(hosts ...string) ([]byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...), nil
}

// TestChain is a server certificate for hosts signed by a test CA made for
// it, valid for a week: chain is the server's certificate, the CA's and
// the server's key (PEM, what the tasks read), ca the CA's certificate
// alone, what a client trusts (a browser's trust store, Node's
// NODE_EXTRA_CA_CERTS). aws-local's test certificate behind the NLB.
func TestChain(hosts ...string) (chain, ca []byte, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial := func() *big.Int {
		n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
		return n
	}
	from, to := time.Now().Add(-time.Hour), time.Now().Add(7*24*time.Hour)
	caTpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "aws-local test CA " + serial().String()},
		NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, nil, err
	}
	tpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: hosts[0]},
		NotBefore: from, NotAfter: to, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tpl.IPAddresses = append(tpl.IPAddresses, ip)
		} else {
			tpl.DNSNames = append(tpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	chain = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	chain = append(chain, ca...)
	chain = append(chain, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})...)
	return chain, ca, nil
}
