package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"berth/vfs"
)

// Concurrent writers to one root keep exact accounting, and a quota holds
// under concurrency: no interleaving lets two writes both pass one sum.
func TestUsageConcurrent(t *testing.T) {
	e := newEnv(t)
	const writers, each, size = 8, 12, 1000
	quota := int64(50 * size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, fmt.Sprintf("w%d-%d", w, i),
					bytes.NewReader(randBytes(uint64(w*100+i), size)), vfs.WriteOptions{SpaceQuota: quota})
				switch {
				case err == nil:
					mu.Lock()
					stored++
					mu.Unlock()
				case !errors.Is(err, vfs.ErrQuotaExceeded):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored != 50 || u.FileCount != 50 || u.PhysicalSize != quota {
		t.Fatalf("stored %d files, usage %+v, quota %d", stored, u, quota)
	}
}

// worldTallies are the tallies of the world's root number n: one of three
// "persons'" and the one of everything.
func worldTallies(n int) []uint64 { return []uint64{uint64(1 + n%3), 100} }

// rootIndex is the number of root id in the world, as newRoot counted.
func (w *world) rootIndex(id uint64) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, rt := range w.roots {
		if rt.ID == id {
			return i
		}
	}
	return -1
}

// checkTallies fails the test unless every tally of the world equals
// the recount of the live roots counted in it.
func (w *world) checkTallies(where string) {
	t, fs := w.t, w.files()
	t.Helper()
	for _, tl := range []uint64{1, 2, 3, 100} {
		got, err := fs.TallyUsage(ctx, tl)
		if err != nil {
			t.Fatalf("%s: tally %d: %v", where, tl, err)
		}
		want, err := fs.TallyRecount(ctx, tl)
		if err != nil {
			t.Fatalf("%s: recount of tally %d: %v", where, tl, err)
		}
		if got != want {
			t.Fatalf("%s: tally %d\n      got %+v\nrecounted %+v", where, tl, got, want)
		}
	}
}

// tallyEnv is an env with two more roots: a counts into tallies 1 and 9,
// b into 2 and 9.
func tallyEnv(t *testing.T) (e *env, a, b vfs.Root) {
	e = newEnv(t)
	var err error
	if a, err = e.fs.CreateRootWith(ctx, "a", vfs.RootSync, vfs.RootOptions{Tallies: []uint64{1, 9, 9}}); err != nil {
		t.Fatal(err)
	}
	if b, err = e.fs.CreateRootWith(ctx, "b", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{2, 9}}); err != nil {
		t.Fatal(err)
	}
	return e, a, b
}

// checkTally fails unless tally t equals its recount and has roots live
// roots and physical bytes.
func checkTally(t *testing.T, e *env, where string, tally uint64, roots, physical int64) {
	t.Helper()
	got, err := e.fs.TallyUsage(ctx, tally)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.fs.TallyRecount(ctx, tally)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s: tally %d\n      got %+v\nrecounted %+v", where, tally, got, want)
	}
	if got.RootCount != roots || (physical >= 0 && got.PhysicalSize != physical) {
		t.Fatalf("%s: tally %d has %d roots and %d bytes, want %d and %d", where, tally, got.RootCount, got.PhysicalSize, roots, physical)
	}
}

