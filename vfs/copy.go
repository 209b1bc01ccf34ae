package vfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Copy copies an item (a folder with everything below it) into the folder
// parent of root dst under name. Contents are shared, not duplicated: the
// copy's revisions reference the same chunks. Only current revisions are
// copied.
func (fs *FS) Copy(ctx context.Context, root, id, dst, parent uint64, name string, opts WriteOptions) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	var newID uint64
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		src, _, err := liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if src.Parent == 0 {
			return fmt.Errorf("%w: item %d", ErrRootItem, id)
		}
		if !src.Dir && excluded(name, opts.ExcludedExtensions) {
			return fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(name))
		}
		if _, _, err := liveDirIn(tx, dst, parent); err != nil {
			return err
		}
		if src.Dir && dst == root {
			inside, err := ancestorOf(tx, id, parent)
			if err != nil {
				return err
			}
			if inside {
				return fmt.Errorf("%w: cannot copy a folder into itself", ErrNameConflict)
			}
		}
		if err := nameFree(tx, parent, name); err != nil {
			return err
		}
		if err := checkLocks(tx, parent, 1, opts, now); err != nil {
			return err
		}
		var d usageRec
		newID, err = fs.copyTree(ctx, tx, src, dst, parent, name, &d, now)
		if err != nil {
			return err
		}
		return fs.addUsage(ctx, tx, dst, d, opts.SpaceQuota)
	})
	fs.done(OpCopy, err, Event{RootID: dst, NodeID: newID, ParentID: parent, Name: name})
	if err != nil {
		return Node{}, err
	}
	return fs.Stat(ctx, dst, newID)
}

func (fs *FS) copyTree(ctx context.Context, tx kv.Txn, src nodeRec, root, parent uint64, name string, u *usageRec, now int64) (uint64, error) {
	id, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return 0, err
	}
	rec := nodeRec{ID: id, Root: root, Parent: parent, Name: name, Dir: src.Dir,
		Created: now, Modified: src.Modified, Size: src.Size}
	if src.Dir {
		u.Folders++
	} else {
		var rev revRec
		if err := get(tx, revKey(src.ID, src.Rev), &rev, fmt.Errorf("%w: revision %d", ErrNotExist, src.Rev)); err != nil {
			return 0, err
		}
		if rec.Rev, err = fs.db.NextID(ctx, "revision"); err != nil {
			return 0, err
		}
		rev.ID, rev.File, rev.Created = rec.Rev, id, now
		if err := put(tx, revKey(id, rec.Rev), rev); err != nil {
			return 0, err
		}
		if err := addRefs(tx, rev.Chunks, 1); err != nil {
			return 0, err
		}
		u.Files++
		u.HeadSize += rec.Size
	}
	if err := saveNode(tx, rec, locRec{Root: root, Parent: parent, Name: name}); err != nil {
		return 0, err
	}
	if err := setModified(tx, rec, 0); err != nil {
		return 0, err
	}
	if err := copyProps(tx, src.ID, id); err != nil {
		return 0, err
	}
	if !src.Dir {
		return id, nil
	}
	kids, err := records(tx, childPrefix(src.ID))
	if err != nil {
		return 0, err
	}
	for _, c := range kids {
		if _, err := fs.copyTree(ctx, tx, c, root, id, c.Name, u, now); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// Purge removes a deleted item, and everything below a deleted folder, for
// good: revisions go, and chunks no longer referenced become garbage. A
// large tree is removed in several transactions, deepest items first, so an
// interrupted purge leaves a smaller deleted tree, never a broken one.
func (fs *FS) Purge(ctx context.Context, root, id uint64) error {
	err := fs.purge(ctx, root, id)
	fs.done(OpPurge, err, Event{RootID: root, NodeID: id})
	return err
}

// purgeBatch is how many items one purge transaction removes: well inside
// the engine's transaction size for items with a few revisions each.
const purgeBatch = 256

func (fs *FS) purge(ctx context.Context, root, id uint64) error {
	var order []uint64 // children before their folder
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		order = order[:0]
		rec, _, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if rec.Deleted == 0 {
			return fmt.Errorf("%w: item %d is not deleted", ErrNotExist, id)
		}
		var walk func(rec nodeRec) error
		walk = func(rec nodeRec) error {
			if rec.Dir {
				for _, prefix := range [][]byte{childPrefix(rec.ID), deletedPrefix(rec.ID)} {
					kids, err := records(tx, prefix)
					if err != nil {
						return err
					}
					for _, c := range kids {
						if err := walk(c); err != nil {
							return err
						}
					}
				}
			}
			order = append(order, rec.ID)
			return ctx.Err()
		}
		return walk(rec)
	})
	if err != nil {
		return err
	}
	for start := 0; start < len(order); start += purgeBatch {
		batch := order[start:min(start+purgeBatch, len(order))]
		err := fs.update(ctx, func(tx kv.Txn) error {
			var d usageRec
			for _, n := range batch {
				if err := purgeNode(tx, n, &d); err != nil {
					return err
				}
			}
			return fs.addUsage(ctx, tx, root, d, 0)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// purgeNode removes one deleted item whose children are gone already, and
// its revisions; an item already removed (a concurrent purge) is skipped.
func purgeNode(tx kv.Txn, id uint64, u *usageRec) error {
	rec, loc, err := loadNode(tx, id)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !rec.Dir {
		var revs []revRec
		err := tx.Scan(revPrefix(rec.ID), nil, func(k, v []byte) error {
			var r revRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			revs = append(revs, r)
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range revs {
			if err := addRefs(tx, r.Chunks, -1); err != nil {
				return err
			}
			if err := tx.Delete(revKey(rec.ID, r.ID)); err != nil {
				return err
			}
			u.DelRevisions--
			u.DeletedSize -= r.Size
		}
		u.DelFiles--
	}
	if err := deleteProps(tx, rec.ID); err != nil {
		return err
	}
	for _, k := range [][]byte{recKey(rec.ID, loc), locKey(rec.ID), timeKey(rec.Root, rec.Modified, rec.ID)} {
		if err := tx.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
