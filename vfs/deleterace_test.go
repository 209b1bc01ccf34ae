package vfs_test

import (
	"bytes"
	"testing"

	"berth/vfs"
)

// TestDeleteRacesCreateInside: a file created in a folder while the
// folder's delete is counting what it moves to deleted space must be
// counted too. The delete's scan of the children does not see a key added
// after its snapshot, so without a key the creation writes and the count
// reads, both commit and usage keeps the new file as live under a deleted
// folder (and a purge then drives the deleted counts below zero).
func TestDeleteRacesCreateInside(t *testing.T) {
	fs, root, db, _ := openHooked(t, vfs.Options{})
	for _, create := range []struct {
		name string
		fn   func(parent uint64) error
	}{
		{"file", func(parent uint64) error {
			_, err := fs.WriteFile(ctx, root.ID, parent, "late.txt", bytes.NewReader([]byte("late")), vfs.WriteOptions{})
			return err
		}},
		{"folder", func(parent uint64) error {
			_, err := fs.Mkdir(ctx, root.ID, parent, "late", vfs.WriteOptions{})
			return err
		}},
	} {
		t.Run(create.name, func(t *testing.T) {
			d, err := fs.Mkdir(ctx, root.ID, root.FolderID, "d-"+create.name, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := fs.Mkdir(ctx, root.ID, d.ID, "sub", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fs.WriteFile(ctx, root.ID, sub.ID, "early.txt", bytes.NewReader([]byte("early")), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			before, err := fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			late := func() {
				ran = true
				if err := create.fn(sub.ID); err != nil {
					t.Errorf("create inside: %v", err)
				}
			}
			db.beforeCommit.Store(&late)
			if err := fs.Delete(ctx, root.ID, d.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the hook did not run")
			}
			if err := fs.Purge(ctx, root.ID, d.ID); err != nil {
				t.Fatal(err)
			}
			u, err := fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The folder and the early file were counted before; after the
			// delete and purge of the whole tree nothing of it may remain.
			want := before
			want.FolderCount -= 2
			want.FileCount--
			want.HeadSize -= int64(len("early"))
			want.PhysicalSize = want.HeadSize + want.RevisionSize + want.DeletedSize
			if u != want {
				t.Fatalf("usage after deleting and purging the folder:\n got %+v\nwant %+v", u, want)
			}
		})
	}
}
