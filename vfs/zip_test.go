package vfs_test

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestZip holds the cases of WriteZip: what an archive holds, what it
// leaves out, and how it stops (before the first byte with an error,
// after it by failing the stream). A zip bug found later becomes a row here.
func TestZip(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"WriteZip", writeZip},
		{"SubfolderAndFilter", writeZipSubfolderAndFilter},
		{"ErrorsBeforeWriting", writeZipErrorsBeforeWriting},
		{"StopsWhenCancelled", writeZipStopsWhenCancelled},
		{"ReadError", writeZipReadError},
		{"Zip64Entries", writeZip64Entries},
		{"Zip64Size", writeZip64Size},
		// was zipdepth_test.go
		{"OpensAheadOnlyWithinAFolder", writeZipOpensAheadOnlyWithinAFolder},
		// was zipmove_test.go
		{"LeavesOutItemsMovedAway", writeZipLeavesOutItemsMovedAway},
	} {
		t.Run(tc.name, tc.run)
	}
}

// zipEntry is what a test expects of one archive entry.
type zipEntry struct {
	data   []byte
	dir    bool
	method uint16
}

// zipTree fills the root with a tree that exercises names, nesting, empty
// folders, methods and deleted items, and returns what its zip must hold.
func zipTree(t *testing.T, e *env) map[string]zipEntry {
	t.Helper()
	ctx := context.Background()
	top := e.root.FolderID
	mkdir := func(parent uint64, name string) uint64 {
		n, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n.ID
	}
	text := []byte(strings.Repeat("all work and no play makes jack a dull boy\n", 3000))
	random := randBytes(1, 300<<10)
	want := map[string]zipEntry{}

	e.write(t, top, "a b.txt", text)
	want["a b.txt"] = zipEntry{data: text, method: zip.Deflate}
	e.write(t, top, "ünïcödé 名前.bin", random)
	want["ünïcödé 名前.bin"] = zipEntry{data: random, method: zip.Store}
	// Compressible, but its extension says it is not worth trying.
	e.write(t, top, "photo.JPG", text)
	want["photo.JPG"] = zipEntry{data: text, method: zip.Store}
	e.write(t, top, "zero.dat", nil)
	want["zero.dat"] = zipEntry{data: []byte{}, method: zip.Store}

	sub := mkdir(top, "sub dir")
	want["sub dir/"] = zipEntry{dir: true}
	nested := mkdir(sub, "nested")
	want["sub dir/nested/"] = zipEntry{dir: true}
	e.write(t, nested, "deep.txt", []byte("deep\n"))
	// Five bytes do not shrink by a tenth.
	want["sub dir/nested/deep.txt"] = zipEntry{data: []byte("deep\n"), method: zip.Store}
	mkdir(top, "empty")
	want["empty/"] = zipEntry{dir: true}

	gone := e.write(t, top, "gone.txt", text)
	if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	goneDir := mkdir(sub, "gone dir")
	e.write(t, goneDir, "inside.txt", text)
	if err := e.fs.Delete(ctx, e.root.ID, goneDir, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return want
}

// checkZip opens b with the standard library's reader and compares it with
// want, entry by entry.
func checkZip(t *testing.T, b []byte, want map[string]zipEntry) {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("archive/zip cannot open the archive: %v", err)
	}
	seen := map[string]bool{}
	for _, f := range zr.File {
		w, ok := want[f.Name]
		if !ok {
			t.Errorf("unexpected entry %q", f.Name)
			continue
		}
		seen[f.Name] = true
		if f.Flags&0x800 == 0 || f.NonUTF8 {
			t.Errorf("%q: UTF-8 flag not set", f.Name)
		}
		if f.Modified.IsZero() || time.Since(f.Modified) > time.Hour {
			t.Errorf("%q: modified %v", f.Name, f.Modified)
		}
		if f.FileInfo().IsDir() != w.dir {
			t.Errorf("%q: dir %v, want %v", f.Name, f.FileInfo().IsDir(), w.dir)
		}
		if w.dir {
			continue
		}
		if f.Method != w.method {
			t.Errorf("%q: method %d, want %d", f.Name, f.Method, w.method)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Errorf("%q: %v", f.Name, err)
		}
		if !bytes.Equal(got, w.data) {
			t.Errorf("%q: %d bytes differ from the %d uploaded", f.Name, len(got), len(w.data))
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("entry %q missing", name)
		}
	}
}

