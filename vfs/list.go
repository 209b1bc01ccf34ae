package vfs

import (
	"context"
	"fmt"
	"iter"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// A listing of a folder of a million children cannot be held whole: the
// front ends write it as they read it. ListEach hands them the children
// from one snapshot, a batch at a time, so what a listing holds is one
// batch whatever the folder's size. The listing hash is kept with the
// folder (listhash.go), so it is read before the first child without a
// pass over them, and a client whose hash is current is answered without
// a listing. A listing is one scan, read afresh each time: a cache of
// small listings made a 10,000-child folder list at a tenth of the cost
// per child of a 100,000-child one, which no cache can hold.

// ListOptions chooses what ListEach lists.
type ListOptions struct {
	// After lists only the children whose names sort after it (bytewise,
	// the listing's order): the cursor of a page, the last name the
	// previous page returned. "" lists from the first child. Being a
	// name, not an offset, it does not shift when children are added or
	// removed before it.
	After string
	// Limit bounds how many children are listed; 0 lists them all.
	Limit int
	// Hash asks for the listing hash (List's), kept with the folder;
	// only for a whole listing (no After, no Limit), the one a hash
	// stands for.
	Hash bool
	// Props reads every listed child's dead properties along with it,
	// one ordered scan per batch rather than a seek per child.
	Props bool
	// Count asks for the number of live children (Listing.Count), read
	// from the folder's kept sum without a pass over them: a front end
	// that must not hold a large folder whole learns its size first.
	Count bool
	// Hashes reads every listed folder's own listing hash along with it
	// (Child.Listing), in the listing's snapshot: a WebDAV listing sends
	// each collection's entity tag, made of it. It costs a scan of the
	// folder's kept sum per listed folder, so it is asked for only where
	// the tags are sent.
	Hashes bool
}

// Child is one listed item.
type Child struct {
	Node
	// Props are the item's dead properties by name when ListOptions.Props
	// asked for them; nil when it has none.
	Props map[string][]byte
}

// Listing is a folder's listing, open for the duration of ListEach's fn.
type Listing struct {
	// Hash is the listing hash when ListOptions.Hash asked for it.
	Hash string
	// Count is the number of live children when ListOptions.Count asked
	// for it, or -1 for a folder that keeps no sum yet (one of a store
	// older than the sums, until a child of it changes), whose count
	// would take a pass over every child.
	Count int64

	fs     *FS
	ctx    context.Context
	tx     kv.Txn
	folder uint64
	base   string
	opts   ListOptions
	next   string
	more   bool
}

// listBatch is how many children ListEach reads at once: a batch of
// nodes and their properties is what a listing holds in memory.
const listBatch = 256

// ListEach lists the live children of a live folder of root in name
// order, from one snapshot, as List does, but without holding them: it
// calls fn once with the listing, whose Children are read batch by batch
// as fn ranges over them. The listing is valid only during fn; fn may
// return without ranging over it (a client whose hash is current). The
// folder's errors are List's.
func (fs *FS) ListEach(ctx context.Context, root, folder uint64, opts ListOptions, fn func(*Listing) error) error {
	whole := opts.After == "" && opts.Limit == 0
	return fs.db.View(ctx, func(tx kv.Txn) error {
		dir, _, err := liveDirIn(tx, root, folder)
		if err != nil {
			return err
		}
		base, err := pathOf(tx, dir)
		if err != nil {
			return err
		}
		if base != "/" {
			base += "/"
		}
		l := &Listing{fs: fs, ctx: ctx, tx: tx, folder: folder, base: base, opts: opts}
		if opts.Hash && whole {
			if l.Hash, err = listHash(tx, folder, fs.nowNs()); err != nil {
				return err
			}
		}
		if opts.Count {
			if l.Count, err = childCount(tx, folder); err != nil {
				return err
			}
		}
		return fn(l)
	})
}

// ListHash is the listing hash of a live folder of root (Node.Listing),
// read from its kept sum without a pass over its children; the folder's
// errors are List's.
func (fs *FS) ListHash(ctx context.Context, root, folder uint64) (string, error) {
	var h string
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		if _, _, err := liveDirIn(tx, root, folder); err != nil {
			return err
		}
		var err error
		h, err = listHash(tx, folder, fs.nowNs())
		return err
	})
	return h, err
}

// Children yields the listed children in name order, with an error
// (and then stops) when reading them fails or the context ends.
//
// It is one scan of the folder, handing the children on a batch at a
// time (with their properties read along when asked): a scan per batch
// cost an engine on a database server several round trips each, where
// one scan's batches cost one each.
func (l *Listing) Children() iter.Seq2[Child, error] {
	return func(yield func(Child, error) bool) {
		start := childPrefix(l.folder)
		if l.opts.After != "" {
			// The least key above After's: names hold no NUL.
			start = append(childKey(l.folder, l.opts.After), 0)
		}
		now := l.fs.nowNs()
		batch := make([]Child, 0, listBatch)
		listed, over := 0, false
		var failed error // what ended the scan from inside it
		// emit hands batch on; false ends the listing.
		emit := func() (bool, error) {
			if err := l.ctx.Err(); err != nil {
				return false, err
			}
			if err := l.props(batch); err != nil {
				return false, err
			}
			if err := l.hashes(batch, now); err != nil {
				return false, err
			}
			for _, c := range batch {
				l.next = c.Name
				if !yield(c, nil) {
					over = true
					return false, nil
				}
			}
			batch = batch[:0]
			return true, nil
		}
		var rec nodeRec
		err := l.tx.Scan(childPrefix(l.folder), start, func(k, v []byte) error {
			if l.opts.Limit > 0 && listed == l.opts.Limit {
				l.more = true
				return kv.ErrStop
			}
			rec = nodeRec{}
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("vfs: decode child of %d: %w", l.folder, err)
			}
			n := rec.public(now)
			n.Path = l.base + rec.Name
			batch = append(batch, Child{Node: n})
			listed++
			if len(batch) < listBatch {
				return nil
			}
			if ok, err := emit(); !ok {
				failed = err
				return kv.ErrStop
			}
			return nil
		})
		if err == nil {
			err = failed
		}
		if err == nil && !over && len(batch) > 0 {
			_, err = emit()
		}
		if err != nil && !over {
			yield(Child{}, err)
		}
	}
}

// Next is the cursor of the page that follows, once Children has been
// ranged over to its end: the last name listed when Limit stopped the
// listing before the folder's end, "" when the listing reached it.
func (l *Listing) Next() string {
	if !l.more {
		return ""
	}
	return l.next
}

// hashes reads the listing hashes of batch's folders when they were
// asked for.
func (l *Listing) hashes(batch []Child, now int64) error {
	if !l.opts.Hashes {
		return nil
	}
	var ids []uint64
	for i := range batch {
		if batch[i].Dir {
			ids = append(ids, batch[i].ID)
		}
	}
	hashes, err := listHashesIn(l.tx, ids, now)
	if err != nil {
		return err
	}
	for i := range batch {
		if batch[i].Dir {
			batch[i].Listing = hashes[batch[i].ID]
		}
	}
	return nil
}

// props reads the properties of batch's children when they were asked
// for.
func (l *Listing) props(batch []Child) error {
	if !l.opts.Props || len(batch) == 0 {
		return nil
	}
	ids := make([]uint64, len(batch))
	for i := range batch {
		ids[i] = batch[i].ID
	}
	props, err := propsIn(l.tx, ids)
	if err != nil {
		return err
	}
	for i := range batch {
		batch[i].Props = props[batch[i].ID]
	}
	return nil
}
