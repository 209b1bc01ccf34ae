package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
)

// checkListHashes fails when a folder's kept listing hash is not the one
// recomputed from its children, or when List and ListEach answer another.
func checkListHashes(t *testing.T, e *env, step string, folders []uint64) {
	t.Helper()
	for _, f := range folders {
		kept, scanned, _, err := e.fs.ListHashes(ctx, f)
		if err != nil {
			t.Fatalf("%s: folder %d: %v", step, f, err)
		}
		if kept != scanned {
			t.Fatalf("%s: folder %d: kept hash %s, recomputed %s", step, f, kept, scanned)
		}
		_, listed, err := e.fs.List(ctx, e.root.ID, f)
		if errors.Is(err, vfs.ErrNotExist) {
			continue // deleted, or below a deleted folder
		}
		if err != nil {
			t.Fatalf("%s: list %d: %v", step, f, err)
		}
		var each string
		if err := e.fs.ListEach(ctx, e.root.ID, f, vfs.ListOptions{Hash: true}, func(l *vfs.Listing) error {
			each = l.Hash
			return nil
		}); err != nil {
			t.Fatalf("%s: list %d: %v", step, f, err)
		}
		if listed != kept || each != kept {
			t.Fatalf("%s: folder %d: List's hash %s, ListEach's %s, kept %s", step, f, listed, each, kept)
		}
	}
}

// TestListHashKept makes random changes of every kind that touches a
// listing (create, overwrite, mkdir, rename, move, copy, delete, purge,
// lock, unlock, a lock's expiry, properties) and checks after each that
// every folder's kept hash equals one recomputed from its children.
func TestListHashKept(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			clock := berthtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			e := newEnvWith(t, vfs.Options{Now: clock.Now})
			root := e.root
			r := rand.New(rand.NewPCG(seed, 16))
			folders := []uint64{root.FolderID}
			var items []uint64
			var deleted []uint64
			tokens := map[uint64]string{}
			done := map[string]int{}
			name := func() string { return fmt.Sprintf("n%d", r.IntN(12)) }
			pick := func(s []uint64) uint64 { return s[r.IntN(len(s))] }
			for i := range 400 {
				var err error
				var op string
				switch k := r.IntN(12); {
				case k < 3 || len(items) == 0:
					op = "write"
					var n vfs.Node
					n, err = e.fs.WriteFile(ctx, root.ID, pick(folders), name(), strings.NewReader(strings.Repeat("x", r.IntN(40))), vfs.WriteOptions{Overwrite: true})
					if err == nil {
						items = append(items, n.ID)
					}
				case k == 3:
					op = "mkdir"
					var n vfs.Node
					n, err = e.fs.Mkdir(ctx, root.ID, pick(folders), "d"+name(), vfs.WriteOptions{})
					if err == nil {
						items, folders = append(items, n.ID), append(folders, n.ID)
					}
				case k == 4:
					op = "rename"
					_, err = e.fs.Rename(ctx, root.ID, pick(items), name(), vfs.WriteOptions{})
				case k == 5:
					op = "move"
					_, err = e.fs.Move(ctx, root.ID, pick(items), pick(folders), "", vfs.WriteOptions{Overwrite: r.IntN(2) == 0})
				case k == 6:
					op = "copy"
					var n vfs.Node
					n, err = e.fs.Copy(ctx, root.ID, pick(items), root.ID, pick(folders), name(), vfs.WriteOptions{Overwrite: r.IntN(2) == 0})
					if err == nil {
						items = append(items, n.ID)
						if n.Dir {
							folders = append(folders, n.ID)
						}
					}
				case k == 7:
					op = "delete"
					id := pick(items)
					if err = e.fs.Delete(ctx, root.ID, id, vfs.WriteOptions{}); err == nil {
						deleted = append(deleted, id)
					}
				case k == 8 && len(deleted) > 0:
					op = "purge"
					err = e.fs.Purge(ctx, root.ID, pick(deleted))
				case k == 9:
					op = "lock"
					id := pick(items)
					var lk vfs.Lock
					lk, err = e.fs.Lock(ctx, root.ID, id, vfs.LockRequest{Duration: time.Duration(r.IntN(3)) * time.Minute})
					if err == nil {
						tokens[id] = lk.Token
					}
				case k == 10:
					op = "unlock"
					for id, tok := range tokens {
						err = e.fs.Unlock(ctx, root.ID, id, tok)
						delete(tokens, id)
						break
					}
				default:
					op = "clock and props"
					clock.Add(time.Duration(r.IntN(90)) * time.Second)
					err = e.fs.PatchProps(ctx, root.ID, pick(items), map[string][]byte{"{urn:x}p": []byte("v")}, nil, vfs.WriteOptions{})
				}
				if err == nil {
					done[op]++
				}
				if err != nil && !isExpected(err) && !errors.Is(err, vfs.ErrLocked) && !errors.Is(err, vfs.ErrNotDir) &&
					!errors.Is(err, vfs.ErrIsDir) && !errors.Is(err, vfs.ErrRootItem) && !errors.Is(err, vfs.ErrNoSuchLock) && !errors.Is(err, vfs.ErrInvalidName) {
					t.Fatalf("step %d (%s): %v", i, op, err)
				}
				checkListHashes(t, e, fmt.Sprintf("step %d (%s)", i, op), folders)
			}
			t.Logf("changes made: %v", done)
			// Every folder purged has left no sum behind.
			for _, f := range folders {
				if _, err := e.fs.Stat(ctx, root.ID, f); !errors.Is(err, vfs.ErrNotExist) {
					continue
				}
				if sums, locked, err := e.fs.ListSumKeys(ctx, f); err != nil || sums+locked != 0 {
					t.Fatalf("purged folder %d: %d sums, %d locked keys left, %v", f, sums, locked, err)
				}
			}
		})
	}
}

