package vfs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Rename gives an item a new name in its folder.
func (fs *FS) Rename(ctx context.Context, root, id uint64, name string, opts WriteOptions) (Node, error) {
	n, err := fs.move(ctx, OpRename, root, id, 0, name, opts, nil)
	fs.done(OpRename, err, Event{RootID: root, NodeID: id, ParentID: n.ParentID, Name: name, Dir: n.Dir})
	return n, err
}

// Move puts an item into the folder parent of the same root, named name
// (its current name when name is empty). A folder cannot move into itself
// or below itself (ErrNameConflict), nor past MaxDepth (ErrTooDeep). Like Delete, any lock in a folder's
// subtree that the caller does not hold refuses the move (ErrLocked).
// Token-required locks (WebDAV's, which name a path) on the item and
// below it end with the move, as RFC 4918 7.6 wants; a holder's lock
// (REST's, on the item) goes with it. Rename is a move too.
func (fs *FS) Move(ctx context.Context, root, id, parent uint64, name string, opts WriteOptions) (Node, error) {
	n, err := fs.move(ctx, OpMove, root, id, parent, name, opts, nil)
	fs.done(OpMove, err, Event{RootID: root, NodeID: id, ParentID: parent, Name: n.Name, Dir: n.Dir})
	return n, err
}

// LookupMove is Lookup of src and LookupWithParent of dst in one read,
// for a move or copy of the item at src to dst within root: srcErr is
// Lookup's error, err LookupWithParent's (and the read's, which is both).
func (fs *FS) LookupMove(ctx context.Context, root uint64, src, dst string) (sn Node, srcErr error, parent, n Node, found bool, err error) {
	ssegs, srcErr := splitPath(src)
	dsegs, err := splitPath(dst)
	// The read fails on its own only where it never ran the function,
	// which refuses nothing: its error is then both lookups'.
	verr := fs.db.View(ctx, func(tx kv.Txn) error {
		if srcErr == nil {
			_, sn, srcErr = fs.lookupNode(tx, root, ssegs, src)
		}
		if err == nil {
			parent, n, found, err = fs.lookupWithParent(tx, root, dsegs)
		}
		return nil
	})
	if verr != nil {
		srcErr, err = cmp.Or(srcErr, verr), cmp.Or(err, verr)
	}
	return sn, srcErr, parent, n, found, err
}

// MoveAt is Move of the item at path src of root to path dst of the same
// root, both looked up in the transaction that moves it, where a lookup
// before Move read them in one of its own: a WebDAV MOVE costs one
// transaction. check, when not nil, runs in that transaction with what
// the paths name: n, the item at src (a folder with its Listing where
// opts.Listing asks); dstErr, why dst names no place for it (ErrNotExist
// or ErrNotDir for the folder above it, dst's own name errors, the
// read's); old, the live item at dst, if any. An error from
// check refuses the move as it is; where check returns nil, dstErr does.
// No item at src is ErrNotExist, before check runs. replaced says the
// move deleted an item at dst in its place (opts.Overwrite, as Move).
func (fs *FS) MoveAt(ctx context.Context, root uint64, src, dst string, opts WriteOptions, check func(n Node, dstErr error, old *Node) error) (n Node, replaced bool, err error) {
	at := &movePath{src: src, check: check, listing: opts.Listing}
	if at.srcSegs, err = fs.itemPath(OpMove, root, src, ErrRootItem, "the top folder"); err != nil {
		return Node{}, false, err
	}
	if at.dstSegs, at.dstErr = splitPath(dst); at.dstErr == nil && len(at.dstSegs) == 0 {
		at.dstErr = fmt.Errorf("%w: the top folder has no folder above it", ErrInvalidName)
	}
	n, err = fs.move(ctx, OpMove, root, 0, 0, "", opts, at)
	fs.done(OpMove, counted(err, at.refused), Event{RootID: root, NodeID: n.ID, ParentID: at.parent, Name: n.Name, Dir: n.Dir})
	return n, at.replaced, err
}

// movePath is the item a MoveAt names and where it goes, with what the
// move found.
type movePath struct {
	src              string
	srcSegs, dstSegs []string // from the root's top folder down
	dstErr           error    // dst's own error (splitPath's)
	check            func(Node, error, *Node) error
	listing          bool // WriteOptions.Listing
	// parent is the folder found for dst in the last try; replaced
	// says the committed move replaced an item there.
	parent   uint64
	replaced bool
	// refused is check's error in the last try, for the metrics
	// (counted), unless it is the destination's error handed back.
	refused error
}

