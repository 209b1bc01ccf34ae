package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"berth/vfs"
	"berth/vfs/chunk"
)

// tinyBatch makes a file of a few MiB (a few chunks of about 1.2 MiB) and
// a folder of a few items take the split paths.
const tinyBatch = 3

// splitEnv is an env whose split operations change at most tinyBatch
// references a transaction, with a hook between their transactions that
// a test may set.
type splitEnv struct {
	*env
	hook atomic.Pointer[func(vfs.Op)]
}

func newSplitEnv(t *testing.T) *splitEnv {
	t.Helper()
	s := &splitEnv{}
	opts := vfs.WithRefBatch(vfs.Options{}, tinyBatch)
	opts = vfs.WithBatchHook(opts, func(op vfs.Op) {
		if fn := s.hook.Load(); fn != nil {
			(*fn)(op)
		}
	})
	s.env = openEnvWith(t, t.TempDir(), opts)
	t.Cleanup(s.close)
	root, err := s.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	s.root = root
	return s
}

// onBatch runs fn between the transactions of split operations of kind
// op, until the test ends or sets another.
func (s *splitEnv) onBatch(t *testing.T, op vfs.Op, fn func()) {
	h := func(got vfs.Op) {
		if got == op {
			fn()
		}
	}
	s.hook.Store(&h)
	t.Cleanup(func() { s.hook.Store(nil) })
}

// checkClean fails unless fsck finds every reference stored and counted
// right and no intent is left. Garbage the collector has not removed yet
// (Leaked) is allowed; gcDeletes checks it is gone after.
func checkClean(t *testing.T, e *env, step string) {
	t.Helper()
	rep, err := e.fs.Fsck(ctx, true)
	if err != nil || len(rep.Missing)+len(rep.BadRefcounts)+len(rep.Corrupt) != 0 {
		t.Fatalf("%s: fsck %v (%v)", step, rep, err)
	}
	if n, err := e.fs.IntentParts(ctx); err != nil || n != 0 {
		t.Fatalf("%s: %d intent parts left (%v)", step, n, err)
	}
}

// chunksOf returns the distinct chunks of the revisions of a file.
func chunksOf(t *testing.T, e *env, file uint64) map[chunk.ID]bool {
	t.Helper()
	revs, err := e.fs.Revisions(ctx, e.root.ID, file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[chunk.ID]bool{}
	for _, r := range revs {
		for _, c := range r.Chunks {
			out[c.ID] = true
		}
	}
	return out
}

func gcDeletes(t *testing.T, e *env, step string, want int) {
	t.Helper()
	before := countChunkFiles(t, e.dir)
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatalf("%s: gc: %v", step, err)
	}
	if got := before - countChunkFiles(t, e.dir); got != want {
		t.Fatalf("%s: gc removed %d chunks, want %d", step, got, want)
	}
	checkClean(t, e, step+", after gc")
	if rep, err := e.fs.Fsck(ctx, false); err != nil || !rep.OK() {
		t.Fatalf("%s: fsck after gc: %v (%v)", step, rep, err)
	}
}

