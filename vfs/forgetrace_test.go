package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs"
	"berth/vfs/chunk"
)

// afterDelete is a memory store, which stores each chunk with its own Put
// as a store without batches does, that runs a hook once after it deletes
// one chosen chunk.
type afterDelete struct {
	*chunk.Memory
	target chunk.ID
	after  atomic.Pointer[func()]
}

func (s *afterDelete) Delete(ctx context.Context, id chunk.ID) error {
	err := s.Memory.Delete(ctx, id)
	if id == s.target {
		if f := s.after.Swap(nil); f != nil {
			(*f)()
		}
	}
	return err
}

// failsAfter yields r, then waits until stored reports true, then fails.
type failsAfter struct {
	r      io.Reader
	stored func() bool
}

func (f *failsAfter) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		for !f.stored() {
			time.Sleep(time.Millisecond)
		}
		return n, errors.New("client went away")
	}
	return n, err
}

// TestFailedUploadNoteSurvivesCollector: an upload stores again a chunk
// the collector has just removed, then fails and notes its chunks for the
// collector. The collector, clearing the notes of the chunks it removed,
// must not clear that new note too: the chunk would stay stored,
// unreferenced and unnoted, until a sweep after a crash.
func TestFailedUploadNoteSurvivesCollector(t *testing.T) {
	db := openBadger(t, filepath.Join(t.TempDir(), "meta"), true)
	t.Cleanup(func() { db.Close() })
	store := &afterDelete{Memory: chunk.NewMemory()}
	fs, err := vfs.Open(ctx, db, store, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	root, err := fs.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	data := body(1, 6<<20)
	a := mustWrite(t, fs, root.ID, root.FolderID, "a", data)
	revs, err := fs.Revisions(ctx, root.ID, a.ID)
	if err != nil || len(revs) != 1 || len(revs[0].Chunks) < 2 {
		t.Fatalf("revisions %+v (%v)", revs, err)
	}
	store.target = revs[0].Chunks[0].ID
	if err := fs.Delete(ctx, root.ID, a.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Purge(ctx, root.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	// Once the collector has removed the first chunk, the same bytes are
	// uploaded again and the upload fails. The collector waits for it a
	// while (it cannot wait longer: a correct upload waits for the
	// collector to finish before it writes its notes).
	done := make(chan error, 1)
	ran := false
	upload := func() {
		ran = true
		go func() {
			r := &failsAfter{r: bytes.NewReader(data), stored: func() bool {
				ok, _ := store.Has(ctx, store.target)
				return ok
			}}
			_, err := fs.WriteFile(ctx, root.ID, root.FolderID, "b", r, vfs.WriteOptions{})
			done <- err
		}()
		select {
		case err := <-done:
			done <- err
		case <-time.After(500 * time.Millisecond):
		}
	}
	store.after.Store(&upload)
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("the hook did not run")
	}
	if err := <-done; err == nil {
		t.Fatal("the failing upload succeeded")
	}
	checkStore(t, fs, root.ID, nil)
	if size, err := store.Size(ctx); err != nil || size != 0 {
		t.Fatalf("%d bytes left in the chunk store (%v)", size, err)
	}
}