// TestListHashChanges: the hash moves with every listed field of a child
// and with a lock's expiry, without a write, and is back where it was
// when the listing is.
func TestListHashChanges(t *testing.T) {
	clock := berthtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnvWith(t, vfs.Options{Now: clock.Now})
	root := e.root
	hash := func() string {
		t.Helper()
		kept, scanned, _, err := e.fs.ListHashes(ctx, root.FolderID)
		if err != nil || kept != scanned {
			t.Fatalf("kept %s, recomputed %s, %v", kept, scanned, err)
		}
		return kept
	}
	empty := hash()
	f := e.write(t, root.FolderID, "a.txt", []byte("one"))
	one := hash()
	seen := map[string]string{empty: "empty", one: "one file"}
	step := func(what string) string {
		t.Helper()
		h := hash()
		if prev, ok := seen[h]; ok {
			t.Fatalf("%s: hash %s as after %s", what, h, prev)
		}
		seen[h] = what
		return h
	}
	if _, err := e.fs.Rename(ctx, root.ID, f.ID, "b.txt", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	step("rename")
	e.write(t, root.FolderID, "b.txt", []byte("two!"))
	step("overwrite")
	lk, err := e.fs.Lock(ctx, root.ID, f.ID, vfs.LockRequest{Duration: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	locked := step("lock")
	clock.Add(2 * time.Minute)
	expired := hash()
	if expired == locked {
		t.Fatal("the hash stayed when the lock expired")
	}
	if err := e.fs.Unlock(ctx, root.ID, f.ID, lk.Token); err != nil && !errors.Is(err, vfs.ErrNotExist) && !errors.Is(err, vfs.ErrNoSuchLock) {
		t.Fatal(err)
	}
	if h := hash(); h != expired {
		t.Fatalf("removing an expired lock changed the hash: %s, %s", h, expired)
	}
	if err := e.fs.Delete(ctx, root.ID, f.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if h := hash(); h != empty {
		t.Fatalf("an empty folder again: %s, first %s", h, empty)
	}
}

// TestListHashHandedOut: a folder's listing hash, which WebDAV makes a
// collection's entity tag of, reads the same wherever vfs hands it out
// (ListHash; a listed folder's Node.Listing with ListOptions.Hashes, read
// for a batch of folders at once; the folder a DeleteAt or MoveAt check
// sees) as List's of that folder, with a locked child, where the batch's
// scan gives up on a range that holds many other folders' sums, and in
// a store older than the sums; a file gets none.
func TestListHashHandedOut(t *testing.T) {
	e := newEnv(t)
	mkdir := func(parent uint64, name string) uint64 {
		t.Helper()
		d, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	var dirs []uint64
	for _, name := range []string{"d0", "d1"} {
		dirs = append(dirs, mkdir(e.root.FolderID, name))
		e.write(t, dirs[len(dirs)-1], "a.txt", []byte(name))
	}
	// Folders made between the listed ones: their sums lie in the range
	// of the listed folders' ids, more than the batch's scan skips.
	other := mkdir(e.root.FolderID, "other")
	for i := range 30 {
		d := mkdir(other, fmt.Sprintf("o%02d", i))
		for j := range 5 {
			e.write(t, d, fmt.Sprintf("f%d", j), []byte{byte(j)})
		}
	}
	dirs = append(dirs, mkdir(e.root.FolderID, "d2"), other)
	if _, err := e.fs.Lock(ctx, e.root.ID, mustLookup(t, e, "/d1/a.txt").ID, vfs.LockRequest{}); err != nil {
		t.Fatal(err)
	}
	e.write(t, e.root.FolderID, "f.txt", []byte("f"))
	check := func(store string) {
		t.Helper()
		listed := map[uint64]string{}
		if err := e.fs.ListEach(ctx, e.root.ID, e.root.FolderID, vfs.ListOptions{Hashes: true}, func(l *vfs.Listing) error {
			for c, err := range l.Children() {
				if err != nil {
					return err
				}
				if c.Dir != (c.Listing != "") {
					t.Errorf("%s: %s's Listing: %q", store, c.Name, c.Listing)
				}
				listed[c.ID] = c.Listing
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		refused := errors.New("refused")
		for i, d := range dirs {
			_, want, err := e.fs.List(ctx, e.root.ID, d)
			if err != nil {
				t.Fatal(err)
			}
			read, err := e.fs.ListHash(ctx, e.root.ID, d)
			if err != nil {
				t.Fatal(err)
			}
			var deleting, moving vfs.Node
			p := fmt.Sprintf("/d%d", i)
			if d == other {
				p = "/other"
			}
			// Asked for (WriteOptions.Listing), the checks see the hash;
			// not asked for, they see none, and the sums are not read.
			for _, asked := range []bool{false, true} {
				opts := vfs.WriteOptions{Listing: asked}
				deleteErr := e.fs.DeleteAt(ctx, e.root.ID, p, opts, func(n vfs.Node) error { deleting = n; return refused })
				_, _, moveErr := e.fs.MoveAt(ctx, e.root.ID, p, "/moved", opts, func(n vfs.Node, _ error, _ *vfs.Node) error { moving = n; return refused })
				if !errors.Is(deleteErr, refused) || !errors.Is(moveErr, refused) {
					t.Fatalf("%s: the checks' errors: %v, %v", p, deleteErr, moveErr)
				}
				if !asked && (deleting.Listing != "" || moving.Listing != "") {
					t.Errorf("%s: %s: the checks, not asked for the hash, saw %q and %q", store, p, deleting.Listing, moving.Listing)
				}
			}
			for _, c := range []struct{ where, got string }{
				{"ListHash", read}, {"ListOptions.Hashes", listed[d]}, {"DeleteAt's check", deleting.Listing}, {"MoveAt's check", moving.Listing},
			} {
				if c.got != want {
					t.Errorf("%s: %s: %s: %q, want List's %q", store, p, c.where, c.got, want)
				}
			}
		}
	}
	check("kept sums")
	if err := e.fs.ForgetListSums(ctx); err != nil {
		t.Fatal(err)
	}
	check("an older store")
	if _, err := e.fs.ListHash(ctx, e.root.ID, mustLookup(t, e, "/f.txt").ID); !errors.Is(err, vfs.ErrNotDir) {
		t.Errorf("ListHash of a file: %v, want ErrNotDir", err)
	}
}

// TestListHashOlderStore: a store written before the sums were kept lists
// with the same hash (by a scan), and the first change of a child starts
// the folder's sum from its children.
func TestListHashOlderStore(t *testing.T) {
	e := newEnv(t)
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		e.write(t, d.ID, fmt.Sprintf("f%02d", i), []byte{byte(i)})
	}
	if _, err := e.fs.Lock(ctx, e.root.ID, mustLookup(t, e, "/d/f03").ID, vfs.LockRequest{}); err != nil {
		t.Fatal(err)
	}
	_, before, _ := e.fs.List(ctx, e.root.ID, d.ID)
	if err := e.fs.ForgetListSums(ctx); err != nil {
		t.Fatal(err)
	}
	kept, scanned, has, err := e.fs.ListHashes(ctx, d.ID)
	if err != nil || has || kept != before || scanned != before {
		t.Fatalf("without sums: kept %s (%v), recomputed %s, before %s, %v", kept, has, scanned, before, err)
	}
	// Without a sum the count is unknown (-1), not a pass over the
	// children; the first change keeps one, and the count with it.
	count := func() int64 {
		n := int64(-2)
		if err := e.fs.ListEach(ctx, e.root.ID, d.ID, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
			n = l.Count
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != -1 {
		t.Fatalf("Count without a kept sum: %d, want -1", n)
	}
	e.write(t, d.ID, "new", []byte("x"))
	if n := count(); n != 21 {
		t.Fatalf("Count after a change: %d, want 21", n)
	}
	kept, scanned, has, err = e.fs.ListHashes(ctx, d.ID)
	if err != nil || !has || kept != scanned || kept == before {
		t.Fatalf("after a change: kept %s (%v), recomputed %s, before %s, %v", kept, has, scanned, before, err)
	}
	if _, locked, _ := e.fs.ListSumKeys(ctx, d.ID); locked != 1 {
		t.Fatalf("%d locked children kept, want 1", locked)
	}
}

// TestListHashNewFolder: a folder's sum is kept from its making, empty,
// however it is made, so that the first write into it (a sync client's
// PUT after its MKCOL) starts no sum: it scans nothing, where it scanned
// the new folder's children to find none. A folder made empty otherwise
// (a copy, a new root's top) kept no sum until its first child, and its
// ListOptions.Count was -1, the answer for a folder of an older store.
func TestListHashNewFolder(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(e *env, empty uint64) (root, folder uint64, err error)
	}{
		{"mkdir", func(e *env, _ uint64) (uint64, uint64, error) {
			d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
			return e.root.ID, d.ID, err
		}},
		{"copy of an empty folder", func(e *env, empty uint64) (uint64, uint64, error) {
			d, err := e.fs.Copy(ctx, e.root.ID, empty, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
			return e.root.ID, d.ID, err
		}},
		{"empty copy of a folder", func(e *env, empty uint64) (uint64, uint64, error) {
			d, err := e.fs.CopyEmpty(ctx, e.root.ID, empty, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
			return e.root.ID, d.ID, err
		}},
		{"top folder of a new root", func(e *env, _ uint64) (uint64, uint64, error) {
			r, err := e.fs.CreateRoot(ctx, "new", vfs.RootSync)
			return r.ID, r.FolderID, err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			empty, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "empty", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			root, d, err := tc.make(e, empty.ID)
			if err != nil {
				t.Fatal(err)
			}
			kept, scanned, has, err := e.fs.ListHashes(ctx, d)
			if err != nil || !has || kept != scanned {
				t.Fatalf("a new folder: kept %s (%v), recomputed %s, %v", kept, has, scanned, err)
			}
			count := int64(-2)
			if err := e.fs.ListEach(ctx, root, d, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
				count = l.Count
				return nil
			}); err != nil || count != 0 {
				t.Fatalf("Count of a new folder: %d (%v), want 0", count, err)
			}
			before := e.db.TxnStats().Scans
			if _, err := e.fs.WriteFile(ctx, root, d, "f", bytes.NewReader([]byte("x")), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if n := e.db.TxnStats().Scans - before; n != 0 {
				t.Errorf("the first write into a new folder scanned %d times, want none", n)
			}
			if kept, scanned, _, err := e.fs.ListHashes(ctx, d); err != nil || kept != scanned {
				t.Fatalf("a file in the new folder: kept %s, recomputed %s, %v", kept, scanned, err)
			}
		})
	}
}

// TestListHashConcurrentWriters: writers changing one folder at once
// (creates, renames, deletes), first in a folder whose sum is yet to be
// started, leave its kept hash equal to a recomputed one: the shards they
// share, and the start of the sum, conflict and retry rather than lose a
// change.
func TestListHashConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		e.write(t, d.ID, fmt.Sprintf("old-%d", i), []byte{byte(i)})
	}
	if err := e.fs.ForgetListSums(ctx); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				n, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, fmt.Sprintf("w%d-%d", w, i), strings.NewReader("x"), vfs.WriteOptions{})
				switch {
				case err != nil:
				case i%3 == 1:
					_, err = e.fs.Rename(ctx, e.root.ID, n.ID, fmt.Sprintf("r%d-%d", w, i), vfs.WriteOptions{})
				case i%3 == 2:
					err = e.fs.Delete(ctx, e.root.ID, n.ID, vfs.WriteOptions{})
				}
				if err != nil {
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
	checkListHashes(t, e, "after the writers", []uint64{d.ID})
	kids, _, err := e.fs.List(ctx, e.root.ID, d.ID)
	if want := 10 + writers*(each-each/3); err != nil || len(kids) != want {
		t.Fatalf("%d children, want %d: %v", len(kids), want, err)
	}
	if _, _, has, _ := e.fs.ListHashes(ctx, d.ID); !has {
		t.Fatal("no sum kept after the writers")
	}
}

// TestFsckListSums: fsck compares every folder's kept listing sum with a
// scan of its children and names each that differs, where it checked
// chunks and reservations alone and a wrong sum (a listing hash that
// says a folder changed or did not, a wrong count) went unseen. A chain
// of 300 folders, each keeping a sum, crosses the check's batches.
func TestFsckListSums(t *testing.T) {
	for _, c := range []struct {
		name   string
		count  int64
		digest bool
		bad    bool
	}{
		{"sound", 0, false, false},
		{"a count one too high", 1, false, true},
		{"a count one too low", -1, false, true},
		{"a digest changed", 0, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				e.write(t, d.ID, fmt.Sprintf("f%d", i), []byte{byte(i)})
			}
			if _, err := e.fs.MkdirChain(ctx, e.root.ID, e.root.FolderID, "chain", 300); err != nil {
				t.Fatal(err)
			}
			if c.count != 0 || c.digest {
				if err := e.fs.DamageListSum(ctx, d.ID, c.count, c.digest); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := e.fs.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			want := []uint64(nil)
			if c.bad {
				want = []uint64{d.ID}
			}
			if !slices.Equal(rep.BadListSums, want) || rep.OK() == c.bad {
				t.Fatalf("bad listing sums %v (OK %v), want %v: %s", rep.BadListSums, rep.OK(), want, rep)
			}
			if c.bad && !strings.Contains(rep.String(), "1 bad listing sums") {
				t.Errorf("report %q does not count the bad sum", rep)
			}
		})
	}
}

// TestListHashMendOlderStore: the folders of a store written before the
// listing sums were kept get them from the mending Open starts, a few
// children a transaction, and the store is marked done; a listing with
// every subfolder's hash (a WebDAV PROPFIND of Depth 1 asking getetag)
// then costs the scans it does on a store that always kept them, where
// it scanned every subfolder's children on each read. Each hash, during
// the mending and after, is the one scanned, with writes into folders
// half mended (between two of the mending's transactions: creates on
// both sides of its cursor, renames across it, a delete, a lock) and
// writers and a purge running meanwhile: each meets the partial sum or
// conflicts with the mending.
func TestListHashMendOlderStore(t *testing.T) {
	for _, tc := range []struct {
		name    string
		writers bool
	}{
		{"idle", false},
		{"writers meanwhile", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// The writes into half-mended folders run in the mending's
			// pause, once the test has the reopened store (ready).
			var (
				reopened *env
				ready    = make(chan struct{})
				halfway  = map[uint64]bool{}
				errs     = make(chan error, 32)
				subs     []uint64
			)
			pause := func(folder uint64) {
				if !tc.writers {
					return
				}
				<-ready
				if !slices.Contains(subs[2:8], folder) || halfway[folder] {
					return
				}
				halfway[folder] = true
				if err := writeHalfway(reopened, folder); err != nil {
					errs <- fmt.Errorf("folder %d half mended: %w", folder, err)
				}
			}
			opts := vfs.WithListMending(vfs.Options{}, 3, pause)
			e := openEnvWith(t, dir, opts)
			root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			e.root = root
			t.Cleanup(e.close)
			p, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "p", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			folders := []uint64{root.FolderID, p.ID}
			for i := range 12 {
				s, err := e.fs.Mkdir(ctx, root.ID, p.ID, fmt.Sprintf("s%02d", i), vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				subs = append(subs, s.ID)
				for j := range 2 + i {
					e.write(t, s.ID, fmt.Sprintf("f%02d", j), []byte{byte(i), byte(j)})
				}
			}
			folders = append(folders, subs...)
			if _, err := e.fs.Lock(ctx, root.ID, mustLookup(t, e, "/p/s01/f01").ID, vfs.LockRequest{}); err != nil {
				t.Fatal(err)
			}
			gone, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "gone", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for j := range 9 {
				e.write(t, gone.ID, fmt.Sprintf("g%d", j), []byte{byte(j)})
			}
			if err := e.fs.Delete(ctx, root.ID, gone.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			scansOf := func() uint64 {
				before := e.db.TxnStats().Scans
				if err := e.fs.ListEach(ctx, root.ID, p.ID, vfs.ListOptions{Hashes: true}, func(l *vfs.Listing) error {
					for c, err := range l.Children() {
						if err != nil {
							return err
						}
						if c.Listing == "" {
							return fmt.Errorf("%s listed without its hash", c.Name)
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				return e.db.TxnStats().Scans - before
			}
			kept := scansOf()

			if err := e.fs.ForgetListSums(ctx); err != nil {
				t.Fatal(err)
			}
			e.close()
			e = openEnvWith(t, dir, opts)
			e.root = root
			t.Cleanup(e.close)
			reopened = e
			close(ready)
			var wg sync.WaitGroup
			if tc.writers {
				for w, s := range subs[8:] {
					wg.Go(func() {
						for i := range 8 {
							n, err := e.fs.WriteFile(ctx, root.ID, s, fmt.Sprintf("w%d", i), strings.NewReader("x"), vfs.WriteOptions{})
							switch {
							case err != nil:
							case i%3 == 1:
								_, err = e.fs.Rename(ctx, root.ID, n.ID, fmt.Sprintf("a-w%d", i), vfs.WriteOptions{})
							case i%3 == 2:
								err = e.fs.Delete(ctx, root.ID, n.ID, vfs.WriteOptions{})
							}
							if err != nil {
								errs <- fmt.Errorf("writer %d: %w", w, err)
								return
							}
						}
					})
				}
				wg.Go(func() {
					if err := e.fs.Purge(ctx, root.ID, gone.ID); err != nil {
						errs <- fmt.Errorf("purge: %w", err)
					}
				})
			} else {
				folders = append(folders, gone.ID)
			}
			wg.Wait()
			e.fs.WaitListSums()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if tc.writers && len(halfway) != 6 {
				t.Fatalf("wrote into %d folders half mended, want 6", len(halfway))
			}
			if n := scansOf(); n != kept {
				t.Errorf("a listing of 12 subfolders with their hashes: %d scans after the mending, %d with sums kept from the start", n, kept)
			}
			if done, err := e.fs.ListSumsDone(ctx); err != nil || !done {
				t.Fatalf("after the mending: marked done %v, %v", done, err)
			}
			for _, f := range folders {
				kept, scanned, has, err := e.fs.ListHashes(ctx, f)
				if err != nil || !has || kept != scanned {
					t.Fatalf("folder %d after the mending: kept %s (has %v), scanned %s, %v", f, kept, has, scanned, err)
				}
			}
			checkListHashes(t, e, "after the mending", folders)
			rep, err := e.fs.Fsck(ctx, false)
			if err != nil || !rep.OK() {
				t.Fatalf("fsck after the mending: %s, %v", rep, err)
			}
		})
	}
}

// writeHalfway changes folder, whose first 3 children (f00 to f02) the
// mending has counted and the rest not: a file before the cursor and
// one past it, each renamed across it, a counted child locked and one
// deleted; after each the hash read (by a scan) is the scanned one.
func writeHalfway(e *env, folder uint64) error {
	root := e.root.ID
	child := func(name string) (uint64, error) {
		var id uint64
		kids, _, err := e.fs.List(ctx, root, folder)
		for _, n := range kids {
			if n.Name == name {
				id = n.ID
			}
		}
		if err == nil && id == 0 {
			err = fmt.Errorf("no %s", name)
		}
		return id, err
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"a file before the cursor", func() error {
			_, err := e.fs.WriteFile(ctx, root, folder, "a-new", strings.NewReader("x"), vfs.WriteOptions{})
			return err
		}},
		{"a file past it", func() error {
			_, err := e.fs.WriteFile(ctx, root, folder, "z-new", strings.NewReader("y"), vfs.WriteOptions{})
			return err
		}},
		{"a counted child renamed past it", func() error {
			id, err := child("f00")
			if err == nil {
				_, err = e.fs.Rename(ctx, root, id, "zz-f00", vfs.WriteOptions{})
			}
			return err
		}},
		{"a child past it renamed before it", func() error {
			id, err := child("z-new")
			if err == nil {
				_, err = e.fs.Rename(ctx, root, id, "a-moved", vfs.WriteOptions{})
			}
			return err
		}},
		{"a counted child locked", func() error {
			id, err := child("f01")
			if err == nil {
				_, err = e.fs.Lock(ctx, root, id, vfs.LockRequest{})
			}
			return err
		}},
		{"a counted child deleted", func() error {
			id, err := child("f02")
			if err == nil {
				err = e.fs.Delete(ctx, root, id, vfs.WriteOptions{})
			}
			return err
		}},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		kept, scanned, has, err := e.fs.ListHashes(ctx, folder)
		if err != nil || has || kept != scanned {
			return fmt.Errorf("after %s: kept %s (has %v), scanned %s, %v", s.what, kept, has, scanned, err)
		}
	}
	return nil
}

// TestListHashMendPurgedHalfway: a folder the mending left half done (the
// store closed, or killed, between two of its transactions) and purged
// after the restart before the mending met it again keeps no record of
// its sum so far: the mending walks the nodes there are, so nothing else
// would ever take it away.
func TestListHashMendPurgedHalfway(t *testing.T) {
	dir := t.TempDir()
	var (
		mu      sync.Mutex
		pause   func(folder uint64)
		halfway = make(chan struct{})
		release = make(chan struct{})
	)
	opts := vfs.WithListMending(vfs.Options{}, 2, func(folder uint64) {
		mu.Lock()
		p := pause
		mu.Unlock()
		if p != nil {
			p(folder)
		}
	})
	e := openEnvWith(t, dir, opts)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	early, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "early", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for j := range 5 {
		e.write(t, early.ID, fmt.Sprintf("e%d", j), []byte{byte(j)})
	}
	// Over 512 nodes (one read of the mending's walk) before the doomed
	// folder, so that the walk after the restart meets it once purged.
	many, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "many", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 530 {
		e.write(t, many.ID, fmt.Sprintf("m%03d", i), []byte{byte(i)})
	}
	doomed, err := e.fs.Mkdir(ctx, root.ID, root.FolderID, "doomed", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for j := range 5 {
		e.write(t, doomed.ID, fmt.Sprintf("d%d", j), []byte{byte(j)})
	}
	if err := e.fs.Delete(ctx, root.ID, doomed.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.ForgetListSums(ctx); err != nil {
		t.Fatal(err)
	}
	e.close()

	// The mending stops half way through doomed: the store closes in
	// its pause.
	mu.Lock()
	pause = func(folder uint64) {
		if folder == doomed.ID {
			close(halfway)
			<-release
		}
	}
	mu.Unlock()
	e = openEnvWith(t, dir, opts)
	<-halfway
	closed := make(chan struct{})
	go func() { e.close(); close(closed) }()
	// Close stops the mending first thing (after the name index's
	// backfill, done here): its next transaction then fails.
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	pause = nil
	mu.Unlock()
	close(release)
	<-closed
	if n, err := forgetSumOf(t, dir, early.ID); n != 1 || err != nil {
		t.Fatalf("records of folders half mended after the close: %d (%v), want 1", n, err)
	}

	// After the restart doomed is purged while the mending is in
	// early, whose sum is gone again, before its walk reaches doomed.
	var once sync.Once
	var reopened *env
	ready := make(chan struct{})
	mu.Lock()
	pause = func(folder uint64) {
		if folder != early.ID {
			return
		}
		once.Do(func() {
			<-ready
			if err := reopened.fs.Purge(ctx, root.ID, doomed.ID); err != nil {
				t.Errorf("purge: %v", err)
			}
		})
	}
	mu.Unlock()
	reopened = openEnvWith(t, dir, opts)
	reopened.root = root
	defer reopened.close()
	close(ready)
	reopened.fs.WaitListSums()
	if done, err := reopened.fs.ListSumsDone(ctx); err != nil || !done {
		t.Fatalf("after the mending: marked done %v, %v", done, err)
	}
	if n, err := reopened.fs.ListMendRecords(ctx); n != 0 || err != nil {
		t.Errorf("records of folders half mended after the mending: %d (%v), want none", n, err)
	}
}

// forgetSumOf opens the store in dir without vfs, drops the kept sum of
// folder (as a store older than the sums had none) and counts the
// records of folders half mended.
func forgetSumOf(t *testing.T, dir string, folder uint64) (int, error) {
	t.Helper()
	db := openBadger(t, filepath.Join(dir, "meta"), noSync(t))
	defer db.Close()
	err := db.Update(ctx, func(tx kv.Txn) error {
		var keys [][]byte
		for _, p := range []string{kv.VFSListSum, kv.VFSLocked} {
			if err := tx.Scan([]byte(p), nil, func(k, v []byte) error {
				if kv.Uint64At(k, len(p)) == folder {
					keys = append(keys, slices.Clone(k))
				}
				return nil
			}); err != nil {
				return err
			}
		}
		if len(keys) == 0 {
			return fmt.Errorf("folder %d keeps no sum", folder)
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	err = db.View(ctx, func(tx kv.Txn) error {
		return tx.Scan([]byte(kv.VFSListMend), nil, func(k, v []byte) error { n++; return nil })
	})
	return n, err
}
