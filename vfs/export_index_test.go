package vfs

import (
	"context"
	"errors"
	"fmt"

	"berth/kv"
)

// WithShortQueryScan returns opts with searches of one or two runes
// reading at most n names instead of ShortQueryScan.
func WithShortQueryScan(opts Options, n int) Options {
	opts.shortScan = n
	return opts
}

// Fold is the folding the name index and Search compare names under.
func Fold(s string) string { return fold(s) }

// ForgetNames makes root look as if it was created before the name index
// existed: its entries and marks go, and the store's mark too.
func (fs *FS) ForgetNames(ctx context.Context, root uint64) error {
	for _, p := range [][]byte{nameEntryPrefix(root), key(pGram, root)} {
		for {
			var keys [][]byte
			if err := fs.db.View(ctx, func(tx kv.Txn) error {
				keys = keys[:0]
				return tx.Scan(p, nil, func(k, _ []byte) error {
					if keys = append(keys, append([]byte(nil), k...)); len(keys) == 10_000 {
						return kv.ErrStop
					}
					return nil
				})
			}); err != nil || len(keys) == 0 {
				if err != nil {
					return err
				}
				break
			}
			if err := fs.db.Update(ctx, func(tx kv.Txn) error {
				for _, k := range keys {
					if err := tx.Delete(k); err != nil {
						return err
					}
				}
				return nil
			}); err != nil {
				return err
			}
		}
	}
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		var r rootRec
		if err := get(tx, rootKey(root), &r, ErrNotExist); err != nil {
			return err
		}
		r.Indexed = false
		if err := put(tx, rootKey(root), r); err != nil {
			return err
		}
		return tx.Delete(keyNamesDone)
	})
}

// WaitNames waits for the backfill Open started, if any, to end.
func (fs *FS) WaitNames() {
	fs.backfill.wait()
}

// RootIndexed says whether root's name index is whole.
func (fs *FS) RootIndexed(ctx context.Context, root uint64) (bool, error) {
	var r rootRec
	err := fs.db.View(ctx, func(tx kv.Txn) error { return get(tx, rootKey(root), &r, ErrNotExist) })
	return r.Indexed, err
}

// auditNames checks that root's name index holds exactly the entries its
// records call for: an E/ entry and one X/ entry per trigram, with the
// folded name, for every item but the top folder (deleted ones too), and
// nothing else.
// A root not marked Indexed may lack entries, never hold wrong ones.
func auditNames(tx kv.Txn, root uint64) error {
	var r rootRec
	if err := get(tx, rootKey(root), &r, ErrNotExist); err != nil {
		return err
	}
	want := map[string]string{} // key -> value
	var ids []uint64
	if err := tx.Scan(timePrefix(root), nil, func(k, _ []byte) error {
		ids = append(ids, timeKeyNode(k))
		return nil
	}); err != nil {
		return err
	}
	for _, id := range ids {
		rec, loc, err := loadNode(tx, id)
		if err != nil {
			return fmt.Errorf("name index: node %d: %w", id, err)
		}
		if loc.Parent == 0 {
			continue
		}
		f := fold(rec.Name)
		want[string(nameEntryKey(root, id))] = f
		for _, g := range grams(f) {
			want[string(gramKey(root, g, id))] = f
		}
	}
	seen := 0
	for _, p := range [][]byte{nameEntryPrefix(root), key(pGram, root)} {
		err := tx.Scan(p, nil, func(k, v []byte) error {
			w, ok := want[string(k)]
			if !ok || w != string(v) {
				return fmt.Errorf("name index: stray or stale entry %q = %q (want %q)", k, v, w)
			}
			seen++
			return nil
		})
		if err != nil {
			return err
		}
	}
	if r.Indexed && seen != len(want) {
		return fmt.Errorf("name index: %d entries, want %d", seen, len(want))
	}
	return nil
}

// MkdirMany creates empty folders of the given names in the folder parent
// of root, as Mkdir does (the same checks, records and index), but many to
// a transaction, so tests and benchmarks build large trees quickly. It
// returns their ids.
func (fs *FS) MkdirMany(ctx context.Context, root, parent uint64, names []string) ([]uint64, error) {
	const batch = 1000
	ids := make([]uint64, 0, len(names))
	for len(ids) < len(names) {
		part := names[len(ids):min(len(ids)+batch, len(names))]
		got := make([]uint64, len(part))
		for i := range part {
			id, err := fs.db.NextID(ctx, "node")
			if err != nil {
				return ids, err
			}
			got[i] = id
		}
		err := fs.update(ctx, func(tx kv.Txn) error {
			now := fs.nowNs()
			for i, name := range part {
				if err := newChildAllowed(tx, root, parent, name, WriteOptions{}, now); err != nil {
					return err
				}
				rec := nodeRec{ID: got[i], Root: root, Parent: parent, Name: name, Dir: true, Created: now, Modified: now}
				if err := fs.addChild(ctx, tx, rec, usageRec{Folders: 1}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return ids, err
		}
		ids = append(ids, got...)
	}
	return ids, nil
}

// MkdirChain creates n empty folders, each in the one before, the first
// in the folder parent of root, named prefix0, prefix1, ..., as Mkdir
// would store them but in one transaction and without Mkdir's checks,
// each a walk of the folders above: a chain MaxDepth deep is then made
// in a moment, where n Mkdirs walked n*n/2 folders. It returns the last.
func (fs *FS) MkdirChain(ctx context.Context, root, parent uint64, prefix string, n int) (uint64, error) {
	ids := make([]uint64, n)
	for i := range ids {
		id, err := fs.db.NextID(ctx, "node")
		if err != nil {
			return 0, err
		}
		ids[i] = id
	}
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		up := parent
		for i, id := range ids {
			rec := nodeRec{ID: id, Root: root, Parent: up, Name: fmt.Sprint(prefix, i), Dir: true, Created: now, Modified: now}
			if err := fs.addChild(ctx, tx, rec, usageRec{Folders: 1}); err != nil {
				return err
			}
			up = id
		}
		return nil
	})
	return ids[n-1], err
}

// IndexOnly does the name index's writes for new items of the given names
// in one transaction that it then abandons: a benchmark times the index's
// share of a create with it.
func (fs *FS) IndexOnly(ctx context.Context, root uint64, names []string) error {
	abandon := errors.New("abandon")
	err := fs.db.Update(ctx, func(tx kv.Txn) error {
		for i, name := range names {
			loc := locRec{Root: root, Parent: 1, Name: name}
			if err := reindex(tx, nodeRec{ID: 1<<62 + uint64(i), Root: root, Parent: 1, Name: name}, loc, true); err != nil {
				return err
			}
		}
		return abandon
	})
	if errors.Is(err, abandon) {
		return nil
	}
	return err
}

// GramBytes is what the copy estimate counts for name's trigram entries
// (itemBytes), and the bytes of keys and values the name index sets for
// them: an item of the largest root and node ids.
func GramBytes(name string) (counted, set int) {
	folded := fold(name)
	for _, g := range grams(folded) {
		set += len(gramKey(^uint64(0), g, ^uint64(0))) + len(folded)
	}
	return maxGrams(name) * (gramEntryBytes + len(name)), set
}

// Grams is the trigrams the name index keeps for name, as folded.
func Grams(name string) []string { return grams(fold(name)) }
