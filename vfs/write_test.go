package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"berth/vfs"
	"berth/vfs/chunk"
	"reflect"
)

// TestWrite holds the cases of storing a file (WriteFile): what a write
// keeps (revisions, deduplicated chunks, small files inline), what it
// refuses before storing a byte, and that a write that fails stores
// nothing. A write bug found later becomes a row here.
func TestWrite(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"WriteReadRevisions", writeReadRevisions},
		{"CancelledUploadStoresNothing", cancelledUploadStoresNothing},
		{"Deduplication", deduplication},
		{"InlineSmallFiles", inlineSmallFiles},
		{"BrokenSmallBodyStoresNothing", brokenSmallBodyStoresNothing},
		{"DeclaredSizeRefusedUnread", declaredSizeRefusedUnread},
		{"ExcludedExtensions", excludedExtensions},
	} {
		t.Run(tc.name, tc.run)
	}
}

func writeReadRevisions(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	for _, size := range []int{0, 1, 1 << 20, 3<<20 + 17} {
		data := randBytes(uint64(size), size)
		n := e.write(t, top, "f.bin", data)
		if n.Size != int64(size) || n.Path != "/f.bin" || n.Dir {
			t.Fatalf("node %+v", n)
		}
		if got := e.read(t, n.ID); !bytes.Equal(got, data) {
			t.Fatalf("size %d: contents differ", size)
		}
	}
	revs, err := e.fs.Revisions(ctx, e.root.ID, mustLookup(t, e, "/f.bin").ID)
	if err != nil || len(revs) != 4 {
		t.Fatalf("revisions %d %v", len(revs), err)
	}
	// An old revision stays readable.
	f, err := e.fs.OpenRevision(ctx, e.root.ID, revs[1].FileID, revs[1].ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(b, randBytes(1, 1)) {
		t.Fatal("old revision differs")
	}
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := vfs.Usage{FileCount: 1, HeadSize: 3<<20 + 17, RevisionCount: 3, RevisionSize: 1 + 1<<20,
		PhysicalSize: 3<<20 + 17 + 1 + 1<<20, RootCount: 1}
	if u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
}

func cancelledUploadStoresNothing(t *testing.T) {
	e := newEnv(t)
	old := e.write(t, e.root.FolderID, "f", []byte("keep me"))
	// Long enough that chunks are stored before the body breaks.
	r := io.MultiReader(bytes.NewReader(randBytes(7, 24<<20)), errReader{})
	if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "f", r, vfs.WriteOptions{}); err == nil {
		t.Fatal("broken body accepted")
	}
	if got := e.read(t, old.ID); string(got) != "keep me" {
		t.Fatalf("previous contents lost: %q", got)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	if n := countChunkFiles(t, e.dir); n != 0 {
		t.Fatalf("the broken upload left %d chunk files", n)
	}
	rep, err := e.fs.Fsck(ctx, true)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck: %v %v", rep, err)
	}
}

func deduplication(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB")
	}
	e := newEnv(t)
	data := randBytes(42, 64<<20)
	e.write(t, e.root.FolderID, "one", data)
	s1, _ := e.chunks.Size(ctx)
	e.write(t, e.root.FolderID, "two", data)
	s2, _ := e.chunks.Size(ctx)
	if grow := float64(s2-s1) / float64(s1); grow >= 0.01 {
		t.Fatalf("same 64 MiB under a second name grew the store by %.2f%%", 100*grow)
	}
	var n1 int
	e.chunks.Walk(ctx, func(chunk.ID) error { n1++; return nil })
	data[32<<20] ^= 0xff
	e.write(t, e.root.FolderID, "three", data)
	var n2 int
	e.chunks.Walk(ctx, func(chunk.ID) error { n2++; return nil })
	t.Logf("one-byte edit of 64 MiB: %d new chunks (of %d)", n2-n1, n1)
	if n2-n1 > 3 {
		t.Fatalf("one-byte edit added %d chunks", n2-n1)
	}
}

