package worker_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/platform"
	"github.com/botforge/platform/shared/worker"
)

type source struct{ code []byte }

func (s source) Code(context.Context, string) ([]byte, error) { return s.code, nil }
func (s source) BotToken(context.Context, platform.Bot) (string, func(), error) {
	return "bp_bak_x", func() {}, nil
}
func (s source) IntegrationToken(context.Context, platform.Integration) (string, func(), error) {
	return "bp_iak_x", func() {}, nil
}

// slowBundle answers after 300 ms, with the most calls it ever had in
// flight at once.
const slowBundle = `let inFlight = 0, most = 0
exports.handler = async () => {
  inFlight++; most = Math.max(most, inFlight)
  await new Promise((r) => setTimeout(r, 300))
  inFlight--
  return { status: 200, body: JSON.stringify({ most }) }
}`

// TestMaxConcurrency: an integration's maxConcurrency bounds the calls in
// flight to its worker; calls beyond wait for a slot, and past QueueWait
// get a retryable 503 in the API's error shape. Without it, calls run
// side by side.
func TestMaxConcurrency(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("node is not installed")
	}
	m := &worker.Manager{Dir: t.TempDir(), Source: source{[]byte(slowBundle)}, APIURL: func() string { return "http://127.0.0.1:1" }}
	t.Cleanup(func() { m.Close() })
	ctx := context.Background()
	burst := func(i platform.Integration, n int) (statuses []int, bodies []string) {
		t.Helper()
		u, err := m.IntegrationURL(ctx, i)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res, err := http.Post(u, "application/json", strings.NewReader("{}"))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				mu.Lock()
				statuses, bodies = append(statuses, res.StatusCode), append(bodies, string(b))
				mu.Unlock()
			}()
		}
		wg.Wait()
		return statuses, bodies
	}
	most := func(bodies []string) int {
		n := 0
		for _, b := range bodies {
			var v struct{ Most int }
			if json.Unmarshal([]byte(b), &v) == nil && v.Most > n {
				n = v.Most
			}
		}
		return n
	}
	two := int64(2)
	// Bounded at 2: 6 calls all answered, never more than 2 at once.
	st, bodies := burst(platform.Integration{ID: "intver_a", CodeKey: "k", MaxConcurrency: &two}, 6)
	for _, s := range st {
		if s != 200 {
			t.Fatalf("bounded calls: %v %v", st, bodies)
		}
	}
	if got := most(bodies); got != 2 {
		t.Fatalf("at most %d in flight with maxConcurrency 2, want 2", got)
	}
	// Unbounded: side by side.
	_, bodies = burst(platform.Integration{ID: "intver_b", CodeKey: "k"}, 4)
	if got := most(bodies); got < 3 {
		t.Fatalf("at most %d in flight without maxConcurrency", got)
	}
	// A short queue: the calls beyond the slot and the wait get 503.
	m.QueueWait = 100 * time.Millisecond
	one := int64(1)
	st, bodies = burst(platform.Integration{ID: "intver_c", CodeKey: "k", MaxConcurrency: &one}, 3)
	ok, busy := 0, 0
	for k, s := range st {
		switch {
		case s == 200:
			ok++
		case s == 503 && strings.Contains(bodies[k], `"type":"ServiceUnavailable"`) && strings.Contains(bodies[k], "maxConcurrency (1 calls in flight)"):
			busy++
		}
	}
	if ok != 1 || busy != 2 {
		t.Fatalf("queue of 100 ms: %v %v", st, bodies)
	}
}
