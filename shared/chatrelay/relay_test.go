package chatrelay_test

// The Chat API's streams as on AWS: function instances that share only the
// table. A streaming instance (the chat area over a Relay, served through
// lambdaurl as a function URL with response streaming invokes it, with the
// invocation's deadline) holds the listen stream; another instance (the
// Chat function behind API Gateway) writes the user's message, a third
// (the dispatcher) hands it the bot's reply; the signals reach the stream
// through the fan-out, fed with the keys a KEYS_ONLY stream carries for
// each item the functions insert.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/builtin"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/chatrelay"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/mototest"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/runtime"
)

// tap is the table's stream: the keys of each item a PutItem inserted,
// handed to the fan-out in order (one "shard"), as the event source
// mapping filtered by chatrelay.StreamFilter would.
type tap struct {
	next   http.Handler
	fanout *chatrelay.Fanout
	mu     sync.Mutex
	keys   [][2]string // every inserted key, for the tests to look at
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
	if rec.Code != 200 || !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".PutItem") {
		return
	}
	var in struct{ Item map[string]map[string]any }
	_ = json.Unmarshal(body, &in)
	pk, _ := in.Item["pk"]["S"].(string)
	sk, _ := in.Item["sk"]["S"].(string)
	tp.mu.Lock()
	tp.keys = append(tp.keys, [2]string{pk, sk})
	tp.mu.Unlock()
	if tp.fanout == nil || !strings.HasPrefix(pk, chatrelay.SignalPrefix) {
		return // fed by a real stream; the mapping's filter
	}
	ev := events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{{EventName: "INSERT", Change: events.DynamoDBStreamRecord{
		Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute(pk), "sk": events.NewStringAttribute(sk)}}}}}
	go func() {
		if err := tp.fanout.Handle(context.Background(), ev); err != nil {
			panic(err)
		}
	}()
}

func (tp *tap) inserted(prefix string) [][2]string {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	var out [][2]string
	for _, k := range tp.keys {
		if strings.HasPrefix(k[0], prefix) {
			out = append(out, k)
		}
	}
	return out
}

// cloud is a local platform (for the setup: workspace, bot, installation)
// and the AWS functions over its table.
type cloud struct {
	t          *testing.T
	f          *apitest.Env
	db         *dynamodb.Client
	table      string
	tap        *tap
	webhookID  string
	botID      string
	stream     *httptest.Server // the streaming function's URL
	chat       *httptest.Server // the Chat function (API Gateway)
	dispatcher *chatapi.Integration
	timeout    time.Duration // the streaming function's timeout
}

func newCloud(t *testing.T, timeout time.Duration) *cloud { return newCloudOn(t, timeout, "") }

