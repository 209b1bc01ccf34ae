package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/kv/badger"
	"berth/vfs"
	"berth/vfs/chunk"
)

// sharedStore hides that Badger is exclusive to one process, so that two
// FS on it behave as two nodes on an engine several processes share
// (each releases only what nodes that are gone left).
type sharedStore struct{ kv.Store }

// UpdateUnsynced passes kv.Unsynced on, as an engine shared by nodes may
// have it too.
func (s sharedStore) UpdateUnsynced(ctx context.Context, fn func(kv.Txn) error) error {
	return s.Store.(kv.Unsynced).UpdateUnsynced(ctx, fn)
}

// cluster is two or more FS, standing for nodes, on one metadata store and
// one chunk store.
type cluster struct {
	db     *badgerDB
	shared kv.Store
	chunks *chunk.Disk
	root   vfs.Root
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	dir := t.TempDir()
	db := openBadger(t, filepath.Join(dir, "meta"), false)
	t.Cleanup(func() { db.Close() })
	chunks, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	return &cluster{db: db, shared: sharedStore{db}, chunks: chunks}
}

// node opens a node named name on the cluster's stores; the first one
// creates the root the tests write in.
func (c *cluster) node(t *testing.T, name string, opts vfs.Options) *vfs.FS {
	t.Helper()
	opts.Node = name
	fs, err := vfs.Open(ctx, c.shared, c.chunks, opts)
	if err != nil {
		t.Fatalf("open node %s: %v", name, err)
	}
	t.Cleanup(func() { fs.Close() })
	if c.root.ID == 0 {
		if c.root, err = fs.CreateRoot(ctx, "alice", vfs.RootSync); err != nil {
			t.Fatal(err)
		}
	}
	return fs
}

func (c *cluster) write(fs *vfs.FS, name string, data []byte) (vfs.Node, error) {
	return fs.WriteFile(ctx, c.root.ID, c.root.FolderID, name, bytes.NewReader(data), vfs.WriteOptions{})
}

