// Package mototest runs moto_server, a third-party AWS emulator, for tests
// that check the AWS code paths against something the project did not
// write (S3, DynamoDB and its streams, Lambda and IAM).
package mototest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"testing"
	"time"
)

// Start runs moto_server on a free loopback port until the test ends and
// returns its endpoint (http://127.0.0.1:<port>). The test is skipped,
// saying why, when moto_server is not installed: it comes from PyPI, which
// the project's own files cannot reach on every machine.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		t.Skip("moto_server is not installed (pip install 'moto[server]')")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(60 * time.Second); ; {
		if res, err := http.Get(endpoint + "/moto-api/"); err == nil {
			res.Body.Close()
			return endpoint
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto_server did not start within 60 s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
