package vfs

import (
	"context"
	"errors"
	"fmt"
	"unicode/utf8"

	"berth/kv"
	"berth/vfs/chunk"
)

// Copy copies an item (a folder with everything below it) into the folder
// parent of root dst under name. Contents are shared, not duplicated: the
// copy's revisions reference the same chunks. Only current revisions are
// copied. The copy appears whole or not at all: a tree too large for one
// transaction is built out of sight first (see copyStaged).
func (fs *FS) Copy(ctx context.Context, root, id, dst, parent uint64, name string, opts WriteOptions) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	if err := fs.roomFor(); err != nil {
		return Node{}, err
	}
	var newID uint64
	var replaced replacement
	large, err := fs.copyIsLarge(ctx, root, id)
	switch {
	case err != nil:
	case large:
		newID, replaced, err = fs.copyStaged(ctx, root, id, dst, parent, name, opts)
	default:
		err = fs.update(ctx, func(tx kv.Txn) error {
			now := fs.nowNs()
			src, err := copyCheck(tx, root, id, dst, parent, name, opts, now)
			if err != nil {
				return err
			}
			if replaced, err = replaceIn(tx, dst, parent, name, id, opts, now); err != nil {
				return err
			}
			d := replaced.usage
			newID, err = fs.copyTree(ctx, tx, src, dst, parent, name, opts.ExcludedExtensions, &d, now)
			if err != nil {
				return err
			}
			if err := takeOverLocks(tx, newID, replaced, now); err != nil {
				return err
			}
			if err := fs.addUsage(ctx, tx, dst, d, limitsOf(opts)); err != nil {
				return err
			}
			return fs.journal(ctx, tx, OpCopy, opts.Actor, Event{RootID: dst, NodeID: newID, ParentID: parent, Name: name, Dir: src.Dir})
		})
	}
	if err == nil {
		fs.replaced(dst, replaced)
	}
	fs.done(OpCopy, err, Event{RootID: dst, NodeID: newID, ParentID: parent, Name: name})
	if err != nil {
		return Node{}, err
	}
	return fs.Stat(ctx, dst, newID)
}

// CopyEmpty copies the folder id of root without what it holds (WebDAV's
// COPY with Depth 0): a new empty folder in the folder parent of dst named
// name, with the source's dead properties, in one transaction. A file is
// ErrNotDir.
func (fs *FS) CopyEmpty(ctx context.Context, root, id, dst, parent uint64, name string, opts WriteOptions) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	if err := fs.roomFor(); err != nil {
		return Node{}, err
	}
	newID, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return Node{}, err
	}
	var replaced replacement
	err = fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		src, err := copyCheck(tx, root, id, dst, parent, name, opts, now)
		if err != nil {
			return err
		}
		if !src.Dir {
			return fmt.Errorf("%w: item %d", ErrNotDir, id)
		}
		if replaced, err = replaceIn(tx, dst, parent, name, id, opts, now); err != nil {
			return err
		}
		rec := nodeRec{ID: newID, Root: dst, Parent: parent, Name: name, Dir: true, Created: now, Modified: now}
		propSize, err := fs.copyNode(ctx, tx, src, rec, locRec{Root: dst, Parent: parent, Name: name}, nil, true, now)
		if err != nil {
			return err
		}
		if err := takeOverLocks(tx, newID, replaced, now); err != nil {
			return err
		}
		d := replaced.usage
		d.Folders++
		d.PropSize += propSize
		// The properties copied grow the root: checked, as a
		// PROPPATCH's are.
		if err := fs.addUsage(ctx, tx, dst, d, limitsOf(opts)); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpCopy, opts.Actor, Event{RootID: dst, NodeID: newID, ParentID: parent, Name: name, Dir: true})
	})
	if err == nil {
		fs.replaced(dst, replaced)
	}
	fs.done(OpCopy, err, Event{RootID: dst, NodeID: newID, ParentID: parent, Name: name, Dir: true})
	if err != nil {
		return Node{}, err
	}
	return fs.Stat(ctx, dst, newID)
}