// Small files live in their revision record: no chunk is stored, and they
// read, copy, limit and purge like any other.
func inlineSmallFiles(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	for _, size := range []int{0, 1, vfs.InlineMax} {
		data := randBytes(uint64(size)+3, size)
		n := e.write(t, top, fmt.Sprint("s", size), data)
		if !bytes.Equal(e.read(t, n.ID), data) {
			t.Fatalf("inline %d bytes differ", size)
		}
	}
	if n, _ := e.chunks.Size(ctx); n != 0 {
		t.Fatalf("small files stored %d bytes of chunks", n)
	}
	big := e.write(t, top, "big", randBytes(9, vfs.InlineMax+1))
	if n, _ := e.chunks.Size(ctx); n == 0 {
		t.Fatal("a file over InlineMax stored no chunk")
	}
	cp, err := e.fs.Copy(ctx, e.root.ID, mustLookup(t, e, "/s1").ID, e.root.ID, top, "copy", vfs.WriteOptions{})
	if err != nil || !bytes.Equal(e.read(t, cp.ID), randBytes(4, 1)) {
		t.Fatalf("copy of an inline file: %v", err)
	}
	f, err := e.fs.Open(ctx, e.root.ID, big.ID)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if _, err := f.ReadAt(buf, 100); err != nil || !bytes.Equal(buf, randBytes(9, vfs.InlineMax+1)[100:110]) {
		t.Fatalf("ReadAt: %v", err)
	}
	f.Close()
	_, err = e.fs.WriteFile(ctx, e.root.ID, top, "x", strings.NewReader("12345"), vfs.WriteOptions{MaxFileSize: 4})
	if !errors.Is(err, vfs.ErrFileTooLarge) {
		t.Fatalf("inline over max size: %v", err)
	}
	if r, err := e.fs.Fsck(ctx, true); err != nil || !r.OK() {
		t.Fatalf("fsck %v %v", r, err)
	}
}

// A body that breaks before InlineMax bytes (a cut-off upload) stores
// nothing, even though it is short enough to be kept inline.
func brokenSmallBodyStoresNothing(t *testing.T) {
	e := newEnv(t)
	old := e.write(t, e.root.FolderID, "f", []byte("keep me"))
	for _, brk := range []error{io.ErrUnexpectedEOF, errors.New("connection reset")} {
		r := io.MultiReader(strings.NewReader("half a bo"), failing{brk})
		if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "f", r, vfs.WriteOptions{}); !errors.Is(err, brk) {
			t.Fatalf("broken small body: %v", err)
		}
	}
	if got := e.read(t, old.ID); string(got) != "keep me" {
		t.Fatalf("previous contents lost: %q", got)
	}
}

// A body announced over the limits is refused before a byte of it is read.
func declaredSizeRefusedUnread(t *testing.T) {
	e := newEnv(t)
	e.write(t, e.root.FolderID, "used", []byte("12345"))
	unread := failing{errors.New("body was read")}
	for _, c := range []struct {
		opts vfs.WriteOptions
		want error
	}{
		{vfs.WriteOptions{MaxFileSize: 10, DeclaredSize: 11}, vfs.ErrFileTooLarge},
		{vfs.WriteOptions{SpaceQuota: 10, DeclaredSize: 6}, vfs.ErrQuotaExceeded},
	} {
		if _, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "x", unread, c.opts); !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.opts, err, c.want)
		}
	}
}

// Excluded extensions follow the policy's rule: a suffix, any case, with or
// without its dot, possibly of several parts; a bare ".exe" is a name. The
// name a Windows client writes is held to it too: Win32 drops dots and
// spaces at a name's end, and NTFS takes what follows a colon for a
// stream of the file before it ("::$DATA" is its contents).
func excludedExtensions(t *testing.T) {
	e := newEnv(t)
	opts := vfs.WriteOptions{ExcludedExtensions: []string{".tar.gz", "EXE"}}
	for name, refused := range map[string]bool{
		"a.tar.gz": true, "A.TAR.GZ": true, "setup.exe": true, "b.gz": false, ".exe": false, "exe": false,
		"setup.exe.": true, "setup.exe .. ": true, "setup.EXE::$DATA": true, "a.tar.gz:x": true,
		"setup.exe.txt": false, "notes: setup": false, ".exe.": false, "a:b.txt": false,
	} {
		_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, name, strings.NewReader("x"), opts)
		if got := errors.Is(err, vfs.ErrExtensionExcluded); got != refused || (!refused && err != nil) {
			t.Errorf("%q: %v", name, err)
		}
	}
}

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// newPathsEnv is an env whose root holds /docs/a.txt, /top.txt and a
// deleted folder /docs/gone, for the tests of lookups and writes by path.
func newPathsEnv(t *testing.T) (*env, vfs.Node) {
	t.Helper()
	e := newEnv(t)
	docs, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, docs.ID, "a.txt", []byte("a"))
	e.write(t, e.root.FolderID, "top.txt", []byte("t"))
	gone, err := e.fs.Mkdir(ctx, e.root.ID, docs.ID, "gone", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return e, docs
}