// Every change of a root reaches its tallies in its own transaction:
// writes, revisions, folders, copies across roots, moves, deletes, purges;
// deleting the root takes it out of the live roots counted, but its bytes,
// still stored, stay counted until its purge takes them out. -1 leaves the
// bytes unchecked (a recount still is).
func TestTallies(t *testing.T) {
	e, a, b := tallyEnv(t)
	var f, dir, cp vfs.Node
	steps := []struct {
		name       string
		do         func() error
		t1, t2, t9 int64 // physical bytes of tallies 1, 2 and 9
		r1, r2, r9 int64 // their live roots
	}{
		{"created", func() error { return nil }, 0, 0, 0, 1, 1, 2},
		{"write", func() (err error) {
			f, err = e.fs.WriteFile(ctx, a.ID, a.FolderID, "f", bytes.NewReader(randBytes(1, 5000)), vfs.WriteOptions{})
			return err
		}, 5000, 0, 5000, 1, 1, 2},
		{"revision", func() error {
			_, err := e.fs.WriteFile(ctx, a.ID, a.FolderID, "f", bytes.NewReader(randBytes(2, 300)), vfs.WriteOptions{})
			return err
		}, 5300, 0, 5300, 1, 1, 2},
		{"mkdir", func() (err error) {
			dir, err = e.fs.Mkdir(ctx, a.ID, a.FolderID, "d", vfs.WriteOptions{})
			return err
		}, 5300, 0, 5300, 1, 1, 2},
		{"move", func() error {
			_, err := e.fs.Move(ctx, a.ID, f.ID, dir.ID, "f", vfs.WriteOptions{})
			return err
		}, 5300, 0, 5300, 1, 1, 2},
		{"copy to b", func() (err error) {
			cp, err = e.fs.Copy(ctx, a.ID, dir.ID, b.ID, b.FolderID, "d", vfs.WriteOptions{})
			return err
		}, 5300, 300, 5600, 1, 1, 2},
		{"copy empty", func() error {
			_, err := e.fs.CopyEmpty(ctx, a.ID, dir.ID, b.ID, b.FolderID, "e", vfs.WriteOptions{})
			return err
		}, 5300, 300, 5600, 1, 1, 2},
		{"delete", func() error { return e.fs.Delete(ctx, b.ID, cp.ID, vfs.WriteOptions{}) }, 5300, 300, 5600, 1, 1, 2},
		{"purge", func() error { return e.fs.Purge(ctx, b.ID, cp.ID) }, 5300, 0, 5300, 1, 1, 2},
		{"delete root", func() error { return e.fs.DeleteRoot(ctx, a.ID) }, 5300, 0, 5300, 0, 1, 1},
		{"purge deleted root", func() error {
			_, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour))
			return err
		}, 0, 0, 0, 0, 1, 1},
		{"root without tallies", func() error {
			_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "x", bytes.NewReader(randBytes(3, 100)), vfs.WriteOptions{})
			return err
		}, 0, 0, 0, 0, 1, 1},
		{"tallies set late", func() error {
			return e.fs.SetRootTallies(ctx, e.root.ID, vfs.RootOptions{Tallies: []uint64{9}})
		}, 0, 0, 100, 0, 1, 2},
		{"tallies set once", func() error {
			return e.fs.SetRootTallies(ctx, e.root.ID, vfs.RootOptions{Tallies: []uint64{1}})
		}, 0, 0, 100, 0, 1, 2},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		checkTally(t, e, s.name, 1, s.r1, s.t1)
		checkTally(t, e, s.name, 2, s.r2, s.t2)
		checkTally(t, e, s.name, 9, s.r9, s.t9)
	}
}

// A quota on a tally bounds every root counted into it: a write that would
// pass it is refused before anything is stored, announced or not, and a
// stream that crosses the line midway stores nothing.
func TestTallyQuota(t *testing.T) {
	e, a, b := tallyEnv(t)
	if _, err := e.fs.WriteFile(ctx, a.ID, a.FolderID, "used", bytes.NewReader(randBytes(1, 600<<10)), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	q := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: 2, Bytes: 0}, {Tally: 9, Bytes: 1 << 20}}}
	left, bound, err := e.fs.QuotaLeft(ctx, b.ID, q)
	if err != nil || !bound || left != 1<<20-600<<10 {
		t.Fatalf("QuotaLeft = %d, %v, %v", left, bound, err)
	}
	announced := q
	announced.DeclaredSize = 500 << 10
	cases := []struct {
		name string
		body io.Reader
		opts vfs.WriteOptions
		want error
	}{
		{"announced over, unread", failing{errors.New("body was read")}, announced, vfs.ErrQuotaExceeded},
		{"crosses midway", bytes.NewReader(randBytes(2, 3<<20)), q, vfs.ErrQuotaExceeded},
		{"one byte over", bytes.NewReader(randBytes(3, 1<<20-600<<10+1)), q, vfs.ErrQuotaExceeded},
		{"exactly what is left", bytes.NewReader(randBytes(4, 1<<20-600<<10)), q, nil},
		{"then nothing more", bytes.NewReader([]byte("x")), q, vfs.ErrQuotaExceeded},
	}
	for _, c := range cases {
		before, _ := e.fs.TallyUsage(ctx, 9)
		_, err := e.fs.WriteFile(ctx, b.ID, b.FolderID, "new", c.body, c.opts)
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		after, _ := e.fs.TallyUsage(ctx, 9)
		if err != nil && after != before {
			t.Fatalf("%s: refused, yet tally went from %+v to %+v", c.name, before, after)
		}
	}
	// The copy of a file into a root under the quota is held to it too.
	if _, err := e.fs.Copy(ctx, a.ID, mustLookup(t, &env{fs: e.fs, root: a}, "/used").ID, b.ID, b.FolderID, "c", q); !errors.Is(err, vfs.ErrQuotaExceeded) {
		t.Fatalf("copy: %v", err)
	}
	// What frees space is never refused.
	if err := e.fs.Delete(ctx, b.ID, mustLookup(t, &env{fs: e.fs, root: b}, "/new").ID, q); err != nil {
		t.Fatal(err)
	}
	checkTally(t, e, "end", 9, 2, 1<<20)
	e.checkClean(t)
}

