package vfs_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// TestRead holds the cases of reading the tree: listings and their hash,
// and ModifiedSince with its paging. (OpenPath is a script of TestScripts;
// the caches behind them are rootcache_test.go's.) A read bug found later
// becomes a row here.
func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ListingHash", listingHash},
		{"ModifiedSince", modifiedSince},
		{"ModifiedSincePagesWholeSeconds", modifiedSincePagesWholeSeconds},
		{"ModifiedAtEpoch", modifiedAtEpoch},
		{"StatAndOpenSeeEveryCommit", statAndOpenSeeEveryCommit},
		{"CopyToInline", copyToInline},
	} {
		t.Run(tc.name, tc.run)
	}
}

// statAndOpenSeeEveryCommit: Stat and Open by id keep what they read
// until the next commit (FS.items); each change to the item, its folder or
// its contents shows at once.
func statAndOpenSeeEveryCommit(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	dir, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, dir.ID, "f", []byte("one"))
	check := func(step, path, content string, deleted bool) {
		t.Helper()
		for range 2 { // the second read comes from the cache
			n, err := e.fs.Stat(ctx, e.root.ID, f.ID)
			if err != nil || n.Path != path || n.Deleted != deleted {
				t.Fatalf("%s: Stat = %q deleted %v, %v; want %q deleted %v", step, n.Path, n.Deleted, err, path, deleted)
			}
			o, err := e.fs.Open(ctx, e.root.ID, f.ID)
			if deleted {
				if !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("%s: Open of a deleted file = %v, want ErrNotExist", step, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Open: %v", step, err)
			}
			var b strings.Builder
			_, err = o.CopyTo(&b, 100)
			o.Close()
			if err != nil || b.String() != content || o.Node.Path != path {
				t.Fatalf("%s: Open read %q at %q, %v; want %q at %q", step, b.String(), o.Node.Path, err, content, path)
			}
		}
	}
	check("written", "/d/f", "one", false)
	if _, err := e.fs.Rename(ctx, e.root.ID, dir.ID, "e", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("folder renamed", "/e/f", "one", false)
	e.write(t, dir.ID, "f", []byte("two"))
	check("rewritten", "/e/f", "two", false)
	if err := e.fs.Delete(ctx, e.root.ID, dir.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("folder deleted", "/e/f", "", true)
}

// shortWriter takes at most n bytes in all, and fails past them.
type shortWriter struct {
	strings.Builder
	n int
}

func (w *shortWriter) Write(p []byte) (int, error) {
	m := min(len(p), w.n-w.Len())
	w.Builder.Write(p[:m])
	if m < len(p) {
		return m, errors.New("short")
	}
	return m, nil
}

// copyToInline: a small file's contents, kept in its revision record, are
// sent by CopyTo from the Read offset, at most n bytes, moving the offset
// by what was written, a failed write included.
func copyToInline(t *testing.T) {
	e := newEnv(t)
	f := e.write(t, e.root.FolderID, "f", []byte("0123456789"))
	for _, tc := range []struct {
		name       string
		seek, n    int64
		take       int // bytes the writer takes; -1 all
		want, next string
		err        bool
	}{
		{"whole", 0, 100, -1, "0123456789", "", false},
		{"limited", 0, 4, -1, "0123", "4567", false},
		{"from the offset", 3, 4, -1, "3456", "789", false},
		{"at the end", 10, 4, -1, "", "", false},
		{"past the end", 20, 4, -1, "", "", false},
		{"nothing asked", 2, 0, -1, "", "2345", false},
		{"short write", 1, 5, 2, "12", "3456", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := e.fs.Open(ctx, e.root.ID, f.ID)
			if err != nil {
				t.Fatal(err)
			}
			defer o.Close()
			if _, err := o.Seek(tc.seek, 0); err != nil {
				t.Fatal(err)
			}
			w := &shortWriter{n: 1 << 20}
			if tc.take >= 0 {
				w.n = tc.take
			}
			m, err := o.CopyTo(w, tc.n)
			if w.String() != tc.want || m != int64(len(tc.want)) || (err != nil) != tc.err {
				t.Errorf("CopyTo = %d %q, %v; want %q, error %v", m, w.String(), err, tc.want, tc.err)
			}
			next := make([]byte, 4)
			k, _ := o.Read(next)
			if string(next[:k]) != tc.next {
				t.Errorf("then Read %q, want %q", next[:k], tc.next)
			}
		})
	}
}

func listingHash(t *testing.T) {
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

func modifiedSince(t *testing.T) {
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
func modifiedSincePagesWholeSeconds(t *testing.T) {
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
func modifiedAtEpoch(t *testing.T) {
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