// TestLookupWithParent: one read gives an item and its folder, as Lookup
// gives each, and the folder's errors.
func TestLookupWithParent(t *testing.T) {
	e, _ := newPathsEnv(t)
	for _, c := range []struct {
		path, parent string // parent: the folder's path, "" when an error
		found        bool
		err          error
	}{
		{"/docs/a.txt", "/docs", true, nil},
		{"/docs/a.txt/", "/docs", true, nil},
		{"/docs/new.txt", "/docs", false, nil},
		{"/docs", "/", true, nil},
		{"/top.txt", "/", true, nil},
		{"/new", "/", false, nil},
		{"/missing/new", "", false, vfs.ErrNotExist},
		{"/docs/gone/new", "", false, vfs.ErrNotExist},
		{"/top.txt/new", "", false, vfs.ErrNotDir},
		{"/", "", false, vfs.ErrInvalidName},
		{"/docs/../a.txt", "", false, vfs.ErrInvalidName},
		{"docs/a.txt", "", false, vfs.ErrInvalidName},
	} {
		parent, n, found, err := e.fs.LookupWithParent(ctx, e.root.ID, c.path)
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.path, err, c.err)
			continue
		}
		if c.err != nil {
			continue
		}
		if want := mustLookup(t, e, c.parent); parent.ID != want.ID || parent.Path != want.Path || !parent.Dir {
			t.Errorf("%s: folder %+v, want %+v", c.path, parent, want)
		}
		if found != c.found {
			t.Errorf("%s: found %v, want %v", c.path, found, c.found)
			continue
		}
		if !found {
			if !reflect.DeepEqual(n, vfs.Node{}) {
				t.Errorf("%s: nothing found, and a node %+v", c.path, n)
			}
			continue
		}
		if want := mustLookup(t, e, c.path); !reflect.DeepEqual(n, want) {
			t.Errorf("%s: item %+v, want Lookup's %+v", c.path, n, want)
		}
	}
}