func TestLargeFileAcrossBatches(t *testing.T) {
	e := newSplitEnv(t)
	top := e.root.FolderID
	// A chunk repeated inside one file: its count must rise by two.
	v1 := append(randBytes(1, 5<<20), randBytes(1, 5<<20)...)
	f := e.write(t, top, "f", v1)
	if got := e.read(t, f.ID); !bytes.Equal(got, v1) {
		t.Fatal("contents differ")
	}
	if n := len(chunksOf(t, e.env, f.ID)); n <= tinyBatch {
		t.Fatalf("only %d chunks: the write did not take the split path", n)
	}
	checkClean(t, e.env, "write")
	gcDeletes(t, e.env, "write", 0)

	v2 := randBytes(2, 6<<20)
	if n := e.write(t, top, "f", v2); n.ID != f.ID {
		t.Fatal("overwrite made a new file")
	}
	if got := e.read(t, f.ID); !bytes.Equal(got, v2) {
		t.Fatal("new revision differs")
	}
	checkClean(t, e.env, "overwrite")
	gcDeletes(t, e.env, "overwrite", 0)

	g, err := e.fs.Copy(ctx, e.root.ID, f.ID, e.root.ID, top, "g", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, g.ID); !bytes.Equal(got, v2) {
		t.Fatal("copy differs")
	}
	checkClean(t, e.env, "copy")
	gcDeletes(t, e.env, "copy", 0)

	// Purging f drops both its revisions; the first one's chunks are
	// garbage, the second's are still the copy's.
	old := chunksOf(t, e.env, f.ID)
	kept := chunksOf(t, e.env, g.ID)
	garbage := 0
	for id := range old {
		if !kept[id] {
			garbage++
		}
	}
	if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e.env, "delete")
	gcDeletes(t, e.env, "delete", 0)
	purged := 0
	e.onBatch(t, vfs.OpPurge, func() { purged++ })
	if err := e.fs.Purge(ctx, e.root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	if purged == 0 {
		t.Fatal("the purge did not park references")
	}
	checkClean(t, e.env, "purge")
	gcDeletes(t, e.env, "purge", garbage)
	if got := e.read(t, g.ID); !bytes.Equal(got, v2) {
		t.Fatal("the copy lost contents to the purge")
	}

	if err := e.fs.Delete(ctx, e.root.ID, g.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, g.ID); err != nil {
		t.Fatal(err)
	}
	gcDeletes(t, e.env, "purge of the copy", len(kept))
	if u, _ := e.fs.Usage(ctx, e.root.ID); u.PhysicalSize != 0 || u.FileCount+u.DelFileCount != 0 {
		t.Fatalf("usage after purging everything: %+v", u)
	}
}

func TestLargeWriteFailsAfterPins(t *testing.T) {
	body := randBytes(3, 6<<20)
	cases := []struct {
		name   string
		during func(t *testing.T, e *splitEnv, file uint64, cancel func())
		want   error
	}{
		{"name became a folder", func(t *testing.T, e *splitEnv, _ uint64, _ func()) {
			if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "new", vfs.WriteOptions{}); err != nil {
				t.Error(err)
			}
		}, vfs.ErrNameConflict},
		{"locked by another", func(t *testing.T, e *splitEnv, file uint64, _ func()) {
			if _, err := e.fs.Lock(ctx, e.root.ID, file, vfs.LockRequest{Holder: "bob"}); err != nil {
				t.Error(err)
			}
		}, vfs.ErrLocked},
		{"cancelled", func(t *testing.T, e *splitEnv, _ uint64, cancel func()) { cancel() }, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSplitEnv(t)
			old := e.write(t, e.root.FolderID, "old", []byte("keep me"))
			name := "new"
			if tc.want == vfs.ErrLocked {
				name = "old"
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			once := false
			e.onBatch(t, vfs.OpWrite, func() {
				if !once {
					once = true
					tc.during(t, e, old.ID, cancel)
				}
			})
			_, err := e.fs.WriteFile(wctx, e.root.ID, e.root.FolderID, name, bytes.NewReader(body), vfs.WriteOptions{Principal: "alice"})
			if !errors.Is(err, tc.want) {
				t.Fatalf("write: %v, want %v", err, tc.want)
			}
			if !once {
				t.Fatal("the write never paused between batches")
			}
			if got := e.read(t, old.ID); string(got) != "keep me" {
				t.Fatalf("old contents: %q", got)
			}
			if revs, _ := e.fs.Revisions(ctx, e.root.ID, old.ID); len(revs) != 1 {
				t.Fatalf("old has %d revisions", len(revs))
			}
			if n, err := e.fs.Lookup(ctx, e.root.ID, "/new"); err == nil && !n.Dir {
				t.Fatal("the failed write is visible")
			}
			if u, _ := e.fs.Usage(ctx, e.root.ID); u.PhysicalSize != int64(len("keep me")) {
				t.Fatalf("usage after the failed write: %+v", u)
			}
			checkClean(t, e.env, "failed write")
			if _, err := e.fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if n := countChunkFiles(t, e.dir); n != 0 {
				t.Fatalf("the failed write left %d chunk files after gc", n)
			}
			checkClean(t, e.env, "gc")
		})
	}
}

