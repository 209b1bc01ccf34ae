package vfs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// recKey is where the record of the node at loc lives.
func recKey(id uint64, loc locRec) []byte {
	switch {
	case loc.Parent == 0:
		return topKey(loc.Root)
	case loc.Deleted:
		return deletedKey(loc.Parent, id)
	default:
		return childKey(loc.Parent, loc.Name)
	}
}

// liveLoc is the location of rec, a record read at its live key (C/, or
// F/ for a top folder): what its N/ key holds, since every write of a
// record writes its location with it (saveNode), and Audit checks it.
func liveLoc(rec nodeRec) locRec {
	if rec.Parent == 0 {
		return locRec{Root: rec.Root}
	}
	return locRec{Root: rec.Root, Parent: rec.Parent, Name: rec.Name}
}

// placed tells a write transaction's memo where rec, just read at its live
// key on a walk down a path, lives, so that the checks after the walk
// (liveDirIn, depthOf, checkLocks, resolve: each goes up by id) find the
// location without reading it. Not reading it is safe: the location
// changes only with the record's key (a move or a delete writes both),
// and the transaction read that key, so a commit that moves the item
// meanwhile conflicts with it all the same.
func placed(tx kv.Txn, rec nodeRec) {
	if m := memoOf(tx); m != nil {
		m.place(rec.ID, liveLoc(rec))
	}
}

// loadRoot reads a root that exists and is not deleted.
func loadRoot(tx kv.Txn, id uint64) (rootRec, error) {
	var r rootRec
	if err := get(tx, rootKey(id), &r, kv.ErrNotFound); err != nil {
		return r, missing(err, "root", id)
	}
	if r.Deleted {
		return r, fmt.Errorf("%w: root %d", ErrRootDeleted, id)
	}
	return r, nil
}

// loadNode reads a node's location and record, whatever its state.
func loadNode(tx kv.Txn, id uint64) (nodeRec, locRec, error) {
	var loc locRec
	var rec nodeRec
	if id == 0 {
		return rec, loc, missing(kv.ErrNotFound, "item", id)
	}
	if err := get(tx, locKey(id), &loc, kv.ErrNotFound); err != nil {
		return rec, loc, missing(err, "item", id)
	}
	if err := get(tx, recKey(id, loc), &rec, kv.ErrNotFound); err != nil {
		return rec, loc, missing(err, "item", id)
	}
	return rec, loc, nil
}

// missing is err, or ErrNotExist naming the record (a root, an item) for
// kv.ErrNotFound. The error is made only when a read finds nothing: made
// ahead of every read, as get's notFound, it cost a small PUT some 25 of
// its 790 allocations (bench/webdav BenchmarkSmallWrites/ops), since
// loadNode and loadRoot run a dozen times a request.
func missing(err error, what string, id uint64) error {
	if err == kv.ErrNotFound {
		return fmt.Errorf("%w: %s %d", ErrNotExist, what, id)
	}
	return err
}

// nodeIn reads a node of a live root; a node of another root, or the top
// of a copy still being staged, is ErrNotExist, so ids of other roots
// reveal nothing.
func nodeIn(tx kv.Txn, root, id uint64) (nodeRec, locRec, error) {
	if _, err := loadRoot(tx, root); err != nil {
		return nodeRec{}, locRec{}, err
	}
	rec, loc, err := loadNode(tx, id)
	if err != nil {
		return rec, loc, err
	}
	if rec.Root != root || rec.Staged {
		return rec, loc, fmt.Errorf("%w: item %d", ErrNotExist, id)
	}
	return rec, loc, nil
}

// liveNodeIn is nodeIn for an item that must not be deleted, itself or
// through a folder above it.
func liveNodeIn(tx kv.Txn, root, id uint64) (nodeRec, locRec, error) {
	rec, loc, err := nodeIn(tx, root, id)
	if err != nil {
		return rec, loc, err
	}
	_, gone, err := resolve(tx, rec)
	if err == nil && gone {
		err = fmt.Errorf("%w: item %d is deleted", ErrNotExist, id)
	}
	return rec, loc, err
}

// liveDirIn is liveNodeIn for a folder.
func liveDirIn(tx kv.Txn, root, id uint64) (nodeRec, locRec, error) {
	rec, loc, err := liveNodeIn(tx, root, id)
	if err == nil && !rec.Dir {
		err = fmt.Errorf("%w: item %d", ErrNotDir, id)
	}
	return rec, loc, err
}

// saveNode writes rec where loc says and the location itself.
func saveNode(tx kv.Txn, rec nodeRec, loc locRec) error {
	return saveNodeAs(tx, rec, loc, false)
}

