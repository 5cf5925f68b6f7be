// Command streambench measures the container stream tier
// (functions/chatstream-service, docs/deploy.md "Stream tiers"): how many
// idle listeners one process holds, at what memory and CPU.
//
// It runs, on loopback:
//
//   - the embedded DynamoDB (shared/localdynamo) in this process, its
//     inserted signals handed to the fan-out (shared/chatrelay.Fanout) as
//     the table's stream would;
//   - the local platform (functions/local) over that DynamoDB, only to set
//     up a bot with the hub's chat integration (personal mode: this
//     program signs its users' keys), then stopped;
//   - one stream service process over the same table, which then gets
//     every Chat API call: -listeners / -per-user users, each with a
//     conversation of its own, each opening -per-user listen streams.
//
// It reports the service's RSS before and with the streams, its CPU over
// -idle with every stream open and quiet (keep-alive comments every 3 s,
// pings every 30 s), and the latency of -messages messages, each posted
// to one user's conversation, to that user's streams (through the table,
// the fan-out and the process's one inbox).
//
// With -tls the service runs as behind the NLB (StreamLoadBalancerType
// nlb): it ends TLS itself with a test certificate (shared/streamedge's
// TestChain, ECDSA P-256) read from a Secrets Manager stand-in in this
// process, and requires the proxy protocol v2 header, which every client
// connection of the bench writes first, as the NLB does; each stream is a
// TLS connection of its own (HTTP/1.1, no connection shared).
//
// The file-descriptor limit: each side holds one descriptor per stream;
// Go raises its soft limit to the hard one at start, so a hard limit
// above -listeners + 1,000 suffices (scripts/streambench/run.sh checks).
//
//	bash scripts/streambench/run.sh -listeners 10000
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/localdynamo"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/streamedge"
)

var (
	listeners = flag.Int("listeners", 10000, "streams to open")
	perUser   = flag.Int("per-user", 5, "streams per user (at most 5, the per-key limit)")
	messages  = flag.Int("messages", 50, "messages whose latency to the streams is measured")
	idle      = flag.Duration("idle", 30*time.Second, "how long to measure idle CPU")
	poll      = flag.Duration("poll", 25*time.Millisecond, "the service's inbox poll while signals flow (PLATFORM_STREAM_POLL)")
	pollIdle  = flag.Duration("poll-idle", 250*time.Millisecond, "the service's inbox poll while idle (PLATFORM_STREAM_POLL_IDLE)")
	keep      = flag.Bool("keep", false, "keep the work directory")
	useTLS    = flag.Bool("tls", false, "as behind the NLB: the service ends TLS (a test certificate from a Secrets Manager stand-in) and requires the proxy protocol v2 header, which every connection sends")
)

// svcClient makes the service's connections: plain, or with -tls the
// proxy header then TLS trusting the test CA. keepAlive false: a
// connection per request (the streams).
var svcClient = func(keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: !keepAlive}}
}

const secret = "streambench-key"

