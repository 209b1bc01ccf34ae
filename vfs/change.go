package vfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Rename gives an item a new name in its folder.
func (fs *FS) Rename(ctx context.Context, root, id uint64, name string, opts WriteOptions) (Node, error) {
	n, err := fs.move(ctx, root, id, 0, name, opts)
	fs.done(OpRename, err, Event{RootID: root, NodeID: id, ParentID: n.ParentID, Name: name, Dir: n.Dir})
	return n, err
}

// Move puts an item into the folder parent of the same root, named name
// (its current name when name is empty). A folder cannot move into itself
// or below itself (ErrNameConflict).
func (fs *FS) Move(ctx context.Context, root, id, parent uint64, name string, opts WriteOptions) (Node, error) {
	n, err := fs.move(ctx, root, id, parent, name, opts)
	fs.done(OpMove, err, Event{RootID: root, NodeID: id, ParentID: parent, Name: n.Name, Dir: n.Dir})
	return n, err
}

func (fs *FS) move(ctx context.Context, root, id, parent uint64, name string, opts WriteOptions) (Node, error) {
	if name != "" {
		if err := ValidateName(name); err != nil {
			return Node{}, err
		}
	}
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		rec, loc, err := liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if rec.Parent == 0 {
			return fmt.Errorf("%w: item %d", ErrRootItem, id)
		}
		dst, newName := parent, name
		if dst == 0 {
			dst = rec.Parent
		}
		if newName == "" {
			newName = rec.Name
		}
		if dst == rec.Parent && newName == rec.Name {
			return nil
		}
		if !rec.Dir && newName != rec.Name && excluded(newName, opts.ExcludedExtensions) {
			return fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(newName))
		}
		if _, _, err := liveDirIn(tx, root, dst); err != nil {
			return err
		}
		if rec.Dir {
			inside, err := ancestorOf(tx, id, dst)
			if err != nil {
				return err
			}
			if inside {
				return fmt.Errorf("%w: cannot move a folder into itself", ErrNameConflict)
			}
		}
		if err := nameFree(tx, dst, newName); err != nil {
			return err
		}
		if err := checkLocks(tx, id, 2, opts, now); err != nil {
			return err
		}
		if dst != rec.Parent {
			if err := checkLocks(tx, dst, 1, opts, now); err != nil {
				return err
			}
		}
		if err := tx.Delete(recKey(id, loc)); err != nil {
			return err
		}
		rec.Parent, rec.Name = dst, newName
		return saveNode(tx, rec, locRec{Root: root, Parent: dst, Name: newName})
	})
	if err != nil {
		return Node{}, err
	}
	return fs.Stat(ctx, root, id)
}

// Delete moves an item, and everything below a folder, to the deleted
// state: it leaves listings and paths but keeps its revisions, counted as
// deleted space, until purged. Any lock in the subtree that the caller does
// not hold refuses the whole delete.
func (fs *FS) Delete(ctx context.Context, root, id uint64, opts WriteOptions) error {
	var rec nodeRec
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		var loc locRec
		var err error
		rec, loc, err = liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if rec.Parent == 0 {
			return fmt.Errorf("%w: item %d", ErrRootItem, id)
		}
		if err := checkLocks(tx, id, 2, opts, now); err != nil {
			return err
		}
		var d usageRec
		if err := tallyDelete(tx, rec, &d, opts, now); err != nil {
			return err
		}
		if err := tx.Delete(recKey(rec.ID, loc)); err != nil {
			return err
		}
		rec.Deleted = now
		if err := saveNode(tx, rec, locRec{Root: root, Parent: rec.Parent, Name: rec.Name, Deleted: true}); err != nil {
			return err
		}
		return fs.addUsage(ctx, tx, root, d, 0)
	})
	fs.done(OpDelete, err, Event{RootID: root, NodeID: id, ParentID: rec.Parent, Name: rec.Name, Dir: rec.Dir, Size: rec.Size})
	return err
}

// tallyDelete adds to u what deleting rec and everything live below it
// moves from live to deleted space, and refuses with ErrLocked when any of
// it holds a lock opts does not. It only reads: the delete itself marks
// rec alone.
func tallyDelete(tx kv.Txn, rec nodeRec, u *usageRec, opts WriteOptions, now int64) error {
	if blocks(rec.Locks, opts, now, false) {
		return fmt.Errorf("%w: %q", ErrLocked, rec.Name)
	}
	if rec.Dir {
		// Read (and so watch) the folder's generation: the scan below
		// misses children committed after this snapshot, and a write of
		// G/ by their creation now conflicts with this delete instead.
		if _, err := tx.Get(genKey(rec.ID)); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		kids, err := records(tx, childPrefix(rec.ID))
		if err != nil {
			return err
		}
		for _, c := range kids {
			if err := tallyDelete(tx, c, u, opts, now); err != nil {
				return err
			}
		}
		u.Folders--
		return nil
	}
	count, total, err := revisionTotals(tx, rec.ID)
	if err != nil {
		return err
	}
	u.Files--
	u.HeadSize -= rec.Size
	u.Revisions -= count - 1
	u.RevisionSize -= total - rec.Size
	u.DelFiles++
	u.DelRevisions += count
	u.DeletedSize += total
	return nil
}

// revisionTotals counts a file's revisions and sums their sizes.
func revisionTotals(tx kv.Txn, file uint64) (count, total int64, err error) {
	err = tx.Scan(revPrefix(file), nil, func(k, v []byte) error {
		var r revRec
		if err := cbor.Unmarshal(v, &r); err != nil {
			return err
		}
		count++
		total += r.Size
		return nil
	})
	return count, total, err
}
