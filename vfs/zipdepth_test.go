package vfs_test

import (
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestWriteZipOpensAheadOnlyWithinAFolder: the file that follows a
// subfolder is not opened ahead while the subfolder's tree is written.
// Each level of a deep tree then held an open file (its head and the
// chunks its reader fetches ahead, megabytes) until the archive climbed
// back, so the memory of one zip grew with the depth of the tree
// (about 20 MiB a level measured, MaxDepth levels allowed).
func TestWriteZipOpensAheadOnlyWithinAFolder(t *testing.T) {
	fs, root, _, chunks := openHooked(t, vfs.Options{})
	ctx := context.Background()
	const depth = 8
	write := func(parent uint64, name string, seed uint64) chunk.ID {
		t.Helper()
		// Past InlineMax, so that the contents are a chunk of their own.
		n, err := fs.WriteFile(ctx, root.ID, parent, name, bytes.NewReader(randBytes(seed, vfs.InlineMax+1)), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		revs, err := fs.Revisions(ctx, root.ID, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		return revs[0].Chunks[0].ID
	}
	// Each level holds a.txt, then the folder m with the next level, then
	// z.bin (name order); the deepest level only a.txt.
	after := map[chunk.ID]bool{}
	var deepest chunk.ID
	parent := root.FolderID
	for i := range depth {
		deepest = write(parent, "a.txt", uint64(i))
		if i == depth-1 {
			break
		}
		after[write(parent, "z.bin", uint64(100+i))] = true
		m, err := fs.Mkdir(ctx, root.ID, parent, "m", vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent = m.ID
	}
	var fetched atomic.Int32
	open := atomic.Int32{}
	open.Store(-1)
	got := func(id chunk.ID) {
		if after[id] {
			fetched.Add(1)
		}
		if id == deepest {
			open.Store(fetched.Load())
		}
	}
	chunks.got.Store(&got)
	if err := fs.WriteZip(ctx, io.Discard, root.ID, root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("when the deepest file was read, %d of the %d files after a subfolder had been opened; want none", n, depth-1)
	}
	if n := fetched.Load(); n != depth-1 {
		t.Errorf("%d files after a subfolder read, want %d", n, depth-1)
	}
}
