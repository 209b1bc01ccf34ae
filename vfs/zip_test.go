package vfs_test

import (
	"archive/zip"
	"berth/berthtest"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestZip holds the cases of Zip and WriteZip: what an archive holds, what
// it leaves out, its exact size and ETag, reads from any offset, and how it
// stops (before the first byte with an error, after it by failing the
// stream). A zip bug found later becomes a row here.
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
		{"Zip64Forced", zip64Forced},
		{"Zip64AtItsThresholds", zip64AtThresholds},
		{"ExactSizeAndStableETag", zipExactSizeAndStableETag},
		{"ReadsFromAnyOffset", zipReadsFromAnyOffset},
		{"CentralDirectoryInAnyOrder", zipCentralInAnyOrder},
		{"NoDriveLetters", zipNoDriveLetters},
		{"DriveLettersKeptApart", zipDriveLettersKeptApart},
		{"ResumedAt60Percent", zipResumedAt60Percent},
		{"ETagChangesWithTheFolder", zipETagChanges},
		{"EmptyFolder", zipEmptyFolder},
		{"CRCKeptAtWrite", zipCRCKeptAtWrite},
		{"CRCOfAStagedAppendCommittedInPart", zipCRCOfStagedAppendInPart},
		{"RevisionsWithoutCRC", zipRevisionsWithoutCRC},
		{"CRCsOfSmallFilesKept", zipCRCsOfSmallFilesKept},
		{"SnapshotOfTheListing", zipSnapshotOfTheListing},
		{"TooManyEntries", zipTooManyEntries},
		{"BudgetOfZipsBeingServed", zipBudget},
		{"BudgetHeldWhileListing", zipBudgetWhileListing},
		{"BudgetSharedByRequesters", zipBudgetShared},
		{"BudgetGivenBackHoweverAZipEnds", zipBudgetGivenBack},
		{"SharedWhileTheFolderIsUnchanged", zipShared},
		{"NeverSharedOnceTheFolderChanged", zipNeverStale},
	} {
		t.Run(tc.name, tc.run)
	}
}

// zipEntry is what a test expects of one archive entry.
type zipEntry struct {
	data []byte
	dir  bool
}

// zipTree fills the root with a tree that exercises names, nesting, empty
// folders, inline and chunked files and deleted items, and returns what its zip must hold.
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
	want["a b.txt"] = zipEntry{data: text}
	e.write(t, top, "ünïcödé 名前.bin", random)
	want["ünïcödé 名前.bin"] = zipEntry{data: random}
	e.write(t, top, "photo.JPG", text)
	want["photo.JPG"] = zipEntry{data: text}
	e.write(t, top, "zero.dat", nil)
	want["zero.dat"] = zipEntry{data: []byte{}}

	sub := mkdir(top, "sub dir")
	want["sub dir/"] = zipEntry{dir: true}
	nested := mkdir(sub, "nested")
	want["sub dir/nested/"] = zipEntry{dir: true}
	e.write(t, nested, "deep.txt", []byte("deep\n"))
	want["sub dir/nested/deep.txt"] = zipEntry{data: []byte("deep\n")}
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
		if f.Method != zip.Store {
			t.Errorf("%q: method %d, want Store", f.Name, f.Method)
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
	// A narrowed archive is another byte sequence: its own size and ETag.
	whole, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	narrowed, b := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, opts)
	if narrowed.ETag() == whole.ETag() || narrowed.Size() != int64(len(b)) || !bytes.Equal(b, buf.Bytes()) {
		t.Errorf("narrowed: ETag %s (whole %s), Size %d for %d bytes", narrowed.ETag(), whole.ETag(), narrowed.Size(), len(b))
	}
	berthtest.UnzipTest(t, b)
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
	berthtest.UnzipTest(t, b)
}

// zipBytes lays out the zip of folder and reads it whole.
func zipBytes(t *testing.T, fs *vfs.FS, root, folder uint64, opts vfs.ZipOptions) (*vfs.Zip, []byte) {
	t.Helper()
	ctx := context.Background()
	z, err := fs.Zip(ctx, root, folder, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(z.Close)
	r := z.Reader(ctx)
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return z, b
}

// zip64Forced lowers the Zip64 threshold to 1,000 bytes, so files and
// offsets past it take the Zip64 fields and end records that 4 GiB would:
// archive/zip and unzip read the archive whole.
func zip64Forced(t *testing.T) {
	e := openEnvWith(t, t.TempDir(), vfs.WithZip64Threshold(vfs.Options{}, 1000))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "z64", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	want := map[string]zipEntry{}
	for i, n := range []int{10, 999, 1000, 5000, 300 << 10} {
		name := fmt.Sprintf("f%d.bin", i)
		data := randBytes(uint64(40+i), n)
		e.write(t, root.FolderID, name, data)
		want[name] = zipEntry{data: data}
	}
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "late dir", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want["late dir/"] = zipEntry{dir: true}
	e.write(t, d.ID, "x.txt", []byte("past the threshold"))
	want["late dir/x.txt"] = zipEntry{data: []byte("past the threshold")}
	z, b := zipBytes(t, e.fs, root.ID, root.FolderID, vfs.ZipOptions{})
	if int64(len(b)) != z.Size() {
		t.Fatalf("%d bytes read, Size %d", len(b), z.Size())
	}
	if binary.LittleEndian.Uint32(b[len(b)-42:]) != 0x07064b50 {
		t.Fatal("no Zip64 end of central directory locator")
	}
	checkZip(t, b, want)
	berthtest.UnzipTest(t, b)
}

// zip64AtThresholds: with the Zip64 threshold at 1,000 bytes, sizes and
// offsets one below it, at it and one past it: a 32-bit field holds
// 0xFFFFFFFF (and the Zip64 extra the value) exactly from the threshold
// on, as 4 GiB does (0xFFFFFFFF is itself the mark, never a size), the
// end records likewise for the central directory's offset, and the
// archive reads whole in archive/zip and unzip.
func zip64AtThresholds(t *testing.T) {
	const at = 1000
	// A one-letter file's local header is 30+1+9 bytes: "a" of 960
	// bytes puts "b"'s header (or, alone, the central directory) at
	// 1,000.
	for _, c := range []struct {
		name  string
		sizes []int // of "a", "b", ...
	}{
		{"an offset one below", []int{959, 5}},
		{"an offset at it", []int{960, 5}},
		{"an offset one past", []int{961, 5}},
		{"a size one below", []int{at - 1}},
		{"a size at it", []int{at}},
		{"a size one past", []int{at + 1, 3}},
		{"the central directory at it", []int{960}},
		{"the central directory one below", []int{959}},
		{"empty files around it", []int{960, 0, 0}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnvWith(t, vfs.WithZip64Threshold(vfs.Options{}, at))
			want := map[string]zipEntry{}
			for i, n := range c.sizes {
				name := string(rune('a' + i))
				data := randBytes(uint64(100+i), n)
				e.write(t, e.root.FolderID, name, data)
				want[name] = zipEntry{data: data}
			}
			z, b := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
			if int64(len(b)) != z.Size() {
				t.Fatalf("%d bytes read, Size %d", len(b), z.Size())
			}
			checkZip(t, b, want)
			berthtest.UnzipTest(t, b)
			// The central directory, record by record.
			le := binary.LittleEndian
			end := b[len(b)-22:]
			cdOff := int64(le.Uint32(end[16:]))
			has64 := len(b) >= 42 && le.Uint32(b[len(b)-42:]) == 0x07064b50
			if has64 {
				end64 := b[le.Uint64(b[len(b)-42+8:]):]
				cdOff = int64(le.Uint64(end64[48:]))
			}
			var off int64
			for i, n := range c.sizes {
				if le.Uint32(b[cdOff:]) != 0x02014b50 {
					t.Fatalf("entry %d: no central record at %d", i, cdOff)
				}
				rec := b[cdOff:]
				if sized := le.Uint32(rec[24:]) == 0xffffffff; sized != (n >= at) {
					t.Errorf("entry %d of %d bytes: size field %#x", i, n, le.Uint32(rec[24:]))
				}
				if placed := le.Uint32(rec[42:]) == 0xffffffff; placed != (off >= at) {
					t.Errorf("entry %d at %d: offset field %#x", i, off, le.Uint32(rec[42:]))
				}
				local := int64(30 + 1 + 9)
				if n >= at {
					local += 20
				}
				off += local + int64(n)
				cdOff += 46 + int64(le.Uint16(rec[28:])) + int64(le.Uint16(rec[30:])) + int64(le.Uint16(rec[32:]))
			}
			if has64 != (off >= at) {
				t.Errorf("central directory at %d: Zip64 end records %v", off, has64)
			}
		})
	}
}

