package chunk_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth/vfs/chunk"
)

// TestSpace holds the cases of the disk store's free-space rules: the
// reserve refuses new chunks, and the kernel's ENOSPC becomes ErrNoSpace
// wherever it strikes. A space bug found later becomes a row here.
func TestSpace(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ReserveRefusesNewChunks", reserveRefusesNewChunks},
		{"ReserveUsesTheFileSystem", reserveUsesTheFileSystem},
		{"ReadingKeptOnlyFarFromTheReserve", readingKeptOnlyFarFromTheReserve},
		{"KeptReadingCountsWhatItGranted", keptReadingCountsWhatItGranted},
		{"KernelNoSpaceIsErrNoSpace", kernelNoSpaceIsErrNoSpace},
		{"KernelNoSpaceOnMkdir", kernelNoSpaceOnMkdir},
		{"ReserveKeepsInodes", reserveKeepsInodes},
		{"ReserveHoldsOnAlso", reserveHoldsOnAlso},
		{"BuildsOn32BitLinux", buildsOn32BitLinux},
	} {
		t.Run(tc.name, tc.run)
	}
}

// fillingDisk is a Disk whose free space the test sets.
func fillingDisk(t *testing.T, reserve int64) (*chunk.Disk, *atomic.Int64) {
	t.Helper()
	var free atomic.Int64
	d, err := chunk.OpenDisk(filepath.Join(t.TempDir(), "chunks"), chunk.DiskOptions{
		Reserve: reserve,
		Free:    func() (int64, error) { return free.Load(), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, &free
}

func reserveRefusesNewChunks(t *testing.T) {
	ctx := context.Background()
	d, free := fillingDisk(t, 1000)
	blob := []byte(strings.Repeat("x", 500))
	id := chunk.Sum(blob)

	free.Store(1500) // exactly the reserve left after the blob
	if err := d.Put(ctx, id, blob); err != nil {
		t.Fatalf("put with room: %v", err)
	}

	free.Store(1499)
	other := []byte(strings.Repeat("y", 500))
	if err := d.Put(ctx, chunk.Sum(other), other); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("put into the reserve: %v, want ErrNoSpace", err)
	}
	b := d.NewBatch()
	if err := b.Add(ctx, chunk.Sum(other), other); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("batch add into the reserve: %v, want ErrNoSpace", err)
	}
	b.Abort()
	if ok, _ := d.Has(ctx, chunk.Sum(other)); ok {
		t.Fatal("a refused chunk is stored")
	}
	if f := files(t, d); len(f) != 1 {
		t.Fatalf("files after the refusals: %v, want the one chunk", f)
	}
	// A chunk the store has needs no room: deduplication still works.
	if err := d.Put(ctx, id, blob); err != nil {
		t.Fatalf("put of a stored chunk on a full disk: %v", err)
	}
	if err := d.CheckSpace(0); err != nil {
		t.Fatalf("CheckSpace(0) with 499 bytes above the reserve: %v", err)
	}
	free.Store(999)
	if err := d.CheckSpace(0); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("CheckSpace(0) below the reserve: %v", err)
	}
}

func reserveUsesTheFileSystem(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "chunks")
	d, err := chunk.OpenDisk(dir, chunk.DiskOptions{Reserve: 1 << 62})
	if err != nil {
		t.Fatal(err)
	}
	free, err := d.Free()
	if err != nil || free <= 0 {
		t.Fatalf("Free: %d, %v", free, err)
	}
	blob := []byte("hello")
	if err := d.Put(ctx, chunk.Sum(blob), blob); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("put with a reserve larger than the disk: %v", err)
	}
	// No reserve: the same disk takes it.
	open, err := chunk.OpenDisk(dir, chunk.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := open.CheckSpace(1 << 62); err != nil {
		t.Fatalf("CheckSpace without a reserve: %v", err)
	}
	if err := open.Put(ctx, chunk.Sum(blob), blob); err != nil {
		t.Fatal(err)
	}
}