// TestSmallBodyReadFirst: a body announced to fit in its record is read
// before the checks, and must come out as any other: stored whole when it
// is larger than announced, refused by the same errors, and the checks
// still run before any byte is read under a quota, or for a body sent
// only once it is read (WriteOptions.BodyOnDemand).
func TestSmallBodyReadFirst(t *testing.T) {
	e := newEnv(t)
	e.write(t, e.root.FolderID, "file", []byte("x"))
	small := bytes.Repeat([]byte("s"), 4096)
	large := randBytes(7, vfs.InlineMax*3)
	for _, c := range []struct {
		name   string
		parent uint64
		body   io.Reader
		opts   vfs.WriteOptions
		want   []byte // stored contents, or nil for an error
		err    error
	}{
		{"announced", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096}, small, nil},
		{"larger than announced", e.root.FolderID, bytes.NewReader(large), vfs.WriteOptions{DeclaredSize: 10}, large, nil},
		{"exactly InlineMax", e.root.FolderID, bytes.NewReader(large[:vfs.InlineMax]), vfs.WriteOptions{DeclaredSize: vfs.InlineMax}, large[:vfs.InlineMax], nil},
		{"over the file size", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: 100}, nil, vfs.ErrFileTooLarge},
		{"larger, over the file size", e.root.FolderID, bytes.NewReader(large), vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: vfs.InlineMax * 2}, nil, vfs.ErrFileTooLarge},
		{"no such folder", 999999, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096}, nil, vfs.ErrNotExist},
		{"over the quota", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096, SpaceQuota: 100}, nil, vfs.ErrQuotaExceeded},
		{"over the quota, unread", e.root.FolderID, failing{errors.New("body was read")}, vfs.WriteOptions{DeclaredSize: 4096, SpaceQuota: 100}, nil, vfs.ErrQuotaExceeded},
		{"cut off", e.root.FolderID, io.MultiReader(bytes.NewReader(small[:100]), failing{io.ErrUnexpectedEOF}), vfs.WriteOptions{DeclaredSize: 4096}, nil, io.ErrUnexpectedEOF},
		// A body on demand (Expect: 100-continue) is refused unread.
		{"no such folder, on demand, unread", 999999, failing{errors.New("body was read")}, vfs.WriteOptions{DeclaredSize: 4096, BodyOnDemand: true}, nil, vfs.ErrNotExist},
		{"announced, on demand", e.root.FolderID, bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096, BodyOnDemand: true}, small, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			n, err := e.fs.WriteFile(ctx, e.root.ID, c.parent, "f-"+c.name, c.body, c.opts)
			if c.want == nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("%v, want %v", err, c.err)
				}
				if _, err := e.fs.Lookup(ctx, e.root.ID, "/f-"+c.name); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("refused write left a file: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := e.read(t, n.ID); !bytes.Equal(got, c.want) {
				t.Fatalf("stored %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
}

// TestWriteAt: a write of a file named by its path finds its folder in
// the commit (a small body) or in the checks before the body (a larger
// one), says whether it created the file, hands check what the path
// names there, and refuses what check refuses, what WriteFile refuses,
// and a path with no folder to hold the file, leaving nothing behind.
func TestWriteAt(t *testing.T) {
	e, docs := newPathsEnv(t)
	small := bytes.Repeat([]byte("s"), 4096)
	large := randBytes(8, vfs.InlineMax*3)
	refused := errors.New("refused by check")
	for _, c := range []struct {
		name    string
		path    string
		body    io.Reader
		opts    vfs.WriteOptions
		refuse  bool // check refuses whatever it sees
		want    []byte
		created bool
		err     error
		// what check saw: the folder's error, and the item's kind
		// ("" none, "file", "folder"); seen false: check never ran
		seen       bool
		parentErr  error
		oldKind    string
		wantParent uint64
	}{
		{name: "new, small", path: "/docs/new.txt", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			want: small, created: true, seen: true, wantParent: docs.ID},
		{name: "replaced, small", path: "/docs/a.txt", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			want: small, seen: true, oldKind: "file", wantParent: docs.ID},
		{name: "in the top folder", path: "/top2.txt", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			want: small, created: true, seen: true, wantParent: e.root.FolderID},
		{name: "new, large", path: "/docs/large.bin", body: bytes.NewReader(large), opts: vfs.WriteOptions{DeclaredSize: int64(len(large))},
			want: large, created: true, seen: true, wantParent: docs.ID},
		{name: "new, unannounced", path: "/docs/chunked.bin", body: bytes.NewReader(small),
			want: small, created: true, seen: true, wantParent: docs.ID},
		{name: "a folder", path: "/docs", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			err: vfs.ErrNameConflict, seen: true, oldKind: "folder"},
		{name: "no folder", path: "/missing/new", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			err: vfs.ErrNotExist, seen: true, parentErr: vfs.ErrNotExist},
		{name: "a deleted folder", path: "/docs/gone/new", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			err: vfs.ErrNotExist, seen: true, parentErr: vfs.ErrNotExist},
		{name: "below a file", path: "/top.txt/new", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			err: vfs.ErrNotDir, seen: true, parentErr: vfs.ErrNotDir},
		{name: "refused, small", path: "/docs/refused.txt", body: bytes.NewReader(small), opts: vfs.WriteOptions{DeclaredSize: 4096},
			refuse: true, err: refused, seen: true},
		{name: "refused, large, unread", path: "/docs/refused.bin", body: failing{errors.New("body was read")},
			opts: vfs.WriteOptions{DeclaredSize: int64(len(large))}, refuse: true, err: refused, seen: true},
		{name: "over the quota, unread", path: "/docs/quota.txt", body: failing{errors.New("body was read")},
			opts: vfs.WriteOptions{DeclaredSize: 4096, SpaceQuota: 100}, err: vfs.ErrQuotaExceeded, seen: true},
		// What the path refuses comes before what the write refuses
		// before reading the body, or on reading it.
		{name: "excluded, no folder", path: "/missing/x.exe", body: bytes.NewReader(small),
			opts: vfs.WriteOptions{DeclaredSize: 4096, ExcludedExtensions: []string{".exe"}}, err: vfs.ErrNotExist, seen: true, parentErr: vfs.ErrNotExist},
		{name: "excluded", path: "/docs/x.exe", body: bytes.NewReader(small),
			opts: vfs.WriteOptions{DeclaredSize: 4096, ExcludedExtensions: []string{".exe"}}, err: vfs.ErrExtensionExcluded, seen: true},
		{name: "announced too large, refused", path: "/docs/big.txt", body: bytes.NewReader(small),
			opts: vfs.WriteOptions{DeclaredSize: 4096, MaxFileSize: 100}, refuse: true, err: refused, seen: true},
		{name: "too large, refused", path: "/docs/big.txt", body: bytes.NewReader(small),
			opts: vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: 100}, refuse: true, err: refused, seen: true},
		{name: "too large", path: "/docs/big.txt", body: bytes.NewReader(small),
			opts: vfs.WriteOptions{DeclaredSize: 10, MaxFileSize: 100}, err: vfs.ErrFileTooLarge, seen: true},
		{name: "the top folder", path: "/", body: bytes.NewReader(small), err: vfs.ErrInvalidName},
		{name: "not absolute", path: "docs/x", body: bytes.NewReader(small), err: vfs.ErrInvalidName},
	} {
		t.Run(c.name, func(t *testing.T) {
			seen := false
			var parentErr error
			oldKind := ""
			check := func(perr error, old *vfs.Node) error {
				seen, parentErr, oldKind = true, perr, ""
				if old != nil {
					oldKind = map[bool]string{false: "file", true: "folder"}[old.Dir]
				}
				if c.refuse {
					return refused
				}
				return nil
			}
			before, _ := e.fs.Lookup(ctx, e.root.ID, c.path)
			n, created, err := e.fs.WriteAt(ctx, e.root.ID, c.path, c.body, c.opts, check)
			if seen != c.seen || !errors.Is(parentErr, c.parentErr) || (c.parentErr == nil && parentErr != nil) || oldKind != c.oldKind {
				t.Errorf("check saw %v, %v, %q; want %v, %v, %q", seen, parentErr, oldKind, c.seen, c.parentErr, c.oldKind)
			}
			if c.want == nil {
				if !errors.Is(err, c.err) {
					t.Fatalf("%v, want %v", err, c.err)
				}
				if after, _ := e.fs.Lookup(ctx, e.root.ID, c.path); !reflect.DeepEqual(after, before) {
					t.Fatalf("a refused write changed %s: %+v, was %+v", c.path, after, before)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if created != c.created || n.ParentID != c.wantParent || n.Path != c.path {
				t.Errorf("created %v in %d at %q, want %v in %d at %q", created, n.ParentID, n.Path, c.created, c.wantParent, c.path)
			}
			if got := e.read(t, n.ID); !bytes.Equal(got, c.want) {
				t.Fatalf("stored %d bytes, want %d", len(got), len(c.want))
			}
		})
	}
	// Without a check, a missing folder is WriteAt's error.
	if _, _, err := e.fs.WriteAt(ctx, e.root.ID, "/missing/x", bytes.NewReader(small), vfs.WriteOptions{DeclaredSize: 4096}, nil); !errors.Is(err, vfs.ErrNotExist) {
		t.Errorf("no folder, no check: %v, want ErrNotExist", err)
	}
}

// TestWriteAtReads: a check costs WriteAt no read of the store: the
// file its check sees is the one the write's own checks then use. The
// check before a large body is read read the file twice (the commit's
// transaction already read it once).
func TestWriteAtReads(t *testing.T) {
	e, _ := newPathsEnv(t)
	check := func(error, *vfs.Node) error { return nil }
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"small", bytes.Repeat([]byte("s"), 4096)},
		{"large", randBytes(10, vfs.InlineMax*3)},
	} {
		t.Run(c.name, func(t *testing.T) {
			// gets is the store's point reads of a write of c.body over
			// the existing file p, with check or without.
			gets := func(p string, check func(error, *vfs.Node) error) uint64 {
				before := e.db.TxnStats().Gets
				if _, _, err := e.fs.WriteAt(ctx, e.root.ID, p, bytes.NewReader(c.body), vfs.WriteOptions{DeclaredSize: int64(len(c.body))}, check); err != nil {
					t.Fatal(err)
				}
				return e.db.TxnStats().Gets - before
			}
			// Each file once before, so that both writes replace one
			// and store no chunk the store does not have.
			for _, p := range []string{"/docs/without", "/docs/with"} {
				gets(p, nil)
			}
			if without, with := gets("/docs/without", nil), gets("/docs/with", check); with != without {
				t.Errorf("%d reads with a check, %d without", with, without)
			}
		})
	}
}

