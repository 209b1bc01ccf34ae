package vfs_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs"
)

// TestRootSeesEveryChange: Root keeps what it read until the next commit,
// and answers every change at the next call: a rename, a lock on the top
// folder, the lock's expiry (which commits nothing), the root's deletion.
func TestRootSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: func() time.Time { return time.Unix(0, now.Load()) }})
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	twice := func(step string) vfs.Root {
		t.Helper()
		a, err := e.fs.Root(ctx, root.ID)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		b, err := e.fs.Root(ctx, root.ID)
		if err != nil || b.Name != a.Name || len(b.Locks) != len(a.Locks) {
			t.Fatalf("%s: the second read differs: %+v, %v; first %+v", step, b, err, a)
		}
		return a
	}
	if r := twice("start"); r.Name != "alice" || len(r.Locks) != 0 {
		t.Fatalf("start: %+v", r)
	}
	if _, err := e.fs.RenameRoot(ctx, root.ID, "alice's files"); err != nil {
		t.Fatal(err)
	}
	if r := twice("renamed"); r.Name != "alice's files" {
		t.Fatalf("renamed: %+v", r)
	}
	if _, err := e.fs.Lock(ctx, root.ID, root.FolderID, vfs.LockRequest{Owner: "o", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if r := twice("locked"); len(r.Locks) != 1 {
		t.Fatalf("locked: %+v", r)
	}
	now.Add(int64(time.Minute))
	if r := twice("lock expired"); len(r.Locks) != 0 {
		t.Fatalf("lock expired: %+v", r)
	}
	if err := e.fs.DeleteRoot(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.fs.Root(ctx, root.ID); !errors.Is(err, vfs.ErrRootDeleted) {
			t.Fatalf("deleted: %v, want ErrRootDeleted", err)
		}
	}
}