func writeZip(t *testing.T) {
	e := newEnv(t)
	want := zipTree(t, e)
	var buf bytes.Buffer
	if err := e.fs.WriteZip(context.Background(), &buf, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	checkZip(t, buf.Bytes(), want)

	// Depth first, in name order: a folder's entry comes right before its
	// contents.
	zr, _ := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	order := []string{"a b.txt", "empty/", "photo.JPG", "sub dir/", "sub dir/nested/", "sub dir/nested/deep.txt", "zero.dat", "ünïcödé 名前.bin"}
	if strings.Join(names, "|") != strings.Join(order, "|") {
		t.Errorf("order %q, want %q", names, order)
	}
}

func writeZipSubfolderAndFilter(t *testing.T) {
	e := newEnv(t)
	want := zipTree(t, e)
	ctx := context.Background()
	sub, err := e.fs.Lookup(ctx, e.root.ID, "/sub dir")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.fs.WriteZip(ctx, &buf, e.root.ID, sub.ID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	checkZip(t, buf.Bytes(), map[string]zipEntry{
		"nested/":         {dir: true},
		"nested/deep.txt": want["sub dir/nested/deep.txt"],
	})

	// A filter keeps only the chosen top-level items; a file id given as a
	// folder id does not match.
	ab, _ := e.fs.Lookup(ctx, e.root.ID, "/a b.txt")
	photo, _ := e.fs.Lookup(ctx, e.root.ID, "/photo.JPG")
	buf.Reset()
	opts := vfs.ZipOptions{FileIDs: []uint64{ab.ID}, FolderIDs: []uint64{sub.ID, photo.ID}}
	if err := e.fs.WriteZip(ctx, &buf, e.root.ID, e.root.FolderID, opts); err != nil {
		t.Fatal(err)
	}
	checkZip(t, buf.Bytes(), map[string]zipEntry{
		"a b.txt":                 want["a b.txt"],
		"sub dir/":                {dir: true},
		"sub dir/nested/":         {dir: true},
		"sub dir/nested/deep.txt": want["sub dir/nested/deep.txt"],
	})
}

func writeZipErrorsBeforeWriting(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := e.write(t, e.root.FolderID, "f.txt", []byte("x"))
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, d.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name         string
		root, folder uint64
		want         error
	}{
		{"missing folder", e.root.ID, 1 << 40, vfs.ErrNotExist},
		{"deleted folder", e.root.ID, d.ID, vfs.ErrNotExist},
		{"other root", e.root.ID + 1000, e.root.FolderID, vfs.ErrNotExist},
		{"a file", e.root.ID, f.ID, vfs.ErrNotDir},
	} {
		var buf bytes.Buffer
		err := e.fs.WriteZip(ctx, &buf, c.root, c.folder, vfs.ZipOptions{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", c.name, buf.Len())
		}
	}
}

// cancelAfter is a writer that cancels a context once it has taken limit
// bytes, and counts what it takes after that.
type cancelAfter struct {
	limit, n, after int64
	cancel          context.CancelFunc
}

func (c *cancelAfter) Write(p []byte) (int, error) {
	if c.n >= c.limit {
		c.after += int64(len(p))
	}
	c.n += int64(len(p))
	if c.n >= c.limit {
		c.cancel()
	}
	return len(p), nil
}

func writeZipStopsWhenCancelled(t *testing.T) {
	e := newEnv(t)
	// One big file (cancelled inside the copy) and many small ones (between
	// entries).
	e.write(t, e.root.FolderID, "big.bin", randBytes(2, 16<<20))
	for i := range 50 {
		e.write(t, e.root.FolderID, fmt.Sprintf("small%02d.bin", i), randBytes(uint64(10+i), 4096))
	}
	for _, limit := range []int64{1 << 20, 16<<20 + 64<<10} {
		ctx, cancel := context.WithCancel(context.Background())
		w := &cancelAfter{limit: limit, cancel: cancel}
		err := e.fs.WriteZip(ctx, w, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("limit %d: %v, want context.Canceled", limit, err)
		}
		// At most one read buffer (256 KiB) and the zip writer's buffer pass
		// after the cancel.
		if w.after > 512<<10 {
			t.Errorf("limit %d: %d bytes written after the cancel", limit, w.after)
		}
	}
}

func writeZipReadError(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.write(t, e.root.FolderID, "a.txt", []byte("first file, intact"))
	bad := e.write(t, e.root.FolderID, "b.bin", randBytes(3, 3<<20))
	revs, err := e.fs.Revisions(ctx, e.root.ID, bad.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := revs[len(revs)-1].Chunks
	if err := os.Remove(e.chunks.Path(last[len(last)-1].ID)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	err = e.fs.WriteZip(ctx, &buf, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if !errors.Is(err, chunk.ErrNotFound) {
		t.Fatalf("got %v, want chunk.ErrNotFound", err)
	}
}

// writeZip64Entries zips a folder of 70,000 entries (empty folders,
// the cheapest items to create): past 65,535 entries the archive must end
// with a Zip64 end of central directory.
func writeZip64Entries(t *testing.T) {
	const n = 70000
	// In-memory Badger: each commit is then not an fsync, and this test is
	// about the archive, not the store.
	db := openBadger(t, "", false)
	t.Cleanup(func() { db.Close() })
	chunks, err := chunk.NewDisk(filepath.Join(t.TempDir(), "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fsys, err := vfs.Open(ctx, db, chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	root, err := fsys.CreateRoot(ctx, "many", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := fsys.Mkdir(ctx, root.ID, root.FolderID, "many", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const workers = 8
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if _, err := fsys.Mkdir(ctx, root.ID, dir.ID, fmt.Sprintf("f%05d", i), vfs.WriteOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	t.Logf("%d folders created in %v", n, time.Since(start))
	start = time.Now()
	var buf bytes.Buffer
	if err := fsys.WriteZip(ctx, &buf, root.ID, root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("zipped in %v", time.Since(start))
	b := buf.Bytes()
	// No comment: the end of central directory is the last 22 bytes, and
	// the Zip64 locator (20 bytes) sits right before it.
	eocd := b[len(b)-22:]
	if binary.LittleEndian.Uint32(eocd) != 0x06054b50 {
		t.Fatal("no end of central directory record at the end")
	}
	if got := binary.LittleEndian.Uint16(eocd[10:]); got != 0xffff {
		t.Errorf("EOCD entry count %d, want 0xffff (see Zip64)", got)
	}
	loc := b[len(b)-42 : len(b)-22]
	if binary.LittleEndian.Uint32(loc) != 0x07064b50 {
		t.Fatal("no Zip64 end of central directory locator")
	}
	rec := b[binary.LittleEndian.Uint64(loc[8:]):]
	if binary.LittleEndian.Uint32(rec) != 0x06064b50 {
		t.Fatal("no Zip64 end of central directory record")
	}
	if got := binary.LittleEndian.Uint64(rec[32:]); got != n+1 {
		t.Errorf("Zip64 entry count %d, want %d", got, n+1)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != n+1 {
		t.Fatalf("archive/zip reads %d entries, want %d", len(zr.File), n+1)
	}
	if zr.File[0].Name != "many/" || zr.File[n].Name != fmt.Sprintf("many/f%05d/", n-1) {
		t.Errorf("first %q, last %q", zr.File[0].Name, zr.File[n].Name)
	}
}

// writeZip64Size zips a file of more than 4 GiB: its sizes no longer fit
// the 32-bit fields, so the data descriptor and the central directory must
// carry them as Zip64. The file is zeros, which the chunk store keeps once
// and Deflate shrinks a thousandfold, so the archive fits in memory.
func writeZip64Size(t *testing.T) {
	if testing.Short() {
		t.Skip("reads and writes 4 GiB")
	}
	const size = 4<<30 + 1<<20
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "big.dat", io.LimitReader(zeros{}, size), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := e.fs.WriteZip(ctx, &buf, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	f := zr.File[0]
	if f.UncompressedSize64 != size || f.Method != zip.Deflate {
		t.Fatalf("size %d method %d, want %d Deflate", f.UncompressedSize64, f.Method, int64(size))
	}
	// The data descriptor after the entry's data carries 64-bit sizes.
	// (Inflating 4 GiB to check the CRC as well would double the test's
	// time; the CRC path is the same as for small entries.)
	off, err := f.DataOffset()
	if err != nil {
		t.Fatal(err)
	}
	dd := buf.Bytes()[off+int64(f.CompressedSize64):]
	if binary.LittleEndian.Uint32(dd) != 0x08074b50 {
		t.Fatal("no data descriptor after the entry")
	}
	if c, u := binary.LittleEndian.Uint64(dd[8:]), binary.LittleEndian.Uint64(dd[16:]); c != f.CompressedSize64 || u != size {
		t.Errorf("data descriptor sizes %d, %d; want %d, %d", c, u, f.CompressedSize64, int64(size))
	}
	if f.CRC32 != binary.LittleEndian.Uint32(dd[4:]) {
		t.Error("CRC of the central directory differs from the data descriptor's")
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestWriteZipOpensAheadOnlyWithinAFolder: the file that follows a
// subfolder is not opened ahead while the subfolder's tree is written.
// Each level of a deep tree then held an open file (its head and the
// chunks its reader fetches ahead, megabytes) until the archive climbed
// back, so the memory of one zip grew with the depth of the tree
// (about 20 MiB a level measured, MaxDepth levels allowed).
func writeZipOpensAheadOnlyWithinAFolder(t *testing.T) {
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

// writeZipLeavesOutItemsMovedAway moves a file and a folder from one
// folder of the archive to another while the archive is written, after
// the first folder was listed: each must appear once, not at both places.
// A folder deleted meanwhile leaves no entry.
func writeZipLeavesOutItemsMovedAway(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mkdir := func(parent uint64, name string) vfs.Node {
		n, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := mkdir(e.root.FolderID, "a")
	b := mkdir(e.root.FolderID, "b")
	e.write(t, a.ID, "1.bin", randBytes(1, 1<<20))
	e.write(t, a.ID, "2.txt", []byte("two"))
	three := e.write(t, a.ID, "3.txt", []byte("three"))
	empty := e.write(t, a.ID, "4.empty", nil)
	gone := mkdir(a.ID, "gone")
	sub := mkdir(a.ID, "sub")
	e.write(t, sub.ID, "in.txt", []byte("inside"))

	w := &hookWriter{hook: func() {
		// "a" is listed and its first entries under way.
		for _, id := range []uint64{three.ID, empty.ID, sub.ID} {
			if _, err := e.fs.Move(ctx, e.root.ID, id, b.ID, "", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}}
	if err := e.fs.WriteZip(ctx, w, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(w.buf.Bytes()), int64(w.buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
	}
	sort.Strings(names)
	want := []string{"a/", "a/1.bin", "a/2.txt", "b/", "b/3.txt", "b/4.empty", "b/sub/", "b/sub/in.txt"}
	if len(names) != len(want) {
		t.Fatalf("entries %q, want %q", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("entries %q, want %q", names, want)
		}
	}
}

// hookWriter runs hook once, before the first write.
type hookWriter struct {
	buf  bytes.Buffer
	hook func()
}

func (h *hookWriter) Write(p []byte) (int, error) {
	if h.hook != nil {
		h.hook()
		h.hook = nil
	}
	return h.buf.Write(p)
}
