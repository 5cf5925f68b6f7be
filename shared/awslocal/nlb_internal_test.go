package awslocal

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"

	"github.com/botforge/platform/shared/iampolicy"
	"github.com/botforge/platform/shared/streamedge"
)

// TestNLBTemplate: StreamLoadBalancerType selects what the task is told
// and may read. Behind the NLB the proxy header is required from the
// VPC's ranges, X-Forwarded-For is believed only behind TrustedProxies
// (none by default), the certificate is StreamTlsSecretArn's and the task
// role may read that one secret (or parameter) only; behind the ALB none
// of it, and the ALB's private ranges are trusted proxies.
func TestNLBTemplate(t *testing.T) {
	const secret = "arn:aws:secretsmanager:us-east-1:123456789012:secret:tls-AbCdEf"
	for _, lb := range []string{"alb", "nlb"} {
		tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00", "StreamTier": "container",
			"StreamLoadBalancerType": lb, "StreamTlsSecretArn": secret}, "")
		if err != nil {
			t.Fatal(err)
		}
		env, err := tpl.taskEnvironment("StreamTaskDefinition")
		if err != nil {
			t.Fatal(err)
		}
		nlb := lb == "nlb"
		if (env["PLATFORM_PROXY_PROTOCOL"] == "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16") != nlb ||
			(env["PLATFORM_STREAM_TLS_SECRET"] == secret) != nlb ||
			(env["PLATFORM_TRUSTED_PROXIES"] == "") != nlb {
			t.Errorf("%s: task environment proxy %q, TLS %q, trusted %q", lb, env["PLATFORM_PROXY_PROTOCOL"], env["PLATFORM_STREAM_TLS_SECRET"], env["PLATFORM_TRUSTED_PROXIES"])
		}
		policy, err := tpl.rolePolicy("StreamTaskRole")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			action, resource string
			allow            bool
		}{
			{"secretsmanager:GetSecretValue", secret, nlb},
			{"secretsmanager:GetSecretValue", "arn:aws:secretsmanager:us-east-1:123456789012:secret:other-AbCdEf", false},
			{"secretsmanager:PutSecretValue", secret, false},
			{"ssm:GetParameter", "arn:aws:ssm:us-east-1:123456789012:parameter/other", false},
		} {
			if d, _ := iampolicy.Evaluate(policy, iampolicy.Request{Action: c.action, Resource: c.resource}); (d == iampolicy.Allow) != c.allow {
				t.Errorf("%s: %s on %s: %v, want allowed %v", lb, c.action, c.resource, d, c.allow)
			}
		}
		for id, want := range map[string]bool{"StreamTlsPassListener": nlb, "StreamHttpsListener": false, "StreamHttpListener": !nlb, "StreamTcpListener": false} {
			if got := tpl.typeOf(id) != ""; got != want {
				t.Errorf("%s: %s exists %v, want %v", lb, id, got, want)
			}
		}
	}
}

// TestStreamTLSChain: the test certificate behind the NLB is a server
// certificate (not a CA: Firefox refuses a CA as a server's certificate)
// verified for 127.0.0.1 by the CA in stream-ca.pem alone; it is kept
// across starts, and an older self-signed one is made again.
func TestStreamTLSChain(t *testing.T) {
	dir := t.TempDir()
	old, err := streamedge.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, StreamTLSFile), old, 0o600); err != nil {
		t.Fatal(err)
	}
	v, err := streamTLS(dir)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(v, old) {
		t.Fatal("the self-signed certificate was kept")
	}
	ca, err := os.ReadFile(filepath.Join(dir, StreamCAFile))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatal("stream-ca.pem does not parse")
	}
	c, err := tls.X509KeyPair(v, v)
	if err != nil {
		t.Fatal(err)
	}
	if c.Leaf.IsCA {
		t.Fatal("the server's certificate is a CA")
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: "127.0.0.1", Roots: pool}); err != nil {
		t.Fatalf("stream-ca.pem does not verify the server's certificate: %v", err)
	}
	again, err := streamTLS(dir)
	if err != nil || !bytes.Equal(again, v) {
		t.Fatalf("a second start made another certificate (%v)", err)
	}
}