// saveNewNode is saveNode for an item given its id in this transaction:
// the name index holds nothing for it, and is written without a read. A
// new folder's listing sum starts here, empty (listTxn.startEmpty).
func saveNewNode(tx kv.Txn, rec nodeRec, loc locRec) error {
	if lt, ok := tx.(*listTxn); ok {
		lt.fresh = rec.ID
		if rec.Dir {
			lt.startEmpty(rec.ID)
		}
	}
	return saveNodeAs(tx, rec, loc, true)
}

func saveNodeAs(tx kv.Txn, rec nodeRec, loc locRec, fresh bool) error {
	if err := put(tx, locKey(rec.ID), loc); err != nil {
		return err
	}
	if loc.Parent != 0 && !loc.Deleted {
		// A new or changed child: a delete counting the folder must
		// see it or conflict (see G/ in keys.go).
		if err := tx.Set(genKey(loc.Parent), nil); err != nil {
			return err
		}
	}
	if err := reindex(tx, rec, loc, fresh); err != nil {
		return err
	}
	return put(tx, recKey(rec.ID, loc), rec)
}

// setModified moves rec's entry in the time index from where old, the
// record as it was, had it to rec.Modified; old is nil for a new item.
// Not a modification time of 0 for "no entry": the Unix epoch is a time a
// write may set, and its entry would outlive the item.
func setModified(tx kv.Txn, rec nodeRec, old *nodeRec) error {
	if old != nil && old.Modified != rec.Modified {
		if err := tx.Delete(timeKey(rec.Root, old.Modified, rec.ID)); err != nil {
			return err
		}
	}
	return tx.Set(timeKey(rec.Root, rec.Modified, rec.ID), nil)
}

// pathOf resolves the absolute path of rec within its root.
func pathOf(tx kv.Txn, rec nodeRec) (string, error) {
	p, _, err := resolve(tx, rec)
	return p, err
}

// errStaged is what resolve says of an item of a copy still being staged:
// only its top is marked, and node ids are a counter anyone can guess, so
// the items below it would otherwise show, by id, as deleted items that
// never were.
var errStaged = fmt.Errorf("%w: an item of a copy not finished", ErrNotExist)

// resolve returns the absolute path of rec within its root, and whether it
// is deleted: itself, or through a folder above it. Deleting a folder marks
// only the folder, so that a delete of any size is one small transaction;
// what lies below is deleted by being below it. An item of a staged copy
// is errStaged.
func resolve(tx kv.Txn, rec nodeRec) (string, bool, error) {
	var parts []string
	gone := rec.Deleted != 0
	for rec.Parent != 0 {
		if rec.Staged {
			return "", false, errStaged
		}
		parts = append(parts, rec.Name)
		p, _, err := loadNode(tx, rec.Parent)
		if err != nil {
			return "", false, err
		}
		rec = p
		gone = gone || rec.Deleted != 0
		if len(parts) > 4096 {
			return "", false, fmt.Errorf("vfs: path of item %d does not end", rec.ID)
		}
	}
	slices.Reverse(parts)
	return "/" + strings.Join(parts, "/"), gone, nil
}

// ancestorOf reports whether anc is id itself or one of its ancestors.
func ancestorOf(tx kv.Txn, anc, id uint64) (bool, error) {
	for id != 0 {
		if id == anc {
			return true, nil
		}
		rec, _, err := loadNode(tx, id)
		if err != nil {
			return false, err
		}
		id = rec.Parent
	}
	return false, nil
}

// nameFree returns ErrNameConflict when a live item of the folder parent
// is called name.
func nameFree(tx kv.Txn, parent uint64, name string) error {
	_, err := tx.Get(childKey(parent, name))
	switch {
	case err == nil:
		return fmt.Errorf("%w: %q exists", ErrNameConflict, name)
	case errors.Is(err, kv.ErrNotFound):
		return nil
	}
	return err
}

// depthOf returns how deep the item id is below its root's top folder (the
// top folder is 0).
func depthOf(tx kv.Txn, id uint64) (int, error) {
	d := 0
	for {
		rec, _, err := loadNode(tx, id)
		if err != nil {
			return 0, err
		}
		if rec.Parent == 0 {
			return d, nil
		}
		d, id = d+1, rec.Parent
	}
}

// heightBelow returns how many levels of live items the folder id holds
// (0 when empty), or some value over limit as soon as it passes it.
func heightBelow(tx kv.Txn, id uint64, limit int) (int, error) {
	if limit < 0 {
		return 1, nil
	}
	h := 0
	err := eachRecord(tx, childPrefix(id), func(c nodeRec) error {
		ch := 1
		if c.Dir {
			below, err := heightBelow(tx, c.ID, limit-1)
			if err != nil {
				return err
			}
			ch += below
		}
		if h = max(h, ch); h > limit {
			return kv.ErrStop
		}
		return nil
	})
	if errors.Is(err, kv.ErrStop) {
		err = nil
	}
	return h, err
}

