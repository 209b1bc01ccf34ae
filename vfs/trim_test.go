package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
)

// TestTrimRevisions: a file saved 20 times keeps its last keep revisions
// (the current one among them) and the root's usage drops by what went;
// files with fewer are untouched, deleted files keep theirs, the limit
// bounds one call and the next goes on, and the chunks of what went are
// garbage (fsck finds nothing wrong).
func TestTrimRevisions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		refBatch  int
		keep      int
		limit     int
		wantFirst int // revisions dropped by the first call
	}{
		{"keep 5", 0, 5, 0, 15},
		{"keep 1", 0, 1, 0, 20}, // few.bin loses its older one too
		{"small transactions", 2, 5, 0, 15},
		{"limit", 0, 5, 4, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := vfs.Options{}
			if tc.refBatch > 0 {
				opts = vfs.WithRefBatch(opts, tc.refBatch)
			}
			e := openEnvWith(t, t.TempDir(), opts)
			t.Cleanup(e.close)
			root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			e.root = root
			var f vfs.Node
			for i := range 20 {
				f = e.write(t, root.FolderID, "saved.bin", randBytes(uint64(i), 10_000+i))
			}
			few := e.write(t, root.FolderID, "few.bin", randBytes(100, 100))
			e.write(t, root.FolderID, "few.bin", randBytes(101, 100))
			gone := e.write(t, root.FolderID, "gone.bin", randBytes(200, 100))
			for i := range 9 {
				e.write(t, root.FolderID, "gone.bin", randBytes(uint64(201+i), 100))
			}
			if err := e.fs.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			before, err := e.fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := e.fs.TrimRevisions(ctx, root.ID, tc.keep, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Revisions != tc.wantFirst || rep.More != (tc.limit > 0) {
				t.Fatalf("first call: %s", rep)
			}
			for rep.More {
				if rep, err = e.fs.TrimRevisions(ctx, root.ID, tc.keep, tc.limit); err != nil {
					t.Fatal(err)
				}
			}
			revs, err := e.fs.Revisions(ctx, root.ID, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(revs) != tc.keep || revs[len(revs)-1].ID != mustStat(t, e, f.ID).RevisionID {
				t.Fatalf("%d revisions left, want %d with the current last", len(revs), tc.keep)
			}
			var keptSize int64
			for _, r := range revs[:len(revs)-1] {
				keptSize += r.Size
			}
			if got := e.read(t, f.ID); len(got) != 10_019 {
				t.Fatalf("current contents %d bytes", len(got))
			}
			if revs, _ := e.fs.Revisions(ctx, root.ID, few.ID); len(revs) != min(2, tc.keep) {
				t.Fatalf("few.bin has %d revisions", len(revs))
			}
			after, err := e.fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantRevs := int64(tc.keep - 1)
			if tc.keep == 1 {
				wantRevs = 0
			} else {
				wantRevs += 1 // few.bin's older revision
			}
			if after.RevisionCount != wantRevs || after.HeadSize != before.HeadSize ||
				after.DelRevisionCount != before.DelRevisionCount || after.DeletedSize != before.DeletedSize {
				t.Fatalf("usage before %+v after %+v", before, after)
			}
			if tc.keep > 1 && after.RevisionSize != keptSize+100 {
				t.Fatalf("revision_size %d, want %d", after.RevisionSize, keptSize+100)
			}
			if after.PhysicalSize >= before.PhysicalSize {
				t.Fatalf("physical size did not drop: %d -> %d", before.PhysicalSize, after.PhysicalSize)
			}
			if _, err := e.fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			fr, err := e.fs.Fsck(ctx, false)
			if err != nil || !fr.OK() {
				t.Fatalf("fsck: %v %s", err, fr)
			}
		})
	}
	t.Run("deleted root", func(t *testing.T) {
		e := newEnv(t)
		if err := e.fs.DeleteRoot(ctx, e.root.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.TrimRevisions(ctx, e.root.ID, 3, 0); !errors.Is(err, vfs.ErrRootDeleted) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestTrimReadsRevisionsOnce: a trim reads which of a file's revisions
// go once, whatever the number of its transactions, where it scanned and
// decoded every revision of the file again in each (a file that kept
// 100,000 revisions: n²/refBatch decodes, about 10 s). Transactions of 2
// revisions over 200 to drop: before, 300 scans of the revisions.
func TestTrimReadsRevisionsOnce(t *testing.T) {
	ctx := context.Background()
	e := openEnvWith(t, t.TempDir(), vfs.WithRefBatch(vfs.Options{}, 2))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	var f vfs.Node
	for i := range 201 {
		f = e.write(t, root.FolderID, "saved.txt", []byte(fmt.Sprint("save ", i)))
	}
	before := e.db.TxnStats()
	rep, err := e.fs.TrimRevisions(ctx, root.ID, 1, 0)
	if err != nil || rep.Revisions != 200 || rep.More {
		t.Fatalf("trim: %s, %v", rep, err)
	}
	if scans := e.db.TxnStats().Scans - before.Scans; scans > 10 {
		t.Errorf("%d scans for a trim of 200 revisions in transactions of 2", scans)
	}
	if revs, err := e.fs.Revisions(ctx, root.ID, f.ID); err != nil || len(revs) != 1 || revs[0].ID != mustStat(t, e, f.ID).RevisionID {
		t.Fatalf("left %v, %v", revs, err)
	}
	if got := string(e.read(t, f.ID)); got != "save 200" {
		t.Fatalf("current contents %q", got)
	}
	fr, err := e.fs.Fsck(ctx, false)
	if err != nil || !fr.OK() {
		t.Fatalf("fsck: %v %s", err, fr)
	}
}

func mustStat(t *testing.T, e *env, id uint64) vfs.Node {
	t.Helper()
	n, err := e.fs.Stat(context.Background(), e.root.ID, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPurgeDeletedIn: each root's trash is purged up to its own cutoff
// (an item deleted 2h ago goes under a 1h policy, one deleted 30m ago
// stays), roots not named are left alone, usage drops by what went, and
// the limit bounds one call.
func TestPurgeDeletedIn(t *testing.T) {
	ctx := context.Background()
	clk := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
	t.Cleanup(e.close)
	a, err := e.fs.CreateRoot(ctx, "a", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.fs.CreateRoot(ctx, "b", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	del := func(r vfs.Root, id uint64) {
		t.Helper()
		if err := e.fs.Delete(ctx, r.ID, id, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.root = a
	old1 := e.write(t, a.FolderID, "old1.bin", randBytes(1, 5000))
	old2 := e.write(t, a.FolderID, "old2.bin", randBytes(2, 5000))
	recent := e.write(t, a.FolderID, "recent.bin", randBytes(3, 5000))
	e.root = b
	otherOld := e.write(t, b.FolderID, "other.bin", randBytes(4, 5000))
	del(a, old1.ID)
	del(a, old2.ID)
	del(b, otherOld.ID)
	clk.Add(90 * time.Minute)
	del(a, recent.ID)
	clk.Add(30 * time.Minute) // old ones deleted 2h ago, recent 30m ago

	before, _ := e.fs.Usage(ctx, a.ID)
	cut := map[uint64]time.Time{a.ID: clk.Now().Add(-time.Hour)}
	rep, err := e.fs.PurgeDeletedIn(ctx, cut, 1)
	if err != nil || rep.Purged != 1 || rep.Skipped != 1 {
		t.Fatalf("limited run: %v %s", err, rep)
	}
	rep, err = e.fs.PurgeDeletedIn(ctx, cut, 1)
	if err != nil || rep.Purged != 1 {
		t.Fatalf("second run: %v %s", err, rep)
	}
	rep, err = e.fs.PurgeDeletedIn(ctx, cut, 0)
	if err != nil || rep.Purged != 0 {
		t.Fatalf("third run: %v %s", err, rep)
	}
	after, _ := e.fs.Usage(ctx, a.ID)
	if after.DelFileCount != 1 || after.DeletedSize != 5000 || before.DeletedSize != 15000 {
		t.Fatalf("usage before %+v after %+v", before, after)
	}
	e.root = a
	if _, err := e.fs.Stat(ctx, a.ID, recent.ID); err != nil {
		t.Fatalf("recent.bin: %v", err)
	}
	for _, id := range []uint64{old1.ID, old2.ID} {
		if _, err := e.fs.Stat(ctx, a.ID, id); !errors.Is(err, vfs.ErrNotExist) {
			t.Fatalf("old item %d: %v", id, err)
		}
	}
	if _, err := e.fs.Stat(ctx, b.ID, otherOld.ID); err != nil {
		t.Fatalf("root b's item was touched: %v", err)
	}
}

// TestPurgeDeletedInRoots: an organization's purge_deleted empties its
// roots' trash, deleted roots of its own included (a deleted root is in
// the trash whole, and counts against the quotas until it is purged):
// those deleted before the cutoff go, with their usage out of their
// tallies, each counting as one item against the limit; those deleted
// since, those of roots not asked for, and live roots stay. Before, a
// deleted root was left alone, and nothing a tenant could set gave its
// space back.
func TestPurgeDeletedInRoots(t *testing.T) {
	const size = 5000
	cases := []struct {
		name      string
		deleted   time.Duration // how long ago the root was deleted; 0: live
		asked     bool          // in the cutoffs
		limit     int
		purged    bool
		roots     int // PurgeReport.Roots
		remaining int64
	}{
		{"deleted before the cutoff", 2 * time.Hour, true, 0, true, 1, 0},
		{"deleted before the cutoff, under a limit", 2 * time.Hour, true, 1, true, 1, 0},
		{"deleted since the cutoff", 30 * time.Minute, true, 0, false, 0, size},
		{"not asked for", 2 * time.Hour, false, 0, false, 0, size},
		{"live", 0, true, 0, false, 0, size},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			clk := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
			t.Cleanup(e.close)
			const tally = 7
			r, err := e.fs.CreateRootWith(ctx, "r", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{tally}})
			if err != nil {
				t.Fatal(err)
			}
			e.root = r
			e.write(t, r.FolderID, "f.bin", randBytes(1, size))
			clk.Add(3*time.Hour - c.deleted)
			if c.deleted != 0 {
				if err := e.fs.DeleteRoot(ctx, r.ID); err != nil {
					t.Fatal(err)
				}
			}
			clk.Add(c.deleted)
			cut := map[uint64]time.Time{}
			if c.asked {
				cut[r.ID] = clk.Now().Add(-time.Hour)
			}
			rep, err := e.fs.PurgeDeletedIn(ctx, cut, c.limit)
			if err != nil || rep.Roots != c.roots || rep.Failed != 0 {
				t.Fatalf("%v %s, want %d roots purged", err, rep, c.roots)
			}
			u, err := e.fs.TallyUsage(ctx, tally)
			if err != nil || u.PhysicalSize != c.remaining {
				t.Fatalf("the tally holds %d bytes (%v), want %d", u.PhysicalSize, err, c.remaining)
			}
			if c.deleted == 0 {
				if _, err := e.fs.Stat(ctx, r.ID, r.FolderID); err != nil {
					t.Fatalf("the live root: %v", err)
				}
			}
			// Purged or not, the store is sound, and a later run of the
			// whole trash finds the purged root gone.
			e.fsckClean(t)
			all, err := e.fs.PurgeDeleted(ctx, clk.Now().Add(-time.Hour))
			if err != nil || (c.purged && all.Roots != 0) {
				t.Fatalf("PurgeDeleted after: %v %s", err, all)
			}
		})
	}
}
