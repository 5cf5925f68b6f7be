package awslocal_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/awslocal"
)

// lines collects the functions' output ("[LogicalId] line").
type lines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// emf is one Embedded Metric Format line of a function's output.
type emf struct {
	function string         // the logical id of the function that wrote it
	doc      map[string]any // the document
	name     string         // its metric
}

func (l *lines) emf() []emf {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []emf
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	for sc.Scan() {
		fn, rest, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "["), "] ")
		if !ok || !strings.Contains(rest, `"_aws"`) {
			continue
		}
		var d map[string]any
		if json.Unmarshal([]byte(rest), &d) != nil {
			continue
		}
		aws, _ := d["_aws"].(map[string]any)
		cw, _ := aws["CloudWatchMetrics"].([]any)
		if len(cw) != 1 {
			continue
		}
		m := cw[0].(map[string]any)
		if m["Namespace"] != "BotPlatform" {
			continue
		}
		out = append(out, emf{function: fn, doc: d, name: m["Metrics"].([]any)[0].(map[string]any)["Name"].(string)})
	}
	return out
}

// sum adds the values of a counter's lines matching the labels given, and
// max takes a gauge's largest.
func (l *lines) sum(name string, labels map[string]string) (total float64) {
	for _, e := range l.emf() {
		if e.name == name && matches(e.doc, labels) {
			v, _ := e.doc[name].(float64)
			total += v
		}
	}
	return total
}

func (l *lines) max(name string, labels map[string]string) (peak float64) {
	for _, e := range l.emf() {
		if e.name == name && matches(e.doc, labels) {
			v, _ := e.doc[name].(float64)
			peak = max(peak, v)
		}
	}
	return peak
}

func matches(d map[string]any, labels map[string]string) bool {
	for k, v := range labels {
		if d[k] != v {
			return false
		}
	}
	return true
}

// TestEMFMetrics: the stack run whole as `make aws-local` runs it; the
// functions write the platform's metrics as Embedded Metric Format lines
// to their output (their log groups): the chat function's requests, the
// dispatcher's deliveries; a bot answering 500 moves the retries and
// failures, a stalled one the outbox age.
func TestEMFMetrics(t *testing.T) {
	out := &lines{}
	s := startStackWith(t, awslocal.Options{FunctionOutput: out})
	stall := make(chan struct{})
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }))
	defer failing.Close()
	stalled := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-time.After(3 * time.Second):
		}
		w.WriteHeader(200)
	}))
	defer stalled.Close()
	defer close(stall)

	ws := s.call(t, "POST", "/v1/admin/workspaces", nil, map[string]any{"name": "emf"}, 200)["id"].(string)
	message := func(url string) string {
		bot := s.call(t, "POST", "/v1/admin/bots", map[string]string{"x-workspace-id": ws}, map[string]any{"name": "emf", "url": url}, 200)["bot"].(map[string]any)["id"].(string)
		hdr := map[string]string{"x-bot-id": bot}
		conv := s.call(t, "POST", "/v1/chat/conversations", hdr, map[string]any{"channel": "web", "tags": map[string]string{}}, 201)["conversation"].(map[string]any)["id"].(string)
		user := s.call(t, "POST", "/v1/chat/users", hdr, map[string]any{"tags": map[string]string{}}, 201)["user"].(map[string]any)["id"].(string)
		s.call(t, "POST", "/v1/chat/messages", hdr, map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": "hi"}, "tags": map[string]string{}}, 201)
		return bot
	}
	stalledBot := message(stalled.URL)
	failingBot := message(failing.URL)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); !cond(); time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 90 s", what)
			}
		}
	}
	waitFor("the chat function's createMessage requests", func() bool {
		return out.sum("platform_requests_total", map[string]string{"op": "createMessage", "code": "201"}) == 2
	})
	waitFor("the messages counted by bot", func() bool {
		return out.sum("platform_messages_total", map[string]string{"bot": stalledBot}) == 1 &&
			out.sum("platform_messages_total", map[string]string{"bot": failingBot}) == 1
	})
	// The stalled bot's delivery: delivered after ~3 s, its age the peak.
	waitFor("the stalled bot's delivery", func() bool {
		return out.sum("platform_deliveries_total", map[string]string{"kind": "event", "result": "delivered"}) == 1
	})
	if age := out.max("platform_outbox_oldest_age_seconds", nil); age < 2.5 {
		t.Errorf("outbox age published %v s, want the stalled delivery's ~3 s", age)
	}
	// The failing bot: retried (1, 2, 4, 8 s) within the invocation, then failed.
	waitFor("the failing bot's failure", func() bool {
		return out.sum("platform_delivery_failures_total", map[string]string{"kind": "event"}) == 1
	})
	if n := out.sum("platform_delivery_retries_total", map[string]string{"kind": "event"}); n != 4 {
		t.Errorf("retries published %v, want 4", n)
	}
	for _, e := range out.emf() {
		if e.name == "platform_delivery_failures_total" && e.function != "DispatcherFunction" {
			t.Errorf("failures published by %s", e.function)
		}
	}
	if n := out.sum("platform_cold_starts_total", nil); n < 2 {
		t.Errorf("cold starts published %v, want the chat and dispatcher functions' at least", n)
	}
}
