package awslocal_test

// Lambda's concurrency on the stack of `make aws-local`: open streams
// beyond the account's concurrency, and the API still answering
// (docs/deploy.md "Streams and the account's concurrency").

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
)

// chatBot is a bot with the chat integration enabled: its webhook at API
// Gateway (hook) and at the stream function's URL (streamHook), and the
// headers of the bot's own API calls.
type chatBot struct {
	hook, streamHook string
	botHdr, wsHdr    map[string]string
	bot              string
}

func (s *stack) chatBot(t *testing.T) chatBot {
	t.Helper()
	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "chat"}, 200)["id"].(string)
	wsHdr := map[string]string{"x-workspace-id": ws}
	bot := s.call(t, "POST", "/v1/admin/bots", wsHdr, map[string]any{"name": "chat"}, 200)["bot"].(map[string]any)["id"].(string)
	chatID := s.call(t, "GET", "/v1/admin/hub/integrations/chat/latest", nil, nil, 200)["integration"].(map[string]any)["id"].(string)
	s.call(t, "PUT", "/v1/admin/bots/"+bot, wsHdr, map[string]any{"integrations": map[string]any{chatID: map[string]any{"enabled": true, "configuration": map[string]any{}}}}, 200)
	inst := s.call(t, "GET", "/v1/admin/bots/"+bot, wsHdr, nil, 200)["bot"].(map[string]any)["integrations"].(map[string]any)[chatID].(map[string]any)
	hook := inst["webhookUrl"].(string)
	return chatBot{hook: hook, streamHook: s.FunctionURLs["ChatStreamFunction"] + "webhooks/" + hook[strings.LastIndex(hook, "/")+1:],
		botHdr: map[string]string{"x-bot-id": bot}, wsHdr: wsHdr, bot: bot}
}

// chatCall is one Chat API request (key: the user's x-user-key); it
// answers the status and the decoded body.
func chatCall(t *testing.T, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-user-key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return res.StatusCode, out
}

// userConversation makes a user and a conversation of it through API
// Gateway (the Chat function: the stream function's slots stay free).
func (c chatBot) userConversation(t *testing.T) (key, conv string) {
	t.Helper()
	st, u := chatCall(t, "POST", c.hook+"/users", "", map[string]any{})
	if st != 201 {
		t.Fatalf("createUser: %d %v", st, u)
	}
	key = u["key"].(string)
	st, cv := chatCall(t, "POST", c.hook+"/conversations", key, map[string]any{})
	if st != 201 {
		t.Fatalf("createConversation: %d %v", st, cv)
	}
	return key, cv["conversation"].(map[string]any)["id"].(string)
}

// openStream is one listen: its status, its error body when refused, its
// lines while it lasts.
type openStream struct {
	status int
	body   string
	lines  chan string
	close  func()
}

func (c chatBot) listen(t *testing.T, key, conv string) *openStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", c.streamHook+"/conversations/"+conv+"/listen", nil)
	req.Header.Set("x-user-key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Error(err)
		return &openStream{close: func() {}}
	}
	o := &openStream{status: res.StatusCode, close: func() { cancel(); res.Body.Close() }}
	if res.StatusCode != 200 {
		b, _ := io.ReadAll(res.Body)
		o.body = string(b)
		o.close()
		return o
	}
	o.lines = make(chan string, 64)
	go func() {
		defer close(o.lines)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			select {
			case o.lines <- sc.Text():
			default: // nobody reads this stream's keep-alives
			}
		}
	}()
	return o
}

// waitFor reads the stream until a data line holding want (false: the
// stream ended or the deadline passed).
func (o *openStream) waitFor(want string, deadline time.Duration) bool {
	timer := time.NewTimer(deadline)
	defer timer.Stop()
	for {
		select {
		case l, ok := <-o.lines:
			if !ok {
				return false
			}
			if strings.HasPrefix(l, "data:") && strings.Contains(l, want) {
				return true
			}
		case <-timer.C:
			return false
		}
	}
}

