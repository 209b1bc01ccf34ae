package kv

import "sync"

// Cache keeps values decoded from a Store until the Store's next commit,
// for reads that every request repeats (who is calling, which root) and
// that cost more to read and decode than to look up. An entry holds only
// while Store.Generation has not moved since the read it came from: any
// commit at all drops every entry, so the cache is right without knowing
// which writes matter, and pays for it with a fresh read after each one.
// A cache of records outside Content may take MetaGeneration instead, and
// then holds across file writes.
// Values derived from keys with a TTL, which expire without a commit, must
// carry their own expiry.
//
// Values are shared between the callers that get them: they must not be
// changed.
type Cache[K comparable, V any] struct {
	mu  sync.Mutex
	max int
	gen uint64 // the generation the entries were read at
	m   map[K]V
}

// NewCache returns a cache of at most max entries; when it is full, a new
// entry starts it afresh, which costs at most one read per entry dropped.
func NewCache[K comparable, V any](max int) *Cache[K, V] {
	return &Cache[K, V]{max: max}
}

// sync drops the entries if the store moved past them, and reports
// whether they are of generation gen. The caller holds mu.
func (c *Cache[K, V]) sync(gen uint64) bool {
	if gen > c.gen {
		// A new map rather than clear: clearing costs the map's
		// largest size, and under writes entries rarely add up again.
		c.m = nil
		c.gen = gen
	}
	return gen == c.gen
}

// Get returns the value kept for k, if the store is still at gen, which
// the caller reads from Store.Generation first.
func (c *Cache[K, V]) Get(gen uint64, k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var v V
	if !c.sync(gen) {
		return v, false
	}
	v, ok := c.m[k]
	return v, ok
}

// Put keeps v for k, read in a transaction begun after Store.Generation
// returned gen. A value read before a commit the cache has already seen
// may be stale and is not kept.
func (c *Cache[K, V]) Put(gen uint64, k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.sync(gen) {
		return
	}
	if c.m == nil || len(c.m) >= c.max {
		c.m = make(map[K]V)
	}
	c.m[k] = v
}
