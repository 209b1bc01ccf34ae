package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"berth/vfs"
)

// chain makes n folders, each in the one before, below the folder parent
// and returns the last.
func chain(t *testing.T, e *env, parent uint64, prefix string, n int) vfs.Node {
	t.Helper()
	var d vfs.Node
	for i := range n {
		var err error
		if d, err = e.fs.Mkdir(context.Background(), e.root.ID, parent, fmt.Sprintf("%s%d", prefix, i), vfs.WriteOptions{}); err != nil {
			t.Fatalf("folder %d: %v", i, err)
		}
		parent = d.ID
	}
	return d
}

// Folders nest at most MaxDepth deep, whichever way an item gets there:
// every operation on an item walks the folders above it, so a chain of
// 100,000 folders made each request on its bottom cost 100,000 reads.
func TestMaxDepth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	a := chain(t, e, top, "a", 1)
	b := chain(t, e, top, "b", vfs.MaxDepth)
	if _, err := e.fs.WriteFile(ctx, e.root.ID, b.ID, "deepest.txt", strings.NewReader("x"), vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a file at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	if _, err := e.fs.Mkdir(ctx, e.root.ID, b.ID, "deeper", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a folder at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, b.ID, "locked.txt", vfs.LockRequest{Holder: "x"}, vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a locked new file at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	// b0 is the top of a chain MaxDepth deep; in a, it would be one
	// level deeper.
	b0, err := e.fs.Lookup(ctx, e.root.ID, "/b0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, b0.ID, a.ID, "", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("move of a deep chain below another: %v, want ErrTooDeep", err)
	}
	if _, err := e.fs.Copy(ctx, e.root.ID, b0.ID, e.root.ID, a.ID, "b0", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("copy of a deep chain below another: %v, want ErrTooDeep", err)
	}
	// Nothing moved or was copied, and the limit itself is allowed.
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/b0"); err != nil {
		t.Fatalf("b0 after the refused move: %v", err)
	}
	if kids, _, err := e.fs.List(ctx, e.root.ID, a.ID); err != nil || len(kids) != 0 {
		t.Fatalf("a holds %d items (%v), want none", len(kids), err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, a.ID, "ok.txt", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
		t.Fatalf("a file at depth 2: %v", err)
	}
	// Moving an item up, or a file to the deepest folder but one, is fine.
	if _, err := e.fs.Move(ctx, e.root.ID, b.ID, top, "", vfs.WriteOptions{}); err != nil {
		t.Fatalf("move of the deepest folder to the top: %v", err)
	}
}
