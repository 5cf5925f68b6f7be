package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// server is the local platform binary running as a child process.
type server struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	done chan error
}

func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "local")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func start(t *testing.T, bin, dataDir string) *server {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(bin, "--addr", addr, "--data-dir", dataDir)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "platform listening") {
				once = true
				close(ready)
			}
		}
		s.done <- cmd.Wait()
	}()
	select {
	case <-ready:
	case err := <-s.done:
		t.Fatalf("server exited before listening: %v", err)
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("server did not start")
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	return s
}

func (s *server) stop(sig syscall.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if sig == syscall.SIGINT && err != nil {
			s.t.Fatalf("graceful shutdown exited with %v", err)
		}
	case <-time.After(30 * time.Second):
		s.t.Fatal("server did not stop")
	}
}

func (s *server) call(method, path, token, ws string, body any) (int, map[string]any) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if ws != "" {
		req.Header.Set("x-workspace-id", ws)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, out
}

// TestRestartAndKillKeepAcknowledgedWrites runs the real binary: what was
// acknowledged survives a graceful restart and a kill -9 right after the write.
func TestRestartAndKillKeepAcknowledgedWrites(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tokB, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	tok := string(tokB)

	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "durable"})
	if st != 200 {
		t.Fatalf("createWorkspace: %d %v", st, w)
	}
	ws := w["id"].(string)
	st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": "first"})
	if st != 200 {
		t.Fatalf("createBot: %d", st)
	}
	bot1 := b["bot"].(map[string]any)["id"].(string)

	s.stop(syscall.SIGINT)
	s = start(t, bin, dir)
	if st, _ := s.call("GET", "/v1/admin/bots/"+bot1, tok, ws, nil); st != 200 {
		t.Fatalf("bot after graceful restart: %d", st)
	}

	var bots []string
	for i := 0; i < 5; i++ {
		st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": fmt.Sprintf("k%d", i)})
		if st != 200 {
			t.Fatalf("createBot: %d", st)
		}
		bots = append(bots, b["bot"].(map[string]any)["id"].(string))
	}
	s.stop(syscall.SIGKILL)
	s = start(t, bin, dir)
	for _, id := range append(bots, bot1) {
		if st, _ := s.call("GET", "/v1/admin/bots/"+id, tok, ws, nil); st != 200 {
			t.Fatalf("bot %s after kill -9: %d", id, st)
		}
	}
	st, l := s.call("GET", "/v1/admin/bots", tok, ws, nil)
	if st != 200 || len(l["bots"].([]any)) != 6 {
		t.Fatalf("listBots after kill -9: %d %v", st, l)
	}
	st, wsr := s.call("GET", "/v1/admin/workspaces/"+ws, tok, "", nil)
	if st != 200 || wsr["botCount"] != float64(6) {
		t.Fatalf("workspace after kill -9: %d %v", st, wsr)
	}
	// The first account's token was created once: no new token file on restarts.
	if b, _ := os.ReadFile(filepath.Join(dir, "admin-token")); string(b) != tok {
		t.Fatal("admin token changed across restarts")
	}
}

// TestListensOnLoopbackByDefault: without --addr (and with `make run`) the
// platform listens on 127.0.0.1 only, never on every interface; ADDR and
// --addr choose another address.
func TestListensOnLoopbackByDefault(t *testing.T) {
	bin := buildBinary(t)
	out, _ := exec.Command(bin, "serve", "-h").CombinedOutput()
	m := regexp.MustCompile(`(?m)-addr string\n.*\(default "([^"]*)"\)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no default for --addr in the usage:\n%s", out)
	}
	host, _, err := net.SplitHostPort(string(m[1]))
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Fatalf("default --addr is %q: not a loopback address", m[1])
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "--addr " + string(m[1])},
		{[]string{"ADDR=:9999"}, "--addr :9999"},
	} {
		cmd := exec.Command("make", append([]string{"-s", "-n", "-C", "../..", "run"}, c.args...)...)
		for _, kv := range os.Environ() { // an exported ADDR would hide the Makefile's default
			if !strings.HasPrefix(kv, "ADDR=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		got, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(got), c.want) {
			t.Errorf("make -n run %v: %v\n%s\nwant %q", c.args, err, got, c.want)
		}
	}
}

// TestUnknownArgumentIsAnError: a word the binary does not know exits with a
// usage error and never starts a server.
func TestUnknownArgumentIsAnError(t *testing.T) {
	bin := buildBinary(t)
	for _, args := range [][]string{{"bogus"}, {"serve", "extra"}, {"--addr", freeAddr(t), "extra"}} {
		cmd := exec.Command(bin, append(args, "--data-dir", t.TempDir())...)
		out, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 {
			t.Errorf("%q: %v, want exit 2\n%s", args, err, out)
		}
		if strings.Contains(string(out), "platform listening") {
			t.Errorf("%q started a server:\n%s", args, out)
		}
	}
}
