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
// folder included, and its usage records, taking that usage out of its
// tallies (rootRec.counted), then marks it purged. Until that last
// transaction the tallies still count the whole ledger, which the tree
// purged so far is not taken out of: fsck checks the tallies against the
// ledgers of their roots, and a tree half purged is still on its way out,
// not to be recounted. Nothing
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
	if err := fs.purgeNodes(ctx, root, order, false, Event{}); err != nil {
		return err
	}
	return fs.update(ctx, func(tx kv.Txn) error {
		var r rootRec
		if err := get(tx, rootKey(root), &r, nil); err != nil {
			return err
		}
		if r.Purged {
			return nil // by a run alongside, which took its usage out
		}
		if r.counted() {
			// Reading every shard makes a change of the root's usage
			// committed meanwhile (a staged upload's reservation given
			// back) conflict with this transaction.
			u, err := loadUsage(tx, root)
			if err != nil {
				return err
			}
			if err := addTallies(tx, r.Tallies, r.inTallies(u).neg()); err != nil {
				return err
			}
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

// Purge removes a deleted item, and everything below a deleted folder, for
// good: revisions go, and chunks no longer referenced become garbage. A
// large tree is removed in several transactions, deepest items first, so an
// interrupted purge leaves a smaller deleted tree, never a broken one.
func (fs *FS) Purge(ctx context.Context, root, id uint64) error {
	err := fs.purgeTree(ctx, root, id, true)
	fs.done(OpPurge, err, Event{RootID: root, NodeID: id})
	return err
}

// postOrder lists the ids of rec's tree, live and deleted items alike,
// children before their folder: the order a purge removes them in, so
// that an interrupted one leaves a smaller tree, never a broken one. With
// skipStaged it leaves out the trees of copies still being staged, which
// their copy's release purges.
func postOrder(ctx context.Context, tx kv.Txn, rec nodeRec, skipStaged bool) ([]uint64, error) {
	var order []uint64
	var walk func(rec nodeRec) error
	walk = func(rec nodeRec) error {
		if skipStaged && rec.Staged {
			return nil
		}
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
	return order, walk(rec)
}

// purgeBatch is the most items one purge transaction removes; it also
// stops at fs.refBatch keys' worth of revisions, references and
// properties.
const purgeBatch = 256

// purgeTree purges the tree below id, and id. counted says the tree is in
// the root's usage, which every transaction then corrects; a staged copy
// (see copyStaged) is not, and is purged whatever the state of its root.
func (fs *FS) purgeTree(ctx context.Context, root, id uint64, counted bool) error {
	var order []uint64 // children before their folder
	var rec nodeRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		order = order[:0]
		var err error
		if counted {
			rec, _, err = nodeIn(tx, root, id)
		} else {
			rec, _, err = loadNode(tx, id)
		}
		if err != nil {
			return err
		}
		if rec.Deleted == 0 {
			return fmt.Errorf("%w: item %d is not deleted", ErrNotExist, id)
		}
		order, err = postOrder(ctx, tx, rec, false)
		return err
	})
	if err != nil {
		return err
	}
	// The item's name and kind, read here: the transaction that
	// journals the purge has removed its record. The purge was recorded
	// as "file <id>", a folder's too.
	return fs.purgeNodes(ctx, root, order, counted, Event{RootID: root, NodeID: id, Name: rec.Name, Dir: rec.Dir})
}

// purgeNodes purges the items of order, each after everything below it,
// in bounded transactions; with counted, each corrects root's usage, and
// the last journals ev, the purge of the item asked for.
func (fs *FS) purgeNodes(ctx context.Context, root uint64, order []uint64, counted bool, ev Event) error {
	var items []purgeItem
	for i := 0; i < len(order); {
		var n int
		var parked uint64
		err := fs.update(ctx, func(tx kv.Txn) error {
			u := &unref{fs: fs, tx: tx}
			var d usageRec
			// Every read of the batch comes before its first write: a
			// scan (an item's revisions, its properties) in a
			// transaction that holds writes sorts all of them first
			// (Badger), and reading each item just before removing it
			// made a batch cost the square of its size; purging a
			// tree of 100,000 files took minutes, most of them sorting.
			items = items[:0]
			cost := 0
			for k := 0; i+k < len(order) && k < purgeBatch && (k == 0 || cost < fs.refBatch); k++ {
				it, err := readPurge(tx, order[i+k], fs.refBatch)
				if err != nil {
					return err
				}
				items = append(items, it)
				cost += it.cost()
				if it.more {
					break
				}
			}
			for n = 0; n < len(items) && (n == 0 || u.used < fs.refBatch); n++ {
				done, err := purgeNode(ctx, tx, items[n], &d, u)
				if err != nil {
					return err
				}
				if !done {
					// A file with more revisions than one transaction
					// takes: the next one goes on with it.
					break
				}
			}
			parked = u.intent
			if !counted {
				return nil
			}
			// The transaction that removes the last item, the one
			// asked for, is the purge that clients see.
			if i+n == len(order) {
				if err := fs.journal(ctx, tx, OpPurge, nil, ev); err != nil {
					return err
				}
			}
			return fs.addUsage(ctx, tx, root, d, limits{})
		})
		if err != nil {
			return err
		}
		i += n
		if fs.purgeHook != nil {
			fs.purgeHook()
		}
		if parked != 0 {
			fs.between(OpPurge)
			// The items are gone; what is left is giving their chunks
			// back, which Open finishes if this cannot.
			fs.releaseFailed(ctx, &intent{id: parked})
		}
	}
	return nil
}

// purgeItem is what purgeNode removes of one item, read before the
// transaction writes anything.
type purgeItem struct {
	id  uint64
	rec nodeRec
	loc locRec
	// gone: the item was removed already (a concurrent purge).
	gone bool
	// revs are the revisions this transaction removes: at most refBatch
	// of the others, and the current one last once no other is left.
	revs []revRec
	// more: the file has more revisions than one transaction takes.
	more bool
	// props are the keys of its dead properties.
	props [][]byte
}

// cost is about the keys removing it touches, against refBatch.
func (it purgeItem) cost() int {
	c := 1 + len(it.props)
	for _, r := range it.revs {
		c += 1 + len(r.Chunks)
	}
	return c
}

// readPurge reads what purgeNode removes of the item id.
func readPurge(tx kv.Txn, id uint64, refBatch int) (purgeItem, error) {
	it := purgeItem{id: id}
	var err error
	it.rec, it.loc, err = loadNode(tx, id)
	if errors.Is(err, ErrNotExist) {
		it.gone = true
		return it, nil
	}
	if err != nil {
		return it, err
	}
	if !it.rec.Dir {
		// At most refBatch revisions go per transaction, the current
		// one last: a sync client that saved a file every minute for a
		// month left some 40,000, more than one transaction holds. In
		// between, the file is a deleted file with fewer revisions, and
		// usage matches.
		var head *revRec
		err := tx.Scan(revPrefix(id), nil, func(k, v []byte) error {
			var r revRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.ID == it.rec.Rev {
				head = &r
				return nil
			}
			if len(it.revs) == refBatch {
				it.more = true
				return kv.ErrStop
			}
			it.revs = append(it.revs, r)
			return nil
		})
		if err != nil {
			return it, err
		}
		if !it.more && head != nil {
			it.revs = append(it.revs, *head)
		}
	}
	it.props, err = propNames(tx, id)
	return it, err
}

// purgeNode removes one deleted item whose children are gone already, and
// its revisions, as readPurge read them; an item already removed (a
// concurrent purge) is skipped. done is false when a file had more
// revisions left than one transaction takes: the caller commits and calls
// again.
func purgeNode(ctx context.Context, tx kv.Txn, it purgeItem, u *usageRec, un *unref) (done bool, err error) {
	if it.gone {
		return true, nil
	}
	rec, loc := it.rec, it.loc
	if !rec.Dir {
		for _, r := range it.revs {
			if err := un.drop(ctx, r.Chunks); err != nil {
				return false, err
			}
			if err := tx.Delete(revKey(rec.ID, r.ID)); err != nil {
				return false, err
			}
			un.used++
			u.DelRevisions--
			u.DeletedSize -= r.Size
		}
		if it.more {
			return false, nil
		}
		u.DelFiles--
	}
	// An item's properties are keys too, up to MaxProps of them: without
	// them in the count, a batch of items rich in properties outgrew
	// what one transaction commits, at every try.
	for _, k := range it.props {
		if err := tx.Delete(k); err != nil {
			return false, err
		}
	}
	un.used += len(it.props)
	// What the usage counts of them leaves it with them.
	counted, err := countedProps(tx, rec.ID)
	if err != nil {
		return false, err
	}
	if counted > 0 {
		if err := tx.Delete(propSizeKey(rec.ID)); err != nil {
			return false, err
		}
		u.PropSize -= counted
	}
	names, err := unindex(tx, rec.Root, rec.ID)
	if err != nil {
		return false, err
	}
	un.used += names
	keys := [][]byte{recKey(rec.ID, loc), locKey(rec.ID), timeKey(rec.Root, rec.Modified, rec.ID)}
	if rec.Dir {
		keys = append(keys, genKey(rec.ID))
	}
	for _, k := range keys {
		if err := tx.Delete(k); err != nil {
			return false, err
		}
	}
	un.used++
	return true, nil
}
