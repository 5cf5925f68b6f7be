package awslocal

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestEdgeThrottling: the HTTP API's stand-in applies the stack's
// ApiThrottlingRateLimit and ApiThrottlingBurstLimit as API Gateway's
// default route throttling does: a token bucket over every route, the
// burst at once, then the rate; beyond, 429 {"message":"Too Many
// Requests"} and no function runs.
func TestEdgeThrottling(t *testing.T) {
	def, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "http://api.local")
	if err != nil {
		t.Fatal(err)
	}
	if b := def.apiThrottle(); b == nil || b.rate != 1000 || b.burst != 2000 {
		t.Fatalf("the template's defaults: %+v, want rate 1000, burst 2000", b)
	}
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile",
		map[string]string{"PagingKey": "00", "ApiThrottlingRateLimit": "2", "ApiThrottlingBurstLimit": "3"}, "http://api.local")
	if err != nil {
		t.Fatal(err)
	}
	b := tpl.apiThrottle()
	if b == nil || b.rate != 2 || b.burst != 3 {
		t.Fatalf("the parameters given: %+v, want rate 2, burst 3", b)
	}
	now := time.Unix(1_800_000_000, 0)
	b.now = func() time.Time { return now }
	invoked := 0
	g := &apiGateway{routes: tpl.Routes, throttle: b, invoke: func(ctx context.Context, fn *Function, payload []byte) invokeResult {
		invoked++
		return invokeResult{Payload: []byte(`{"statusCode":200,"body":"ok"}`)}
	}}
	status := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		g.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		body, _ := io.ReadAll(rec.Result().Body)
		return rec.Code, string(body)
	}
	// The burst, on routes of different functions alike; then 429.
	for i, path := range []string{"/v1/chat/x", "/v1/admin/bots", "/v1/tables"} {
		if code, body := status(path); code != 200 {
			t.Errorf("request %d of the burst: %d %s", i+1, code, body)
		}
	}
	if code, body := status("/v1/chat/x"); code != http.StatusTooManyRequests || body != `{"message":"Too Many Requests"}` {
		t.Errorf("beyond the burst: %d %s", code, body)
	}
	if invoked != 3 {
		t.Errorf("functions invoked %d times, want the burst's 3", invoked)
	}
	// Half a second at 2 a second: one more, then 429 again.
	now = now.Add(500 * time.Millisecond)
	if code, _ := status("/v1/chat/x"); code != 200 {
		t.Errorf("after half a second: %d", code)
	}
	if code, _ := status("/v1/chat/x"); code != http.StatusTooManyRequests {
		t.Errorf("the token spent: %d", code)
	}
	// An idle minute refills to the burst, no more.
	now = now.Add(time.Minute)
	passed := 0
	for range 10 {
		if code, _ := status("/v1/chat/x"); code == 200 {
			passed++
		}
	}
	if passed != 3 {
		t.Errorf("after a minute idle %d passed, want the burst's 3", passed)
	}
}