func main() {
	flag.Parse()
	root, err := os.Getwd()
	check(err)
	work, err := os.MkdirTemp("", "streambench")
	check(err)
	if !*keep {
		defer os.RemoveAll(work)
	}
	var lim syscall.Rlimit
	check(syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur < uint64(*listeners+1000) {
		panic(fmt.Sprintf("file descriptors: limit %d, need %d (raise the hard limit: ulimit -Hn)", lim.Cur, *listeners+1000))
	}

	// The table, with the fan-out as its stream.
	ddb, err := localdynamo.Open(filepath.Join(work, "dynamodb"))
	check(err)
	defer ddb.Close()
	tp := &tap{next: ddb}
	db := runtime.DynamoClient(aws.Config{}, runtime.Env{}, tp)
	tp.fanout = &chatrelay.Fanout{DB: db, Table: "platform"}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	go func() { _ = http.Serve(ln, tp) }()
	ddbURL := "http://" + ln.Addr().String()
	env := append(os.Environ(), "DYNAMODB_ENDPOINT="+ddbURL, "PLATFORM_TABLE=platform", "AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=AKIDLOCALBENCH", "AWS_SECRET_ACCESS_KEY=local", "PLATFORM_PAGING_KEY="+strings.Repeat("ab", 32))

	// The setup, through the local platform over that table.
	local := &proc{name: "local", bin: build(root, work, "local"), env: env, dir: filepath.Join(work, "data")}
	local.start("--data-dir", local.dir)
	tok, err := os.ReadFile(filepath.Join(local.dir, "admin-token"))
	check(err)
	token := strings.TrimSpace(string(tok))
	ws := api(local.url, token, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "bench"})["id"].(string)
	wsh := map[string]string{"x-workspace-id": ws}
	bot := api(local.url, token, "POST", "/v1/admin/bots", wsh, map[string]any{"name": "bench"})["bot"].(map[string]any)["id"].(string)
	chatID := api(local.url, token, "GET", "/v1/admin/hub/integrations/chat/latest", nil, nil)["integration"].(map[string]any)["id"].(string)
	api(local.url, token, "PUT", "/v1/admin/bots/"+bot, wsh, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true, "configuration": map[string]any{"encryptionKey": secret,
		// Every stream comes from this one address: the installation's
		// limits (docs/chat-api.md "Limits") raised past the bench's.
		"limits": map[string]any{"streamsPerAddress": *listeners + 1000, "streams": *listeners + 1000}}}}})
	hook := api(local.url, token, "GET", "/v1/admin/bots/"+bot, wsh, nil)["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)["webhookUrl"].(string)
	webhookPath := hook[strings.Index(hook, "/webhooks/"):]
	local.stop()

	// The service.
	svc := &proc{name: "service", bin: build(root, work, "chatstream-service"), env: append(env, "PLATFORM_STREAM_POLL="+poll.String(), "PLATFORM_STREAM_POLL_IDLE="+pollIdle.String())}
	if *useTLS {
		svc.env = append(svc.env, nlbMode()...)
	}
	svc.start()
	defer svc.stop()
	base := svc.url + webhookPath

	users := (*listeners + *perUser - 1) / *perUser
	keys := make([]string, users)
	convs := make([]string, users)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			keys[i] = sign(fmt.Sprintf("user-%d", i))
			chatCall(base, "POST", "/users/get-or-create", keys[i], map[string]any{})
			convs[i] = chatCall(base, "POST", "/conversations", keys[i], map[string]any{})["conversation"].(map[string]any)["id"].(string)
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	rssBefore := svc.rss()

	// The streams: user i's receipts on got[i].
	type receipt struct {
		msg int
		at  time.Time
	}
	got := make([]chan receipt, users)
	for i := range got {
		got[i] = make(chan receipt, *perUser**messages+1)
	}
	client := svcClient(false)
	var opened sync.WaitGroup
	began := time.Now()
	for n := 0; n < *listeners; n++ {
		opened.Add(1)
		u := n / *perUser
		sem <- struct{}{}
		go func() {
			req, _ := http.NewRequest("GET", base+"/conversations/"+convs[u]+"/listen", nil)
			req.Header.Set("x-user-key", keys[u])
			res, err := client.Do(req)
			check(err)
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
					<-sem
					opened.Done()
					continue
				}
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "ping" {
					continue
				}
				var sig struct {
					Data struct{ Payload struct{ Text string } }
				}
				if json.Unmarshal([]byte(data), &sig) == nil {
					if m, err := strconv.Atoi(strings.TrimPrefix(sig.Data.Payload.Text, "msg-")); err == nil {
						got[u] <- receipt{m, time.Now()}
					}
				}
			}
			if first {
				panic("a stream ended before it was connected")
			}
		}()
	}
	opened.Wait()
	openedIn := time.Since(began)
	var health struct{ Streams, Topics int }
	_ = json.Unmarshal(get(svc.url+runtime.ServiceHealthPath), &health)
	time.Sleep(5 * time.Second) // let the server's memory settle before reading it
	rssWith := svc.rss()

	// Latency: a message to a random user's conversation, to its streams.
	var lat []float64
	for m := 0; m < *messages; m++ {
		u := rand.IntN(users)
		t0 := time.Now()
		chatCall(base, "POST", "/messages", keys[u], map[string]any{"conversationId": convs[u], "payload": map[string]any{"type": "text", "text": fmt.Sprintf("msg-%d", m)}})
		for k := 0; k < min(*perUser, *listeners-u**perUser); k++ {
			select {
			case r := <-got[u]:
				if r.msg != m {
					panic(fmt.Sprintf("user %d: message %d while waiting for %d", u, r.msg, m))
				}
				lat = append(lat, ms(r.at.Sub(t0)))
			case <-time.After(30 * time.Second):
				panic(fmt.Sprintf("message %d: %d of user %d's streams got it", m, k, u))
			}
		}
	}

	// Idle.
	cpu0, wall0 := svc.cpu(), time.Now()
	time.Sleep(*idle)
	cpu1, wall1 := svc.cpu(), time.Now()
	rssIdle := svc.rss()
	var after struct{ Streams, Topics int }
	_ = json.Unmarshal(get(svc.url+runtime.ServiceHealthPath), &after)

	slices.Sort(lat)
	mode := "plain HTTP"
	if *useTLS {
		mode = "TLS and the proxy header (as behind the NLB)"
	}
	fmt.Printf("stream service, %d listeners (%d users, %d per user, a conversation each), inbox poll %s (idle %s), %s\n", *listeners, users, *perUser, *poll, *pollIdle, mode)
	fmt.Printf("opened in %s; the process reports %d streams, %d registered topics (after the idle time: %d streams)\n", openedIn.Round(time.Millisecond), health.Streams, health.Topics, after.Streams)
	fmt.Printf("service RSS: %d MiB before the streams, %d MiB with them (%.1f KiB per listener), %d MiB after %s idle\n",
		rssBefore>>10, rssWith>>10, float64(rssWith-rssBefore)/float64(*listeners), rssIdle>>10, *idle)
	fmt.Printf("service CPU at idle with %d streams open: %.2f%% of one core over %s\n", *listeners, 100*float64(cpu1-cpu0)/float64(wall1.Sub(wall0)), *idle)
	fmt.Printf("message -> its user's streams over %d messages (%d receipts): p50 %.1f ms, p99 %.1f ms\n", *messages, len(lat), q(lat, 0.5), q(lat, 0.99))
	fmt.Printf("DynamoDB calls of the whole run: %v\n", ddb.Calls())
}

