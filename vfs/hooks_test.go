package vfs_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// hookKV runs test hooks at chosen points of the next View or Update, so a
// test can interleave another request exactly there. Each hook runs once.
type hookKV struct {
	*badgerDB
	afterView    atomic.Pointer[func()] // after the next View returns
	beforeCommit atomic.Pointer[func()] // inside the next Update, after its work
	afterUpdate  atomic.Pointer[func()] // after the next Update returns
}

func (h *hookKV) View(ctx context.Context, fn func(kv.Txn) error) error {
	err := h.badgerDB.View(ctx, fn)
	if f := h.afterView.Swap(nil); f != nil {
		(*f)()
	}
	return err
}

func (h *hookKV) Update(ctx context.Context, fn func(kv.Txn) error) error {
	err := h.badgerDB.Update(ctx, func(tx kv.Txn) error {
		if err := fn(tx); err != nil {
			return err
		}
		if f := h.beforeCommit.Swap(nil); f != nil {
			(*f)()
		}
		return nil
	})
	if f := h.afterUpdate.Swap(nil); f != nil {
		(*f)()
	}
	return err
}

// hookChunks runs a function once before the next Delete, and another
// once after the next Has that finds its chunk; got, when set, sees every
// chunk read (from any goroutine).
type hookChunks struct {
	*chunk.Disk
	before   atomic.Pointer[func()]
	afterHas atomic.Pointer[func()]
	got      atomic.Pointer[func(chunk.ID)]
}

func (h *hookChunks) Get(ctx context.Context, id chunk.ID) ([]byte, error) {
	return h.GetInto(ctx, id, nil)
}

func (h *hookChunks) GetInto(ctx context.Context, id chunk.ID, dst []byte) ([]byte, error) {
	if f := h.got.Load(); f != nil {
		(*f)(id)
	}
	return h.Disk.GetInto(ctx, id, dst)
}

func (h *hookChunks) Has(ctx context.Context, id chunk.ID) (bool, error) {
	ok, err := h.Disk.Has(ctx, id)
	if ok {
		if f := h.afterHas.Swap(nil); f != nil {
			(*f)()
		}
	}
	return ok, err
}

func (h *hookChunks) Delete(ctx context.Context, id chunk.ID) error {
	if f := h.before.Swap(nil); f != nil {
		(*f)()
	}
	return h.Disk.Delete(ctx, id)
}

// openHooked opens a file system over hooked stores in a temp directory
// and creates a root; everything is closed when the test ends.
func openHooked(t *testing.T, opts vfs.Options) (*vfs.FS, vfs.Root, *hookKV, *hookChunks) {
	t.Helper()
	dir := t.TempDir()
	bdb := openBadger(t, filepath.Join(dir, "meta"), true)
	t.Cleanup(func() { bdb.Close() })
	disk, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	db, chunks := &hookKV{badgerDB: bdb}, &hookChunks{Disk: disk}
	fs, err := vfs.Open(context.Background(), db, chunks, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fs.Close() })
	root, err := fs.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	return fs, root, db, chunks
}
