package vfs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// TrimReport says what TrimRevisions did.
type TrimReport struct {
	Files     int   // files that lost revisions
	Revisions int   // revisions dropped
	Bytes     int64 // their sizes, taken off the root's revision_size
	// More says the limit stopped the run before every file was trimmed:
	// the next run goes on.
	More bool
}

// String reads like a log line.
func (r TrimReport) String() string {
	return fmt.Sprintf("trimmed %d revisions (%d bytes) of %d files, more %t", r.Revisions, r.Bytes, r.Files, r.More)
}

// TrimRevisions drops, in every live file of root, the oldest revisions
// beyond keep: the current revision counts among the keep, so keep 5
// leaves the current one and the 4 written just before it. It is how an
// organization's trim_revisions policy keeps a file saved every minute
// from growing without bound. At most limit revisions go in one call (0:
// no limit), so a run over many roots does bounded work; TrimReport.More
// then says there is more to do. Deleted files, and files below a deleted
// folder, are left alone: their revisions go when they are purged.
//
// The revisions go in bounded transactions, oldest first, each with the
// root's usage corrected, so an interrupted trim leaves a file with fewer
// revisions, never a broken one; their chunks no longer referenced become
// garbage for the next GC. It emits no event: it is the system's own
// housekeeping, not a change anyone made.
//
// keep < 1 is a programming error and panics (a policy's trim_revisions_x
// is validated positive). Errors: ErrNotExist or ErrRootDeleted for a
// root that is missing or deleted; a cancelled ctx's error.
func (fs *FS) TrimRevisions(ctx context.Context, root uint64, keep, limit int) (TrimReport, error) {
	var rep TrimReport
	if keep < 1 {
		panic(fmt.Sprintf("vfs: TrimRevisions keeps %d revisions", keep))
	}
	var ids []uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ids = ids[:0]
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		// Every node of the root, files and folders, live and deleted:
		// the time index is the one per-root list of them.
		return tx.Scan(timePrefix(root), nil, func(k, _ []byte) error {
			ids = append(ids, timeKeyNode(k))
			return ctx.Err()
		})
	})
	if err != nil {
		return rep, err
	}
	for _, id := range ids {
		if limit > 0 && rep.Revisions >= limit {
			rep.More = true
			break
		}
		budget := 0
		if limit > 0 {
			budget = limit - rep.Revisions
		}
		n, size, err := fs.trimFile(ctx, root, id, keep, budget)
		if err != nil {
			return rep, fmt.Errorf("vfs: trimming the revisions of item %d of root %d: %w", id, root, err)
		}
		if n > 0 {
			rep.Files++
			rep.Revisions += n
			rep.Bytes += size
		}
	}
	return rep, nil
}

// trimFile drops the oldest revisions of file id beyond keep, at most
// budget of them (0: no bound), in transactions of at most refBatch
// references; anything but a live file of root is skipped.
//
// Which revisions go is read once, oldest first, and each transaction
// reads back only its own by key: read again for every transaction, a
// file that kept n revisions before its policy trimmed cost n²/refBatch
// decodes (100,000 revisions: about 10 s).
func (fs *FS) trimFile(ctx context.Context, root, id uint64, keep, budget int) (dropped int, size int64, err error) {
	var victims []uint64
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		victims = nil
		rec, _, err := liveNodeIn(tx, root, id)
		if errors.Is(err, ErrNotExist) {
			return nil // deleted, purged, or not a file of this root
		}
		if err != nil || rec.Dir {
			return err
		}
		// First count the older revisions by key alone: most files
		// have no more than keep, and then nothing is decoded.
		older := 0
		if err := tx.Scan(revPrefix(id), nil, func(k, _ []byte) error {
			if kv.Uint64At(k, len(revPrefix(id))) != rec.Rev {
				older++
			}
			return nil
		}); err != nil {
			return err
		}
		drop := older - (keep - 1)
		if drop <= 0 {
			return nil
		}
		if budget > 0 {
			drop = min(drop, budget)
		}
		victims, err = oldestRevisions(tx, id, rec.Rev, drop)
		return err
	})
	for len(victims) > 0 && err == nil {
		var n, done int
		var bytes int64
		var parked uint64
		gone := false
		err = fs.update(ctx, func(tx kv.Txn) error {
			n, done, bytes, parked, gone = 0, 0, 0, 0, false
			rec, _, err := liveNodeIn(tx, root, id)
			if errors.Is(err, ErrNotExist) {
				gone = true // deleted or purged since
				return nil
			}
			if err != nil {
				return err
			}
			un := &unref{fs: fs, tx: tx}
			var d usageRec
			for _, rid := range victims {
				if un.used >= fs.refBatch {
					break
				}
				done++
				if rid == rec.Rev {
					continue // made current again since (a restore)
				}
				var r revRec
				err := get(tx, revKey(id, rid), &r, kv.ErrNotFound)
				if errors.Is(err, kv.ErrNotFound) {
					continue // gone since
				}
				if err != nil {
					return err
				}
				if err := un.drop(ctx, r.Chunks); err != nil {
					return err
				}
				if err := tx.Delete(revKey(id, r.ID)); err != nil {
					return err
				}
				un.used++
				n++
				bytes += r.Size
				d.Revisions--
				d.RevisionSize -= r.Size
			}
			parked = un.intent
			return fs.addUsage(ctx, tx, root, d, limits{})
		})
		if err != nil {
			break
		}
		dropped += n
		size += bytes
		if parked != 0 {
			fs.releaseFailed(ctx, &intent{id: parked})
		}
		if gone {
			break
		}
		victims = victims[done:]
	}
	return dropped, size, err
}

