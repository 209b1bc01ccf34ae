package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
	"berth/vfs/chunk"
)

// TestTrash holds the cases of what happens to deleted items: a delete
// hides a whole tree, Purge and PurgeDeleted remove it for good, and the
// collector (GC, Sweep) frees the chunks nothing references any more,
// never one an upload in flight still needs. A bug found later in any of
// them becomes a row here.
func TestTrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"DeleteFolderSubtree", deleteFolderSubtree},
		{"PurgeAndGC", purgeAndGC},
		{"PurgeTreeReadsBeforeWrites", purgeTreeReadsBeforeWrites},
		{"PurgeDeleted", purgeDeleted},
		{"PurgeDeletedRoots", purgeDeletedRoots},
		{"PurgeDeletedManyLegacyRoots", purgeDeletedManyLegacyRoots},
		{"PurgeDeletedGoesOnPastAFailure", purgeDeletedGoesOnPastAFailure},
		// was purgerevs_test.go
		{"PurgeManyRevisions", purgeManyRevisions},
		// was purgeroot_race_test.go
		{"PurgeRootInterrupted", purgeRootInterrupted},
		// was gcnotes_test.go
		{"GCKeepsNoteOfChunkOrphanedMeanwhile", gcKeepsNoteOfChunkOrphanedMeanwhile},
		// was dedupgc_test.go
		{"UploadKeepsDedupedChunks", uploadKeepsDedupedChunks},
		// was forgetrace_test.go
		{"FailedUploadNoteSurvivesCollector", failedUploadNoteSurvivesCollector},
	} {
		t.Run(tc.name, tc.run)
	}
}

