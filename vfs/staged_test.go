package vfs_test

import (
	"errors"
	"testing"

	"berth/vfs"
)

// TestStagedCopyHiddenByID: the items of a copy still being staged are
// not the user's yet, whatever their ids; a node id is a counter anyone
// can guess, so Stat, Revisions, OpenRevision and Unlock must not find
// them any more than a path does.
func TestStagedCopyHiddenByID(t *testing.T) {
	e := newSplitEnv(t)
	d := buildTree(t, e)
	mark, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "mark", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	e.onBatch(t, vfs.OpCopy, func() {
		// The copy's items take the next node ids.
		for id := mark.ID + 1; id <= mark.ID+16; id++ {
			if n, err := e.fs.Stat(ctx, e.root.ID, id); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("stat of staged item %d: %+v, %v", id, n, err)
			}
			if revs, err := e.fs.Revisions(ctx, e.root.ID, id); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("revisions of staged item %d: %d, %v", id, len(revs), err)
			}
			for rev := uint64(1); rev <= 32; rev++ {
				if f, err := e.fs.OpenRevision(ctx, e.root.ID, id, rev); err == nil {
					f.Close()
					t.Errorf("revision %d of staged item %d opens", rev, id)
				}
			}
			if err := e.fs.Unlock(ctx, e.root.ID, id, ""); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("unlock of staged item %d: %v", id, err)
			}
			checked++
		}
	})
	c, err := e.fs.Copy(ctx, e.root.ID, d.ID, e.root.ID, e.root.FolderID, "d2", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 || c.ID <= mark.ID || c.ID > mark.ID+16 {
		t.Fatalf("checked %d ids, the copy is %d after %d", checked, c.ID, mark.ID)
	}
	if _, err := e.fs.Stat(ctx, e.root.ID, c.ID+1); err != nil {
		t.Fatalf("an item of the finished copy: %v", err)
	}
	checkClean(t, e.env, "copy")
}