// lookup finds, in tx, the item at a's source and the folder of its
// destination, each walked down by names from the top folder (so live,
// and placed where their names say: not read again by id), and lets
// check refuse what it found. name is the destination's last name.
func (a *movePath) lookup(fs *FS, tx kv.Txn, root uint64) (rec nodeRec, parent uint64, name string, err error) {
	rec, n, err := fs.lookupNode(tx, root, a.srcSegs, a.src)
	if err != nil {
		return nodeRec{}, 0, "", err
	}
	dstErr := a.dstErr
	var pn Node
	var old *Node
	if dstErr == nil {
		var dn Node
		var found bool
		if pn, dn, found, dstErr = fs.lookupWithParent(tx, root, a.dstSegs); found {
			old = &dn
		}
	}
	a.refused = nil
	if a.check != nil {
		if err := withListing(tx, &n, a.listing, fs.nowNs()); err != nil {
			return nodeRec{}, 0, "", err
		}
		if err := a.check(n, dstErr, old); err != nil {
			// dstErr handed back is the walk's (a damaged store's,
			// say), as where check returns nil: not the caller's
			// refusal for the metrics.
			if dstErr == nil || !errors.Is(err, dstErr) {
				a.refused = err
			}
			return nodeRec{}, 0, "", err
		}
	}
	if dstErr != nil {
		return nodeRec{}, 0, "", dstErr
	}
	a.parent = pn.ID
	return rec, pn.ID, a.dstSegs[len(a.dstSegs)-1], nil
}