// purgeDeleted empties the trash up to a date: items deleted before it
// go for good with everything below them, their space is no longer counted
// and their chunks become garbage; items deleted after it, and live ones,
// stay; a root deleted before it goes whole.
func purgeDeleted(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := berthtest.NewClock(t0)
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
	t.Cleanup(e.close)
	var err error
	e.root, err = e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	top := e.root.FolderID
	mkdir := func(parent uint64, name string) vfs.Node {
		t.Helper()
		n, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	del := func(id uint64) {
		t.Helper()
		if err := e.fs.Delete(ctx, e.root.ID, id, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old := mkdir(top, "old folder")
	inOld := e.write(t, old.ID, "in old.bin", randBytes(1, 300_000))
	oldFile := e.write(t, top, "old.bin", randBytes(2, 300_000))
	keep := mkdir(top, "kept folder")
	oldInKept := e.write(t, keep.ID, "old in kept.bin", randBytes(3, 300_000))
	recent := e.write(t, top, "recent.bin", randBytes(4, 300_000))
	live := e.write(t, top, "live.bin", randBytes(5, 300_000))
	del(old.ID)
	del(oldFile.ID)
	del(oldInKept.ID)
	// A deleted root with a deleted file: purged whole, the file with it.
	other, err := e.fs.CreateRoot(ctx, "bob", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.fs.WriteFile(ctx, other.ID, other.FolderID, "x.bin", bytes.NewReader(randBytes(6, 1000)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, other.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.DeleteRoot(ctx, other.ID); err != nil {
		t.Fatal(err)
	}

	clk.Add(48 * time.Hour)
	del(recent.ID)

	rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Purged != 3 || rep.Roots != 1 || rep.Skipped != 0 {
		t.Errorf("report %s, want 3 purged (old folder, old.bin, old in kept.bin), 1 root", rep)
	}
	for _, id := range []uint64{old.ID, inOld.ID, oldFile.ID, oldInKept.ID} {
		if _, err := e.fs.Stat(ctx, e.root.ID, id); !errors.Is(err, vfs.ErrNotExist) {
			t.Errorf("item %d after the purge: %v", id, err)
		}
	}
	if n, err := e.fs.Stat(ctx, e.root.ID, recent.ID); err != nil || !n.Deleted {
		t.Errorf("recently deleted file: %+v %v, want it kept, deleted", n, err)
	}
	if got := e.read(t, live.ID); len(got) != 300_000 {
		t.Errorf("live file reads %d bytes", len(got))
	}
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.DelFileCount != 1 || u.DeletedSize != 300_000 || u.FileCount != 1 || u.FolderCount != 1 {
		t.Errorf("usage after the purge: %+v", u)
	}
	gc, err := e.fs.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if gc.Deleted == 0 {
		t.Error("the purged files' chunks were not collected")
	}
	fsck, err := e.fs.Fsck(ctx, true)
	if err != nil || !fsck.OK() {
		t.Fatalf("fsck after the purge: %s %v", fsck, err)
	}
	if recount, err := e.fs.Audit(ctx, e.root.ID); err != nil || recount != u {
		t.Fatalf("audit: recounted %+v, usage says %+v (%v)", recount, u, err)
	}

	// Purging again finds nothing more before that date.
	if rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour)); err != nil || rep.Purged != 0 || rep.Roots != 0 {
		t.Errorf("second purge: %s %v", rep, err)
	}
}

// TestPurgeDeletedRoots: a root deleted before the date goes whole, its
// live and deleted items, every revision and, once collected, the chunks
// no other root shares; the id still answers ErrRootDeleted. A root
// deleted after the date, and a live one sharing its chunks, keep
// everything. Small reference batches take the split paths.
func purgeDeletedRoots(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := berthtest.NewClock(t0)
	e := openEnvWith(t, t.TempDir(), vfs.WithRefBatch(vfs.Options{Now: clk.Now}, 2))
	t.Cleanup(e.close)
	o := vfs.WriteOptions{}
	must := func(n vfs.Node, err error) vfs.Node {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	shared := randBytes(30, 5<<20)
	fill := func(name string, seed uint64) vfs.Root {
		t.Helper()
		r, err := e.fs.CreateRoot(ctx, name, vfs.RootSync)
		if err != nil {
			t.Fatal(err)
		}
		d := must(e.fs.Mkdir(ctx, r.ID, r.FolderID, "d", o))
		sub := must(e.fs.Mkdir(ctx, r.ID, d.ID, "sub", o))
		for i, data := range [][]byte{randBytes(seed, 5<<20), randBytes(seed+1, 3<<20), shared} {
			must(e.fs.WriteFile(ctx, r.ID, sub.ID, "f", bytes.NewReader(data), o)) // revisions
			must(e.fs.WriteFile(ctx, r.ID, d.ID, fmt.Sprint("g", i), bytes.NewReader(data), o))
		}
		must(e.fs.WriteFile(ctx, r.ID, r.FolderID, "small", bytes.NewReader([]byte("inline")), o))
		gone := must(e.fs.WriteFile(ctx, r.ID, d.ID, "gone", bytes.NewReader(randBytes(seed+2, 2<<20)), o))
		if err := e.fs.Delete(ctx, r.ID, gone.ID, o); err != nil {
			t.Fatal(err)
		}
		return r
	}
	live, err := e.fs.CreateRoot(ctx, "live", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	keep := must(e.fs.WriteFile(ctx, live.ID, live.FolderID, "shared", bytes.NewReader(shared), o))
	old, late := fill("old", 40), fill("late", 50)
	if err := e.fs.DeleteRoot(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	clk.Add(48 * time.Hour)
	if err := e.fs.DeleteRoot(ctx, late.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	var before int
	e.chunks.Walk(ctx, func(chunk.ID) error { before++; return nil })

	rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Roots != 1 || rep.Purged != 0 {
		t.Errorf("report %s, want 1 root purged", rep)
	}
	gc, err := e.fs.GC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var after int
	e.chunks.Walk(ctx, func(chunk.ID) error { after++; return nil })
	if gc.Deleted == 0 || after != before-gc.Deleted {
		t.Errorf("gc after the purge: %s; %d chunks before, %d after", gc, before, after)
	}
	if _, err := e.fs.Usage(ctx, old.ID); !errors.Is(err, vfs.ErrRootDeleted) {
		t.Errorf("usage of the purged root: %v, want ErrRootDeleted", err)
	}
	if got := contents(t, e.fs, live.ID, keep.ID); !bytes.Equal(got, shared) {
		t.Error("the live root's file lost its shared chunks")
	}
	if rep, err := e.fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck: %s %v", rep, err)
	}
	if n, err := e.fs.IntentParts(ctx); err != nil || n != 0 {
		t.Fatalf("%d intent parts left (%v)", n, err)
	}
	// The late root goes once its own delay has passed, and then nothing
	// but the live root's chunks is left.
	if rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour)); err != nil || rep.Roots != 0 {
		t.Errorf("second purge: %s %v", rep, err)
	}
	if rep, err := e.fs.PurgeDeleted(ctx, clk.Now().Add(time.Hour)); err != nil || rep.Roots != 1 {
		t.Errorf("purge after the late root's delay: %s %v", rep, err)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if rep, err := e.fs.Fsck(ctx, true); err != nil || !rep.OK() || rep.Revisions != 1 {
		t.Fatalf("fsck after both purges: %s %v, want only the live file's revision", rep, err)
	}
	if recount, err := e.fs.Audit(ctx, live.ID); err != nil || recount.FileCount != 1 {
		t.Fatalf("audit of the live root: %+v %v", recount, err)
	}
}

// TestPurgeDeletedManyLegacyRoots: more roots deleted before berth
// recorded when than one transaction can stamp still get stamped, and
// purged once due. Stamped in one transaction, they failed every run with
// kv.ErrTxnTooBig, before any item was purged.
func purgeDeletedManyLegacyRoots(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := berthtest.NewClock(t0)
	// Without fsync: the roots are many, and each purge commits.
	fs, _, _, _ := openHooked(t, vfs.Options{Now: clk.Now})
	const n = 30000
	if err := fs.AddLegacyDeletedRoots(ctx, n); err != nil {
		t.Fatal(err)
	}
	if rep, err := fs.PurgeDeleted(ctx, t0); err != nil || rep.Roots != 0 {
		t.Fatalf("first purge (stamps): %s %v", rep, err)
	}
	clk.Add(48 * time.Hour)
	if rep, err := fs.PurgeDeleted(ctx, t0.Add(24*time.Hour)); err != nil || rep.Roots != n {
		t.Fatalf("purge once due: %s %v, want %d roots", rep, err, n)
	}
}

// TestPurgeDeletedGoesOnPastAFailure: a deleted root that cannot be
// purged (a damaged record) is reported, and the other due roots and items
// are purged all the same, at this run and not only once it is repaired.
func purgeDeletedGoesOnPastAFailure(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := berthtest.NewClock(t0)
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
	t.Cleanup(e.close)
	mkroot := func(name string) vfs.Root {
		t.Helper()
		r, err := e.fs.CreateRoot(ctx, name, vfs.RootSync)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	damaged, gone, live := mkroot("damaged"), mkroot("gone"), mkroot("live")
	for _, r := range []vfs.Root{damaged, gone, live} {
		if _, err := e.fs.WriteFile(ctx, r.ID, r.FolderID, "f.bin", bytes.NewReader(randBytes(7, 100_000)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	trash, err := e.fs.WriteFile(ctx, live.ID, live.FolderID, "trash.bin", bytes.NewReader(randBytes(8, 100_000)), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, live.ID, trash.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []vfs.Root{damaged, gone} {
		if err := e.fs.DeleteRoot(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fs.CorruptLocation(ctx, damaged.FolderID); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Hour)
	rep, err := e.fs.PurgeDeleted(ctx, clk.Now())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("root %d", damaged.ID)) {
		t.Fatalf("PurgeDeleted: %v, want the damaged root's error", err)
	}
	if rep.Roots != 1 || rep.Purged != 1 || rep.Failed != 1 {
		t.Fatalf("report %+v, want the other deleted root and the deleted item purged, one failure", rep)
	}
	if _, err := e.fs.Lookup(ctx, live.ID, "/f.bin"); err != nil {
		t.Fatalf("the live root's file: %v", err)
	}
}

// Everything below a deleted folder is deleted with it: invisible, not
// writable, counted as deleted space, and purged with it.
func deleteFolderSubtree(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	d, _ := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	sub, _ := e.fs.Mkdir(ctx, e.root.ID, d.ID, "sub", vfs.WriteOptions{})
	f := e.write(t, sub.ID, "f.txt", randBytes(1, 100<<10))
	e.write(t, sub.ID, "f.txt", randBytes(2, 50<<10))
	g := e.write(t, d.ID, "g.txt", []byte("small"))
	if err := e.fs.Delete(ctx, e.root.ID, g.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, d.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.fs.Stat(ctx, e.root.ID, f.ID); err != nil || !n.Deleted || n.Path != "/d/sub/f.txt" {
		t.Fatalf("file below a deleted folder: %+v %v", n, err)
	}
	if _, err := e.fs.Open(ctx, e.root.ID, f.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("open below a deleted folder: %v", err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, f.ID, "x", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("rename below a deleted folder: %v", err)
	}
	if _, err := e.fs.Mkdir(ctx, e.root.ID, sub.ID, "x", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("mkdir below a deleted folder: %v", err)
	}
	if res, _ := e.fs.Search(ctx, e.root.ID, "f.txt", 0); len(res) != 0 {
		t.Fatalf("search finds deleted items: %v", res)
	}
	u, _ := e.fs.Usage(ctx, e.root.ID)
	want := vfs.Usage{DelFileCount: 2, DelRevisionCount: 3, DeletedSize: 150<<10 + 5, PhysicalSize: 150<<10 + 5, RootCount: 1}
	if u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
	if err := e.fs.Purge(ctx, e.root.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stat(ctx, e.root.ID, f.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("purged file still there: %v", err)
	}
	if u, _ := e.fs.Usage(ctx, e.root.ID); u != (vfs.Usage{RootCount: 1}) {
		t.Fatalf("usage after purge %+v", u)
	}
	e.fs.GC(ctx)
	if r, err := e.fs.Fsck(ctx, false); err != nil || !r.OK() || r.Chunks != 0 {
		t.Fatalf("fsck %v %v", r, err)
	}
}

func purgeAndGC(t *testing.T) {
	e := newEnv(t)
	f := e.write(t, e.root.FolderID, "f", randBytes(1, 2<<20))
	e.write(t, e.root.FolderID, "f", randBytes(2, 2<<20))
	before, _ := e.chunks.Size(ctx)
	if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, _ := e.fs.Usage(ctx, e.root.ID)
	if u.DelFileCount != 1 || u.DelRevisionCount != 2 || u.DeletedSize != 4<<20 || u.FileCount != 0 {
		t.Fatalf("usage after delete %+v", u)
	}
	if err := e.fs.Purge(ctx, e.root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := e.fs.GC(ctx)
	if err != nil || rep.Deleted == 0 {
		t.Fatalf("gc %v %v", rep, err)
	}
	after, _ := e.chunks.Size(ctx)
	if after >= before || after != 0 {
		t.Fatalf("chunk store %d -> %d bytes", before, after)
	}
	if u, _ := e.fs.Usage(ctx, e.root.ID); u.PhysicalSize != 0 || u.DelFileCount != 0 {
		t.Fatalf("usage after purge %+v", u)
	}
	if r, err := e.fs.Fsck(ctx, true); err != nil || !r.OK() {
		t.Fatalf("fsck %v %v", r, err)
	}
}

// purgeTreeReadsBeforeWrites: purging a deleted tree reads each batch's
// items (revisions, properties) before it removes any: a scan in a
// transaction that holds writes sorts all of them first (Badger), and a
// purge that scanned between its removals took minutes for a tree of
// 100,000 files. Everything goes all the same: revisions, properties,
// chunks and the usage.
func purgeTreeReadsBeforeWrites(t *testing.T) {
	e := newEnv(t)
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		f := e.write(t, d.ID, fmt.Sprintf("f%d", i), []byte(fmt.Sprintf("small %d", i)))
		if i%4 == 0 {
			e.write(t, d.ID, fmt.Sprintf("f%d", i), randBytes(uint64(i), 20<<10))
		}
		if i%5 == 0 {
			if err := e.fs.PatchProps(ctx, e.root.ID, f.ID, map[string][]byte{"{x}a": []byte("1")}, nil, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := e.fs.Delete(ctx, e.root.ID, d.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	before := e.db.TxnStats().ScansSorting
	if err := e.fs.Purge(ctx, e.root.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	// The folder's listing sum is looked for as its record goes.
	if n := e.db.TxnStats().ScansSorting - before; n > 2 {
		t.Errorf("%d of the purge's scans sorted the writes of their transaction, want at most 2 (the folder's)", n)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if u, _ := e.fs.Usage(ctx, e.root.ID); u.PhysicalSize != 0 || u.DelFileCount != 0 || u.DelRevisionCount != 0 || u.FolderCount != 0 {
		t.Fatalf("usage after purge %+v", u)
	}
	if r, err := e.fs.Fsck(ctx, true); err != nil || !r.OK() {
		t.Fatalf("fsck %v %v", r, err)
	}
}

// TestPurgeManyRevisions: a deleted file with more revisions than one
// transaction takes is purged over several, its current revision last,
// with usage and chunk counts exact at the end.
func purgeManyRevisions(t *testing.T) {
	fs, root, db, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 3))
	var err error
	const revisions = 11
	var n vfs.Node
	for i := range revisions {
		// Past InlineMax, so every revision has a chunk of its own.
		body := append(randBytes(uint64(i), 20<<10), fmt.Sprint(i)...)
		if n, err = fs.WriteFile(ctx, root.ID, root.FolderID, "f.txt", bytes.NewReader(body), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fs.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// After the purge's first transaction the file is still there,
	// deleted, with three revisions fewer and its current one kept.
	var left []vfs.Revision
	var leftErr error
	check := func() { left, leftErr = fs.Revisions(ctx, root.ID, n.ID) }
	db.afterUpdate.Store(&check)
	if err := fs.Purge(ctx, root.ID, n.ID); err != nil {
		t.Fatal(err)
	}
	if leftErr != nil || len(left) != revisions-3 {
		t.Fatalf("after the first purge transaction: %d revisions, %v; want %d", len(left), leftErr, revisions-3)
	}
	kept := false
	for _, r := range left {
		kept = kept || r.ID == n.RevisionID
	}
	if !kept {
		t.Errorf("the current revision %d went before the others: %+v", n.RevisionID, left)
	}
	u, err := fs.Usage(ctx, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if u.FileCount != 0 || u.DelFileCount != 0 || u.DelRevisionCount != 0 || u.DeletedSize != 0 || u.RevisionCount != 0 || u.PhysicalSize != 0 {
		t.Fatalf("usage after the purge: %+v", u)
	}
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.Fsck(ctx, false)
	if err != nil || !rep.OK() || rep.Chunks != 0 {
		t.Fatalf("fsck after purge and gc: %+v, %v", rep, err)
	}
}

// TestPurgeRootInterrupted: a root purge cut short after some of its
// transactions leaves a store that is consistent, and the next run
// finishes it.
func purgeRootInterrupted(t *testing.T) {
	for _, stop := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint(stop), func(t *testing.T) {
			fs, live, db, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
			doomed, err := fs.CreateRoot(ctx, "doomed", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			d, err := fs.Mkdir(ctx, doomed.ID, doomed.FolderID, "d", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			shared := body(80, 3<<20)
			keep := mustWrite(t, fs, live.ID, live.FolderID, "shared", shared)
			for i := range 3 {
				mustWrite(t, fs, doomed.ID, d.ID, fmt.Sprint("f", i), body(uint64(81+i), 3<<20))
				mustWrite(t, fs, doomed.ID, d.ID, fmt.Sprint("f", i), shared)
			}
			if err := fs.DeleteRoot(ctx, doomed.ID); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			n := 0
			var arm func()
			arm = func() {
				f := func() {
					if n++; n == stop {
						cancel()
						return
					}
					arm()
				}
				db.afterUpdate.Store(&f)
			}
			arm()
			rep, err := fs.PurgeDeleted(cctx, time.Now().Add(time.Hour))
			db.afterUpdate.Store(nil)
			t.Logf("cut: %s %v", rep, err)
			if _, err := fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if rep, err := fs.Fsck(ctx, false); err != nil || !rep.OK() {
				t.Fatalf("fsck after the cut: %s %v", rep, err)
			}
			rep, err = fs.PurgeDeleted(ctx, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("second: %s", rep)
			if _, err := fs.Usage(ctx, doomed.ID); !errors.Is(err, vfs.ErrRootDeleted) {
				t.Fatal(err)
			}
			checkStore(t, fs, live.ID, []uint64{keep.ID})
			if rep, err := fs.Fsck(ctx, false); err != nil || rep.Revisions != 1 {
				t.Fatalf("after: %s %v, want only the live file", rep, err)
			}
		})
	}
}

// TestGCKeepsNoteOfChunkOrphanedMeanwhile: a chunk the collector found
// referenced may lose its last count (a purge, an intent released) while
// the collector removes other chunks of its batch; the orphan note that
// drop writes must survive the collector clearing its batch's notes, or
// the chunk stays stored, unreferenced and unnoted, until a sweep.
func gcKeepsNoteOfChunkOrphanedMeanwhile(t *testing.T) {
	fs, root, db, chunks := openHooked(t, vfs.Options{})
	write := func(name string, body []byte) vfs.Node {
		t.Helper()
		n, err := fs.WriteFile(ctx, root.ID, root.FolderID, name, bytes.NewReader(body), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	remove := func(id uint64) {
		t.Helper()
		if err := fs.Delete(ctx, root.ID, id, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := fs.Purge(ctx, root.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	x, d := randBytes(50, 100<<10), randBytes(51, 100<<10)
	remove(write("a", x).ID) // x's chunk: noted
	remove(write("d", d).ID) // d's chunk: noted, and really garbage
	var b vfs.Node
	// Once the collector has listed its candidates, x is written again...
	again := func() { b = write("b", x) }
	db.afterView.Store(&again)
	// ...and, while it removes d's chunk, purged again.
	drop := func() { remove(b.ID) }
	chunks.before.Store(&drop)
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if b.ID == 0 || chunks.before.Load() != nil {
		t.Fatal("the hooks did not run")
	}
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.Fsck(ctx, false)
	if err != nil || !rep.OK() || rep.Chunks != 0 {
		t.Fatalf("after gc: %v (%v)", rep, err)
	}
}

// TestUploadKeepsDedupedChunks: an upload finds the chunks of another
// file in the store and skips storing them; then that file is deleted
// and purged and the collector runs, before the upload commits. The
// upload must still succeed with every byte: either right after the
// store said it had a chunk (found), or, for an upload too large for one
// transaction, between the transactions that count its references
// (split).
func uploadKeepsDedupedChunks(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			opts := vfs.Options{}
			var hook func()
			if split {
				opts = vfs.WithRefBatch(vfs.WithBatchHook(opts, func(op vfs.Op) {
					if h := hook; h != nil && op == vfs.OpWrite {
						hook = nil
						h()
					}
				}), 2)
			}
			fs, root, _, chunks := openHooked(t, opts)
			data := body(7, 12<<20)
			a := mustWrite(t, fs, root.ID, root.FolderID, "a", data)
			var collected int
			gone := func() {
				if err := fs.Delete(ctx, root.ID, a.ID, vfs.WriteOptions{}); err != nil {
					t.Error(err)
				}
				if err := fs.Purge(ctx, root.ID, a.ID); err != nil {
					t.Error(err)
				}
				rep, err := fs.GC(ctx)
				if err != nil {
					t.Error(err)
				}
				collected = rep.Deleted
			}
			ran := false
			if split {
				hook = func() { ran = true; gone() }
			} else {
				f := func() { ran = true; gone() }
				chunks.afterHas.Store(&f)
			}
			b, err := fs.WriteFile(ctx, root.ID, root.FolderID, "b", bytes.NewReader(data), vfs.WriteOptions{})
			if !ran {
				t.Fatal("the hook did not run")
			}
			if err != nil {
				t.Fatalf("upload over chunks the collector ran against (it removed %d): %v", collected, err)
			}
			// Found, only the chunks hashed so far are held; the collector
			// may take the rest, which the upload then stores again. Split,
			// the writer has held every chunk.
			if split && collected != 0 {
				t.Errorf("the collector removed %d chunks an upload held", collected)
			}
			if !bytes.Equal(contents(t, fs, root.ID, b.ID), data) {
				t.Fatal("the upload stored other bytes")
			}
			checkStore(t, fs, root.ID, []uint64{b.ID})
		})
	}
}

// TestFailedUploadNoteSurvivesCollector: an upload stores again a chunk
// the collector has just removed, then fails and notes its chunks for the
// collector. The collector, clearing the notes of the chunks it removed,
// must not clear that new note too: the chunk would stay stored,
// unreferenced and unnoted, until a sweep after a crash.
func failedUploadNoteSurvivesCollector(t *testing.T) {
	db := openBadger(t, filepath.Join(t.TempDir(), "meta"), true)
	t.Cleanup(func() { db.Close() })
	store := &afterDelete{Memory: chunk.NewMemory()}
	fs, err := vfs.Open(ctx, db, store, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	root, err := fs.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	data := body(1, 6<<20)
	a := mustWrite(t, fs, root.ID, root.FolderID, "a", data)
	revs, err := fs.Revisions(ctx, root.ID, a.ID)
	if err != nil || len(revs) != 1 || len(revs[0].Chunks) < 2 {
		t.Fatalf("revisions %+v (%v)", revs, err)
	}
	store.target = revs[0].Chunks[0].ID
	if err := fs.Delete(ctx, root.ID, a.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Purge(ctx, root.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	// Once the collector has removed the first chunk, the same bytes are
	// uploaded again and the upload fails. The collector waits for it a
	// while (it cannot wait longer: a correct upload waits for the
	// collector to finish before it writes its notes).
	done := make(chan error, 1)
	ran := false
	upload := func() {
		ran = true
		go func() {
			r := &failsAfter{r: bytes.NewReader(data), stored: func() bool {
				ok, _ := store.Has(ctx, store.target)
				return ok
			}}
			_, err := fs.WriteFile(ctx, root.ID, root.FolderID, "b", r, vfs.WriteOptions{})
			done <- err
		}()
		select {
		case err := <-done:
			done <- err
		case <-time.After(500 * time.Millisecond):
		}
	}
	store.after.Store(&upload)
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the hook did not run")
	}
	if err := <-done; err == nil {
		t.Fatal("the failing upload succeeded")
	}
	checkStore(t, fs, root.ID, nil)
	if size, err := store.Size(ctx); err != nil || size != 0 {
		t.Fatalf("%d bytes left in the chunk store (%v)", size, err)
	}
}

// afterDelete is a memory store, which stores each chunk with its own Put
// as a store without batches does, that runs a hook once after it deletes
// one chosen chunk.
type afterDelete struct {
	*chunk.Memory
	target chunk.ID
	after  atomic.Pointer[func()]
}

func (s *afterDelete) Delete(ctx context.Context, id chunk.ID) error {
	err := s.Memory.Delete(ctx, id)
	if id == s.target {
		if f := s.after.Swap(nil); f != nil {
			(*f)()
		}
	}
	return err
}

// failsAfter yields r, then waits until stored reports true, then fails.
type failsAfter struct {
	r      io.Reader
	stored func() bool
}

func (f *failsAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		for !f.stored() {
			time.Sleep(time.Millisecond)
		}
		return n, errors.New("client went away")
	}
	return n, err
}
