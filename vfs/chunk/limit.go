package chunk

import "context"

// Limit is a Store that lets at most n calls into another run at once;
// the rest wait their turn or for their context to end. An object store
// answers many requests in parallel but not unboundedly many: every
// Writer keeps several Puts in flight and every reader several Gets, and
// without a bound a burst of uploads opens a connection for each.
//
// Walk is not limited: it calls back into the store (the collector
// deletes from inside it), and holding a slot across the callback could
// leave those calls waiting for the slot their own walk holds.
type Limit struct {
	store Store
	slots chan struct{}
}

var (
	_ Store        = (*Limit)(nil)
	_ BufferGetter = (*Limit)(nil)
)

// NewLimit returns store with at most n calls running at once (n < 1
// means 1).
func NewLimit(store Store, n int) *Limit {
	return &Limit{store: store, slots: make(chan struct{}, max(n, 1))}
}

// Unwrap returns the store Limit wraps.
func (l *Limit) Unwrap() Store { return l.store }

// acquire takes a slot, or returns ctx's error if it ends first.
func (l *Limit) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limit) release() { <-l.slots }

// Put stores blob in a slot.
func (l *Limit) Put(ctx context.Context, id ID, blob []byte) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.store.Put(ctx, id, blob)
}

// Get reads a blob in a slot.
func (l *Limit) Get(ctx context.Context, id ID) ([]byte, error) {
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return l.store.Get(ctx, id)
}

// GetInto is Get into dst when the store has GetInto, and Get otherwise.
func (l *Limit) GetInto(ctx context.Context, id ID, dst []byte) ([]byte, error) {
	bg, ok := l.store.(BufferGetter)
	if !ok {
		return l.Get(ctx, id)
	}
	if err := l.acquire(ctx); err != nil {
		return nil, err
	}
	defer l.release()
	return bg.GetInto(ctx, id, dst)
}

// Has asks in a slot.
func (l *Limit) Has(ctx context.Context, id ID) (bool, error) {
	if err := l.acquire(ctx); err != nil {
		return false, err
	}
	defer l.release()
	return l.store.Has(ctx, id)
}

// Delete removes id in a slot.
func (l *Limit) Delete(ctx context.Context, id ID) error {
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	return l.store.Delete(ctx, id)
}

// Walk runs outside the limit (see Limit).
func (l *Limit) Walk(ctx context.Context, fn func(ID) error) error {
	return l.store.Walk(ctx, fn)
}

// Size runs in a slot: it makes no calls back.
func (l *Limit) Size(ctx context.Context) (int64, error) {
	if err := l.acquire(ctx); err != nil {
		return 0, err
	}
	defer l.release()
	return l.store.Size(ctx)
}