// move is Move (a Rename where parent is 0), or MoveAt of at (id,
// parent and name are then found in the transaction).
func (fs *FS) move(ctx context.Context, op Op, root, id, parent uint64, name string, opts WriteOptions, at *movePath) (Node, error) {
	if name != "" {
		if err := ValidateName(name); err != nil {
			return Node{}, err
		}
	}
	var replaced replacement
	var n Node
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		replaced = replacement{}
		dst, newName := parent, name
		var rec nodeRec
		var loc locRec
		var err error
		if at != nil {
			if rec, dst, newName, err = at.lookup(fs, tx, root); err != nil {
				return err
			}
			id, loc = rec.ID, liveLoc(rec)
		} else if rec, loc, err = liveNodeIn(tx, root, id); err != nil {
			return err
		}
		if rec.Parent == 0 {
			return fmt.Errorf("%w: item %d", ErrRootItem, id)
		}
		if err := atRevision(rec, opts.IfRevision); err != nil {
			return err
		}
		if dst == 0 {
			dst = rec.Parent
		}
		if newName == "" {
			newName = rec.Name
		}
		if dst == rec.Parent && newName == rec.Name {
			n, err = nodeAt(tx, id, now)
			return err
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
		if dst != rec.Parent {
			if err := fitsDepth(tx, rec, dst); err != nil {
				return err
			}
		}
		gone, err := replaceIn(tx, root, dst, newName, id, opts, now)
		if err != nil {
			return err
		}
		replaced = gone
		if err := checkLocks(tx, id, 2, opts, now); err != nil {
			return err
		}
		var pathLocked []nodeRec
		if rec.Dir {
			// What is below moves too: a lock on any of it, as for a
			// delete, refuses the move (RFC 4918 9.9.4), or the holder
			// would find its file gone from the path it locked.
			if err := walkLive(tx, id, func(c nodeRec) error {
				if blocks(c.Locks, opts, now) {
					return fmt.Errorf("%w: %q", ErrLocked, c.Name)
				}
				if slices.ContainsFunc(c.Locks, isPathLock) {
					pathLocked = append(pathLocked, c)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if dst != rec.Parent {
			if err := checkLocks(tx, dst, 1, opts, now); err != nil {
				return err
			}
		}
		// Token-required (WebDAV) locks name the path they were taken
		// on and stay behind: RFC 4918 7.6, a MOVE must not move a
		// write lock with the resource. A lock of the folder it
		// arrives in covers it by where it is.
		for _, c := range pathLocked {
			c.Locks = slices.DeleteFunc(c.Locks, isPathLock)
			if err := put(tx, childKey(c.Parent, c.Name), c); err != nil {
				return err
			}
		}
		if err := tx.Delete(recKey(id, loc)); err != nil {
			return err
		}
		oldName := rec.Name
		var oldPath string
		if op == OpMove && fs.jnl != nil {
			if oldPath, err = pathOf(tx, rec); err != nil {
				return err
			}
		}
		rec.Parent, rec.Name = dst, newName
		rec.Locks = slices.DeleteFunc(rec.Locks, isPathLock)
		if err := saveNode(tx, rec, locRec{Root: root, Parent: dst, Name: newName}); err != nil {
			return err
		}
		if err := takeOverLocks(tx, id, replaced, now); err != nil {
			return err
		}
		if err := fs.addUsage(ctx, tx, root, replaced.usage, limits{}); err != nil {
			return err
		}
		ev := Event{RootID: root, NodeID: id, ParentID: dst, Name: newName, OldName: oldName, OldPath: oldPath, Dir: rec.Dir}
		if oldPath != "" {
			if ev.Path, err = pathOf(tx, rec); err != nil {
				return err
			}
		}
		if err := fs.journal(ctx, tx, op, opts.Actor, ev); err != nil {
			return err
		}
		// The folders above dst are read: liveDirIn and the depth
		// and lock checks above walked them (see nodeAt).
		n, err = nodeAt(tx, id, now)
		return err
	})
	if err != nil {
		return Node{}, err
	}
	if at != nil {
		at.replaced = replaced.rec.ID != 0
	}
	fs.replaced(root, replaced)
	return n, nil
}

// Delete moves an item, and everything below a folder, to the deleted
// state: it leaves listings and paths but keeps its revisions, counted as
// deleted space, until purged. Any lock in the subtree that the caller does
// not hold refuses the whole delete.
func (fs *FS) Delete(ctx context.Context, root, id uint64, opts WriteOptions) error {
	return fs.delete(ctx, root, id, opts, nil)
}

// DeleteAt is Delete of the item at path p of root, looked up in the
// transaction that deletes it, where check, when not nil, sees it (a
// folder with its Listing where opts.Listing asks) and may refuse the
// delete with its own error. No item at p is ErrNotExist.
func (fs *FS) DeleteAt(ctx context.Context, root uint64, p string, opts WriteOptions, check func(n Node) error) error {
	segs, err := fs.itemPath(OpDelete, root, p, ErrRootItem, "the top folder")
	if err != nil {
		return err
	}
	return fs.delete(ctx, root, 0, opts, &deletePath{p: p, segs: segs, check: check})
}

// withListing sets the listing hash of n, when a folder and the caller
// wants it (WriteOptions.Listing), as tx reads it at now: the checks of DeleteAt and MoveAt judge a WebDAV If-Match on a
// collection, whose entity tag is made of it, in the commit, on the
// folder the commit acts on. Read in the commit, a child's change that
// commits first makes the commit conflict and run again, on the new hash.
func withListing(tx kv.Txn, n *Node, want bool, now int64) error {
	if !want || !n.Dir {
		return nil
	}
	var err error
	n.Listing, err = listHash(tx, n.ID, now)
	return err
}

// deletePath is the item a DeleteAt names: its path p, p's names segs
// (not empty), and the caller's check.
type deletePath struct {
	p     string
	segs  []string
	check func(Node) error
	// refused is check's error in the last try, for the metrics
	// (counted).
	refused error
}

// refusedErr is a's check's error in the last try, nil where a is.
func (a *deletePath) refusedErr() error {
	if a == nil {
		return nil
	}
	return a.refused
}

// delete is Delete, or DeleteAt of at (id is then found in the
// transaction).
func (fs *FS) delete(ctx context.Context, root, id uint64, opts WriteOptions, at *deletePath) error {
	var rec nodeRec
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		var loc locRec
		if at != nil {
			// Found by names from the top folder down: live, and
			// where its names say, so not read again by id.
			found, n, err := fs.lookupNode(tx, root, at.segs, at.p)
			if err != nil {
				return err
			}
			at.refused = nil
			if at.check != nil {
				if err := withListing(tx, &n, opts.Listing, now); err != nil {
					return err
				}
				if err := at.check(n); err != nil {
					at.refused = err
					return err
				}
			}
			id, rec, loc = found.ID, found, liveLoc(found)
		} else {
			var err error
			if rec, loc, err = liveNodeIn(tx, root, id); err != nil {
				return err
			}
		}
		if rec.Parent == 0 {
			return fmt.Errorf("%w: item %d", ErrRootItem, id)
		}
		if err := atRevision(rec, opts.IfRevision); err != nil {
			return err
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
		if err := fs.addUsage(ctx, tx, root, d, limits{}); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpDelete, opts.Actor, Event{RootID: root, NodeID: id, ParentID: rec.Parent, Name: rec.Name, Dir: rec.Dir, Size: rec.Size})
	})
	fs.done(OpDelete, counted(err, at.refusedErr()), Event{RootID: root, NodeID: id, ParentID: rec.Parent, Name: rec.Name, Dir: rec.Dir, Size: rec.Size})
	return err
}

// atRevision is ErrChanged when rev (a WriteOptions' or LockRequest's
// IfRevision) is set and rec is not a file at that revision: a front
// end's If-Match, checked before a rename, move, delete or lock, then
// holds at its commit too, and a revision that landed in between is not
// the one renamed, moved, deleted or locked unseen.
func atRevision(rec nodeRec, rev uint64) error {
	if rev != 0 && (rec.Dir || rec.Rev != rev) {
		return fmt.Errorf("%w: item %d is not at revision %d", ErrChanged, rec.ID, rev)
	}
	return nil
}

// replacement is an item that a Copy or Move with Overwrite deleted in
// its place, and what that did to the usage of its root.
type replacement struct {
	rec   nodeRec
	usage usageRec
}

// replaceIn makes the name free in the folder parent of root for the item
// keep (or a copy of it): without opts.Overwrite a live item of that name
// is ErrNameConflict; with it, that item is deleted as Delete does, unless
// it is keep or a folder above keep (ErrNameConflict) or a lock refuses
// it (ErrLocked). The usage change is the caller's to record.
func replaceIn(tx kv.Txn, root, parent uint64, name string, keep uint64, opts WriteOptions, now int64) (replacement, error) {
	var rec nodeRec
	err := get(tx, childKey(parent, name), &rec, kv.ErrNotFound)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return replacement{}, nil
	case err != nil:
		return replacement{}, err
	case !opts.Overwrite:
		return replacement{}, fmt.Errorf("%w: %q exists", ErrNameConflict, name)
	}
	inside, err := ancestorOf(tx, rec.ID, keep)
	if err != nil {
		return replacement{}, err
	}
	if inside {
		return replacement{}, fmt.Errorf("%w: %q holds what would replace it", ErrNameConflict, name)
	}
	if err := checkLocks(tx, rec.ID, 2, opts, now); err != nil {
		return replacement{}, err
	}
	r := replacement{rec: rec}
	if err := tallyDelete(tx, rec, &r.usage, opts, now); err != nil {
		return replacement{}, err
	}
	if err := tx.Delete(childKey(parent, name)); err != nil {
		return replacement{}, err
	}
	rec.Deleted = now
	r.rec = rec
	return r, saveNode(tx, rec, locRec{Root: root, Parent: parent, Name: name, Deleted: true})
}

