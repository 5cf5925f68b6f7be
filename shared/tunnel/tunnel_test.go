package tunnel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/tunnel"
)

// The tunnel server, driven as the CLI drives it: a Go WebSocket client
// plays @bpinternal/tunnel's TunnelTail (hello, request/response), plain
// HTTP requests play the callers (the runtime's dispatcher, a webhook).
// Every wait is bounded.

const tunnelID = "0f8e2c4a-5b6d-4e7f-8a9b-0c1d2e3f4a5b" // the shape of bp dev's ids (uuid v4)

// bound is how long anything the tests wait for may take.
const bound = 5 * time.Second

// serve runs a tunnel server in front of a stand-in API (which answers
// every request 405 MethodNotFound, as the API does a path it has no
// operation for).
func serve(t testing.TB, o tunnel.Options) (*tunnel.Server, *httptest.Server) {
	t.Helper()
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if o.Reserved == nil {
		o.Reserved = []string{"v1", "webhooks", "_s3"}
	}
	s := tunnel.New(o)
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, r, platform.Errorf(platform.ErrMethodNotFound, "no operation %s %s: the operation does not exist", r.Method, r.URL.Path))
	})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Claims(r) {
			s.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { s.Close(); ts.Close() })
	return s, ts
}

// tail is a test client holding a tunnel.
type tail struct {
	t    *testing.T
	conn *websocket.Conn
}

func dial(t *testing.T, ts *httptest.Server, id string) *tail {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/"+id,
		&websocket.DialOptions{HTTPHeader: http.Header{"User-Agent": {"tunnel-client"}}})
	if err != nil {
		t.Fatalf("dial %s: %v", id, err)
	}
	conn.SetReadLimit(64 << 20)
	t.Cleanup(func() { conn.CloseNow() })
	return &tail{t: t, conn: conn}
}

// connected dials and waits until the server holds the tail.
func connected(t *testing.T, s *tunnel.Server, ts *httptest.Server, id string) *tail {
	t.Helper()
	tl := dial(t, ts, id)
	tl.send(map[string]any{"type": "hello"})
	eventually(t, func() bool { return s.Connected(id) })
	return tl
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in time")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (tl *tail) send(v any) {
	tl.t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	if err := tl.conn.Write(ctx, websocket.MessageText, b); err != nil {
		tl.t.Fatalf("tail write: %v", err)
	}
}

// tunnelRequest is the request message of the protocol.
type tunnelRequest struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Method  string         `json:"method"`
	Path    string         `json:"path"`
	Query   *string        `json:"query"`
	Headers map[string]any `json:"headers"`
	Body    *string        `json:"body"`
}

// next reads the next request the server sends, or the close error.
func (tl *tail) next() (tunnelRequest, error) {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	_, data, err := tl.conn.Read(ctx)
	if err != nil {
		return tunnelRequest{}, err
	}
	var m tunnelRequest
	if err := json.Unmarshal(data, &m); err != nil {
		tl.t.Fatalf("request message %s: %v", data, err)
	}
	return m, nil
}

func (tl *tail) mustNext() tunnelRequest {
	tl.t.Helper()
	m, err := tl.next()
	if err != nil {
		tl.t.Fatalf("tail read: %v", err)
	}
	return m
}

// closeCode waits for the server to close the tail and returns its code.
func (tl *tail) closeCode() websocket.StatusCode {
	tl.t.Helper()
	for {
		_, err := tl.next()
		if err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

type answer struct {
	status int
	header http.Header
	body   string
	err    error
}

// call makes an HTTP request in the background.
func call(ts *httptest.Server, method, path string, header http.Header, body string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		if body == "" {
			req.Body = http.NoBody
		}
		for k, v := range header {
			req.Header[k] = v
		}
		c := &http.Client{Timeout: bound}
		res, err := c.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		ch <- answer{status: res.StatusCode, header: res.Header, body: string(b)}
	}()
	return ch
}

func wait(t *testing.T, ch <-chan answer) answer {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("call: %v", a.err)
		}
		return a
	case <-time.After(2 * bound):
		t.Fatal("no answer in time")
	}
	return answer{}
}

