package vfs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"berth/kv"
)

// A root's accounting is spread over usageShards records that are summed
// on read. Each change adds itself to one shard picked at random: writers
// to one root then rarely touch the same record, where one shared record
// would make every pair of their transactions conflict and serialize
// their commits. A fixed set of records, overwritten in place, keeps reads
// to a few point lookups (an append-only log of changes would leave
// tombstones that every later scan must step over).
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
}

// loadUsage sums a root's shards.
func loadUsage(tx kv.Txn, root uint64) (usageRec, error) {
	var u usageRec
	for s := range uint64(usageShards) {
		var d usageRec
		if err := get(tx, usageKey(root, s), &d, nil); err != nil {
			return u, fmt.Errorf("vfs: usage of root %d: %w", root, err)
		}
		u.add(d)
	}
	return u, nil
}

// addUsage records the change d of a root's accounting. With a quota, it
// refuses a change that grows the root past it, and makes concurrent
// quota-checked changes of the root conflict so they are checked one after
// the other.
func (fs *FS) addUsage(ctx context.Context, tx kv.Txn, root uint64, d usageRec, quota int64) error {
	if quota > 0 && d.physical() > 0 {
		if _, err := tx.Get(quotaKey(root)); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		u, err := loadUsage(tx, root)
		if err != nil {
			return err
		}
		if u.physical()+d.physical() > quota {
			return fmt.Errorf("%w: %d of %d bytes used", ErrQuotaExceeded, u.physical(), quota)
		}
		if err := tx.Set(quotaKey(root), nil); err != nil {
			return err
		}
	}
	if d == (usageRec{}) {
		return nil
	}
	k := usageKey(root, rand.Uint64N(usageShards))
	var u usageRec
	if err := get(tx, k, &u, nil); err != nil {
		return err
	}
	u.add(d)
	return put(tx, k, u)
}
