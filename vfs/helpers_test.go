package vfs_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"berth/kv/badger"
	"berth/vfs"
	"berth/vfs/chunk"
)

// env is a real file system over a real Badger and a real disk chunk store
// in a temp directory.
type env struct {
	dir    string
	db     *badgerDB
	chunks *chunk.Disk
	fs     *vfs.FS
	root   vfs.Root
}

func openEnv(t testing.TB, dir string) *env {
	t.Helper()
	return openEnvWith(t, dir, vfs.Options{})
}

func openEnvWith(t testing.TB, dir string, opts vfs.Options) *env {
	t.Helper()
	db := openBadger(t, filepath.Join(dir, "meta"), noSync(t))
	chunks, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := vfs.Open(context.Background(), db, chunks, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &env{dir: dir, db: db, chunks: chunks, fs: fs}
}

// badgerDB is the kv engine every test here runs on. It and openBadger are
// the only places that name the engine, so moving it touches one spot.
type badgerDB = badger.DB

// openBadger opens a real Badger in dir, in memory when dir is empty; with
// noSync its commits skip fsync (for fixtures, never for crash tests). The
// caller closes it.
func openBadger(t testing.TB, dir string, noSync bool) *badgerDB {
	t.Helper()
	db, err := badger.Open(badger.Options{Dir: dir, InMemory: dir == "", NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, vfs.Options{})
}

// newEnvWith is newEnv with opts.
func newEnvWith(t testing.TB, opts vfs.Options) *env {
	t.Helper()
	e := openEnvWith(t, t.TempDir(), opts)
	root, err := e.fs.CreateRoot(context.Background(), "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	t.Cleanup(e.close)
	return e
}

func (e *env) close() {
	if e.fs != nil {
		e.fs.Close()
		e.db.Close()
		e.fs = nil
	}
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n - n%8; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (e *env) write(t testing.TB, parent uint64, name string, data []byte) vfs.Node {
	t.Helper()
	n, err := e.fs.WriteFile(context.Background(), e.root.ID, parent, name, bytes.NewReader(data), vfs.WriteOptions{})
	if err != nil {
		t.Fatalf("write %s: %v", name, err)
	}
	return n
}

func (e *env) read(t testing.TB, id uint64) []byte {
	t.Helper()
	f, err := e.fs.Open(context.Background(), e.root.ID, id)
	if err != nil {
		t.Fatalf("open %d: %v", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %d: %v", id, err)
	}
	return b
}

// noSync lets benchmarks that build large fixtures skip fsync on metadata
// commits; tests always run durable, as the server does.
func noSync(t testing.TB) bool {
	_, bench := t.(*testing.B)
	return bench && os.Getenv("BERTH_BENCH_SYNC") == ""
}

// ctx is the context of the calls whose cancellation a test is not about.
var ctx = context.Background()

// mustLookup looks p up in e's root, failing the test when it is missing.
func mustLookup(t *testing.T, e *env, p string) vfs.Node {
	t.Helper()
	n, err := e.fs.Lookup(ctx, e.root.ID, p)
	if err != nil {
		t.Fatalf("lookup %s: %v", p, err)
	}
	return n
}
