package chatapi_test

import (
	"bytes"
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

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/awslabs/aws-lambda-go-api-proxy/httpadapter"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/chatapi"
	"github.com/botforge/platform/shared/clientip"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/httpapi"
	"github.com/botforge/platform/shared/listen"
	"github.com/botforge/platform/shared/runtime"
)

// setLimit sets one of the package's limits for the test.
func setLimit[T any](t *testing.T, v *T, to T) {
	was := *v
	*v = to
	t.Cleanup(func() { *v = was })
}

// createUsers makes POST /users calls, each claiming the address xff(i)
// in X-Forwarded-For, and answers how many were created and the refusals.
func createUsers(s *site, n int, xff func(i int) string) (created int, refusals []string) {
	s.t.Helper()
	for i := 0; i < n; i++ {
		r := s.f.Do(apitestReq("POST", s.webhookURL+"/users", map[string]string{"X-Forwarded-For": xff(i)}))
		switch r.Status {
		case 201:
			created++
		case 429:
			refusals = append(refusals, fmt.Sprint(r.Body["message"]))
		default:
			s.t.Fatalf("POST /users: %d %s", r.Status, r.Raw)
		}
	}
	return created, refusals
}

func distinct(i int) string { return fmt.Sprintf("198.18.%d.%d", i/250, i%250+1) }

// TestForgedForwardedFor: with no trusted proxy, POST /users claiming a
// new address in X-Forwarded-For each time is limited as from one
// address (the socket's peer), and a stream per claimed address too; the
// 429 says it is the limit per address.
func TestForgedForwardedFor(t *testing.T) {
	setLimit(t, &chatapi.MaxUsersPerAddress, 5)
	setLimit(t, &chatapi.MaxStreamsPerAddress, 3)
	s := newSite(t, map[string]any{})
	created, refusals := createUsers(s, 20, distinct)
	if created != 5 || len(refusals) != 15 {
		t.Fatalf("%d created, %d refused, want 5 and 15 (one address)", created, len(refusals))
	}
	if !strings.Contains(refusals[0], "the limit per address") || !strings.Contains(refusals[0], "127.0.0.1") {
		t.Fatalf("refusal %q does not say the limit per address of 127.0.0.1", refusals[0])
	}
	// Streams: other users' keys (users made in another window), each
	// stream claiming another address: 3, then the address's limit.
	setLimit(t, &chatapi.MaxUsersPerAddress, 100)
	for i := 0; i < 4; i++ {
		key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
		conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
		status, msg, stop := openStream(t, s.webhookURL, key, conv, distinct(100+i))
		t.Cleanup(stop)
		if want := map[bool]int{true: 200, false: 429}[i < 3]; status != want {
			t.Fatalf("stream %d: %d %s, want %d", i+1, status, msg, want)
		}
		if i == 3 && !strings.Contains(msg, "the limit per address") {
			t.Fatalf("stream refusal %q does not say the limit per address", msg)
		}
	}
}

// TestTrustedProxyForwardedFor: behind a trusted proxy (the platform
// started with PLATFORM_TRUSTED_PROXIES, as --trusted-proxies sets it),
// each forwarded client is limited on its own: distinct clients all pass,
// one client past the limit is refused, however it forges the left part.
func TestTrustedProxyForwardedFor(t *testing.T) {
	t.Setenv(clientip.EnvTrustedProxies, "127.0.0.0/8, ::1")
	setLimit(t, &chatapi.MaxUsersPerAddress, 5)
	s := newSite(t, map[string]any{})
	if created, refusals := createUsers(s, 20, distinct); created != 20 {
		t.Fatalf("%d of 20 distinct forwarded clients created (refused: %v)", created, refusals)
	}
	created, refusals := createUsers(s, 8, func(i int) string { return distinct(1000+i) + ", 192.0.2.77" })
	if created != 5 || len(refusals) != 3 || !strings.Contains(refusals[0], "192.0.2.77") || !strings.Contains(refusals[0], "the limit per address") {
		t.Fatalf("one forwarded client forging the left part: %d created, refused %v; want 5, then the limit per address of 192.0.2.77", created, refusals)
	}
}

