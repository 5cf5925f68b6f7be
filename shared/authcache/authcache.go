// Package authcache remembers, for a short time, what a credential (an
// API token, a browser session) authenticates, so that a busy key is not
// read from the table on every call.
//
// The trade is bounded: an entry is trusted for at most its TTL after it
// was read, so a credential deleted (or changed) elsewhere stops working
// within TTL in every process; the process that deletes it forgets it at
// once (Forget), so a single process (the local platform) sees revocation
// immediately. Only found credentials are kept: an unknown one is read
// every time (a new token works at once, and guessing costs what it did).
// Concurrent callers of one expired key share one read.
package authcache

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// TTL is how long a credential read is trusted: the bound, in every
// process, on how long a deleted token or ended session keeps working
// (docs/security.md). At 30,000 calls a second on one key each process
// reads it once per TTL instead of on every call.
const TTL = 2 * time.Second

// MaxEntries bounds the memory of one cache; when full, expired entries
// are dropped, and if that is not enough, all of them.
const MaxEntries = 50_000

// Cache maps a credential's hash to what it authenticates.
type Cache[V any] struct {
	Max int
	Now func() time.Time
	// ttl is the TTL in nanoseconds (0: the package's TTL; negative:
	// nothing is kept, every Get reads).
	ttlNanos atomic.Int64

	mu      sync.Mutex
	entries map[string]entry[V]
	flights map[string]*flight[V]
	// gen counts Forgets: a read that began before a Forget is not kept,
	// since it may have seen the credential before its deletion.
	gen uint64
}

type entry[V any] struct {
	v       V
	expires time.Time
}

type flight[V any] struct {
	done chan struct{}
	v    V
	ok   bool
	err  error
}

// New returns a cache with the package's TTL and size.
func New[V any]() *Cache[V] { return &Cache[V]{Max: MaxEntries} }

// SetTTL changes how long a read is kept (safe while in use); a negative
// TTL keeps nothing: every Get reads (tests that count every read).
func (c *Cache[V]) SetTTL(d time.Duration) { c.ttlNanos.Store(int64(d)) }

func (c *Cache[V]) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Get answers key's value from the cache while fresh, else from load
// (once for all concurrent callers of the key), keeping a found value.
func (c *Cache[V]) Get(ctx context.Context, key string, load func(context.Context) (V, bool, error)) (V, bool, error) {
	if c.ttlNanos.Load() < 0 {
		return load(ctx)
	}
	c.mu.Lock()
	if c.entries == nil {
		c.entries, c.flights = map[string]entry[V]{}, map[string]*flight[V]{}
	}
	if e, ok := c.entries[key]; ok {
		if c.now().Before(e.expires) {
			c.mu.Unlock()
			return e.v, true, nil
		}
		delete(c.entries, key)
	}
	if f, ok := c.flights[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f.v, f.ok, f.err
		case <-ctx.Done():
			var zero V
			return zero, false, ctx.Err()
		}
	}
	f := &flight[V]{done: make(chan struct{})}
	c.flights[key] = f
	gen := c.gen
	c.mu.Unlock()

	// The read's expiry counts from before it was made: the value is no
	// older than that when it is dropped.
	start := c.now()
	f.v, f.ok, f.err = load(ctx)
	c.mu.Lock()
	if c.flights[key] == f {
		delete(c.flights, key)
	}
	if f.err == nil && f.ok && gen == c.gen {
		c.makeRoom()
		c.entries[key] = entry[V]{v: f.v, expires: start.Add(c.ttl())}
	}
	c.mu.Unlock()
	close(f.done)
	return f.v, f.ok, f.err
}

// Set replaces key's value if it is cached (a change this process made,
// e.g. a session's last use), keeping its expiry.
func (c *Cache[V]) Set(key string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		e.v = v
		c.entries[key] = e
	}
}

// Forget drops keys (their credentials were deleted or changed by this
// process), and any read of them under way.
func (c *Cache[V]) Forget(keys ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	for _, k := range keys {
		delete(c.entries, k)
		delete(c.flights, k) // a caller from now on reads again
	}
}

// Len is the number of cached entries (tests).
func (c *Cache[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}

func (c *Cache[V]) ttl() time.Duration {
	if d := time.Duration(c.ttlNanos.Load()); d > 0 {
		return d
	}
	return TTL
}

// makeRoom keeps the cache under its size (c.mu held).
func (c *Cache[V]) makeRoom() {
	max := c.Max
	if max <= 0 {
		max = MaxEntries
	}
	if len(c.entries) < max {
		return
	}
	now := c.now()
	for k, e := range c.entries {
		if !now.Before(e.expires) {
			delete(c.entries, k)
		}
	}
	if len(c.entries) >= max {
		clear(c.entries)
	}
}
