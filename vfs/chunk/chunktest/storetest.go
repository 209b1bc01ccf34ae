// Package chunktest is the conformance suite every chunk.Store must pass.
// Each store's own tests call Run with a constructor for an empty store.
package chunktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"berth/vfs/chunk"
)

// Run checks newStore's stores against the chunk.Store contract. newStore
// must return an empty store each call.
func Run(t *testing.T, newStore func(t *testing.T) chunk.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s chunk.Store)
	}{
		{"PutGet", testPutGet},
		{"NotFound", testNotFound},
		{"IdempotentPut", testIdempotentPut},
		{"PutDoesNotKeepBuffer", testPutDoesNotKeepBuffer},
		{"Delete", testDelete},
		{"WalkAndSize", testWalkAndSize},
		{"WalkStops", testWalkStops},
		{"CancelledContext", testCancelled},
		{"Concurrent", testConcurrent},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

// blob makes distinct test content; the id is its hash so stores that verify
// would also accept it.
func blob(i, n int) (chunk.ID, []byte) {
	b := bytes.Repeat([]byte(fmt.Sprintf("blob %d;", i)), n)
	return chunk.Sum(b), b
}

func mustPut(t *testing.T, s chunk.Store, id chunk.ID, b []byte) {
	t.Helper()
	if err := s.Put(context.Background(), id, b); err != nil {
		t.Fatalf("Put(%s): %v", id, err)
	}
}

func testPutGet(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	id, b := blob(1, 1000)
	if ok, err := s.Has(ctx, id); err != nil || ok {
		t.Fatalf("Has before Put = %v, %v; want false, nil", ok, err)
	}
	mustPut(t, s, id, b)
	if ok, err := s.Has(ctx, id); err != nil || !ok {
		t.Fatalf("Has after Put = %v, %v; want true, nil", ok, err)
	}
	got, err := s.Get(ctx, id)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if !bytes.Equal(got, b) {
		t.Fatalf("Get returned %d bytes, want the %d put", len(got), len(b))
	}
	// The caller owns what Get returns.
	got[0] ^= 0xff
	again, err := s.Get(ctx, id)
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("Get after modifying a returned slice: %v, equal=%v", err, bytes.Equal(again, b))
	}
	// An empty blob is a valid value.
	eid := chunk.Sum(nil)
	mustPut(t, s, eid, []byte{})
	if got, err := s.Get(ctx, eid); err != nil || len(got) != 0 {
		t.Fatalf("Get(empty) = %d bytes, %v", len(got), err)
	}
}

func testNotFound(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	id, _ := blob(2, 1)
	if _, err := s.Get(ctx, id); !errors.Is(err, chunk.ErrNotFound) {
		t.Fatalf("Get(missing) err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete(missing) = %v, want nil", err)
	}
}

func testIdempotentPut(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	id, b := blob(3, 500)
	mustPut(t, s, id, b)
	size1, err := s.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, id, b)
	size2, err := s.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if size1 != size2 {
		t.Fatalf("size after second Put = %d, want %d", size2, size1)
	}
	n := 0
	if err := s.Walk(ctx, func(chunk.ID) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("Walk saw %d ids, want 1", n)
	}
}

func testPutDoesNotKeepBuffer(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	id, b := blob(4, 100)
	want := bytes.Clone(b)
	mustPut(t, s, id, b)
	for i := range b {
		b[i] = 0
	}
	got, err := s.Get(ctx, id)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Get after caller reused its buffer: %v, equal=%v", err, bytes.Equal(got, want))
	}
}

func testDelete(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	id, b := blob(5, 100)
	keep, kb := blob(6, 100)
	mustPut(t, s, id, b)
	mustPut(t, s, keep, kb)
	if err := s.Delete(ctx, id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if ok, err := s.Has(ctx, id); err != nil || ok {
		t.Fatalf("Has after Delete = %v, %v", ok, err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, chunk.ErrNotFound) {
		t.Fatalf("Get after Delete err = %v, want ErrNotFound", err)
	}
	if ok, err := s.Has(ctx, keep); err != nil || !ok {
		t.Fatalf("Delete removed another id: Has = %v, %v", ok, err)
	}
	// A deleted id can be stored again.
	mustPut(t, s, id, b)
	if got, err := s.Get(ctx, id); err != nil || !bytes.Equal(got, b) {
		t.Fatalf("Get after re-Put: %v", err)
	}
}

func testWalkAndSize(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	if n, err := s.Size(ctx); err != nil || n != 0 {
		t.Fatalf("Size of empty store = %d, %v", n, err)
	}
	want := map[chunk.ID]int{}
	var total int64
	for i := range 50 {
		id, b := blob(100+i, i+1)
		mustPut(t, s, id, b)
		want[id] = len(b)
		total += int64(len(b))
	}
	seen := map[chunk.ID]bool{}
	err := s.Walk(ctx, func(id chunk.ID) error {
		if seen[id] {
			t.Errorf("Walk visited %s twice", id)
		}
		seen[id] = true
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	if len(seen) != len(want) {
		t.Fatalf("Walk saw %d ids, want %d", len(seen), len(want))
	}
	for id := range want {
		if !seen[id] {
			t.Fatalf("Walk missed %s", id)
		}
	}
	if n, err := s.Size(ctx); err != nil || n != total {
		t.Fatalf("Size = %d, %v; want %d", n, err, total)
	}
	// Deleting from inside Walk is how the collector works.
	err = s.Walk(ctx, func(id chunk.ID) error { return s.Delete(ctx, id) })
	if err != nil {
		t.Fatalf("Walk deleting: %v", err)
	}
	if n, err := s.Size(ctx); err != nil || n != 0 {
		t.Fatalf("Size after deleting all = %d, %v", n, err)
	}
}

func testWalkStops(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	for i := range 5 {
		id, b := blob(200+i, 10)
		mustPut(t, s, id, b)
	}
	stop := errors.New("stop")
	calls := 0
	err := s.Walk(ctx, func(chunk.ID) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("Walk with failing fn = %v after %d calls, want stop after 1", err, calls)
	}
}

func testCancelled(t *testing.T, s chunk.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id, b := blob(7, 10)
	if err := s.Put(ctx, id, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled ctx = %v, want context.Canceled", err)
	}
	if _, err := s.Get(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with cancelled ctx = %v, want context.Canceled", err)
	}
	if _, err := s.Has(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Has with cancelled ctx = %v, want context.Canceled", err)
	}
	if err := s.Delete(ctx, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Delete with cancelled ctx = %v, want context.Canceled", err)
	}
}

func testConcurrent(t *testing.T, s chunk.Store) {
	ctx := context.Background()
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				// Goroutines overlap on ids, so the same id races with itself.
				id, b := blob(300+(i+g)%n, 2000)
				if err := s.Put(ctx, id, b); err != nil {
					errs <- err
					return
				}
				got, err := s.Get(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, b) {
					errs <- fmt.Errorf("Get(%s) returned other bytes", id)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	count := 0
	if err := s.Walk(ctx, func(chunk.ID) error { count++; return nil }); err != nil {
		t.Fatal(err)
	}
	if count != n {
		t.Fatalf("Walk after concurrent puts saw %d ids, want %d", count, n)
	}
}