// newCloudOn is newCloud over moto's DynamoDB (endpoint not empty): its
// table's real stream feeds the fan-out (streamPump), not the tap.
func newCloudOn(t *testing.T, timeout time.Duration, moto string) *cloud {
	var next http.Handler
	if moto != "" {
		t.Setenv("DYNAMODB_ENDPOINT", moto)
		t.Setenv("AWS_ACCESS_KEY_ID", "AKIDLOCALTEST")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
		u, _ := neturl.Parse(moto)
		next = httputil.NewSingleHostReverseProxy(u)
	}
	f := apitest.New(t)
	if next == nil {
		next = f.Platform.Dynamo
	}
	c := &cloud{t: t, f: f, table: runtime.FromEnv().Table, timeout: timeout}
	c.tap = &tap{next: next}
	if moto == "" {
		c.db = runtime.DynamoClient(aws.Config{}, runtime.Env{}, c.tap)
	} else {
		// The AWS code path: the full, signed client over the network
		// (the in-process client signs nothing, which only the embedded
		// store accepts), through the tap to moto.
		srv := httptest.NewServer(c.tap)
		t.Cleanup(srv.Close)
		cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCALTEST", "local", "")}
		c.db = runtime.DynamoClient(cfg, runtime.Env{DynamoEndpoint: srv.URL}, nil)
	}
	fanout := &chatrelay.Fanout{DB: c.db, Table: c.table}
	if moto == "" {
		c.tap.fanout = fanout
	} else {
		streamPump(t, c.db, moto, c.table, fanout)
	}

	admin := func(method, path string, hdr map[string]string, body any) apitest.Response {
		return f.Check(f.Do(apitest.Req{Method: method, Path: path, Token: f.AdminToken, Headers: hdr, Body: body}), 200, "")
	}
	ws := admin("POST", "/v1/admin/workspaces", nil, map[string]any{"name": "site"}).Str("id")
	bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	t.Cleanup(bot.Close)
	hdr := map[string]string{"x-workspace-id": ws}
	c.botID = admin("POST", "/v1/admin/bots", hdr, map[string]any{"name": "b", "dev": true, "url": bot.URL}).Str("bot.id")
	intID := builtin.IntegrationID(chatapi.Name, chatapi.Version)
	admin("PUT", "/v1/admin/bots/"+c.botID, hdr, map[string]any{"integrations": map[string]any{intID: map[string]any{"enabled": true, "configuration": map[string]any{}}}})
	b := admin("GET", "/v1/admin/bots/"+c.botID, hdr, nil)
	url := b.Body["bot"].(map[string]any)["integrations"].(map[string]any)[intID].(map[string]any)["webhookUrl"].(string)
	c.webhookID = url[strings.LastIndex(url, "/")+1:]

	chatArea := func(hub chatapi.Hub) http.Handler {
		return httpapi.New(httpapi.Config{Store: f.Platform.Store, PagingKey: bytes.Repeat([]byte{7}, 32),
			Builtins: runtime.BuiltinsWith(hub, nil, nil, nil), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat)
	}
	streamRelay := chatrelay.New(c.db, c.table, nil)
	c.stream = httptest.NewServer(functionURL(streamRelay.Streaming(chatArea(streamRelay)), timeout))
	t.Cleanup(c.stream.Close)
	c.chat = httptest.NewServer(chatArea(chatrelay.New(c.db, c.table, nil)))
	t.Cleanup(c.chat.Close)
	c.dispatcher = chatapi.New(chatrelay.New(c.db, c.table, nil), nil)
	return c
}

// functionURL stands in for a Lambda function URL with InvokeMode
// RESPONSE_STREAM in front of a Go function started with lambdaurl: each
// request is one invocation with the function's timeout as its deadline;
// the response body streams as the function writes it. A client that
// leaves makes the function's next write fail (the stream is closed).
func functionURL(h http.Handler, timeout time.Duration) http.Handler {
	invoke := lambdaurl.Wrap(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &events.LambdaFunctionURLRequest{RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery, Body: string(body), Headers: map[string]string{}}
		for k, v := range r.Header {
			req.Headers[strings.ToLower(k)] = strings.Join(v, ",")
		}
		req.RequestContext.DomainName = r.Host
		req.RequestContext.HTTP.Method = r.Method
		req.RequestContext.HTTP.SourceIP = "203.0.113.9"
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		res, err := invoke(ctx, req)
		if err != nil {
			http.Error(w, err.Error(), 502)
			return
		}
		for k, v := range res.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(res.StatusCode)
		pr := res.Body.(*io.PipeReader)
		go func() {
			select {
			case <-r.Context().Done(): // the client left
			case <-ctx.Done(): // Lambda ends the invocation
			}
			pr.CloseWithError(io.ErrClosedPipe)
		}()
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			if n > 0 {
				_, _ = w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	})
}

func (c *cloud) call(base, method, path, key string, body any, want int) map[string]any {
	c.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, base+"/webhooks/"+c.webhookID+path, bytes.NewReader(b))
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

// sse is an open listen stream: its frames' data, and the end of it.
type sse struct {
	body   io.ReadCloser
	frames chan string // "data" lines; closed at the stream's end
	opened time.Time
}

func (c *cloud) listen(key, convID string) *sse {
	c.t.Helper()
	req, _ := http.NewRequest("GET", c.stream.URL+"/webhooks/"+c.webhookID+"/conversations/"+convID+"/listen", nil)
	req.Header.Set("x-user-key", key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		c.t.Fatalf("listen: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sse{body: res.Body, frames: make(chan string, 100), opened: time.Now()}
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

// next waits for the stream's next signal (or its end: "").
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

// holders are the LISTEN items of a topic.
func (c *cloud) holders(topic string) []map[string]types.AttributeValue {
	out, err := c.db.Query(context.Background(), &dynamodb.QueryInput{TableName: aws.String(c.table),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: chatrelay.ListenPrefix + topic}}})
	if err != nil {
		c.t.Fatal(err)
	}
	return out.Items
}

// convTopic is the topic of the one conversation the streaming function
// registered for.
func (c *cloud) convTopic() string {
	for _, k := range c.tap.inserted(chatrelay.ListenPrefix + "conv:") {
		return strings.TrimPrefix(k[0], chatrelay.ListenPrefix)
	}
	c.t.Fatal("no listener registered for a conversation")
	return ""
}

// user makes a user and a conversation through the Chat function.
func (c *cloud) user() (key, convID string) {
	key = c.call(c.chat.URL, "POST", "/users", "", map[string]any{}, 201)["key"].(string)
	convID = c.call(c.chat.URL, "POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	return key, convID
}

func fast(t *testing.T) {
	ka, poll, margin := chatapi.KeepAlive, chatrelay.PollEvery, chatrelay.Margin
	chatapi.KeepAlive, chatrelay.PollEvery, chatrelay.Margin = 100*time.Millisecond, 50*time.Millisecond, 500*time.Millisecond
	t.Cleanup(func() { chatapi.KeepAlive, chatrelay.PollEvery, chatrelay.Margin = ka, poll, margin })
}

// TestRelayAcrossFunctions: the stream held by the streaming function gets
// the user's message written by the Chat function and the bot's reply
// handed to the dispatcher, each once, through the fan-out; template.yaml
// filters the stream as the fan-out expects.
func TestRelayAcrossFunctions(t *testing.T) {
	fast(t)
	c := newCloud(t, time.Minute)
	key, convID := c.user()
	s := c.listen(key, convID)
	topic := c.convTopic()
	if n := len(c.holders(topic)); n != 1 {
		t.Fatalf("%d holders of %s, want 1", n, topic)
	}

	sent := time.Now()
	c.call(c.chat.URL, "POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "hello"}}, 201)
	typ, data := s.next(t, 10*time.Second)
	t.Logf("user's message: createMessage sent -> on the stream of another function: %s (poll every %s)", time.Since(sent), chatrelay.PollEvery)
	if typ != "message_created" || data["isBot"] != false || data["payload"].(map[string]any)["text"] != "hello" {
		t.Fatalf("got %s %v, want the user's message", typ, data)
	}

	// The dispatcher function hands the bot's reply to the integration.
	sent = time.Now()
	err := c.dispatcher.SendMessage(context.Background(), builtin.Install{}, builtin.Outgoing{
		Message:      platform.Message{ID: "msg_reply", UserID: c.botID, Type: "text", Payload: json.RawMessage(`{"text":"echo: hello"}`), CreatedAt: time.Now().UTC().Format(time.RFC3339Nano)},
		Conversation: platform.Conversation{ID: strings.TrimPrefix(topic, "conv:"), Tags: map[string]string{"fid": convID}},
	})
	if err != nil {
		t.Fatal(err)
	}
	typ, data = s.next(t, 10*time.Second)
	t.Logf("bot's reply: SendMessage -> on the stream: %s", time.Since(sent))
	if typ != "message_created" || data["isBot"] != true || data["id"] != "msg_reply" || data["conversationId"] != convID {
		t.Fatalf("got %s %v, want the bot's reply", typ, data)
	}
	// Each signal once: a deletion is the next thing on the stream.
	c.call(c.chat.URL, "DELETE", "/conversations/"+convID, key, nil, 200)
	for typ, _ := s.next(t, 10*time.Second); typ != ""; typ, _ = s.next(t, 10*time.Second) {
		t.Fatalf("after the two messages: %s, want the stream's end (conversation deleted)", typ)
	}

	tpl, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(tpl), "'"+chatrelay.StreamFilter+"'") {
		t.Fatalf("template.yaml has no fan-out filter %s", chatrelay.StreamFilter)
	}
}

// TestRelayStreamOutlivesGateway: a stream of the streaming function lasts
// past API Gateway's limit (30 s, scaled here to 1 s with a 3 s function
// timeout), still delivering, and ends cleanly Margin before the
// invocation's deadline, its holder removed.
func TestRelayStreamOutlivesGateway(t *testing.T) {
	fast(t)
	const gateway = time.Second
	c := newCloud(t, 3*time.Second)
	key, convID := c.user()
	s := c.listen(key, convID)
	topic := c.convTopic()
	time.Sleep(gateway + 200*time.Millisecond) // the time under test: past the gateway's limit
	c.call(c.chat.URL, "POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "late"}}, 201)
	if typ, data := s.next(t, 5*time.Second); typ != "message_created" || data["payload"].(map[string]any)["text"] != "late" {
		t.Fatalf("past the gateway's limit: %s %v", typ, data)
	}
	typ, _ := s.next(t, 5*time.Second)
	ended := time.Since(s.opened)
	if typ != "" {
		t.Fatalf("got %s, want the stream's end", typ)
	}
	if want := c.timeout - chatrelay.Margin; ended < want-300*time.Millisecond || ended > c.timeout {
		t.Fatalf("stream ended after %s, want about %s (before the invocation's %s)", ended, want, c.timeout)
	}
	waitFor(t, func() bool { return len(c.holders(topic)) == 0 }, "the holder removed at the stream's end")
}

// TestRelayDisconnectedListener: a client that leaves ends its stream's
// invocation (the next keep-alive fails) and its holder is removed; a
// holder whose invocation died without removing it (past its expiry) is
// removed by the fan-out, which writes it nothing.
func TestRelayDisconnectedListener(t *testing.T) {
	fast(t)
	c := newCloud(t, time.Minute)
	key, convID := c.user()
	s := c.listen(key, convID)
	topic := c.convTopic()
	s.body.Close()
	waitFor(t, func() bool { return len(c.holders(topic)) == 0 }, "the holder of a client that left removed")

	// A dead invocation's registration, expired.
	_, err := c.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(c.table), Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: chatrelay.ListenPrefix + topic}, "sk": &types.AttributeValueMemberS{Value: "dead"},
		"ttl": &types.AttributeValueMemberN{Value: fmt.Sprint(time.Now().Add(-time.Second).Unix())}}})
	if err != nil {
		t.Fatal(err)
	}
	c.call(c.chat.URL, "POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "anyone?"}}, 201)
	waitFor(t, func() bool { return len(c.holders(topic)) == 0 }, "the expired holder removed by the fan-out")
	if got := c.tap.inserted(chatrelay.InboxPrefix + "dead"); len(got) != 0 {
		t.Fatalf("the fan-out wrote to a dead holder: %v", got)
	}
}

// waitFor waits (up to 10 s) for cond, the state the test asserts.
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

// TestFanoutSampleEvent: the sample batch of events/chatfanout-stream.json
// (what `sam local invoke ChatFanoutFunction` sends) decodes as the
// function's event; its signal is not in the table (collected already),
// so the fan-out writes nothing and succeeds.
func TestFanoutSampleEvent(t *testing.T) {
	c := newCloud(t, time.Minute)
	raw, err := os.ReadFile("../../events/chatfanout-stream.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.DynamoDBEvent
	if err := json.Unmarshal(raw, &ev); err != nil || len(ev.Records) != 1 {
		t.Fatalf("sample: %v, %d records", err, len(ev.Records))
	}
	if err := c.tap.fanout.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if got := c.tap.inserted(chatrelay.InboxPrefix); len(got) != 0 {
		t.Fatalf("inbox entries for a signal that is gone: %v", got)
	}
}

// streamPump enables the table's KEYS_ONLY stream on moto and hands the
// fan-out, in order, every record that passes the mapping's filter
// (INSERT, pk prefixed CHATSIG#), decoded as Lambda decodes the batch, as
// the event source mapping would, until the test ends.
func streamPump(t *testing.T, db *dynamodb.Client, moto, table string, fanout *chatrelay.Fanout) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := db.UpdateTable(ctx, &dynamodb.UpdateTableInput{TableName: aws.String(table),
		StreamSpecification: &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeKeysOnly}}); err != nil {
		t.Fatal(err)
	}
	desc, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || desc.Table.LatestStreamArn == nil {
		t.Fatalf("stream of the table: %v", err)
	}
	call := func(op string, in, out any) error {
		body, _ := json.Marshal(in)
		req, _ := http.NewRequestWithContext(ctx, "POST", moto, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		req.Header.Set("X-Amz-Target", "DynamoDBStreams_20120810."+op)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDLOCALTEST/20261121/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 {
			return fmt.Errorf("%s: %d %s", op, res.StatusCode, b)
		}
		return json.Unmarshal(b, out)
	}
	var d struct {
		StreamDescription struct{ Shards []struct{ ShardId string } }
	}
	if err := call("DescribeStream", map[string]any{"StreamArn": *desc.Table.LatestStreamArn}, &d); err != nil || len(d.StreamDescription.Shards) != 1 {
		t.Fatalf("the stream's shards: %v %+v", err, d)
	}
	var it struct{ ShardIterator string }
	if err := call("GetShardIterator", map[string]any{"StreamArn": *desc.Table.LatestStreamArn, "ShardId": d.StreamDescription.Shards[0].ShardId, "ShardIteratorType": "LATEST"}, &it); err != nil {
		t.Fatal(err)
	}
	// Waited for at the end only once it runs: a set-up that fails
	// above must not wait for a pump that never started.
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		iter := it.ShardIterator
		for ctx.Err() == nil {
			var page struct {
				Records           []json.RawMessage
				NextShardIterator string
			}
			if err := call("GetRecords", map[string]any{"ShardIterator": iter}, &page); err != nil {
				if ctx.Err() == nil {
					t.Errorf("the stream: %v", err)
				}
				return
			}
			iter = page.NextShardIterator
			var batch events.DynamoDBEvent
			for _, raw := range page.Records {
				var r events.DynamoDBEventRecord
				if err := json.Unmarshal(raw, &r); err != nil {
					t.Errorf("a stream record %s: %v", raw, err)
					return
				}
				if r.EventName == "INSERT" && strings.HasPrefix(r.Change.Keys["pk"].String(), chatrelay.SignalPrefix) {
					batch.Records = append(batch.Records, r)
				}
			}
			if len(batch.Records) > 0 {
				if err := fanout.Handle(ctx, batch); err != nil && ctx.Err() == nil {
					t.Errorf("fan-out: %v", err)
				}
			} else {
				time.Sleep(20 * time.Millisecond) // the mapping's polling of an idle shard
			}
		}
	}()
}