// zipExactSizeAndStableETag: Size is the number of bytes read, and two
// layouts of an unchanged folder give the same ETag and the same bytes.
func zipExactSizeAndStableETag(t *testing.T) {
	e := newEnv(t)
	want := zipTree(t, e)
	z1, b1 := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	z2, b2 := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if z1.Size() != int64(len(b1)) {
		t.Errorf("Size %d, %d bytes read", z1.Size(), len(b1))
	}
	if z1.ETag() != z2.ETag() || !bytes.Equal(b1, b2) {
		t.Errorf("two layouts differ: ETags %s %s, bytes equal %v", z1.ETag(), z2.ETag(), bytes.Equal(b1, b2))
	}
	if !strings.HasPrefix(z1.ETag(), `"z`) {
		t.Errorf("ETag %s is not a strong tag of its own kind", z1.ETag())
	}
	checkZip(t, b1, want)
	berthtest.UnzipTest(t, b1)
	// WriteZip writes the same bytes.
	var buf bytes.Buffer
	if err := e.fs.WriteZip(context.Background(), &buf, e.root.ID, e.root.FolderID, vfs.ZipOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), b1) {
		t.Error("WriteZip's bytes differ from the Reader's")
	}
}

// zipReadsFromAnyOffset seeks to every record boundary and around it, in
// and past the data of files, into the central directory and the end
// records: each read gives the bytes of the whole archive at that offset.
func zipReadsFromAnyOffset(t *testing.T) {
	e := newEnv(t)
	zipTree(t, e)
	e.write(t, e.root.FolderID, "big.bin", randBytes(9, 3<<20+17))
	z, whole := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	zr, err := zip.NewReader(bytes.NewReader(whole), int64(len(whole)))
	if err != nil {
		t.Fatal(err)
	}
	offs := []int64{0, 1, z.Size() - 1, z.Size() - 22, z.Size() - 21, z.Size() / 2}
	for _, f := range zr.File {
		d, err := f.DataOffset()
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, d-1, d, d+1, d+int64(f.CompressedSize64)-1, d+int64(f.CompressedSize64))
	}
	// The central directory starts after the last entry's data.
	eocd := whole[len(whole)-22:]
	cd := int64(binary.LittleEndian.Uint32(eocd[16:]))
	offs = append(offs, cd-1, cd, cd+1, cd+47)
	ctx := context.Background()
	r := z.Reader(ctx)
	defer r.Close()
	for _, off := range offs {
		for _, n := range []int64{1, 100, 70 << 10} {
			if _, err := r.Seek(off, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(io.LimitReader(r, n))
			if err != nil {
				t.Fatalf("read %d at %d: %v", n, off, err)
			}
			end := min(off+n, int64(len(whole)))
			if !bytes.Equal(got, whole[off:end]) {
				t.Fatalf("read %d at %d: differs from the archive", n, off)
			}
		}
	}
	// Past the end: EOF.
	if _, err := r.Seek(z.Size()+5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Errorf("past the end: %d, %v", n, err)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Error("seek before the start accepted")
	}
}

// zipNoDriveLetters: a path that would begin with a drive letter begins
// with "<letter>_" instead, in local and central headers alike, and the
// archive stays whole; a colon anywhere else is the name's own.
func zipNoDriveLetters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "C:", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, c.ID, "x:", []byte("in the folder"))
	e.write(t, e.root.FolderID, "c:notes", []byte("notes"))
	e.write(t, e.root.FolderID, "1:", []byte("a digit"))
	e.write(t, e.root.FolderID, "CC:", []byte("two letters"))
	for _, tc := range []struct {
		folder uint64
		want   []string
	}{
		{e.root.FolderID, []string{"1:", "C_/", "C_/x:", "CC:", "c_notes"}},
		{c.ID, []string{"x_"}}, // the folder zipped is the top
	} {
		_, whole := zipBytes(t, e.fs, e.root.ID, tc.folder, vfs.ZipOptions{})
		zr, err := zip.NewReader(bytes.NewReader(whole), int64(len(whole)))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range zr.File {
			names = append(names, f.Name)
		}
		// Local headers name them as the central ones do.
		for _, raw := range []string{"C:/", "c:notes", "x:"} {
			if tc.folder == c.ID && bytes.Contains(whole, []byte(raw)) || raw != "x:" && bytes.Contains(whole, []byte(raw)) {
				t.Errorf("the archive still holds %q", raw)
			}
		}
		if strings.Join(names, "|") != strings.Join(tc.want, "|") {
			t.Errorf("names %q, want %q", names, tc.want)
		}
		berthtest.UnzipTest(t, whole)
	}
}

