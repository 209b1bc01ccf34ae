package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"berth/vfs"
)

// TestWalksHoldAPage: the walks over a folder's children that a delete
// (its usage count), a move (its depth and lock checks), a lock of depth
// infinity and a copy's size check make read the children a page at a
// time, so that a folder of a million files is never held whole: they
// read each folder's children at once, and a delete of such a folder
// held a million records. (A large copy still plans every item.)
func TestWalksHoldAPage(t *testing.T) {
	ctx := context.Background()
	const page, files = 8, 60
	defer vfs.SetRecordPage(page)()
	e := newEnv(t)
	mk := func(parent uint64, name string) vfs.Node {
		d, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		name string
		op   func(dir vfs.Node) error
	}{
		{"delete", func(dir vfs.Node) error { return e.fs.Delete(ctx, e.root.ID, dir.ID, vfs.WriteOptions{}) }},
		{"move into another folder", func(dir vfs.Node) error {
			to := mk(e.root.FolderID, "to-"+dir.Name)
			_, err := e.fs.Move(ctx, e.root.ID, dir.ID, to.ID, dir.Name, vfs.WriteOptions{})
			return err
		}},
		{"deep lock", func(dir vfs.Node) error {
			_, err := e.fs.Lock(ctx, e.root.ID, dir.ID, vfs.LockRequest{Owner: "t", Deep: true, TokenRequired: true})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := mk(e.root.FolderID, c.name)
			sub := mk(dir.ID, "sub")
			for i := range files {
				e.write(t, dir.ID, fmt.Sprintf("f%03d", i), nil)
				e.write(t, sub.ID, fmt.Sprintf("g%03d", i), nil)
			}
			vfs.RecordsPeak()
			if err := c.op(dir); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				t.Fatal(err)
			}
			// A page of the folder's and one of its subfolder's.
			if peak := vfs.RecordsPeak(); peak > 2*page {
				t.Errorf("%d records held at once, want at most %d", peak, 2*page)
			}
		})
	}
}
