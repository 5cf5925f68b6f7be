package httpapi_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/botforge/platform/shared/dynamo"
)

// BenchmarkRuntimeRoundTrip: the integration writes a user's message, the
// platform delivers it to the bot (message_created), the bot replies
// through the API, the platform delivers the reply to the integration
// (message_created). Reported: p50 and p99 of the whole round trip, one
// conversation at a time; then deliveries per second with 8 conversations
// in parallel, the process's CPU per delivery and the embedded DynamoDB's
// calls per delivery (the dispatcher's, API calls excluded).
//
//	go test -run '^$' -bench BenchmarkRuntimeRoundTrip -benchtime 200x ./shared/httpapi
func BenchmarkRuntimeRoundTrip(b *testing.B) {
	var f *runtimeFixture
	replies := make(chan string, 1024)
	// answered: when the bot's reply was acknowledged (its createMessage,
	// the bot about to answer its message_created); arrived: when the reply
	// reached the integration. Their gap is the stage a delivery's removal,
	// and before lanes38 the bot's answer, held up (negative: the reply
	// reached the integration before the bot's createMessage returned).
	answered, arrived := make(chan time.Time, 1024), make(chan time.Time, 1024)
	f = newRuntimeFixture(b, func(r received) (int, string) {
		if r.op() == "event_received" && r.typ() == "message_created" {
			ev := r.Body["event"].(map[string]any)
			f.as(false, "POST", "/v1/chat/messages", map[string]any{"conversationId": ev["conversationId"], "userId": f.botID,
				"type": "text", "payload": map[string]any{"text": "echo"}, "tags": map[string]string{}}, 201)
			select {
			case answered <- time.Now():
			default:
			}
		}
		return 200, "{}"
	})
	f.integ.answer = func(r received) (int, string) {
		if r.op() == "message_created" {
			select {
			case arrived <- time.Now():
			default:
			}
			replies <- r.Body["conversation"].(map[string]any)["id"].(string)
		}
		return 200, "{}"
	}
	user := f.as(true, "POST", "/v1/chat/users", map[string]any{"tags": map[string]string{}}, 201).Str("user.id")
	newConv := func() string {
		return f.as(true, "POST", "/v1/chat/conversations", map[string]any{"channel": "channel", "tags": map[string]string{}}, 201).Str("conversation.id")
	}
	send := func(conv string, i int) {
		f.as(true, "POST", "/v1/chat/messages", map[string]any{"conversationId": conv, "userId": user, "type": "text",
			"payload": map[string]any{"text": fmt.Sprint(i)}, "tags": map[string]string{}}, 201)
	}
	conv := newConv()
	stepped0 := f.Platform.Dynamo.KeysStepped()
	d := make([]time.Duration, 0, b.N)
	g := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		send(conv, i)
		<-replies
		d = append(d, time.Since(start))
		g = append(g, (<-arrived).Sub(<-answered))
	}
	b.StopTimer()
	// Store keys the Queries walked per round trip in one conversation:
	// with b.N in the thousands, whether that grows with its history.
	b.ReportMetric(float64(f.Platform.Dynamo.KeysStepped()-stepped0)/float64(b.N), "keys-stepped/round-trip")
	slices.Sort(d)
	slices.Sort(g)
	b.ReportMetric(float64(d[len(d)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(d[len(d)*99/100].Microseconds())/1000, "p99-ms")
	// The reply acknowledged to the bot -> the reply at the integration (its p50).
	b.ReportMetric(float64(g[len(g)/2].Microseconds())/1000, "answer-to-reply-p50-ms")

	// Throughput: 8 conversations, each a sequence of round trips.
	const convs, per = 8, 25
	ids := make([]string, convs)
	for i := range ids {
		ids[i] = newConv()
	}
	before, stepped := f.Platform.Dynamo.Calls(), f.Platform.Dynamo.KeysStepped()
	var apiCalls int64
	var mu sync.Mutex
	f.Platform.OnUsage(func(op string, u *dynamo.Usage) {
		mu.Lock()
		apiCalls += int64(u.Calls(""))
		mu.Unlock()
	})
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				send(c, i)
			}
		}()
	}
	wg.Wait()
	for range convs * per {
		<-replies
	}
	elapsed := time.Since(start)
	cpu := cpuTime() - cpu0
	f.Platform.OnUsage(nil)
	var total int64
	for op, n := range f.Platform.Dynamo.Calls() {
		total += n - before[op]
	}
	deliveries := float64(2 * convs * per) // to the bot and to the integration
	b.ReportMetric(deliveries/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(cpu.Microseconds())/deliveries/1000, "cpu-ms/delivery")
	mu.Lock()
	b.ReportMetric(float64(total-apiCalls)/deliveries, "ddb-calls/delivery")
	// Store keys the Queries walked per delivery (API calls included): the
	// items they read and the tombstones and older versions they stepped
	// over (it grew with the conversation's history before dead ranges).
	b.ReportMetric(float64(f.Platform.Dynamo.KeysStepped()-stepped)/deliveries, "keys-stepped/delivery")
	mu.Unlock()
	if os.Getenv("RUNTIME_BENCH_VERBOSE") != "" {
		b.Logf("calls: %v (API: %d)", f.Platform.Dynamo.Calls(), apiCalls)
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
