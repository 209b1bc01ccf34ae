package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs"
	"berth/vfs/chunk"
)

// fullEnv is an env whose chunk store keeps a reserve of 1 MiB on a disk
// of budget bytes: the free space it reports is the budget less what the
// chunk files (temporary ones included) take.
func fullEnv(t *testing.T, budget *atomic.Int64) *env {
	t.Helper()
	dir := t.TempDir()
	db := openBadger(t, filepath.Join(dir, "meta"), false)
	chunksDir := filepath.Join(dir, "chunks")
	used := func() (int64, error) {
		var n int64
		err := filepath.WalkDir(chunksDir, func(_ string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			info, err := d.Info()
			if err == nil {
				n += info.Size()
			}
			return err
		})
		return n, err
	}
	chunks, err := chunk.OpenDisk(chunksDir, chunk.DiskOptions{
		Reserve: 1 << 20,
		Free: func() (int64, error) {
			u, err := used()
			return budget.Load() - u, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := vfs.Open(context.Background(), db, chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, db: db, chunks: chunks, fs: files}
	t.Cleanup(e.close)
	e.root, err = files.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkClean fails unless fsck finds nothing wrong once garbage is
// collected: a refused write leaked no chunk and lost no reference.
func (e *env) checkClean(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := e.fs.Fsck(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("fsck: %s", rep)
	}
}

// TestWriteStopsAtReserve fills a disk midway through an upload: the
// upload fails with ErrNoSpace, stores nothing, and leaves what was there
// intact and the usage as it was.
func TestWriteStopsAtReserve(t *testing.T) {
	ctx := context.Background()
	var budget atomic.Int64
	budget.Store(1<<20 + 6<<20) // the reserve and 6 MiB
	e := fullEnv(t, &budget)

	kept := randBytes(1, 3<<20)
	old := e.write(t, e.root.FolderID, "kept.bin", kept)
	before, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}

	// 3 MiB of room left, 8 MiB to store: refused after a few chunks.
	_, err = e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "big.bin", bytes.NewReader(randBytes(2, 8<<20)), vfs.WriteOptions{})
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("write past the reserve: %v, want ErrNoSpace", err)
	}
	// A new revision of the kept file is refused the same way and leaves
	// the current one.
	_, err = e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "kept.bin", bytes.NewReader(randBytes(3, 8<<20)), vfs.WriteOptions{})
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("revision past the reserve: %v, want ErrNoSpace", err)
	}
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/big.bin"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the refused file is visible: %v", err)
	}
	if got := e.read(t, old.ID); !bytes.Equal(got, kept) {
		t.Fatal("the stored file changed")
	}
	after, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("usage %+v after the refusals, %+v before", after, before)
	}
	e.checkClean(t)

	// With room again, the same upload goes through.
	budget.Add(16 << 20)
	want := randBytes(2, 8<<20)
	n := e.write(t, e.root.FolderID, "big.bin", want)
	if got := e.read(t, n.ID); !bytes.Equal(got, want) {
		t.Fatal("the upload after freeing space reads back different")
	}
	e.checkClean(t)
}

