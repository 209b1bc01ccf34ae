package vfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"berth/kv"
)

// A root's accounting is spread over usageShards records that are summed
// on read. Each change adds itself to one shard: writers to one root then
// rarely touch the same record, where one shared record would make every
// pair of their transactions conflict and serialize their commits. The
// shard is the changed item's (usageShard), so concurrent writes of items
// with nearby ids, as new items get, meet in no shard of the root, its
// tallies or their folder's listing sum (listTxn.shard) at all; a change
// that names no item picks one at random. A fixed set of records, overwritten in place, keeps reads
// to a few point lookups (an append-only log of changes would leave
// tombstones that every later scan must step over). A tally (see
// RootOptions.Tallies) is kept the same way, for the same reason: the
// roots of one organization all add to it.
const usageShards = 16

func (u *usageRec) add(d usageRec) {
	u.Files += d.Files
	u.HeadSize += d.HeadSize
	u.Revisions += d.Revisions
	u.RevisionSize += d.RevisionSize
	u.DelFiles += d.DelFiles
	u.DelRevisions += d.DelRevisions
	u.DeletedSize += d.DeletedSize
	u.Folders += d.Folders
	u.Roots += d.Roots
	u.Reserved += d.Reserved
	u.PropSize += d.PropSize
}

// neg is -u, what takes u out of a sum.
func (u usageRec) neg() usageRec {
	return usageRec{
		Files: -u.Files, HeadSize: -u.HeadSize, Revisions: -u.Revisions, RevisionSize: -u.RevisionSize,
		DelFiles: -u.DelFiles, DelRevisions: -u.DelRevisions, DeletedSize: -u.DeletedSize,
		Folders: -u.Folders, Roots: -u.Roots, Reserved: -u.Reserved, PropSize: -u.PropSize,
	}
}

// trashed is u as the tallies count a deleted root's usage until its
// purge: everything it holds is in the trash then, so its files and
// their older revisions count as deleted files and revisions (a deleted
// file's revisions are all of them, its current one included, as
// countItem counts them), its folders not at all, and its bytes, as many
// as before, as deleted bytes. Its properties and reservations stay as
// they are. Linear, as the tallies need: the trashed sum of changes is
// the sum of the trashed changes.
func (u usageRec) trashed() usageRec {
	return usageRec{
		DelFiles:     u.DelFiles + u.Files,
		DelRevisions: u.DelRevisions + u.Revisions + u.Files,
		DeletedSize:  u.DeletedSize + u.HeadSize + u.RevisionSize,
		Roots:        u.Roots, Reserved: u.Reserved, PropSize: u.PropSize,
	}
}

// inTallies is a root's usage u as r's tallies count it: as it is while r
// is live, trashed while it is deleted (and still counted).
func (r rootRec) inTallies(u usageRec) usageRec {
	if r.Deleted {
		return u.trashed()
	}
	return u
}

// sumShards sums the usage records key(shard) for every shard.
func sumShards(tx kv.Txn, key func(shard uint64) []byte) (usageRec, error) {
	var u usageRec
	for s := range uint64(usageShards) {
		var d usageRec
		if err := get(tx, key(s), &d, nil); err != nil {
			return u, err
		}
		u.add(d)
	}
	return u, nil
}

// loadUsage sums a root's shards.
func loadUsage(tx kv.Txn, root uint64) (usageRec, error) {
	u, err := sumShards(tx, func(s uint64) []byte { return usageKey(root, s) })
	if err != nil {
		return u, fmt.Errorf("vfs: usage of root %d: %w", root, err)
	}
	return u, nil
}

// loadTally sums a tally's shards.
func loadTally(tx kv.Txn, tally uint64) (usageRec, error) {
	u, err := sumShards(tx, func(s uint64) []byte { return tallyKey(tally, s) })
	if err != nil {
		return u, fmt.Errorf("vfs: usage of tally %d: %w", tally, err)
	}
	return u, nil
}

// addShard adds d to the shard k of a sum.
func addShard(tx kv.Txn, k []byte, d usageRec) error {
	var u usageRec
	if err := get(tx, k, &u, nil); err != nil {
		return err
	}
	u.add(d)
	return put(tx, k, u)
}

