package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"berth/kv"
)

// The folders of a store older than the kept listing sums (listhash.go)
// have none: their hash was computed by a scan of their children on every
// read, and a WebDAV PROPFIND of Depth 1 that asks the getetag of every
// subfolder scanned each one's children, as Depth 2 would. Open starts,
// in the background, the mending of those sums (startListMend) until
// M/listsums says every folder has one.
//
// A folder is mended a bounded transaction at a time (listMendBatch
// children each), in the order of its children's keys, so that a folder
// of a million children is not one transaction. Until the last one its
// sum so far is kept apart (vfslistmend/<folder>, listMendRec) with the
// key of the first child it has not counted, and no H/ key is written,
// so reads still scan the folder, with the same answers. A write of a
// child meanwhile (listTxn.ensure) reads that record: below the cursor
// it changes the partial sum (read and written, so it and the mender's
// next transaction conflict), at or past it it leaves the sum alone, for
// the mender counts the child when it gets there, and writes G/<folder>,
// which the mender reads in each transaction: a child added in the range
// the mender is scanning (not in the mender's reads, which are the keys
// it found) makes the two conflict. Each transaction writes the locked
// keys (L/) of the children it counts, as ensure does. The last writes
// shard 0 with the whole sum, as ensure would have, and drops the record.
//
// A write into a folder the mending has not begun (no record) starts its
// sum whole, as before (ensure): both read shard 0 and the record, and
// write one, so the mending then finds the sum kept and moves on. A purge
// of the folder deletes its N/ key, which each transaction reads. A
// release before the mending, run on the store meanwhile, starts a sum
// whole at its first write into a half-mended folder; the mending finds
// it and drops its record.

// listMendBatch is how many children one transaction of the mending
// counts (Options.mendBatch in tests).
const listMendBatch = 1024

// listMendBusy is how many times in a row the mending tries a batch
// again that kept conflicting with writers (ErrBusy) before it gives up
// until the next start.
const listMendBusy = 20

// listMendNodes is how many node ids one read of the mending's walk of
// the store's nodes takes.
const listMendNodes = 512

// keyListSumsDone marks a store whose every folder keeps its listing sum.
var keyListSumsDone = []byte(kv.VFSMarker + "listsums")

func listMendKey(folder uint64) []byte { return key(pListMend, folder) }

// listMendRec is the sum of a folder being mended so far: of its children
// whose keys sort before Cursor.
type listMendRec struct {
	Cursor []byte     `cbor:"1,keyasint"`
	Sum    listSumRec `cbor:"2,keyasint"`
}

// startListMend begins mending the listing sums of folders that keep
// none, in the background; Close stops it. A store marked done
// (M/listsums) costs one read; a new one, without a node, is marked at
// once, so that no write of the job's runs under a new store's first
// requests.
func (fs *FS) startListMend(ctx context.Context) error {
	done, empty := false, true
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		_, err := tx.Get(keyListSumsDone)
		if err == nil {
			done = true
			return nil
		}
		if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		return tx.Scan([]byte(pLoc), nil, func(k, v []byte) error {
			empty = false
			return kv.ErrStop
		})
	})
	switch {
	case err != nil || done:
		return err
	case empty:
		return fs.update(ctx, func(tx kv.Txn) error { return tx.Set(keyListSumsDone, []byte{1}) })
	}
	fs.mend.start(ctx, func(bg context.Context) {
		start := time.Now()
		n, err := fs.mendListSums(bg)
		switch {
		case err != nil && bg.Err() == nil:
			fs.log.Error("vfs: keeping the listing sums of older folders; their hashes are scanned until the next start", "err", err, "mended", n)
		case err == nil && n > 0:
			fs.log.Info("vfs: kept the listing sums of older folders", "folders", n, "took", time.Since(start))
		}
	})
	return nil
}

