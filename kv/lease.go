package kv

import (
	"context"
	"errors"
	"time"
)

// Lease is a named right, held by one holder at a time across every
// process and node that shares the store, to run a job that must run once
// per cluster (garbage collection, trims, purges, directory re-imports).
// It is a key written with a TTL: a holder that dies stops renewing it and
// it expires by itself, so another holder takes over after at most TTL,
// with no sweeper and no clock shared beyond the engine's TTL.
//
// The store's serializable transactions make Acquire exclusive: two
// holders that both read the key missing conflict, and the retry of the
// second sees the first's record.
type Lease struct {
	db     Store
	key    []byte
	holder string
	ttl    time.Duration
}

// NewLease returns the lease name as holder sees it. holder must be
// unique to the process (a node name with a random suffix), ttl at least
// a few seconds: a holder renews at a third of it.
func NewLease(db Store, name, holder string, ttl time.Duration) *Lease {
	return &Lease{db: db, key: LeaseKey(name), holder: holder, ttl: ttl}
}

// LeaseKey is the key of lease name, for a transaction that must read
// whether a holder is alive together with what it changes (a read of the
// key conflicts with the holder's renewal).
func LeaseKey(name string) []byte { return KeyString(KVLease, nil, name) }

// Acquire takes the lease, or renews it when the holder has it already,
// for ttl from now; it reports whether the holder holds it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	held := false
	err := l.db.Update(ctx, func(tx Txn) error {
		held = false
		v, err := tx.Get(l.key)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return err
		case string(v) != l.holder:
			return nil
		}
		held = true
		return tx.SetTTL(l.key, []byte(l.holder), l.ttl)
	})
	return held, err
}

// Release gives the lease up when the holder has it, so another holder
// need not wait for it to expire.
func (l *Lease) Release(ctx context.Context) error {
	return l.db.Update(ctx, func(tx Txn) error {
		v, err := tx.Get(l.key)
		if errors.Is(err, ErrNotFound) || (err == nil && string(v) != l.holder) {
			return nil
		}
		if err != nil {
			return err
		}
		return tx.Delete(l.key)
	})
}

// Run calls fn while the holder holds the lease: it acquires it (false,
// nil when another holder has it), renews it every ttl/3 while fn runs,
// and cancels fn's context when a renewal finds it lost (or fails for
// longer than the lease lasts), so two holders never run fn at once for
// longer than the clock drift of one renewal. It releases the lease when
// fn returns.
func (l *Lease) Run(ctx context.Context, fn func(ctx context.Context) error) (bool, error) {
	ok, err := l.Acquire(ctx)
	if err != nil || !ok {
		return false, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			held, err := l.Acquire(ctx)
			switch {
			case err == nil && held:
				last = time.Now()
			case err == nil:
				cancel(ErrLeaseLost)
				return
			case time.Since(last) > l.ttl*2/3:
				cancel(ErrLeaseLost)
				return
			}
		}
	}()
	err = fn(ctx)
	close(done)
	if rerr := l.Release(context.WithoutCancel(ctx)); rerr != nil && err == nil {
		err = rerr
	}
	if err == nil && errors.Is(context.Cause(ctx), ErrLeaseLost) {
		err = ErrLeaseLost
	}
	return true, err
}

// ErrLeaseLost is a job's end when its lease was taken over or could not
// be renewed: another holder may be running it now.
var ErrLeaseLost = errors.New("kv: lease lost")
