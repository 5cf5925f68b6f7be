package taskrelay_test

// The container stream tier as on AWS: one long-running process (the
// service of functions/chatstream-service, over a taskrelay.Relay) holds
// many streams; the Chat function writes the user's message in another
// process; the signal reaches the streams through the table and the same
// fan-out as the Lambda tier's.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/runtime"
	"github.com/botforge/platform/shared/taskrelay"
)

// tap is the table's stream (the fan-out gets each inserted signal's
// keys, as the filtered event source mapping would) and counts the calls
// the tests look at.
type tap struct {
	next   http.Handler
	fanout *chatrelay.Fanout
	mu     sync.Mutex
	inbox  map[string]int // inbox pk -> Queries of it
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	rec := httptest.NewRecorder()
	tp.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
	target := r.Header.Get("X-Amz-Target")
	var in struct {
		Item                      map[string]map[string]any
		ExpressionAttributeValues map[string]map[string]any
	}
	_ = json.Unmarshal(body, &in)
	if strings.HasSuffix(target, ".Query") {
		if pk, _ := in.ExpressionAttributeValues[":pk"]["S"].(string); strings.HasPrefix(pk, chatrelay.InboxPrefix) {
			tp.mu.Lock()
			tp.inbox[pk]++
			tp.mu.Unlock()
		}
	}
	if rec.Code != 200 || !strings.HasSuffix(target, ".PutItem") {
		return
	}
	pk, _ := in.Item["pk"]["S"].(string)
	sk, _ := in.Item["sk"]["S"].(string)
	if !strings.HasPrefix(pk, chatrelay.SignalPrefix) {
		return
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}}}}}
	go func() {
		if err := tp.fanout.Handle(context.Background(), ev); err != nil {
			panic(err)
		}
	}()
}

func (tp *tap) inboxes() map[string]int {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	out := map[string]int{}
	for k, v := range tp.inbox {
		out[k] = v
	}
	return out
}

type cloud struct {
	t         *testing.T
	db        *dynamodb.Client
	table     string
	tap       *tap
	webhookID string
	relay     *taskrelay.Relay
	service   *httptest.Server // one task of the container tier
	chat      *httptest.Server // the Chat function (API Gateway)
	stop      context.CancelFunc
	stopped   chan struct{}
}

func newCloud(t *testing.T) *cloud {
	// A fixed poll: what these tests count does not depend on activity.
	return newCloudWith(t, func(r *taskrelay.Relay) { r.PollFast, r.PollEvery = 50*time.Millisecond, 50*time.Millisecond })
}