// addTallies adds d to each of tallies.
func addTallies(tx kv.Txn, tallies []uint64, d usageRec) error {
	for _, t := range tallies {
		if err := addShard(tx, tallyKey(t, usageShard(tx)), d); err != nil {
			return err
		}
	}
	return nil
}

// usageShard is the shard that the change tx makes goes to: that of the
// item it changes (listTxn.item), or one at random. Transactions that
// read and write one shard conflict, and one of them runs again. Picked
// at random for the root and each tally apart, two concurrent writes
// met in one of four or more records with a chance of about a quarter;
// by item, writes of items whose ids differ by less than usageShards (as
// those of items created at about the same time do) never meet.
func usageShard(tx kv.Txn) uint64 {
	if lt, ok := tx.(*listTxn); ok && lt.item != 0 {
		return lt.item % usageShards
	}
	return rand.Uint64N(usageShards)
}

// limits are the quotas a change is checked against: its root's own and
// those of tallies. The zero value checks none.
type limits struct {
	space  int64
	quotas []Quota
}

// quotaError is ErrQuotaExceeded with the limits that refused: freeRoom
// looks for room among the uploads counted against those quotas, not
// among every root that shares any tally with the refused one (all the
// roots under a common ancestor organization, other tenants included).
type quotaError struct {
	err error
	lim limits
}

func (e *quotaError) Error() string { return e.err.Error() }
func (e *quotaError) Unwrap() error { return e.err }

// refuse returns ErrQuotaExceeded, explained by format and args, for a
// change that l refused.
func (l limits) refuse(format string, args ...any) error {
	return &quotaError{err: fmt.Errorf("%w: "+format, append([]any{ErrQuotaExceeded}, args...)...), lim: l}
}

func limitsOf(opts WriteOptions) limits {
	return limits{space: opts.SpaceQuota, quotas: opts.Quotas}
}

// left returns what l leaves for root to grow by, and false when no
// quota of l bounds it.
func (l limits) left(tx kv.Txn, root uint64) (int64, bool, error) {
	left, bound := int64(0), false
	take := func(quota, used int64) {
		n := int64(0)
		if used >= 0 { // below 0 the sum wrapped: nothing is left (over)
			n = max(quota-used, 0)
		}
		if !bound || n < left {
			left, bound = n, true
		}
	}
	if l.space > 0 {
		u, err := loadUsage(tx, root)
		if err != nil {
			return 0, false, err
		}
		take(l.space, u.held())
	}
	for _, q := range l.quotas {
		if q.Bytes <= 0 {
			continue
		}
		u, err := loadTally(tx, q.Tally)
		if err != nil {
			return 0, false, err
		}
		take(q.Bytes, u.held())
	}
	return left, bound, nil
}

// check refuses a change of root that grows it by grow bytes past a quota
// of l, and makes concurrent checked changes under one quota conflict, so
// they are checked one after the other: each reads and writes the quota's
// marker key (two snapshots could otherwise both pass one sum). A change
// that does not grow is never refused: it is what frees space.
func (l limits) check(tx kv.Txn, root uint64, grow int64) error {
	if grow <= 0 {
		return nil
	}
	mark := func(k []byte) error {
		if _, err := tx.Get(k); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		return tx.Set(k, nil)
	}
	if l.space > 0 {
		if err := mark(quotaKey(root)); err != nil {
			return err
		}
		u, err := loadUsage(tx, root)
		if err != nil {
			return err
		}
		if over(u.held(), grow, l.space) {
			return l.refuse("%d of %d bytes used or reserved", u.held(), l.space)
		}
	}
	for _, q := range l.quotas {
		if q.Bytes <= 0 {
			continue
		}
		if err := mark(tallyQuotaKey(q.Tally)); err != nil {
			return err
		}
		u, err := loadTally(tx, q.Tally)
		if err != nil {
			return err
		}
		if over(u.held(), grow, q.Bytes) {
			return l.refuse("%d of %d bytes used or reserved", u.held(), q.Bytes)
		}
	}
	return nil
}

// over reports whether used bytes and grow more pass quota (> 0), without
// the overflow of their sum: a staged upload declares its length, which
// nothing stored bounds, and used+grow past math.MaxInt64 wrapped below the
// quota and let any write through. A used below 0 is a sum that wrapped
// already (reservations no quota bound when they were made, summed past
// math.MaxInt64): it counts as over, never as room.
func over(used, grow, quota int64) bool {
	return used < 0 || grow > quota-used
}

