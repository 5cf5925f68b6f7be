package awslocal

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReservedConcurrencyThrottles: a function reserving one execution,
// that execution held by a stream. A second request at its URL is refused
// at once with the function URL's 429; an API Gateway route to it answers
// 503; an invocation as an event source makes it (Invoke) waits, retrying,
// and runs once the stream ends and gives its execution back.
func TestReservedConcurrencyThrottles(t *testing.T) {
	u := newURLFunctions(t)
	url, lf := u.add("reserved", 30, FunctionURLConfig{AuthType: "NONE", InvokeMode: "RESPONSE_STREAM"})
	lf.fn.Reserved = 1
	acct, err := newAccount(10, []*Function{lf.fn})
	if err != nil {
		t.Fatal(err)
	}
	lf.account = acct
	if _, err := newAccount(10, []*Function{{LogicalID: "greedy", Reserved: 10}}); err == nil {
		t.Fatal("a reservation leaving no unreserved concurrency was accepted")
	}

	release := filepath.Join(t.TempDir(), "release")
	res, err := http.Get(url + "/stream?release=" + release)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if l := readLine(t, br); res.StatusCode != http.StatusCreated || l != "first\n" {
		t.Fatalf("the held stream: %d %q", res.StatusCode, l)
	}

	res2, err := http.Get(url + "/stream?release=" + release)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res2.Body)
	res2.Body.Close()
	if res2.StatusCode != http.StatusTooManyRequests || string(b) != `{"Message":"Rate Exceeded."}` || res2.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("a stream beyond the reservation: %d %s", res2.StatusCode, b)
	}

	gw := &apiGateway{routes: []Route{{Method: "ANY", Path: "$default", Function: lf.fn}},
		invoke: func(ctx context.Context, _ *Function, payload []byte) invokeResult {
			return lf.invokeSync(ctx, payload)
		}}
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest("GET", "/plain", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Body.String() != `{"message":"Service Unavailable"}` {
		t.Fatalf("API Gateway to the throttled function: %d %s", rec.Code, rec.Body.String())
	}

	done := make(chan invokeResult, 1)
	go func() {
		done <- lf.Invoke(context.Background(), []byte(`{"version":"2.0","rawPath":"/plain","requestContext":{"http":{"method":"GET"}}}`))
	}()
	// The retrying invocation is throttled at least once while the stream
	// holds the execution (waited for, not slept on).
	for deadline := time.Now().Add(10 * time.Second); acct.Throttles()["reserved"] < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("throttles %v: the event source's invocation was not refused while the stream held the execution", acct.Throttles())
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case r := <-done:
		t.Fatalf("the invocation ran while the stream held the only execution: %+v", r)
	default:
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if rest, _ := io.ReadAll(br); string(rest) != "second\n" {
		t.Fatalf("the stream's end: %q", rest)
	}
	select {
	case r := <-done:
		if r.Err != nil || !strings.Contains(string(r.Payload), "world") {
			t.Fatalf("the retried invocation: %+v (%s)", r, r.Payload)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the retried invocation did not run once the stream gave its execution back")
	}
}
