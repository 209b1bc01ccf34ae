package vfs_test

import (
	"bytes"
	"fmt"
	"testing"

	"berth/vfs"
)

// TestUploadKeepsDedupedChunks: an upload finds the chunks of another
// file in the store and skips storing them; then that file is deleted
// and purged and the collector runs, before the upload commits. The
// upload must still succeed with every byte: either right after the
// store said it had a chunk (found), or, for an upload too large for one
// transaction, between the transactions that count its references
// (split).
func TestUploadKeepsDedupedChunks(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			opts := vfs.Options{}
			var hook func()
			if split {
				opts = vfs.WithRefBatch(vfs.WithBatchHook(opts, func(op vfs.Op) {
					if h := hook; h != nil && op == vfs.OpWrite {
						hook = nil
						h()
					}
				}), 2)
			}
			fs, root, _, chunks := openHooked(t, opts)
			data := body(7, 12<<20)
			a := mustWrite(t, fs, root.ID, root.FolderID, "a", data)
			var collected int
			gone := func() {
				if err := fs.Delete(ctx, root.ID, a.ID, vfs.WriteOptions{}); err != nil {
					t.Error(err)
				}
				if err := fs.Purge(ctx, root.ID, a.ID); err != nil {
					t.Error(err)
				}
				rep, err := fs.GC(ctx)
				if err != nil {
					t.Error(err)
				}
				collected = rep.Deleted
			}
			ran := false
			if split {
				hook = func() { ran = true; gone() }
			} else {
				f := func() { ran = true; gone() }
				chunks.afterHas.Store(&f)
			}
			b, err := fs.WriteFile(ctx, root.ID, root.FolderID, "b", bytes.NewReader(data), vfs.WriteOptions{})
			if !ran {
				t.Fatal("the hook did not run")
			}
			if err != nil {
				t.Fatalf("upload over chunks the collector ran against (it removed %d): %v", collected, err)
			}
			// Found, only the chunks hashed so far are held; the collector
			// may take the rest, which the upload then stores again. Split,
			// the writer has held every chunk.
			if split && collected != 0 {
				t.Errorf("the collector removed %d chunks an upload held", collected)
			}
			if !bytes.Equal(contents(t, fs, root.ID, b.ID), data) {
				t.Fatal("the upload stored other bytes")
			}
			checkStore(t, fs, root.ID, []uint64{b.ID})
		})
	}
}
