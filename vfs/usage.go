package vfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// A root's accounting is a set of deltas, one per change, summed on read:
// concurrent writers to one root then add distinct keys instead of all
// rewriting one, which would make every pair of their transactions
// conflict and serialize their commits. compactUsage folds them together.

// compactAfter is how many deltas a root may gather before a read folds
// them into one.
const compactAfter = 64

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

// loadUsage sums a root's deltas and counts them.
func loadUsage(tx kv.Txn, root uint64) (usageRec, int, error) {
	var u usageRec
	n := 0
	err := tx.Scan(usagePrefix(root), nil, func(k, v []byte) error {
		var d usageRec
		if err := cbor.Unmarshal(v, &d); err != nil {
			return fmt.Errorf("vfs: decode usage of root %d: %w", root, err)
		}
		u.add(d)
		n++
		return nil
	})
	return u, n, err
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
		u, _, err := loadUsage(tx, root)
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
	seq, err := fs.db.NextID(ctx, "usage")
	if err != nil {
		return err
	}
	return put(tx, key(pUsage, root, seq), d)
}

// compactUsage folds a root's deltas into one.
func (fs *FS) compactUsage(ctx context.Context, root uint64) error {
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		var keys [][]byte
		var u usageRec
		err := tx.Scan(usagePrefix(root), nil, func(k, v []byte) error {
			var d usageRec
			if err := cbor.Unmarshal(v, &d); err != nil {
				return err
			}
			u.add(d)
			keys = append(keys, append([]byte(nil), k...))
			return nil
		})
		if err != nil || len(keys) <= 1 {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return fs.addUsage(ctx, tx, root, u, 0)
	})
}
