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
		out[i].Now, out[i].Period = c.Now, time.Minute
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
// slot is free at once. A holder that dies (never releases, writes its
// heartbeat no more) keeps its slot counted while its heartbeat runs, and
// after it too until a take needs it: the first take refused once the
// heartbeat expired reclaims it, and the live holder's slots, which write
// nothing but its heartbeat, stay counted.
func TestSharedLimitHoldAcrossProcesses(t *testing.T) {
	_, clk, ls := limiters(t, 2)
	a, b := ls[0], ls[1]
	ctx := context.Background()
	key := platform.Scope{Key: "test/streams/key", Max: 3, Refusal: "already holds 3 streams (the limit per user key)"}
	held := func(want int64) {
		t.Helper()
		if n, err := b.Held(ctx, key.Key); err != nil || n != want {
			t.Fatalf("held %d (%v), want %d", n, err, want)
		}
	}
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

	// a dies holding one slot (its heartbeat, written at the start,
	// expires three periods on); b lives on and writes its heartbeat each
	// period. Until a's expires, a's slot holds.
	for i := 0; i < 3; i++ {
		clk.Add(time.Minute - time.Second)
		if err := b.Renew(ctx); err != nil {
			t.Fatal(err)
		}
		_, err = b.Hold(ctx, key)
		refusedWith(t, err, "the limit per user key")
		held(3)
	}
	clk.Add(10 * time.Second) // past a's heartbeat
	if err := b.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	held(3) // not freed before someone needs it
	b3, err := b.Hold(ctx, key)
	if err != nil {
		t.Fatalf("a dead holder's slot is not reclaimed by a refused take: %v", err)
	}
	held(3)
	_, err = b.Hold(ctx, key)
	refusedWith(t, err, "the limit per user key") // b's slots still count
	for _, f := range []func(){b1, b2, b3} {
		f()
	}
	held(0)
}

