package awslocal_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/streamedge"
)

// TestStreamTierBehindNLB: the container tier behind the Network Load
// Balancer's stand-in (StreamLoadBalancerType nlb). ChatStreamUrl is
// https: the tasks end TLS with the test certificate they read from the
// stack's Secrets Manager under StreamTaskRole (the call recorded and
// allowed); the client's address is the proxy header's, so POST /users
// each claiming another address in X-Forwarded-For is limited as from one
// address (a connection without the header is refused:
// streamedge's TestProxyProtocolAndTLS); a stream opened through the load balancer gets its message's signal.
func TestStreamTierBehindNLB(t *testing.T) {
	s := startStackWith(t, awslocal.Options{StreamTier: "container", StreamLoadBalancer: "nlb", StreamTasks: 2})
	u := s.Template.Outputs()["ChatStreamUrl"]
	if !strings.HasPrefix(u, "https://127.0.0.1:") || len(s.StreamCertificate) == 0 {
		t.Fatalf("ChatStreamUrl %q, certificate %d bytes", u, len(s.StreamCertificate))
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.StreamCertificate) {
		t.Fatal("the test certificate does not parse")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}, Timeout: 60 * time.Second}
	// Without the test certificate trusted, the handshake fails: the tasks
	// serve that certificate.
	if _, err := http.Get(u + "healthz"); err == nil {
		t.Fatal("an unverified client reached the tasks")
	}
	if res, err := client.Get(u + "healthz"); err != nil || res.StatusCode != 200 {
		t.Fatalf("health through the load balancer: %v %v", res, err)
	}
	read := 0
	for _, c := range s.Calls.Calls() {
		if c.Function == "StreamService" && c.Action == "secretsmanager:GetSecretValue" {
			if !c.Allowed || c.Resource != awslocal.StreamTLSSecretARN {
				t.Fatalf("the certificate's read: %+v", c)
			}
			read++
		}
	}
	if read < 2 {
		t.Fatalf("%d certificate reads recorded, want one per task", read)
	}

	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "nlb"}, 200)["id"].(string)
	wsHdr := map[string]string{"x-workspace-id": ws}
	bot := s.call(t, "POST", "/v1/admin/bots", wsHdr, map[string]any{"name": "nlb"}, 200)["bot"].(map[string]any)["id"].(string)
	chatID := s.call(t, "GET", "/v1/admin/hub/integrations/chat/latest", nil, nil, 200)["integration"].(map[string]any)["id"].(string)
	s.call(t, "PUT", "/v1/admin/bots/"+bot, wsHdr, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true,
		"configuration": map[string]any{"limits": map[string]any{"usersPerAddress": 5}}}}}, 200)
	inst := s.call(t, "GET", "/v1/admin/bots/"+bot, wsHdr, nil, 200)["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)
	hook := inst["webhookUrl"].(string)
	streamHook := u + "webhooks/" + hook[strings.LastIndex(hook, "/")+1:]
	chat := func(method, path, key, xff string, body any) (int, map[string]any) {
		t.Helper()
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, streamHook+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if key != "" {
			req.Header.Set("x-user-key", key)
		}
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return res.StatusCode, out
	}
	created, limited := 0, 0
	var key string
	for i := 0; i < 12; i++ {
		code, out := chat("POST", "/users", "", fmt.Sprintf("198.51.100.%d", i+1), map[string]any{})
		switch code {
		case 201:
			created++
			key, _ = out["key"].(string)
		case 429:
			limited++
			if !strings.Contains(fmt.Sprint(out["message"]), "at most 5 every") {
				t.Fatalf("the 429's message: %v", out)
			}
		default:
			t.Fatalf("POST /users: %d %v", code, out)
		}
	}
	if created != 5 || limited != 7 {
		t.Fatalf("12 users each claiming another address: %d created, %d limited; want 5 and 7 (one address: the proxy header's)", created, limited)
	}

	// A listen through the load balancer, over HTTP/2 negotiated with the
	// task, gets a message's signal.
	code, out := chat("POST", "/conversations", key, "", map[string]any{})
	if code != 201 {
		t.Fatalf("conversation: %d %v", code, out)
	}
	conv := out["conversation"].(map[string]any)["id"].(string)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", streamHook+"/conversations/"+conv+"/listen", nil)
	req.Header.Set("x-user-key", key)
	lres, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer lres.Body.Close()
	if lres.StatusCode != 200 || lres.ProtoMajor != 2 {
		t.Fatalf("listen: %d %s (want 200 over HTTP/2)", lres.StatusCode, lres.Proto)
	}
	events := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(lres.Body)
		for sc.Scan() {
			events <- sc.Text()
		}
		close(events)
	}()
	code, out = chat("POST", "/messages", key, "", map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "hi"}})
	if code != 201 {
		t.Fatalf("message: %d %v", code, out)
	}
	msg := out["message"].(map[string]any)["id"].(string)
	seen := false
	for l := range events {
		if strings.Contains(l, msg) {
			seen = true
			break
		}
	}
	if !seen {
		t.Fatal("the message's signal did not reach the stream")
	}
}

// TestStreamTierCertificateFromSSM: StreamTlsSecretArn naming an SSM
// SecureString parameter (the operator's, put before the deploy) instead
// of a Secrets Manager secret: the task reads the certificate with
// ssm:GetParameter on that parameter's ARN (allowed by StreamTaskRole,
// recorded), reads nothing from Secrets Manager, and serves that
// certificate through the load balancer's stand-in.
func TestStreamTierCertificateFromSSM(t *testing.T) {
	cert, err := streamedge.SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	name := "/" + awslocal.StackName + "/stream-tls"
	param := "arn:aws:ssm:" + awslocal.Region + ":" + awslocal.Account + ":parameter" + name
	s := startStackWith(t, awslocal.Options{StreamTier: "container", StreamLoadBalancer: "nlb", StreamTasks: 1,
		Parameters: map[string]string{"StreamTlsSecretArn": param}, SecureStrings: map[string]string{name: string(cert)}})
	u := s.Template.Outputs()["ChatStreamUrl"]
	if !strings.HasPrefix(u, "https://127.0.0.1:") {
		t.Fatalf("ChatStreamUrl %q", u)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cert) {
		t.Fatal("the certificate does not parse")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 60 * time.Second}
	res, err := client.Get(u + "healthz")
	if err != nil {
		t.Fatalf("health through the load balancer with the parameter's certificate trusted: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("health: %d", res.StatusCode)
	}
	reads := 0
	for _, c := range s.Calls.Calls() {
		if c.Function != "StreamService" {
			continue
		}
		switch c.Action {
		case "ssm:GetParameter":
			if !c.Allowed || c.Resource != param {
				t.Fatalf("the certificate's read: %+v", c)
			}
			reads++
		case "secretsmanager:GetSecretValue":
			t.Fatalf("the task read Secrets Manager: %+v", c)
		}
	}
	if reads == 0 {
		t.Fatal("no ssm:GetParameter of the certificate recorded")
	}
}
