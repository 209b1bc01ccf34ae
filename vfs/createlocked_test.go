package vfs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth/vfs"
)

// TestCreateLocked: the empty file and its lock are one transaction; a
// conflicting lock above, a taken name or the policy create nothing.
func TestCreateLocked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mine := vfs.WriteOptions{Principal: "person:1"}
	req := vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: true}
	dl, err := e.fs.Lock(ctx, e.root.ID, d.ID, vfs.LockRequest{Holder: "person:1", Deep: true, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	withToken := mine
	withToken.LockTokens = []string{dl.Token}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, d.ID, "a.txt", req, withToken); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("below an exclusive deep lock: %v, want ErrLocked", err)
	}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, d.ID, "a.txt", req, mine); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("into a folder locked without the token: %v, want ErrLocked", err)
	}
	x := mine
	x.ExcludedExtensions = []string{".txt"}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, top, "a.txt", req, x); !errors.Is(err, vfs.ErrExtensionExcluded) {
		t.Fatalf("an excluded extension: %v", err)
	}
	e.write(t, top, "taken.txt", []byte("keep"))
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, top, "taken.txt", req, mine); !errors.Is(err, vfs.ErrNameConflict) {
		t.Fatalf("a taken name: %v", err)
	}
	if kids, _, err := e.fs.List(ctx, e.root.ID, d.ID); err != nil || len(kids) != 0 {
		t.Fatalf("d after refusals: %d items, %v", len(kids), err)
	}
	n, lk, err := e.fs.CreateLocked(ctx, e.root.ID, top, "a.txt", req, mine)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.fs.Lookup(ctx, e.root.ID, "/a.txt")
	if err != nil || got.ID != n.ID || got.Size != 0 || len(got.Locks) != 1 || got.Locks[0].Token != lk.Token || len(e.read(t, n.ID)) != 0 {
		t.Fatalf("created %+v, lock %+v; looked up %+v %v", n, lk, got, err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, top, "a.txt", nil, mine); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("a write without the token: %v, want ErrLocked", err)
	}
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if recount, err := e.fs.Audit(ctx, e.root.ID); err != nil || recount != u {
		t.Fatalf("usage %+v, recount %+v, %v", u, recount, err)
	}
}
