package chatapi

import "sync"

// maxCached bounds each id cache of a process.
const maxCached = 100000

// idCache maps ids the client knows to the platform's (and back). It is
// only a cache: every hit is checked against the record it names, and
// when it is full it starts over rather than grow with every user and
// conversation a long-running process has seen.
type idCache struct {
	mu sync.Mutex
	m  map[string]string
}

func newIDCache() *idCache { return &idCache{m: map[string]string{}} }

func (c *idCache) Load(k string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *idCache) Store(k, v string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCached {
		c.m = map[string]string{}
	}
	c.m[k] = v
}

func (c *idCache) Delete(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}