// takeOverLocks gives the item id, just put where the replaced item r
// was, r's live token-required (WebDAV) locks: they name the path, and
// RFC 4918 7.6 has what a COPY or MOVE puts at a locked destination join
// the destination's lock. A deep lock passes as one only to a folder. A
// holder's (REST) lock was on the item replaced and ends with it.
func takeOverLocks(tx kv.Txn, id uint64, r replacement, now int64) error {
	var locks []lockRec
	for _, l := range pruneLocks(slices.Clone(r.rec.Locks), now) {
		if isPathLock(l) {
			locks = append(locks, l)
		}
	}
	if len(locks) == 0 {
		return nil
	}
	rec, loc, err := loadNode(tx, id)
	if err != nil {
		return err
	}
	for _, l := range locks {
		l.Deep = l.Deep && rec.Dir
		rec.Locks = append(rec.Locks, l)
	}
	return put(tx, recKey(id, loc), rec)
}

// replaced reports the delete of an item that a Copy or Move replaced.
func (fs *FS) replaced(root uint64, r replacement) {
	if r.rec.ID == 0 {
		return
	}
	fs.done(OpDelete, nil, Event{RootID: root, NodeID: r.rec.ID, ParentID: r.rec.Parent, Name: r.rec.Name, Dir: r.rec.Dir, Size: r.rec.Size})
}

// tallyDelete adds to u what deleting rec and everything live below it
// moves from live to deleted space, and refuses with ErrLocked when any of
// it holds a lock opts does not. It only reads: the delete itself marks
// rec alone.
func tallyDelete(tx kv.Txn, rec nodeRec, u *usageRec, opts WriteOptions, now int64) error {
	if blocks(rec.Locks, opts, now) {
		return fmt.Errorf("%w: %q", ErrLocked, rec.Name)
	}
	if rec.Dir {
		// Read (and so watch) the folder's generation: the scan below
		// misses children committed after this snapshot, and a write of
		// G/ by their creation now conflicts with this delete instead.
		if _, err := tx.Get(genKey(rec.ID)); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		err := eachRecord(tx, childPrefix(rec.ID), func(c nodeRec) error {
			return tallyDelete(tx, c, u, opts, now)
		})
		if err != nil {
			return err
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

// MetaGeneration is the metadata store's kv.MetaGeneration: Generation
// for what is not file content (kv.Content), which file writes leave
// alone. A front end that keeps what it derived from account reads and
// root records (a session's roots) keys its Cache on it, read before
// those reads, so that it holds across other callers' file writes.
func (fs *FS) MetaGeneration() uint64 { return kv.MetaGeneration(fs.db) }

// MetaGeneration passes the store's on (kv.MetaGenerationer), which the
// embedded interface would hide.
func (s listStore) MetaGeneration() uint64 { return kv.MetaGeneration(s.Store) }
