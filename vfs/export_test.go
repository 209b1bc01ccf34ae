package vfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// WithRefBatch returns opts with the number of chunk references one
// transaction changes set to n, so tests reach the split paths with small
// files.
func WithRefBatch(opts Options, n int) Options {
	opts.refBatch = n
	return opts
}

// SetOwnedCount stores n as the count of what owner's staged uploads
// into root reserve (announced: announce past that), as damage would;
// n < 0 deletes it.
func (fs *FS) SetOwnedCount(ctx context.Context, owner string, root uint64, announced bool, n int64) error {
	k := ownedKey(owner, root)
	if announced {
		k = announcedKey(owner, root)
	}
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		if n < 0 {
			return tx.Delete(k)
		}
		return put(tx, k, n)
	})
}

// SetUploadCount stores n as owner's count of staged uploads in
// progress, as damage would; n < 0 deletes it.
func (fs *FS) SetUploadCount(ctx context.Context, owner string, n int64) error {
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		if n < 0 {
			return tx.Delete(ownerStagedKey(owner))
		}
		return put(tx, ownerStagedKey(owner), n)
	})
}

// WithStagedBatch returns opts with EachStaged reading n uploads a
// transaction, so tests reach its later transactions with a few.
func WithStagedBatch(opts Options, n int) Options {
	opts.stagedBatch = n
	return opts
}

// WithZip64Threshold returns opts with zips using Zip64 fields for sizes
// and offsets of n bytes or more, so tests reach them without 4 GiB.
func WithZip64Threshold(opts Options, n int64) Options {
	opts.zip64At = n
	return opts
}

// WithZipMaxEntries returns opts with zips bounded to n entries instead of
// ZipMaxEntries.
func WithZipMaxEntries(opts Options, n int) Options {
	opts.zipMax = n
	return opts
}

// WithZipBudget returns opts with the zips being served holding at most
// n bytes together instead of ZipBudget.
func WithZipBudget(opts Options, n int64) Options {
	opts.ZipBudget = n
	return opts
}

// ZipHeld is what the layouts of the zips being served hold of the
// budget, in all and by requester and by group (as "group " and its
// name), those holding none left out.
func (fs *FS) ZipHeld() (total int64, by map[string]int64) {
	fs.zips.mu.Lock()
	defer fs.zips.mu.Unlock()
	by = maps.Clone(fs.zips.by)
	for g, n := range fs.zips.groups {
		if by == nil {
			by = map[string]int64{}
		}
		by["group "+g] = n
	}
	return fs.zips.total, by
}

// ZipLayouts is how many layouts are kept to be shared.
func (fs *FS) ZipLayouts() int {
	fs.zips.mu.Lock()
	defer fs.zips.mu.Unlock()
	return len(fs.zips.layouts)
}

// WithBatchHook returns opts with fn run between the transactions of a
// split operation.
func WithBatchHook(opts Options, fn func(Op)) Options {
	opts.batchHook = fn
	return opts
}

// WithPurgeHook returns opts with fn run after each transaction of a
// purge, whether or not it parked chunks.
func WithPurgeHook(opts Options, fn func()) Options {
	opts.purgeHook = fn
	return opts
}

// IntentParts counts the I/ keys: operations not finished or not released.
func (fs *FS) IntentParts(ctx context.Context) (int, error) {
	n := 0
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		return tx.Scan([]byte(pIntent), nil, func(k, v []byte) error {
			n++
			return nil
		})
	})
	return n, err
}