// TestRelayThroughMotoStream: TestRelayAcrossFunctions's turn on a
// DynamoDB emulator the project did not write (moto), its table's real
// KEYS_ONLY stream feeding the fan-out: the user's message written by the
// Chat function reaches the stream held by the streaming function.
func TestRelayThroughMotoStream(t *testing.T) {
	fast(t)
	c := newCloudOn(t, time.Minute, mototest.Start(t))
	key, convID := c.user()
	s := c.listen(key, convID)
	sent := time.Now()
	c.call(c.chat.URL, "POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "through moto"}}, 201)
	typ, data := s.next(t, 20*time.Second)
	if typ != "message_created" || data["payload"].(map[string]any)["text"] != "through moto" {
		t.Fatalf("got %s %v, want the user's message", typ, data)
	}
	t.Logf("createMessage -> the other function's stream, through moto's stream: %s", time.Since(sent))
	s.body.Close()
	topic := c.convTopic()
	waitFor(t, func() bool { return len(c.holders(topic)) == 0 }, "the holder of a client that left removed")
}

// TestRelayRemovedParticipant: on AWS, the owner's removal of a
// participant (the Chat function) ends the removed user's stream held by
// the streaming function within a second (a close signal through the
// table, at the default PollEvery), while the owner's stream there goes
// on.
func TestRelayRemovedParticipant(t *testing.T) {
	c := newCloud(t, time.Minute)
	owner, convID := c.user()
	bob := c.call(c.chat.URL, "POST", "/users", "", map[string]any{"id": "bob"}, 201)["key"].(string)
	c.call(c.chat.URL, "POST", "/conversations/"+convID+"/participants", owner, map[string]any{"userId": "bob"}, 200)
	ownerSt := c.listen(owner, convID)
	bobSt := c.listen(bob, convID)
	c.call(c.chat.URL, "POST", "/messages", owner, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "before"}}, 201)
	for _, s := range []*sse{ownerSt, bobSt} {
		// The fan-out of addParticipant's signal runs after the table's
		// stream hands it over, which may be after the listen began: a
		// participant_added may come first.
		typ, _ := s.next(t, 10*time.Second)
		if typ == "participant_added" {
			typ, _ = s.next(t, 10*time.Second)
		}
		if typ != "message_created" {
			t.Fatalf("before the removal: %s", typ)
		}
	}

	removed := time.Now()
	c.call(c.chat.URL, "DELETE", "/conversations/"+convID+"/participants/bob", owner, nil, 200)
	if typ, data := bobSt.next(t, time.Second); typ != "" {
		t.Fatalf("the removed participant's stream got %s %v, want its end", typ, data)
	}
	t.Logf("removed participant's stream ended %s after the removal's answer (poll every %s)", time.Since(removed), chatrelay.PollEvery)
	if typ, data := ownerSt.next(t, 10*time.Second); typ != "participant_removed" || data["participantId"] != "bob" {
		t.Fatalf("the owner's stream: %s %v, want participant_removed", typ, data)
	}
	c.call(c.chat.URL, "POST", "/messages", owner, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": "after"}}, 201)
	if typ, data := ownerSt.next(t, 10*time.Second); typ != "message_created" || data["payload"].(map[string]any)["text"] != "after" {
		t.Fatalf("the owner's stream after the removal: %s %v", typ, data)
	}
}

