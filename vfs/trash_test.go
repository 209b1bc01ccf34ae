package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs"
)

// TestPurgeDeleted empties the trash up to a date: items deleted before it
// go for good with everything below them, their space is no longer counted
// and their chunks become garbage; items deleted after it, and live ones,
// stay; a deleted root is left alone.
func TestPurgeDeleted(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var now atomic.Int64
	now.Store(t0.UnixNano())
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
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
	// A deleted root with a deleted file: skipped, not an error.
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

	now.Add(int64(48 * time.Hour))
	del(recent.ID)

	rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Purged != 3 || rep.Skipped != 1 {
		t.Errorf("report %s, want 3 purged (old folder, old.bin, old in kept.bin) and 1 skipped", rep)
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
	if rep, err := e.fs.PurgeDeleted(ctx, t0.Add(24*time.Hour)); err != nil || rep.Purged != 0 {
		t.Errorf("second purge: %s %v", rep, err)
	}
}