// copyCheck returns the item id of root to copy, once it is sure the copy
// may go into parent of dst as name (within MaxDepth too).
func copyCheck(tx kv.Txn, root, id, dst, parent uint64, name string, opts WriteOptions, now int64) (nodeRec, error) {
	src, _, err := liveNodeIn(tx, root, id)
	if err != nil {
		return src, err
	}
	if src.Parent == 0 {
		return src, fmt.Errorf("%w: item %d", ErrRootItem, id)
	}
	if !src.Dir && excluded(name, opts.ExcludedExtensions) {
		return src, fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(name))
	}
	if _, _, err := liveDirIn(tx, dst, parent); err != nil {
		return src, err
	}
	if src.Dir && dst == root {
		inside, err := ancestorOf(tx, id, parent)
		if err != nil {
			return src, err
		}
		if inside {
			return src, fmt.Errorf("%w: cannot copy a folder into itself", ErrNameConflict)
		}
	}
	if err := fitsDepth(tx, src, parent); err != nil {
		return src, err
	}
	if !opts.Overwrite {
		// With Overwrite, the transaction that puts the copy in place
		// deletes what has the name (replaceIn).
		if err := nameFree(tx, parent, name); err != nil {
			return src, err
		}
	}
	return src, checkLocks(tx, parent, 1, opts, now)
}

// excludedBelow refuses rec, an item below the top of a copied folder,
// when it is a file whose name exts excludes. The copy would be a new file
// of that name, which the policy forbids however it is made; only the
// copy's top name was checked, so a folder holding setup.exe (written
// before the policy excluded .exe, or in a root of another organization)
// brought a new one past it.
func excludedBelow(rec nodeRec, exts []string) error {
	if !rec.Dir && excluded(rec.Name, exts) {
		return fmt.Errorf("%w: %q below the folder copied", ErrExtensionExcluded, extension(rec.Name))
	}
	return nil
}

// copyCost is what copying one item costs one transaction.
type copyCost struct {
	// weight is in the unit of fs.refBatch: the item, its properties and
	// its chunk references.
	weight int
	// bytes is about what it sets, against fs.txnBytes (see itemBytes).
	bytes  int
	chunks int
	// props is how many dead properties the item has.
	props int
}

// copyWeight returns what copying rec costs one transaction.
func copyWeight(tx kv.Txn, rec nodeRec) (copyCost, error) {
	props, err := propKeys(tx, rec.ID)
	if err != nil {
		return copyCost{}, err
	}
	var rev *revRec
	if !rec.Dir {
		rev = new(revRec)
		if err := get(tx, revKey(rec.ID, rec.Rev), rev, fmt.Errorf("%w: revision %d", ErrNotExist, rec.Rev)); err != nil {
			return copyCost{}, err
		}
	}
	c := copyCost{bytes: itemBytes(rec.Name, props, rev), props: len(props)}
	if rev != nil {
		c.chunks = len(rev.Chunks)
	}
	c.weight = 1 + len(props) + c.chunks
	return c, nil
}

// itemBytes is about what writing the copy of an item named name sets, on
// the high side: its record and the keys beside it, the name index's
// trigram entries (maxGrams of them, each holding the name: a long name
// costs kilobytes), its properties, and its revision's record (with a
// small file's contents) and chunk counts. The store counts each key and
// value and a few bytes more (kv.Bounded).
func itemBytes(name string, props [][2][]byte, rev *revRec) int {
	n := 1024 + 4*len(name) + maxGrams(name)*(gramEntryBytes+len(name))
	for _, p := range props {
		n += len(p[0]) + len(p[1]) + 16
	}
	if rev != nil {
		n += 128 + len(rev.Inline) + 128*len(rev.Chunks)
	}
	return n
}

// gramEntryBytes bounds what a trigram entry of the name index sets
// besides the folded name it holds (no longer than the name: folding
// takes each rune to one no greater): its key, at most 33 bytes (a gram
// of gramRunes runes of utf8.UTFMax bytes), and the store's own bytes.
const gramEntryBytes = 64

