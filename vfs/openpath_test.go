package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"berth/vfs"
)

// TestOpenPath: a file opens with its bytes and node, a folder gives its
// node and no file, and a missing, deleted or malformed path is the error
// Lookup gives.
func TestOpenPath(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	small := []byte("small file")
	big := randBytes(7, 3<<20)
	e.write(t, dir.ID, "small.txt", small)
	bigNode := e.write(t, dir.ID, "big.bin", big)

	for name, want := range map[string][]byte{"/docs/small.txt": small, "/docs/big.bin": big} {
		n, f, err := e.fs.OpenPath(ctx, e.root.ID, name)
		if err != nil || f == nil {
			t.Fatalf("OpenPath(%s) = %v, %v", name, f, err)
		}
		got, err := io.ReadAll(f)
		f.Close()
		if err != nil || !bytes.Equal(got, want) || n.Size != int64(len(want)) || n.Path != name || f.Node.ID != n.ID {
			t.Fatalf("OpenPath(%s): %d bytes, %v, node %+v", name, len(got), err, n)
		}
	}
	n, f, err := e.fs.OpenPath(ctx, e.root.ID, "/docs")
	if err != nil || f != nil || !n.Dir || n.ID != dir.ID {
		t.Fatalf("OpenPath(folder) = %+v, %v, %v", n, f, err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, bigNode.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]error{
		"/docs/big.bin":      vfs.ErrNotExist,
		"/docs/none":         vfs.ErrNotExist,
		"/docs/small.txt/x":  vfs.ErrNotExist,
		"/docs/../small.txt": vfs.ErrInvalidName,
		"docs/small.txt":     vfs.ErrInvalidName,
	} {
		if _, f, err := e.fs.OpenPath(ctx, e.root.ID, p); !errors.Is(err, want) || f != nil {
			t.Errorf("OpenPath(%q) = %v, %v; want %v", p, f, err, want)
		}
	}
}
