package kv

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// TestOpenAfterCrashWithOlderOptions opens what a crash of the previous
// release leaves: a write-ahead log written with 32 MiB memtables, Snappy
// tables and a block cache, values inline. Replaying that log into a
// memtable of today's size overflowed its arena, and Badger exits the
// process when that happens.
func TestOpenAfterCrashWithOlderOptions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	// The previous release's options; Badger's default compression is
	// Snappy. The value log is small only to keep the copy below quick.
	oldOptions := badger.DefaultOptions(dir).
		WithSyncWrites(false).
		WithNumVersionsToKeep(1).
		WithNumMemtables(2).
		WithMemTableSize(32 << 20).
		WithNumCompactors(2).
		WithBlockCacheSize(32 << 20).
		WithValueLogFileSize(16 << 20).
		WithLogger(nil)
	// A clean stop first, which leaves a Snappy table.
	old, err := badger.Open(oldOptions)
	if err != nil {
		t.Fatal(err)
	}
	err = old.Update(func(txn *badger.Txn) error { return txn.Set([]byte("in/a/table"), []byte("snappy")) })
	if err == nil {
		err = old.Close()
	}
	if err == nil {
		old, err = badger.Open(oldOptions)
	}
	if err != nil {
		t.Fatal(err)
	}
	// 26 MiB stays in one memtable of 32 MiB and needs more than one of
	// 16 MiB (plus Badger's batch allowance) holds.
	const txns, perTxn, size = 104, 64, 4 << 10
	for i := range txns {
		err := old.Update(func(txn *badger.Txn) error {
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

	s := openDisk(t, crashed, BadgerOptions{})
	defer s.Close()
	err = s.View(ctx, func(txn Txn) error {
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
	if v, err := get(t, s, []byte("in/a/table")); err != nil || string(v) != "snappy" {
		t.Fatalf("key from a Snappy table = %q, %v", v, err)
	}
	set(t, s, []byte("after"), []byte("upgrade"))
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