// TestWriteAtChangedWhileRead: what changes the file between the checks
// before its body is read and the commit (a new revision under
// If-Match, a lock, a folder in its place, its deletion) refuses the
// write at the commit, on each way a body comes (read first when
// small, read after the checks when large or on demand), with WriteAt's
// check and without: the commit decides on the file as its own
// transaction reads it, never on what an earlier one read.
func TestWriteAtChangedWhileRead(t *testing.T) {
	bodies := []struct {
		name string
		body []byte
		opts vfs.WriteOptions
	}{
		{"small, read first", []byte("mine"), vfs.WriteOptions{DeclaredSize: 4}},
		{"small, on demand", []byte("mine"), vfs.WriteOptions{DeclaredSize: 4, BodyOnDemand: true}},
		{"large", randBytes(12, vfs.InlineMax*3), vfs.WriteOptions{DeclaredSize: vfs.InlineMax * 3}},
	}
	changes := []struct {
		name    string
		ifMatch bool
		change  func(t *testing.T, e *env, docs, f vfs.Node)
		want    error
		left    string // what /docs/f holds after: a file's bytes, or "folder"
	}{
		{"a new revision, If-Match", true, func(t *testing.T, e *env, docs, _ vfs.Node) {
			e.write(t, docs.ID, "f", []byte("theirs"))
		}, vfs.ErrChanged, "theirs"},
		{"deleted, If-Match", true, func(t *testing.T, e *env, _, f vfs.Node) {
			if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, vfs.ErrChanged, ""},
		{"locked", false, func(t *testing.T, e *env, _, f vfs.Node) {
			if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Holder: "carol"}); err != nil {
				t.Fatal(err)
			}
		}, vfs.ErrLocked, "old"},
		{"a folder in its place", false, func(t *testing.T, e *env, docs, f vfs.Node) {
			if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.fs.Mkdir(ctx, e.root.ID, docs.ID, "f", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, vfs.ErrNameConflict, "folder"},
	}
	for _, b := range bodies {
		for _, c := range changes {
			for _, withCheck := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/check %v", b.name, c.name, withCheck), func(t *testing.T) {
					e, docs := newPathsEnv(t)
					f := e.write(t, docs.ID, "f", []byte("old"))
					opts := b.opts
					if c.ifMatch {
						opts.IfRevision = f.RevisionID
					}
					var check func(error, *vfs.Node) error
					if withCheck {
						check = func(error, *vfs.Node) error { return nil }
					}
					body := &changeOnRead{r: bytes.NewReader(b.body), change: func() { c.change(t, e, docs, f) }}
					if _, _, err := e.fs.WriteAt(ctx, e.root.ID, "/docs/f", body, opts, check); !errors.Is(err, c.want) {
						t.Fatalf("WriteAt = %v, want %v", err, c.want)
					}
					if !body.changed {
						t.Fatal("the body was never read: nothing changed the file")
					}
					n, err := e.fs.Lookup(ctx, e.root.ID, "/docs/f")
					switch {
					case c.left == "":
						if !errors.Is(err, vfs.ErrNotExist) {
							t.Fatalf("/docs/f after: %+v, %v; want none", n, err)
						}
					case err != nil:
						t.Fatal(err)
					case c.left == "folder":
						if !n.Dir {
							t.Fatalf("/docs/f after: %+v, want the folder", n)
						}
					default:
						if got := e.read(t, n.ID); string(got) != c.left {
							t.Fatalf("/docs/f holds %q, want %q", got, c.left)
						}
					}
				})
			}
		}
	}
}