// maxGrams is the most trigram entries the name index keeps for name,
// from its length alone: one per rune but the last gramRunes-1 (grams
// drops repeats, and folding keeps the number of runes). Counting them
// exactly would build the set for an estimate.
func maxGrams(name string) int {
	return max(0, utf8.RuneCountInString(name)-(gramRunes-1))
}

// copyIsLarge reports whether copying the item id takes more than one
// transaction should hold, in keys or in bytes. It stops counting as soon as it knows.
func (fs *FS) copyIsLarge(ctx context.Context, root, id uint64) (bool, error) {
	var total, size int
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		total, size = 0, 0
		src, _, err := liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		var walk func(rec nodeRec) error
		walk = func(rec nodeRec) error {
			c, err := copyWeight(tx, rec)
			if err != nil {
				return err
			}
			total += c.weight
			size += c.bytes
			if total > fs.refBatch || size > fs.txnBytes {
				return kv.ErrStop
			}
			if !rec.Dir {
				return nil
			}
			if err := eachRecord(tx, childPrefix(rec.ID), walk); err != nil {
				return err
			}
			return ctx.Err()
		}
		return walk(src)
	})
	if errors.Is(err, kv.ErrStop) {
		return true, nil
	}
	return false, err
}

// copyTree copies src into parent of root as name, with everything below
// it. A file below it whose name exts excludes refuses the whole copy
// (excludedBelow), as copyCheck refuses such a file copied alone.
func (fs *FS) copyTree(ctx context.Context, tx kv.Txn, src nodeRec, root, parent uint64, name string, exts []string, u *usageRec, now int64) (uint64, error) {
	id, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return 0, err
	}
	rec := nodeRec{ID: id, Root: root, Parent: parent, Name: name, Dir: src.Dir,
		Created: now, Modified: src.Modified, Size: src.Size}
	if src.Dir {
		u.Folders++
	} else {
		u.Files++
		u.HeadSize += rec.Size
	}
	propSize, err := fs.copyNode(ctx, tx, src, rec, locRec{Root: root, Parent: parent, Name: name}, nil, true, now)
	if err != nil {
		return 0, err
	}
	u.PropSize += propSize
	if !src.Dir {
		return id, nil
	}
	kids, err := records(tx, childPrefix(src.ID))
	if err != nil {
		return 0, err
	}
	for _, c := range kids {
		if err := excludedBelow(c, exts); err != nil {
			return 0, err
		}
		if _, err := fs.copyTree(ctx, tx, c, root, id, c.Name, exts, u, now); err != nil {
			return 0, err
		}
	}
	return id, nil
}

// copyNode writes rec at loc as the copy of src: the record, its time
// index entry, its properties and, for a file, a new revision sharing the
// chunks of src's current one. With pinned set, the chunk counts are held
// by that intent's parts already, and handed to the revision. Without
// props, src is known to have no dead properties, and none are looked for.
func (fs *FS) copyNode(ctx context.Context, tx kv.Txn, src, rec nodeRec, loc locRec, pinned *intent, props bool, now int64) (int64, error) {
	if !src.Dir {
		var rev revRec
		if err := get(tx, revKey(src.ID, src.Rev), &rev, fmt.Errorf("%w: revision %d", ErrNotExist, src.Rev)); err != nil {
			return 0, err
		}
		var err error
		if rec.Rev, err = fs.db.NextID(ctx, "revision"); err != nil {
			return 0, err
		}
		rev.ID, rev.File, rev.Created = rec.Rev, rec.ID, now
		if err := put(tx, revKey(rec.ID, rec.Rev), rev); err != nil {
			return 0, err
		}
		if pinned != nil {
			err = pinned.handOver(tx)
		} else {
			err = addRefs(tx, rev.Chunks, 1)
		}
		if err != nil {
			return 0, err
		}
	}
	if rec.Dir {
		// A new folder: its listing sum starts empty, as a Mkdir's does
		// (saveNewNode). Without it an empty copy kept no sum until its
		// first child, and ListOptions.Count said -1 of it, the answer
		// for a folder of a store older than the sums.
		startEmpty(tx, rec.ID)
	}
	if err := saveNode(tx, rec, loc); err != nil {
		return 0, err
	}
	if err := setModified(tx, rec, nil); err != nil {
		return 0, err
	}
	if !props {
		return 0, nil
	}
	return copyProps(tx, src.ID, rec.ID)
}