// A deleted root's bytes stay stored until it is purged, and so stay
// counted under its tallies' quotas, as deleted files and bytes (in the
// trash): before, an organization's administrator filled a share to the
// quota, deleted it, made another and filled it again, without end, the
// quota bounding nothing on disk.
func TestDeletedRootQuota(t *testing.T) {
	e, a, b := tallyEnv(t)
	q := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: 9, Bytes: 1 << 20}}}
	var c vfs.Root
	write := func(r *vfs.Root, name string, n int) func() error {
		return func() error {
			_, err := e.fs.WriteFile(ctx, r.ID, r.FolderID, name, bytes.NewReader(randBytes(uint64(n), n)), q)
			return err
		}
	}
	const full = 1 << 20
	steps := []struct {
		name        string
		do          func() error
		want        error
		roots, used int64 // tally 9's live roots and bytes after
		files, del  int64 // and its live and deleted files
	}{
		{"fill a", write(&a, "full", full), nil, 2, full, 1, 0},
		{"delete a: its file goes to the trash", func() error { return e.fs.DeleteRoot(ctx, a.ID) }, nil, 1, full, 0, 1},
		{"a new root", func() (err error) {
			c, err = e.fs.CreateRootWith(ctx, "c", vfs.RootShare, vfs.RootOptions{Tallies: []uint64{9}})
			return err
		}, nil, 2, full, 0, 1},
		{"the new root is held to what the deleted one holds", write(&c, "again", 1<<10), vfs.ErrQuotaExceeded, 2, full, 0, 1},
		{"so is another", write(&b, "again", 1), vfs.ErrQuotaExceeded, 2, full, 0, 1},
		{"the purge frees it", func() error {
			_, err := e.fs.PurgeDeleted(ctx, time.Now().Add(time.Hour))
			return err
		}, nil, 2, 0, 0, 0},
		{"then the new root stores", write(&c, "again", full), nil, 2, full, 1, 0},
	}
	for _, s := range steps {
		if err := s.do(); !errors.Is(err, s.want) || (err != nil) != (s.want != nil) {
			t.Fatalf("%s: %v, want %v", s.name, err, s.want)
		}
		checkTally(t, e, s.name, 9, s.roots, s.used)
		u, err := e.fs.TallyUsage(ctx, 9)
		if err != nil || u.FileCount != s.files || u.HeadSize != s.files*full || u.DelFileCount != s.del || u.DelRevisionCount != s.del || u.DeletedSize != s.del*full {
			t.Fatalf("%s: tally %+v (%v), want %d files and %d deleted of %d bytes each", s.name, u, err, s.files, s.del, full)
		}
		e.fsckClean(t)
	}
}