// TestReserveRefusesGrowthNotCleanup: below the reserve, whatever adds to
// the stores is refused, even a small file that would live in the metadata
// store alone; whatever frees space or changes records in place still
// works, so a full server can be cleaned up, and purging and collecting
// garbage brings writes back.
func TestReserveRefusesGrowthNotCleanup(t *testing.T) {
	ctx := context.Background()
	var budget atomic.Int64
	budget.Store(1<<20 + 4<<20)
	e := fullEnv(t, &budget)
	dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "dir", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	big := e.write(t, e.root.FolderID, "big.bin", randBytes(4, 3<<20))
	small := e.write(t, dir.ID, "small.txt", []byte("hello"))
	// Now under 1 MiB above the reserve: the disk is "full".
	budget.Add(-1 << 20)

	refused := map[string]error{}
	_, refused["mkdir"] = e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "new", vfs.WriteOptions{})
	_, refused["small write"] = e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "tiny.txt", bytes.NewReader([]byte("hi")), vfs.WriteOptions{})
	_, refused["copy"] = e.fs.Copy(ctx, e.root.ID, dir.ID, e.root.ID, e.root.FolderID, "dir copy", vfs.WriteOptions{})
	refused["set property"] = e.fs.PatchProps(ctx, e.root.ID, small.ID, map[string][]byte{"p": []byte("v")}, nil, vfs.WriteOptions{})
	_, refused["create root"] = e.fs.CreateRoot(ctx, "bob", vfs.RootSync)
	for op, err := range refused {
		if !errors.Is(err, vfs.ErrNoSpace) {
			t.Errorf("%s on a full disk: %v, want ErrNoSpace", op, err)
		}
	}

	if err := e.fs.PatchProps(ctx, e.root.ID, small.ID, nil, []string{"p"}, vfs.WriteOptions{}); err != nil {
		t.Errorf("removing a property on a full disk: %v", err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, small.ID, "renamed.txt", vfs.WriteOptions{}); err != nil {
		t.Errorf("rename on a full disk: %v", err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, small.ID, e.root.FolderID, "moved.txt", vfs.WriteOptions{}); err != nil {
		t.Errorf("move on a full disk: %v", err)
	}
	l, err := e.fs.Lock(ctx, e.root.ID, small.ID, vfs.LockRequest{Holder: "t"})
	if err != nil {
		t.Errorf("lock on a full disk: %v", err)
	} else if err := e.fs.Unlock(ctx, e.root.ID, small.ID, l.Token); err != nil {
		t.Errorf("unlock on a full disk: %v", err)
	}
	if got := e.read(t, small.ID); string(got) != "hello" {
		t.Errorf("small file reads %q", got)
	}
	if err := e.fs.Delete(ctx, e.root.ID, big.ID, vfs.WriteOptions{}); err != nil {
		t.Fatalf("delete on a full disk: %v", err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, big.ID); err != nil {
		t.Fatalf("purge on a full disk: %v", err)
	}
	e.checkClean(t) // collects the purged file's chunks: 3 MiB free again

	if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "new", vfs.WriteOptions{}); err != nil {
		t.Fatalf("mkdir after cleaning up: %v", err)
	}
	e.write(t, e.root.FolderID, "tiny.txt", []byte("hi"))
	e.checkClean(t)
}

// TestLargeCopyStopsAtReserve: a copy too large for one transaction adds
// to the metadata store batch after batch (small files' contents too,
// kept in their revision records), so each batch checks the space, not
// only the first: a disk that reaches the reserve midway refuses the copy,
// and the staged part goes, leaving no copy, no intent and the usage as
// it was.
func TestLargeCopyStopsAtReserve(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openBadger(t, filepath.Join(dir, "meta"), false)
	var free atomic.Int64
	free.Store(1 << 40)
	chunks, err := chunk.OpenDisk(filepath.Join(dir, "chunks"), chunk.DiskOptions{
		Reserve: 1 << 30,
		Free:    func() (int64, error) { return free.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	var batches atomic.Int64
	opts := vfs.WithRefBatch(vfs.Options{}, 4)
	opts = vfs.WithBatchHook(opts, func(op vfs.Op) {
		if op == vfs.OpCopy && batches.Add(1) == 2 {
			free.Store(1<<30 - 1) // the disk fills during the copy
		}
	})
	files, err := vfs.Open(ctx, db, chunks, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, db: db, chunks: chunks, fs: files}
	t.Cleanup(e.close)
	if e.root, err = files.CreateRoot(ctx, "alice", vfs.RootSync); err != nil {
		t.Fatal(err)
	}
	src, err := files.Mkdir(ctx, e.root.ID, e.root.FolderID, "src", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		e.write(t, src.ID, fmt.Sprintf("small %02d.txt", i), randBytes(uint64(i), 10_000))
	}
	before, err := files.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}

	_, err = files.Copy(ctx, e.root.ID, src.ID, e.root.ID, e.root.FolderID, "copy", vfs.WriteOptions{})
	if !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("a large copy that meets the reserve midway: %v, want ErrNoSpace", err)
	}
	if n := batches.Load(); n > 2 {
		t.Errorf("%d batches copied, the last %d below the reserve", n, n-2)
	}
	if _, err := files.Lookup(ctx, e.root.ID, "/copy"); !errors.Is(err, vfs.ErrNotExist) {
		t.Errorf("the refused copy is visible: %v", err)
	}
	if n, err := files.IntentParts(ctx); err != nil || n != 0 {
		t.Errorf("intent parts after the refused copy: %d %v", n, err)
	}
	after, err := files.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("usage %+v after the refused copy, %+v before", after, before)
	}
	if recount, err := files.Audit(ctx, e.root.ID); err != nil || recount != after {
		t.Errorf("audit: recounted %+v, usage says %+v (%v)", recount, after, err)
	}
	e.checkClean(t)
}

// TestNoSpaceCounted: an upload refused on a full disk is its own result
// in the operations counter, not the catch-all "error" of internal
// failures.
func TestNoSpaceCounted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openBadger(t, filepath.Join(dir, "meta"), false)
	defer db.Close()
	var free atomic.Int64
	free.Store(1 << 40)
	chunks, err := chunk.OpenDisk(filepath.Join(dir, "chunks"), chunk.DiskOptions{
		Reserve: 1 << 30,
		Free:    func() (int64, error) { return free.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	files, err := vfs.Open(ctx, db, chunks, vfs.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()
	root, err := files.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	free.Store(1<<30 - 1)
	if _, err := files.WriteFile(ctx, root.ID, root.FolderID, "f", bytes.NewReader([]byte("x")), vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNoSpace) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if n := counter(t, reg, "write", "no_space"); n != 1 {
		t.Errorf("write no_space counted %v times", n)
	}
}