// zipDriveLettersKeptApart: the name that replaces a drive letter is
// none of its siblings' (and none another such name took): "c:notes"
// and "c_notes" side by side were two entries "c_notes", of which an
// extractor kept one.
func zipDriveLettersKeptApart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "D:", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "y", []byte("in D:"))
	if _, err := e.fs.Mkdir(ctx, e.root.ID, top, "D_", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.write(t, top, "c:notes", []byte("colon"))
	e.write(t, top, "c_notes", []byte("one"))
	e.write(t, top, "c__notes", []byte("two"))
	e.write(t, top, "c:x", []byte("no clash"))
	_, whole := zipBytes(t, e.fs, e.root.ID, top, vfs.ZipOptions{})
	zr, err := zip.NewReader(bytes.NewReader(whole), int64(len(whole)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	want := []string{"D__/", "D__/y", "D_/", "c___notes", "c_x", "c__notes", "c_notes"}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("names %q, want %q", names, want)
	}
	berthtest.UnzipTest(t, whole)
}

// zipCentralInAnyOrder reads the central records of a zip of many
// entries from the last to the first, as a Range of many parts may ask:
// each read is the archive's bytes, and finds its record walking at most
// vfs.ZipCentralMark records, where each walked from the first entry.
func zipCentralInAnyOrder(t *testing.T) {
	e := newEnv(t)
	const files = 3000
	for i := range files {
		e.write(t, e.root.FolderID, fmt.Sprintf("f%05d.txt", i), []byte{byte(i)})
	}
	z, whole := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	eocd := whole[len(whole)-22:]
	var recs []int64 // where each central record starts
	for off := int64(binary.LittleEndian.Uint32(eocd[16:])); binary.LittleEndian.Uint32(whole[off:]) == 0x02014b50; {
		recs = append(recs, off)
		off += 46 + int64(binary.LittleEndian.Uint16(whole[off+28:])) + int64(binary.LittleEndian.Uint16(whole[off+30:])) + int64(binary.LittleEndian.Uint16(whole[off+32:]))
	}
	if len(recs) != files {
		t.Fatalf("%d central records, want %d", len(recs), files)
	}
	r := z.Reader(context.Background())
	defer r.Close()
	const parts = 100
	for i := range parts {
		off := recs[len(recs)-1-i*len(recs)/parts] + int64(i%3) // into a record too
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(r, 60))
		if err != nil || !bytes.Equal(got, whole[off:off+60]) {
			t.Fatalf("read at %d: %v, or differs from the archive", off, err)
		}
	}
	if walked, most := vfs.ZipWalked(r), parts*vfs.ZipCentralMark; walked > most {
		t.Errorf("%d reads walked %d central records, want at most %d", parts, walked, most)
	}
}

// zipResumedAt60Percent cuts a read at 60% and resumes it from a new
// layout at that offset (as a Range request would): the joined bytes are
// the archive, and unzip tests it whole.
func zipResumedAt60Percent(t *testing.T) {
	e := newEnv(t)
	want := zipTree(t, e)
	for i := range 5 {
		name := fmt.Sprintf("part%d.bin", i)
		data := randBytes(uint64(70+i), 400<<10+i)
		e.write(t, e.root.FolderID, name, data)
		want[name] = zipEntry{data: data}
	}
	ctx := context.Background()
	z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cut := z.Size() * 6 / 10
	r := z.Reader(ctx)
	first, err := io.ReadAll(io.LimitReader(r, cut))
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	z2, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if z2.ETag() != z.ETag() {
		t.Fatal("the ETag changed with nothing changed")
	}
	r2 := z2.Reader(ctx)
	defer r2.Close()
	if _, err := r2.Seek(cut, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r2)
	if err != nil {
		t.Fatal(err)
	}
	joined := append(first, rest...)
	if int64(len(joined)) != z.Size() {
		t.Fatalf("joined %d bytes, Size %d", len(joined), z.Size())
	}
	checkZip(t, joined, want)
	berthtest.UnzipTest(t, joined)
}

// zipETagChanges: every change of what the archive holds changes its ETag.
func zipETagChanges(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	f := e.write(t, e.root.FolderID, "f.txt", []byte("one"))
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g := e.write(t, d.ID, "g.txt", []byte("two"))
	etag := func() string {
		z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return z.ETag()
	}
	seen := map[string]string{etag(): "start"}
	for _, c := range []struct {
		name   string
		change func() error
	}{
		{"a file rewritten", func() error {
			_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "f.txt", strings.NewReader("uno"), vfs.WriteOptions{})
			return err
		}},
		{"a file added deep", func() error {
			_, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, "h.txt", strings.NewReader("x"), vfs.WriteOptions{})
			return err
		}},
		{"a file renamed", func() error {
			_, err := e.fs.Move(ctx, e.root.ID, g.ID, d.ID, "g2.txt", vfs.WriteOptions{})
			return err
		}},
		{"a file moved up", func() error {
			_, err := e.fs.Move(ctx, e.root.ID, g.ID, e.root.FolderID, "", vfs.WriteOptions{})
			return err
		}},
		{"a file deleted", func() error { return e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}) }},
		{"an empty folder added", func() error {
			_, err := e.fs.Mkdir(ctx, e.root.ID, d.ID, "e", vfs.WriteOptions{})
			return err
		}},
	} {
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tag := etag()
		if prev, ok := seen[tag]; ok {
			t.Errorf("%s: ETag %s as after %q", c.name, tag, prev)
		}
		seen[tag] = c.name
	}
}