// orphan writes and purges a file of data, leaving its chunks noted for
// the collector.
func (c *cluster) orphan(t *testing.T, fs *vfs.FS, name string, data []byte) {
	t.Helper()
	n, err := c.write(fs, name, data)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Delete(ctx, c.root.ID, n.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Purge(ctx, c.root.ID, n.ID); err != nil {
		t.Fatal(err)
	}
}

// checkClean collects on fs and fails unless every file in want reads
// back byte-identical on every node and fsck finds nothing wrong.
func (c *cluster) checkClean(t *testing.T, fs *vfs.FS, want map[uint64][]byte, nodes ...*vfs.FS) {
	t.Helper()
	for _, n := range nodes {
		for id, data := range want {
			f, err := n.Open(ctx, c.root.ID, id)
			if err != nil {
				t.Fatalf("open %d: %v", id, err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("file %d reads back %d bytes (%v), want %d", id, len(got), err, len(data))
			}
		}
	}
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err := fs.Fsck(ctx, false)
	if err != nil || !rep.OK() {
		t.Fatalf("fsck: %v, %v (missing %v, leaked %v, bad %v)", rep, err, rep.Missing, rep.Leaked, rep.BadRefcounts)
	}
}

// TestClusterGCDuringUploads: node A uploads files (one of them staged,
// in pieces), many of them the contents of purged files whose chunks
// wait for the collector, while
// node B collects and sweeps over and over; every committed file reads
// back on both nodes and fsck is clean.
func TestClusterGCDuringUploads(t *testing.T) {
	c := newCluster(t)
	a := c.node(t, "a", vfs.Options{})
	b := c.node(t, "b", vfs.Options{})
	const files = 12
	data := make([][]byte, files)
	for i := range data {
		data[i] = randBytes(uint64(100+i), 1<<20+i*97_000)
		if i%3 != 2 {
			c.orphan(t, a, fmt.Sprintf("old-%d", i), data[i])
		}
	}
	stop := make(chan struct{})
	var collected, swept atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if rep, err := b.GC(ctx); err != nil {
				t.Errorf("gc on b: %v", err)
				return
			} else {
				collected.Add(int64(rep.Deleted))
			}
			if rep, err := b.Sweep(ctx); err != nil {
				t.Errorf("sweep on b: %v", err)
				return
			} else {
				swept.Add(int64(rep.Deleted))
			}
		}
	})
	want := map[uint64][]byte{}
	var mu sync.Mutex
	var up sync.WaitGroup
	for i := range files {
		up.Go(func() {
			n, err := c.write(a, fmt.Sprintf("new-%d", i), data[i])
			if err != nil {
				// A busy commit is a clean failure; nothing else is.
				if !errors.Is(err, vfs.ErrBusy) {
					t.Errorf("write new-%d: %v", i, err)
				}
				return
			}
			mu.Lock()
			want[n.ID] = data[i]
			mu.Unlock()
		})
	}
	// And a staged upload in pieces (tus) of an orphaned file's bytes.
	up.Go(func() {
		body := data[0]
		st, err := a.Stage(ctx, c.root.ID, c.root.FolderID, "staged", vfs.StageOptions{Length: int64(len(body))}, vfs.WriteOptions{})
		if err != nil {
			t.Errorf("stage: %v", err)
			return
		}
		for off := 0; off < len(body); off += 300_000 {
			end := min(off+300_000, len(body))
			if _, err := a.Append(ctx, st.ID, int64(off), bytes.NewReader(body[off:end]), vfs.AppendOptions{}); err != nil {
				if !errors.Is(err, vfs.ErrBusy) {
					t.Errorf("append at %d: %v", off, err)
				}
				return
			}
		}
		n, err := a.Finish(ctx, st.ID, vfs.WriteOptions{})
		if err != nil {
			t.Errorf("finish: %v", err)
			return
		}
		mu.Lock()
		want[n.ID] = body
		mu.Unlock()
	})
	up.Wait()
	close(stop)
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("%d of %d uploads committed; b removed %d chunks collecting, %d sweeping", len(want), files+1, collected.Load(), swept.Load())
	c.checkClean(t, b, want, a, b)
}

// TestClusterGCBetweenPinAndCommit: node B collects and sweeps while node
// A's upload has found its chunks in the store (the purged file's) or
// stored them, and has counted only some: B removes none of them.
func TestClusterGCBetweenPinAndCommit(t *testing.T) {
	c := newCluster(t)
	var b *vfs.FS
	var hooked bool
	var during vfs.GCReport
	a := c.node(t, "a", vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{}, 2), func(op vfs.Op) {
		if op != vfs.OpWrite || hooked || b == nil {
			return
		}
		hooked = true
		rep, err := b.GC(ctx)
		if err != nil {
			t.Errorf("gc: %v", err)
		}
		during.Deleted += rep.Deleted
		if rep, err = b.Sweep(ctx); err != nil {
			t.Errorf("sweep: %v", err)
		}
		during.Deleted += rep.Deleted
	}))
	b = c.node(t, "b", vfs.Options{})
	old := randBytes(7, 6<<20)
	c.orphan(t, a, "old", old)
	// The new file is the purged one's bytes and some of its own.
	data := append(bytes.Clone(old), randBytes(8, 3<<20)...)
	n, err := c.write(a, "new", data)
	if err != nil {
		t.Fatal(err)
	}
	if !hooked {
		t.Fatal("the upload was not split: the test needs more chunks")
	}
	if during.Deleted != 0 {
		t.Fatalf("b removed %d chunks while a's upload held them", during.Deleted)
	}
	c.checkClean(t, b, map[uint64][]byte{n.ID: data}, a, b)
	if h, err := a.HeldChunks(ctx); err != nil || h != 0 {
		t.Fatalf("%d chunks still pinned after the upload (%v)", h, err)
	}
}