// newCloudWith is newCloud with the relay's timing set by configure.
func newCloudWith(t *testing.T, configure func(*taskrelay.Relay)) *cloud {
	ka := chatapi.KeepAlive
	chatapi.KeepAlive = 100 * time.Millisecond
	t.Cleanup(func() { chatapi.KeepAlive = ka })
	f := apitest.New(t)
	c := &cloud{t: t, table: runtime.FromEnv().Table}
	c.tap = &tap{next: f.Platform.Dynamo, inbox: map[string]int{}}
	c.db = runtime.DynamoClient(aws.Config{}, runtime.Env{}, c.tap)
	c.tap.fanout = &chatrelay.Fanout{DB: c.db, Table: c.table}

	admin := func(method, path string, hdr map[string]string, body any) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), 200, "")
	}
	ws := admin("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}).Str("id")
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	t.Cleanup(bot.Close)
	hdr := map[string]string{"x-workspace-id": ws}
	botID := admin("POST", "/v1/admin/bots", hdr, map[string]any{"name": "b", "dev": true, "url": bot.URL}).Str("bot.id")
	intID := builtin.IntegrationID(chatapi.Name, chatapi.Version)
	admin("PUT", "/v1/admin/bots/"+botID, hdr, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}})
	b := admin("GET", "/v1/admin/bots/"+botID, hdr, nil)
	url := b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)["webhookUrl"].(string)
	c.webhookID = url[strings.LastIndex(url, "/")+1:]

	chatArea := func(hub chatapi.Hub) http.Handler {
		return httpapi.New(httpapi.Config{Store: f.Platform.Store, PagingKey: bytes.Repeat([]byte{7}, 32),
			Builtins: runtime.BuiltinsWith(hub, nil, nil, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat)
	}
	c.relay = taskrelay.New(c.db, c.table, nil)
	configure(c.relay)
	c.service = httptest.NewServer(runtime.ServiceMux(chatArea(c.relay), c.relay))
	t.Cleanup(c.service.Close)
	ctx, cancel := context.WithCancel(context.Background())
	c.stop, c.stopped = cancel, make(chan struct{})
	go func() { c.relay.Run(ctx); close(c.stopped) }()
	t.Cleanup(func() { cancel(); <-c.stopped })
	c.chat = httptest.NewServer(chatArea(chatrelay.New(c.db, c.table, nil)))
	t.Cleanup(c.chat.Close)
	return c
}

func (c *cloud) call(method, path, key string, body any, want int) map[string]any {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.chat.URL+"/webhooks/"+c.webhookID+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("x-user-key", key)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	if res.StatusCode != want {
		c.t.Fatalf("%s %s: %d %v, want %d", method, path, res.StatusCode, out, want)
	}
	return out
}

// sse is an open listen stream: its signals' data, closed at its end.
type sse struct {
	body   io.ReadCloser
	frames chan string
}

func (c *cloud) listen(key, convID string) *sse {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.service.URL+"/webhooks/"+c.webhookID+"/conversations/"+convID+"/listen", nil)
	req.Header.Set("x-user-key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		c.t.Fatalf("listen: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sse{body: res.Body, frames: make(chan string, 100)}
	go func() {
		defer close(s.frames)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "ping" {
				s.frames <- d
			}
		}
	}()
	c.t.Cleanup(func() { res.Body.Close() })
	return s
}

func (s *sse) next(t *testing.T, within time.Duration) (typ string, data map[string]any) {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			return "", nil
		}
		var sig struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(f), &sig); err != nil {
			t.Fatalf("frame %q: %v", f, err)
		}
		return sig.Type, sig.Data
	case <-time.After(within):
		t.Fatalf("no signal within %s", within)
		return "", nil
	}
}

// listeners are the holders (LISTEN items) of every topic, by topic.
func (c *cloud) listeners() map[string][]string {
	out, err := c.db.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(c.table),
		FilterExpression:          aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: chatrelay.ListenPrefix}}})
	if err != nil {
		c.t.Fatal(err)
	}
	m := map[string][]string{}
	for _, it := range out.Items {
		pk := it["pk"].(*types.AttributeValueMemberS).Value
		m[strings.TrimPrefix(pk, chatrelay.ListenPrefix)] = append(m[strings.TrimPrefix(pk, chatrelay.ListenPrefix)], it["sk"].(*types.AttributeValueMemberS).Value)
	}
	return m
}