// mendListSums walks every node (N/) in batches and mends each folder
// without a kept sum, then marks the store. The walk goes by id, which a
// node keeps for its life, so a folder moved meanwhile is still met; a
// node made meanwhile keeps its sum from its making (startEmpty).
func (fs *FS) mendListSums(ctx context.Context) (int, error) {
	mended := 0
	from := []byte(pLoc)
	for {
		var folders []uint64
		var next []byte
		err := fs.db.View(ctx, func(tx kv.Txn) error {
			folders, next = folders[:0], nil
			var ids []uint64
			err := tx.Scan([]byte(pLoc), from, func(k, v []byte) error {
				if len(ids) == listMendNodes {
					next = append([]byte(nil), k...)
					return kv.ErrStop
				}
				if len(k) == len(pLoc)+9 {
					ids = append(ids, kv.Uint64At(k, len(pLoc)))
				}
				return nil
			})
			if err != nil {
				return err
			}
			for _, id := range ids {
				if _, err := tx.Get(listSumKey(id, 0)); err == nil {
					continue
				} else if !errors.Is(err, kv.ErrNotFound) {
					return err
				}
				rec, _, err := loadNode(tx, id)
				if errors.Is(err, ErrNotExist) {
					continue
				} else if err != nil {
					return err
				}
				if rec.Dir {
					folders = append(folders, id)
				}
			}
			return nil
		})
		if err != nil {
			return mended, err
		}
		for _, f := range folders {
			if err := fs.mendListSum(ctx, f); err != nil {
				return mended, fmt.Errorf("vfs: listing sum of folder %d: %w", f, err)
			}
			mended++
		}
		if next == nil {
			break
		}
		from = next
	}
	return mended, fs.update(ctx, func(tx kv.Txn) error { return tx.Set(keyListSumsDone, []byte{1}) })
}

// mendListSum keeps the sum of folder, listMendBatch children a
// transaction (see the comment at the top).
func (fs *FS) mendListSum(ctx context.Context, folder uint64) error {
	busy := 0
	for {
		finished := false
		err := fs.update(ctx, func(tx kv.Txn) error {
			finished = false
			if _, err := tx.Get(listSumKey(folder, 0)); err == nil {
				// Kept already, by a write's ensure: one of a release
				// before the mending, run meanwhile, leaves its record.
				finished = true
				return tx.Delete(listMendKey(folder))
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			var m listMendRec
			err := get(tx, listMendKey(folder), &m, kv.ErrNotFound)
			switch {
			case errors.Is(err, kv.ErrNotFound):
				m.Cursor = childPrefix(folder)
			case err != nil:
				return err
			}
			// The purge of the folder deletes N/ with its sum's keys, in
			// one transaction that this read makes conflict with this
			// one; a folder purged is done, and its record goes.
			if _, lerr := tx.Get(locKey(folder)); errors.Is(lerr, kv.ErrNotFound) {
				finished = true
				if err == nil {
					return tx.Delete(listMendKey(folder))
				}
				return nil
			} else if lerr != nil {
				return lerr
			}
			// A child added past the cursor meanwhile writes G/ (ensure).
			if _, err := tx.Get(genKey(folder)); err != nil && !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			locked, next, err := scanListSumFrom(tx, folder, m.Cursor, fs.mendBatch, &m.Sum)
			if err != nil {
				return err
			}
			if err := setLocked(tx, folder, locked); err != nil {
				return err
			}
			if next != nil {
				m.Cursor = next
				return put(tx, listMendKey(folder), m)
			}
			finished = true
			if err := put(tx, listSumKey(folder, 0), m.Sum); err != nil {
				return err
			}
			return tx.Delete(listMendKey(folder))
		})
		if errors.Is(err, ErrBusy) && busy < listMendBusy && ctx.Err() == nil {
			// Writers into the folder won the conflicts of every try:
			// a pause, and the same batch again.
			busy++
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(busy) * 10 * time.Millisecond):
			}
			continue
		}
		if err != nil || finished {
			return err
		}
		busy = 0
		if fs.mendPause != nil {
			fs.mendPause(folder)
		}
	}
}

// listMend is a folder being mended as a write transaction sees it: the
// mending's record, and whether the transaction changed it or wrote G/.
type listMend struct {
	rec     listMendRec
	dirty   bool
	touched bool
}

// counted says whether the mending has counted the child key k.
func (m *listMend) counted(k []byte) bool { return bytes.Compare(k, m.rec.Cursor) < 0 }
