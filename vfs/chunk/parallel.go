package chunk

import (
	"context"
)

// Parallel is a Store each of whose calls waits out a round trip to
// another machine (an object store): about a millisecond or more, whatever
// the chunk's size, during which the caller's CPU has nothing to do. One
// upload or download then goes only as fast as the calls it keeps in
// flight, and the local disk's figures (a few in flight, DefaultReadAhead
// and putDepth) are far too few. Found by type assertion, through the
// wrappers' Unwrap (see ParallelismOf); local stores do not implement it.
type Parallel interface {
	// Parallelism is how many calls one stream should keep in flight:
	// the chunks a Reader fetches ahead, the Puts a Writer's Write keeps
	// going. Each holds a chunk (about 1 MiB) in memory.
	Parallelism() int
}

// unwrapper is a Store around another (Retry, Limit, a daemon's metrics).
type unwrapper interface{ Unwrap() Store }

// ParallelismOf returns the Parallelism of store, or of the first store
// inside it that has one, following Unwrap; 0 when none does.
func ParallelismOf(store Store) int {
	for store != nil {
		if p, ok := store.(Parallel); ok {
			return p.Parallelism()
		}
		u, ok := store.(unwrapper)
		if !ok {
			return 0
		}
		store = u.Unwrap()
	}
	return 0
}

// Missing returns the first of ids (in their order) that store does not
// have, and true; or false when it has them all. It asks up to
// ParallelismOf(store) at once, so that checking the chunks of a large
// file on an object store costs a few round trips, not one per chunk;
// a local store is asked one id at a time. The first error stops it.
func Missing(ctx context.Context, store Store, ids []ID) (ID, bool, error) {
	n := min(ParallelismOf(store), len(ids))
	if n <= 1 {
		for _, id := range ids {
			ok, err := store.Has(ctx, id)
			if err != nil || !ok {
				return id, err == nil, err
			}
		}
		return ID{}, false, nil
	}
	has := make([]bool, len(ids))
	err := forEach(ctx, len(ids), n, func(i int) error {
		ok, err := store.Has(ctx, ids[i])
		has[i] = ok
		return err
	})
	if err != nil {
		return ID{}, false, err // a Has failed, or ctx ended before every id was asked about
	}
	for i, ok := range has {
		if !ok {
			return ids[i], true, nil
		}
	}
	return ID{}, false, nil
}