// queriesOver is how many inbox Queries the process made over d (the
// time under test).
func (c *cloud) queriesOver(d time.Duration) int64 {
	before := c.relay.Stats().InboxQueries
	time.Sleep(d)
	return c.relay.Stats().InboxQueries - before
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not reached: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOnePollPerProcess: N streams held by one process cost what one
// does: one inbox, read once per PollEvery, and one registration per
// topic; one signal reaches all N.
func TestOnePollPerProcess(t *testing.T) {
	c := newCloud(t)
	const users = 8 // each holds chatapi.MaxListeners streams of one conversation
	owner := c.call("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	convID := c.call("POST", "/conversations", owner, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	keys := []string{owner}
	for i := 1; i < users; i++ {
		u := c.call("POST", "/users", "", map[string]any{}, 201)
		c.call("POST", "/conversations/"+convID+"/participants", owner, map[string]any{"userId": u["user"].(map[string]any)["id"]}, 200)
		keys = append(keys, u["key"].(string))
	}

	const window = time.Second
	bound := int64(window/c.relay.PollFast) + 1 // the poll never runs faster than its period
	streams := []*sse{c.listen(owner, convID)}
	one := c.queriesOver(window)

	for _, k := range keys {
		for len(streams) < users*chatapi.MaxListeners && (k != owner || len(streams) < chatapi.MaxListeners) {
			streams = append(streams, c.listen(k, convID))
			if k != owner && len(streams)%chatapi.MaxListeners == 0 {
				break
			}
		}
	}
	n := len(streams)
	if n != users*chatapi.MaxListeners {
		t.Fatalf("%d streams open, want %d", n, users*chatapi.MaxListeners)
	}
	many := c.queriesOver(window)
	t.Logf("inbox queries over %s: %d with 1 stream, %d with %d streams (poll every %s)", window, one, many, n, c.relay.PollFast)
	if one > bound || many > bound {
		t.Fatalf("inbox queries over %s: %d with 1 stream, %d with %d; want at most %d whatever the streams", window, one, many, n, bound)
	}
	if got := c.relay.Stats().Streams; got != n {
		t.Fatalf("the process reports %d streams, want %d", got, n)
	}
	// One holder per topic: the conversation's, the installation's and
	// each user's membership of the conversation (closed on removal).
	l := c.listeners()
	if len(l) != 2+users {
		t.Fatalf("registered topics %v, want the conversation's, the installation's and the %d users' memberships", l, users)
	}
	for topic, holders := range l {
		if len(holders) != 1 || holders[0] != c.relay.Holder {
			t.Fatalf("holders of %s: %v, want this process alone (%s)", topic, holders, c.relay.Holder)
		}
	}

	// One signal, N deliveries.
	c.call("POST", "/messages", owner, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "hello all"}}, 201)
	for i, s := range streams {
		typ, data := s.next(t, 10*time.Second)
		// The setup's last participant_added can still be on its way
		// (signal, fan-out, inbox) when the first streams open, and reach
		// them: a stream gets what is published once it is registered.
		for typ == "participant_added" {
			typ, data = s.next(t, 10*time.Second)
		}
		if typ != "message_created" || data["payload"].(map[string]any)["text"] != "hello all" {
			t.Fatalf("stream %d: %s %v, want the message", i, typ, data)
		}
	}
	if in := c.tap.inboxes(); len(in) != 1 {
		t.Fatalf("inboxes read: %v, want one (the process's)", in)
	}
}