// changeOnRead is a body that runs change before its first byte is read.
type changeOnRead struct {
	r       io.Reader
	change  func()
	changed bool
}

func (c *changeOnRead) Read(p []byte) (int, error) {
	if !c.changed {
		c.changed = true
		c.change()
	}
	return c.r.Read(p)
}

// TestLookupMove: a move's source and destination read together are
// what Lookup says of the source and LookupWithParent of the
// destination, each with its own error.
func TestLookupMove(t *testing.T) {
	e, _ := newPathsEnv(t)
	paths := []string{"/docs/a.txt", "/docs", "/top.txt", "/docs/new", "/missing/x", "/top.txt/x", "/", "rel"}
	for _, src := range paths {
		for _, dst := range paths {
			sn, srcErr, parent, n, found, err := e.fs.LookupMove(ctx, e.root.ID, src, dst)
			wantSn, wantSrcErr := e.fs.Lookup(ctx, e.root.ID, src)
			if !reflect.DeepEqual(sn, wantSn) || fmt.Sprint(srcErr) != fmt.Sprint(wantSrcErr) {
				t.Errorf("%s -> %s: source %+v, %v; Lookup %+v, %v", src, dst, sn, srcErr, wantSn, wantSrcErr)
			}
			wantParent, wantN, wantFound, wantErr := e.fs.LookupWithParent(ctx, e.root.ID, dst)
			if !reflect.DeepEqual(parent, wantParent) || !reflect.DeepEqual(n, wantN) || found != wantFound ||
				fmt.Sprint(err) != fmt.Sprint(wantErr) {
				t.Errorf("%s -> %s: destination %+v %+v %v %v; LookupWithParent %+v %+v %v %v", src, dst, parent, n, found, err, wantParent, wantN, wantFound, wantErr)
			}
		}
	}
}