// Dead properties are stored bytes, counted in the usage and held to the
// quotas as a file's are: a tenant at its quota stored 64 KiB more on
// every empty folder it made (PROPPATCH), and copies of such folders,
// with no quota seeing any of it. Purging the item gives them back.
func TestPropsQuota(t *testing.T) {
	e, a, _ := tallyEnv(t)
	q := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: 9, Bytes: 70000}}}
	if _, err := e.fs.WriteFile(ctx, a.ID, a.FolderID, "used", bytes.NewReader(randBytes(1, 60000)), q); err != nil {
		t.Fatal(err)
	}
	p, err := e.fs.Mkdir(ctx, a.ID, a.FolderID, "p", q)
	if err != nil {
		t.Fatal(err)
	}
	const name = "{urn:z}blob"
	blob := func(n int) map[string][]byte { return map[string][]byte{name: bytes.Repeat([]byte("x"), n)} }
	copied := func(dst string) error {
		_, err := e.fs.Copy(ctx, a.ID, p.ID, a.ID, a.FolderID, dst, q)
		return err
	}
	var c vfs.Node // the copy, once made
	copiedEmpty := func(dst string) error {
		_, err := e.fs.CopyEmpty(ctx, a.ID, p.ID, a.ID, a.FolderID, dst, q)
		return err
	}
	cases := []struct {
		name     string
		do       func() error
		want     error
		physical int64 // the tally's bytes after
	}{
		{"props past the quota", func() error { return e.fs.PatchProps(ctx, a.ID, p.ID, blob(30000), nil, q) }, vfs.ErrQuotaExceeded, 60000},
		{"props that fit", func() error { return e.fs.PatchProps(ctx, a.ID, p.ID, blob(4000), nil, q) }, nil, 64000 + int64(len(name))},
		{"replaced by larger", func() error { return e.fs.PatchProps(ctx, a.ID, p.ID, blob(5000), nil, q) }, nil, 65000 + int64(len(name))},
		{"a copy of them past the quota", func() error { return copied("c") }, vfs.ErrQuotaExceeded, 65000 + int64(len(name))},
		{"an empty copy past the quota", func() error { return copiedEmpty("c") }, vfs.ErrQuotaExceeded, 65000 + int64(len(name))},
		{"on the top folder past the quota", func() error { return e.fs.PatchProps(ctx, a.ID, a.FolderID, blob(5000), nil, q) }, vfs.ErrQuotaExceeded, 65000 + int64(len(name))},
		{"shrunk", func() error { return e.fs.PatchProps(ctx, a.ID, p.ID, blob(1000), nil, q) }, nil, 61000 + int64(len(name))},
		{"then copied", func() error { return copied("c") }, nil, 62000 + 2*int64(len(name))},
		{"and copied empty", func() error { return copiedEmpty("d") }, nil, 63000 + 3*int64(len(name))},
		{"removed at the quota", func() error {
			return e.fs.PatchProps(ctx, a.ID, p.ID, nil, []string{name}, vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: 9, Bytes: 1}}})
		}, nil, 62000 + 2*int64(len(name))},
		{"deleted, still stored", func() error {
			c = mustLookup(t, &env{fs: e.fs, root: a}, "/c")
			return e.fs.Delete(ctx, a.ID, c.ID, q)
		}, nil, 62000 + 2*int64(len(name))},
		{"purged", func() error { return e.fs.Purge(ctx, a.ID, c.ID) }, nil, 61000 + int64(len(name))},
	}
	for _, c := range cases {
		if err := c.do(); !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		checkTally(t, e, c.name, 9, 2, c.physical)
		u, err := e.fs.Usage(ctx, a.ID)
		if err != nil || u.PhysicalSize != c.physical {
			t.Fatalf("%s: root usage %d bytes (%v), want %d", c.name, u.PhysicalSize, err, c.physical)
		}
	}
	e.checkClean(t)
}

// Concurrent writers to two roots under one tally quota cannot pass it
// together: each checked write reads and writes the tally's marker.
func TestTallyQuotaConcurrent(t *testing.T) {
	e, a, b := tallyEnv(t)
	const writers, each, size = 8, 12, 1000
	quota := int64(50 * size)
	opts := vfs.WriteOptions{Quotas: []vfs.Quota{{Tally: 9, Bytes: quota}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for w := range writers {
		wg.Go(func() {
			rt := []vfs.Root{a, b}[w%2]
			for i := range each {
				_, err := e.fs.WriteFile(ctx, rt.ID, rt.FolderID, fmt.Sprintf("w%d-%d", w, i),
					bytes.NewReader(randBytes(uint64(w*100+i), size)), opts)
				switch {
				case err == nil:
					mu.Lock()
					stored++
					mu.Unlock()
				case !errors.Is(err, vfs.ErrQuotaExceeded):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if stored != 50 {
		t.Fatalf("stored %d files under a quota of 50", stored)
	}
	checkTally(t, e, "end", 9, 2, quota)
}
