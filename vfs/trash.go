package vfs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// PurgeReport says what PurgeDeleted did.
type PurgeReport struct {
	Purged  int // deleted items (with everything below them) removed for good
	Roots   int // deleted roots whose whole tree was removed
	Skipped int // deleted items left: in a deleted root not yet due, or gone meanwhile
	Failed  int // deleted roots and items whose purge failed (see the error)
}

// String reads like a log line.
func (r PurgeReport) String() string {
	return fmt.Sprintf("purged %d deleted items, %d deleted roots, skipped %d, failed %d", r.Purged, r.Roots, r.Skipped, r.Failed)
}

// PurgeDeleted purges, in every root, each item deleted before the given
// time, with everything below it (see Purge), and the whole tree of each
// root deleted before then; their chunks become garbage for the next GC.
// Nothing else frees the space of deleted items, so it is how an operator
// empties the trash of a server whose disk filled up. Items in a deleted
// root not yet due are skipped (Purge refuses them), as are the trees of
// copies still being built. A root deleted before berth recorded when
// gets the current time now, so it waits its full delay from here rather
// than go at once.
func (fs *FS) PurgeDeleted(ctx context.Context, before time.Time) (PurgeReport, error) {
	var rep PurgeReport
	cutoff := before.UnixNano()
	roots, err := fs.dueRoots(ctx, cutoff)
	if err != nil {
		return rep, err
	}
	// One root or item that cannot be purged (a damaged record) must not
	// keep the trash of every other from being emptied, at every run: its
	// error is kept and the purge goes on. A cancelled ctx stops it.
	var errs []error
	failed := func(err error) error {
		rep.Failed++
		errs = append(errs, err)
		if ctx.Err() != nil {
			return errors.Join(errs...)
		}
		return nil
	}
	for _, r := range roots {
		if err := fs.purgeRoot(ctx, r); err != nil {
			if err := failed(fmt.Errorf("vfs: purging deleted root %d: %w", r, err)); err != nil {
				return rep, err
			}
			continue
		}
		rep.Roots++
	}
	type item struct{ root, id uint64 }
	var due []item
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		due = due[:0]
		return tx.Scan([]byte(pDeleted), nil, func(k, v []byte) error {
			var rec nodeRec
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("vfs: decode %q: %w", k, err)
			}
			if rec.Deleted != 0 && rec.Deleted < cutoff && !rec.Staged {
				due = append(due, item{rec.Root, rec.ID})
			}
			return ctx.Err()
		})
	})
	if err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	for _, it := range due {
		err := fs.Purge(ctx, it.root, it.id)
		switch {
		case err == nil:
			rep.Purged++
		case errors.Is(err, ErrNotExist), errors.Is(err, ErrRootDeleted):
			// Purged with a folder deleted later, or in a deleted root.
			rep.Skipped++
		default:
			if err := failed(fmt.Errorf("vfs: purging deleted item %d of root %d: %w", it.id, it.root, err)); err != nil {
				return rep, err
			}
		}
	}
	return rep, errors.Join(errs...)
}

// dueRoots returns the roots deleted before cutoff and not purged yet,
// first stamping with the current time those deleted without one. The
// stamps go fs.refBatch roots a transaction: an upgrade may find more
// such roots than one transaction holds, and a stamp that never commits
// would stop every purge, of items too, at every run.
func (fs *FS) dueRoots(ctx context.Context, cutoff int64) ([]uint64, error) {
	var due, unstamped []uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		due, unstamped = due[:0], unstamped[:0]
		return tx.Scan([]byte(pRoot), nil, func(k, v []byte) error {
			var r rootRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("vfs: decode %q: %w", k, err)
			}
			switch {
			case !r.Deleted || r.Purged:
			case r.DeletedAt == 0:
				unstamped = append(unstamped, r.ID)
			case r.DeletedAt < cutoff:
				due = append(due, r.ID)
			}
			return ctx.Err()
		})
	})
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(unstamped); start += fs.refBatch {
		batch := unstamped[start:min(start+fs.refBatch, len(unstamped))]
		err := fs.update(ctx, func(tx kv.Txn) error {
			now := fs.nowNs()
			for _, id := range batch {
				var r rootRec
				if err := get(tx, rootKey(id), &r, nil); err != nil {
					return err
				}
				if r.DeletedAt != 0 {
					continue // stamped by a run alongside
				}
				r.DeletedAt = now
				if err := put(tx, rootKey(id), r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return due, nil
}

// purgeRoot removes everything in a deleted root: its whole tree, top
// folder included, and its usage records, then marks it purged. Nothing
// adds to a deleted root, so one snapshot lists all there is, but for the
// trees of copies still being staged into it: those are left to the copy,
// whose last transaction finds the root deleted and whose release purges
// them. An interrupted purge leaves a smaller tree; the next one goes on.
func (fs *FS) purgeRoot(ctx context.Context, root uint64) error {
	var order []uint64 // children before their folder
	var top uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		order = order[:0]
		var r rootRec
		if err := get(tx, rootKey(root), &r, nil); err != nil {
			return err
		}
		top = r.Folder
		rec, _, err := loadNode(tx, top)
		if errors.Is(err, ErrNotExist) {
			return nil // purged by an earlier run that stopped short of the end
		} else if err != nil {
			return err
		}
		order, err = postOrder(ctx, tx, rec, true)
		return err
	})
	if err != nil {
		return err
	}
	// Not counted: the usage records go whole below.
	if err := fs.purgeNodes(ctx, root, order, false); err != nil {
		return err
	}
	return fs.update(ctx, func(tx kv.Txn) error {
		var r rootRec
		if err := get(tx, rootKey(root), &r, nil); err != nil {
			return err
		}
		for s := range uint64(usageShards) {
			if err := tx.Delete(usageKey(root, s)); err != nil {
				return err
			}
		}
		if err := tx.Delete(quotaKey(root)); err != nil {
			return err
		}
		r.Purged = true
		return put(tx, rootKey(root), r)
	})
}
