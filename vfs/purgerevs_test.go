package vfs_test

import (
	"bytes"
	"fmt"
	"testing"

	"berth/vfs"
)

// TestPurgeManyRevisions: a deleted file with more revisions than one
// transaction takes is purged over several, its current revision last,
// with usage and chunk counts exact at the end.
func TestPurgeManyRevisions(t *testing.T) {
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
