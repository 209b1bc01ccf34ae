package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// errCrash is what a test panics with to stop an operation between two
// of its transactions, as a killed process would.
var errCrash = errors.New("crash between transactions")

// crashKV panics with errCrash right after the commit that brings its
// countdown to zero, as if the process died there.
type crashKV struct {
	*badgerDB
	countdown atomic.Int64 // 0: never
}

// Update counts every commit but an upload's pins (only J/ keys
// written): the chunk writer takes those on goroutines of its own, where
// a panic would end the test binary rather than the operation.
func (c *crashKV) Update(ctx context.Context, fn func(kv.Txn) error) error {
	var pinsOnly bool
	err := c.badgerDB.Update(ctx, func(tx kv.Txn) error {
		w := &pinWatch{Txn: tx, only: true}
		err := fn(w)
		pinsOnly = w.only
		return err
	})
	if err == nil && !pinsOnly && c.countdown.Load() > 0 && c.countdown.Add(-1) == 0 {
		panic(errCrash)
	}
	return err
}

// pinWatch notes whether a transaction writes keys other than pins.
type pinWatch struct {
	kv.Txn
	only bool
}

func (w *pinWatch) note(k []byte) { w.only = w.only && bytes.HasPrefix(k, []byte(kv.VFSHeld)) }

func (w *pinWatch) Set(k, v []byte) error { w.note(k); return w.Txn.Set(k, v) }

func (w *pinWatch) SetTTL(k, v []byte, ttl time.Duration) error {
	w.note(k)
	return w.Txn.SetTTL(k, v, ttl)
}

func (w *pinWatch) Delete(k []byte) error { w.note(k); return w.Txn.Delete(k) }

// world is a file system over real stores with two or more roots, and
// the items random operations made in them.
type world struct {
	t     *testing.T
	db    *crashKV
	disk  *chunk.Disk
	clock *berthtest.Clock
	opts  vfs.Options
	// hook runs between two transactions of a split operation.
	hook atomic.Pointer[func(vfs.Op)]

	mu     sync.Mutex
	fs     *vfs.FS
	roots  []vfs.Root
	items  []worldItem
	tokens []string // of the locks taken
}

type worldItem struct {
	root, id uint64
	dir      bool
}

// newWorld opens a file system whose operations split from two chunk
// references up, with two roots.
func newWorld(t *testing.T) *world {
	w := &world{t: t, clock: berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	dir := t.TempDir()
	bdb := openBadger(t, filepath.Join(dir, "meta"), true)
	t.Cleanup(func() { bdb.Close() })
	w.db = &crashKV{badgerDB: bdb}
	var err error
	if w.disk, err = chunk.NewDisk(filepath.Join(dir, "chunks")); err != nil {
		t.Fatal(err)
	}
	w.opts = vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{Now: w.clock.Now}, 2), func(op vfs.Op) {
		if fn := w.hook.Load(); fn != nil {
			(*fn)(op)
		}
	})
	w.reopen()
	w.newRoot()
	w.newRoot()
	return w
}

// reopen opens the file system again over the same stores, as a new
// process would after the last one died.
func (w *world) reopen() {
	fs, err := vfs.Open(ctx, w.db, w.disk, w.opts)
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.fs = fs
	w.mu.Unlock()
}

func (w *world) files() *vfs.FS {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fs
}

func (w *world) add(root, id uint64, dir bool) {
	w.mu.Lock()
	w.items = append(w.items, worldItem{root, id, dir})
	w.mu.Unlock()
}