// tree describes a subtree for comparison: path, kind, size, contents
// and properties of every item below a folder.
func tree(t *testing.T, e *env, folder uint64, prefix string) []string {
	t.Helper()
	kids, _, err := e.fs.List(ctx, e.root.ID, folder)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range kids {
		props, err := e.fs.Props(ctx, e.root.ID, k.ID)
		if err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%s/%s dir=%v size=%d mod=%d props=%v", prefix, k.Name, k.Dir, k.Size, k.Modified.UnixNano(), props)
		if !k.Dir {
			line += fmt.Sprintf(" data=%x", e.read(t, k.ID))
		}
		out = append(out, line)
		if k.Dir {
			out = append(out, tree(t, e, k.ID, prefix+"/"+k.Name)...)
		}
	}
	return out
}

// buildTree makes /d: small files, a subfolder, a file of several chunks
// and dead properties; it returns d and what it adds to usage.
func buildTree(t *testing.T, e *splitEnv) vfs.Node {
	t.Helper()
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.fs.Mkdir(ctx, e.root.ID, d.ID, "sub", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		e.write(t, d.ID, fmt.Sprintf("f%d", i), randBytes(uint64(10+i), 100*i))
	}
	for i := range 3 {
		e.write(t, sub.ID, fmt.Sprintf("s%d", i), randBytes(uint64(20+i), 20<<10))
	}
	e.write(t, sub.ID, "big", randBytes(30, 5<<20))
	if err := e.fs.PatchProps(ctx, e.root.ID, sub.ID, map[string][]byte{"{x}color": []byte("red")}, nil, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f0, err := e.fs.Lookup(ctx, e.root.ID, "/d/f0")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.PatchProps(ctx, e.root.ID, f0.ID, map[string][]byte{"{x}a": []byte("1"), "{x}b": []byte("2")}, nil, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestCopyEstimateCountsNameIndex: what a copy's estimate counts for an
// item's name-index entries, from the name's length alone, is never less
// than what the index sets for them, whatever the name's trigrams, runes
// and folding.
func TestCopyEstimateCountsNameIndex(t *testing.T) {
	for _, name := range []string{
		"a", "ab", "abc", "report.pdf", "aaaaaaaaaaaa", "abcabcabcabc",
		"Straße Übung", "ſſſ ǅǅǅ KKK", // fold to shorter or other runes
		"日本語のファイル名", "😀😁😂🤣😀😁",
		strings.Repeat("é", 127), strings.Repeat("😀", 63), strings.Repeat("xyz", 85),
	} {
		if counted, set := vfs.GramBytes(name); counted < set {
			t.Errorf("%q: the estimate counts %d bytes for its name's index entries, which set %d", name, counted, set)
		}
	}
}

func TestLargeCopyTree(t *testing.T) {
	e := newSplitEnv(t)
	d := buildTree(t, e)
	before, _ := e.fs.Usage(ctx, e.root.ID)
	chunksBefore := countChunkFiles(t, e.dir)
	want := tree(t, e.env, d.ID, "")
	listing, hash, _ := e.fs.List(ctx, e.root.ID, e.root.FolderID)
	batches := 0
	// The scans of the batches' transactions, between one call of the
	// hook and the next: a scan in a transaction holding a batch's
	// writes sorts them all first (Badger), so the items, which the
	// plan's snapshot read, are not scanned for again.
	var batchScans, hookEnd uint64
	e.onBatch(t, vfs.OpCopy, func() {
		batches++
		if batches > 1 {
			batchScans += e.db.TxnStats().Scans - hookEnd
		}
		defer func() { hookEnd = e.db.TxnStats().Scans }()
		// Staged items are in no listing, search or modified_since, and
		// not in the usage yet.
		if got, h, _ := e.fs.List(ctx, e.root.ID, e.root.FolderID); len(got) != len(listing) || h != hash {
			t.Errorf("batch %d: the top folder lists %d items", batches, len(got))
		}
		if got, _ := e.fs.Search(ctx, e.root.ID, "s", 0); len(got) != 4 {
			t.Errorf("batch %d: search finds %d items", batches, len(got))
		}
		if got, _ := e.fs.ModifiedSince(ctx, e.root.ID, d.Created.Add(-1), 0); len(got) != 11 {
			t.Errorf("batch %d: modified_since finds %d files", batches, len(got))
		}
		if u, _ := e.fs.Usage(ctx, e.root.ID); u != before {
			t.Errorf("batch %d: usage %+v", batches, u)
		}
		if _, err := e.fs.Lookup(ctx, e.root.ID, "/d2"); err == nil {
			t.Errorf("batch %d: /d2 visible", batches)
		}
	})
	c, err := e.fs.Copy(ctx, e.root.ID, d.ID, e.root.ID, e.root.FolderID, "d2", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if batches < 4 {
		t.Fatalf("the copy took %d batches", batches)
	}
	// Two items have dead properties (buildTree), read for their copy.
	if batchScans > 2 {
		t.Errorf("the copy's batches scanned %d times, want at most 2 (the items with properties)", batchScans)
	}
	if c.Path != "/d2" || !c.Dir || c.Deleted {
		t.Fatalf("copy: %+v", c)
	}
	if got := tree(t, e.env, c.ID, ""); !slices.Equal(got, want) {
		t.Fatalf("copied tree differs:\n%v\nwant\n%v", got, want)
	}
	after, _ := e.fs.Usage(ctx, e.root.ID)
	if after.FileCount != 2*before.FileCount || after.FolderCount != 2*before.FolderCount ||
		after.HeadSize != 2*before.HeadSize || after.PhysicalSize != 2*before.PhysicalSize {
		t.Fatalf("usage %+v after copying, %+v before", after, before)
	}
	if got, _ := e.fs.Search(ctx, e.root.ID, "s", 0); len(got) != 8 {
		t.Fatalf("search finds %d items after the copy", len(got))
	}
	checkClean(t, e.env, "copy")
	if n := countChunkFiles(t, e.dir); n != chunksBefore {
		t.Fatalf("the copy stored chunks: %d -> %d", chunksBefore, n)
	}

	// Removing the original leaves the copy whole.
	if err := e.fs.Delete(ctx, e.root.ID, d.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	gcDeletes(t, e.env, "purge of the original", 0)
	if got := tree(t, e.env, c.ID, ""); !slices.Equal(got, want) {
		t.Fatal("the copy changed when the original was purged")
	}
}

func TestLargeCopyFails(t *testing.T) {
	cases := []struct {
		name   string
		during func(t *testing.T, e *splitEnv, cancel func())
		want   error
	}{
		{"name taken", func(t *testing.T, e *splitEnv, _ func()) {
			if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d2", vfs.WriteOptions{}); err != nil {
				t.Error(err)
			}
		}, vfs.ErrNameConflict},
		{"cancelled", func(t *testing.T, e *splitEnv, cancel func()) { cancel() }, context.Canceled},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newSplitEnv(t)
			d := buildTree(t, e)
			want := tree(t, e.env, d.ID, "")
			chunks := countChunkFiles(t, e.dir)
			before, _ := e.fs.Usage(ctx, e.root.ID)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			n := 0
			e.onBatch(t, vfs.OpCopy, func() {
				if n++; n == 2 {
					tc.during(t, e, cancel)
				}
			})
			if _, err := e.fs.Copy(cctx, e.root.ID, d.ID, e.root.ID, e.root.FolderID, "d2", vfs.WriteOptions{}); !errors.Is(err, tc.want) {
				t.Fatalf("copy: %v, want %v", err, tc.want)
			}
			if n < 2 {
				t.Fatal("the copy failed before its second batch")
			}
			after, _ := e.fs.Usage(ctx, e.root.ID)
			if tc.want == vfs.ErrNameConflict {
				before.FolderCount++
				if d2, err := e.fs.Lookup(ctx, e.root.ID, "/d2"); err != nil || len(tree(t, e.env, d2.ID, "")) != 0 {
					t.Fatalf("/d2 is not the empty folder made meanwhile (%v)", err)
				}
			} else if _, err := e.fs.Lookup(ctx, e.root.ID, "/d2"); err == nil {
				t.Fatal("the failed copy is visible")
			}
			if after != before {
				t.Fatalf("usage %+v after the failed copy, %+v before", after, before)
			}
			if got := tree(t, e.env, d.ID, ""); !slices.Equal(got, want) {
				t.Fatal("the source changed")
			}
			checkClean(t, e.env, "failed copy")
			gcDeletes(t, e.env, "failed copy", 0)
			if n := countChunkFiles(t, e.dir); n != chunks {
				t.Fatalf("chunk files %d -> %d", chunks, n)
			}
		})
	}
}