// TestForwardedForOnTheLambdaPath: the chat function's path on AWS (API
// Gateway's payload 2.0 event through aws-lambda-go-api-proxy's
// httpadapter, as runtime.StartLambda serves it): the client is the
// event's sourceIp whatever X-Forwarded-For claims; with the proxy in
// front trusted (a CloudFront), the forwarded client.
func TestForwardedForOnTheLambdaPath(t *testing.T) {
	setLimit(t, &chatapi.MaxUsersPerAddress, 3)
	s := newSite(t, map[string]any{})
	path := strings.TrimPrefix(s.webhookURL, s.f.URL) + "/users"
	chatFunction := func(trusted string) func(xff, source string) (int, string) {
		rv, err := clientip.Parse(trusted)
		if err != nil {
			t.Fatal(err)
		}
		store := dynamo.New(s.f.Platform.Store.Client(), runtime.FromEnv().Table)
		h := httpapi.New(httpapi.Config{Store: store, PagingKey: bytes.Repeat([]byte{7}, 32), ClientIP: rv,
			Builtins: runtime.BuiltinsWith(listen.NewHub(), nil, nil, store.Limiter()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat)
		adapter := httpadapter.NewV2(h)
		return func(xff, source string) (int, string) {
			ev := events.APIGatewayV2HTTPRequest{Version: "2.0", RawPath: path, Body: "{}",
				Headers: map[string]string{"content-type": "application/json", "x-forwarded-for": xff + ", " + source}}
			ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.SourceIP = "POST", path, source
			res, err := adapter.ProxyWithContext(context.Background(), ev)
			if err != nil {
				t.Fatal(err)
			}
			var e struct{ Message string }
			_ = json.Unmarshal([]byte(res.Body), &e)
			return res.StatusCode, e.Message
		}
	}
	direct := chatFunction("")
	for i := 0; i < 4; i++ {
		status, msg := direct(distinct(i), "203.0.113.50")
		if want := map[bool]int{true: 201, false: 429}[i < 3]; status != want || (i == 3 && !strings.Contains(msg, "(203.0.113.50) (the limit per address)")) {
			t.Fatalf("call %d from 203.0.113.50 claiming %s: %d %q, want %d (limited as 203.0.113.50)", i+1, distinct(i), status, msg, want)
		}
	}
	// A CloudFront in front (its edges 198.51.100.0/24, trusted): the
	// client it forwards is the one counted.
	behindCDN := chatFunction("198.51.100.0/24")
	for i := 0; i < 6; i++ {
		if status, msg := behindCDN("6.6.6."+fmt.Sprint(i)+", "+distinct(200+i), "198.51.100.10"); status != 201 {
			t.Fatalf("forwarded client %d behind a trusted proxy: %d %q", i, status, msg)
		}
	}
	for i := 0; i < 4; i++ {
		status, msg := behindCDN("6.6.6."+fmt.Sprint(i)+", 192.0.2.99", "198.51.100.10")
		if want := map[bool]int{true: 201, false: 429}[i < 3]; status != want || (i == 3 && !strings.Contains(msg, "192.0.2.99")) {
			t.Fatalf("call %d of forwarded 192.0.2.99: %d %q, want %d", i+1, status, msg, want)
		}
	}
}

// TestForwardedForOnTheStreamFunctionPath: the streaming function's path
// on AWS (a function URL event through lambdaurl, as
// runtime.StartChatStream serves it): the client is the event's sourceIp
// whatever X-Forwarded-For claims.
func TestForwardedForOnTheStreamFunctionPath(t *testing.T) {
	setLimit(t, &chatapi.MaxUsersPerAddress, 3)
	s := newSite(t, map[string]any{})
	path := strings.TrimPrefix(s.webhookURL, s.f.URL) + "/users"
	store := dynamo.New(s.f.Platform.Store.Client(), runtime.FromEnv().Table)
	invoke := lambdaurl.Wrap(httpapi.New(httpapi.Config{Store: store, PagingKey: bytes.Repeat([]byte{7}, 32),
		Builtins: runtime.BuiltinsWith(listen.NewHub(), nil, nil, store.Limiter()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat))
	for i := 0; i < 4; i++ {
		ev := &events.LambdaFunctionURLRequest{RawPath: path, Body: "{}",
			Headers: map[string]string{"content-type": "application/json", "x-forwarded-for": distinct(i) + ", 203.0.113.60"}}
		ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.SourceIP = "POST", path, "203.0.113.60"
		res, err := invoke(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		if want := map[bool]int{true: 201, false: 429}[i < 3]; res.StatusCode != want || (i == 3 && !strings.Contains(string(body), "(203.0.113.60) (the limit per address)")) {
			t.Fatalf("call %d from 203.0.113.60 claiming %s: %d %s, want %d (limited as 203.0.113.60)", i+1, distinct(i), res.StatusCode, body, want)
		}
	}
}

// openStream opens listenConversation at base (claiming address xff when
// set) and answers its status and, when refused, its message; stop ends
// it.
func openStream(t *testing.T, base, key, conv, xff string) (status int, msg string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/conversations/"+conv+"/listen", nil)
	req.Header.Set("x-user-key", key)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 {
		var e struct{ Message string }
		_ = json.NewDecoder(res.Body).Decode(&e)
		res.Body.Close()
		cancel()
		return res.StatusCode, e.Message, func() {}
	}
	return 200, "", func() { cancel(); res.Body.Close() }
}

// TestStreamLimitsAcrossFunctions: two chat stream functions (two
// handlers with their own limiter, as two execution environments) over
// one table: a user's streams on both count together; past MaxListeners
// in total either refuses, saying the limit per user key; a stream that
// ends frees its slot for the other. (A holder that dies has its slot
// reclaimed by the first take refused after its heartbeat expired:
// TestSharedLimitHoldAcrossProcesses in shared/dynamo.)
func TestStreamLimitsAcrossFunctions(t *testing.T) {
	s := newSite(t, map[string]any{})
	fn := func() string {
		store := dynamo.New(s.f.Platform.Store.Client(), runtime.FromEnv().Table)
		srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: store, PagingKey: bytes.Repeat([]byte{7}, 32),
			Builtins: runtime.BuiltinsWith(listen.NewHub(), nil, nil, store.Limiter()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat))
		t.Cleanup(srv.Close)
		return srv.URL + strings.TrimPrefix(s.webhookURL, s.f.URL)
	}
	one, two := fn(), fn()
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	var stops []func()
	for i := 0; i < chatapi.MaxListeners; i++ {
		base := []string{one, two}[i%2]
		status, msg, stop := openStream(t, base, key, conv, "")
		if status != 200 {
			t.Fatalf("stream %d: %d %s", i+1, status, msg)
		}
		stops = append(stops, stop)
	}
	defer func() {
		for _, f := range stops {
			f()
		}
	}()
	for _, base := range []string{one, two, s.webhookURL} {
		status, msg, stop := openStream(t, base, key, conv, "")
		stop()
		if status != 429 || !strings.Contains(msg, "the limit per user key") {
			t.Fatalf("one stream too many: %d %q, want 429 naming the limit per user key", status, msg)
		}
	}
	// The first stream (on function one) ends: function two may open one,
	// once the end is seen (the release follows the client's leaving).
	stops[0]()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, msg, stop := openStream(t, two, key, conv, "")
		if status == 200 {
			stops[0] = stop
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ended stream's slot was not freed: %d %q", status, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
	status, _, stop := openStream(t, one, key, conv, "")
	stop()
	if status != 429 {
		t.Fatalf("after the replacement: %d, want 429", status)
	}
}

func apitestReq(method, url string, hdr map[string]string) apitest.Req {
	return apitest.Req{Method: method, URL: url, Headers: hdr, Body: map[string]any{}}
}

// TestLimitsConfigured: the installation's configuration sets its own
// limits (in place of the defaults): 2 users per address, then 429 saying
// at most 2; a stream per address, then 429; an invalid value is refused
// at installation (400).
func TestLimitsConfigured(t *testing.T) {
	s := newSite(t, map[string]any{"limits": map[string]any{"usersPerAddress": 2, "streamsPerAddress": 1}})
	var keys []string
	for i := 0; i < 2; i++ {
		keys = append(keys, s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string))
	}
	if code, out := s.chat("POST", "/users", "", map[string]any{}); code != 429 || !strings.Contains(fmt.Sprint(out["message"]), "at most 2 every") {
		t.Fatalf("third user: %d %v, want 429 saying at most 2", code, out)
	}
	for i, key := range keys {
		conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
		status, msg, stop := openStream(t, s.webhookURL, key, conv, "")
		t.Cleanup(stop)
		if want := map[bool]int{true: 200, false: 429}[i == 0]; status != want || (i == 1 && !strings.Contains(msg, "1 streams on this Chat API (the limit per address)")) {
			t.Fatalf("stream %d: %d %q, want %d", i+1, status, msg, want)
		}
	}
	for _, bad := range []any{0, "many", map[string]any{"nope": 1}} {
		r := s.f.Do(apitestAdmin(s, map[string]any{"limits": map[string]any{"users": bad}}))
		if r.Status != 400 {
			t.Errorf("limits.users %v: %d %s, want 400", bad, r.Status, r.Raw)
		}
	}
}

func apitestAdmin(s *site, configuration map[string]any) apitest.Req {
	return apitest.Req{Method: "PUT", Path: "/v1/admin/bots/" + s.botID, Token: s.f.AdminToken, Headers: map[string]string{"x-workspace-id": s.ws},
		Body: map[string]any{"integrations": map[string]any{s.intID: map[string]any{"enabled": true, "configuration": configuration}}}}
}

// TestStreamLimitExactAcrossFunctions: 24 streams of one user key opened
// at once on two chat stream functions over one table: exactly
// MaxListeners open, every other one is refused naming the limit per user
// key.
func TestStreamLimitExactAcrossFunctions(t *testing.T) {
	s := newSite(t, map[string]any{})
	var bases []string
	for i := 0; i < 2; i++ {
		store := dynamo.New(s.f.Platform.Store.Client(), runtime.FromEnv().Table)
		srv := httptest.NewServer(httpapi.New(httpapi.Config{Store: store, PagingKey: bytes.Repeat([]byte{7}, 32),
			Builtins: runtime.BuiltinsWith(listen.NewHub(), nil, nil, store.Limiter()), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, httpapi.AreaChat))
		t.Cleanup(srv.Close)
		bases = append(bases, srv.URL+strings.TrimPrefix(s.webhookURL, s.f.URL))
	}
	key := s.must("POST", "/users", "", map[string]any{}, 201)["key"].(string)
	conv := s.must("POST", "/conversations", key, map[string]any{}, 201)["conversation"].(map[string]any)["id"].(string)
	type result struct {
		status int
		msg    string
		stop   func()
	}
	start, results := make(chan struct{}), make(chan result)
	for i := 0; i < 24; i++ {
		go func(base string) {
			<-start
			status, msg, stop := openStream(t, base, key, conv, "")
			results <- result{status, msg, stop}
		}(bases[i%2])
	}
	close(start)
	open := 0
	for i := 0; i < 24; i++ {
		r := <-results
		t.Cleanup(r.stop)
		switch {
		case r.status == 200:
			open++
		case r.status != 429 || !strings.Contains(r.msg, "the limit per user key"):
			t.Errorf("refused with %d %q, want 429 naming the limit per user key", r.status, r.msg)
		}
	}
	if open != chatapi.MaxListeners {
		t.Fatalf("%d streams open, want exactly %d", open, chatapi.MaxListeners)
	}
}
