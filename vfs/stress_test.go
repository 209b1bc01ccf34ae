package vfs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"berth/vfs"
)

// body returns n bytes that describe themselves: a seed and a length,
// then bytes drawn from the seed. Files with equal seeds share chunks.
func body(seed uint64, n int) []byte {
	n = max(n, 16)
	b := randBytes(seed, n)
	binary.LittleEndian.PutUint64(b, seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	return b
}

// checkBody reports whether b is a whole body as body made it.
func checkBody(b []byte) error {
	if len(b) < 16 {
		return fmt.Errorf("%d bytes, too short", len(b))
	}
	seed, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if uint64(len(b)) != n {
		return fmt.Errorf("%d bytes, body of seed %d had %d", len(b), seed, n)
	}
	if !bytes.Equal(b, body(seed, int(n))) {
		return fmt.Errorf("%d bytes of seed %d differ", n, seed)
	}
	return nil
}

// checkStore runs the collector, then checks that nothing is missing,
// leaked or miscounted, that the root's records agree and its usage
// matches a recount, that no intent is left, and that every revision of
// every item (live or deleted) reads back whole.
func checkStore(t *testing.T, fs *vfs.FS, root uint64, ids []uint64) {
	t.Helper()
	for range 2 {
		if _, err := fs.GC(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck: %v (%v)", rep, err)
	}
	if n, err := fs.IntentParts(ctx); err != nil || n != 0 {
		t.Fatalf("%d intent parts left (%v)", n, err)
	}
	want, err := fs.Audit(ctx, root)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	got, err := fs.Usage(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("usage\n got %+v\nrecounted %+v", got, want)
	}
	for _, id := range ids {
		revs, err := fs.Revisions(ctx, root, id)
		if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrIsDir) {
			continue
		}
		if err != nil {
			t.Fatalf("revisions of %d: %v", id, err)
		}
		for _, r := range revs {
			f, err := fs.OpenRevision(ctx, root, id, r.ID)
			if err != nil {
				t.Fatalf("open %d revision %d: %v", id, r.ID, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				t.Fatalf("read %d revision %d: %v", id, r.ID, err)
			}
			if err := checkBody(b); err != nil {
				t.Fatalf("file %d revision %d: %v", id, r.ID, err)
			}
		}
	}
}

// expected reports whether err is a refusal a request may meet when
// others change the tree under it.
func expected(err error) bool {
	for _, e := range []error{vfs.ErrNotExist, vfs.ErrNameConflict, vfs.ErrLocked, vfs.ErrBusy,
		vfs.ErrNotDir, vfs.ErrIsDir, vfs.ErrRootItem, vfs.ErrNoSuchLock} {
		if errors.Is(err, e) {
			return true
		}
	}
	return err == nil
}

// TestConcurrentTreeChanges runs random writes, moves, renames, copies,
// deletes, purges, locks and collections on one small tree at once, with
// operations split into several transactions from two chunks up, then
// checks that nothing was lost, leaked, corrupted or miscounted.
func TestConcurrentTreeChanges(t *testing.T) {
	fs, root, _, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
	var mu sync.Mutex
	ids := []uint64{root.FolderID}
	dirs := []uint64{root.FolderID}
	add := func(n vfs.Node) {
		mu.Lock()
		ids = append(ids, n.ID)
		if n.Dir {
			dirs = append(dirs, n.ID)
		}
		mu.Unlock()
	}
	// pick prefers live items, as clients mostly name those.
	pick := func(r *rand.Rand, dir bool) uint64 {
		var id uint64
		for range 4 {
			mu.Lock()
			if dir || r.IntN(3) == 0 {
				id = dirs[r.IntN(len(dirs))]
			} else {
				id = ids[r.IntN(len(ids))]
			}
			mu.Unlock()
			if n, err := fs.Stat(ctx, root.ID, id); err == nil && !n.Deleted {
				break
			}
		}
		return id
	}
	for _, a := range []string{"a", "b", "c"} {
		d, err := fs.Mkdir(ctx, root.ID, root.FolderID, a, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		add(d)
		for _, b := range []string{"x", "y"} {
			sub, err := fs.Mkdir(ctx, root.ID, d.ID, b, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			add(sub)
		}
	}
	names := []string{"a", "b", "c", "d"}
	o := vfs.WriteOptions{}
	const workers, steps = 6, 60
	seed := uint64(7)
	if v := os.Getenv("BERTH_STRESS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	var ok, failed sync.Map
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for range steps {
				name := names[r.IntN(len(names))]
				var err error
				var op string
				switch k := r.IntN(14); k {
				case 0, 1:
					op = "mkdir"
					var n vfs.Node
					if n, err = fs.Mkdir(ctx, root.ID, pick(r, true), name, o); err == nil {
						add(n)
					}
				case 2, 3, 4, 12, 13:
					op = "write"
					size := []int{100, 20 << 10, 300 << 10, 900 << 10}[r.IntN(4)]
					var n vfs.Node
					n, err = fs.WriteFile(ctx, root.ID, pick(r, true), name, bytes.NewReader(body(uint64(r.IntN(6)), size)), o)
					if err == nil {
						add(n)
					}
				case 5:
					op = "move"
					_, err = fs.Move(ctx, root.ID, pick(r, false), pick(r, true), "", o)
				case 6:
					op = "rename"
					_, err = fs.Rename(ctx, root.ID, pick(r, false), name, o)
				case 7:
					op = "copy"
					var n vfs.Node
					if n, err = fs.Copy(ctx, root.ID, pick(r, false), root.ID, pick(r, true), name, o); err == nil {
						add(n)
					}
				case 8:
					op = "delete"
					err = fs.Delete(ctx, root.ID, pick(r, false), o)
				case 9:
					op = "purge"
					mu.Lock()
					id := ids[r.IntN(len(ids))]
					mu.Unlock()
					err = fs.Purge(ctx, root.ID, id)
				case 10:
					op = "lock"
					var l vfs.Lock
					id := pick(r, false)
					l, err = fs.Lock(ctx, root.ID, id, vfs.LockRequest{Deep: r.IntN(2) == 0, Shared: r.IntN(2) == 0})
					if err == nil {
						err = fs.Unlock(ctx, root.ID, id, l.Token)
					}
				case 11:
					op = "gc"
					_, err = fs.GC(ctx)
				}
				if !expected(err) {
					t.Errorf("%s: %v", op, err)
				}
				m, key := &ok, op
				if err != nil {
					m = &failed
					for _, e := range []error{vfs.ErrNotExist, vfs.ErrNameConflict, vfs.ErrLocked, vfs.ErrBusy,
						vfs.ErrNotDir, vfs.ErrIsDir, vfs.ErrRootItem} {
						if errors.Is(err, e) {
							key = op + " " + e.Error()
						}
					}
				}
				c, _ := m.LoadOrStore(key, new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
			}
		})
	}
	wg.Wait()
	for _, m := range []*sync.Map{&ok, &failed} {
		m.Range(func(k, v any) bool {
			t.Logf("%s: %d", k, v.(*atomic.Int64).Load())
			return true
		})
	}
	checkStore(t, fs, root.ID, ids)
}
