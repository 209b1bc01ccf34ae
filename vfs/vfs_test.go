package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs"
	"berth/vfs/chunk"
)

var ctx = context.Background()

func TestWriteReadRevisions(t *testing.T) {
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

func mustLookup(t *testing.T, e *env, p string) vfs.Node {
	t.Helper()
	n, err := e.fs.Lookup(ctx, e.root.ID, p)
	if err != nil {
		t.Fatalf("lookup %s: %v", p, err)
	}
	return n
}

func TestTreeOperations(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	a, err := e.fs.Mkdir(ctx, e.root.ID, top, "a", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.fs.Mkdir(ctx, e.root.ID, a.ID, "b", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, b.ID, "héllo wörld.txt", []byte("hi"))
	if f.Path != "/a/b/héllo wörld.txt" {
		t.Fatalf("path %q", f.Path)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, b.ID, "c", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := mustLookup(t, e, "/a/c/héllo wörld.txt"); n.ID != f.ID || n.Dir || n.Size != 2 {
		t.Fatalf("rename did not carry the child: %+v", n)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, f.ID, top, "", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.fs.Stat(ctx, e.root.ID, f.ID); n.Path != "/héllo wörld.txt" {
		t.Fatalf("moved path %q", n.Path)
	}
	cp, err := e.fs.Copy(ctx, e.root.ID, a.ID, e.root.ID, top, "a2", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/a2/c"); err != nil || cp.Path != "/a2" {
		t.Fatalf("copy: %v %q", err, cp.Path)
	}
	res, err := e.fs.Search(ctx, e.root.ID, "WÖRLD", 0)
	if err != nil || len(res) != 1 || res[0].ID != f.ID {
		t.Fatalf("search %v %v", res, err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, a.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/a"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("deleted folder still found: %v", err)
	}
	if n, err := e.fs.Stat(ctx, e.root.ID, a.ID); err != nil || !n.Deleted {
		t.Fatalf("deleted stat %+v %v", n, err)
	}
	kids, _, err := e.fs.List(ctx, e.root.ID, top)
	if err != nil || len(kids) != 2 {
		t.Fatalf("list %v %v", kids, err)
	}
	// The name is free again after delete.
	if _, err := e.fs.Mkdir(ctx, e.root.ID, top, "a", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestModifiedSince(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	e.write(t, top, "old", []byte("1"))
	time.Sleep(5 * time.Millisecond)
	mark := time.Now()
	newer := e.write(t, top, "new", []byte("2"))
	e.fs.Mkdir(ctx, e.root.ID, top, "dir", vfs.WriteOptions{})
	got, err := e.fs.ModifiedSince(ctx, e.root.ID, mark, 0)
	if err != nil || len(got) != 1 || got[0].ID != newer.ID {
		t.Fatalf("modified since: %v %v", got, err)
	}
}

// TestModifiedSincePagesWholeSeconds: a page never ends inside a second,
// so a client that asks again from the second after its last result
// misses nothing, even when one second holds more files than its limit.
func TestModifiedSincePagesWholeSeconds(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// Second 0: five files (more than the limit), second 1: one, second
	// 3: two; written in another order than their times.
	at := map[string]time.Duration{
		"s3-a": 3*time.Second + 5*time.Millisecond, "s0-a": 1 * time.Millisecond, "s1-a": time.Second + 999*time.Millisecond,
		"s0-b": 200 * time.Millisecond, "s0-c": 999 * time.Millisecond, "s3-b": 3*time.Second + 900*time.Millisecond,
		"s0-d": 2 * time.Millisecond, "s0-e": 500 * time.Millisecond,
	}
	for name, d := range at {
		if _, err := e.fs.WriteFile(ctx, e.root.ID, top, name, strings.NewReader(name), vfs.WriteOptions{Modified: base.Add(d)}); err != nil {
			t.Fatal(err)
		}
	}
	// page asks as a client would, limit 2, from since, and returns the
	// names it got and the next since.
	page := func(since time.Time) ([]string, time.Time) {
		t.Helper()
		got, err := e.fs.ModifiedSince(ctx, e.root.ID, since, 2)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range got {
			names = append(names, n.Name)
		}
		slices.Sort(names)
		if len(got) == 0 {
			return names, since
		}
		return names, got[len(got)-1].Modified.Truncate(time.Second).Add(time.Second)
	}
	var pages [][]string
	since := base.Add(-time.Hour)
	for range 10 {
		names, next := page(since)
		if len(names) == 0 {
			break
		}
		pages = append(pages, names)
		since = next
	}
	want := [][]string{{"s0-a", "s0-b", "s0-c", "s0-d", "s0-e"}, {"s1-a", "s3-a", "s3-b"}}
	if fmt.Sprint(pages) != fmt.Sprint(want) {
		t.Fatalf("pages %v, want %v", pages, want)
	}
	// A second of more than ten times the limit is cut at that bound.
	crowd := base.Add(time.Hour)
	for i := range 25 {
		if _, err := e.fs.WriteFile(ctx, e.root.ID, top, fmt.Sprintf("crowd-%02d", i), strings.NewReader("c"), vfs.WriteOptions{Modified: crowd}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := e.fs.ModifiedSince(ctx, e.root.ID, crowd, 2); err != nil || len(got) != 20 {
		t.Fatalf("a second of 25 files, limit 2: %d results, %v; want 20", len(got), err)
	}
	// Search keeps its limit exactly.
	if got, err := e.fs.Search(ctx, e.root.ID, "s0", 2); err != nil || len(got) != 2 {
		t.Fatalf("search with limit 2: %d results, %v", len(got), err)
	}
}

// TestModifiedAtEpoch: a revision whose modification time is the Unix
// epoch itself (0 ns, which the time index also used to mean "no entry
// yet") keeps one time index entry per file. The next revision left the
// epoch entry behind, and once the file was purged that entry named an
// item that no longer existed, so ModifiedSince and Search failed for the
// whole root.
func TestModifiedAtEpoch(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	epoch := vfs.WriteOptions{Modified: time.Unix(0, 0)}
	f, err := e.fs.WriteFile(ctx, e.root.ID, top, "f", strings.NewReader("1"), epoch)
	if err != nil {
		t.Fatal(err)
	}
	e.write(t, top, "f", []byte("2"))
	if _, err := e.fs.Audit(ctx, e.root.ID); err != nil {
		t.Fatalf("audit after a second revision: %v", err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.ModifiedSince(ctx, e.root.ID, time.Unix(0, 0), 0); err != nil {
		t.Fatalf("modified since, after the purge: %v", err)
	}
	if _, err := e.fs.Search(ctx, e.root.ID, "f", 0); err != nil {
		t.Fatalf("search, after the purge: %v", err)
	}
}

// TestErrors produces every vfs error from real operations.
func TestErrors(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	dir, _ := e.fs.Mkdir(ctx, e.root.ID, top, "dir", vfs.WriteOptions{})
	file := e.write(t, top, "file.txt", []byte("x"))
	other, _ := e.fs.CreateRoot(ctx, "bob", vfs.RootShare)
	gone, _ := e.fs.CreateRoot(ctx, "gone", vfs.RootBackup)
	if err := e.fs.DeleteRoot(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	lk, err := e.fs.Lock(ctx, e.root.ID, file.ID, vfs.LockRequest{Owner: "x", Holder: "carol"})
	if err != nil {
		t.Fatal(err)
	}
	wr := func(name string, o vfs.WriteOptions, body string) error {
		_, err := e.fs.WriteFile(ctx, e.root.ID, top, name, strings.NewReader(body), o)
		return err
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"empty name", wr("", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"dot", wr(".", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"dotdot", wr("..", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"slash", wr("a/b", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"backslash", wr(`a\b`, vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"nul", wr("a\x00b", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"control", wr("a\nb", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"bad utf8", wr("a\xffb", vfs.WriteOptions{}, ""), vfs.ErrInvalidName},
		{"too long", wr(strings.Repeat("é", 128), vfs.WriteOptions{}, ""), vfs.ErrNameTooLong},
		{"file over folder", wr("dir", vfs.WriteOptions{}, ""), vfs.ErrNameConflict},
		{"mkdir over file", mkdirErr(e, top, "file.txt"), vfs.ErrNameConflict},
		{"rename onto sibling", renameErr(e, dir.ID, "file.txt"), vfs.ErrNameConflict},
		{"move into itself", moveErr(e, dir.ID, dir.ID), vfs.ErrNameConflict},
		{"locked write", wr("file.txt", vfs.WriteOptions{}, "y"), vfs.ErrLocked},
		{"locked delete", e.fs.Delete(ctx, e.root.ID, file.ID, vfs.WriteOptions{}), vfs.ErrLocked},
		{"locked, other token", wr("file.txt", vfs.WriteOptions{LockTokens: []string{"urn:uuid:nope"}}, "y"), vfs.ErrLocked},
		{"lock twice", lockErr(e, file.ID), vfs.ErrLocked},
		{"unlock unknown token", e.fs.Unlock(ctx, e.root.ID, file.ID, "urn:uuid:nope"), vfs.ErrNoSuchLock},
		{"root deleted", statErr(e, gone.ID, gone.FolderID), vfs.ErrRootDeleted},
		{"no such root", statErr(e, 999999, 1), vfs.ErrNotExist},
		{"node of another root", statErr(e, other.ID, file.ID), vfs.ErrNotExist},
		{"no such node", statErr(e, e.root.ID, 999999), vfs.ErrNotExist},
		{"write into a file", writeIn(e, file.ID), vfs.ErrNotDir},
		{"open a folder", openErr(e, dir.ID), vfs.ErrIsDir},
		{"excluded extension", wr("x.EXE", vfs.WriteOptions{ExcludedExtensions: []string{".exe"}}, "y"), vfs.ErrExtensionExcluded},
		{"max file size", wr("big", vfs.WriteOptions{MaxFileSize: 3}, "four"), vfs.ErrFileTooLarge},
		{"quota", wr("big", vfs.WriteOptions{SpaceQuota: 4}, "four!"), vfs.ErrQuotaExceeded},
		{"delete root folder", e.fs.Delete(ctx, e.root.ID, top, vfs.WriteOptions{}), vfs.ErrRootItem},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, c.err, c.want)
		}
	}
	// The holder of a REST lock and the presenter of the token get through.
	if err := wr("file.txt", vfs.WriteOptions{Principal: "carol"}, "z"); err != nil {
		t.Errorf("holder write: %v", err)
	}
	if err := wr("file.txt", vfs.WriteOptions{Principal: "carol", LockTokens: []string{lk.Token}}, "z"); err != nil {
		t.Errorf("token write: %v", err)
	}
	// Nothing failed stored anything.
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/big"); !errors.Is(err, vfs.ErrNotExist) {
		t.Errorf("refused write left a file: %v", err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, file.ID, lk.Token); err != nil {
		t.Fatal(err)
	}
	if err := wr("file.txt", vfs.WriteOptions{}, "free"); err != nil {
		t.Errorf("write after unlock: %v", err)
	}
}

func mkdirErr(e *env, parent uint64, name string) error {
	_, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
	return err
}
func renameErr(e *env, id uint64, name string) error {
	_, err := e.fs.Rename(ctx, e.root.ID, id, name, vfs.WriteOptions{})
	return err
}
func moveErr(e *env, id, parent uint64) error {
	_, err := e.fs.Move(ctx, e.root.ID, id, parent, "", vfs.WriteOptions{})
	return err
}
func lockErr(e *env, id uint64) error {
	_, err := e.fs.Lock(ctx, e.root.ID, id, vfs.LockRequest{})
	return err
}
func statErr(e *env, root, id uint64) error {
	_, err := e.fs.Stat(ctx, root, id)
	return err
}
func writeIn(e *env, parent uint64) error {
	_, err := e.fs.WriteFile(ctx, e.root.ID, parent, "x", strings.NewReader("x"), vfs.WriteOptions{})
	return err
}
func openErr(e *env, id uint64) error {
	_, err := e.fs.Open(ctx, e.root.ID, id)
	return err
}

func TestDeepLockCoversSubtree(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	d, _ := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	f := e.write(t, d.ID, "f", []byte("1"))
	lk, err := e.fs.Lock(ctx, e.root.ID, top, vfs.LockRequest{Deep: true, TokenRequired: true, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := e.fs.Root(ctx, e.root.ID); !r.Locked() {
		t.Fatal("root not locked")
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, "f", strings.NewReader("2"), vfs.WriteOptions{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("deep lock let a write through: %v", err)
	}
	if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("lock under a deep lock: %v", err)
	}
	if _, err := e.fs.RefreshLock(ctx, e.root.ID, top, lk.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, top, ""); err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "f", []byte("2"))
}

func TestLockExpires(t *testing.T) {
	e := newEnv(t)
	f := e.write(t, e.root.FolderID, "f", []byte("1"))
	if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.fs.Stat(ctx, e.root.ID, f.ID); !n.Locked() {
		t.Fatal("not locked")
	}
	time.Sleep(60 * time.Millisecond)
	if n, _ := e.fs.Stat(ctx, e.root.ID, f.ID); n.Locked() {
		t.Fatal("expired lock still shown")
	}
	e.write(t, e.root.FolderID, "f", []byte("2"))
}

func TestListingHash(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	f := e.write(t, top, "a", []byte("1"))
	_, h1, _ := e.fs.List(ctx, e.root.ID, top)
	_, h2, _ := e.fs.List(ctx, e.root.ID, top)
	if h1 != h2 || h1 == "" {
		t.Fatalf("hash not stable: %q %q", h1, h2)
	}
	steps := []func(){
		func() { e.write(t, top, "a", []byte("2")) },
		func() { e.fs.Rename(ctx, e.root.ID, f.ID, "b", vfs.WriteOptions{}) },
		func() { e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{}) },
		func() { e.fs.Unlock(ctx, e.root.ID, f.ID, "") },
		func() { e.fs.Mkdir(ctx, e.root.ID, top, "c", vfs.WriteOptions{}) },
		func() { e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}) },
	}
	prev := h1
	for i, step := range steps {
		step()
		_, h, err := e.fs.List(ctx, e.root.ID, top)
		if err != nil {
			t.Fatal(err)
		}
		if h == prev {
			t.Fatalf("step %d: hash %q did not change", i, h)
		}
		prev = h
	}
}

func TestCancelledUploadStoresNothing(t *testing.T) {
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

type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }

func TestPurgeAndGC(t *testing.T) {
	e := newEnv(t)
	f := e.write(t, e.root.FolderID, "f", randBytes(1, 2<<20))
	e.write(t, e.root.FolderID, "f", randBytes(2, 2<<20))
	before, _ := e.chunks.Size(ctx)
	if err := e.fs.Delete(ctx, e.root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	u, _ := e.fs.Usage(ctx, e.root.ID)
	if u.DelFileCount != 1 || u.DelRevisionCount != 2 || u.DeletedSize != 4<<20 || u.FileCount != 0 {
		t.Fatalf("usage after delete %+v", u)
	}
	if err := e.fs.Purge(ctx, e.root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	rep, err := e.fs.GC(ctx)
	if err != nil || rep.Deleted == 0 {
		t.Fatalf("gc %v %v", rep, err)
	}
	after, _ := e.chunks.Size(ctx)
	if after >= before || after != 0 {
		t.Fatalf("chunk store %d -> %d bytes", before, after)
	}
	if u, _ := e.fs.Usage(ctx, e.root.ID); u.PhysicalSize != 0 || u.DelFileCount != 0 {
		t.Fatalf("usage after purge %+v", u)
	}
	if r, err := e.fs.Fsck(ctx, true); err != nil || !r.OK() {
		t.Fatalf("fsck %v %v", r, err)
	}
}

func TestDeduplication(t *testing.T) {
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

// An upload that found chunks in the store and skipped them succeeds when
// the collector runs while its body still streams: the chunks it holds
// stay, the others it stores again.
func TestUploadRacesCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := openEnvWith(t, t.TempDir(), vfs.Options{Registerer: reg})
	t.Cleanup(e.close)
	e.root, _ = e.fs.CreateRoot(ctx, "r", vfs.RootSync)
	data := randBytes(5, 12<<20)
	a := e.write(t, e.root.FolderID, "a", data)
	if err := e.fs.Delete(ctx, e.root.ID, a.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	// The same bytes again: the first chunks are found and skipped, then
	// the collector runs before the body ends.
	release := make(chan struct{})
	body := io.MultiReader(bytes.NewReader(data), gate(release))
	type result struct {
		n   vfs.Node
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "b", body, vfs.WriteOptions{})
		done <- result{n, err}
	}()
	// Wait until the upload has found (and skipped) a stored chunk.
	for deadline := time.Now().Add(20 * time.Second); metricValue(t, reg, "berth_chunks_deduplicated_total") < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the upload skipped no chunk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	b := <-done
	if b.err != nil {
		t.Fatalf("upload while the collector ran: %v", b.err)
	}
	if !bytes.Equal(e.read(t, b.n.ID), data) {
		t.Fatal("the upload stored other bytes")
	}
	e.fs.GC(ctx)
	if rep, err := e.fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck: %v %v", rep, err)
	}
}

type gate chan struct{}

func (g gate) Read([]byte) (int, error) {
	<-g
	return 0, io.EOF
}

// Small files live in their revision record: no chunk is stored, and they
// read, copy, limit and purge like any other.
func TestInlineSmallFiles(t *testing.T) {
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
func TestBrokenSmallBodyStoresNothing(t *testing.T) {
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

type failing struct{ err error }

func (f failing) Read([]byte) (int, error) { return 0, f.err }

// Everything below a deleted folder is deleted with it: invisible, not
// writable, counted as deleted space, and purged with it.
func TestDeleteFolderSubtree(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	d, _ := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	sub, _ := e.fs.Mkdir(ctx, e.root.ID, d.ID, "sub", vfs.WriteOptions{})
	f := e.write(t, sub.ID, "f.txt", randBytes(1, 100<<10))
	e.write(t, sub.ID, "f.txt", randBytes(2, 50<<10))
	g := e.write(t, d.ID, "g.txt", []byte("small"))
	if err := e.fs.Delete(ctx, e.root.ID, g.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Delete(ctx, e.root.ID, d.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.fs.Stat(ctx, e.root.ID, f.ID); err != nil || !n.Deleted || n.Path != "/d/sub/f.txt" {
		t.Fatalf("file below a deleted folder: %+v %v", n, err)
	}
	if _, err := e.fs.Open(ctx, e.root.ID, f.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("open below a deleted folder: %v", err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, f.ID, "x", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("rename below a deleted folder: %v", err)
	}
	if _, err := e.fs.Mkdir(ctx, e.root.ID, sub.ID, "x", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("mkdir below a deleted folder: %v", err)
	}
	if res, _ := e.fs.Search(ctx, e.root.ID, "f.txt", 0); len(res) != 0 {
		t.Fatalf("search finds deleted items: %v", res)
	}
	u, _ := e.fs.Usage(ctx, e.root.ID)
	want := vfs.Usage{DelFileCount: 2, DelRevisionCount: 3, DeletedSize: 150<<10 + 5, PhysicalSize: 150<<10 + 5, RootCount: 1}
	if u != want {
		t.Fatalf("usage %+v, want %+v", u, want)
	}
	if err := e.fs.Purge(ctx, e.root.ID, d.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stat(ctx, e.root.ID, f.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("purged file still there: %v", err)
	}
	if u, _ := e.fs.Usage(ctx, e.root.ID); u != (vfs.Usage{RootCount: 1}) {
		t.Fatalf("usage after purge %+v", u)
	}
	e.fs.GC(ctx)
	if r, err := e.fs.Fsck(ctx, false); err != nil || !r.OK() || r.Chunks != 0 {
		t.Fatalf("fsck %v %v", r, err)
	}
}

// metricValue is the value of a counter without labels, 0 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// A body announced over the limits is refused before a byte of it is read.
func TestDeclaredSizeRefusedUnread(t *testing.T) {
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
// without its dot, possibly of several parts; a bare ".exe" is a name.
func TestExcludedExtensions(t *testing.T) {
	e := newEnv(t)
	opts := vfs.WriteOptions{ExcludedExtensions: []string{".tar.gz", "EXE"}}
	for name, refused := range map[string]bool{
		"a.tar.gz": true, "A.TAR.GZ": true, "setup.exe": true, "b.gz": false, ".exe": false, "exe": false,
	} {
		_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, name, strings.NewReader("x"), opts)
		if got := errors.Is(err, vfs.ErrExtensionExcluded); got != refused || (!refused && err != nil) {
			t.Errorf("%q: %v", name, err)
		}
	}
}
