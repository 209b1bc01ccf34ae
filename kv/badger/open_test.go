package badger

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	dgraph "github.com/dgraph-io/badger/v4"

	"berth/kv"
	"berth/kv/kvtest"
)

// TestOpenRefused: what Open refuses, and with which error. A second
// open of a database another holder has open is kv.ErrInUse, so the
// daemon can say the data directory is taken; every other failure is not.
func TestOpenRefused(t *testing.T) {
	held := t.TempDir()
	b := openDisk(t, held, Options{})
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// An empty log, as the holder's Badger has just created one and
	// not yet sized it: the refused open must leave it be.
	fresh := filepath.Join(held, "99999.mem")
	if err := os.WriteFile(fresh, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  Options
		inUse bool
	}{
		{"neither Dir nor InMemory", Options{}, false},
		{"a directory another holder has open", Options{Dir: held}, true},
		{"a Dir that is a file", Options{Dir: file}, false},
	}
	for _, tc := range tests {
		tc.opts.Logger = testLogger(t)
		s, err := Open(tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tc.name)
			continue
		}
		if errors.Is(err, kv.ErrInUse) != tc.inUse {
			t.Errorf("%s: %v; want kv.ErrInUse: %v", tc.name, err, tc.inUse)
		}
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("the holder's new log after a refused open: %v", err)
	}
	if err := os.Remove(fresh); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Closed: free again.
	openDisk(t, held, Options{}).Close()
}

// TestOpenAfterCrash: what a crash leaves in the directory opens at the
// first try, with every commit. Each row is a crash that once kept the
// daemon from starting.
func TestOpenAfterCrash(t *testing.T) {
	tests := []struct {
		name  string
		crash func(t *testing.T)
	}{
		// badger#2207: "Create a new file" (TestKillDuringCopyPurgeAndGC, 1 run in 4).
		{"empty write-ahead log", func(t *testing.T) { emptyLogAfterCrash(t, ".mem") }},
		{"empty value log", func(t *testing.T) { emptyLogAfterCrash(t, ".vlog") }},
		// Badger's log.Fatalf on a replay that overflows the memtable.
		{"log of the release with 32 MiB memtables", olderReleaseCrash},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.crash)
	}
}

// emptyLogAfterCrash: a crash between Badger creating a write-ahead
// log (.mem) or value log (.vlog) file and giving it its size leaves the
// file empty, and Badger then refuses to open ("Create a new file",
// badger#2207) until a second try. The store opens at the first try, with
// every commit, and goes on taking writes.
func emptyLogAfterCrash(t *testing.T, ext string) {
	ctx := context.Background()
	dir := t.TempDir()
	b := openDisk(t, dir, Options{})
	put := func(b *DB, k string) {
		t.Helper()
		// Large enough for the value log.
		v := []byte(strings.Repeat(k, 2048))
		if err := b.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte(k), v) }); err != nil {
			t.Fatal(err)
		}
	}
	put(b, "a")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// The empty file a crash leaves, numbered after the newest
	// of its kind, as Badger numbers the next one.
	var last int
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		var n int
		if _, err := fmt.Sscanf(e.Name(), "%d"+ext, &n); err == nil && filepath.Ext(e.Name()) == ext {
			last = max(last, n)
		}
	}
	name := fmt.Sprintf("%05d%s", last+1, ext)
	if ext == ".vlog" {
		name = fmt.Sprintf("%06d%s", last+1, ext)
	}
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	b = openDisk(t, dir, Options{})
	put(b, "b")
	for _, k := range []string{"a", "b"} {
		if err := b.View(ctx, func(tx kv.Txn) error { _, err := tx.Get([]byte(k)); return err }); err != nil {
			t.Fatalf("%s after the reopen: %v", k, err)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openDisk(t, dir, Options{})
	defer b.Close()
	if err := b.View(ctx, func(tx kv.Txn) error { _, err := tx.Get([]byte("b")); return err }); err != nil {
		t.Fatalf("b after a second reopen: %v", err)
	}
	entries, _ = os.ReadDir(dir)
	if slices.ContainsFunc(entries, func(e os.DirEntry) bool {
		info, err := e.Info()
		return err == nil && info.Size() == 0 && filepath.Ext(e.Name()) == ext
	}) {
		t.Errorf("an empty %s file is still there", ext)
	}
}

// olderReleaseCrash opens what a crash of the previous
// release leaves: a write-ahead log written with 32 MiB memtables, Snappy
// tables and a block cache, values inline. Replaying that log into a
// memtable of today's size overflowed its arena, and Badger exits the
// process when that happens.
func olderReleaseCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The previous release's options; Badger's default compression is
	// Snappy. The value log is small only to keep the copy below quick.
	oldOptions := dgraph.DefaultOptions(dir).
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithNumMemtables(2).
		WithMemTableSize(32 << 20).
		WithNumCompactors(2).
		WithBlockCacheSize(32 << 20).
		WithValueLogFileSize(16 << 20).
		WithLogger(nil)
	// A clean stop first, which leaves a Snappy table.
	old, err := dgraph.Open(oldOptions)
	if err != nil {
		t.Fatal(err)
	}
	err = old.Update(func(txn *dgraph.Txn) error { return txn.Set([]byte("in/a/table"), []byte("snappy")) })
	if err == nil {
		err = old.Close()
	}
	if err == nil {
		old, err = dgraph.Open(oldOptions)
	}
	if err != nil {
		t.Fatal(err)
	}
	// 26 MiB stays in one memtable of 32 MiB and needs more than one of
	// 16 MiB (plus Badger's batch allowance) holds.
	const txns, perTxn, size = 104, 64, 4 << 10
	for i := range txns {
		err := old.Update(func(txn *dgraph.Txn) error {
			for j := range perTxn {
				value := make([]byte, size) // Badger keeps it until the commit
				value[0], value[1] = byte(i), byte(j)
				if err := txn.Set(fmt.Appendf(nil, "k/%04d/%02d", i, j), value); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The files as a crash leaves them: the log is in the page cache, the
	// memtable was never flushed.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openDisk(t, crashed, Options{})
	defer s.Close()
	err = s.View(ctx, func(txn kv.Txn) error {
		for i := range txns {
			for j := range perTxn {
				v, err := txn.Get(fmt.Appendf(nil, "k/%04d/%02d", i, j))
				if err != nil {
					return fmt.Errorf("key %d/%d: %w", i, j, err)
				}
				if len(v) != size || v[0] != byte(i) || v[1] != byte(j) {
					return fmt.Errorf("key %d/%d: wrong value", i, j)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := kvtest.Get(t, s, []byte("in/a/table")); err != nil || string(v) != "snappy" {
		t.Fatalf("key from a Snappy table = %q, %v", v, err)
	}
	kvtest.Set(t, s, []byte("after"), []byte("upgrade"))
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" || !e.Type().IsRegular() {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err == nil {
			_, err = io.Copy(dst, src)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
