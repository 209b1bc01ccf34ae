package kv

import "testing"

// TestCache: an entry is served only at the generation it was read at; a
// value read before a commit the cache has seen is not kept; a full cache
// starts afresh.
func TestCache(t *testing.T) {
	c := NewCache[int, string](2)
	c.Put(5, 1, "one")
	if v, ok := c.Get(5, 1); !ok || v != "one" {
		t.Fatalf("Get at the same generation: %q, %v", v, ok)
	}
	if _, ok := c.Get(6, 1); ok {
		t.Fatal("an entry of generation 5 served at 6")
	}
	// A reader that began at 5 finishes after the cache saw 6.
	c.Put(5, 2, "stale")
	if _, ok := c.Get(6, 2); ok {
		t.Fatal("a read from before the commit was kept")
	}
	c.Put(6, 1, "a")
	c.Put(6, 2, "b")
	c.Put(6, 3, "c")
	if _, ok := c.Get(6, 3); !ok {
		t.Fatal("the newest entry of a full cache was dropped")
	}
	if _, ok := c.Get(6, 1); ok {
		t.Fatal("a full cache kept growing")
	}
}
