package vfs_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// afterKV runs a function once after the next Update has committed.
type afterKV struct {
	*kv.Badger
	after atomic.Pointer[func()]
}

func (a *afterKV) Update(ctx context.Context, fn func(kv.Txn) error) error {
	err := a.Badger.Update(ctx, fn)
	if f := a.after.Swap(nil); f != nil {
		(*f)()
	}
	return err
}

// TestPurgeManyRevisions: a deleted file with more revisions than one
// transaction takes is purged over several, its current revision last,
// with usage and chunk counts exact at the end.
func TestPurgeManyRevisions(t *testing.T) {
	dir := t.TempDir()
	bdb, err := kv.OpenBadger(kv.BadgerOptions{Dir: filepath.Join(dir, "meta"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	disk, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	db := &afterKV{Badger: bdb}
	fs, err := vfs.Open(ctx, db, disk, vfs.WithRefBatch(vfs.Options{}, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	root, err := fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
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
	db.after.Store(&check)
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