// readingKeptOnlyFarFromTheReserve: a statfs reading more than
// FreeMargin above the reserve answers for a while; nearer the reserve,
// or once stale, each check reads the file system again, so a disk filled
// to the reserve is refused at the next check.
// keptReadingCountsWhatItGranted: the chunks let through against a kept
// reading count against it, so a fast writer cannot write into the
// reserve before the reading is taken again, however many chunks fit in
// its 50 ms (here an hour, standing for any rate).
func keptReadingCountsWhatItGranted(t *testing.T) {
	const reserve = 1 << 30
	d, err := chunk.OpenDisk(filepath.Join(t.TempDir(), "chunks"), chunk.DiskOptions{Reserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	var free atomic.Int64
	free.Store(reserve + chunk.FreeMargin + 1<<20)
	chunk.SetStatfs(d, func() (int64, error) { return free.Load(), nil }, time.Hour)
	for range 1100 {
		if err := d.CheckSpace(1 << 20); err != nil {
			break // refused in time
		}
		free.Add(-(1 << 20)) // the chunk is written
	}
	if free.Load() < reserve {
		t.Fatalf("granted into the reserve: %d bytes free, reserve %d", free.Load(), int64(reserve))
	}
}

func readingKeptOnlyFarFromTheReserve(t *testing.T) {
	const reserve = 1000
	d, err := chunk.OpenDisk(filepath.Join(t.TempDir(), "chunks"), chunk.DiskOptions{Reserve: reserve})
	if err != nil {
		t.Fatal(err)
	}
	var free, reads atomic.Int64
	statfs := func() (int64, error) { reads.Add(1); return free.Load(), nil }
	check := func(fresh time.Duration, need int64, wantReads int64, refused bool) {
		t.Helper()
		chunk.SetStatfs(d, statfs, fresh)
		err := d.CheckSpace(need)
		if errors.Is(err, chunk.ErrNoSpace) != refused || (err != nil && !refused) {
			t.Fatalf("free %d, need %d: %v, want refused %v", free.Load(), need, err, refused)
		}
		if got := reads.Load(); got != wantReads {
			t.Fatalf("free %d, need %d: %d statfs calls, want %d", free.Load(), need, got, wantReads)
		}
	}
	free.Store(reserve + chunk.FreeMargin + 100)
	check(time.Hour, 0, 1, false)
	check(time.Hour, 100, 1, false)            // kept: the margin is left after the chunk
	check(time.Hour, 101, 2, false)            // within the margin after it: read again
	check(0, 0, 3, false)                      // stale: read again
	free.Store(reserve + chunk.FreeMargin - 1) // unseen while the reading is fresh
	check(time.Hour, 0, 3, false)
	check(0, 0, 4, false)
	check(time.Hour, 0, 5, false) // near the reserve: every check reads
	free.Store(reserve - 1)
	check(time.Hour, 0, 6, true) // filled to the reserve: refused at once
	free.Store(reserve + chunk.FreeMargin)
	check(time.Hour, 0, 7, false) // freed: taken at once
	check(time.Hour, 0, 7, false)
}

func kernelNoSpaceIsErrNoSpace(t *testing.T) {
	for _, e := range []error{unix.ENOSPC, unix.EDQUOT} {
		err := chunk.NoSpace(&os.PathError{Op: "write", Path: "x", Err: e})
		if !errors.Is(err, chunk.ErrNoSpace) || !errors.Is(err, e) {
			t.Errorf("%v: got %v, want both ErrNoSpace and the errno", e, err)
		}
	}
	if err := chunk.NoSpace(unix.EIO); errors.Is(err, chunk.ErrNoSpace) {
		t.Errorf("EIO became ErrNoSpace")
	}
}

// TestKernelNoSpaceOnMkdir: a fan-out directory that went missing is made
// again by Put; on a file system out of inodes that mkdir fails with
// ENOSPC, which must be ErrNoSpace like the kernel's other "no space"
// answers, not an internal error. Needs root to mount a small tmpfs.
func kernelNoSpaceOnMkdir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,nr_inodes=400", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small file system to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	d, err := chunk.OpenDisk(filepath.Join(dir, "chunks"), chunk.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "chunks", "00")); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ { // use up the inodes
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o600); err != nil {
			break
		}
	}
	for i := 0; ; i++ {
		blob := []byte(fmt.Sprint("blob ", i))
		if id := chunk.Sum(blob); id.String()[:2] == "00" {
			if err := d.Put(context.Background(), id, blob); !errors.Is(err, chunk.ErrNoSpace) {
				t.Fatalf("put needing a directory on a full disk: %v, want ErrNoSpace", err)
			}
			return
		}
	}
}

// smallTmpfs mounts a tmpfs with mount(8)'s -o opts on a new directory,
// or skips the test where that is not allowed (not root).
func smallTmpfs(t *testing.T, opts string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small file system to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// reserveKeepsInodes: a file system with bytes to spare but down to its
// last inodes refuses new data as one down to its last bytes, before
// the metadata store beside the chunks cannot create its next file.
func reserveKeepsInodes(t *testing.T) {
	dir := smallTmpfs(t, "size=64m,nr_inodes=400")
	d, err := chunk.OpenDisk(filepath.Join(dir, "chunks"), chunk.DiskOptions{Reserve: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CheckSpace(0); err != nil {
		t.Fatalf("CheckSpace with 140 inodes free: %v", err)
	}
	for i := range 100 { // 40 inodes left: fewer than the 64 kept
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	blob := []byte("blob")
	if err := d.Put(context.Background(), chunk.Sum(blob), blob); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("put with %d inodes kept and fewer free: %v, want ErrNoSpace", chunk.InodeReserve(1<<20), err)
	}
	if free, err := d.Free(); err != nil || free < 32<<20 {
		t.Errorf("Free out of inodes: %d, %v; want the bytes free", free, err)
	}
}

// reserveHoldsOnAlso: the reserve holds on the file systems
// DiskOptions.Also names (the metadata store's, mounted apart), not
// only on the chunks'.
func reserveHoldsOnAlso(t *testing.T) {
	meta := smallTmpfs(t, "size=4m")
	d, err := chunk.OpenDisk(filepath.Join(t.TempDir(), "chunks"), chunk.DiskOptions{Reserve: 8 << 20, Also: []string{meta}})
	if err != nil {
		t.Fatal(err)
	}
	blob := []byte("blob")
	if err := d.Put(context.Background(), chunk.Sum(blob), blob); !errors.Is(err, chunk.ErrNoSpace) {
		t.Fatalf("put with the chunks' disk roomy and Also's under the reserve: %v, want ErrNoSpace", err)
	}
}

// TestBuildsOn32BitLinux: statfs(2)'s field types differ between
// architectures (f_bsize is 32 bits on 386 and arm), so the free-space
// figure must convert each field, or the store does not compile there.
func buildsOn32BitLinux(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go tool")
	}
	gotool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	for _, arch := range []string{"386", "arm"} {
		cmd := exec.Command(gotool, "build", "-o", os.DevNull, ".")
		cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOARCH=%s: %v\n%s", arch, err, out)
		}
	}
}
