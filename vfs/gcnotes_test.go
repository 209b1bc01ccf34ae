package vfs_test

import (
	"bytes"
	"testing"

	"berth/vfs"
)

// TestGCKeepsNoteOfChunkOrphanedMeanwhile: a chunk the collector found
// referenced may lose its last count (a purge, an intent released) while
// the collector removes other chunks of its batch; the orphan note that
// drop writes must survive the collector clearing its batch's notes, or
// the chunk stays stored, unreferenced and unnoted, until a sweep.
func TestGCKeepsNoteOfChunkOrphanedMeanwhile(t *testing.T) {
	fs, root, db, chunks := openHooked(t, vfs.Options{})
	write := func(name string, body []byte) vfs.Node {
		t.Helper()
		n, err := fs.WriteFile(ctx, root.ID, root.FolderID, name, bytes.NewReader(body), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	remove := func(id uint64) {
		t.Helper()
		if err := fs.Delete(ctx, root.ID, id, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := fs.Purge(ctx, root.ID, id); err != nil {
			t.Fatal(err)
		}
	}
	x, d := randBytes(50, 100<<10), randBytes(51, 100<<10)
	remove(write("a", x).ID) // x's chunk: noted
	remove(write("d", d).ID) // d's chunk: noted, and really garbage
	var b vfs.Node
	// Once the collector has listed its candidates, x is written again...
	again := func() { b = write("b", x) }
	db.afterView.Store(&again)
	// ...and, while it removes d's chunk, purged again.
	drop := func() { remove(b.ID) }
	chunks.before.Store(&drop)
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if b.ID == 0 || chunks.before.Load() != nil {
		t.Fatal("the hooks did not run")
	}
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.Fsck(ctx, false)
	if err != nil || !rep.OK() || rep.Chunks != 0 {
		t.Fatalf("after gc: %v (%v)", rep, err)
	}
}
