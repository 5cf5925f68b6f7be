// Command chatbench measures the built-in chat integration's streams on
// the real local binary (docs/chat-api.md): it builds and starts
// functions/local on a loopback port with a fresh data directory, installs
// the hub's chat integration (personal mode: this program signs its users'
// keys) on a bot, puts -users users in one conversation, opens -listeners
// listenConversation streams (at most 5 per user, the per-key limit), then
// measures
//
//   - the server's memory per listener (RSS with the streams open minus
//     RSS before, divided by the listeners);
//
//   - fan-out: -messages messages posted by one user, the time from the
//     POST to each listener's receipt of the message_created signal, p50
//     and p99 over all receipts, and the p99 of each message's last one;
//
//   - idle CPU: the server's CPU time over -idle seconds with every stream
//     open and quiet (keep-alive comments every 3 s, pings every 30 s).
//
//     go run ./scripts/chatbench -listeners 1000
package main

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

var (
	listeners = flag.Int("listeners", 1000, "streams to open")
	messages  = flag.Int("messages", 20, "messages fanned out")
	idle      = flag.Duration("idle", 30*time.Second, "how long to measure idle CPU")
	keep      = flag.Bool("keep", false, "keep the data directory")
)

const perUser = 5 // chatapi.MaxListeners
const secret = "chatbench-key"

type platform struct {
	bin, dir, url, token string
	cmd                  *exec.Cmd
}

