package dynamo_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botforge/platform/shared/apitest"
	"github.com/botforge/platform/shared/dynamo"
	"github.com/botforge/platform/shared/platform"
)

// clock is a fake clock several limiters share (the processes of one
// platform see the same time).
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func limiters(t *testing.T, n int) (*dynamo.Store, *clock, []*dynamo.Limiter) {
	store := apitest.New(t).Platform.Store
	c := &clock{t: time.Now().Truncate(time.Minute).Add(time.Second)}
	out := make([]*dynamo.Limiter, n)
	for i := range out {
		out[i] = store.NewLimiter()
		out[i].Now, out[i].Window = c.Now, time.Minute
	}
	return store, c, out
}

func refusedWith(t *testing.T, err error, msg string) {
	t.Helper()
	if platform.TypeOf(err) != platform.ErrRateLimited || !strings.Contains(err.Error(), msg) {
		t.Fatalf("got %v, want RateLimited saying %q", err, msg)
	}
}

// TestSharedLimitHoldAcrossProcesses: two limiters over one table (two
// execution environments of the stream function) hold slots of one scope:
// past its max in total the next is refused, whichever holds; a released
// slot is free at once; a holder that dies (never releases, never renews)
// frees its slot when its lease runs out, two windows later at most, while
// the live holder's renewed slots stay counted.
func TestSharedLimitHoldAcrossProcesses(t *testing.T) {
	_, clk, ls := limiters(t, 2)
	a, b := ls[0], ls[1]
	ctx := context.Background()
	key := platform.Scope{Key: "test/streams/key", Max: 3, Refusal: "already holds 3 streams (the limit per user key)"}
	a1, err := a.Hold(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Hold(ctx, key); err != nil {
		t.Fatal(err)
	}
	b1, err := b.Hold(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key")
	_, err = a.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key")

	// A stream ends: its slot is free, taken by the other process.
	a1()
	a1() // twice is once
	b2, err := b.Hold(ctx, key)
	if err != nil {
		t.Fatalf("after a release: %v", err)
	}
	_, err = b.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key")

	// a dies holding one slot; b lives on and renews at each window.
	clk.Add(time.Minute)
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key") // a's lease still runs
	clk.Add(time.Minute)
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	b3, err := b.Hold(ctx, key)
	if err != nil {
		t.Fatalf("a dead holder's slot is not freed by its lease: %v", err)
	}
	_, err = b.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key") // b's renewed slots still count
	if n, err := b.Held(ctx, key.Key); err != nil || n != 3 {
		t.Fatalf("held %d (%v), want 3", n, err)
	}
	for _, f := range []func(){b1, b2, b3} {
		f()
	}
	if n, err := b.Held(ctx, key.Key); err != nil || n != 0 {
		t.Fatalf("held %d (%v) after every release, want 0", n, err)
	}
}

// TestSharedLimitHoldExact: 60 holders of 4 processes asking at once:
// exactly the max of the tightest scope succeed, the others are refused
// saying which limit.
func TestSharedLimitHoldExact(t *testing.T) {
	_, _, ls := limiters(t, 4)
	ctx := context.Background()
	for _, c := range []struct {
		name        string
		key, inst   int64
		want        int
		refusalWant string
	}{
		{"the key's limit", 7, 1000, 7, "per key"},
		{"the installation's limit", 1000, 11, 11, "per installation"},
	} {
		t.Run(c.name, func(t *testing.T) {
			key := platform.Scope{Key: "exact/key/" + c.name, Max: c.key, Refusal: "per key"}
			inst := platform.Scope{Key: "exact/inst/" + c.name, Max: c.inst, Refusal: "per installation"}
			start := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			ok := 0
			for i := 0; i < 60; i++ {
				wg.Add(1)
				go func(l *dynamo.Limiter) {
					defer wg.Done()
					<-start
					_, err := l.Hold(ctx, key, inst)
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err == nil:
						ok++
					case platform.TypeOf(err) != platform.ErrRateLimited || !strings.HasSuffix(err.Error(), ": "+c.refusalWant):
						t.Errorf("refused with %v, want RateLimited %q", err, c.refusalWant)
					}
				}(ls[i%len(ls)])
			}
			close(start)
			wg.Wait()
			if ok != c.want {
				t.Fatalf("%d held, want exactly %d", ok, c.want)
			}
			if n, _ := ls[0].Held(ctx, key.Key); n != int64(c.want) {
				t.Fatalf("the key's count %d, want %d", n, c.want)
			}
		})
	}
}

// TestSharedLimitCount: fixed windows shared by two processes: the
// address's max, then other addresses up to the installation's, each
// refusal naming its limit and counting nothing; the next window starts
// afresh.
func TestSharedLimitCount(t *testing.T) {
	_, clk, ls := limiters(t, 2)
	ctx := context.Background()
	w := 10 * time.Minute
	inst := platform.Scope{Key: "count/inst", Max: 5, Refusal: "per installation"}
	addr := func(a string) platform.Scope {
		return platform.Scope{Key: "count/addr/" + a, Max: 2, Refusal: "per address " + a}
	}
	for i := 0; i < 2; i++ {
		if err := ls[i].Count(ctx, w, addr("a"), inst); err != nil {
			t.Fatal(err)
		}
	}
	refusedWith(t, ls[0].Count(ctx, w, addr("a"), inst), "per address a")
	refusedWith(t, ls[1].Count(ctx, w, addr("a"), inst), "per address a")
	for _, a := range []string{"b", "b", "c"} { // 5 with a's 2
		if err := ls[1].Count(ctx, w, addr(a), inst); err != nil {
			t.Fatal(err)
		}
	}
	refusedWith(t, ls[0].Count(ctx, w, addr("d"), inst), "per installation")
	clk.Add(w)
	if err := ls[0].Count(ctx, w, addr("a"), inst); err != nil {
		t.Fatalf("next window: %v", err)
	}
}

// TestSharedLimitCost measures what the limits add in DynamoDB calls and
// units (the embedded DynamoDB bills as DynamoDB does; docs/chat-api.md
// "Limits" states these numbers).
func TestSharedLimitCost(t *testing.T) {
	_, clk, ls := limiters(t, 1)
	l := ls[0]
	scopes := []platform.Scope{{Key: "cost/key", Max: 5}, {Key: "cost/addr", Max: 100}, {Key: "cost/inst", Max: 10000}}
	measure := func(name string, f func(ctx context.Context), calls int, wcu float64) {
		t.Helper()
		ctx, u := dynamo.WithUsage(context.Background())
		f(ctx)
		t.Logf("%s: %s, %.0f write units, %.1f read units", name, u, u.WriteUnits, u.ReadUnits)
		if u.Calls("") != calls || u.WriteUnits != wcu || u.ReadUnits != 0 {
			t.Errorf("%s: %s %.1f WCU %.1f RCU, want %d calls and %.0f WCU", name, u, u.WriteUnits, u.ReadUnits, calls, wcu)
		}
	}
	var release func()
	measure("open a stream (3 scopes)", func(ctx context.Context) {
		var err error
		if release, err = l.Hold(ctx, scopes...); err != nil {
			t.Fatal(err)
		}
	}, 1, 12)
	clk.Add(time.Minute)
	measure("renew a window (3 scopes)", func(ctx context.Context) {
		if err := l.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}, 3, 3)
	measure("create a user (2 scopes)", func(ctx context.Context) {
		if err := l.Count(ctx, time.Minute, scopes[1], scopes[2]); err != nil {
			t.Fatal(err)
		}
	}, 1, 4)
	// The release runs on a context of its own: counted from the table.
	release()
}

// BenchmarkSharedLimit: what a stream's open (and end) and a user's
// creation take on the embedded DynamoDB (go test -run x -bench
// SharedLimit ./shared/dynamo).
func BenchmarkSharedLimit(b *testing.B) {
	store := apitest.New(b).Platform.Store
	l := store.NewLimiter()
	ctx := context.Background()
	scopes := []platform.Scope{{Key: "bench/key", Max: 5}, {Key: "bench/addr", Max: 100}, {Key: "bench/inst", Max: 10000}}
	b.Run("open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			release, err := l.Hold(ctx, scopes...)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			release()
			b.StartTimer()
		}
	})
	b.Run("create-user", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := l.Count(ctx, time.Hour, platform.Scope{Key: fmt.Sprintf("bench/addr/%d", i), Max: 100}, platform.Scope{Key: "bench/users", Max: 1 << 40}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