// zipEmptyFolder: an empty folder is an archive of no entries, the end
// record alone.
func zipEmptyFolder(t *testing.T) {
	e := newEnv(t)
	z, b := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if z.Size() != 22 || len(b) != 22 || z.Entries() != 0 {
		t.Fatalf("Size %d, %d bytes, %d entries; want 22, 22, 0", z.Size(), len(b), z.Entries())
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil || len(zr.File) != 0 {
		t.Fatalf("archive/zip: %v, %d files", err, len(zr.File))
	}
}

// zipCRCKeptAtWrite: a revision's CRC-32 is computed as it is written,
// inline and chunked alike, and survives a copy.
func zipCRCKeptAtWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, c := range []struct {
		name string
		data []byte
		// pieces, when set, are the ends of the appends of a staged
		// upload (tus) that writes the file instead of WriteFile.
		pieces []int
	}{
		{"empty", nil, nil},
		{"inline", []byte("small and kept in its record"), nil},
		{"at InlineMax", randBytes(5, vfs.InlineMax), nil},
		{"chunked", randBytes(6, 5<<20+3), nil},
		{"staged, one append", randBytes(7, 300<<10), []int{300 << 10}},
		{"staged, small", []byte("a few bytes, staged"), []int{5, 19}},
		{"staged, tails cut again", randBytes(8, 9<<20+11), []int{1, 3 << 20, 3<<20 + 7, 9<<20 + 11}},
		{"staged, empty", nil, []int{}},
	} {
		var n vfs.Node
		if c.pieces == nil {
			n = e.write(t, e.root.FolderID, c.name, c.data)
		} else {
			st := e.stage(t, c.name, int64(len(c.data)), vfs.WriteOptions{})
			from := 0
			for _, to := range c.pieces {
				e.appendAll(t, st.ID, c.data, from, to)
				from = to
			}
			var err error
			if n, err = e.fs.Finish(ctx, st.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		cp, err := e.fs.Copy(ctx, e.root.ID, n.ID, e.root.ID, e.root.FolderID, c.name+" copy", vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []uint64{n.ID, cp.ID} {
			f, err := e.fs.Open(ctx, e.root.ID, id)
			if err != nil {
				t.Fatal(err)
			}
			crc, ok := f.Revision.CRC()
			f.Close()
			if want := crc32.ChecksumIEEE(c.data); !ok || crc != want {
				t.Errorf("%s (item %d): CRC %08x %v, want %08x", c.name, id, crc, ok, want)
			}
		}
	}
}

// zipCRCOfStagedAppendInPart: an append whose chunks take several
// transactions and that fails between them leaves the upload at an
// offset its CRC was not carried to; appends go on from there, and the
// file finished must not carry a CRC of other bytes (unzip -t fails on
// it): unknown, its first zip computes it.
func zipCRCOfStagedAppendInPart(t *testing.T) {
	cut, cancel := context.WithCancel(context.Background())
	var cutting bool
	e := openEnvWith(t, t.TempDir(), vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{}, 1), func(vfs.Op) {
		if cutting {
			cancel()
		}
	}))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "staged", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	data := randBytes(9, 9<<20+5)
	st := e.stage(t, "cut.bin", int64(len(data)), vfs.WriteOptions{})
	e.appendAll(t, st.ID, data, 0, 1<<20)
	cutting = true
	if _, err := e.fs.Append(cut, st.ID, 1<<20, bytes.NewReader(data[1<<20:]), vfs.AppendOptions{}); err == nil {
		t.Fatal("the append cut between its transactions succeeded")
	}
	cutting = false
	info, err := e.fs.StagedInfo(ctx, st.ID)
	if err != nil {
		t.Fatal(err)
	}
	if info.Offset <= 1<<20 || info.Offset >= int64(len(data)) {
		t.Fatalf("offset %d: the append was not committed in part", info.Offset)
	}
	e.appendAll(t, st.ID, data, int(info.Offset), len(data))
	n, err := e.fs.Finish(ctx, st.ID, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.fs.Open(ctx, root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	crc, ok := f.Revision.CRC()
	f.Close()
	if want := crc32.ChecksumIEEE(data); ok && crc != want {
		t.Errorf("CRC %08x, want %08x or none", crc, want)
	}
	_, b := zipBytes(t, e.fs, root.ID, root.FolderID, vfs.ZipOptions{})
	checkZip(t, b, map[string]zipEntry{"cut.bin": {data: data}})
	berthtest.UnzipTest(t, b)
}

// zipRevisionsWithoutCRC: revisions stored before berth kept CRCs are read
// once to compute theirs, which is then stored; the archive is the same
// as with the CRCs known, from the start or from a Range into the central
// directory.
func zipRevisionsWithoutCRC(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	want := zipTree(t, e)
	z0, b0 := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	// Held, its layout, CRCs known, would be shared with the next
	// archive of the same bytes, which would then compute none.
	z0.Close()
	var files []vfs.Node
	var walk func(uint64)
	walk = func(folder uint64) {
		kids, _, err := e.fs.List(ctx, e.root.ID, folder)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			if k.Dir {
				walk(k.ID)
			} else {
				files = append(files, k)
			}
		}
	}
	walk(e.root.FolderID)
	drop := func() {
		for _, f := range files {
			if err := e.fs.DropCRC(ctx, f.ID, f.RevisionID); err != nil {
				t.Fatal(err)
			}
		}
	}
	drop()
	z1, b1 := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if z1.ETag() != z0.ETag() || !bytes.Equal(b0, b1) {
		t.Fatal("the archive differs when CRCs are computed")
	}
	checkZip(t, b1, want)
	crcsKept(t, e, files)
	z1.Close()
	// A Range that starts in the central directory, CRCs unknown.
	drop()
	z2, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cd := int64(binary.LittleEndian.Uint32(b0[len(b0)-6:]))
	r := z2.Reader(ctx)
	defer r.Close()
	if _, err := r.Seek(cd, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	tail, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(tail, b0[cd:]) {
		t.Fatalf("central directory read alone: %v, equal %v", err, bytes.Equal(tail, b0[cd:]))
	}
}

// zipCRCsOfSmallFilesKept: the CRCs an archive computes are stored for
// small files too, whose revision records hold their contents: a batch of
// them weighs more than one transaction takes (256 of InlineMax bytes,
// 4 MiB), so the records are written in commits bounded by bytes.
func zipCRCsOfSmallFilesKept(t *testing.T) {
	e := newEnv(t)
	const files = 260
	var nodes []vfs.Node
	for i := range files {
		n := e.write(t, e.root.FolderID, fmt.Sprintf("f%03d", i), randBytes(uint64(i), vfs.InlineMax))
		if err := e.fs.DropCRC(ctx, n.ID, n.RevisionID); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	crcsKept(t, e, nodes)
}

// crcsKept fails for each of files whose current revision has no CRC.
func crcsKept(t *testing.T, e *env, files []vfs.Node) {
	t.Helper()
	for _, f := range files {
		o, err := e.fs.Open(ctx, e.root.ID, f.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := o.Revision.CRC(); !ok {
			t.Errorf("%s: CRC not stored after the zip", f.Name)
		}
		o.Close()
	}
}

// zipSnapshotOfTheListing: the archive is what the layout listed. Items
// moved, rewritten or deleted afterwards leave its bytes as they were
// (the revisions listed are read), and a new layout has another ETag.
func zipSnapshotOfTheListing(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "a", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "b", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	one := randBytes(1, 1<<20)
	e.write(t, a.ID, "1.bin", one)
	three := e.write(t, a.ID, "3.txt", []byte("three"))
	gone := e.write(t, a.ID, "gone.txt", []byte("gone"))
	_, before := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	z, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, three.ID, b.ID, "", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.write(t, a.ID, "1.bin", []byte("rewritten"))
	r := z.Reader(ctx)
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, before) {
		t.Error("the archive changed with the folder after its layout")
	}
	z2, after := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, vfs.ZipOptions{})
	if z2.ETag() == z.ETag() {
		t.Error("the ETag did not change with the folder")
	}
	checkZip(t, after, map[string]zipEntry{
		"a/": {dir: true}, "a/1.bin": {data: []byte("rewritten")},
		"b/": {dir: true}, "b/3.txt": {data: []byte("three")},
	})
}

// zipBudget: the layouts of the zips being served hold at most the
// budget's bytes together, names included (each is in memory until its
// answer ends, and nothing else bounded how many were): a zip past it is
// ErrBusy until one ends, one whose own entries pass half of it (what
// one requester may hold) ErrZipTooLarge, and every way a zip ends gives
// its entries back (Close, a WriteZip, a layout that failed).
func zipBudget(t *testing.T) {
	// A folder of 4 entries of one-byte names, under a budget of 12 such:
	// one requester may hold 6.
	short := int64(vfs.ZipEntryCost + 1)
	e := openEnvWith(t, t.TempDir(), vfs.WithZipBudget(vfs.WithZipMaxEntries(vfs.Options{}, 4), 12*short))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "budget", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	e.write(t, d.ID, "1", []byte("1"))
	e.write(t, d.ID, "2", []byte("2"))
	three := e.write(t, root.FolderID, "3", []byte("3"))
	zip := func() (*vfs.Zip, error) { return e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{}) }

	first, err := zip()
	if err != nil {
		t.Fatal(err)
	}
	// A second request for the same archive shares the first's layout,
	// which is held once.
	second, err := zip()
	if err != nil {
		t.Fatalf("a second zip of the same 4 entries beside the first: %v, want it to share the first's layout", err)
	}
	if total, by := e.fs.ZipHeld(); total != 4*short {
		t.Fatalf("two zips of one layout of 4 entries hold %d bytes (%v), want %d", total, by, 4*short)
	}
	// The same entries chosen one by one are another archive, laid out
	// apart: past the requester's half beside the first.
	if _, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{FileIDs: []uint64{three.ID}, FolderIDs: []uint64{d.ID}}); !errors.Is(err, vfs.ErrBusy) {
		t.Fatalf("another zip of 4 entries beside the first, 6 of 12 a requester's: %v, want ErrBusy", err)
	}
	// The folder d alone (2 entries) fits beside the first.
	small, err := e.fs.Zip(ctx, root.ID, d.ID, vfs.ZipOptions{})
	if err != nil {
		t.Fatalf("a zip of 2 entries beside one of 4, 6 of 12 a requester's: %v", err)
	}
	small.Close()
	first.Close()
	first.Close() // a second Close gives nothing back twice
	if total, by := e.fs.ZipHeld(); total != 4*short {
		t.Fatalf("the first closed twice, the second open: %d bytes held (%v), want %d", total, by, 4*short)
	}
	second.Close()
	if total, by := e.fs.ZipHeld(); total != 0 || e.fs.ZipLayouts() != 0 {
		t.Fatalf("every zip closed: %d bytes held (%v), %d layouts kept", total, by, e.fs.ZipLayouts())
	}
	for i := range 3 {
		z, err := zip()
		if err != nil {
			t.Fatalf("zip %d after the first's Close: %v", i, err)
		}
		z.Close()
	}
	// WriteZip gives its entries back when it returns, and so does a
	// layout that fails (ErrZipTooLarge, past 4 entries).
	for i := range 3 {
		if err := e.fs.WriteZip(ctx, io.Discard, root.ID, root.FolderID, vfs.ZipOptions{}); err != nil {
			t.Fatalf("WriteZip %d: %v", i, err)
		}
	}
	e.write(t, d.ID, "extra", []byte("x"))
	for i := range 3 {
		if _, err := zip(); !errors.Is(err, vfs.ErrZipTooLarge) {
			t.Fatalf("zip %d of 5 entries: %v, want ErrZipTooLarge", i, err)
		}
	}
	if _, err := e.fs.Zip(ctx, root.ID, d.ID, vfs.ZipOptions{}); err != nil {
		t.Fatalf("after three layouts that failed: %v", err)
	}
	// Names count: an entry of a name of 200 bytes holds some three
	// times what one of a short name does, and anyone who may create
	// items chooses their names. Counted in entries, zips of such names
	// held over three times the memory the budget was meant to bound.
	long := strings.Repeat("n", 200)
	for _, tc := range []struct {
		name  string
		files int
		zips  int   // held at once
		want  error // of the last
	}{
		{"one long name beside another zip of it", 1, 2, vfs.ErrBusy},
		{"two long names alone past half the budget", 2, 1, vfs.ErrZipTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ld, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "l"+fmt.Sprint(tc.files), vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var ids []uint64
			for i := range tc.files {
				ids = append(ids, e.write(t, ld.ID, fmt.Sprint(i)+long, []byte("x")).ID)
			}
			var err2 error
			for k := range tc.zips {
				// The files chosen by id after the first: another
				// archive of the same entries, not a share of it.
				var opts vfs.ZipOptions
				if k > 0 {
					opts.FileIDs = ids
				}
				z, err := e.fs.Zip(ctx, root.ID, ld.ID, opts)
				if err2 = err; err != nil {
					break
				}
				defer z.Close()
			}
			if !errors.Is(err2, tc.want) {
				t.Fatalf("zip %d of %d entries of %d-byte names, budget %d: %v, want %v", tc.zips, tc.files, len(long)+1, 12*short, err2, tc.want)
			}
		})
	}
}

