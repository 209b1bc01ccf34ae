package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
)

// TestRootSeesEveryChange: Root keeps what it read until the next commit,
// and answers every change at the next call: a rename, a lock on the top
// folder, the lock's expiry (which commits nothing), the root's deletion.
func TestRootSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	clk := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	twice := func(step string) vfs.Root {
		t.Helper()
		a, err := e.fs.Root(ctx, root.ID)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		b, err := e.fs.Root(ctx, root.ID)
		if err != nil || b.Name != a.Name || len(b.Locks) != len(a.Locks) {
			t.Fatalf("%s: the second read differs: %+v, %v; first %+v", step, b, err, a)
		}
		return a
	}
	if r := twice("start"); r.Name != "alice" || len(r.Locks) != 0 {
		t.Fatalf("start: %+v", r)
	}
	if _, err := e.fs.RenameRoot(ctx, root.ID, "alice's files"); err != nil {
		t.Fatal(err)
	}
	if r := twice("renamed"); r.Name != "alice's files" {
		t.Fatalf("renamed: %+v", r)
	}
	if _, err := e.fs.Lock(ctx, root.ID, root.FolderID, vfs.LockRequest{Owner: "o", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if r := twice("locked"); len(r.Locks) != 1 {
		t.Fatalf("locked: %+v", r)
	}
	clk.Add(time.Minute)
	if r := twice("lock expired"); len(r.Locks) != 0 {
		t.Fatalf("lock expired: %+v", r)
	}
	if err := e.fs.DeleteRoot(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := e.fs.Root(ctx, root.ID); !errors.Is(err, vfs.ErrRootDeleted) {
			t.Fatalf("deleted: %v, want ErrRootDeleted", err)
		}
	}
}

// clockedDocs is a file system on a settable clock with alice's root and
// its folder docs, for the caches' tests, which expire locks by the clock.
func clockedDocs(t *testing.T) (*env, *berthtest.Clock, vfs.Root, vfs.Node) {
	t.Helper()
	clk := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := openEnvWith(t, t.TempDir(), vfs.Options{Now: clk.Now})
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := e.fs.Mkdir(context.Background(), root.ID, root.FolderID, "docs", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return e, clk, root, dir
}

// TestOpenPathSeesEveryChange: OpenPath keeps what it resolved until the
// next commit, and answers every change at the next call: a new revision,
// a rename, a lock and its expiry (which commits nothing), a deletion.
func TestOpenPathSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	e, clk, root, dir := clockedDocs(t)
	write := func(content string) vfs.Node {
		t.Helper()
		n, err := e.fs.WriteFile(ctx, root.ID, dir.ID, "a.txt", strings.NewReader(content), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// open reads p twice and checks both reads give want (and locks).
	open := func(step, p, want string, locks int) {
		t.Helper()
		for range 2 {
			n, f, err := e.fs.OpenPath(ctx, root.ID, p)
			if want == "" {
				if !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("%s: %s: %v, want ErrNotExist", step, p, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %s: %v", step, p, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil || string(b) != want || n.Path != p || len(n.Locks) != locks {
				t.Fatalf("%s: %s read %q (%v), node %+v; want %q with %d locks", step, p, b, err, n, want, locks)
			}
		}
	}
	f := write("one")
	open("written", "/docs/a.txt", "one", 0)
	write("two")
	open("new revision", "/docs/a.txt", "two", 0)
	if _, err := e.fs.Lock(ctx, root.ID, f.ID, vfs.LockRequest{Owner: "o", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	open("locked", "/docs/a.txt", "two", 1)
	clk.Add(time.Minute)
	open("lock expired", "/docs/a.txt", "two", 0)
	if _, err := e.fs.Rename(ctx, root.ID, f.ID, "b.txt", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	open("renamed, old name", "/docs/a.txt", "", 0)
	open("renamed", "/docs/b.txt", "two", 0)
	if err := e.fs.Delete(ctx, root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	open("deleted", "/docs/b.txt", "", 0)
	for range 2 {
		n, f, err := e.fs.OpenPath(ctx, root.ID, "/docs")
		if err != nil || f != nil || !n.Dir {
			t.Fatalf("folder: %+v, %v, %v", n, f, err)
		}
	}
}

// TestOpenPathCacheBounded: what OpenPath keeps stays within a bound
// whatever the paths: a chain of 400 folders with names of MaxNameBytes
// gives paths of up to 100 KB, 20 MB if each were kept under its path
// (at MaxDepth, 128 MB).
func TestOpenPathCacheBounded(t *testing.T) {
	const depth = 400
	ctx := context.Background()
	e := newEnv(t)
	name := strings.Repeat("d", vfs.MaxNameBytes)
	parent := e.root.FolderID
	start := time.Now()
	for range depth {
		n, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		parent = n.ID
	}
	t.Logf("tree built in %v", time.Since(start))
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := 1; i <= depth; i++ {
		// A path of its own, as a request's is: nothing else holds it.
		if _, _, err := e.fs.OpenPath(ctx, e.root.ID, strings.Repeat("/"+name, i)); err != nil {
			t.Fatal(err)
		}
	}
	after := heap()
	if grown := int64(after) - int64(before); grown > 8<<20 {
		t.Fatalf("OpenPath's cache holds %d MiB after opening %d paths", grown>>20, depth)
	}
	runtime.KeepAlive(e.fs)
}

// TestListSeesEveryChange: List keeps what it read until the next commit,
// and answers every change at the next call: a new file, a new revision, a
// lock and its expiry (which commits nothing), a rename of the folder (the
// children's paths), a deletion. What a caller does to the slice it got
// does not reach the next caller.
func TestListSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	e, clk, root, dir := clockedDocs(t)
	write := func(name, content string) vfs.Node {
		t.Helper()
		n, err := e.fs.WriteFile(ctx, root.ID, dir.ID, name, strings.NewReader(content), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// list lists the folder three times, checks all give the same listing
	// and hash, spoiling each slice it got, and returns the listing as
	// "path:size:locks" words and the hash.
	list := func(step string) (string, string) {
		t.Helper()
		var words [3]string
		var sums [3]string
		for i := range 3 {
			kids, sum, err := e.fs.List(ctx, root.ID, dir.ID)
			if err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			var w []string
			for j, k := range kids {
				w = append(w, fmt.Sprintf("%s:%d:%d", k.Path, k.Size, len(k.Locks)))
				kids[j].Name, kids[j].Path, kids[j].Size = "spoilt", "/spoilt", -1
			}
			words[i], sums[i] = strings.Join(w, " "), sum
		}
		for i := 1; i < 3; i++ {
			if words[i] != words[0] || sums[i] != sums[0] {
				t.Fatalf("%s: listing %d differs: %q %s; first %q %s", step, i+1, words[i], sums[i], words[0], sums[0])
			}
		}
		return words[0], sums[0]
	}
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"one file", func() { write("a.txt", "one") }, "/docs/a.txt:3:0"},
		{"another file", func() { write("b.txt", "second") }, "/docs/a.txt:3:0 /docs/b.txt:6:0"},
		{"new revision", func() { write("a.txt", "three") }, "/docs/a.txt:5:0 /docs/b.txt:6:0"},
		{"locked", func() {
			a := write("a.txt", "four")
			if _, err := e.fs.Lock(ctx, root.ID, a.ID, vfs.LockRequest{Owner: "o", Duration: time.Minute}); err != nil {
				t.Fatal(err)
			}
		}, "/docs/a.txt:4:1 /docs/b.txt:6:0"},
		{"lock expired", func() { clk.Add(time.Minute) }, "/docs/a.txt:4:0 /docs/b.txt:6:0"},
		{"folder renamed", func() {
			if _, err := e.fs.Rename(ctx, root.ID, dir.ID, "papers", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "/papers/a.txt:4:0 /papers/b.txt:6:0"},
		{"deleted", func() {
			kids, _, err := e.fs.List(ctx, root.ID, dir.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.fs.Delete(ctx, root.ID, kids[1].ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, "/papers/a.txt:4:0"},
	}
	seen := map[string]string{}
	for _, s := range steps {
		s.change()
		got, sum := list(s.name)
		if got != s.want {
			t.Fatalf("%s: listed %q, want %q", s.name, got, s.want)
		}
		// The hash covers the children's own fields, which a rename of
		// their folder leaves as they were.
		if prev, ok := seen[sum]; ok && s.name != "folder renamed" {
			t.Fatalf("%s: the hash is the one of %q", s.name, prev)
		}
		seen[sum] = s.name
	}
}
