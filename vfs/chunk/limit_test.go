package chunk_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"berth/vfs/chunk"
)

func TestLimit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		limit int
		calls int
		want  int32 // most calls in flight at once
	}{
		{"One", 1, 8, 1},
		{"Three", 3, 8, 3},
		{"MoreThanCalls", 16, 4, 4},
		{"ZeroIsOne", 0, 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(0, nil)
			f.gate = make(chan struct{})
			s := chunk.NewLimit(f, tc.limit)
			var wg sync.WaitGroup
			errs := make(chan error, tc.calls)
			for i := range tc.calls {
				b := []byte{byte(i)}
				wg.Go(func() { errs <- s.Put(ctx, chunk.Sum(b), b) })
			}
			// Let the calls pile up at the gate, then open it.
			deadline := time.Now().Add(10 * time.Second)
			for f.inFlight.Load() < tc.want && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond) // room for one too many
			close(f.gate)
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if got := f.most.Load(); got != tc.want {
				t.Fatalf("%d calls in flight at most, want %d", got, tc.want)
			}
		})
	}
}

// TestLimitContext: a call waiting for a slot leaves when its context
// ends.
func TestLimitContext(t *testing.T) {
	f := newFlaky(0, nil)
	f.gate = make(chan struct{})
	defer close(f.gate)
	s := chunk.NewLimit(f, 1)
	go s.Put(context.Background(), chunk.Sum(nil), nil) // holds the slot
	for f.inFlight.Load() < 1 {
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx, chunk.Sum(nil)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get waiting for a slot = %v, want DeadlineExceeded", err)
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d calls reached the store, want 1", n)
	}
}

// TestLimitWalkDeletes: the collector deletes from inside Walk; with one
// slot that must not wait on itself.
func TestLimitWalkDeletes(t *testing.T) {
	ctx := context.Background()
	s := chunk.NewLimit(chunk.NewMemory(), 1)
	for i := range 3 {
		b := []byte{byte(i)}
		if err := s.Put(ctx, chunk.Sum(b), b); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- s.Walk(ctx, func(id chunk.ID) error { return s.Delete(ctx, id) }) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Walk deleting through a one-slot Limit is stuck")
	}
	if n, err := s.Size(ctx); err != nil || n != 0 {
		t.Fatalf("Size after = %d, %v", n, err)
	}
}