// PurgeDeletedIn purges, in each root of cutoffs, the items deleted
// before that root's cutoff, with everything below them (see Purge), and
// each root of cutoffs that was itself deleted before its cutoff, whole
// (as PurgeDeleted does): how an organization's purge_deleted policy
// empties its roots' trash, each organization on its own schedule. A
// deleted root is in the trash whole and counts against its tallies'
// quotas until it is purged (DeleteRoot), so it goes by the same policy;
// one deleted before berth recorded when waits for PurgeDeleted, which
// stamps it. At most limit items go in one call (0: no limit), a folder
// with its tree, or a root, counting as one; PurgeReport.Skipped counts
// those left for the next call as well as those gone meanwhile. Roots not
// in cutoffs and the trees of copies still being staged are left alone.
// It reads the deleted items of the whole store in one scan, whatever the
// number of roots.
func (fs *FS) PurgeDeletedIn(ctx context.Context, cutoffs map[uint64]time.Time, limit int) (PurgeReport, error) {
	var rep PurgeReport
	if len(cutoffs) == 0 {
		return rep, nil
	}
	var errs []error
	roots, err := fs.dueRootsIn(ctx, cutoffs)
	if err != nil {
		return rep, err
	}
	for _, r := range roots {
		if limit > 0 && rep.Purged+rep.Roots >= limit {
			rep.Skipped++
			continue
		}
		if err := fs.purgeRoot(ctx, r); err != nil {
			rep.Failed++
			errs = append(errs, fmt.Errorf("vfs: purging deleted root %d: %w", r, err))
			if ctx.Err() != nil {
				return rep, errors.Join(errs...)
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
				return fmt.Errorf("vfs: decode %q: %w", k[:2], err)
			}
			cut, ok := cutoffs[rec.Root]
			if ok && rec.Deleted != 0 && rec.Deleted < cut.UnixNano() && !rec.Staged {
				due = append(due, item{rec.Root, rec.ID})
			}
			return ctx.Err()
		})
	})
	if err != nil {
		return rep, errors.Join(append(errs, err)...)
	}
	for _, it := range due {
		if limit > 0 && rep.Purged+rep.Roots >= limit {
			rep.Skipped++
			continue
		}
		err := fs.Purge(ctx, it.root, it.id)
		switch {
		case err == nil:
			rep.Purged++
		case errors.Is(err, ErrNotExist), errors.Is(err, ErrRootDeleted):
			rep.Skipped++
		default:
			rep.Failed++
			errs = append(errs, fmt.Errorf("vfs: purging deleted item %d of root %d: %w", it.id, it.root, err))
			if ctx.Err() != nil {
				return rep, errors.Join(errs...)
			}
		}
	}
	return rep, errors.Join(errs...)
}

// dueRootsIn returns the roots of cutoffs deleted before their cutoff and
// not purged yet, in id order; a point read each.
func (fs *FS) dueRootsIn(ctx context.Context, cutoffs map[uint64]time.Time) ([]uint64, error) {
	ids := slices.Sorted(maps.Keys(cutoffs))
	var due []uint64
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		due = due[:0]
		for _, id := range ids {
			var r rootRec
			err := get(tx, rootKey(id), &r, kv.ErrNotFound)
			if errors.Is(err, kv.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			if r.Deleted && !r.Purged && r.DeletedAt != 0 && r.DeletedAt < cutoffs[id].UnixNano() {
				due = append(due, id)
			}
		}
		return ctx.Err()
	})
	return due, err
}

// revAge is what oldestRevisions decodes of a revision record.
type revAge struct {
	ID      uint64 `cbor:"1,keyasint"`
	Created int64  `cbor:"4,keyasint"`
}

// oldestRevisions returns the ids of file's drop oldest revisions but
// current, oldest first by when they were written (Created, then id). Not by
// id alone: on several nodes each takes revision ids from leases of its
// own (kv/postgres), so a revision written later on one node may have a
// lower id than one written earlier on another, and a trim in id order
// dropped the newer revision and kept the older.
func oldestRevisions(tx kv.Txn, file, current uint64, drop int) ([]uint64, error) {
	var all []revAge
	err := tx.Scan(revPrefix(file), nil, func(k, v []byte) error {
		var r revAge
		if err := cbor.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("vfs: decode %q: %w", k[:2], err)
		}
		if r.ID != current {
			all = append(all, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(all, func(a, b revAge) int {
		return cmp.Or(cmp.Compare(a.Created, b.Created), cmp.Compare(a.ID, b.ID))
	})
	out := make([]uint64, 0, min(drop, len(all)))
	for _, r := range all[:min(drop, len(all))] {
		out = append(out, r.ID)
	}
	return out, nil
}