// apiError checks an answer is the API's error shape with the status and type.
func apiError(t *testing.T, a answer, status int, typ, msgPart string) {
	t.Helper()
	var e struct {
		ID      string `json:"id"`
		Code    int    `json:"code"`
		Type    string `json:"type"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal([]byte(a.body), &e); err != nil {
		t.Fatalf("status %d, body %q: not the error shape: %v", a.status, a.body, err)
	}
	if a.status != status || e.Code != status || e.Type != typ || !strings.HasPrefix(e.ID, "err_") || !strings.Contains(e.Message, msgPart) {
		t.Fatalf("got %d %+v, want %d %s with %q", a.status, e, status, typ, msgPart)
	}
}

func TestRelayRequestAndAnswer(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	tl := connected(t, s, ts, tunnelID)

	for _, tc := range []struct {
		name, method, path, body string
		header                   http.Header
		wantPath                 string
		wantQuery                *string
	}{
		{name: "a delivery", method: "POST", path: "/" + tunnelID, body: `{"event":{"id":"evt_1"}}`,
			header: http.Header{"X-Bp-Operation": {"event_received"}, "X-Bot-Id": {"bot_1"}}, wantPath: "/"},
		{name: "a path and a query", method: "GET", path: "/" + tunnelID + "/health/a%2Fb?x=1&y=%20", wantPath: "/health/a%2Fb", wantQuery: ptr("x=1&y=%20")},
		{name: "a repeated header", method: "PUT", path: "/" + tunnelID + "/x", body: "text",
			header: http.Header{"X-Many": {"a", "b"}}, wantPath: "/x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := call(ts, tc.method, tc.path, tc.header, tc.body)
			m := tl.mustNext()
			if m.Type != "request" || m.ID == "" || m.Method != tc.method || m.Path != tc.wantPath {
				t.Fatalf("request message %+v", m)
			}
			if (m.Query == nil) != (tc.wantQuery == nil) || (m.Query != nil && *m.Query != *tc.wantQuery) {
				t.Fatalf("query %v, want %v", m.Query, tc.wantQuery)
			}
			if tc.body == "" && m.Body != nil || tc.body != "" && (m.Body == nil || *m.Body != tc.body) {
				t.Fatalf("body %v, want %q", m.Body, tc.body)
			}
			for k, vs := range tc.header {
				got := m.Headers[strings.ToLower(k)]
				if len(vs) == 1 && got != vs[0] {
					t.Fatalf("header %s: %v", k, got)
				}
				if len(vs) > 1 && fmt.Sprint(got) != fmt.Sprint([]any{vs[0], vs[1]}) {
					t.Fatalf("header %s: %v", k, got)
				}
			}
			// Hop-by-hop headers and Content-Length stay on this side.
			for _, h := range []string{"connection", "content-length", "transfer-encoding"} {
				if _, ok := m.Headers[h]; ok {
					t.Fatalf("header %s relayed: %v", h, m.Headers)
				}
			}
			tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": 201,
				"headers": map[string]any{"content-type": "application/json", "x-list": []string{"1", "2"}, "content-length": "999", "x-num": 7},
				"body":    `{"ok":true}`})
			a := wait(t, ch)
			if a.status != 201 || a.body != `{"ok":true}` || a.header.Get("Content-Type") != "application/json" ||
				strings.Join(a.header.Values("X-List"), ",") != "1,2" || a.header.Get("X-Num") != "7" {
				t.Fatalf("answer %d %v %q", a.status, a.header, a.body)
			}
		})
	}

	// Answers may come in any order: each goes to its request.
	t.Run("concurrent requests answered out of order", func(t *testing.T) {
		const n = 8
		chans := make([]<-chan answer, n)
		for i := range chans {
			chans[i] = call(ts, "POST", "/"+tunnelID, nil, fmt.Sprintf(`{"n":%d}`, i))
		}
		msgs := make([]tunnelRequest, n)
		for i := range msgs {
			msgs[i] = tl.mustNext()
		}
		for i := n - 1; i >= 0; i-- {
			tl.send(map[string]any{"type": "response", "requestId": msgs[i].ID, "status": 200, "body": "echo " + *msgs[i].Body})
		}
		for i, ch := range chans {
			if a := wait(t, ch); a.status != 200 || a.body != fmt.Sprintf(`echo {"n":%d}`, i) {
				t.Fatalf("request %d got %d %q", i, a.status, a.body)
			}
		}
	})

	// An answer without "type" is accepted (the protocol's backwards
	// compatibility), one to no request is dropped.
	t.Run("untyped answer, stray answer", func(t *testing.T) {
		tl.send(map[string]any{"requestId": "treq_nobody", "status": 200})
		ch := call(ts, "GET", "/"+tunnelID, nil, "")
		m := tl.mustNext()
		tl.send(map[string]any{"requestId": m.ID, "status": 204})
		if a := wait(t, ch); a.status != 204 {
			t.Fatalf("got %d %q", a.status, a.body)
		}
	})
}

func ptr(s string) *string { return &s }

func TestAPIPathsAreNotTunnels(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	// A tail cannot take an API prefix: it would receive the API's calls.
	// The handshake goes to the API, which has no such operation.
	for _, id := range []string{"v1", "webhooks", "_s3", "V1"} {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		conn, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/"+id, nil)
		cancel()
		if err == nil {
			conn.CloseNow()
			t.Fatalf("a tail took the tunnel id %q", id)
		}
		if res == nil || res.StatusCode != 405 {
			t.Fatalf("tail %q: %v", id, err)
		}
	}
	connected(t, s, ts, "mytunnel")
	for _, tc := range []struct{ path, want string }{
		{"/v1/admin/bots", "the operation does not exist"},
		{"/nope", "the operation does not exist"},                          // no tail, not a bp dev id: the API's
		{"/mytunnel.x", "the operation does not exist"},                    // not a tunnel id
		{"/" + tunnelID, "no client is connected to tunnel"},               // bp dev's id, no tail yet: 502
		{"/" + strings.ToUpper(tunnelID) + "/x", "no client is connected"}, // any case
	} {
		a := wait(t, call(ts, "POST", tc.path, nil, "{}"))
		if tc.want == "the operation does not exist" {
			apiError(t, a, 405, "MethodNotFound", tc.want)
		} else {
			apiError(t, a, 502, "BadGateway", tc.want)
		}
	}
}

func TestInvalidTunnelIDs(t *testing.T) {
	_, ts := serve(t, tunnel.Options{})
	for _, path := range []string{"a.b", "a%20b", tunnelID + "/more", ""} {
		if code := dial(t, ts, path).closeCode(); code != tunnel.CloseInvalidTunnelID {
			t.Fatalf("tail at /%s closed with %d, want 4000", path, code)
		}
	}
}

// A page of another site, in a browser of this machine, cannot open a
// tunnel (the browser sends its Origin; the CLI sends none).
func TestOtherOriginsCannotOpenTunnels(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	conn, res, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/"+tunnelID,
		&websocket.DialOptions{HTTPHeader: http.Header{"Origin": {"https://evil.example"}}})
	if err == nil {
		conn.CloseNow()
		t.Fatal("a page of another origin opened a tunnel")
	}
	if res == nil || res.StatusCode != http.StatusForbidden || s.Connected(tunnelID) {
		t.Fatalf("handshake: %v", err)
	}
	// A malformed handshake, a POST asking for an upgrade: the API's error
	// shape, no tunnel.
	for _, tc := range []struct {
		method string
		header http.Header
		status int
		typ    string
	}{
		{"GET", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, 400, "InvalidPayload"},
		{"GET", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"8"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}}, 400, "InvalidPayload"},
		{"GET", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"}, "Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Origin": {"http://evil.example"}}, 403, "Forbidden"},
		{"POST", http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, 502, "BadGateway"}, // relayed: no tail
	} {
		apiError(t, wait(t, call(ts, tc.method, "/"+tunnelID, tc.header, "")), tc.status, tc.typ, "")
	}
}

func TestTunnelIDConflict(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	first := connected(t, s, ts, tunnelID)
	if code := dial(t, ts, tunnelID).closeCode(); code != tunnel.CloseTunnelIDConflict {
		t.Fatalf("second tail closed with %d, want 4001", code)
	}
	// The first keeps the tunnel.
	ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
	m := first.mustNext()
	first.send(map[string]any{"type": "response", "requestId": m.ID, "status": 200, "body": "first"})
	if a := wait(t, ch); a.status != 200 || a.body != "first" {
		t.Fatalf("got %d %q", a.status, a.body)
	}
}

func TestTimeout(t *testing.T) {
	s, ts := serve(t, tunnel.Options{Timeout: 300 * time.Millisecond})
	tl := connected(t, s, ts, tunnelID)
	start := time.Now()
	ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
	m := tl.mustNext() // read, never answered
	apiError(t, wait(t, ch), 504, "OperationTimeout", "no answer through tunnel")
	if d := time.Since(start); d > bound {
		t.Fatalf("answered after %s", d)
	}
	// The late answer goes nowhere; the tunnel still works.
	tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": 200})
	ch = call(ts, "POST", "/"+tunnelID, nil, "{}")
	m = tl.mustNext()
	tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": 200, "body": "ok"})
	if a := wait(t, ch); a.status != 200 || a.body != "ok" {
		t.Fatalf("got %d %q", a.status, a.body)
	}
}

func TestTailGone(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	tl := connected(t, s, ts, tunnelID)
	ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
	tl.mustNext()
	tl.conn.Close(websocket.StatusNormalClosure, "bye")
	apiError(t, wait(t, ch), 502, "BadGateway", "left before answering")
	eventually(t, func() bool { return !s.Connected(tunnelID) })
	apiError(t, wait(t, call(ts, "POST", "/"+tunnelID, nil, "{}")), 502, "BadGateway", "no client is connected")

	// A connection dropped without a close frame frees the id too.
	tl = connected(t, s, ts, tunnelID)
	tl.conn.CloseNow()
	eventually(t, func() bool { return !s.Connected(tunnelID) })
	// And the id can be taken again (bp dev reconnecting).
	tl = connected(t, s, ts, tunnelID)
	ch = call(ts, "POST", "/"+tunnelID, nil, "{}")
	m := tl.mustNext()
	tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": 200, "body": "back"})
	if a := wait(t, ch); a.body != "back" {
		t.Fatalf("got %d %q", a.status, a.body)
	}
}

func TestInvalidPayloadClosesTheTail(t *testing.T) {
	for _, msg := range []string{`not json`, `{"type":"response","status":200}`, `{"type":"request","id":"x"}`,
		`{"requestId":"x","status":"200"}`, `{"requestId":"x","status":200,"headers":{"a":{"b":1}}}`, `[1]`} {
		t.Run(msg, func(t *testing.T) {
			s, ts := serve(t, tunnel.Options{})
			tl := connected(t, s, ts, tunnelID)
			ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
			tl.mustNext()
			ctx, cancel := context.WithTimeout(context.Background(), bound)
			defer cancel()
			if err := tl.conn.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
				t.Fatal(err)
			}
			if code := tl.closeCode(); code != tunnel.CloseInvalidResponse {
				t.Fatalf("closed with %d, want 4002", code)
			}
			apiError(t, wait(t, ch), 502, "BadGateway", "left before answering")
		})
	}
}

func TestBadAnswers(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	tl := connected(t, s, ts, tunnelID)
	for _, status := range []int{101, 99, 600} {
		ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
		m := tl.mustNext()
		tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": status})
		apiError(t, wait(t, ch), 502, "BadGateway", fmt.Sprintf("answered status %d", status))
	}
	// Header names and values that cannot go on the wire are left out.
	ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
	m := tl.mustNext()
	tl.send(map[string]any{"type": "response", "requestId": m.ID, "status": 200, "body": "ok",
		"headers": map[string]any{"bad name": "x", "x-split": "a\r\nx-injected: 1", "x-good": "yes", "": "empty"}})
	a := wait(t, ch)
	if a.status != 200 || a.body != "ok" || a.header.Get("X-Good") != "yes" || a.header.Get("X-Injected") != "" || a.header.Get("X-Split") != "" {
		t.Fatalf("got %d %v %q", a.status, a.header, a.body)
	}
}

func TestLimits(t *testing.T) {
	s, ts := serve(t, tunnel.Options{MaxTunnels: 2, MaxInFlight: 2, MaxBodyBytes: 1000, MaxMessageBytes: 4096})
	tl := connected(t, s, ts, tunnelID)
	connected(t, s, ts, "second")

	t.Run("too many tunnels", func(t *testing.T) {
		if code := dial(t, ts, "third").closeCode(); code != tunnel.CloseTooManyTunnels {
			t.Fatalf("closed with %d, want 1013", code)
		}
	})
	t.Run("body too large", func(t *testing.T) {
		apiError(t, wait(t, call(ts, "POST", "/"+tunnelID, nil, strings.Repeat("x", 1001))), 413, "PayloadTooLarge", "1000 bytes")
	})
	t.Run("body not text", func(t *testing.T) {
		apiError(t, wait(t, call(ts, "POST", "/"+tunnelID, nil, "\xff\xfe")), 415, "UnsupportedMediaType", "UTF-8")
	})
	t.Run("too many in flight", func(t *testing.T) {
		a, b := call(ts, "POST", "/"+tunnelID, nil, "1"), call(ts, "POST", "/"+tunnelID, nil, "2")
		m1, m2 := tl.mustNext(), tl.mustNext()
		apiError(t, wait(t, call(ts, "POST", "/"+tunnelID, nil, "3")), 429, "RateLimited", "2 requests waiting")
		tl.send(map[string]any{"requestId": m1.ID, "status": 200})
		tl.send(map[string]any{"requestId": m2.ID, "status": 200})
		wait(t, a)
		wait(t, b)
	})
	t.Run("message too large", func(t *testing.T) {
		ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
		m := tl.mustNext()
		tl.send(map[string]any{"requestId": m.ID, "status": 200, "body": strings.Repeat("x", 5000)})
		if code := tl.closeCode(); code != websocket.StatusMessageTooBig {
			t.Fatalf("closed with %d, want 1009", code)
		}
		apiError(t, wait(t, ch), 502, "BadGateway", "left before answering")
	})
}

func TestSilentTailIsDropped(t *testing.T) {
	s, ts := serve(t, tunnel.Options{IdleTimeout: 300 * time.Millisecond})
	tl := connected(t, s, ts, tunnelID)
	// Hellos keep it: well past the idle timeout.
	for i := 0; i < 6; i++ {
		time.Sleep(100 * time.Millisecond)
		tl.send(map[string]any{"type": "hello"})
	}
	if !s.Connected(tunnelID) {
		t.Fatal("a tail saying hello was dropped")
	}
	// Silence drops it.
	if code := tl.closeCode(); code != tunnel.CloseIdle {
		t.Fatalf("closed with %d, want %d", code, tunnel.CloseIdle)
	}
	eventually(t, func() bool { return !s.Connected(tunnelID) })
}

func TestCloseEndsTunnels(t *testing.T) {
	s, ts := serve(t, tunnel.Options{})
	tl := connected(t, s, ts, tunnelID)
	ch := call(ts, "POST", "/"+tunnelID, nil, "{}")
	tl.mustNext()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	if code := tl.closeCode(); code != websocket.StatusGoingAway {
		t.Fatalf("closed with %d, want 1001", code)
	}
	apiError(t, wait(t, ch), 502, "BadGateway", "left before answering")
	select {
	case <-done:
	case <-time.After(bound):
		t.Fatal("Close did not return")
	}
	if code := dial(t, ts, "late").closeCode(); code != websocket.StatusGoingAway {
		t.Fatalf("a tail after Close closed with %d", code)
	}
}

// BenchmarkRelay: one request through the tunnel and its answer, the tail
// a Go client on loopback (the CLI adds its own hop to the bot).
func BenchmarkRelay(b *testing.B) {
	s, ts := serve(b, tunnel.Options{})
	ctx := context.Background()
	conn, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/"+tunnelID, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.CloseNow()
	go func() {
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			var m tunnelRequest
			_ = json.Unmarshal(data, &m)
			out, _ := json.Marshal(map[string]any{"type": "response", "requestId": m.ID, "status": 200, "body": "{}"})
			_ = conn.Write(ctx, websocket.MessageText, out)
		}
	}()
	for !s.Connected(tunnelID) {
		time.Sleep(time.Millisecond)
	}
	body := strings.Repeat(`{"event":{"id":"evt_1","payload":{"text":"hello"}}}`, 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := http.Post(ts.URL+"/"+tunnelID, "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			b.Fatal(res.StatusCode)
		}
	}
}
