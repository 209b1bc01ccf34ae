package vfs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth/vfs"
)

// TestMoveFolderWithLockedItem: a move or rename of a folder moves what is
// below it, so a lock on any of it refuses the move, as it refuses a
// delete; the lock's token or its (REST) holder lets it through.
func TestMoveFolderWithLockedItem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.fs.Mkdir(ctx, e.root.ID, d.ID, "sub", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := e.write(t, sub.ID, "x.txt", []byte("x"))
	other, err := e.fs.Mkdir(ctx, e.root.ID, top, "other", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := e.fs.Lock(ctx, e.root.ID, x.ID, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	me := vfs.WriteOptions{Principal: "person:1"}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, other.ID, "", me); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Move of a folder holding a locked file: %v, want ErrLocked", err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, d.ID, "renamed", me); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Rename of a folder holding a locked file: %v, want ErrLocked", err)
	}
	if n, err := e.fs.Lookup(ctx, e.root.ID, "/d/sub/x.txt"); err != nil || n.ID != x.ID {
		t.Fatalf("x.txt after refused moves: %+v %v", n, err)
	}
	withToken := me
	withToken.LockTokens = []string{lk.Token}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, other.ID, "", withToken); err != nil {
		t.Fatalf("Move with the lock's token: %v", err)
	}
	if n, err := e.fs.Lookup(ctx, e.root.ID, "/other/d/sub/x.txt"); err != nil || n.ID != x.ID || !n.Locked() {
		t.Fatalf("x.txt after the move: %+v %v", n, err)
	}
}
