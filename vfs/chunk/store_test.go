package chunk_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"berth/vfs/chunk"
	"berth/vfs/chunk/chunktest"
)

// TestDisk holds the cases of the disk store beyond the conformance suite
// (TestDiskConformance runs chunktest): its layout, its temp files, and
// that a chunk counts as stored only once durable. A disk store bug found
// later becomes a row here.
func TestDisk(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"LayoutAndCleanTemp", diskLayoutAndCleanTemp},
		{"LegacyLayout", diskLegacyLayout},
		// was durable_test.go
		{"StoredOnlyWhenDurable", storedOnlyWhenDurable},
		{"DirectWrites", diskDirectWrites},
		{"DirectReads", diskDirectReads},
		{"DirectReadsPerStore", diskDirectReadsPerStore},
	} {
		t.Run(tc.name, tc.run)
	}
}

func newDisk(t *testing.T) *chunk.Disk {
	t.Helper()
	d, err := chunk.NewDisk(filepath.Join(t.TempDir(), "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// diskDirectWrites stores blobs of the sizes where the direct write path
// changes (below and at its threshold, whole blocks, a block and a byte),
// from memory at offsets that are and are not block-aligned, by Put and by
// Batch, one of them into a fan-out directory that went missing, and
// reads every one back byte for byte.
func diskDirectWrites(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	src := randomData(11, 5<<20)
	sizes := []int{1, 4095, 4096, 64<<10 - 1, 64 << 10, 64<<10 + 1, 1 << 20, 1<<20 + 4097, 4<<20 + 33}
	var want [][]byte
	b := d.NewBatch()
	for i, n := range sizes {
		for _, off := range []int{0, 1, 4096, 4097} {
			blob := src[off : off+n]
			id := chunk.Sum(blob)
			want = append(want, blob)
			if i == 3 && off == 0 {
				// The fan-out directory went missing: remade.
				if err := os.RemoveAll(filepath.Dir(d.Path(id))); err != nil {
					t.Fatal(err)
				}
			}
			var err error
			if (i+off)%2 == 0 {
				err = d.Put(ctx, id, blob)
			} else {
				err = b.Add(ctx, id, blob)
			}
			if err != nil {
				t.Fatalf("%d bytes at %d: %v", n, off, err)
			}
		}
	}
	if err := b.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, blob := range want {
		got, err := d.Get(ctx, chunk.Sum(blob))
		if err != nil {
			t.Fatalf("%d bytes: %v", len(blob), err)
		}
		if !bytes.Equal(got, blob) {
			t.Fatalf("%d bytes: read back differs", len(blob))
		}
	}
}

// diskDirectReads reads large blobs back cold (written directly, so not
// in the page cache: read directly the first time, which leaves the cache
// as it was, and through it the second, which keeps the blob there for
// the reads after; checked where cachestat(2) tells),
// twice, then warm (after a buffered read of the file: copied from the
// cache), into no buffer, a short
// unaligned one and the buffer the last read returned, as a Reader reuses
// it, and checks every byte.
func diskDirectReads(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	src := randomData(12, 5<<20)
	for _, n := range []int{64 << 10, 64<<10 + 1, 1<<20 + 4097, 4<<20 + 33} {
		blob := src[3 : 3+n]
		id := chunk.Sum(blob)
		if err := d.Put(ctx, id, blob); err != nil {
			t.Fatal(err)
		}
		var reuse []byte
		reads := 0
		for _, step := range []string{"cold", "still cold", "warm"} {
			if step == "warm" {
				if _, err := os.ReadFile(d.Path(id)); err != nil {
					t.Fatal(err)
				}
			}
			for _, dst := range [][]byte{nil, make([]byte, 10, 100)[1:], reuse} {
				got, err := d.GetInto(ctx, id, dst)
				if err != nil {
					t.Fatalf("%d bytes, %s: %v", n, step, err)
				}
				if !bytes.Equal(got, blob) {
					t.Fatalf("%d bytes, %s: read back differs", n, step)
				}
				reuse = got[:0]
				reads++
				pages, ok := cachedPages(t, d.Path(id))
				switch {
				case !ok:
				case reads == 1 && pages > 1:
					// The tail page was written through the cache; a
					// first read must not start the kernel's readahead
					// of the rest.
					t.Errorf("%d bytes, read once: %d pages in the page cache, want at most the tail's", n, pages)
				case reads == 2 && pages < uint64(n+4095)/4096:
					t.Errorf("%d bytes, read twice: %d pages in the page cache, want all %d", n, pages, (n+4095)/4096)
				}
			}
		}
	}
}

// diskDirectReadsPerStore: which blobs were read lately is each store's
// own, so a second store on the same directory (tests open many in one
// process) reads a blob another store read once as its own first read:
// directly, leaving the page cache as it was; its second read goes
// through the cache. Checked where cachestat(2) tells.
func diskDirectReadsPerStore(t *testing.T) {
	ctx := context.Background()
	a := newDisk(t)
	b, err := chunk.NewDisk(a.Dir())
	if err != nil {
		t.Fatal(err)
	}
	const n = 1<<20 + 4097
	blob := randomData(13, n)
	id := chunk.Sum(blob)
	if err := a.Put(ctx, id, blob); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		d    *chunk.Disk
		all  bool // every page cached after it
	}{
		{"first read of a", a, false},
		{"first read of b", b, false},
		{"second read of b", b, true},
	} {
		got, err := step.d.GetInto(ctx, id, nil)
		if err != nil || !bytes.Equal(got, blob) {
			t.Fatalf("%s: %v, or read back differs", step.name, err)
		}
		pages, ok := cachedPages(t, a.Path(id))
		if !ok {
			continue
		}
		if all := pages >= (n+4095)/4096; all != step.all || (!all && pages > 1) {
			t.Errorf("%s: %d pages in the page cache, want all %d: %v (else at most the tail's)", step.name, pages, (n+4095)/4096, step.all)
		}
	}
}

// cachedPages is how many pages of the file name the page cache holds;
// false where cachestat(2) is missing (kernels before 6.5).
func cachedPages(t *testing.T, name string) (uint64, bool) {
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Cachestat_t
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{}, &st, 0); err != nil {
		return 0, false
	}
	return st.Cache, true
}

func TestDiskConformance(t *testing.T) {
	chunktest.Run(t, func(t *testing.T) chunk.Store { return newDisk(t) })
}

func TestMemoryConformance(t *testing.T) {
	chunktest.Run(t, func(t *testing.T) chunk.Store { return chunk.NewMemory() })
}

func diskLayoutAndCleanTemp(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	b := []byte("hello")
	id := chunk.Sum(b)
	if err := d.Put(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	h := id.String()
	want := filepath.Join(d.Dir(), h[:2], h)
	if d.Path(id) != want {
		t.Fatalf("Path = %s, want %s", d.Path(id), want)
	}
	if _, err := os.Stat(want); err != nil {
		t.Fatalf("blob not at %s: %v", want, err)
	}
	// A crash mid-Put leaves a temp file: Walk and Size ignore it and
	// CleanTemp removes it.
	tmp := filepath.Join(filepath.Dir(want), ".tmp-deadbeef")
	if err := os.WriteFile(tmp, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	size, err := d.Size(ctx)
	if err != nil || size != int64(len(b)) {
		t.Fatalf("Size with a temp file = %d, %v; want %d", size, err, len(b))
	}
	var ids []chunk.ID
	if err := d.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("Walk = %v, want [%s]", ids, id)
	}
	if err := d.CleanTemp(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp file survived CleanTemp: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(want))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("left temp file %s", e.Name())
		}
	}
}

