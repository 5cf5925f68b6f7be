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

// serialApp is scripts/conformance/moto_serial.py: moto's application
// serving one request at a time. moto_server's threads are not safe for
// concurrent DynamoDB transactions (docs/embedded-dynamodb.md, "Against
// moto"); a whole platform over moto runs background work concurrently.
const serialApp = `
import sys
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple
run_simple("127.0.0.1", int(sys.argv[1]), DomainDispatcherApplication(create_backend_app), threaded=False, use_reloader=False)
`

// StartSerial is Start with moto serving one request at a time (python3
// with moto installed); skipped, saying why, when moto is not installed.
func StartSerial(t testing.TB) string {
	t.Helper()
	if err := exec.Command("python3", "-c", "import moto.moto_server.werkzeug_app").Run(); err != nil {
		t.Skip("moto is not installed for python3 (pip install 'moto[server]')")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("python3", "-c", serialApp, fmt.Sprint(port))
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
			t.Fatalf("moto did not start within 60 s:\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