// Audit checks that the records of a root agree with each other (every
// node's location names its record, every name and time index entry names
// its node, no folder is its own ancestor, every file's current revision
// exists) and recounts the root's usage from them, for a test to compare
// with Usage. Items of a copy still being staged are not counted.
func (fs *FS) Audit(ctx context.Context, root uint64) (Usage, error) {
	var u usageRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		u = usageRec{}
		var ids []uint64
		err := tx.Scan([]byte(pLoc), nil, func(k, v []byte) error {
			var loc locRec
			if err := cbor.Unmarshal(v, &loc); err != nil {
				return err
			}
			if loc.Root == root {
				ids = append(ids, binary.BigEndian.Uint64(k[len(pLoc):]))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range ids {
			rec, loc, err := loadNode(tx, id)
			if err != nil {
				return fmt.Errorf("node %d: %w", id, err)
			}
			if rec.ID != id || rec.Root != root || rec.Parent != loc.Parent ||
				(loc.Parent != 0 && rec.Name != loc.Name) || (rec.Deleted != 0) != loc.Deleted {
				return fmt.Errorf("node %d: record %+v does not match its location %+v", id, rec, loc)
			}
			// A write transaction takes the location of a live record
			// it walked to as liveLoc says, without reading it (placed).
			if !loc.Deleted && loc != liveLoc(rec) {
				return fmt.Errorf("node %d: location %+v, not %+v as its record says", id, loc, liveLoc(rec))
			}
			if _, err := tx.Get(timeKey(root, rec.Modified, id)); err != nil {
				return fmt.Errorf("node %d: time index: %w", id, err)
			}
			_, gone, err := resolve(tx, rec)
			if errors.Is(err, errStaged) {
				continue
			}
			if err != nil {
				return fmt.Errorf("node %d: %w", id, err)
			}
			if rec.Parent == 0 {
				if err := countProps(tx, rec, &u); err != nil {
					return err
				}
				continue
			}
			if !rec.Dir {
				if _, err := tx.Get(revKey(id, rec.Rev)); err != nil {
					return fmt.Errorf("file %d: current revision %d: %w", id, rec.Rev, err)
				}
			}
			if err := countItem(tx, rec, gone, &u); err != nil {
				return err
			}
		}
		for _, prefix := range []string{pChild, pDeleted} {
			err := tx.Scan([]byte(prefix), nil, func(k, v []byte) error {
				var rec nodeRec
				if err := cbor.Unmarshal(v, &rec); err != nil {
					return err
				}
				if rec.Root != root {
					return nil
				}
				var loc locRec
				if err := get(tx, locKey(rec.ID), &loc, kv.ErrNotFound); err != nil {
					return fmt.Errorf("%s record of node %d: location: %w", prefix, rec.ID, err)
				}
				if !bytes.Equal(recKey(rec.ID, loc), k) {
					return fmt.Errorf("%s record of node %d is not where its location %+v says", prefix, rec.ID, loc)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		if err := auditNames(tx, root); err != nil {
			return err
		}
		return tx.Scan(timePrefix(root), nil, func(k, v []byte) error {
			rec, _, err := loadNode(tx, timeKeyNode(k))
			if err != nil {
				return fmt.Errorf("time index entry of node %d: %w", timeKeyNode(k), err)
			}
			if !bytes.Equal(timeKey(root, rec.Modified, rec.ID), k) {
				return fmt.Errorf("stale time index entry of node %d", rec.ID)
			}
			return nil
		})
	})
	return u.public(), err
}

// AddLegacyDeletedRoots stores n empty roots deleted before berth recorded
// when (no DeletedAt), in transactions of a thousand.
func (fs *FS) AddLegacyDeletedRoots(ctx context.Context, n int) error {
	for done := 0; done < n; {
		ids := make([]uint64, min(1000, n-done))
		for i := range ids {
			id, err := fs.db.NextID(ctx, "root")
			if err != nil {
				return err
			}
			ids[i] = id
		}
		err := fs.db.Update(ctx, func(tx kv.Txn) error {
			for _, id := range ids {
				if err := put(tx, rootKey(id), rootRec{ID: id, Name: "old", Type: RootSync, Deleted: true}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		done += len(ids)
	}
	return nil
}

// CorruptLocation overwrites the location record of item id with bytes
// that do not decode, as a damaged store would hold.
func (fs *FS) CorruptLocation(ctx context.Context, id uint64) error {
	return fs.db.Update(ctx, func(tx kv.Txn) error { return tx.Set(locKey(id), []byte{0xff, 0x00}) })
}

// CorruptRecord overwrites the record of the live item name in the
// folder parent with bytes that do not decode, as a damaged store would
// hold: a walk down a path through it fails with the store's error.
func (fs *FS) CorruptRecord(ctx context.Context, parent uint64, name string) error {
	db := fs.db
	if ls, ok := db.(listStore); ok {
		db = ls.Store // the sums would decode it
	}
	return db.Update(ctx, func(tx kv.Txn) error { return tx.Set(childKey(parent, name), []byte{0xff, 0x00}) })
}

// Strays lists records that nothing owns any more: revisions, properties,
// folder generations and time index entries of items that are gone,
// locations without their record, usage records of roots purged or never
// made. Each is named by its key's kind and the id it hangs on.
func (fs *FS) Strays(ctx context.Context) ([]string, error) {
	var out []string
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		exists := func(id uint64) bool {
			_, _, err := loadNode(tx, id)
			return err == nil
		}
		id := func(k []byte) uint64 { return binary.BigEndian.Uint64(k[2:10]) }
		for _, p := range []string{pRev, pProp, pGen, pLoc} {
			err := tx.Scan([]byte(p), nil, func(k, v []byte) error {
				if !exists(id(k)) {
					out = append(out, fmt.Sprintf("%s%d", p, id(k)))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		err := tx.Scan([]byte(pTime), nil, func(k, v []byte) error {
			rec, _, err := loadNode(tx, timeKeyNode(k))
			if err != nil || !bytes.Equal(timeKey(rec.Root, rec.Modified, rec.ID), k) {
				out = append(out, fmt.Sprintf("%s%d/%d", pTime, id(k), timeKeyNode(k)))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, p := range []string{pUsage, pQuota} {
			err := tx.Scan([]byte(p), nil, func(k, v []byte) error {
				var r rootRec
				if err := get(tx, rootKey(id(k)), &r, kv.ErrNotFound); err != nil || r.Purged {
					out = append(out, fmt.Sprintf("%s%d", p, id(k)))
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// DropCRC rewrites a revision record without its CRC, as revisions
// written before berth kept one are stored.
func (fs *FS) DropCRC(ctx context.Context, file, rev uint64) error {
	return fs.db.Update(ctx, func(tx kv.Txn) error {
		var rr revRec
		if err := get(tx, revKey(file, rev), &rr, ErrNotExist); err != nil {
			return err
		}
		rr.CRC = nil
		return put(tx, revKey(file, rev), rr)
	})
}

// StagedKey and StagedPartKey are the keys of a staged upload's record
// and of one of its parts, for tests that damage them.
func StagedKey(id uint64) []byte           { return stagedKey(id) }
func StagedPartKey(id, part uint64) []byte { return stagedPartKey(id, part) }

// ZipCentralMark is zipCentralMark.
const ZipCentralMark = zipCentralMark

// ZipWalked is how many central records r passed over to find those it
// read.
func ZipWalked(r *ZipReader) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.walked
}

// RoomFreedRoots returns how many roots the freeRoom throttle remembers.
func (fs *FS) RoomFreedRoots() int {
	n := 0
	fs.roomFreed.Range(func(any, any) bool { n++; return true })
	return n
}

// SameZipLayout reports whether a and b share one layout.
func SameZipLayout(a, b *Zip) bool { return a.zipLayout == b.zipLayout }

// SetRecordPage sets how many node records a walk reads a page at a time
// and returns what puts it back.
func SetRecordPage(n int) (restore func()) {
	old := recordPage
	recordPage = n
	return func() { recordPage = old }
}

// RecordsPeak returns the most node records the walks have held at once
// since the last call, and starts counting again.
func RecordsPeak() int64 { return recordsPeak.Swap(recordsHeld.Load()) }