func main() {
	flag.Parse()
	root, err := os.Getwd()
	check(err)
	work, err := os.MkdirTemp("", "chatbench")
	check(err)
	if !*keep {
		defer os.RemoveAll(work)
	}
	p := &platform{bin: filepath.Join(work, "platform"), dir: filepath.Join(work, "data")}
	build := exec.Command("go", "build", "-o", p.bin, "./functions/local")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	check(build.Run())
	p.start()
	defer p.stop()
	tok, err := os.ReadFile(filepath.Join(p.dir, "admin-token"))
	check(err)
	p.token = strings.TrimSpace(string(tok))

	// A bot with the chat integration in personal mode.
	ws := p.api("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "bench"})["id"].(string)
	wsh := map[string]string{"x-workspace-id": ws}
	bot := p.api("POST", "/v1/admin/bots", wsh, map[string]any{"name": "bench"})["bot"].(map[string]any)["id"].(string)
	chatID := p.api("GET", "/v1/admin/hub/integrations/chat/latest", nil, nil)["integration"].(map[string]any)["id"].(string)
	p.api("PUT", "/v1/admin/bots/"+bot, wsh, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true, "configuration": map[string]any{"encryptionKey": secret}}}})
	webhook := p.api("GET", "/v1/admin/bots/"+bot, wsh, nil)["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)["webhookUrl"].(string)

	users := (*listeners + perUser - 1) / perUser
	keys := make([]string, users)
	for i := range keys {
		keys[i] = sign(fmt.Sprintf("user-%d", i))
		chatCall(webhook, "POST", "/users/get-or-create", keys[i], map[string]any{})
	}
	conv := chatCall(webhook, "POST", "/conversations", keys[0], map[string]any{})["conversation"].(map[string]any)["id"].(string)
	for i := 1; i < users; i++ {
		chatCall(webhook, "POST", "/conversations/"+conv+"/participants", keys[0], map[string]any{"userId": fmt.Sprintf("user-%d", i)})
	}
	rssBefore, _ := p.memory()
	heapBefore := p.lastGC()

	// The streams.
	type receipt struct {
		msg int
		at  time.Time
	}
	got := make(chan receipt, *listeners**messages)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: true}}
	var opened sync.WaitGroup
	for i := 0; i < *listeners; i++ {
		opened.Add(1)
		go func(key string) {
			var res *http.Response
			for {
				req, _ := http.NewRequest("GET", webhook+"/conversations/"+conv+"/listen", nil)
				req.Header.Set("x-user-key", key)
				var err error
				res, err = client.Do(req)
				check(err)
				if res.StatusCode != 429 { // the key's rate: wait it out
					break
				}
				res.Body.Close()
				time.Sleep(100 * time.Millisecond)
			}
			if res.StatusCode != 200 {
				b, _ := io.ReadAll(res.Body)
				panic(fmt.Sprintf("listen: %d %s", res.StatusCode, b))
			}
			sc := bufio.NewScanner(res.Body)
			first := true
			for sc.Scan() {
				line := sc.Text()
				if first && line == ": connected" {
					first = false
					opened.Done()
					continue
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "ping" {
					continue
				}
				var sig struct {
					Data struct {
						Payload struct{ Text string }
					}
				}
				if json.Unmarshal([]byte(data), &sig) == nil {
					if n, err := strconv.Atoi(strings.TrimPrefix(sig.Data.Payload.Text, "fan-")); err == nil {
						got <- receipt{n, time.Now()}
					}
				}
			}
		}(keys[i/perUser])
	}
	opened.Wait()
	time.Sleep(2 * time.Second) // let the server's memory settle before reading it
	rssAfter, _ := p.memory()

	// Fan-out.
	var all, last []float64
	for m := 0; m < *messages; m++ {
		t0 := time.Now()
		chatCall(webhook, "POST", "/messages", keys[0], map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": fmt.Sprintf("fan-%d", m)}})
		var worst float64
		for n := 0; n < *listeners; n++ {
			select {
			case r := <-got:
				if r.msg != m {
					panic(fmt.Sprintf("message %d arrived while waiting for %d", r.msg, m))
				}
				d := ms(r.at.Sub(t0))
				all = append(all, d)
				worst = max(worst, d)
			case <-time.After(30 * time.Second):
				panic(fmt.Sprintf("message %d: %d of %d listeners got it", m, n, *listeners))
			}
		}
		last = append(last, worst)
	}

	// Idle CPU.
	cpu0 := p.cpu()
	time.Sleep(*idle)
	cpu1 := p.cpu()
	rssIdle, _ := p.memory()
	heapIdle := p.lastGC()

	slices.Sort(all)
	slices.Sort(last)
	fmt.Printf("listeners %d (%d users, one conversation)\n", *listeners, users)
	fmt.Printf("server RSS %d MiB before the streams, %d MiB with them: %.1f KiB per listener\n", rssBefore>>10, rssAfter>>10, float64(rssAfter-rssBefore)/float64(*listeners))
	fmt.Printf("fan-out over %d messages: p50 %.1f ms, p99 %.1f ms per receipt; last receipt of a message p50 %.1f ms, p99 %.1f ms\n",
		*messages, q(all, 0.5), q(all, 0.99), q(last, 0.5), q(last, 0.99))
	fmt.Printf("idle CPU with %d streams open: %.2f%% of one core over %v\n", *listeners, 100*float64(cpu1-cpu0)/float64(*idle), *idle)
	// Go collects (and shrinks the streams' stacks, grown by the calls
	// that opened them) at least every 2 minutes: -idle 150s shows it.
	fmt.Printf("server RSS after the idle time: %d MiB: %.1f KiB per listener\n", rssIdle>>10, float64(rssIdle-rssBefore)/float64(*listeners))
	fmt.Printf("server's last collection before the streams: %s\nand after the idle time: %s\n", heapBefore, heapIdle)
}

func q(xs []float64, p float64) float64 { return xs[min(len(xs)-1, int(p*float64(len(xs))))] }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func sign(id string) string {
	msg := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"id":"`+id+`"}`))
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(msg))
	return msg + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// chatCall calls the Chat API, waiting out a 429 (the per-key rate).
func chatCall(base, method, path, key string, body any) map[string]any {
	for {
		b, _ := json.Marshal(body)
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-user-key", key)
		res, err := http.DefaultClient.Do(req)
		check(err)
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == 429 {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if res.StatusCode >= 300 {
			panic(fmt.Sprintf("%s %s: %d %s", method, path, res.StatusCode, raw))
		}
		var out map[string]any
		_ = json.Unmarshal(raw, &out)
		return out
	}
}

func (p *platform) api(method, path string, hdr map[string]string, body any) map[string]any {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, p.url+path, rd)
	req.Header.Set("Authorization", "Bearer "+p.token)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	check(err)
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		panic(fmt.Sprintf("%s %s: %d %s", method, path, res.StatusCode, raw))
	}
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return out
}

func (p *platform) start() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := l.Addr().String()
	l.Close()
	p.url = "http://" + addr
	p.cmd = exec.Command(p.bin, "--addr", addr, "--data-dir", p.dir)
	// Each collection logs the live heap and the goroutines' stacks.
	p.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1")
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(p.dir), "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	check(err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// The server dies with this program, even when a panic ends it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	begin := time.Now()
	check(p.cmd.Start())
	for {
		if _, err := os.Stat(filepath.Join(p.dir, "admin-token")); err == nil {
			if res, err := http.Get(p.url + "/v1/admin/account/me"); err == nil {
				res.Body.Close()
				return
			}
		}
		if time.Since(begin) > 2*time.Minute {
			panic("the platform did not answer within 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (p *platform) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGINT)
		_ = p.cmd.Wait()
	}
}

// memory returns the server's resident and peak resident set in KiB.
func (p *platform) memory() (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = n
		case "VmHWM:":
			hwm = n
		}
	}
	return rss, hwm
}

// lastGC is the server's last gctrace line (live heap, stacks).
func (p *platform) lastGC() string {
	b, _ := os.ReadFile(filepath.Join(filepath.Dir(p.dir), "server.log"))
	last := ""
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "gc ") {
			last = line
		}
	}
	return last
}

// cpu is the server's user+system CPU time.
func (p *platform) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // clock ticks (USER_HZ 100)
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
