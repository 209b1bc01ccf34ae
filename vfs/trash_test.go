package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestPurgeDeleted empties the trash up to a date: items deleted before it
// go for good with everything below them, their space is no longer counted
// and their chunks become garbage; items deleted after it, and live ones,
// stay; a root deleted before it goes whole.
func TestPurgeDeleted(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newTestClock(t0)
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
func TestPurgeDeletedRoots(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newTestClock(t0)
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
func TestPurgeDeletedManyLegacyRoots(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newTestClock(t0)
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
func TestPurgeDeletedGoesOnPastAFailure(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := newTestClock(t0)
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
