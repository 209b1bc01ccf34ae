package vfs_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"berth/vfs"
)

// TestWriteIfRevision: IfRevision and IfAbsent hold at the commit, or
// nothing is stored (ErrChanged).
func TestWriteIfRevision(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	v1 := e.write(t, top, "a.txt", []byte("v1"))
	v2 := e.write(t, top, "a.txt", []byte("v2"))
	for _, c := range []struct {
		what string
		name string
		opts vfs.WriteOptions
	}{
		{"an old revision", "a.txt", vfs.WriteOptions{IfRevision: v1.RevisionID}},
		{"absent, but it exists", "a.txt", vfs.WriteOptions{IfAbsent: true}},
		{"a revision of a missing file", "b.txt", vfs.WriteOptions{IfRevision: v1.RevisionID}},
	} {
		if _, err := e.fs.WriteFile(ctx, e.root.ID, top, c.name, strings.NewReader("x"), c.opts); !errors.Is(err, vfs.ErrChanged) {
			t.Fatalf("%s: %v, want ErrChanged", c.what, err)
		}
	}
	if got := string(e.read(t, v2.ID)); got != "v2" {
		t.Fatalf("a.txt = %q", got)
	}
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/b.txt"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("b.txt: %v", err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, top, "a.txt", strings.NewReader("v3"), vfs.WriteOptions{IfRevision: v2.RevisionID}); err != nil {
		t.Fatalf("the current revision: %v", err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, top, "b.txt", strings.NewReader("b"), vfs.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatalf("absent: %v", err)
	}
}
