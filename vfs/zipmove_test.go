package vfs_test

import (
	"archive/zip"
	"bytes"
	"context"
	"sort"
	"testing"

	"berth/vfs"
)

// hookWriter runs hook once, before the first write.
type hookWriter struct {
	buf  bytes.Buffer
	hook func()
}

func (h *hookWriter) Write(p []byte) (int, error) {
	if h.hook != nil {
		h.hook()
		h.hook = nil
	}
	return h.buf.Write(p)
}

// TestWriteZipLeavesOutItemsMovedAway moves a file and a folder from one
// folder of the archive to another while the archive is written, after
// the first folder was listed: each must appear once, not at both places.
// A folder deleted meanwhile leaves no entry.
func TestWriteZipLeavesOutItemsMovedAway(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mkdir := func(parent uint64, name string) vfs.Node {
		n, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := mkdir(e.root.FolderID, "a")
	b := mkdir(e.root.FolderID, "b")
	e.write(t, a.ID, "1.bin", randBytes(1, 1<<20))
	e.write(t, a.ID, "2.txt", []byte("two"))
	three := e.write(t, a.ID, "3.txt", []byte("three"))
	empty := e.write(t, a.ID, "4.empty", nil)
	gone := mkdir(a.ID, "gone")
	sub := mkdir(a.ID, "sub")
	e.write(t, sub.ID, "in.txt", []byte("inside"))

	w := &hookWriter{hook: func() {
		// "a" is listed and its first entries under way.
		for _, id := range []uint64{three.ID, empty.ID, sub.ID} {
			if _, err := e.fs.Move(ctx, e.root.ID, id, b.ID, "", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}}
	if err := e.fs.WriteZip(ctx, w, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(w.buf.Bytes()), int64(w.buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
	}
	sort.Strings(names)
	want := []string{"a/", "a/1.bin", "a/2.txt", "b/", "b/3.txt", "b/4.empty", "b/sub/", "b/sub/in.txt"}
	if len(names) != len(want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %q, want %q", names, want)
		}
	}
}
