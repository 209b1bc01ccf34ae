package kv

import (
	"context"
	"errors"
	"time"
)

// Errors returned by Store and Txn implementations. Compare with errors.Is.
var (
	// ErrNotFound is returned by Txn.Get for a key that does not exist or has expired.
	ErrNotFound = errors.New("kv: key not found")
	// ErrConflict is returned by Update when a transaction still conflicts
	// with concurrent ones after the bounded number of retries.
	ErrConflict = errors.New("kv: transaction conflict")
	// ErrTxnTooBig is returned when one transaction holds more changes than
	// the engine can commit atomically.
	ErrTxnTooBig = errors.New("kv: transaction too big")
	// ErrClosed is returned by every call made after Close.
	ErrClosed = errors.New("kv: store closed")
	// ErrReadOnly is returned by Txn.Set, SetTTL and Delete inside View.
	ErrReadOnly = errors.New("kv: write in a read-only transaction")
	// ErrInUse is returned by an engine's Open when another process holds
	// the store exclusively (kv/badger: its directory), so the daemon can
	// tell a second berth on one data directory from every other failure.
	ErrInUse = errors.New("kv: the database is in use by another process")
	// ErrNotDurable is returned by Update once making a commit durable
	// failed (an fsync error): the store takes no more writes until it is
	// reopened, because the kernel may have dropped the pages that failed
	// and a later fsync would report success over the hole.
	ErrNotDurable = errors.New("kv: a commit could not be made durable; the store takes no writes until it is reopened")
	// ErrDamaged is returned by a read of a value the store holds an
	// entry for but cannot read back (kv/badger: an entry pointing past
	// the end of its value log, which a power cut can leave): an error,
	// where the engine would hand out empty bytes.
	ErrDamaged = errors.New("kv: a stored value does not read")
)

// Store is an ordered key-value store with transactions.
//
// Keys are compared bytewise; Scan visits them in that order. Values passed
// to callbacks are only valid inside the callback unless documented otherwise;
// Get returns a copy the caller owns.
type Store interface {
	// View runs fn in a read-only snapshot transaction.
	View(ctx context.Context, fn func(Txn) error) error
	// Update runs fn in a read-write transaction and commits it durably
	// (fsynced) when fn returns nil. On a conflict with a concurrent
	// transaction, fn is run again from scratch in a new transaction, a
	// bounded number of times, so fn must have no side effects outside the
	// transaction; after the last try Update returns ErrConflict.
	Update(ctx context.Context, fn func(Txn) error) error
	// Generation returns the store's commit version: a number that moves
	// with every committed write transaction, whichever process or node
	// committed it (and may move without one), and never goes back.
	// Whatever a transaction begun after Generation returned g read is
	// still what the store holds while Generation still returns g to
	// calls that begin later: keys written with a TTL aside, which
	// expire without a commit. A reader can so keep what it decoded and
	// check one integer instead of reading it again (Cache). The package
	// documentation says what an engine must do to honour it.
	Generation() uint64
	// NextID returns the next integer of the named sequence, starting at 1.
	// Ids are never reused, across restarts and crashes too (a crash may
	// skip some).
	NextID(ctx context.Context, kind string) (uint64, error)
	// Close flushes and closes the store.
	Close() error
}

// Txn is one transaction. It is not safe for concurrent use.
type Txn interface {
	// Get returns a copy of the value of key, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Set writes key. In a View transaction it fails.
	Set(key, value []byte) error
	// SetTTL writes key so that it expires after ttl; an expired key reads
	// as ErrNotFound and vanishes from scans without any sweeper.
	SetTTL(key, value []byte, ttl time.Duration) error
	// Delete removes key; deleting a missing key is not an error.
	Delete(key []byte) error
	// Scan calls fn for every key with the prefix, in key order, starting at
	// the first key >= start (start nil or shorter than prefix means the
	// beginning of the prefix). Returning ErrStop from fn ends the scan with
	// nil; any other error ends it with that error. key and value are valid
	// only during the call.
	Scan(prefix, start []byte, fn func(key, value []byte) error) error
	// ScanReverse is Scan in descending key order, starting at the last key
	// <= start (start nil or shorter than prefix means the end of the
	// prefix).
	ScanReverse(prefix, start []byte, fn func(key, value []byte) error) error
}

// ErrStop ends a Scan early without an error.
var ErrStop = errors.New("kv: stop scan")

// GCer is a Store whose engine needs its space given back from time to
// time (kv/badger: value-log garbage collection). The daemon finds it by
// type assertion and calls it on its collection schedule; an engine that
// reclaims space by itself does not implement it.
type GCer interface {
	// RunGC gives back the space of deleted and overwritten values. It
	// returns ctx's error when ctx ends first, and ErrClosed after Close.
	RunGC(ctx context.Context) error
}

// Failer is a Store that can fail for good while it still answers reads
// (kv/badger: after an fsync error it refuses every write until it is
// reopened). A health check that only reads would not notice, so the
// daemon asks Failed and stops reporting healthy.
type Failer interface {
	// Failed returns nil while the store takes writes, and the error that
	// stopped them (ErrNotDurable, wrapping the cause) once one did.
	Failed() error
}

// OrderedIDs is a Store whose NextID may hand out ids in leases that
// interleave across nodes (kv/postgres), and that can also hand out ids
// in the order they are asked for, by any node: for sequences whose
// order is read as time order (the activity log lists newest first by
// id). A Store that does not implement it hands out every sequence in
// order already (kv/badger: one process).
type OrderedIDs interface {
	// NextOrderedID returns an id of the named sequence greater than
	// every id of it handed out before the call began, by NextID or
	// NextOrderedID, on any node. Take a kind through one of the two
	// only: an id from a lease NextID took earlier is lower than an
	// ordered id handed out since.
	NextOrderedID(ctx context.Context, kind string) (uint64, error)
}

// NextOrderedID returns s's next id of kind in the order of the calls
// across nodes (OrderedIDs), or its NextID where s hands out every
// sequence in order.
func NextOrderedID(ctx context.Context, s Store, kind string) (uint64, error) {
	if o, ok := s.(OrderedIDs); ok {
		return o.NextOrderedID(ctx, kind)
	}
	return s.NextID(ctx, kind)
}

// Exclusive is a Store that one process at a time can open (kv/badger:
// its directory is locked). Whatever another process left in it was left
// by a process that is gone, so recovery at open may release it all
// without asking whether its owner lives. An engine shared by several
// nodes does not implement it.
type Exclusive interface {
	// Exclusive reports whether this process is the store's only user.
	Exclusive() bool
}

// Unsynced is a Store that can commit a transaction without waiting for it
// to be durable: it is serialized and visible like any other, and made
// durable by the next commit that is (or lost by a crash before that).
// For records that mean nothing after a crash of their writer (vfs's
// upload pins), written often enough that a sync each would cost more
// than the work they guard. Found by type assertion; callers fall back to
// Update.
type Unsynced interface {
	// UpdateUnsynced is Update without the wait for durability.
	UpdateUnsynced(ctx context.Context, fn func(Txn) error) error
}

// Bounded is a Store that takes at most so many bytes of changes in one
// transaction (kv/badger: a share of its memtable); a transaction that
// writes more fails with ErrTxnTooBig at every try. Operations that write
// many records split their work by it, in bytes as well as in keys: small
// files' contents are kept in their records. Found by type assertion; an
// engine without it takes what callers' own bounds give.
type Bounded interface {
	// TxnBytes is the most bytes of keys and values one transaction may
	// set, counting a few bytes of the engine's own per key.
	TxnBytes() int64
}
