package chunk

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Transient is implemented by errors that say whether the same call may
// succeed if made again: a timeout, a dropped connection, a server that
// is throttling or briefly failing. Stores that talk over a network (S3)
// wrap such errors in one; the local stores never do, since a disk error
// does not go away by asking twice.
type Transient interface {
	Transient() bool
}

// IsTransient reports whether an error in err's chain is a Transient
// that says so. A cancelled or expired context is never transient: the
// caller has stopped waiting.
func IsTransient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var t Transient
	return errors.As(err, &t) && t.Transient()
}

// RetryOptions tunes Retry. The zero value is usable.
type RetryOptions struct {
	// Attempts is how many times a call is made in all, the first
	// included. Zero means 5.
	Attempts int
	// Backoff is the wait before the second attempt; each later wait
	// doubles, up to MaxBackoff, and is jittered by up to half so that
	// many callers failing together do not come back together. Zero
	// means 100ms.
	Backoff time.Duration
	// MaxBackoff caps one wait. Zero means 5s.
	MaxBackoff time.Duration
	// Retryable decides which errors are tried again. Nil means
	// IsTransient.
	Retryable func(error) bool
}

// Retry is a Store that makes the calls of another again when they fail
// with a transient error, a bounded number of times with exponential
// backoff, and gives up as soon as the context ends. It keeps retries out
// of each store (restic's backend decorators are the model), so the same
// policy serves any of them.
type Retry struct {
	store Store
	opts  RetryOptions
}

var (
	_ Store        = (*Retry)(nil)
	_ BufferGetter = (*Retry)(nil)
)

// NewRetry returns store with its transient failures retried.
func NewRetry(store Store, opts RetryOptions) *Retry {
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 100 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 5 * time.Second
	}
	if opts.Retryable == nil {
		opts.Retryable = IsTransient
	}
	return &Retry{store: store, opts: opts}
}

// Unwrap returns the store Retry wraps, for callers looking for an
// optional interface of the store itself.
func (r *Retry) Unwrap() Store { return r.store }

// do calls fn until it succeeds, fails for good, runs out of attempts or
// ctx ends. The last error is returned, with the number of attempts when
// there were several.
func (r *Retry) do(ctx context.Context, fn func() error) error {
	wait := r.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := fn()
		if _, ok := err.(stop); ok || err == nil || !r.opts.Retryable(err) {
			return err
		}
		if attempt >= r.opts.Attempts {
			return fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		d := wait/2 + rand.N(wait/2+1)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (giving up retrying: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, r.opts.MaxBackoff)
	}
}

// Put retries the whole Put; storing the same id twice is harmless.
func (r *Retry) Put(ctx context.Context, id ID, blob []byte) error {
	return r.do(ctx, func() error { return r.store.Put(ctx, id, blob) })
}

// Get retries the whole Get.
func (r *Retry) Get(ctx context.Context, id ID) (b []byte, err error) {
	err = r.do(ctx, func() error { b, err = r.store.Get(ctx, id); return err })
	return b, err
}

// GetInto is Get into dst when the store has GetInto, and Get otherwise.
func (r *Retry) GetInto(ctx context.Context, id ID, dst []byte) (b []byte, err error) {
	bg, ok := r.store.(BufferGetter)
	if !ok {
		return r.Get(ctx, id)
	}
	err = r.do(ctx, func() error { b, err = bg.GetInto(ctx, id, dst); return err })
	return b, err
}

// Has retries the whole Has.
func (r *Retry) Has(ctx context.Context, id ID) (ok bool, err error) {
	err = r.do(ctx, func() error { ok, err = r.store.Has(ctx, id); return err })
	return ok, err
}

// Delete retries the whole Delete; deleting a missing id returns nil.
func (r *Retry) Delete(ctx context.Context, id ID) error {
	return r.do(ctx, func() error { return r.store.Delete(ctx, id) })
}

// Size retries the whole Size.
func (r *Retry) Size(ctx context.Context) (n int64, err error) {
	err = r.do(ctx, func() error { n, err = r.store.Size(ctx); return err })
	return n, err
}

// Walk is retried only while fn has not been called: a walk started
// again would call fn a second time for the ids already seen. Errors
// from fn are never retried.
func (r *Retry) Walk(ctx context.Context, fn func(ID) error) error {
	called := false
	var fnErr error
	err := r.do(ctx, func() error {
		err := r.store.Walk(ctx, func(id ID) error {
			called = true
			if err := fn(id); err != nil {
				fnErr = err
				return err
			}
			return nil
		})
		if called || fnErr != nil {
			return stop{err}
		}
		return err
	})
	var s stop
	if errors.As(err, &s) {
		return s.err
	}
	return err
}

// stop carries an error Retry must not retry past.
type stop struct{ err error }

func (s stop) Error() string {
	if s.err == nil {
		return "<nil>"
	}
	return s.err.Error()
}