// TestClusterIntents: what another node's Open or collection does to an
// intent of node A's upload in flight, by whether A is alive.
func TestClusterIntents(t *testing.T) {
	for _, tc := range []struct {
		name string
		// during runs while A's split upload holds an intent, and
		// returns what opened or collected; released says whether A's
		// intent is gone after it.
		during   func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS
		released bool
	}{
		{"a live node's intent survives another node's Open", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			return c.node(t, "c", vfs.Options{})
		}, false},
		{"a live node's intent survives another node's GC", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			b := c.node(t, "b", vfs.Options{})
			if _, err := b.GC(ctx); err != nil {
				t.Fatal(err)
			}
			return b
		}, false},
		{"a dead node's intent is released by a survivor's GC", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			b := c.node(t, "b", vfs.Options{})
			if err := a.Die(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := b.GC(ctx); err != nil {
				t.Fatal(err)
			}
			return b
		}, true},
		{"a dead node's intent is released at a survivor's Open", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			if err := a.Die(ctx); err != nil {
				t.Fatal(err)
			}
			return c.node(t, "c", vfs.Options{})
		}, true},
		{"a restart under the node's name releases at once, within the lease's life", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			a.Freeze()
			return c.node(t, "a", vfs.Options{})
		}, true},
		{"one process on an exclusive store releases every intent at Open", func(t *testing.T, c *cluster, a *vfs.FS) *vfs.FS {
			a.Freeze()
			fs, err := vfs.Open(ctx, c.db, c.chunks, vfs.Options{Node: "solo"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { fs.Close() })
			return fs
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t)
			var other *vfs.FS
			var a *vfs.FS
			var parts int
			hooked := false
			a = c.node(t, "a", vfs.WithBatchHook(vfs.WithRefBatch(vfs.Options{}, 2), func(op vfs.Op) {
				if op != vfs.OpWrite || hooked {
					return
				}
				hooked = true
				other = tc.during(t, c, a)
				var err error
				if parts, err = a.IntentParts(ctx); err != nil {
					t.Error(err)
				}
			}))
			data := randBytes(11, 6<<20)
			n, err := c.write(a, "big", data)
			if !hooked {
				t.Fatal("the upload was not split: the test needs more chunks")
			}
			if released := parts == 0; released != tc.released {
				t.Fatalf("intent released: %v, want %v (%d parts left)", released, tc.released, parts)
			}
			want := map[uint64][]byte{}
			switch {
			case tc.released && !errors.Is(err, vfs.ErrBusy):
				t.Fatalf("the upload whose intent was released: %v, want ErrBusy", err)
			case !tc.released && err != nil:
				t.Fatalf("the upload of a live node: %v", err)
			case err == nil:
				want[n.ID] = data
			}
			// What the survivor sees once A is gone: released pins and
			// intents, then a clean store.
			if !tc.released {
				if err := a.Die(ctx); err != nil {
					t.Fatal(err)
				}
			}
			c.checkClean(t, other, want, other)
			if h, err := other.HeldChunks(ctx); err != nil || h != 0 {
				t.Fatalf("%d chunks still pinned (%v)", h, err)
			}
			if p, err := other.IntentParts(ctx); err != nil || p != 0 {
				t.Fatalf("%d intent parts left (%v)", p, err)
			}
		})
	}
}

