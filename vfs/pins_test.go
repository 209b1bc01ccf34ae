package vfs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
	"berth/vfs/chunk"
)

// TestPinSet: a node's pins show in the chunk's H/ record from the first
// pin to the last unpin (which notes an uncounted chunk for the
// collector), and a pin taken while a collector claims the chunk returns
// only once the claim is gone; pins of other chunks do not wait.
func TestPinSet(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(badger.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := &pinSet{db: db, node: "a"}
	holders := func(id chunk.ID) []string {
		var rec heldRec
		if err := db.View(ctx, func(tx kv.Txn) error { return get(tx, heldKey(id), &rec, nil) }); err != nil {
			t.Fatal(err)
		}
		return rec.Nodes
	}
	noted := func(id chunk.ID) bool {
		err := db.View(ctx, func(tx kv.Txn) error { _, err := tx.Get(orphanKey(id)); return err })
		if err != nil && !errors.Is(err, kv.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}
	a, b := chunk.ID{1}, chunk.ID{2}
	for range 2 {
		if err := p.Pin(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if h := holders(a); !slices.Equal(h, []string{"a"}) {
		t.Fatalf("holders after two pins: %q", h)
	}
	p.Unpin(a)
	if h := holders(a); !slices.Equal(h, []string{"a"}) {
		t.Fatalf("holders after one unpin of two: %q", h)
	}
	p.Unpin(a)
	if h := holders(a); len(h) != 0 || !noted(a) {
		t.Fatalf("after the last unpin: holders %q, noted %v", h, noted(a))
	}

	// A collector claims a.
	if err := db.Update(ctx, func(tx kv.Txn) error { return tx.SetTTL(doomKey(a), []byte("b"), time.Minute) }); err != nil {
		t.Fatal(err)
	}
	if err := p.Pin(ctx, b); err != nil { // another chunk: no wait
		t.Fatal(err)
	}
	pinned := make(chan error)
	go func() { pinned <- p.Pin(ctx, a) }()
	select {
	case err := <-pinned:
		t.Fatalf("a pin returned (%v) while its chunk was claimed", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := db.Update(ctx, func(tx kv.Txn) error { return tx.Delete(doomKey(a)) }); err != nil {
		t.Fatal(err)
	}
	if err := <-pinned; err != nil {
		t.Fatal(err)
	}
	if h := holders(a); !slices.Equal(h, []string{"a"}) {
		t.Fatalf("holders after the claim ended: %q", h)
	}

	// A cancelled pin of a claimed chunk fails and holds nothing.
	c := chunk.ID{3}
	if err := db.Update(ctx, func(tx kv.Txn) error { return tx.SetTTL(doomKey(c), []byte("b"), time.Minute) }); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := p.Pin(cctx, c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("pin of a claimed chunk with a context that ends: %v", err)
	}
	if h := holders(c); len(h) != 0 {
		t.Fatalf("a failed pin left holders %q", h)
	}
}