// TestSharedLimitDeadHolderPurgedOnce: a holder dies holding a scope's
// whole max; past its heartbeat, 60 takes of 4 live processes at once:
// each refused one purges the dead holder's count (conditioned on the
// count it read), so it is subtracted once, and exactly the max succeed.
func TestSharedLimitDeadHolderPurgedOnce(t *testing.T) {
	_, clk, ls := limiters(t, 5)
	ctx := context.Background()
	dead := ls[4]
	key := platform.Scope{Key: "purge/key", Max: 5, Refusal: "per key"}
	inst := platform.Scope{Key: "purge/inst", Max: 1000, Refusal: "per installation"}
	for i := 0; i < 5; i++ {
		if _, err := dead.Hold(ctx, key, inst); err != nil {
			t.Fatal(err)
		}
	}
	clk.Add(3*time.Minute + time.Second)
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
			case platform.TypeOf(err) != platform.ErrRateLimited || !strings.HasSuffix(err.Error(), ": per key"):
				t.Errorf("refused with %v, want RateLimited per key", err)
			}
		}(ls[i%4])
	}
	close(start)
	wg.Wait()
	if ok != 5 {
		t.Fatalf("%d held, want exactly 5", ok)
	}
	for _, s := range []platform.Scope{key, inst} {
		if n, err := ls[0].Held(ctx, s.Key); err != nil || n != 5 {
			t.Fatalf("%s counts %d (%v), want 5", s.Key, n, err)
		}
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
// "Limits" states these numbers): an open, an end, a user's creation, and
// a process's heartbeat, which is all its held streams cost while idle: one
// write per period whether it holds 1 stream or 50, none when it holds
// none.
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
	hold := func(ctx context.Context, scopes ...platform.Scope) func() {
		release, err := l.Hold(ctx, scopes...)
		if err != nil {
			t.Fatal(err)
		}
		return release
	}
	renew := func(ctx context.Context) {
		if err := l.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var first, second func()
	measure("open the process's first stream (heartbeat, 3 scopes)", func(ctx context.Context) { first = hold(ctx, scopes...) }, 2, 7)
	measure("open another stream (3 scopes)", func(ctx context.Context) { second = hold(ctx, scopes...) }, 1, 6)
	for i := 0; i < 3; i++ {
		clk.Add(time.Minute)
		measure("a period with 2 idle streams (heartbeat)", renew, 1, 1)
	}
	var many []func()
	for i := 0; i < 48; i++ {
		many = append(many, hold(context.Background(), platform.Scope{Key: fmt.Sprintf("cost/key/%d", i), Max: 5}, platform.Scope{Key: fmt.Sprintf("cost/addr/%d", i), Max: 100}, scopes[2]))
	}
	for i := 0; i < 3; i++ {
		clk.Add(time.Minute)
		measure("a period with 50 idle streams (heartbeat)", renew, 1, 1)
	}
	// A refusal reads the scope items for dead holders (their heartbeats
	// too, unless known to run: here the only holder is the process
	// itself).
	full := platform.Scope{Key: "cost/full", Max: 1}
	many = append(many, hold(context.Background(), full, scopes[1], scopes[2]))
	ctx, u := dynamo.WithUsage(context.Background())
	if _, err := l.Hold(ctx, full, scopes[1], scopes[2]); platform.TypeOf(err) != platform.ErrRateLimited {
		t.Fatalf("got %v, want a refusal", err)
	}
	t.Logf("a refused open (3 scopes, no dead holder): %s, %.0f write units, %.1f read units", u, u.WriteUnits, u.ReadUnits)
	if u.Calls("TransactWriteItems") != 1 || u.Calls("BatchGetItem") != 1 || u.Calls("") != 2 {
		t.Errorf("a refused open: %s, want 1 TransactWriteItems and 1 BatchGetItem", u)
	}
	measure("create a user (2 scopes)", func(ctx context.Context) {
		if err := l.Count(ctx, time.Minute, scopes[1], scopes[2]); err != nil {
			t.Fatal(err)
		}
	}, 1, 4)
	for _, f := range many {
		f()
	}
	measure("end a stream (3 scopes)", func(ctx context.Context) { l.SetReleaseContext(ctx); second() }, 3, 3)
	measure("end the scopes' last stream (3 scopes)", func(ctx context.Context) { l.SetReleaseContext(ctx); first() }, 3, 3)
	clk.Add(time.Minute)
	measure("a period with no stream", renew, 0, 0)
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

// TestSharedLimitCostManyHolders: a scope item names each holder with
// its share (17 bytes on DynamoDB, 16 on the embedded one, which counts
// a one-digit number a byte short): with 200 processes holding a slot in
// the installation's scope (the Lambda tier, one execution environment
// per stream) the item is between 3 and 4 KB, and an open's transaction
// costs 2 units per KB begun of it (docs/chat-api.md "Limits";
// shared/capacity's HolderBytes).
func TestSharedLimitCostManyHolders(t *testing.T) {
	_, _, ls := limiters(t, 201)
	ctx := context.Background()
	inst := platform.Scope{Key: "many/inst", Max: 10000}
	for i, l := range ls[:200] {
		if _, err := l.Hold(ctx, platform.Scope{Key: fmt.Sprintf("many/key/%d", i), Max: 5}, inst); err != nil {
			t.Fatal(err)
		}
	}
	ctx, u := dynamo.WithUsage(ctx)
	if _, err := ls[200].Hold(ctx, platform.Scope{Key: "many/key/last", Max: 5}, inst); err != nil {
		t.Fatal(err)
	}
	t.Logf("an open (2 scopes) beside 200 holders: %s, %.0f write units", u, u.WriteUnits)
	// The heartbeat's 1, the key's 2, the installation's 2 per KB begun:
	// 201 holders of 16 or 17 bytes, with the item's key and total, 4 KB.
	if want := 1 + 2 + 2*4.0; u.WriteUnits != want {
		t.Errorf("%.0f write units, want %.0f", u.WriteUnits, want)
	}
}

// TestSharedLimitStalledHolder: a process frozen past its heartbeat's
// expiry is purged by another's refused take; when it wakes, its next
// take is under a new id, and its old slot's release subtracts nothing
// again, neither from the purged count nor from the new slot's.
func TestSharedLimitStalledHolder(t *testing.T) {
	_, clk, ls := limiters(t, 2)
	a, b := ls[0], ls[1]
	ctx := context.Background()
	key := platform.Scope{Key: "stall/key", Max: 2, Refusal: "per key"}
	held := func(want int64) {
		t.Helper()
		if n, err := b.Held(ctx, key.Key); err != nil || n != want {
			t.Fatalf("held %d (%v), want %d", n, err, want)
		}
	}
	a1, err := a.Hold(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(3*time.Minute + time.Second) // a is frozen through it
	b1, err := b.Hold(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := b.Hold(ctx, key) // refused by a's stale slot, which it purges
	if err != nil {
		t.Fatalf("a frozen holder's slot is not reclaimed: %v", err)
	}
	held(2)
	if err := a.Renew(ctx); err != nil { // a wakes: its heartbeat lapsed
		t.Fatal(err)
	}
	_, err = a.Hold(ctx, key)
	refusedWith(t, err, "per key")
	b1()
	a2, err := a.Hold(ctx, key) // under a new id
	if err != nil {
		t.Fatal(err)
	}
	held(2)
	a1()
	held(2) // the purged slot is not subtracted twice, nor from a2's
	a2()
	b2()
	held(0)
}