// TestMkdirAt: a folder made by its path finds the folder to hold it in
// its commit, with check seeing what the path names there.
func TestMkdirAt(t *testing.T) {
	e := newEnv(t)
	e.write(t, e.root.FolderID, "top.txt", []byte("t"))
	refused := errors.New("refused by check")
	for _, c := range []struct {
		path      string
		refuse    bool
		err       error
		parentErr error
		old       bool
	}{
		{path: "/a"},
		{path: "/a/b"},
		{path: "/a/b", err: vfs.ErrNameConflict, old: true},
		{path: "/top.txt", err: vfs.ErrNameConflict, old: true},
		{path: "/missing/b", err: vfs.ErrNotExist, parentErr: vfs.ErrNotExist},
		{path: "/top.txt/b", err: vfs.ErrNotDir, parentErr: vfs.ErrNotDir},
		{path: "/a/refused", refuse: true, err: refused},
	} {
		var parentErr error
		old := false
		n, err := e.fs.MkdirAt(ctx, e.root.ID, c.path, vfs.WriteOptions{}, func(perr error, o *vfs.Node) error {
			parentErr, old = perr, o != nil
			if c.refuse {
				return refused
			}
			return nil
		})
		if !errors.Is(parentErr, c.parentErr) || (c.parentErr == nil) != (parentErr == nil) || old != c.old {
			t.Errorf("%s: check saw %v, %v; want %v, %v", c.path, parentErr, old, c.parentErr, c.old)
		}
		if c.err != nil {
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v, want %v", c.path, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got := mustLookup(t, e, c.path); !got.Dir || got.ID != n.ID || n.Path != c.path {
			t.Errorf("%s: made %+v, Lookup %+v", c.path, n, got)
		}
	}
	if _, err := e.fs.MkdirAt(ctx, e.root.ID, "/refused", vfs.WriteOptions{}, nil); err != nil {
		t.Errorf("no check: %v", err)
	}
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/a/refused"); !errors.Is(err, vfs.ErrNotExist) {
		t.Errorf("a refused folder was made: %v", err)
	}
}

// TestDeleteAt: an item deleted by its path is found in the delete's
// commit, where check sees it and may keep it.
func TestDeleteAt(t *testing.T) {
	e := newEnv(t)
	docs, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, docs.ID, "a.txt", []byte("a"))
	e.write(t, docs.ID, "b.txt", []byte("b"))
	refused := errors.New("refused by check")
	for _, c := range []struct {
		path   string
		refuse bool
		err    error
		seen   string // the name check saw
	}{
		{path: "/docs/a.txt", seen: "a.txt"},
		{path: "/docs/a.txt", err: vfs.ErrNotExist},
		{path: "/docs/b.txt", refuse: true, err: refused, seen: "b.txt"},
		{path: "/missing/b.txt", err: vfs.ErrNotExist},
		{path: "/", err: vfs.ErrRootItem, seen: ""},
		{path: "/docs", seen: "docs"},
	} {
		seen := "-"
		err := e.fs.DeleteAt(ctx, e.root.ID, c.path, vfs.WriteOptions{}, func(n vfs.Node) error {
			seen = n.Name
			if c.refuse {
				return refused
			}
			return nil
		})
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: %v, want %v", c.path, err, c.err)
		}
		if c.err == nil || c.refuse {
			if seen != c.seen {
				t.Errorf("%s: check saw %q, want %q", c.path, seen, c.seen)
			}
		}
		_, lerr := e.fs.Lookup(ctx, e.root.ID, c.path)
		if gone := errors.Is(lerr, vfs.ErrNotExist); gone != (c.err == nil || errors.Is(c.err, vfs.ErrNotExist)) {
			t.Errorf("%s: after the delete, Lookup says %v", c.path, lerr)
		}
	}
}