// fitsDepth returns ErrTooDeep unless rec, and what a folder rec holds,
// fits within MaxDepth when put into the folder parent.
func fitsDepth(tx kv.Txn, rec nodeRec, parent uint64) error {
	pd, err := depthOf(tx, parent)
	if err != nil {
		return err
	}
	if pd+1 > MaxDepth {
		return tooDeep()
	}
	if !rec.Dir {
		return nil
	}
	h, err := heightBelow(tx, rec.ID, MaxDepth-pd-1)
	if err != nil {
		return err
	}
	if pd+1+h > MaxDepth {
		return tooDeep()
	}
	return nil
}

// fitsDepthBelow returns ErrTooDeep unless an item holding height levels
// of items below it fits within MaxDepth in the folder parent: fitsDepth
// for a tree whose height is known without a walk (a staged copy's).
func fitsDepthBelow(tx kv.Txn, parent uint64, height int) error {
	pd, err := depthOf(tx, parent)
	if err != nil {
		return err
	}
	if pd+1+height > MaxDepth {
		return tooDeep()
	}
	return nil
}

func tooDeep() error { return fmt.Errorf("%w: at most %d levels", ErrTooDeep, MaxDepth) }

// walkLive calls fn for every live item below the folder id. It reads (and
// so watches) each folder's generation, as a delete's count does: a child
// added after this snapshot, which the scan misses, then conflicts.
func walkLive(tx kv.Txn, id uint64, fn func(nodeRec) error) error {
	if _, err := tx.Get(genKey(id)); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	return eachRecord(tx, childPrefix(id), func(c nodeRec) error {
		if err := fn(c); err != nil {
			return err
		}
		if c.Dir {
			return walkLive(tx, c.ID, fn)
		}
		return nil
	})
}

// recordPage is how many node records eachRecord holds at once: enough
// that a folder's children cost few scans, few enough that a walk holds a
// bounded number however many children a folder has.
var recordPage = 256

// recordsHeld counts the records eachRecord holds at once, for the
// tests (export_test.go): the most seen is kept in recordsPeak.
var recordsHeld, recordsPeak atomic.Int64

// held counts n records more held (less, negative), keeping the peak.
func held(n int) {
	h := recordsHeld.Add(int64(n))
	for peak := recordsPeak.Load(); h > peak && !recordsPeak.CompareAndSwap(peak, h); peak = recordsPeak.Load() {
	}
}

// eachRecord calls fn with every node record under prefix (C/ or D/ of a
// folder) in key order, reading them a page at a time: records read a
// folder's children whole, and a delete, a move's depth check or a copy's
// size check of a folder of a million files held a million records at
// once. fn may read tx and recurse, but must not write under prefix:
// each page starts at the first key the page before did not read, and
// a transaction's scans see its own writes (Badger's pending writes), so
// a key fn set past that point would be read (a renamed child, twice).
// None of its callers writes during the walk.
func eachRecord(tx kv.Txn, prefix []byte, fn func(nodeRec) error) error {
	var start []byte
	page := make([]nodeRec, 0, min(recordPage, 16))
	for {
		page = page[:0]
		var next []byte
		err := tx.Scan(prefix, start, func(k, v []byte) error {
			if len(page) == recordPage {
				next = slices.Clone(k)
				return kv.ErrStop
			}
			var c nodeRec
			if err := cbor.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("vfs: decode %q: %w", k, err)
			}
			page = append(page, c)
			return nil
		})
		if err != nil {
			return err
		}
		held(len(page))
		for _, c := range page {
			if err = fn(c); err != nil {
				break
			}
		}
		held(-len(page))
		if err != nil || next == nil {
			return err
		}
		start = next
	}
}

// records decodes every node record under prefix (C/ or D/ of a folder).
// They are held whole: for folders whose children a caller keeps anyway
// (a copy's plan, a purge's order); a walk uses eachRecord.
func records(tx kv.Txn, prefix []byte) ([]nodeRec, error) {
	var out []nodeRec
	err := tx.Scan(prefix, nil, func(k, v []byte) error {
		var c nodeRec
		if err := cbor.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("vfs: decode %q: %w", k, err)
		}
		out = append(out, c)
		return nil
	})
	// The peak notes them all at once; how long the caller keeps
	// them is its own.
	held(len(out))
	held(-len(out))
	return out, err
}
