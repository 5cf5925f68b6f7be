package transfer_test

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
)

// TestRoundTripAWSLocal (PLATFORM_TRANSFER_AWS=1, make transfer-aws): the
// round trip of TestRoundTrip, imported into the AWS build run whole on
// this machine (functions/aws-local: the Lambda functions behind the
// template's API Gateway routes, each function's role checked on every
// AWS call) instead of a second local platform.
func TestRoundTripAWSLocal(t *testing.T) {
	if os.Getenv("PLATFORM_TRANSFER_AWS") == "" {
		t.Skip("set PLATFORM_TRANSFER_AWS=1 (make transfer-aws): builds and runs the AWS build")
	}
	t.Setenv("PLATFORM_BUILTINS", "none")
	root, _ := filepath.Abs("../..")
	dir := t.TempDir()
	bin := filepath.Join(dir, "aws-local")
	if out, err := exec.Command("go", "build", "-o", bin, "../../functions/aws-local").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	data := filepath.Join(dir, "data")
	logf, _ := os.Create(filepath.Join(dir, "server.log"))
	cmd := exec.Command(bin, "--addr", addr, "--data-dir", data, "--root", root)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("aws-local log (end):\n%s", b)
		}
	})
	url := "http://" + addr
	token := ""
	deadline := time.Now().Add(10 * time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(data, "admin-token")); err == nil {
			token = strings.TrimSpace(string(b))
			req, _ := http.NewRequest("GET", url+"/v1/admin/account/me", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("aws-local not ready after 10 minutes")
		}
		time.Sleep(200 * time.Millisecond)
	}
	b := setupSide(t, &side{Env: &apitest.Env{T: t, URL: url, AdminToken: token}})
	sc := scale{rows: 10000, messages: 1000, files: 50}
	if testing.Short() {
		sc = scale{rows: 1500, messages: 150, files: 6}
	}
	roundTrip(t, newSide(t), b, sc)
}
