package vfs

import (
	"context"
	"errors"
	"fmt"

	"berth/kv"
)

// ListHashes returns the listing hash of folder as kept (read from its
// sum) and as recomputed from its children by a scan, at the file
// system's now, and whether the folder has a kept sum.
func (fs *FS) ListHashes(ctx context.Context, folder uint64) (kept, scanned string, has bool, err error) {
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		if err := tx.Scan(listSumPrefix(folder), nil, func(k, v []byte) error {
			has = true
			return kv.ErrStop
		}); err != nil {
			return err
		}
		if kept, err = listHash(tx, folder, now); err != nil {
			return err
		}
		scanned, err = scanListHash(tx, folder, now)
		return err
	})
	return kept, scanned, has, err
}

// ListSumKeys counts the keys of folder's kept sum and locked children.
func (fs *FS) ListSumKeys(ctx context.Context, folder uint64) (sums, locked int, err error) {
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		if err := tx.Scan(listSumPrefix(folder), nil, func(k, v []byte) error { sums++; return nil }); err != nil {
			return err
		}
		return tx.Scan(lockedPrefix(folder), nil, func(k, v []byte) error { locked++; return nil })
	})
	return sums, locked, err
}

// ForgetListSums makes the store look as if it was written before the
// listing sums were kept: their keys and the locked children's go, with
// the mark that the mending of older folders' sums is done.
func (fs *FS) ForgetListSums(ctx context.Context) error {
	fs.WaitListSums()
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		keys := [][]byte{keyListSumsDone}
		for _, p := range []string{pListSum, pLocked, pListMend} {
			if err := tx.Scan([]byte(p), nil, func(k, v []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				return nil
			}); err != nil {
				return err
			}
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

// DamageListSum adds count to the count of shard 0 of folder's kept sum
// and, with digest, 1 to its digest, as a bug or damage would, going
// around the listTxn that keeps sums right.
func (fs *FS) DamageListSum(ctx context.Context, folder uint64, count int64, digest bool) error {
	st, ok := fs.db.(listStore)
	if !ok {
		return fmt.Errorf("vfs: the store is not a listStore")
	}
	return st.Store.Update(ctx, func(tx kv.Txn) error {
		var s listSumRec
		if err := get(tx, listSumKey(folder, 0), &s, kv.ErrNotFound); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		s.Count += count
		if digest {
			s.Lo++
		}
		return put(tx, listSumKey(folder, 0), s)
	})
}

// WaitListSums waits for the mending of listing sums Open started, if
// any, to end.
func (fs *FS) WaitListSums() {
	fs.mend.wait()
}

// ListSumsDone says whether the store is marked as keeping every
// folder's listing sum (M/listsums).
func (fs *FS) ListSumsDone(ctx context.Context) (bool, error) {
	done := false
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		_, err := tx.Get(keyListSumsDone)
		done = err == nil
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		return err
	})
	return done, err
}

// WithListMending returns opts with the mending of listing sums counting
// batch children a transaction and running pause, with the folder, after
// each.
func WithListMending(opts Options, batch int, pause func(folder uint64)) Options {
	opts.mendBatch, opts.mendPause = batch, pause
	return opts
}

// ListMendRecords counts the records of folders whose listing sum is
// being mended (vfslistmend/).
func (fs *FS) ListMendRecords(ctx context.Context) (n int, err error) {
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		return tx.Scan([]byte(pListMend), nil, func(k, v []byte) error { n++; return nil })
	})
	return n, err
}
