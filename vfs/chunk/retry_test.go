package chunk_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs/chunk"
	"berth/vfs/chunk/chunktest"
)

// flaky is a memory store whose calls fail with err while fails is
// positive (each failure counts it down); calls counts every call. It
// stands for a store on a network, whose failures the wrappers are for.
type flaky struct {
	*chunk.Memory
	mu    sync.Mutex
	fails int
	err   error
	calls atomic.Int32
	// inFlight and most measure concurrency; gate, when set, holds each
	// call until it is closed.
	inFlight, most atomic.Int32
	gate           chan struct{}
}

func newFlaky(fails int, err error) *flaky {
	return &flaky{Memory: chunk.NewMemory(), fails: fails, err: err}
}

func (f *flaky) enter(ctx context.Context) error {
	f.calls.Add(1)
	n := f.inFlight.Add(1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fails > 0 {
		f.fails--
		return f.err
	}
	return nil
}

func (f *flaky) leave() { f.inFlight.Add(-1) }

func (f *flaky) Put(ctx context.Context, id chunk.ID, b []byte) error {
	defer f.leave()
	if err := f.enter(ctx); err != nil {
		return err
	}
	return f.Memory.Put(ctx, id, b)
}

func (f *flaky) Get(ctx context.Context, id chunk.ID) ([]byte, error) {
	defer f.leave()
	if err := f.enter(ctx); err != nil {
		return nil, err
	}
	return f.Memory.Get(ctx, id)
}

func (f *flaky) Has(ctx context.Context, id chunk.ID) (bool, error) {
	defer f.leave()
	if err := f.enter(ctx); err != nil {
		return false, err
	}
	return f.Memory.Has(ctx, id)
}

func (f *flaky) Delete(ctx context.Context, id chunk.ID) error {
	defer f.leave()
	if err := f.enter(ctx); err != nil {
		return err
	}
	return f.Memory.Delete(ctx, id)
}

// transient is an error the default policy retries.
type transient struct{ msg string }

func (e transient) Error() string   { return e.msg }
func (e transient) Transient() bool { return true }

func TestRetryLimitConformance(t *testing.T) {
	chunktest.Run(t, func(t *testing.T) chunk.Store {
		return chunk.NewRetry(chunk.NewLimit(chunk.NewMemory(), 2), chunk.RetryOptions{Backoff: time.Millisecond})
	})
}

func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"Plain", errors.New("disk on fire"), false},
		{"Transient", transient{"slow down"}, true},
		{"Wrapped", fmt.Errorf("put: %w", transient{"slow down"}), true},
		{"NotFound", chunk.ErrNotFound, false},
		{"Canceled", fmt.Errorf("%w; %w", context.Canceled, transient{"x"}), false},
		{"Deadline", context.DeadlineExceeded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chunk.IsTransient(tc.err); got != tc.want {
				t.Fatalf("IsTransient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRetry(t *testing.T) {
	ctx := context.Background()
	b := []byte("retried")
	id := chunk.Sum(b)
	slow := transient{"503 SlowDown"}
	permanent := errors.New("400 bad request")
	opts := chunk.RetryOptions{Attempts: 3, Backoff: time.Millisecond}
	for _, tc := range []struct {
		name      string
		fails     int
		err       error
		opts      chunk.RetryOptions
		call      func(s chunk.Store) error
		wantErr   error // nil: success
		wantCalls int32
	}{
		{"PutAfterTransient", 2, slow, opts, put(id, b), nil, 3},
		{"PutGivesUp", 5, slow, opts, put(id, b), slow, 3},
		{"PutPermanent", 5, permanent, opts, put(id, b), permanent, 1},
		{"GetNotFoundNotRetried", 0, nil, opts, func(s chunk.Store) error { _, err := s.Get(ctx, chunk.Sum(nil)); return err }, chunk.ErrNotFound, 1},
		{"GetAfterTransient", 1, slow, opts, func(s chunk.Store) error { _, err := s.Get(ctx, id); return err }, chunk.ErrNotFound, 2},
		{"HasAfterTransient", 2, slow, opts, func(s chunk.Store) error { _, err := s.Has(ctx, id); return err }, nil, 3},
		{"DeleteAfterTransient", 1, slow, opts, func(s chunk.Store) error { return s.Delete(ctx, id) }, nil, 2},
		{"OwnPolicy", 1, errors.New("flaky"), chunk.RetryOptions{Attempts: 2, Backoff: time.Millisecond, Retryable: func(error) bool { return true }}, put(id, b), nil, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlaky(tc.fails, tc.err)
			err := tc.call(chunk.NewRetry(f, tc.opts))
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("err = %v, want success", err)
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got := f.calls.Load(); got != tc.wantCalls {
				t.Fatalf("%d calls, want %d", got, tc.wantCalls)
			}
		})
	}
}

func put(id chunk.ID, b []byte) func(chunk.Store) error {
	return func(s chunk.Store) error { return s.Put(context.Background(), id, b) }
}

// TestRetryContext: a caller that stops waiting is answered at once, not
// after the backoff.
func TestRetryContext(t *testing.T) {
	f := newFlaky(100, transient{"503"})
	s := chunk.NewRetry(f, chunk.RetryOptions{Attempts: 100, Backoff: time.Hour, MaxBackoff: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- s.Put(ctx, chunk.Sum(nil), nil) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Put = %v, want context.Canceled", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Put kept waiting after its context ended")
	}
	if n := f.calls.Load(); n != 1 {
		t.Fatalf("%d calls, want 1", n)
	}
}

// walker is a store whose Walk fails transiently, before or after
// calling fn, the first time.
type walker struct {
	*chunk.Memory
	afterFn bool
	walks   int
}

func (w *walker) Walk(ctx context.Context, fn func(chunk.ID) error) error {
	w.walks++
	if w.walks > 1 {
		return w.Memory.Walk(ctx, fn)
	}
	if w.afterFn {
		if err := w.Memory.Walk(ctx, fn); err != nil {
			return err
		}
	}
	return errReset
}

var errReset = transient{"connection reset"}

func TestRetryWalk(t *testing.T) {
	ctx := context.Background()
	stop := errors.New("stop")
	for _, tc := range []struct {
		name      string
		afterFn   bool
		fnErr     error
		wantErr   error
		wantWalks int
		wantSeen  int
	}{
		// Nothing seen yet: walking again is safe.
		{"BeforeFn", false, nil, nil, 2, 1},
		// fn saw ids: a second walk would show them again.
		{"AfterFn", true, nil, errReset, 1, 1},
		{"FnError", false, stop, stop, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &walker{Memory: chunk.NewMemory(), afterFn: tc.afterFn}
			b := []byte("walked")
			if err := w.Put(ctx, chunk.Sum(b), b); err != nil {
				t.Fatal(err)
			}
			seen := 0
			err := chunk.NewRetry(w, chunk.RetryOptions{Backoff: time.Millisecond}).Walk(ctx, func(chunk.ID) error { seen++; return tc.fnErr })
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("Walk = %v, want %v", err, tc.wantErr)
			}
			if w.walks != tc.wantWalks || seen != tc.wantSeen {
				t.Fatalf("%d walks seeing %d ids, want %d seeing %d", w.walks, seen, tc.wantWalks, tc.wantSeen)
			}
		})
	}
}
