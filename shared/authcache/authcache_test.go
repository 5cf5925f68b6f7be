package authcache_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botforge/platform/shared/authcache"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newCache(c *clock) *authcache.Cache[string] {
	return &authcache.Cache[string]{Max: 100, Now: c.now}
}

// loader answers found (or not) and counts its reads.
type loader struct {
	reads atomic.Int64
	found atomic.Bool
	err   error
}

func (l *loader) load(context.Context) (string, bool, error) {
	l.reads.Add(1)
	return "principal", l.found.Load(), l.err
}

func TestFreshForTTLThenReadAgain(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	cache := newCache(c)
	l := &loader{}
	l.found.Store(true)
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if v, ok, err := cache.Get(ctx, "k", l.load); v != "principal" || !ok || err != nil {
			t.Fatalf("get: %q %v %v", v, ok, err)
		}
		c.add(authcache.TTL / 200) // 100 calls within half the TTL
	}
	if n := l.reads.Load(); n != 1 {
		t.Fatalf("%d reads within the TTL, want 1", n)
	}
	// Deleted elsewhere: still answered until the TTL is over, not after.
	l.found.Store(false)
	c.add(authcache.TTL/2 - time.Millisecond)
	if _, ok, _ := cache.Get(ctx, "k", l.load); !ok {
		t.Fatal("answered before its TTL ended")
	}
	c.add(time.Millisecond)
	if _, ok, _ := cache.Get(ctx, "k", l.load); ok {
		t.Fatal("a deleted credential still works after the TTL")
	}
}

func TestNotFoundAndErrorsAreNotKept(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	cache := newCache(c)
	ctx := context.Background()
	l := &loader{}
	cache.Get(ctx, "k", l.load)
	l.found.Store(true) // a token made now works at once
	if _, ok, _ := cache.Get(ctx, "k", l.load); !ok {
		t.Fatal("a not-found answer was kept")
	}
	e := &loader{err: errors.New("throttled")}
	e.found.Store(true)
	cache.Get(ctx, "e", e.load)
	cache.Get(ctx, "e", e.load)
	if e.reads.Load() != 2 {
		t.Fatalf("an error was kept: %d reads", e.reads.Load())
	}
}

func TestForgetDropsEntriesAndReadsUnderWay(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	cache := newCache(c)
	ctx := context.Background()
	l := &loader{}
	l.found.Store(true)
	cache.Get(ctx, "k", l.load)
	cache.Forget("k")
	l.found.Store(false)
	if _, ok, _ := cache.Get(ctx, "k", l.load); ok {
		t.Fatal("forgotten key answered from the cache")
	}
	// A read that began before the deletion (and saw the credential) is
	// not kept when the deletion is forgotten while it runs.
	started, release := make(chan struct{}), make(chan struct{})
	slow := func(context.Context) (string, bool, error) {
		close(started)
		<-release
		return "stale", true, nil
	}
	done := make(chan bool)
	go func() { _, ok, _ := cache.Get(ctx, "k", slow); done <- ok }()
	<-started
	cache.Forget("k")
	close(release)
	<-done
	if _, ok, _ := cache.Get(ctx, "k", l.load); ok {
		t.Fatal("a read begun before Forget was kept")
	}
}

// TestConcurrentCallersShareOneRead: a busy key, called from many
// goroutines at once, is read once per TTL (run with -race).
func TestConcurrentCallersShareOneRead(t *testing.T) {
	t.Parallel()
	cache := &authcache.Cache[string]{}
	cache.SetTTL(time.Hour)
	l := &loader{}
	l.found.Store(true)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if v, ok, err := cache.Get(context.Background(), "busy", l.load); v != "principal" || !ok || err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 || l.reads.Load() != 1 {
		t.Fatalf("%d failed answers, %d reads for 16,000 calls (want 0, 1)", failed.Load(), l.reads.Load())
	}
}

func TestBoundedSize(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	cache := newCache(c)
	l := &loader{}
	l.found.Store(true)
	for i := 0; i < 1000; i++ {
		cache.Get(context.Background(), string(rune('a'+i%26))+time.Duration(i).String(), l.load)
		if cache.Len() > 100 {
			t.Fatalf("%d entries, max 100", cache.Len())
		}
	}
}

func TestNegativeTTLKeepsNothing(t *testing.T) {
	cache := authcache.New[string]()
	cache.SetTTL(-1)
	l := &loader{}
	l.found.Store(true)
	for i := 0; i < 3; i++ {
		cache.Get(context.Background(), "k", l.load)
	}
	if l.reads.Load() != 3 || cache.Len() != 0 {
		t.Fatalf("%d reads, %d entries", l.reads.Load(), cache.Len())
	}
}
