// Command loadtest measures the local platform's API as its embedded
// DynamoDB grows: one bot fills a table with N rows (other tenants' data),
// then another bot's everyday calls are timed, the server is killed with
// SIGKILL and restarted, and the time to its first answer and its memory
// are measured.
//
//	go run ./scripts/loadtest -items 100000
//	go run ./scripts/loadtest -items 1000000   # about 1 GB of data, several minutes
//
// It builds and starts the real binary (functions/local) on a loopback port
// with a fresh data directory, and prints one Markdown table row per
// operation (p50 and p99 over -n calls, one client).
package main

import (
	"bytes"
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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	items   = flag.Int("items", 100000, "rows the filler bot writes (other tenants' data)")
	calls   = flag.Int("n", 200, "timed calls per operation")
	workers = flag.Int("workers", 4, "parallel writers while filling")
	keep    = flag.Bool("keep", false, "keep the data directory")
)

type platform struct {
	bin, dir, url, token string
	cmd                  *exec.Cmd
}

func main() {
	flag.Parse()
	root, err := os.Getwd()
	check(err)
	work, err := os.MkdirTemp("", "loadtest")
	check(err)
	if !*keep {
		defer os.RemoveAll(work)
	} else {
		fmt.Fprintln(os.Stderr, "data in", work)
	}
	p := &platform{bin: filepath.Join(work, "platform"), dir: filepath.Join(work, "data")}
	build := exec.Command("go", "build", "-o", p.bin, "./functions/local")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	check(build.Run())
	p.start()
	defer p.stop(syscall.SIGKILL)
	tok, err := os.ReadFile(filepath.Join(p.dir, "admin-token"))
	check(err)
	p.token = strings.TrimSpace(string(tok))

	ws := p.call("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "load"})["id"].(string)
	wsh := map[string]string{"x-workspace-id": ws}
	filler := p.call("POST", "/v1/admin/bots", wsh, map[string]any{"name": "filler"})["bot"].(map[string]any)["id"].(string)
	probe := p.call("POST", "/v1/admin/bots", wsh, map[string]any{"name": "probe", "states": map[string]any{
		"counter": map[string]any{"type": "conversation", "schema": map[string]any{"type": "object"}},
	}})["bot"].(map[string]any)["id"].(string)

	// Other tenants' data: N rows in the filler bot's table.
	fh := map[string]string{"x-bot-id": filler}
	schema := map[string]any{"type": "object", "properties": map[string]any{"title": map[string]any{"type": "string"}, "n": map[string]any{"type": "number"}}}
	p.call("POST", "/v1/tables", fh, map[string]any{"name": "fillTable", "schema": schema})
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range *workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(1000)) - 1000
				if from >= *items {
					return
				}
				rows := make([]map[string]any, 0, 1000)
				for i := from; i < min(from+1000, *items); i++ {
					rows = append(rows, map[string]any{"title": fmt.Sprintf("row %d %s", i, strings.Repeat("x", 700)), "n": i})
				}
				p.call("POST", "/v1/tables/fillTable/rows", fh, map[string]any{"rows": rows})
			}
		}()
	}
	wg.Wait()
	fill := time.Since(start)

	// The probe bot's everyday calls.
	bh := map[string]string{"x-bot-id": probe}
	user := p.call("POST", "/v1/chat/users", bh, map[string]any{"tags": map[string]string{}})["user"].(map[string]any)["id"].(string)
	small := p.call("POST", "/v1/chat/conversations", bh, map[string]any{"channel": "web", "tags": map[string]string{}})["conversation"].(map[string]any)["id"].(string)
	for i := range 20 {
		p.call("POST", "/v1/chat/messages", bh, map[string]any{"conversationId": small, "userId": user, "type": "text", "payload": map[string]any{"text": fmt.Sprint("m", i)}, "tags": map[string]string{}})
	}
	p.call("POST", "/v1/tables", bh, map[string]any{"name": "smallTable", "schema": schema})
	var rows []map[string]any
	for i := range 100 {
		rows = append(rows, map[string]any{"title": fmt.Sprint("t", i%10), "n": i})
	}
	p.call("POST", "/v1/tables/smallTable/rows", bh, map[string]any{"rows": rows})

	type result struct {
		op       string
		p50, p99 time.Duration
	}
	var results []result
	timed := func(op string, f func(i int)) {
		d := make([]time.Duration, 0, *calls)
		for i := range *calls {
			t := time.Now()
			f(i)
			d = append(d, time.Since(t))
		}
		slices.Sort(d)
		results = append(results, result{op, d[len(d)/2], d[len(d)*99/100]})
	}
	timed("createConversation", func(int) {
		p.call("POST", "/v1/chat/conversations", bh, map[string]any{"channel": "web", "tags": map[string]string{}})
	})
	busy := p.call("POST", "/v1/chat/conversations", bh, map[string]any{"channel": "web", "tags": map[string]string{}})["conversation"].(map[string]any)["id"].(string)
	timed("createMessage", func(i int) {
		p.call("POST", "/v1/chat/messages", bh, map[string]any{"conversationId": busy, "userId": user, "type": "text", "payload": map[string]any{"text": fmt.Sprint("m", i)}, "tags": map[string]string{}})
	})
	p.call("POST", "/v1/chat/states/conversation/"+busy+"/counter", bh, map[string]any{"payload": map[string]any{}})
	timed("patchState", func(i int) {
		p.call("PATCH", "/v1/chat/states/conversation/"+busy+"/counter", bh, map[string]any{"payload": map[string]any{fmt.Sprint("k", i%50): i}})
	})
	timed("listMessages (20)", func(int) {
		p.call("GET", "/v1/chat/messages?conversationId="+small, bh, nil)
	})
	timed("findTableRows (filter)", func(i int) {
		p.call("POST", "/v1/tables/smallTable/rows/find", bh, map[string]any{"filter": map[string]any{"title": fmt.Sprint("t", i%10)}, "limit": 20})
	})
	// Throughput of createMessage with 1 and 8 clients, each in its own
	// conversation (durable writes; group commit shares the fsyncs).
	throughput := map[int]float64{}
	for _, clients := range []int{1, 8} {
		convs := make([]string, clients)
		for c := range convs {
			convs[c] = p.call("POST", "/v1/chat/conversations", bh, map[string]any{"channel": "web", "tags": map[string]string{}})["conversation"].(map[string]any)["id"].(string)
		}
		per := *calls * 2 / clients
		var wg sync.WaitGroup
		t0 := time.Now()
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range per {
					p.call("POST", "/v1/chat/messages", bh, map[string]any{"conversationId": convs[c], "userId": user, "type": "text", "payload": map[string]any{"text": fmt.Sprint("m", i)}, "tags": map[string]string{}})
				}
			}()
		}
		wg.Wait()
		throughput[clients] = float64(per*clients) / time.Since(t0).Seconds()
	}
	rss, hwm := p.memory()

	// kill -9, restart, first answer.
	p.stop(syscall.SIGKILL)
	restart := p.start()
	rss2, _ := p.memory()

	du := dirSize(p.dir)
	fmt.Printf("\nitems=%d (filled in %v, %.0f rows/s); data dir %.1f MiB\n\n", *items, fill.Round(time.Millisecond), float64(*items)/fill.Seconds(), float64(du)/(1<<20))
	fmt.Println("| operation | p50 | p99 |")
	fmt.Println("|---|---|---|")
	for _, r := range results {
		fmt.Printf("| %s | %.2f ms | %.2f ms |\n", r.op, ms(r.p50), ms(r.p99))
	}
	fmt.Printf("\ncreateMessage throughput: 1 client %.0f/s, 8 clients %.0f/s (%.1fx)\n", throughput[1], throughput[8], throughput[8]/throughput[1])
	fmt.Printf("\nRSS after the calls %d MiB (peak %d MiB); restart after kill -9: first answer in %v, RSS %d MiB\n",
		rss>>10, hwm>>10, restart.Round(time.Millisecond), rss2>>10)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// start runs the binary and returns the time until it answers.