func (w *world) newRoot() {
	w.mu.Lock()
	n := len(w.roots)
	w.mu.Unlock()
	rt, err := w.files().CreateRootWith(ctx, fmt.Sprint("r", n), vfs.RootSync, vfs.RootOptions{Tallies: worldTallies(n)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.mu.Lock()
	w.roots = append(w.roots, rt)
	w.mu.Unlock()
	w.add(rt.ID, rt.FolderID, true)
}

// liveRoot returns a root not deleted.
func (w *world) liveRoot(r *rand.Rand) vfs.Root {
	for {
		w.mu.Lock()
		rt := w.roots[r.IntN(len(w.roots))]
		w.mu.Unlock()
		if _, err := w.files().Root(ctx, rt.ID); err == nil {
			return rt
		}
	}
}

// pick returns a live item of root (a folder with dir), other than its
// top folder unless dir; with deleted, a deleted one. It falls back on the
// top folder.
func (w *world) pick(r *rand.Rand, root uint64, dir, deleted bool) uint64 {
	var of []worldItem
	var top uint64
	w.mu.Lock()
	for _, it := range w.items {
		if it.root == root && (!dir || it.dir) {
			of = append(of, it)
		}
	}
	for _, rt := range w.roots {
		if rt.ID == root {
			top = rt.FolderID
		}
	}
	w.mu.Unlock()
	for range 12 {
		it := of[r.IntN(len(of))]
		n, err := w.files().Stat(ctx, root, it.id)
		if err == nil && n.Deleted == deleted && (dir || n.ParentID != 0) {
			return it.id
		}
	}
	return top
}

var (
	worldNames = []string{"a", "b", "c"}
	worldSizes = []int{100, 20 << 10, 700 << 10, 3 << 20}
)

// step runs one random operation with ctx and returns its error. It sets
// op to the operation's name first, so that a crash in it is told by
// name, and to a finer one ("... skipped") once it knows.
func (w *world) step(ctx context.Context, r *rand.Rand, op *string) error {
	fs := w.files()
	rt := w.liveRoot(r)
	o := vfs.WriteOptions{Overwrite: r.IntN(2) == 0}
	if r.IntN(2) == 0 {
		w.mu.Lock()
		o.LockTokens = append([]string(nil), w.tokens...)
		w.mu.Unlock()
	}
	if r.IntN(6) == 0 {
		if u, err := fs.Usage(ctx, rt.ID); err == nil {
			o.SpaceQuota = u.PhysicalSize + int64(r.IntN(4<<20)) + 1
		}
	}
	if r.IntN(6) == 0 {
		// A quota on one of the root's tallies, a little over its usage.
		for i, t := range worldTallies(w.rootIndex(rt.ID)) {
			if u, err := fs.TallyUsage(ctx, t); err == nil && r.IntN(2) == i {
				o.Quotas = append(o.Quotas, vfs.Quota{Tally: t, Bytes: u.PhysicalSize + int64(r.IntN(4<<20)) + 1})
			}
		}
	}
	name := worldNames[r.IntN(len(worldNames))]
	var err error
	k := r.IntN(len(stepNames))
	*op = stepNames[k]
	switch k {
	case 0, 1, 2:
		var n vfs.Node
		if n, err = fs.Mkdir(ctx, rt.ID, w.pick(r, rt.ID, true, false), name, o); err == nil {
			w.add(rt.ID, n.ID, true)
		}
		return err
	case 3, 4, 5, 6:
		var n vfs.Node
		b := body(uint64(r.IntN(5)), worldSizes[r.IntN(len(worldSizes))])
		if n, err = fs.WriteFile(ctx, rt.ID, w.pick(r, rt.ID, true, false), name, bytes.NewReader(b), o); err == nil {
			w.add(rt.ID, n.ID, false)
		}
		return err
	case 7:
		_, err = fs.Move(ctx, rt.ID, w.pick(r, rt.ID, false, false), w.pick(r, rt.ID, true, false), name, o)
		return err
	case 8:
		dst := w.liveRoot(r)
		var n vfs.Node
		if n, err = fs.Copy(ctx, rt.ID, w.pick(r, rt.ID, false, false), dst.ID, w.pick(r, dst.ID, true, false), name, o); err == nil {
			w.add(dst.ID, n.ID, n.Dir)
		}
		return err
	case 9:
		var n vfs.Node
		if n, err = fs.CopyEmpty(ctx, rt.ID, w.pick(r, rt.ID, true, false), rt.ID, w.pick(r, rt.ID, true, false), name, o); err == nil {
			w.add(rt.ID, n.ID, true)
		}
		return err
	case 10, 11:
		return fs.Delete(ctx, rt.ID, w.pick(r, rt.ID, false, false), o)
	case 12:
		return fs.Purge(ctx, rt.ID, w.pick(r, rt.ID, false, true))
	case 13:
		_, err = fs.PurgeDeleted(ctx, w.clock.Now().Add(-time.Duration(r.IntN(30))*time.Minute))
		return err
	case 14:
		_, err = fs.GC(ctx)
		return err
	case 15:
		if r.IntN(4) != 0 {
			*op += " skipped"
			return nil
		}
		err = fs.DeleteRoot(ctx, rt.ID)
		w.newRoot()
		return err
	case 16:
		id := w.pick(r, rt.ID, false, false)
		var l vfs.Lock
		req := vfs.LockRequest{Deep: r.IntN(2) == 0, Shared: r.IntN(2) == 0, TokenRequired: r.IntN(2) == 0, Duration: 3 * time.Minute}
		if l, err = fs.Lock(ctx, rt.ID, id, req); err == nil {
			if r.IntN(2) == 0 {
				return fs.Unlock(ctx, rt.ID, id, l.Token)
			}
			w.mu.Lock()
			w.tokens = append(w.tokens, l.Token)
			w.mu.Unlock()
		}
		return err
	case 17:
		_, err = fs.Rename(ctx, rt.ID, w.pick(r, rt.ID, false, false), name, o)
		return err
	case 18:
		set := map[string][]byte{}
		for i := range r.IntN(4) {
			set[fmt.Sprint("{ns}", i)] = []byte(name)
		}
		return fs.PatchProps(ctx, rt.ID, w.pick(r, rt.ID, false, false), set, []string{"{ns}0"}, o)
	case 19:
		var n vfs.Node
		if n, _, err = fs.CreateLocked(ctx, rt.ID, w.pick(r, rt.ID, true, false), name, vfs.LockRequest{Duration: time.Minute}, o); err == nil {
			w.add(rt.ID, n.ID, false)
		}
		return err
	default:
		// Another revision of a file, written only if it is still
		// the one picked.
		id := w.pick(r, rt.ID, false, false)
		n, err := fs.Stat(ctx, rt.ID, id)
		if err != nil || n.Dir {
			*op += " skipped"
			return nil
		}
		o.IfRevision = n.RevisionID
		b := body(uint64(r.IntN(5)), worldSizes[r.IntN(len(worldSizes))])
		_, err = fs.WriteFile(ctx, rt.ID, n.ParentID, n.Name, bytes.NewReader(b), o)
		return err
	}
}

// stepNames names the operations of step, each as often as step runs it.
var stepNames = [...]string{"mkdir", "mkdir", "mkdir", "write", "write", "write", "write",
	"move", "copy", "copy-empty", "delete", "delete", "purge", "purge-deleted", "gc",
	"delete-root", "lock", "rename", "props", "create-locked", "revise", "revise"}

// refused reports whether err is an answer an operation may get.
func refused(err error) bool {
	return expected(err) || errors.Is(err, context.Canceled) || errors.Is(err, vfs.ErrQuotaExceeded) ||
		errors.Is(err, vfs.ErrRootDeleted) || errors.Is(err, vfs.ErrChanged)
}

// check fails the test unless no intent is left, every live root's usage
// matches a recount, no record is a stray (see FS.Strays) and fsck finds
// no missing chunk or wrong count. With
// deep, it collects first and also wants no leak, and reads back every
// revision of every item.
func (w *world) check(where string, deep bool) {
	t, fs := w.t, w.files()
	t.Helper()
	if n, err := fs.IntentParts(ctx); err != nil || n != 0 {
		t.Fatalf("%s: %d intent parts left (%v)", where, n, err)
	}
	w.mu.Lock()
	roots := append([]vfs.Root(nil), w.roots...)
	items := append([]worldItem(nil), w.items...)
	w.mu.Unlock()
	for _, rt := range roots {
		got, err := fs.Usage(ctx, rt.ID)
		if errors.Is(err, vfs.ErrRootDeleted) {
			continue
		}
		if err != nil {
			t.Fatalf("%s: usage of root %d: %v", where, rt.ID, err)
		}
		want, err := fs.Audit(ctx, rt.ID)
		if err != nil {
			t.Fatalf("%s: audit of root %d: %v", where, rt.ID, err)
		}
		if got != want {
			t.Fatalf("%s: usage of root %d\n      got %+v\nrecounted %+v", where, rt.ID, got, want)
		}
	}
	w.checkTallies(where)
	if strays, err := fs.Strays(ctx); err != nil || len(strays) > 0 {
		t.Fatalf("%s: records of nothing: %v (%v)", where, strays, err)
	}
	if deep {
		if _, err := fs.GC(ctx); err != nil {
			t.Fatalf("%s: gc: %v", where, err)
		}
	}
	rep, err := fs.Fsck(ctx, false)
	if err != nil {
		t.Fatalf("%s: fsck: %v", where, err)
	}
	if len(rep.Missing)+len(rep.BadRefcounts) > 0 || (deep && !rep.OK()) {
		t.Fatalf("%s: fsck: %v", where, rep)
	}
	if !deep {
		return
	}
	for _, it := range items {
		revs, err := fs.Revisions(ctx, it.root, it.id)
		if err != nil {
			continue // gone, a folder, or in a deleted root
		}
		for _, rv := range revs {
			f, err := fs.OpenRevision(ctx, it.root, it.id, rv.ID)
			if err != nil {
				t.Fatalf("%s: open %d revision %d: %v", where, it.id, rv.ID, err)
			}
			var b bytes.Buffer
			_, err = b.ReadFrom(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: read %d revision %d: %v", where, it.id, rv.ID, err)
			}
			if rv.Size == 0 && b.Len() == 0 {
				continue // made by CreateLocked
			}
			if err := checkBody(b.Bytes()); err != nil {
				t.Fatalf("%s: file %d revision %d: %v", where, it.id, rv.ID, err)
			}
		}
	}
}

func envInt(name string, def uint64) uint64 {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// TestRandomOperations runs a few hundred random operations, one at a
// time, over two roots: writes and new revisions, copies (within and
// across roots, with Overwrite, under a quota), moves, deletes, purges,
// root deletes and trash purges, properties, locks, collections. Some are
// cancelled between two transactions of a split operation, some "crash"
// there or right after any of their commits (the file system is then
// opened again over the same stores). After each it checks that no intent
// is left, every root's usage matches a recount, no record outlived what
// owned it and fsck finds no missing chunk nor wrong count; every ten,
// that the collector leaves no leak and every revision reads back whole.
// BERTH_RANDOM_SEED and BERTH_RANDOM_STEPS choose another run.
func TestRandomOperations(t *testing.T) {
	seed, steps := envInt("BERTH_RANDOM_SEED", 1), int(envInt("BERTH_RANDOM_STEPS", 200))
	r := rand.New(rand.NewPCG(seed, 99))
	w := newWorld(t)
	counts := map[string]int{}
	for step := range steps {
		w.clock.Add(time.Minute)
		opCtx, cancel := context.WithCancel(ctx)
		fate, after := r.IntN(10), r.IntN(3)
		h := func(vfs.Op) {
			if after > 0 {
				after--
				return
			}
			switch fate {
			case 0:
				cancel()
			case 1:
				panic(errCrash)
			}
		}
		w.hook.Store(&h)
		if fate == 2 {
			// Or the process dies right after one of its commits.
			w.db.countdown.Store(int64(1 + r.IntN(4)))
		}
		var op string
		var err error
		crashed := false
		func() {
			defer func() {
				if v := recover(); v != nil {
					if v != errCrash {
						panic(v)
					}
					crashed = true
				}
			}()
			err = w.step(opCtx, r, &op)
		}()
		w.hook.Store(nil)
		w.db.countdown.Store(0)
		cancel()
		switch {
		case crashed:
			op += " crashed"
			w.reopen()
		case err == nil:
		case refused(err):
			op += " refused"
		default:
			t.Fatalf("step %d: %s: %v", step, op, err)
		}
		counts[op]++
		w.check(fmt.Sprintf("step %d (%s)", step, op), step%10 == 9)
	}
	t.Logf("seed %d: %v", seed, counts)
	w.check("end", true)
}

// TestRandomOperationsConcurrent runs the operations of
// TestRandomOperations from several goroutines at once, some cancelled
// between two transactions, and checks the stores at the end.
func TestRandomOperationsConcurrent(t *testing.T) {
	seed, steps := envInt("BERTH_RANDOM_SEED", 1), int(envInt("BERTH_RANDOM_STEPS", 60))
	w := newWorld(t)
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(seed, uint64(g)))
			for range steps {
				w.clock.Add(time.Second)
				opCtx, cancel := context.WithCancel(ctx)
				if r.IntN(10) == 0 {
					// Cancelled after a while, maybe between two
					// transactions of a split operation.
					time.AfterFunc(time.Duration(r.IntN(20))*time.Millisecond, cancel)
				}
				var op string
				err := w.step(opCtx, r, &op)
				cancel()
				switch {
				case err == nil:
				case refused(err):
					op += " refused"
				default:
					t.Errorf("%s: %v", op, err)
				}
				mu.Lock()
				counts[op]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("seed %d: %v", seed, counts)
	w.check("end", true)
}