// TestRelayPollAdapts: a holder polls every PollFast while its
// conversations are active (a stream just opened: HotOnOpen, a signal just
// delivered: HotFor) and every PollEvery otherwise. With PollEvery an hour, signals still
// reach the stream at once: the opened stream and then each delivered
// signal keep the holder on PollFast (a fixed poll of PollEvery would
// deliver nothing within the test).
func TestRelayPollAdapts(t *testing.T) {
	fast(t)
	every, quick, hot, open := chatrelay.PollEvery, chatrelay.PollFast, chatrelay.HotFor, chatrelay.HotOnOpen
	chatrelay.PollEvery, chatrelay.PollFast, chatrelay.HotFor, chatrelay.HotOnOpen = time.Hour, 20*time.Millisecond, time.Hour, time.Hour
	t.Cleanup(func() {
		chatrelay.PollEvery, chatrelay.PollFast, chatrelay.HotFor, chatrelay.HotOnOpen = every, quick, hot, open
	})
	c := newCloud(t, time.Minute)
	key, convID := c.user()
	s := c.listen(key, convID)
	for i, text := range []string{"first", "second", "third"} {
		sent := time.Now()
		c.call(c.chat.URL, "POST", "/messages", key, map[string]any{"conversationId": convID, "payload": map[string]any{"type": "text", "text": text}}, 201)
		typ, data := s.next(t, 10*time.Second)
		if typ != "message_created" || data["payload"].(map[string]any)["text"] != text {
			t.Fatalf("message %d: got %s %v, want %q", i, typ, data, text)
		}
		t.Logf("message %d on the stream %s after createMessage (PollFast %s, PollEvery %s)", i, time.Since(sent), chatrelay.PollFast, chatrelay.PollEvery)
	}
}