// TestClusterDownloadGrace: with a grace, a download on node A of a file
// node B purges meanwhile reads to its end; the chunks go once the grace
// has passed.
func TestClusterDownloadGrace(t *testing.T) {
	c := newCluster(t)
	clock := berthtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts := vfs.Options{Now: clock.Now, OrphanGrace: time.Hour, ReadAhead: -1}
	a := c.node(t, "a", opts)
	b := c.node(t, "b", opts)
	data := randBytes(21, 8<<20)
	n, err := c.write(a, "f", data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := a.Open(ctx, c.root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(f, head); err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(ctx, c.root.ID, n.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.Purge(ctx, c.root.ID, n.ID); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if rep, err := b.GC(ctx); err != nil || rep.Deleted != 0 {
			t.Fatalf("gc within the grace: %v, %v", rep, err)
		}
		// What waits for the grace is garbage the collector knows of,
		// not a leak: fsck of a stopped cluster is clean.
		if rep, err := b.Fsck(ctx, false); err != nil || !rep.OK() || rep.Awaiting == 0 {
			t.Fatalf("fsck within the grace: %v (%v); want OK, the purged chunks awaiting the collector", rep, err)
		}
		if rep, err := b.Sweep(ctx); err != nil || rep.Deleted != 0 {
			t.Fatalf("sweep within the grace: %v, %v", rep, err)
		}
		clock.Add(30 * time.Minute)
	}
	rest, err := io.ReadAll(f)
	if err != nil || !bytes.Equal(append(head, rest...), data) {
		t.Fatalf("the download read %d bytes (%v), want %d", len(head)+len(rest), err, len(data))
	}
	clock.Add(time.Minute)
	rep, err := b.GC(ctx)
	if err != nil || rep.Deleted == 0 {
		t.Fatalf("gc after the grace: %v, %v", rep, err)
	}
	c.checkClean(t, b, nil)
}

// TestDeadCollectorClaims: a collector killed between claiming a chunk
// (B/) and deleting it leaves the claim for its TTL. On a store one
// process owns, the next Open drops such claims, so the collector (and
// uploads) are not kept off the chunk for minutes and nothing leaks
// (the daemon's TestKillDuringCopyPurgeAndGC found the leak).
func TestDeadCollectorClaims(t *testing.T) {
	c := newCluster(t)
	fs, err := vfs.Open(ctx, c.db, c.chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.root, err = fs.CreateRoot(ctx, "alice", vfs.RootSync); err != nil {
		t.Fatal(err)
	}
	c.orphan(t, fs, "gone", bytes.Repeat([]byte("collector claims "), 4<<10))
	var ids []chunk.ID
	if err := c.chunks.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil || len(ids) == 0 {
		t.Fatalf("the purged file left %d chunks (%v); want some", len(ids), err)
	}
	// The dead collector's claims, as it wrote them.
	if err := c.db.Update(ctx, func(tx kv.Txn) error {
		for _, id := range ids {
			if err := tx.SetTTL(append([]byte(kv.VFSDoomed), id[:]...), []byte("dead-node"), 10*time.Minute); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := fs.Close(); err != nil {
		t.Fatal(err)
	}
	fs, err = vfs.Open(ctx, c.db, c.chunks, vfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if _, err := fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	left := 0
	if err := c.chunks.Walk(ctx, func(chunk.ID) error { left++; return nil }); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d chunks of a purged file are still stored after a reopen and a collection", left)
	}
}

// TestCheckChunkStore: a process refuses a chunk store that is not the
// one its metadata store's chunks are in: one without the marker the
// metadata store names (another node's storage.backend left at disk,
// another bucket or prefix), one another metadata store marked, and one
// marked otherwise. The first check of a fresh pair marks it, and every
// later one, by any process, finds it the same.
func TestCheckChunkStore(t *testing.T) {
	ctx := context.Background()
	newDB := func(t *testing.T) kv.Store {
		db, err := badger.Open(badger.Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	newChunks := func(t *testing.T) *chunk.Disk {
		d, err := chunk.OpenDisk(filepath.Join(t.TempDir(), "chunks"), chunk.DiskOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name string
		// set up returns the metadata store and the chunk store the
		// process checks, after whatever checks came before.
		setup func(t *testing.T) (kv.Store, *chunk.Disk)
		want  error
	}{
		{"a fresh pair", func(t *testing.T) (kv.Store, *chunk.Disk) { return newDB(t), newChunks(t) }, nil},
		{"the pair a check marked", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db, c := newDB(t), newChunks(t)
			if err := vfs.CheckChunkStore(ctx, db, c); err != nil {
				t.Fatal(err)
			}
			return db, c
		}, nil},
		{"a chunk store without the marker the metadata store names", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db := newDB(t)
			if err := vfs.CheckChunkStore(ctx, db, newChunks(t)); err != nil {
				t.Fatal(err)
			}
			return db, newChunks(t)
		}, vfs.ErrOtherChunkStore},
		{"a chunk store another metadata store marked", func(t *testing.T) (kv.Store, *chunk.Disk) {
			c := newChunks(t)
			if err := vfs.CheckChunkStore(ctx, newDB(t), c); err != nil {
				t.Fatal(err)
			}
			return newDB(t), c
		}, vfs.ErrOtherChunkStore},
		{"a chunk store marked otherwise", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db, c := newDB(t), newChunks(t)
			if err := vfs.CheckChunkStore(ctx, db, c); err != nil {
				t.Fatal(err)
			}
			if err := c.SetMarker(ctx, []byte("another")); err != nil {
				t.Fatal(err)
			}
			return db, c
		}, vfs.ErrOtherChunkStore},
		// A first check that stopped after it marked the chunk store
		// (the process killed, the database unreachable, a second
		// node's first check that overwrote the first's marker and
		// then failed) left a marker the database never recorded:
		// every later start, on every node, was refused as a chunk
		// store of another deployment.
		{"a pair whose first check stopped after it marked the chunk store", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db, c := newDB(t), newChunks(t)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if err := vfs.CheckChunkStore(cctx, db, cancelOnMark{c, cancel}); err == nil {
				t.Fatal("a check whose context ended as it marked the chunk store passed")
			}
			return db, c
		}, nil},
		{"a fresh pair two processes check at once", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db, c := newDB(t), newChunks(t)
			errs := make(chan error, 2)
			for range 2 {
				go func() { errs <- vfs.CheckChunkStore(ctx, db, c) }()
			}
			for range 2 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			return db, c
		}, nil},
		{"a pair whose first check stopped after it recorded the identity", func(t *testing.T) (kv.Store, *chunk.Disk) {
			db, c := newDB(t), newChunks(t)
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			// It may fail or pass; what it leaves must pass.
			_ = vfs.CheckChunkStore(cctx, cancelOnUpdate{db, cancel}, c)
			return db, c
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, c := tc.setup(t)
			err := vfs.CheckChunkStore(ctx, db, c)
			if !errors.Is(err, tc.want) {
				t.Fatalf("CheckChunkStore = %v, want %v", err, tc.want)
			}
			// A refusal changes nothing; a pass leaves a pair that passes
			// again, and whose chunks the store still walks alone.
			if err := vfs.CheckChunkStore(ctx, db, c); !errors.Is(err, tc.want) {
				t.Fatalf("CheckChunkStore again = %v, want %v", err, tc.want)
			}
			n := 0
			if err := c.Walk(ctx, func(chunk.ID) error { n++; return nil }); err != nil || n != 0 {
				t.Fatalf("Walk of a store holding only its marker: %d ids, %v", n, err)
			}
		})
	}
}

// cancelOnMark is a chunk store whose SetMarker ends the check's context
// once the marker is written: the process stopped right after it.
type cancelOnMark struct {
	*chunk.Disk
	cancel context.CancelFunc
}

func (c cancelOnMark) SetMarker(ctx context.Context, m []byte) error {
	err := c.Disk.SetMarker(ctx, m)
	c.cancel()
	return err
}

// cancelOnUpdate is a metadata store whose first Update ends the check's
// context once it committed: the process stopped right after it.
type cancelOnUpdate struct {
	kv.Store
	cancel context.CancelFunc
}

func (c cancelOnUpdate) Update(ctx context.Context, fn func(kv.Txn) error) error {
	err := c.Store.Update(ctx, fn)
	c.cancel()
	return err
}