// zipBudgetShared: the zips of one requester hold at most half of what
// the other requesters' zips leave of the budget, so one who holds zips
// open (a share link's zip read slowly, or many at once) cannot keep
// another's zip from being served: with the budget alone, requester a
// held it all and every other zip was ErrBusy until a's ended. A
// requester alone may still hold half of it. Each row opens a zip and
// keeps it open, or closes every zip of a requester.
func zipBudgetShared(t *testing.T) {
	// Folders of 1, 4 and 8 entries of one-byte names, under a budget of
	// 16 such: a requester alone may hold 8.
	short := int64(vfs.ZipEntryCost + 1)
	e := openEnvWith(t, t.TempDir(), vfs.WithZipBudget(vfs.Options{}, 16*short))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "shared", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	// Each row zips a folder of its own, laid out apart, unless it names
	// an earlier row's (same), whose layout it then shares.
	folders := map[string]uint64{}
	open := map[string][]*vfs.Zip{}
	for i, row := range []struct {
		name    string
		who     string
		group   string // ZipOptions.Group
		entries int    // of the folder zipped; 0 closes who's zips
		want    error
		tag     string // names the row's folder for a later row's same
		same    string
		total   int // entries' worth held after it, when not 0
	}{
		{name: "a's first zip", who: "link:1", entries: 4},
		{name: "a's second, half the budget", who: "link:1", entries: 4},
		{name: "a's third, past half", who: "link:1", entries: 1, want: vfs.ErrBusy},
		{name: "another requester beside a holding half", who: "person:2", entries: 4},
		{name: "a third requester in what both leave", who: "person:3", entries: 1},
		{name: "the third past half of what they leave", who: "person:3", entries: 4, want: vfs.ErrBusy},
		{name: "a can take no more while the others hold theirs", who: "link:1", entries: 1, want: vfs.ErrBusy},
		{name: "a's zips end", who: "link:1"},
		{name: "the second grows into what a gave back", who: "person:2", entries: 1},
		{name: "a again, in half of what the others leave", who: "link:1", entries: 4},
		{name: "everyone's zips end"},
		{name: "a requester alone holds half the budget", who: "link:1", entries: 8},
		{name: "a requester alone is held to half", who: "person:2", entries: 9, want: vfs.ErrZipTooLarge},
		{name: "another beside the lone one, in a quarter", who: "person:2", entries: 4},
		{name: "everyone's zips end again"},
		// A person's share links are requesters each, and the person
		// makes as many as they like: with the half of what the others
		// leave per requester alone, ten links held all but 1/2048 of
		// the budget, and every other zip of the server was busy.
		{name: "a person's link alone holds half", who: "link:11", group: "links of person:9", entries: 8},
		{name: "the same person's next link, in what the first left of their half", who: "link:12", group: "links of person:9", entries: 1, want: vfs.ErrBusy},
		{name: "the person's own zip, apart from their links'", who: "person:9", entries: 1},
		{name: "another person beside them", who: "person:2", entries: 1},
		{name: "the first link's zips end", who: "link:11"},
		{name: "the person's next link in the half given back", who: "link:12", group: "links of person:9", entries: 4},
		{name: "everyone's zips end before they share"},
		// Requests for the same archive share its layout: the segments
		// of one download fetched in parallel held one layout each, and
		// the second of a folder of more than a quarter of the budget
		// was busy.
		{name: "a zips a folder of half the budget", who: "link:1", entries: 8, tag: "big", total: 8},
		{name: "a's second request for it shares its layout", who: "link:1", same: "big", total: 8},
		{name: "and a third", who: "link:1", same: "big", total: 8},
		// Each requester that holds a shared layout is charged all of
		// it: it stays in memory for as long as any of them reads it.
		{name: "another requester joins it, held once", who: "person:2", same: "big", total: 8},
		{name: "who holds it lays out nothing more: alone it would hold half", who: "person:2", entries: 1, want: vfs.ErrBusy},
		{name: "a's requests end, the other's keep the layout", who: "link:1"},
		{name: "a fourth requester beside it, in a quarter", who: "person:4", entries: 4, tag: "four", total: 12},
		{name: "who holds a layout laid out by another joins no more past half", who: "person:2", same: "four", want: vfs.ErrBusy},
	} {
		if row.entries == 0 && row.same == "" {
			for who, zs := range open {
				if row.who == "" || who == row.who {
					for _, z := range zs {
						z.Close()
					}
					delete(open, who)
				}
			}
			continue
		}
		folder, ok := folders[row.same]
		if !ok {
			d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, fmt.Sprint("row", i), vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for k := range row.entries {
				e.write(t, d.ID, string(rune('a'+k)), []byte("x"))
			}
			folder = d.ID
			if row.tag != "" {
				folders[row.tag] = folder
			}
		}
		z, err := e.fs.Zip(ctx, root.ID, folder, vfs.ZipOptions{Requester: row.who, Group: row.group})
		total, by := e.fs.ZipHeld()
		if !errors.Is(err, row.want) || (err == nil) != (row.want == nil) {
			t.Fatalf("%s: %s's zip of %d entries: %v, want %v (held %d of %d: %v)", row.name, row.who, row.entries, err, row.want, total, 16*short, by)
		}
		if row.total != 0 && total != int64(row.total)*short {
			t.Fatalf("%s: held %d (%v), want %d entries' worth", row.name, total, by, row.total)
		}
		if err == nil {
			open[row.who] = append(open[row.who], z)
		}
	}
	for _, zs := range open {
		for _, z := range zs {
			z.Close()
		}
	}
	if total, by := e.fs.ZipHeld(); total != 0 || len(by) != 0 || e.fs.ZipLayouts() != 0 {
		t.Errorf("every zip closed, %d bytes still held: %v, %d layouts kept", total, by, e.fs.ZipLayouts())
	}
}