// withoutStreamReservation writes a copy of template.yaml whose
// ChatStreamFunction reserves nothing (the template before issue 29).
func withoutStreamReservation(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	line := "      ReservedConcurrentExecutions: !Ref ChatStreamConcurrency\n"
	if bytes.Count(raw, []byte(line)) != 1 {
		t.Fatalf("template.yaml has no %q", line)
	}
	path := filepath.Join(t.TempDir(), "template.yaml")
	if err := os.WriteFile(path, bytes.Replace(raw, []byte(line), nil, 1), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiOps are one operation of each area of the API through API Gateway,
// each answering its status.
func (s *stack) apiOps(t *testing.T, c chatBot, key, conv, fileHdrBot string) map[string]func() int {
	do := func(method, path string, hdr map[string]string, body any) int {
		var rd io.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		}
		req, _ := http.NewRequest(method, s.URL+path, rd)
		req.Header.Set("Authorization", "Bearer "+s.token)
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		defer res.Body.Close()
		_, _ = io.Copy(io.Discard, res.Body)
		return res.StatusCode
	}
	fileHdr := map[string]string{"x-bot-id": fileHdrBot}
	return map[string]func() int{
		"admin getBot": func() int { return do("GET", "/v1/admin/bots/"+c.bot, c.wsHdr, nil) },
		"chat webhook createMessage": func() int {
			st, _ := chatCall(t, "POST", c.hook+"/messages", key, map[string]any{"conversationId": conv, "payload": map[string]any{"type": "text", "text": "still here"}})
			return st
		},
		"chat webhook getConversation": func() int {
			st, _ := chatCall(t, "GET", c.hook+"/conversations/"+conv, key, nil)
			return st
		},
		"tables findTableRows": func() int {
			return do("POST", "/v1/tables/saturatedTable/rows/find", c.botHdr, map[string]any{"limit": 5})
		},
		"files listFiles": func() int { return do("GET", "/v1/files", fileHdr, nil) },
	}
}

// TestStreamsCannotStarveTheAPI: an account of 12 concurrent executions
// (AWS's 1,000 scaled down), ChatStreamFunction reserving 4 of them. 16
// streams (more than the whole account) are opened at once: 4 are held,
// the 12 others refused at once with the function URL's 429; meanwhile an
// operation of each area of the API (admin, the chat webhook, tables,
// files) answers as usual, and a held stream still gets a message's
// signal through the fan-out. The same stack without the reservation (the
// template before) lets the streams take the account: the API is
// throttled (503), which is what the reservation prevents.
func TestStreamsCannotStarveTheAPI(t *testing.T) {
	const account, reserved, streams = 12, 4, 16
	run := func(t *testing.T, template string) (held, refused int, apiStatus map[string][]int, took map[string][]time.Duration, s *stack) {
		var before map[string][]time.Duration // the same operations before the streams
		s = startStackWith(t, awslocal.Options{Template: template, AccountConcurrency: account,
			Parameters: map[string]string{"ChatStreamConcurrency": "4"}})
		c := s.chatBot(t)
		s.call(t, "POST", "/v1/tables", c.botHdr, map[string]any{"name": "saturatedTable", "schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}, 200)
		fileHdr, _ := s.botWithFile(t)
		keys, convs := make([]string, streams), make([]string, streams)
		for i := range streams {
			keys[i], convs[i] = c.userConversation(t)
		}
		var spare [2]string
		spare[0], spare[1] = c.userConversation(t)
		if template == "" {
			k, cv := c.userConversation(t)
			before = map[string][]time.Duration{}
			for range 10 {
				for name, op := range s.apiOps(t, c, k, cv, fileHdr["x-bot-id"]) {
					start := time.Now()
					if st := op(); st < 200 || st > 299 {
						t.Fatalf("%s before any stream: %d", name, st)
					}
					before[name] = append(before[name], time.Since(start))
				}
			}
			for name, d := range before {
				sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
				t.Logf("before the streams: %-30s %d calls, p50 %6.1f ms, max %6.1f ms", name, len(d), ms(d[len(d)/2]), ms(d[len(d)-1]))
			}
		}
		opened := make([]*openStream, streams)
		var wg sync.WaitGroup
		for i := range streams {
			wg.Add(1)
			go func() { defer wg.Done(); opened[i] = c.listen(t, keys[i], convs[i]) }()
		}
		wg.Wait()
		t.Cleanup(func() {
			for _, o := range opened {
				o.close()
			}
		})
		extra := 0
		if template != "" {
			// Without the reservation, the streams share the pool with
			// the setup's last invocations (the dispatcher, the fan-out):
			// top it up until a stream is refused, so that the pool is
			// full when the API is called.
			for range 4 {
				k, cv := spare[0], spare[1]
				o := c.listen(t, k, cv)
				t.Cleanup(o.close)
				if o.status != 200 {
					break
				}
				extra++
			}
		}
		var first *openStream
		for i, o := range opened {
			switch {
			case o.status == 200:
				held++
				if first == nil {
					first = o
					keys[0], convs[0] = keys[i], convs[i]
				}
			case o.status == http.StatusTooManyRequests && o.body == `{"Message":"Rate Exceeded."}`:
				refused++
			default:
				t.Errorf("stream %d: %d %s", i, o.status, o.body)
			}
		}
		held += extra
		ops := s.apiOps(t, c, keys[0], convs[0], fileHdr["x-bot-id"])
		apiStatus, took = map[string][]int{}, map[string][]time.Duration{}
		for range 10 {
			for name, op := range ops {
				start := time.Now()
				apiStatus[name] = append(apiStatus[name], op())
				took[name] = append(took[name], time.Since(start))
			}
		}
		if first != nil && template == "" {
			// The held stream still gets its conversation's signals: the
			// message the chat webhook operation created.
			if !first.waitFor("still here", 30*time.Second) {
				t.Error("a held stream got no signal of its conversation's message while the account was saturated")
			}
		}
		return held, refused, apiStatus, took, s
	}

	t.Run("reserved", func(t *testing.T) {
		held, refused, statuses, took, s := run(t, "")
		if held != reserved || refused != streams-reserved {
			t.Fatalf("%d streams held, %d refused with 429; want %d and %d", held, refused, reserved, streams-reserved)
		}
		names := make([]string, 0, len(statuses))
		for n := range statuses {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			for _, st := range statuses[n] {
				if st < 200 || st > 299 {
					t.Errorf("%s while the streams are at their reservation: %v", n, statuses[n])
					break
				}
			}
			d := took[n]
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			t.Logf("saturated: %-30s %d calls, p50 %6.1f ms, max %6.1f ms", n, len(d), ms(d[len(d)/2]), ms(d[len(d)-1]))
		}
		t.Logf("account %d, ChatStreamFunction reserving %d: %d streams opened at once, %d held, %d refused (429 %s); throttles by function: %v",
			account, reserved, streams, held, refused, `{"Message":"Rate Exceeded."}`, s.Throttles())
	})

	t.Run("unreserved", func(t *testing.T) {
		held, _, statuses, _, _ := run(t, withoutStreamReservation(t))
		throttled := 0
		for _, sts := range statuses {
			for _, st := range sts {
				if st == http.StatusServiceUnavailable {
					throttled++
				}
			}
		}
		if held < account-2 || throttled == 0 {
			t.Fatalf("without the reservation: %d streams held, %d API calls throttled (503); want the streams to take the account and the API throttled", held, throttled)
		}
		t.Logf("without the reservation: %d streams held (%d opened at once, then one at a time until one was refused), %d API calls of %v throttled with 503", held, streams, throttled, len(statuses)*10)
	})
}

// TestMeasureReplyLatency: a bot's reply on the end user's stream through
// the stack of `make aws-local` (docs/chat-api.md "Where it runs"): the
// bot's createMessage through API Gateway (the Chat function, the outbox,
// the dispatcher fed by the table's stream, the chat integration's
// signal), the fan-out function (the table's stream again) into the inbox
// of the invocation of ChatStreamFunction holding the stream, and that
// invocation's poll. Logged, not asserted (a measurement, not a timed
// test). Turns are paced (pause) like a conversation's, the stream idle
// between them. Run with AWS_LOCAL_MEASURE=1 (about a minute):
//
//	AWS_LOCAL_MEASURE=1 go test ./shared/awslocal -run TestMeasureReplyLatency -v
func TestMeasureReplyLatency(t *testing.T) {
	if os.Getenv("AWS_LOCAL_MEASURE") == "" {
		t.Skip("AWS_LOCAL_MEASURE=1 measures the reply latency on the stack")
	}
	s := startStackWith(t, awslocal.Options{})
	c := s.chatBot(t)
	key, conv := c.userConversation(t)
	var platformConv string
	for _, cv := range s.call(t, "GET", "/v1/chat/conversations", c.botHdr, nil, 200)["conversations"].([]any) {
		m := cv.(map[string]any)
		for _, v := range m["tags"].(map[string]any) {
			if v == conv {
				platformConv = m["id"].(string)
			}
		}
	}
	if platformConv == "" {
		t.Fatal("the Chat API conversation is no conversation of the bot")
	}
	o := c.listen(t, key, conv)
	t.Cleanup(o.close)
	if o.status != 200 {
		t.Fatalf("listen: %d %s", o.status, o.body)
	}
	reply := func(i int, text string) (fromCall, fromCreated time.Duration) {
		start := time.Now()
		s.call(t, "POST", "/v1/chat/messages", c.botHdr, map[string]any{"conversationId": platformConv, "userId": c.bot,
			"type": "text", "payload": map[string]any{"text": text}, "tags": map[string]string{}}, 201)
		created := time.Now()
		if !o.waitFor(text, 30*time.Second) {
			t.Fatalf("turn %d: the bot's reply not on the stream within 30 s", i)
		}
		return time.Since(start), time.Since(created)
	}
	reply(-1, "warm-up") // every function's instance started
	n, pause := 100, 300*time.Millisecond
	var call, created []time.Duration
	for i := range n {
		a, b := reply(i, "reply-"+strings.Repeat("x", i%3)+time.Now().Format("150405.000000"))
		call, created = append(call, a), append(created, b)
		time.Sleep(pause) // pacing between turns, not synchronisation
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"from the bot's createMessage call", call}, {"from its answer (the reply exists)", created}} {
		sort.Slice(m.d, func(i, j int) bool { return m.d[i] < m.d[j] })
		t.Logf("reply on the stream, %d turns %v apart, %s: p50 %6.1f ms, p90 %6.1f ms, p99 %6.1f ms, max %6.1f ms",
			n, pause, m.name, ms(m.d[n/2]), ms(m.d[n*90/100]), ms(m.d[n*99/100]), ms(m.d[n-1]))
	}
}
