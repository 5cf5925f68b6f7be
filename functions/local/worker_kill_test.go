package main_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workerPids lists the processes running a bundle under dataDir's workers/.
func workerPids(t *testing.T, dataDir string) []string {
	t.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []string
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.Contains(string(b), filepath.Join(dataDir, "workers")+"/") {
			if st, err := os.ReadFile(filepath.Join(d, "stat")); err == nil && strings.Contains(string(st), ") Z ") {
				continue // a zombie is dead
			}
			out = append(out, filepath.Base(d))
		}
	}
	return out
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// TestWorkersDieWithThePlatform: the real binary runs a deployed bot's code
// in a Node.js worker; killed with SIGKILL, it leaves no worker behind;
// restarted, it runs the bot's code again for the next event.
func TestWorkersDieWithThePlatform(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	s := start(t, bin, dir)
	tok := adminToken(t, dir)
	st, w := s.call("POST", "/v1/admin/workspaces", tok, "", map[string]any{"name": "workers"})
	if st != 200 {
		t.Fatalf("createWorkspace: %d %v", st, w)
	}
	ws := w["id"].(string)
	code := `module.exports = { default: { start(port) { require('http').createServer((req, res) => res.end('{}')).listen(port, '127.0.0.1') } } }`
	st, b := s.call("POST", "/v1/admin/bots", tok, ws, map[string]any{"name": "coded", "code": code})
	if st != 200 {
		t.Fatalf("createBot: %d %v", st, b)
	}
	bot := map[string]string{"x-bot-id": b["bot"].(map[string]any)["id"].(string)}
	processed := func(url string) {
		t.Helper()
		st, e := try(url, "POST", "/v1/chat/events", tok, bot, map[string]any{"type": "ping", "payload": map[string]any{}})
		if st != 201 {
			t.Fatalf("createEvent: %d %v", st, e)
		}
		id := e["event"].(map[string]any)["id"].(string)
		waitFor(t, "the event is processed", 30*time.Second, func() bool {
			_, g := try(url, "GET", "/v1/chat/events/"+id, tok, bot, nil)
			ev, _ := g["event"].(map[string]any)
			return ev != nil && ev["status"] == "processed"
		})
	}
	processed(s.url)
	if len(workerPids(t, dir)) != 1 {
		t.Fatalf("workers running: %v", workerPids(t, dir))
	}

	s.stop(syscall.SIGKILL)
	waitFor(t, "the worker dies with the platform", 10*time.Second, func() bool { return len(workerPids(t, dir)) == 0 })

	s = start(t, bin, dir)
	processed(s.url)
	s.stop(syscall.SIGINT)
	waitFor(t, "a graceful stop stops the worker", 10*time.Second, func() bool { return len(workerPids(t, dir)) == 0 })
}
