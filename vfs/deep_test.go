package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// deepChain is a chain of folders for the depth benchmarks and tests.
type deepChain struct {
	e      *env
	bottom uint64 // deepest folder of the chain
	above  uint64 // the folder holding it
	side   uint64 // an empty folder beside bottom, in above
	mv     uint64 // an empty folder beside bottom, moved into side and back
	mvIn   bool   // mv is in side
	path   string // path of bottom
	file   uint64 // a file in bottom
}

// deepOps are the operations a sync client does at the bottom of a deep
// tree, run at the bottom of a deepChain.

var deepOps = []struct {
	name string
	// most is how many records the operation may read a level: one
	// walk up the folders for each of its transactions (2 reads a
	// level, the location and the record), a Lookup's walk down 1.
	most float64
	op   func(ctx context.Context, c *deepChain, i int) error
}{
	{"WriteFile", 4.5, func(ctx context.Context, c *deepChain, i int) error {
		_, err := c.e.fs.WriteFile(ctx, c.e.root.ID, c.bottom, fmt.Sprint("w", i), strings.NewReader("x"), vfs.WriteOptions{})
		return err
	}},
	{"WriteAt", 2.5, func(ctx context.Context, c *deepChain, i int) error {
		_, _, err := c.e.fs.WriteAt(ctx, c.e.root.ID, fmt.Sprint(c.path, "/p", i), strings.NewReader("x"), vfs.WriteOptions{}, nil)
		return err
	}},
	{"Lookup", 1.2, func(ctx context.Context, c *deepChain, i int) error {
		_, err := c.e.fs.Lookup(ctx, c.e.root.ID, c.path+"/f")
		return err
	}},
	{"Stat", 0.1, func(ctx context.Context, c *deepChain, i int) error {
		_, err := c.e.fs.Stat(ctx, c.e.root.ID, c.file)
		return err
	}},
	{"Rename", 2.5, func(ctx context.Context, c *deepChain, i int) error {
		_, err := c.e.fs.Rename(ctx, c.e.root.ID, c.file, fmt.Sprint("f", i%2), vfs.WriteOptions{})
		return err
	}},
	{"MoveFolder", 2.5, func(ctx context.Context, c *deepChain, i int) error {
		dst := c.side
		if c.mvIn {
			dst = c.above
		}
		_, err := c.e.fs.Move(ctx, c.e.root.ID, c.mv, dst, "", vfs.WriteOptions{})
		c.mvIn = c.mvIn != (err == nil)
		return err
	}},
	{"Lock", 4.5, func(ctx context.Context, c *deepChain, i int) error {
		l, err := c.e.fs.Lock(ctx, c.e.root.ID, c.file, vfs.LockRequest{Holder: "alice", TokenRequired: true})
		if err != nil {
			return err
		}
		return c.e.fs.Unlock(ctx, c.e.root.ID, c.file, l.Token)
	}},
	{"DeleteAt", 3.5, func(ctx context.Context, c *deepChain, i int) error {
		p := fmt.Sprint(c.path, "/d", i)
		if _, _, err := c.e.fs.WriteAt(ctx, c.e.root.ID, p, strings.NewReader("x"), vfs.WriteOptions{}, nil); err != nil {
			return err
		}
		return c.e.fs.DeleteAt(ctx, c.e.root.ID, p, vfs.WriteOptions{}, nil)
	}},
	{"ListEach", 2.5, func(ctx context.Context, c *deepChain, i int) error {
		return c.e.fs.ListEach(ctx, c.e.root.ID, c.bottom, vfs.ListOptions{}, func(*vfs.Listing) error { return nil })
	}},
}