// TestMoveAt: an item moved by its path finds itself and the folder it
// goes to in the move's commit, where check sees them (and why the
// destination has no place) and may keep it where it is.
func TestMoveAt(t *testing.T) {
	e, docs := newPathsEnv(t)
	e.write(t, docs.ID, "b.txt", []byte("b"))
	if _, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "sub", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("refused by check")
	for _, c := range []struct {
		src, dst  string
		overwrite bool
		refuse    bool
		err       error
		seen      string // the name check saw, "-" where it did not run
		dstErr    error  // the destination's error check saw
		old       bool   // check saw an item at dst
		replaced  bool
	}{
		{src: "/docs/a.txt", dst: "/docs/c.txt", seen: "a.txt"},
		{src: "/docs/c.txt", dst: "/top.txt", err: vfs.ErrNameConflict, seen: "c.txt", old: true},
		{src: "/docs/c.txt", dst: "/top.txt", overwrite: true, seen: "c.txt", old: true, replaced: true},
		{src: "/missing", dst: "/x", err: vfs.ErrNotExist, seen: "-"},
		{src: "/docs/gone", dst: "/x", err: vfs.ErrNotExist, seen: "-"},
		{src: "/", dst: "/x", err: vfs.ErrRootItem, seen: "-"},
		{src: "/top.txt", dst: "/missing/x", err: vfs.ErrNotExist, seen: "top.txt", dstErr: vfs.ErrNotExist},
		{src: "/top.txt", dst: "/docs/b.txt/x", err: vfs.ErrNotDir, seen: "top.txt", dstErr: vfs.ErrNotDir},
		{src: "/top.txt", dst: "/", err: vfs.ErrInvalidName, seen: "top.txt", dstErr: vfs.ErrInvalidName},
		{src: "/top.txt", dst: "/a/../x", err: vfs.ErrInvalidName, seen: "top.txt", dstErr: vfs.ErrInvalidName},
		{src: "/top.txt", dst: "/sub/t.txt", refuse: true, err: refused, seen: "top.txt"},
		{src: "/docs", dst: "/docs/inner", err: vfs.ErrNameConflict, seen: "docs"},
		{src: "/docs", dst: "/sub/docs", seen: "docs"},
	} {
		name := c.src + " -> " + c.dst
		seen, old := "-", false
		var dstErr error
		n, replaced, err := e.fs.MoveAt(ctx, e.root.ID, c.src, c.dst, vfs.WriteOptions{Overwrite: c.overwrite}, func(n vfs.Node, derr error, o *vfs.Node) error {
			seen, dstErr, old = n.Name, derr, o != nil
			if c.refuse {
				return refused
			}
			return nil
		})
		if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: %v, want %v", name, err, c.err)
		}
		if seen != c.seen || !errors.Is(dstErr, c.dstErr) || (c.dstErr == nil) != (dstErr == nil) || old != c.old {
			t.Errorf("%s: check saw %q, %v, %v; want %q, %v, %v", name, seen, dstErr, old, c.seen, c.dstErr, c.old)
		}
		if err != nil {
			continue
		}
		if replaced != c.replaced {
			t.Errorf("%s: replaced %v, want %v", name, replaced, c.replaced)
		}
		if got := mustLookup(t, e, c.dst); got.ID != n.ID || n.Path != c.dst {
			t.Errorf("%s: moved %+v, Lookup %+v", name, n, got)
		}
		if _, err := e.fs.Lookup(ctx, e.root.ID, c.src); !errors.Is(err, vfs.ErrNotExist) {
			t.Errorf("%s: the source is still there: %v", name, err)
		}
	}
	// Refused, each left the tree as it was; no check is MoveAt's own
	// refusals alone.
	mustLookup(t, e, "/top.txt")
	mustLookup(t, e, "/sub/docs/b.txt")
	if _, _, err := e.fs.MoveAt(ctx, e.root.ID, "/top.txt", "/sub/t.txt", vfs.WriteOptions{}, nil); err != nil {
		t.Errorf("no check: %v", err)
	}
	if _, _, err := e.fs.MoveAt(ctx, e.root.ID, "/sub/t.txt", "/missing/t.txt", vfs.WriteOptions{}, nil); !errors.Is(err, vfs.ErrNotExist) {
		t.Errorf("no check, no folder: %v", err)
	}
	if _, err := e.fs.Audit(ctx, e.root.ID); err != nil {
		t.Fatal(err)
	}
}
