package vfs

import (
	"context"
	"slices"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// TallyRecount recounts a tally from the store: the sum of Audit over
// every root created with it whose usage it counts (live, or deleted and
// not purged yet, trashed), whether or not a test knows of the root (a
// crash right after CreateRootWith's commit leaves one it does not);
// RootCount counts the live ones.
func (fs *FS) TallyRecount(ctx context.Context, tally uint64) (Usage, error) {
	var roots []uint64
	live := map[uint64]bool{}
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		roots = roots[:0]
		clear(live)
		return tx.Scan([]byte(pRoot), nil, func(k, v []byte) error {
			var r rootRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.counted() && slices.Contains(r.Tallies, tally) {
				roots = append(roots, r.ID)
				live[r.ID] = !r.Deleted
			}
			return nil
		})
	})
	var sum usageRec
	n := int64(0)
	for _, id := range roots {
		if err != nil {
			break
		}
		var a Usage
		if a, err = fs.Audit(ctx, id); err == nil {
			u := usageRec{Files: a.FileCount, HeadSize: a.HeadSize, Revisions: a.RevisionCount,
				RevisionSize: a.RevisionSize, DelFiles: a.DelFileCount, DelRevisions: a.DelRevisionCount,
				DeletedSize: a.DeletedSize, Folders: a.FolderCount,
				PropSize: a.PhysicalSize - a.HeadSize - a.RevisionSize - a.DeletedSize}
			if live[id] {
				n++
			} else {
				u = u.trashed()
			}
			sum.add(u)
		}
	}
	p := sum.public()
	p.RootCount = n
	return p, err
}

// coarseRoom keeps at least 1 GiB steps and at most 1/64 of the figure in
// precision, and never goes below 0.
func TestCoarseRoom(t *testing.T) {
	const gib = 1 << 30
	for _, c := range []struct{ in, want int64 }{
		{-5, 0}, {0, 0}, {gib - 1, 0}, {gib, gib}, {3*gib + 12345, 3 * gib},
		{127 * gib, 127 * gib}, {128 * gib, 128 * gib}, {255*gib + 1, 254 * gib},
		{1001 * gib, 1000 * gib}, {1007 * gib, 1000 * gib},
	} {
		if got := coarseRoom(c.in); got != c.want {
			t.Errorf("coarseRoom(%d) = %d, want %d", c.in, got, c.want)
		}
	}
}

// DamageUsage adds files to root's usage ledger, and DamageTally to
// tally's sum, as an update lost or counted twice would.
func (fs *FS) DamageUsage(ctx context.Context, root uint64, files int64) error {
	return fs.update(ctx, func(tx kv.Txn) error { return addShard(tx, usageKey(root, 0), usageRec{Files: files}) })
}

// DamageTally: see DamageUsage.
func (fs *FS) DamageTally(ctx context.Context, tally uint64, files int64) error {
	return fs.update(ctx, func(tx kv.Txn) error { return addShard(tx, tallyKey(tally, 3), usageRec{Files: files}) })
}

// DamageNodeRoot makes item id's record name root, which its location
// does not: damage no change makes.
func (fs *FS) DamageNodeRoot(ctx context.Context, id, root uint64) error {
	return fs.update(ctx, func(tx kv.Txn) error {
		rec, loc, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		rec.Root = root
		return put(tx, recKey(id, loc), rec)
	})
}

// DropNodeRecord deletes item id's record and leaves its location:
// damage no change makes.
func (fs *FS) DropNodeRecord(ctx context.Context, id uint64) error {
	return fs.update(ctx, func(tx kv.Txn) error {
		_, loc, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		return tx.Delete(recKey(id, loc))
	})
}

// LedgerShards counts the usage ledger records (shards) stored for root:
// none once it is purged.
func (fs *FS) LedgerShards(ctx context.Context, root uint64) (int, error) {
	n := 0
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		for s := range uint64(usageShards) {
			if _, err := tx.Get(usageKey(root, s)); err == nil {
				n++
			} else if err != kv.ErrNotFound {
				return err
			}
		}
		return nil
	})
	return n, err
}
