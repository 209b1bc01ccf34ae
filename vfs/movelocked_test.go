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
	// The lock named x.txt's old path (WebDAV's, token required): it
	// stays behind (RFC 4918 7.6).
	if n, err := e.fs.Lookup(ctx, e.root.ID, "/other/d/sub/x.txt"); err != nil || n.ID != x.ID || n.Locked() {
		t.Fatalf("x.txt after the move: %+v %v", n, err)
	}
}

// TestMoveEndsPathLocks: a move or rename ends the token-required
// (WebDAV) locks of what it moves, which name a path, and keeps a
// holder's (REST) locks, which are on the item.
func TestMoveEndsPathLocks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := e.write(t, d.ID, "x.txt", []byte("x"))
	y := e.write(t, d.ID, "y.txt", []byte("y"))
	f := e.write(t, top, "f.txt", []byte("f"))
	me := vfs.WriteOptions{Principal: "person:1"}
	lock := func(id uint64, tokenRequired bool) vfs.Lock {
		t.Helper()
		lk, err := e.fs.Lock(ctx, e.root.ID, id, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: tokenRequired})
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	dl, xl := lock(d.ID, true), lock(x.ID, true)
	lock(y.ID, false)
	fl := lock(f.ID, true)
	withTokens := me
	withTokens.LockTokens = []string{dl.Token, xl.Token, fl.Token}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, top, "d2", withTokens); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, f.ID, "g.txt", withTokens); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		locked bool
	}{{"/d2", false}, {"/d2/x.txt", false}, {"/d2/y.txt", true}, {"/g.txt", false}} {
		n, err := e.fs.Lookup(ctx, e.root.ID, c.path)
		if err != nil || n.Locked() != c.locked {
			t.Errorf("%s after the move: locks %+v, %v; want locked %v", c.path, n.Locks, err, c.locked)
		}
	}
}
