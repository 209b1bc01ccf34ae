package chunk_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"berth/vfs/chunk"
)

// TestBatch holds the cases of the disk store's batches: nothing shows
// before Commit, Abort and a cancelled or crashed commit leave nothing but
// temp files. A batch bug found later becomes a row here.
func TestBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"InvisibleUntilCommit", batchInvisibleUntilCommit},
		{"AbortLeavesNothing", batchAbortLeavesNothing},
		{"CancelledCommit", batchCancelledCommit},
		{"CancelledAdd", batchCancelledAdd},
		{"CrashLeavesOnlyTemp", batchCrashLeavesOnlyTemp},
	} {
		t.Run(tc.name, tc.run)
	}
}

// files lists every regular file under d's root, temp or not.
func files(t *testing.T, d *chunk.Disk) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(d.Dir(), func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func walkIDs(t *testing.T, d *chunk.Disk) []chunk.ID {
	t.Helper()
	var ids []chunk.ID
	if err := d.Walk(context.Background(), func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	return ids
}

// stage adds n distinct blobs (and one of them twice) to a new batch.
func stage(t *testing.T, d *chunk.Disk, n int) (chunk.Batch, []chunk.ID, [][]byte) {
	t.Helper()
	ctx := context.Background()
	b := d.NewBatch()
	var ids []chunk.ID
	var blobs [][]byte
	for i := range n {
		blob := fmt.Appendf(nil, "blob %d", i)
		id := chunk.Sum(blob)
		if err := b.Add(ctx, id, blob); err != nil {
			t.Fatal(err)
		}
		ids, blobs = append(ids, id), append(blobs, blob)
	}
	if err := b.Add(ctx, ids[0], blobs[0]); err != nil {
		t.Fatal(err)
	}
	return b, ids, blobs
}

func batchInvisibleUntilCommit(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	b, ids, blobs := stage(t, d, 20)
	for _, id := range ids {
		if has, err := d.Has(ctx, id); err != nil || has {
			t.Fatalf("Has(%s) before Commit = %v, %v", id, has, err)
		}
	}
	if got := walkIDs(t, d); len(got) != 0 {
		t.Fatalf("Walk before Commit = %v", got)
	}
	if size, err := d.Size(ctx); err != nil || size != 0 {
		t.Fatalf("Size before Commit = %d, %v", size, err)
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		got, err := d.Get(ctx, id)
		if err != nil || string(got) != string(blobs[i]) {
			t.Fatalf("Get(%s) after Commit = %q, %v", id, got, err)
		}
	}
	if got := walkIDs(t, d); len(got) != len(ids) {
		t.Fatalf("Walk after Commit found %d ids, want %d", len(got), len(ids))
	}
	for _, f := range files(t, d) {
		if strings.HasPrefix(filepath.Base(f), ".tmp-") {
			t.Fatalf("temp file %s left after Commit", f)
		}
	}
	b.Abort() // after a successful Commit: removes nothing
	if got := walkIDs(t, d); len(got) != len(ids) {
		t.Fatalf("Abort after Commit left %d ids, want %d", len(got), len(ids))
	}
}

func batchAbortLeavesNothing(t *testing.T) {
	d := newDisk(t)
	b, _, _ := stage(t, d, 20)
	b.Abort()
	b.Abort()
	if got := walkIDs(t, d); len(got) != 0 {
		t.Fatalf("Walk after Abort = %v", got)
	}
	if got := files(t, d); len(got) != 0 {
		t.Fatalf("files after Abort: %v", got)
	}
}

func batchCancelledCommit(t *testing.T) {
	d := newDisk(t)
	b, ids, _ := stage(t, d, 5)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.Commit(ctx); err == nil {
		t.Fatal("Commit with a cancelled context succeeded")
	}
	b.Abort()
	if got := files(t, d); len(got) != 0 {
		t.Fatalf("files after a failed Commit and Abort: %v", got)
	}
	if has, _ := d.Has(context.Background(), ids[0]); has {
		t.Fatal("chunk of a cancelled batch is visible")
	}
}

// An upload cancelled between two chunks stages nothing more: Add checks
// the context before it writes. (Only a race reached this before.)
func batchCancelledAdd(t *testing.T) {
	d := newDisk(t)
	b := d.NewBatch()
	defer b.Abort()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	blob := []byte("a chunk that never lands")
	if err := b.Add(ctx, chunk.Sum(blob), blob); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add with a cancelled context: %v, want context.Canceled", err)
	}
	if got := files(t, d); len(got) != 0 {
		t.Fatalf("files after a cancelled Add: %v", got)
	}
}

// A crash before Commit leaves only temp-named files, which CleanTemp
// removes at the next start.
func batchCrashLeavesOnlyTemp(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	_, ids, _ := stage(t, d, 20) // never committed nor aborted: the crash
	staged := files(t, d)
	if len(staged) != len(ids)+1 {
		t.Fatalf("%d staged files, want %d", len(staged), len(ids)+1)
	}
	for _, f := range staged {
		if !strings.HasPrefix(filepath.Base(f), ".tmp-") {
			t.Fatalf("staged file %s is not temp-named", f)
		}
	}
	reopened, err := chunk.NewDisk(d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if err := reopened.CleanTemp(ctx); err != nil {
		t.Fatal(err)
	}
	if got := files(t, reopened); len(got) != 0 {
		t.Fatalf("files after CleanTemp: %v", got)
	}
}

// failCommit is a Disk whose batches fail at Commit, like an fsync error.
type failCommit struct{ *chunk.Disk }

func (f failCommit) NewBatch() chunk.Batch { return failingBatch{f.Disk.NewBatch()} }

type failingBatch struct{ chunk.Batch }

func (failingBatch) Commit(context.Context) error { return errBoom }