// zipBudgetGivenBack: every way a zip ends gives its share back, and a
// requester holding none is forgotten: after many rounds of zips that
// end (Close, twice; a WriteZip read whole, or cut by its client going
// away mid-archive; a layout cancelled while it lists; ErrBusy; requests
// sharing a layout, ended in any order; requests cancelled while they
// wait for a layout), nothing is held, no layout is kept, and a
// requester alone holds half the budget again. The ways run at once for
// the same folder, so their requests share and wait for each other's
// layouts.
func zipBudgetGivenBack(t *testing.T) {
	// 64 files of three-byte names; a requester alone may hold them all.
	const files = 64
	e := openEnvWith(t, t.TempDir(), vfs.WithZipBudget(vfs.Options{}, 2*files*(vfs.ZipEntryCost+3)))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "rounds", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	var ids []uint64
	for i := range files - 1 {
		ids = append(ids, e.write(t, root.FolderID, fmt.Sprintf("f%02d", i), randBytes(uint64(i), 64<<10)).ID)
	}
	ids = append(ids, e.write(t, root.FolderID, "end", nil).ID)
	ways := []struct {
		name string
		end  func(who string) error
	}{
		{"Close", func(who string) error {
			z, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
			if err != nil {
				return err
			}
			r := z.Reader(ctx)
			io.CopyN(io.Discard, r, 100<<10)
			r.Close()
			z.Close()
			z.Close()
			return nil
		}},
		{"WriteZip read whole", func(who string) error {
			return e.fs.WriteZip(ctx, io.Discard, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
		}},
		{"WriteZip whose client goes away", func(who string) error {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			err := e.fs.WriteZip(cctx, &cancelAfter{limit: 1 << 20, cancel: cancel}, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
			if errors.Is(err, vfs.ErrBusy) || errors.Is(err, context.Canceled) {
				return err
			}
			return fmt.Errorf("cut: %v, want context.Canceled", err)
		}},
		{"a layout cancelled", func(who string) error {
			cctx, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := e.fs.Zip(cctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who}); !errors.Is(err, context.Canceled) {
				return fmt.Errorf("cancelled: %v, want context.Canceled", err)
			}
			return nil
		}},
		{"ErrBusy beside one held", func(who string) error {
			z, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
			if err != nil {
				return err
			}
			defer z.Close()
			// The same files chosen by id: another archive, laid out
			// apart (one of the same would share the first's layout).
			if _, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who, FileIDs: ids}); !errors.Is(err, vfs.ErrBusy) {
				return fmt.Errorf("a second beside one held: %v, want ErrBusy", err)
			}
			return nil
		}},
		{"shared by requests that end in any order", func(who string) error {
			var zs []*vfs.Zip
			defer func() {
				for _, z := range zs {
					z.Close()
				}
			}()
			for range 3 {
				z, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
				if err != nil {
					return err
				}
				zs = append(zs, z)
			}
			zs[1].Close()
			r := zs[2].Reader(ctx)
			io.CopyN(io.Discard, r, 100<<10)
			zs[2].Close()
			r.Close()
			return nil
		}},
		{"a request cancelled while it waits", func(who string) error {
			cctx, cancel := context.WithCancel(ctx)
			errc := make(chan error, 8)
			for range cap(errc) {
				go func() {
					z, err := e.fs.Zip(cctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: who})
					if err == nil {
						z.Close()
					}
					errc <- err
				}()
			}
			cancel()
			for range cap(errc) {
				if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, vfs.ErrBusy) {
					return fmt.Errorf("cancelled: %v", err)
				}
			}
			return nil
		}},
	}
	for round := range 20 {
		var wg sync.WaitGroup
		errs := make(chan error, len(ways))
		for i, w := range ways {
			wg.Go(func() {
				who := fmt.Sprintf("r%d-%d", round, i)
				for {
					err := w.end(who)
					// Others' zips may hold what this one's share
					// needs: it tries again once they end.
					if errors.Is(err, vfs.ErrBusy) {
						time.Sleep(time.Millisecond)
						continue
					}
					if err != nil && !errors.Is(err, context.Canceled) {
						errs <- fmt.Errorf("%s: %w", w.name, err)
					}
					return
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: %v", round, err)
		}
	}
	if total, by := e.fs.ZipHeld(); total != 0 || len(by) != 0 || e.fs.ZipLayouts() != 0 {
		t.Fatalf("after every zip ended, %d bytes held: %v, %d layouts kept", total, by, e.fs.ZipLayouts())
	}
	z, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{Requester: "alone"})
	if err != nil {
		t.Fatalf("a requester alone, half the budget: %v", err)
	}
	z.Close()
}

// zipBudgetWhileListing: a layout reserves its entries of the budget as
// it lists them, so one refused lists little past the budget. Reserved
// once a folder's children were all listed, concurrent layouts of a
// folder of ZipMaxEntries children of long names each held some 170 MiB
// before the budget refused any of them.
func zipBudgetWhileListing(t *testing.T) {
	const budget = 64 << 10
	e := openEnvWith(t, t.TempDir(), vfs.WithZipBudget(vfs.Options{}, budget))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "listing", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", 200)
	fit := budget / (vfs.ZipEntryCost + len(long) + 4)
	const kids = 3000 // some 13 times what fits
	for i := range kids {
		if _, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, fmt.Sprintf("%04d", i)+long, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var zerr error
	allocs := testing.AllocsPerRun(1, func() {
		_, zerr = e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{})
	})
	if !errors.Is(zerr, vfs.ErrZipTooLarge) {
		t.Fatalf("a folder of %d entries, %d of which fit the budget: %v, want ErrZipTooLarge", kids, fit, zerr)
	}
	// Listing an entry costs a few allocations (its record, its name);
	// listing them all, more than kids.
	if allocs > kids {
		t.Errorf("a layout refused by a budget of %d entries made %.0f allocations: it listed all %d first", fit, allocs, kids)
	}
}

// zipTooManyEntries: a folder of more entries than the bound is
// ErrZipTooLarge before a byte is read, however the entries nest; at the
// bound it zips.
func zipTooManyEntries(t *testing.T) {
	e := openEnvWith(t, t.TempDir(), vfs.WithZipMaxEntries(vfs.Options{}, 4))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "bound", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "1", []byte("1"))
	e.write(t, d.ID, "2", []byte("2"))
	e.write(t, root.FolderID, "3", []byte("3"))
	if z, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{}); err != nil || z.Entries() != 4 {
		t.Fatalf("at the bound: %v", err)
	}
	for _, c := range []struct {
		name   string
		parent uint64
	}{{"at the top", root.FolderID}, {"nested", d.ID}} {
		n := e.write(t, c.parent, "extra", []byte("x"))
		_, err := e.fs.Zip(ctx, root.ID, root.FolderID, vfs.ZipOptions{})
		if !errors.Is(err, vfs.ErrZipTooLarge) {
			t.Errorf("%s: %v, want ErrZipTooLarge", c.name, err)
		}
		var buf bytes.Buffer
		if err := e.fs.WriteZip(ctx, &buf, root.ID, root.FolderID, vfs.ZipOptions{}); !errors.Is(err, vfs.ErrZipTooLarge) || buf.Len() != 0 {
			t.Errorf("%s: WriteZip %v after %d bytes", c.name, err, buf.Len())
		}
		if err := e.fs.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// zipShared: requests for the same archive share one layout for as long
// as its folder is unchanged, charged to each requester once and held
// once (the gauges say so); a commit elsewhere lays it out afresh, which
// is dropped for the one held, even where the requester's share holds
// no second copy; a change in the folder is another archive, of another
// ETag, while the requests of the first still read the bytes its ETag
// names. Each row acts, then checks what is held.
func zipShared(t *testing.T) {
	// A folder of 4 entries of one-byte names, under a budget of 12 such:
	// a requester alone may hold 6, one copy of the layout.
	short := int64(vfs.ZipEntryCost + 1)
	reg := prometheus.NewRegistry()
	e := openEnvWith(t, t.TempDir(), vfs.WithZipBudget(vfs.Options{Registerer: reg}, 12*short))
	t.Cleanup(e.close)
	ctx := context.Background()
	root, err := e.fs.CreateRoot(ctx, "shared", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	d, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "1", []byte("1"))
	e.write(t, d.ID, "2", []byte("2"))
	three := e.write(t, root.FolderID, "3", []byte("3"))
	elsewhere, err := e.fs.CreateRoot(ctx, "elsewhere", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	zips := map[string]*vfs.Zip{}
	gauge := func(name string) int64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name {
				return int64(mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
		t.Fatalf("no %s", name)
		return 0
	}
	for _, row := range []struct {
		name       string
		act        func() error
		want       error
		held       int64 // entries' worth, in all
		requesters int64
		sameAs     string // the zip whose layout the row's (its name) shares
	}{
		{name: "first", act: zipAs(e, zips, "first", "r"), held: 4, requesters: 1},
		{name: "second", act: zipAs(e, zips, "second", "r"), held: 4, requesters: 1, sameAs: "first"},
		{name: "another requester's", act: zipAs(e, zips, "other", "s"), held: 4, requesters: 2, sameAs: "first"},
		{name: "a commit elsewhere", act: func() error {
			_, err := e.fs.Mkdir(ctx, elsewhere.ID, elsewhere.FolderID, "x", vfs.WriteOptions{})
			return err
		}, held: 4, requesters: 2},
		// Laid out afresh (the store moved), on credit of the layout r
		// holds: checked as it grew, it was busy.
		{name: "after it", act: zipAs(e, zips, "after", "r"), held: 4, requesters: 2, sameAs: "first"},
		{name: "the folder changed", act: func() error {
			_, err := e.fs.Rename(ctx, root.ID, three.ID, "x", vfs.WriteOptions{})
			return err
		}, held: 4, requesters: 2},
		{name: "who holds the old archive holds no new one past half", act: zipAs(e, zips, "busy", "r"), want: vfs.ErrBusy, held: 4, requesters: 2},
		{name: "the new archive beside the old", act: zipAs(e, zips, "changed", "t"), held: 8, requesters: 3},
		{name: "the old archive's requests end", act: func() error {
			for _, n := range []string{"first", "second", "other", "after"} {
				zips[n].Close()
			}
			return nil
		}, held: 4, requesters: 1},
		{name: "r again, in the new", act: zipAs(e, zips, "again", "r"), held: 4, requesters: 2, sameAs: "changed"},
		{name: "all end", act: func() error {
			zips["changed"].Close()
			zips["again"].Close()
			return nil
		}},
	} {
		if err := row.act(); !errors.Is(err, row.want) || (err == nil) != (row.want == nil) {
			t.Fatalf("%s: %v, want %v", row.name, err, row.want)
		}
		total, by := e.fs.ZipHeld()
		if total != row.held*short || gauge("berth_vfs_zip_layout_bytes") != total || gauge("berth_vfs_zip_requesters") != row.requesters {
			t.Fatalf("%s: %d bytes held (%v), gauges %d bytes and %d requesters; want %d entries' worth and %d requesters", row.name, total, by,
				gauge("berth_vfs_zip_layout_bytes"), gauge("berth_vfs_zip_requesters"), row.held, row.requesters)
		}
		if z, ok := zips[row.name]; ok && row.sameAs != "" && !vfs.SameZipLayout(z, zips[row.sameAs]) {
			t.Fatalf("%s: another layout than %s's", row.name, row.sameAs)
		}
	}
	if e.fs.ZipLayouts() != 0 {
		t.Fatalf("every zip closed, %d layouts kept", e.fs.ZipLayouts())
	}
	// What each archive's requests read is what its ETag names.
	if zips["changed"].ETag() == zips["first"].ETag() {
		t.Fatal("the folder changed, the ETag did not")
	}
	for n, want := range map[string]string{"first": "3", "changed": "x"} {
		r := zips[n].Reader(ctx)
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkZip(t, b, map[string]zipEntry{"d/": {dir: true}, "d/1": {data: []byte("1")}, "d/2": {data: []byte("2")}, want: {data: []byte("3")}})
	}
}

// zipAs returns what opens a zip of e's root for requester who and keeps
// it in zips as name.
func zipAs(e *env, zips map[string]*vfs.Zip, name, who string) func() error {
	return func() error {
		z, err := e.fs.Zip(context.Background(), e.root.ID, e.root.FolderID, vfs.ZipOptions{Requester: who})
		if err == nil {
			zips[name] = z
		}
		return err
	}
}

// zipNeverStale: a request that finds the store moved since the layout
// held was laid out shares it only if the folder's listing is still its
// own: each row changes the tree (rows add up) while a zip of it is
// held, then zips it again, and the second zip shares the first's
// layout exactly where nothing in the archive changed, and otherwise
// has the ETag and bytes of a layout made from nothing.
func zipNeverStale(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	mkdir := func(parent uint64, name string) vfs.Node {
		d, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := mkdir(e.root.FolderID, "a")
	one := e.write(t, a.ID, "1.txt", []byte("one"))
	b := mkdir(a.ID, "b")
	e.write(t, b.ID, "2.txt", []byte("two"))
	three := e.write(t, e.root.FolderID, "3.txt", []byte("three"))
	c := mkdir(e.root.FolderID, "c")
	elsewhere, err := e.fs.CreateRoot(ctx, "elsewhere", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	whole, only3 := vfs.ZipOptions{}, vfs.ZipOptions{FileIDs: []uint64{three.ID}}
	for _, row := range []struct {
		name   string
		opts   vfs.ZipOptions
		change func() error
		shared bool
	}{
		{"a commit elsewhere", whole, func() error {
			_, err := e.fs.Mkdir(ctx, elsewhere.ID, elsewhere.FolderID, "x", vfs.WriteOptions{})
			return err
		}, true},
		{"a file rewritten", whole, func() error { e.write(t, a.ID, "1.txt", []byte("ONE")); return nil }, false},
		{"a file added in a subfolder", whole, func() error { e.write(t, b.ID, "0.txt", []byte("zero")); return nil }, false},
		{"an empty folder added", whole, func() error { mkdir(c.ID, "empty"); return nil }, false},
		{"a file moved to another folder", whole, func() error {
			_, err := e.fs.Move(ctx, e.root.ID, one.ID, c.ID, "", vfs.WriteOptions{})
			return err
		}, false},
		{"a folder renamed", whole, func() error {
			_, err := e.fs.Rename(ctx, e.root.ID, b.ID, "B", vfs.WriteOptions{})
			return err
		}, false},
		{"a folder deleted", whole, func() error { return e.fs.Delete(ctx, e.root.ID, c.ID, vfs.WriteOptions{}) }, false},
		{"a change outside the entries chosen", only3, func() error { e.write(t, a.ID, "4.txt", []byte("four")); return nil }, true},
		{"a change of the entry chosen", only3, func() error { e.write(t, e.root.FolderID, "3.txt", []byte("THREE")); return nil }, false},
	} {
		held, err := e.fs.Zip(ctx, e.root.ID, e.root.FolderID, row.opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := row.change(); err != nil {
			t.Fatalf("%s: %v", row.name, err)
		}
		z, b := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, row.opts)
		if shared := vfs.SameZipLayout(z, held); shared != row.shared {
			t.Errorf("%s: the layout held shared: %v, want %v", row.name, shared, row.shared)
		}
		held.Close()
		z.Close()
		if e.fs.ZipLayouts() != 0 {
			t.Fatalf("%s: every zip closed, %d layouts kept", row.name, e.fs.ZipLayouts())
		}
		fresh, fb := zipBytes(t, e.fs, e.root.ID, e.root.FolderID, row.opts)
		if z.ETag() != fresh.ETag() || !bytes.Equal(b, fb) {
			t.Errorf("%s: ETag %s, one made from nothing %s; bytes equal %v", row.name, z.ETag(), fresh.ETag(), bytes.Equal(b, fb))
		}
		fresh.Close()
	}
}