func (p *platform) start() time.Duration {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := l.Addr().String()
	l.Close()
	p.url = "http://" + addr
	p.cmd = exec.Command(p.bin, "--addr", addr, "--data-dir", p.dir)
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(p.dir), "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	check(err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	begin := time.Now()
	check(p.cmd.Start())
	for {
		res, err := http.Get(p.url + "/v1/admin/account/me")
		if err == nil {
			res.Body.Close()
			return time.Since(begin)
		}
		if time.Since(begin) > 5*time.Minute {
			panic("the platform did not answer within 5 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *platform) stop(sig syscall.Signal) {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Wait()
	p.cmd = nil
}

// memory returns the server's resident and peak resident set in KiB.
func (p *platform) memory() (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		var v int64
		if _, err := fmt.Sscanf(line, "VmRSS: %d kB", &v); err == nil {
			rss = v
		}
		if _, err := fmt.Sscanf(line, "VmHWM: %d kB", &v); err == nil {
			hwm = v
		}
	}
	return rss, hwm
}

// call sends one request and fails on anything but a 2xx.
func (p *platform) call(method, path string, headers map[string]string, body any) map[string]any {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		check(err)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.url+path, r)
	check(err)
	req.Header.Set("Authorization", "Bearer "+p.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
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

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func check(err error) {
	if err != nil {
		panic(err)
	}
}
