package kv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEmptyLogsAfterCrash: a crash between Badger creating a write-ahead
// log (.mem) or value log (.vlog) file and giving it its size leaves the
// file empty, and Badger then refuses to open ("Create a new file",
// badger#2207) until a second try. The store opens at the first try, with
// every commit, and goes on taking writes.
func TestEmptyLogsAfterCrash(t *testing.T) {
	ctx := context.Background()
	for _, ext := range []string{".mem", ".vlog"} {
		t.Run(ext, func(t *testing.T) {
			dir := t.TempDir()
			b := openDisk(t, dir, BadgerOptions{})
			put := func(b *Badger, k string) {
				t.Helper()
				// Large enough for the value log.
				v := []byte(strings.Repeat(k, 2048))
				if err := b.Update(ctx, func(tx Txn) error { return tx.Set([]byte(k), v) }); err != nil {
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

			b = openDisk(t, dir, BadgerOptions{})
			put(b, "b")
			for _, k := range []string{"a", "b"} {
				if err := b.View(ctx, func(tx Txn) error { _, err := tx.Get([]byte(k)); return err }); err != nil {
					t.Fatalf("%s after the reopen: %v", k, err)
				}
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openDisk(t, dir, BadgerOptions{})
			defer b.Close()
			if err := b.View(ctx, func(tx Txn) error { _, err := tx.Get([]byte("b")); return err }); err != nil {
				t.Fatalf("b after a second reopen: %v", err)
			}
			entries, _ = os.ReadDir(dir)
			if slices.ContainsFunc(entries, func(e os.DirEntry) bool {
				info, err := e.Info()
				return err == nil && info.Size() == 0 && filepath.Ext(e.Name()) == ext
			}) {
				t.Errorf("an empty %s file is still there", ext)
			}
		})
	}
}