// Stores written with the two-level layout (ab/cd/<id>) stay readable.
func diskLegacyLayout(t *testing.T) {
	ctx := context.Background()
	d := newDisk(t)
	b := []byte("old layout")
	id := chunk.Sum(b)
	h := id.String()
	legacy := filepath.Join(d.Dir(), h[:2], h[2:4], h)
	if err := os.MkdirAll(filepath.Dir(legacy), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(legacy, b, 0o640); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Get(ctx, id); err != nil || string(got) != string(b) {
		t.Fatalf("Get legacy = %q, %v", got, err)
	}
	if has, err := d.Has(ctx, id); err != nil || !has {
		t.Fatalf("Has legacy = %v, %v", has, err)
	}
	var ids []chunk.ID
	if err := d.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || ids[0] != id {
		t.Fatalf("Walk = %v, want [%s]", ids, id)
	}
	if size, err := d.Size(ctx); err != nil || size != int64(len(b)) {
		t.Fatalf("Size = %d, %v", size, err)
	}
	if err := d.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	if has, _ := d.Has(ctx, id); has {
		t.Fatal("legacy chunk survived Delete")
	}
}

// TestStoredOnlyWhenDurable: a chunk renamed into place shows in the
// directory before the sync of the directory makes the rename durable.
// Until then neither Has nor a Put of the same id may report it stored: an
// upload that found it would skip storing it and commit a file that a
// crash at that moment leaves without the chunk (the rename lost, the temp
// file removed at the next start).
func storedOnlyWhenDurable(t *testing.T) {
	ctx := context.Background()
	for _, how := range []struct {
		name  string
		store func(d *chunk.Disk, id chunk.ID, blob []byte) error
	}{
		{"put", func(d *chunk.Disk, id chunk.ID, blob []byte) error { return d.Put(ctx, id, blob) }},
		{"batch", func(d *chunk.Disk, id chunk.ID, blob []byte) error {
			b := d.NewBatch()
			defer b.Abort()
			if err := b.Add(ctx, id, blob); err != nil {
				return err
			}
			return b.Commit(ctx)
		}},
	} {
		t.Run(how.name, func(t *testing.T) {
			d := newDisk(t)
			blob := []byte("a chunk")
			id := chunk.Sum(blob)
			renamed, resume := make(chan struct{}), make(chan struct{})
			var once sync.Once
			chunk.SetBeforeSync(d, func() {
				once.Do(func() {
					close(renamed)
					<-resume
				})
			})
			stored := make(chan error, 1)
			go func() { stored <- how.store(d, id, blob) }()
			<-renamed
			short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
			if has, err := d.Has(short, id); has && err == nil {
				t.Error("Has reported a chunk whose rename is not durable yet")
			}
			if err := d.Put(short, id, blob); err == nil {
				t.Error("Put returned on a chunk whose rename is not durable yet")
			}
			cancel()
			close(resume)
			if err := <-stored; err != nil {
				t.Fatal(err)
			}
			if has, err := d.Has(ctx, id); !has || err != nil {
				t.Fatalf("Has after the store returned = %v, %v", has, err)
			}
			if got, err := d.Get(ctx, id); err != nil || string(got) != string(blob) {
				t.Fatalf("Get = %q, %v", got, err)
			}
		})
	}
}