// newDeepChain makes a chain of n folders in e's root, two folders beside
// the deepest and a file in it.
func newDeepChain(t testing.TB, e *env, n int) *deepChain {
	t.Helper()
	ctx := context.Background()
	above, err := e.fs.MkdirChain(ctx, e.root.ID, e.root.FolderID, "c", n-1)
	if err != nil {
		t.Fatal(err)
	}
	c := &deepChain{e: e, above: above}
	bottom, err := e.fs.Mkdir(ctx, e.root.ID, above, "bottom", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	side, err := e.fs.Mkdir(ctx, e.root.ID, above, "side", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.bottom, c.side, c.path = bottom.ID, side.ID, bottom.Path
	c.mv = dir(t, e, above, "mv")
	c.file = e.write(t, c.bottom, "f", []byte("x")).ID
	return c
}

// deepReads is the store reads (Gets and Scans) per run of op at the
// bottom of c, over rounds runs (the first one, which warms the caches,
// left out), and the time of one.
func deepReads(t testing.TB, c *deepChain, op func(context.Context, *deepChain, int) error, rounds int) (gets, scans float64, per time.Duration) {
	t.Helper()
	ctx := context.Background()
	if err := op(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	before, start := c.e.db.TxnStats(), time.Now()
	for i := 1; i <= rounds; i++ {
		if err := op(ctx, c, i); err != nil {
			t.Fatal(err)
		}
	}
	per = time.Since(start) / time.Duration(rounds)
	after := c.e.db.TxnStats()
	return float64(after.Gets-before.Gets) / float64(rounds), float64(after.Scans-before.Scans) / float64(rounds), per
}

// BenchmarkDeep prices the operations of a sync client at the bottom of
// chains of folders 10, 100 and MaxDepth-1 deep, in store reads per
// operation (gets/op, scans/op) beside the time.
// Run: go test -run '^$' -bench Deep -benchtime 20x ./vfs
func BenchmarkDeep(b *testing.B) {
	for _, depth := range []int{10, 100, vfs.MaxDepth - 1} {
		e := newEnv(b)
		c := newDeepChain(b, e, depth)
		for _, o := range deepOps {
			b.Run(fmt.Sprint(o.name, "/", depth), func(b *testing.B) {
				gets, scans, _ := deepReads(b, c, o.op, b.N)
				b.ReportMetric(gets, "gets/op")
				b.ReportMetric(scans, "scans/op")
			})
		}
	}
}

// mkdirAll: MkdirAll makes the missing folders of a path in one
// transaction, each as strictly as a Mkdir of its own would (the depth
// limit, a file in the way, the locks on and above the folders, the
// deep ones covering the folders it makes below the first), and its
// reads grow with the depth, where a Mkdir per level walked the path
// again at each.
func mkdirAll(t *testing.T) {
	ctx := context.Background()
	other := vfs.WriteOptions{Principal: "bob"}
	for _, tc := range []struct {
		name string
		// setup makes what the row needs in e's root and returns the
		// path to make and the options to make it with.
		setup func(t *testing.T, e *env) (string, vfs.WriteOptions)
		err   error
	}{
		{"the missing levels below one there", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			dir(t, e, e.root.FolderID, "a")
			return "/a/b/c/d", vfs.WriteOptions{}
		}, nil},
		{"a folder there already", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			a := dir(t, e, e.root.FolderID, "a")
			dir(t, e, a, "b")
			return "/a/b", vfs.WriteOptions{}
		}, nil},
		{"a file in the way", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			e.write(t, dir(t, e, e.root.FolderID, "a"), "f", []byte("x"))
			return "/a/f/b", vfs.WriteOptions{}
		}, vfs.ErrNameConflict},
		{"a file at the path", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			e.write(t, e.root.FolderID, "f", []byte("x"))
			return "/f", vfs.WriteOptions{}
		}, vfs.ErrNameConflict},
		{"past MaxDepth", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			if _, err := e.fs.MkdirChain(ctx, e.root.ID, e.root.FolderID, "c", vfs.MaxDepth-2); err != nil {
				t.Fatal(err)
			}
			return chainPath("c", vfs.MaxDepth-2) + "/x/y/z", vfs.WriteOptions{}
		}, vfs.ErrTooDeep},
		{"up to MaxDepth", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			if _, err := e.fs.MkdirChain(ctx, e.root.ID, e.root.FolderID, "c", vfs.MaxDepth-2); err != nil {
				t.Fatal(err)
			}
			return chainPath("c", vfs.MaxDepth-2) + "/x/y", vfs.WriteOptions{}
		}, nil},
		{"a lock on the folder, not held", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			lockOn(t, e, dir(t, e, e.root.FolderID, "a"), vfs.LockRequest{Holder: "alice"})
			return "/a/b/c", other
		}, vfs.ErrLocked},
		{"a deep lock far above, not held", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			a := dir(t, e, e.root.FolderID, "a")
			dir(t, e, a, "b")
			lockOn(t, e, a, vfs.LockRequest{Holder: "alice", Deep: true})
			return "/a/b/c/d", other
		}, vfs.ErrLocked},
		{"a deep lock above, held", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			a := dir(t, e, e.root.FolderID, "a")
			lockOn(t, e, a, vfs.LockRequest{Holder: "bob", Deep: true})
			return "/a/b/c", other
		}, nil},
		// The folder's own shared lock, held, lets the first level in;
		// a folder made below it is covered by the deep shared lock above
		// alone, which bob does not hold: a Mkdir there is refused, so
		// the path is.
		{"a shared lock held on the folder, a deep one not held above", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			a := dir(t, e, e.root.FolderID, "a")
			b := dir(t, e, a, "b")
			lockOn(t, e, a, vfs.LockRequest{Holder: "alice", Deep: true, Shared: true})
			lockOn(t, e, b, vfs.LockRequest{Holder: "bob", Shared: true})
			return "/a/b/c/d", other
		}, vfs.ErrLocked},
		{"a shared lock held on the folder, one level made", func(t *testing.T, e *env) (string, vfs.WriteOptions) {
			a := dir(t, e, e.root.FolderID, "a")
			b := dir(t, e, a, "b")
			lockOn(t, e, a, vfs.LockRequest{Holder: "alice", Deep: true, Shared: true})
			lockOn(t, e, b, vfs.LockRequest{Holder: "bob", Shared: true})
			return "/a/b/c", other
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			p, opts := tc.setup(t, e)
			before, err := e.fs.Usage(ctx, e.root.ID)
			if err != nil {
				t.Fatal(err)
			}
			n, err := e.fs.MkdirAll(ctx, e.root.ID, p, opts)
			if !errors.Is(err, tc.err) {
				t.Fatalf("MkdirAll(%.40q): %v, want %v", p, err, tc.err)
			}
			after, aerr := e.fs.Usage(ctx, e.root.ID)
			if aerr != nil {
				t.Fatal(aerr)
			}
			if err != nil {
				if after.FolderCount != before.FolderCount {
					t.Fatalf("refused, and %d folders made", after.FolderCount-before.FolderCount)
				}
				return
			}
			got, err := e.fs.Lookup(ctx, e.root.ID, p)
			if err != nil || !got.Dir || got.ID != n.ID || n.Path != p {
				t.Fatalf("MkdirAll answered %d %q; the path holds %+v (%v)", n.ID, n.Path, got, err)
			}
			again, err := e.fs.MkdirAll(ctx, e.root.ID, p, opts)
			if err != nil || again.ID != n.ID {
				t.Fatalf("again: %d (%v), want %d", again.ID, err, n.ID)
			}
		})
	}

	t.Run("reads grow linearly", func(t *testing.T) {
		e := newEnv(t)
		perLevel := map[int]float64{}
		for _, depth := range []int{100, 400} {
			before := e.db.TxnStats()
			if _, err := e.fs.MkdirAll(ctx, e.root.ID, chainPath(fmt.Sprint("d", depth), depth), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			after := e.db.TxnStats()
			perLevel[depth] = float64(after.Gets+after.Scans-before.Gets-before.Scans) / float64(depth)
		}
		if perLevel[400] > 1.5*perLevel[100] {
			t.Fatalf("reads a level: %.1f at depth 100, %.1f at 400; want them to grow no more than linearly", perLevel[100], perLevel[400])
		}
	})
}