// addUsage records the change d of a root's accounting, in the root's
// shards and, while the root is counted (live, or deleted and not purged
// yet: rootRec.counted), in its tallies'; of a purged root, nothing. It
// first refuses, with lim, a change that grows the root past a quota.
func (fs *FS) addUsage(ctx context.Context, tx kv.Txn, root uint64, d usageRec, lim limits) error {
	if err := lim.check(tx, root, d.held()); err != nil {
		return err
	}
	if d == (usageRec{}) {
		return nil
	}
	// Reading the root also makes the change conflict with DeleteRoot's
	// and with the last transaction of the root's purge, which takes its
	// usage out of its tallies: one of the two then runs again on the
	// other's result, and a change never reaches the tallies of a root
	// whose usage left them, nor misses those of one still counted.
	var r rootRec
	if err := get(tx, rootKey(root), &r, kv.ErrNotFound); err != nil {
		return missing(err, "root", root)
	}
	if r.Purged {
		// Its ledger went with its purge: a change that comes after
		// (a staged upload into it ended, giving back its reservation)
		// wrote a record of it again, which nothing ever removed.
		return nil
	}
	if err := addShard(tx, usageKey(root, usageShard(tx)), d); err != nil {
		return err
	}
	if !r.counted() {
		// Its usage left its tallies when it was purged (or, deleted
		// by a berth before rootRec.TrashCounted, when it was deleted).
		return nil
	}
	return addTallies(tx, r.Tallies, r.inTallies(d))
}

// TallyUsage returns the sum of the usage of the roots created with tally
// among their RootOptions.Tallies, live or deleted and not purged yet (a
// deleted root's bytes are stored until its purge, as a trash's are; all
// it holds counts as deleted files and bytes then, usageRec.trashed);
// RootCount is how many of them are live. A tally no root ever named is
// all zeros.
func (fs *FS) TallyUsage(ctx context.Context, tally uint64) (Usage, error) {
	var u usageRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		var err error
		u, err = loadTally(tx, tally)
		return err
	})
	p := u.public()
	p.RootCount = u.Roots
	return p, err
}

// QuotaLeft returns the bytes that the quotas of opts (SpaceQuota and
// Quotas) leave for root to grow by, the least of them, and false when
// none bounds it.
func (fs *FS) QuotaLeft(ctx context.Context, root uint64, opts WriteOptions) (int64, bool, error) {
	var left int64
	var bound bool
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		var err error
		left, bound, err = limitsOf(opts).left(tx, root)
		return err
	})
	return left, bound, err
}

// roomReporter is a chunk store that can tell its free space and the
// reserve it keeps (chunk.Disk).
type roomReporter interface {
	Free() (int64, error)
	Reserve() int64
}

// roomUnit is the least step of StoreRoom.
const roomUnit = 1 << 30

// StoreRoom returns the free space of the chunk store above its reserve,
// coarsened, and false when the store cannot tell. Chunks are stored once
// across every tenant, so an exact figure would tell anyone who uploads a
// file whether somebody had stored it before (the figure would not move).
// It is rounded down to a unit of at least 1 GiB and at least 1/128 of the
// figure (a power of two times 1 GiB): one upload then moves it only when
// it happens to cross a step, with a chance of its size over the step,
// whether or not it was stored before; a file must be a sizeable part of
// the free space to be told apart with any confidence, and every try
// counts against the prober's own quota.
func (fs *FS) StoreRoom() (int64, bool) {
	rr, ok := fs.chunks.(roomReporter)
	if !ok {
		return 0, false
	}
	free, err := rr.Free()
	if err != nil {
		return 0, false
	}
	return coarseRoom(free - rr.Reserve()), true
}

// coarseRoom rounds n down as StoreRoom says; never below 0.
func coarseRoom(n int64) int64 {
	if n <= 0 {
		return 0
	}
	unit := int64(roomUnit)
	for unit <= n/128 {
		unit *= 2
	}
	return n - n%unit
}

// uniqueTallies drops repeated ids, keeping the order.
func uniqueTallies(ts []uint64) []uint64 {
	out := make([]uint64, 0, len(ts))
	for _, t := range ts {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}