// stagedItem is one item of a tree that copyStaged copies.
type stagedItem struct {
	src    nodeRec
	parent int    // the index of its folder in the plan; -1 for the top
	id     uint64 // the copy's node id
	cost   copyCost
}

// copyStaged copies a tree too large for one transaction. It reads the
// source in one snapshot, then builds the copy below a top node that is
// deleted (so the copy, like anything below a deleted folder, is in no
// listing, path, search or modified_since) and marked Staged (so no one
// can purge it), in transactions of at most fs.refBatch references and
// about fs.txnBytes bytes, a larger file's pinned first. The top is an intent part: if the copy
// fails, or the process dies, the staged tree is purged. The last
// transaction checks the destination again, counts the copy's usage (with
// the quota) and puts the top live under its name: the copy appears whole.
// The plan costs memory per item, not per byte: the chunk lists are read
// again by each batch.
func (fs *FS) copyStaged(ctx context.Context, root, id, dst, parent uint64, name string, opts WriteOptions) (uint64, replacement, error) {
	var plan []stagedItem
	var d usageRec
	var topFolder uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		plan, d = plan[:0], usageRec{}
		src, err := copyCheck(tx, root, id, dst, parent, name, opts, fs.nowNs())
		if err != nil {
			return err
		}
		r, err := loadRoot(tx, dst)
		if err != nil {
			return err
		}
		topFolder = r.Folder
		var walk func(rec nodeRec, up int) error
		walk = func(rec nodeRec, up int) error {
			if up >= 0 {
				if err := excludedBelow(rec, opts.ExcludedExtensions); err != nil {
					return err
				}
			}
			c, err := copyWeight(tx, rec)
			if err != nil {
				return err
			}
			rec.Locks = nil
			plan = append(plan, stagedItem{src: rec, parent: up, cost: c})
			if !rec.Dir {
				d.Files++
				d.HeadSize += rec.Size
				return nil
			}
			d.Folders++
			self := len(plan) - 1
			kids, err := records(tx, childPrefix(rec.ID))
			if err != nil {
				return err
			}
			for _, c := range kids {
				if err := walk(c, self); err != nil {
					return err
				}
			}
			return ctx.Err()
		}
		if err := walk(src, -1); err != nil {
			return err
		}
		// Refuse early what the last transaction would refuse.
		lim := limitsOf(opts)
		left, bound, err := lim.left(tx, dst)
		if err == nil && bound && d.physical() > left {
			err = lim.refuse("%d bytes to copy, %d left", d.physical(), left)
		}
		return err
	})
	if err != nil {
		return 0, replacement{}, err
	}
	for i := range plan {
		if plan[i].id, err = fs.db.NextID(ctx, "node"); err != nil {
			return 0, replacement{}, err
		}
	}
	// The copy's height, for the last transaction's depth check: the
	// plan lists a folder before what it holds.
	height := 0
	levels := make([]int, len(plan))
	for i, it := range plan {
		if it.parent >= 0 {
			levels[i] = levels[it.parent] + 1
			height = max(height, levels[i])
		}
	}
	in, err := fs.newIntent(ctx)
	if err != nil {
		return 0, replacement{}, err
	}
	in.next = 1 // part 0 names the staged tree
	top := plan[0].id
	fail := func(err error) (uint64, replacement, error) {
		fs.releaseFailed(ctx, in)
		return 0, replacement{}, err
	}
	now := fs.nowNs()
	for i := 0; i < len(plan); {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		// Each batch adds records (and small files' contents) to the
		// metadata store: a disk that reaches the reserve midway stops
		// the copy, not only one that was there at its start.
		if err := fs.roomFor(); err != nil {
			return fail(err)
		}
		var pinned *intent
		if src := plan[i].src; plan[i].cost.chunks > fs.refBatch {
			var rev revRec
			gone := fmt.Errorf("%w: revision %d", ErrNotExist, src.Rev)
			err := fs.db.View(ctx, func(tx kv.Txn) error { return get(tx, revKey(src.ID, src.Rev), &rev, gone) })
			if err == nil {
				// Each batch finds the source revision still there, so
				// its counts keep the chunks stored.
				err = fs.pin(ctx, in, OpCopy, rev.Chunks, func(tx kv.Txn, _ []chunk.Ref) error {
					_, err := tx.Get(revKey(src.ID, src.Rev))
					if errors.Is(err, kv.ErrNotFound) {
						return gone
					}
					return err
				})
			}
			if err != nil {
				return fail(err)
			}
			pinned = in
		}
		var n int
		var batchProps int64
		err := fs.update(ctx, func(tx kv.Txn) error {
			n, batchProps = 0, 0
			for w, size := 0, 0; i+n < len(plan); n++ {
				it := plan[i+n]
				c := it.cost
				if n > 0 && (w+c.weight > fs.refBatch || size+c.bytes > fs.txnBytes || c.chunks > fs.refBatch) {
					break
				}
				w += c.weight
				size += c.bytes
				rec := nodeRec{ID: it.id, Root: dst, Name: it.src.Name, Dir: it.src.Dir,
					Created: now, Modified: it.src.Modified, Size: it.src.Size}
				if it.parent < 0 {
					rec.Name, rec.Parent, rec.Deleted, rec.Staged = name, topFolder, now, true
					if err := fs.putIntent(tx, intentKey(in.id, 0), intentRec{Root: dst, Node: it.id}); err != nil {
						return err
					}
				} else {
					rec.Parent = plan[it.parent].id
				}
				loc := locRec{Root: dst, Parent: rec.Parent, Name: rec.Name, Deleted: rec.Deleted != 0}
				var p *intent
				if n == 0 {
					p = pinned
				}
				// The plan's snapshot saw the item's properties: most
				// items have none, and looking for them is a scan,
				// which in a transaction holding a batch's writes
				// sorts every write of it first (Badger's pending
				// writes iterator): copying a tree of 100,000 files
				// spent four fifths of its time there.
				propSize, err := fs.copyNode(ctx, tx, it.src, rec, loc, p, c.props > 0, now)
				if err != nil {
					return err
				}
				batchProps += propSize
			}
			return nil
		})
		if err != nil {
			return fail(err)
		}
		in.parts = nil // handed to the revision written
		i += n
		d.PropSize += batchProps
		fs.between(OpCopy)
	}
	var replaced replacement
	err = fs.update(ctx, func(tx kv.Txn) error {
		at := fs.nowNs()
		if _, _, err := liveDirIn(tx, dst, parent); err != nil {
			return err
		}
		// The folder may have moved deeper since the first check; the
		// copy, hidden, held it back from no move.
		if err := fitsDepthBelow(tx, parent, height); err != nil {
			return err
		}
		var err error
		if replaced, err = replaceIn(tx, dst, parent, name, id, opts, at); err != nil {
			return err
		}
		if err := checkLocks(tx, parent, 1, opts, at); err != nil {
			return err
		}
		rec, loc, err := loadNode(tx, top)
		if err != nil {
			return err
		}
		if err := tx.Delete(recKey(top, loc)); err != nil {
			return err
		}
		rec.Parent, rec.Deleted, rec.Staged = parent, 0, false
		if err := saveNode(tx, rec, locRec{Root: dst, Parent: parent, Name: name}); err != nil {
			return err
		}
		if err := takeOverLocks(tx, top, replaced, at); err != nil {
			return err
		}
		if err := tx.Delete(intentKey(in.id, 0)); err != nil {
			return err
		}
		u := d
		u.add(replaced.usage)
		if err := fs.addUsage(ctx, tx, dst, u, limitsOf(opts)); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpCopy, opts.Actor, Event{RootID: dst, NodeID: top, ParentID: parent, Name: name, Dir: rec.Dir})
	})
	if err != nil {
		return fail(err)
	}
	return top, replaced, nil
}