// tap hands the keys of each inserted signal to the fan-out, as the
// table's stream with the fan-out's filter would.
type tap struct {
	next   http.Handler
	fanout *chatrelay.Fanout
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") {
		tp.next.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	tp.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	var in struct{ Item map[string]map[string]any }
	_ = json.Unmarshal(body, &in)
	pk, _ := in.Item["pk"]["S"].(string)
	sk, _ := in.Item["sk"]["S"].(string)
	if rec.Code != 200 || !strings.HasPrefix(pk, chatrelay.SignalPrefix) {
		return
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}}}}}
	go func() {
		if err := tp.fanout.Handle(context.Background(), ev); err != nil {
			fmt.Fprintln(os.Stderr, "fan-out:", err)
		}
	}()
}

func build(root, work, name string) string {
	bin := filepath.Join(work, name)
	cmd := exec.Command("go", "build", "-o", bin, "./functions/"+name)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	check(cmd.Run())
	return bin
}

type proc struct {
	name, bin, dir, url string
	env                 []string
	cmd                 *exec.Cmd
}

func (p *proc) start(args ...string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	addr := l.Addr().String()
	l.Close()
	p.url = "http://" + addr
	get := http.Get
	if p.name == "service" {
		p.url = svcScheme() + addr
		get = svcClient(true).Get
	}
	_, port, _ := net.SplitHostPort(addr)
	if p.name == "local" {
		args = append(args, "--addr", addr)
	}
	p.cmd = exec.Command(p.bin, args...)
	p.cmd.Env = append(p.env, "PORT="+port)
	logf, err := os.Create(p.bin + ".log")
	check(err)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	check(p.cmd.Start())
	probe := p.url + runtime.ServiceHealthPath
	if p.name == "local" {
		probe = p.url + "/v1/admin/account/me"
	}
	for begin := time.Now(); ; time.Sleep(20 * time.Millisecond) {
		if res, err := get(probe); err == nil {
			res.Body.Close()
			if p.name != "local" || fileExists(filepath.Join(p.dir, "admin-token")) {
				return
			}
		}
		if time.Since(begin) > 2*time.Minute {
			panic(p.name + " did not answer within 2 minutes (log: " + p.bin + ".log)")
		}
	}
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
}

// rss is the process's resident set in KiB.
func (p *proc) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

// cpu is the process's user+system CPU time.
func (p *proc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	check(err)
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // clock ticks (USER_HZ 100)
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func get(url string) []byte {
	res, err := svcClient(true).Get(url)
	check(err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return b
}

func q(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(p*float64(len(xs))))]
}

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
		res, err := callClient.Do(req)
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

func api(base, token, method, path string, hdr map[string]string, body any) map[string]any {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
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

func check(err error) {
	if err != nil {
		panic(err)
	}
}

// callClient makes the Chat API calls to the service (connections kept).
var callClient = http.DefaultClient

func svcScheme() string {
	if *useTLS {
		return "https://"
	}
	return "http://"
}

// nlbMode serves the test certificate from a Secrets Manager stand-in on
// loopback, points svcClient at TLS with the proxy header, and answers the
// service's environment for it.
func nlbMode() []string {
	chain, ca, err := streamedge.TestChain("127.0.0.1")
	check(err)
	const arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:streambench-tls-AbCdEf"
	sm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(map[string]any{"ARN": arn, "Name": "streambench-tls", "SecretString": string(chain), "VersionId": "v1"})
	}))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	svcClient = func(keepAlive bool) *http.Client {
		return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: -1, DisableKeepAlives: !keepAlive,
			TLSClientConfig: &tls.Config{RootCAs: pool},
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				if err := streamedge.SendHeader(c, c.LocalAddr(), c.RemoteAddr()); err != nil {
					c.Close()
					return nil, err
				}
				return c, nil
			}}}
	}
	callClient = svcClient(true)
	return []string{streamedge.EnvTLSSecret + "=" + arn, "AWS_ENDPOINT_URL_SECRETS_MANAGER=" + sm.URL, streamedge.EnvProxyProtocol + "=127.0.0.0/8"}
}
