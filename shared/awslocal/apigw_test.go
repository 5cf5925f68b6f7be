package awslocal

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// The HTTP API in front of the functions: routes as the template declares
// them, payload 2.0 events, and API Gateway's limits and errors.
func TestAPIGateway(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "http://api.local")
	if err != nil {
		t.Fatal(err)
	}
	var got events.APIGatewayV2HTTPRequest
	var gotFn string
	g := &apiGateway{routes: tpl.Routes, timeout: 200 * time.Millisecond, invoke: func(ctx context.Context, fn *Function, payload []byte) invokeResult {
		_ = json.Unmarshal(payload, &got)
		gotFn = fn.LogicalID
		switch {
		case strings.Contains(got.RawPath, "slow"):
			<-ctx.Done()
			return invokeResult{Err: ctx.Err()}
		case strings.Contains(got.RawPath, "crash"):
			return invokeResult{Payload: []byte(`{"errorMessage":"boom"}`), FunctionError: true}
		}
		res, _ := json.Marshal(events.APIGatewayV2HTTPResponse{StatusCode: 201, Headers: map[string]string{"X-A": "b"}, Body: "aGk=", IsBase64Encoded: true, Cookies: []string{"c=1"}})
		return invokeResult{Payload: res}
	}}
	srv := httptest.NewServer(g)
	defer srv.Close()
	cases := []struct {
		name, method, path, body string
		fn, routeKey             string
		status                   int
		answer                   string
	}{
		{"greedy route", "POST", "/v1/admin/bots/x?a=1&a=2", `{"n":1}`, "AdminFunction", "ANY /v1/admin/{proxy+}", 201, "hi"},
		{"exact route", "GET", "/v1/tables", "", "TablesFunction", "ANY /v1/tables", 201, "hi"},
		{"console root", "GET", "/", "", "AdminFunction", "ANY /", 201, "hi"},
		{"$default", "GET", "/v1/unknown/x", "", "FilesFunction", "$default", 201, "hi"},
		{"webhooks", "POST", "/webhooks/abc", "x", "ChatFunction", "ANY /webhooks/{proxy+}", 201, "hi"},
		{"function error", "GET", "/v1/chat/crash", "", "ChatFunction", "ANY /v1/chat/{proxy+}", 500, `{"message":"Internal Server Error"}`},
		{"integration timeout", "GET", "/v1/chat/slow", "", "ChatFunction", "ANY /v1/chat/{proxy+}", 503, `{"message":"Service Unavailable"}`},
		{"body over 10 MB", "POST", "/v1/files/x", strings.Repeat("a", MaxRequestBody+1), "", "", 413, `{"message":"Request Entity Too Large"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gotFn, got = "", events.APIGatewayV2HTTPRequest{}
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Cookie", "s=1; t=2")
			req.Header.Set("X-Forwarded-For", "6.6.6.6")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status || strings.TrimSpace(string(b)) != tc.answer {
				t.Fatalf("%d %s", res.StatusCode, b)
			}
			if gotFn != tc.fn || got.RouteKey != tc.routeKey {
				t.Fatalf("function %q route %q", gotFn, got.RouteKey)
			}
			if tc.fn == "" {
				return
			}
			// The real peer is the sourceIp, appended to what the
			// client claimed, as API Gateway does.
			if got.RequestContext.HTTP.SourceIP != "127.0.0.1" || got.Headers["x-forwarded-for"] != "6.6.6.6, 127.0.0.1" {
				t.Errorf("sourceIp %q, x-forwarded-for %q", got.RequestContext.HTTP.SourceIP, got.Headers["x-forwarded-for"])
			}
			if got.Version != "2.0" || got.RequestContext.HTTP.Method != tc.method || len(got.Cookies) != 2 || got.Headers["content-type"] != "application/json" {
				t.Errorf("event: %+v", got)
			}
			if tc.status == 201 && (res.Header.Get("X-A") != "b" || res.Header.Get("Set-Cookie") != "c=1") {
				t.Errorf("headers: %v", res.Header)
			}
			if tc.name == "greedy route" && (got.PathParameters["proxy"] != "bots/x" || got.QueryStringParameters["a"] != "1,2" || got.Body != `{"n":1}`) {
				t.Errorf("event: %+v", got)
			}
		})
	}
}

// The stream's filter as Lambda applies the template's pattern (a prefix
// of the partition key: the outbox's shards): only inserts of outbox
// entries reach the dispatcher.
func TestStreamFilter(t *testing.T) {
	tpl, err := ReadTemplate("../../template.yaml", "../../Makefile", map[string]string{"PagingKey": "00"}, "")
	if err != nil {
		t.Fatal(err)
	}
	d := tpl.FunctionByName("DispatcherFunction")
	if d == nil || d.Stream == nil || len(d.Stream.Filters) != 1 {
		t.Fatalf("the dispatcher's stream filters: %+v", d)
	}
	var pat map[string]any
	if err := json.Unmarshal([]byte(d.Stream.Filters[0]), &pat); err != nil {
		t.Fatal(err)
	}
	rec := func(name, pk string) map[string]any {
		return map[string]any{"eventName": name, "dynamodb": map[string]any{"Keys": map[string]any{"pk": map[string]any{"S": pk}, "sk": map[string]any{"S": "x"}}}}
	}
	for _, tc := range []struct {
		rec  map[string]any
		want bool
	}{
		{rec("INSERT", "OUTBOX#bot_1#conv_1"), true}, {rec("INSERT", "OUTBOX#bot_1#delivery"), true},
		{rec("MODIFY", "OUTBOX#bot_1#conv_1"), false}, {rec("REMOVE", "OUTBOX#bot_1#conv_1"), false},
		{rec("INSERT", "OUTBOX"), false}, {rec("INSERT", "BOT#1"), false}, {rec("INSERT", "XOUTBOX#1"), false},
	} {
		if got := matchPattern(pat, tc.rec); got != tc.want {
			t.Errorf("%v: %v", tc.rec, got)
		}
	}
}

func TestNextFire(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 30, 15, 0, time.UTC) // a Friday
	for _, tc := range []struct {
		expr string
		want time.Time
	}{
		{"rate(1 minute)", now.Add(time.Minute)},
		{"rate(2 hours)", now.Add(2 * time.Hour)},
		{"cron(0 3 * * ? *)", time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)},
		{"cron(0 9 ? * 2,3,4,5,6 *)", time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)}, // Monday (EventBridge 2)
		{"cron(*/5 * * * ? *)", time.Date(2026, 11, 27, 10, 35, 0, 0, time.UTC)},
	} {
		got, err := nextFire(tc.expr, now)
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: %v %v (want %v)", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{"cron(0 3 * * ?)", "rate(0 minutes)", "every day", "cron(0 3 ? * 8 *)"} {
		if _, err := nextFire(bad, now); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
