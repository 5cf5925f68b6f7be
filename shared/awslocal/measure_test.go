package awslocal_test

// The numbers of docs/deploy.md ("The AWS build on one machine"): each
// function's cold start under the stack, the p50 of createMessage,
// listMessages and findTableRows through the stack and through the local
// platform (`make run`), and the AWS calls each of those makes. Run with
// AWS_LOCAL_MEASURE=1 (it takes about a minute):
//
//	AWS_LOCAL_MEASURE=1 go test ./shared/awslocal -run TestMeasure -v

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
	"github.com/botforge/platform/shared/local"
)

type target struct {
	name  string
	url   string
	token string
	calls func() []awslocal.Request // nil for the local platform
}

func (tg target) stack() *stack {
	return &stack{Stack: &awslocal.Stack{URL: tg.url}, token: tg.token}
}

func TestMeasure(t *testing.T) {
	if os.Getenv("AWS_LOCAL_MEASURE") == "" {
		t.Skip("AWS_LOCAL_MEASURE=1 measures the stack against the local platform")
	}
	s := startStack(t, "")
	aws := target{name: "aws-local", url: s.URL, token: s.token, calls: s.Calls.Requests}

	dir := t.TempDir()
	p, err := local.Open(context.Background(), dir, "", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p.Handler)
	p.SetBaseURL(srv.URL)
	t.Cleanup(func() { srv.Close(); p.Close() })
	tok, _ := os.ReadFile(dir + "/admin-token")
	loc := target{name: "make run", url: srv.URL, token: string(tok)}

	const n = 200
	ops := []string{"createMessage", "listMessages", "findTableRows"}
	results := map[string]map[string]time.Duration{}
	callsPerOp := map[string]string{}
	for _, tg := range []target{aws, loc} {
		st := tg.stack()
		hdr, _ := st.botWithFile(t)
		conv := st.call(t, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"].(string)
		user := st.call(t, "POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"].(string)
		st.call(t, "POST", "/v1/tables", hdr, map[string]any{"name": "measureTable", "schema": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}}, 200)
		rows := []any{}
		for i := 0; i < 20; i++ {
			rows = append(rows, map[string]any{"n": i})
		}
		st.call(t, "POST", "/v1/tables/measureTable/rows", hdr, map[string]any{"rows": rows}, 200)
		run := map[string]func(){
			"createMessage": func() {
				st.call(t, "POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user,
					"type": "text", "payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
			},
			"listMessages":  func() { st.call(t, "GET", "/v1/chat/messages?conversationId="+conv, hdr, nil, 200) },
			"findTableRows": func() { st.call(t, "POST", "/v1/tables/measureTable/rows/find", hdr, map[string]any{"limit": 20}, 200) },
		}
		results[tg.name] = map[string]time.Duration{}
		for _, op := range ops {
			for i := 0; i < 10; i++ { // warm: every instance started
				run[op]()
			}
			var took []time.Duration
			for i := 0; i < n; i++ {
				before := 0
				if tg.calls != nil {
					before = len(tg.calls())
				}
				start := time.Now()
				run[op]()
				took = append(took, time.Since(start))
				if tg.calls != nil && i == n-1 {
					by := map[string]int{}
					// The serving function's requests (the Lambda
					// service's log writes are not the function's).
					for _, c := range tg.calls()[before:] {
						serving := c.Function == "ChatFunction" && op != "findTableRows" || c.Function == "TablesFunction" && op == "findTableRows"
						if serving && c.Service != "logs" {
							by[c.Operation]++
						}
					}
					var parts []string
					for a, k := range by {
						parts = append(parts, fmt.Sprintf("%s×%d", a, k))
					}
					sort.Strings(parts)
					callsPerOp[op] = strings.Join(parts, ", ")
				}
			}
			sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
			results[tg.name][op] = took[len(took)/2]
			t.Logf("%-9s %-14s p50 %6.2f ms  p95 %6.2f ms", tg.name, op, ms(took[len(took)/2]), ms(took[len(took)*95/100]))
		}
	}
	for _, op := range ops {
		t.Logf("AWS calls of one %s (serving function): %s", op, callsPerOp[op])
	}
	// The two functions no API call starts: upload completion (an
	// upload) and the scheduler (an event as EventBridge Scheduler sends).
	_, url := s.botWithFile(t)
	if status, body := put(t, url, "hello"); status != 200 {
		t.Fatalf("upload: %d %s", status, body)
	}
	if _, _, err := s.Invoke(context.Background(), "SchedulerFunction", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	byFn := map[string][]time.Duration{}
	for _, c := range s.ColdStarts() {
		byFn[c.Function] = append(byFn[c.Function], c.Took)
	}
	var fns []string
	for f := range byFn {
		fns = append(fns, f)
	}
	sort.Strings(fns)
	for _, f := range fns {
		d := byFn[f]
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		t.Logf("cold start %-26s %d instance(s), median %6.1f ms, max %6.1f ms", f, len(d), ms(d[len(d)/2]), ms(d[len(d)-1]))
	}
	_ = http.StatusOK
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