// TestIdleTopicsDeregistered: once no stream of the process listens to a
// topic, the sweep deletes its registration (the fan-out stops writing to
// the process); stopping the process ends its streams and deletes the
// rest.
func TestIdleTopicsDeregistered(t *testing.T) {
	c := newCloud(t)
	keyA := c.call("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	convA := c.call("POST", "/conversations", keyA, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	keyB := c.call("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	convB := c.call("POST", "/conversations", keyB, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	a := c.listen(keyA, convA)
	b := c.listen(keyB, convB)
	if l := c.listeners(); len(l) != 5 {
		t.Fatalf("registered topics %v, want two conversations, their users' memberships and the installation", l)
	}
	a.body.Close()
	waitFor(t, func() bool { return c.relay.Stats().Streams == 1 }, "the stream of a client that left ended")
	c.relay.SweepOnce()
	if l := c.listeners(); len(l) != 3 {
		t.Fatalf("after A left, registered topics %v, want B's conversation, B's membership and the installation", l)
	}
	// B still gets its signals.
	c.call("POST", "/messages", keyB, map[string]any{"conversationId": convB, "payload": map[string]any{"type": "text", "text": "still here"}}, 201)
	if typ, data := b.next(t, 10*time.Second); typ != "message_created" || data["payload"].(map[string]any)["text"] != "still here" {
		t.Fatalf("B: %s %v", typ, data)
	}
	// A comes back: registered again, and gets its signals.
	a = c.listen(keyA, convA)
	c.call("POST", "/messages", keyA, map[string]any{"conversationId": convA, "payload": map[string]any{"type": "text", "text": "back"}}, 201)
	if typ, data := a.next(t, 10*time.Second); typ != "message_created" || data["payload"].(map[string]any)["text"] != "back" {
		t.Fatalf("A again: %s %v", typ, data)
	}

	c.stop()
	<-c.stopped
	for _, s := range []*sse{a, b} {
		for typ, _ := s.next(t, 10*time.Second); typ != ""; typ, _ = s.next(t, 10*time.Second) {
		}
	}
	if l := c.listeners(); len(l) != 0 {
		t.Fatalf("after the process stopped, registered topics %v, want none", l)
	}
}

// TestHealth: the load balancer's health check answers what the process
// holds.
func TestHealth(t *testing.T) {
	c := newCloud(t)
	res, err := http.Get(c.service.URL + runtime.ServiceHealthPath)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var st taskrelay.Stats
	if err := json.NewDecoder(res.Body).Decode(&st); res.StatusCode != 200 || err != nil {
		t.Fatalf("health: %d %v", res.StatusCode, err)
	}
}

// TestAdaptivePoll: the task's poll is fast while signals flow and slow
// while idle, as the Lambda tier's: idle, one Query per PollEvery; a
// signal delivered makes it fast (one per PollFast) for HotFor, then it
// is idle again; a stream opening wakes an idle poll at once.
func TestAdaptivePoll(t *testing.T) {
	const fast, idle = 20 * time.Millisecond, 400 * time.Millisecond
	c := newCloudWith(t, func(r *taskrelay.Relay) {
		// HotFor and HotOnOpen outlast what a loaded machine takes
		// between the event and the check of Hot (a signal's delivery
		// to this test's reader took over 1.5 s at load 25 in CI).
		r.PollFast, r.PollEvery, r.HotFor, r.HotOnOpen = fast, idle, 4*time.Second, time.Second
	})
	key := c.call("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	convID := c.call("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	st := c.listen(key, convID)
	if !c.relay.Stats().Hot {
		t.Fatal("the poll is not fast after a stream opened")
	}
	waitFor(t, func() bool { return !c.relay.Stats().Hot }, "the poll idle HotOnOpen after the stream opened")

	const window = 1200 * time.Millisecond
	idleQueries := c.queriesOver(window)
	if bound := int64(window/idle) + 1; idleQueries > bound {
		t.Fatalf("idle: %d inbox queries over %s, want at most %d (one per %s)", idleQueries, window, bound, idle)
	}
	// A signal (the user's message): delivered within the idle poll, and
	// then the poll is fast.
	sent := time.Now()
	c.call("POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "hi"}}, 201)
	for {
		typ, _ := st.next(t, 5*time.Second)
		if typ == "message_created" {
			break
		}
		if typ == "" {
			t.Fatal("the stream ended before the message")
		}
	}
	took := time.Since(sent)
	if !c.relay.Stats().Hot {
		t.Fatal("the poll is not fast after a delivered signal")
	}
	hotQueries := c.queriesOver(500 * time.Millisecond)
	t.Logf("inbox queries: %d over %s idle (poll %s), %d over 500ms after a signal (poll %s); the signal took %s", idleQueries, window, idle, hotQueries, fast, took)
	// At least a third of what a fast poll makes (a loaded machine slows
	// it), and well above what an idle one could.
	if min := int64(500*time.Millisecond/fast) / 3; hotQueries < min || hotQueries <= int64(500*time.Millisecond/idle)+1 {
		t.Fatalf("after a signal: %d inbox queries over 500ms, want at least %d (one per %s)", hotQueries, min, fast)
	}
	waitFor(t, func() bool { return !c.relay.Stats().Hot }, "the poll idle again HotFor after the signal")
}
