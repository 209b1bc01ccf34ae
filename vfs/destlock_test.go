package vfs_test

import (
	"testing"
	"time"

	"berth/vfs"
)

// TestReplacingKeepsDestinationLocks: RFC 4918 7.6, when a COPY or MOVE
// lands on a locked destination, "the server MUST add the moved resource
// to the destination lock scope". A token-required (WebDAV) lock names a
// path, so the item that replaces a locked one, by Move, Copy (in one
// transaction or staged) or CopyEmpty with Overwrite, takes over its
// lock. A holder's (REST) lock was on the item replaced and goes with it.
func TestReplacingKeepsDestinationLocks(t *testing.T) {
	e := openEnvWith(t, t.TempDir(), vfs.WithRefBatch(vfs.Options{}, 4))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	top := root.FolderID
	mkdir := func(parent uint64, name string) vfs.Node {
		t.Helper()
		n, err := e.fs.Mkdir(ctx, root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	src := e.write(t, top, "src.txt", []byte("s"))
	big := mkdir(top, "big") // over the batch of 4: copied staged
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		e.write(t, big.ID, n, []byte(n))
	}
	empty := mkdir(top, "empty")
	me := vfs.WriteOptions{Principal: "person:1", Overwrite: true}
	for _, c := range []struct {
		name string
		dir  bool
		do   func(o vfs.WriteOptions, dstName string) (vfs.Node, error)
	}{
		{"move", false, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			moved := e.write(t, top, "moving.txt", []byte("m"))
			return e.fs.Move(ctx, root.ID, moved.ID, top, d, o)
		}},
		{"copy", false, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.Copy(ctx, root.ID, src.ID, root.ID, top, d, o)
		}},
		{"staged copy", true, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.Copy(ctx, root.ID, big.ID, root.ID, top, d, o)
		}},
		{"copy empty", true, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.CopyEmpty(ctx, root.ID, empty.ID, root.ID, top, d, o)
		}},
	} {
		dst := "dst-" + c.name
		var old vfs.Node
		if c.dir {
			old = mkdir(top, dst)
		} else {
			old = e.write(t, top, dst, []byte("old"))
		}
		path, err := e.fs.Lock(ctx, root.ID, old.ID, vfs.LockRequest{Holder: "person:1", Deep: c.dir, Duration: time.Minute, TokenRequired: true, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.Lock(ctx, root.ID, old.ID, vfs.LockRequest{Holder: "person:1", Shared: true, Duration: time.Minute}); err != nil {
			t.Fatal(err)
		}
		o := me
		o.LockTokens = []string{path.Token}
		n, err := c.do(o, dst)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n.ID == old.ID {
			t.Fatalf("%s: the destination was not replaced", c.name)
		}
		if len(n.Locks) != 1 || n.Locks[0].Token != path.Token || n.Locks[0].Deep != c.dir {
			t.Errorf("%s: locks of what replaced the destination %+v, want only its path lock %s", c.name, n.Locks, path.Token)
		}
	}
}