// chainPath is the path of the last of n folders MkdirChain makes in the
// top folder with prefix.
func chainPath(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "/%s%d", prefix, i)
	}
	return b.String()
}

// dir makes the folder name in parent, for a fixture.
func dir(t testing.TB, e *env, parent uint64, name string) uint64 {
	t.Helper()
	n, err := e.fs.Mkdir(context.Background(), e.root.ID, parent, name, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.ID
}

// lockOn locks the item id, for a fixture.
func lockOn(t *testing.T, e *env, id uint64, req vfs.LockRequest) {
	t.Helper()
	if _, err := e.fs.Lock(context.Background(), e.root.ID, id, req); err != nil {
		t.Fatal(err)
	}
}

// deepReadsGrowLinearly: each of deepOps reads the store about as often
// a level at the bottom of a chain 400 deep as of one 100 deep. A write
// transaction kept at most 64 records it had read (recMemo), so past
// that depth each of its walks up the folders (liveness, depth, locks,
// the path) read every level again: a move of a folder 999 deep read the
// store 13,257 times, 13 a level, where 100 deep it read 6.7 a level.
// And it reads no more than a walk a transaction: a read transaction
// kept nothing it had read but the engine's 128 keys, so a write's checks
// before its body (live, MaxDepth, locks: three walks) read 6 records a
// level past 64 levels, where 2 do (WriteFile 8.0 a level, now 4.0;
// DeleteAt 9.1, now 3.0). Counts, not times.
func deepReadsGrowLinearly(t *testing.T) {
	perLevel := map[string]map[int]float64{}
	for _, depth := range []int{100, 400} {
		e := newEnv(t)
		c := newDeepChain(t, e, depth)
		for _, o := range deepOps {
			gets, scans, _ := deepReads(t, c, o.op, 4)
			if perLevel[o.name] == nil {
				perLevel[o.name] = map[int]float64{}
			}
			perLevel[o.name][depth] = (gets + scans) / float64(depth)
		}
	}
	for _, o := range deepOps {
		at := perLevel[o.name]
		t.Logf("%s: %.1f reads a level at depth 100, %.1f at 400", o.name, at[100], at[400])
		if at[400] > 1.2*at[100]+0.1 {
			t.Errorf("%s: %.1f reads a level at depth 100, %.1f at 400; want them to grow no more than linearly", o.name, at[100], at[400])
		}
		if at[400] > o.most {
			t.Errorf("%s: %.1f reads a level at depth 400, want at most %.1f", o.name, at[400], o.most)
		}
	}
}
