package badger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/kvtest"
)

// testLogger shows Badger's warnings in the test log, only on failure.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func openDisk(t testing.TB, dir string, opts Options) *DB {
	t.Helper()
	opts.Dir = dir
	opts.Logger = testLogger(t)
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func openMemory(t testing.TB, opts Options) *DB {
	t.Helper()
	opts.InMemory = true
	opts.Logger = testLogger(t)
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eachStore runs test against an on-disk and an in-memory store.
func eachStore(t *testing.T, test func(t *testing.T, s *DB)) {
	t.Run("disk", func(t *testing.T) {
		t.Parallel()
		s := openDisk(t, t.TempDir(), Options{})
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		s := openMemory(t, Options{})
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
}

// TestConformance runs the suite every kv engine passes, on disk and in
// memory.
func TestConformance(t *testing.T) {
	t.Run("disk", func(t *testing.T) {
		kvtest.Run(t, func(t *testing.T) kv.Store {
			s := openDisk(t, t.TempDir(), Options{})
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
	t.Run("memory", func(t *testing.T) {
		kvtest.Run(t, func(t *testing.T) kv.Store {
			s := openMemory(t, Options{})
			t.Cleanup(func() { s.Close() })
			return s
		})
	})
}

// TestNextIDAcrossReopen: ids never repeat across a reopen, and Close
// gives back the unused part of each lease.
func TestNextIDAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var last uint64
	for round := range 3 {
		s := openDisk(t, dir, Options{})
		for i := range 5 {
			id, err := s.NextID(ctx, "file")
			if err != nil {
				t.Fatal(err)
			}
			if id <= last {
				t.Fatalf("round %d call %d: id %d after %d", round, i, id, last)
			}
			last = id
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Close returns unused leases, so a clean restart skips nothing.
	if last != 15 {
		t.Errorf("last id after 3 clean rounds of 5 = %d, want 15", last)
	}
}

// TestUpdateGivesUpWithErrConflict: Options.ConflictRetries bounds the
// tries; after the last, Update returns ErrConflict and writes nothing.
func TestUpdateGivesUpWithErrConflict(t *testing.T) {
	s := openMemory(t, Options{ConflictRetries: 3})
	defer s.Close()
	ctx := context.Background()
	tries := 0
	err := s.Update(ctx, func(tx kv.Txn) error {
		tries++
		if _, err := tx.Get([]byte("hot")); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		// Another transaction changes what this one read, before it
		// commits: every try conflicts. (Three retries stay under
		// priorityAfter, so the nested Update never waits for this one.)
		if err := s.Update(ctx, func(tx kv.Txn) error {
			return tx.Set([]byte("hot"), []byte{byte(tries)})
		}); err != nil {
			return err
		}
		return tx.Set([]byte("derived"), []byte("x"))
	})
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("Update = %v, want ErrConflict", err)
	}
	if tries != 4 {
		t.Fatalf("fn ran %d times, want 1 + 3 retries", tries)
	}
	if _, err := kvtest.Get(t, s, []byte("derived")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("conflicting write committed: %v", err)
	}
}

// TestErrTxnTooBig: a transaction over Badger's bound (a share of the
// memtable) fails whole with ErrTxnTooBig.
func TestErrTxnTooBig(t *testing.T) {
	eachStore(t, func(t *testing.T, s *DB) {
		val := bytes.Repeat([]byte("x"), 64)
		err := s.Update(context.Background(), func(tx kv.Txn) error {
			// Badger bounds a transaction by a share of the memtable
			// size, in bytes and in keys; values that go to the value
			// log count only as pointers, so many small keys it is.
			for i := range uint64(1_000_000) {
				if err := tx.Set(kv.Key("big/", i), val); err != nil {
					return fmt.Errorf("set %d: %w", i, err)
				}
			}
			return nil
		})
		if !errors.Is(err, kv.ErrTxnTooBig) {
			t.Fatalf("Update = %v, want ErrTxnTooBig", err)
		}
		if keys := kvtest.KeysUnder(t, s, []byte("big/")); len(keys) != 0 {
			t.Fatalf("%d keys of a failed transaction are visible", len(keys))
		}
	})
}

// TestClose: Close waits for a transaction in flight; calls made
// meanwhile, even from inside it, get ErrClosed instead of a deadlock.
func TestClose(t *testing.T) {
	eachStore(t, func(t *testing.T, s *DB) {
		ctx := context.Background()
		if _, err := s.NextID(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		closed := make(chan error)
		err := s.View(ctx, func(tx kv.Txn) error {
			go func() { closed <- s.Close() }()
			for {
				s.mu.Lock()
				c := s.closed
				s.mu.Unlock()
				if c {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if _, err := s.NextID(ctx, "x"); !errors.Is(err, kv.ErrClosed) {
				return fmt.Errorf("NextID while closing = %v, want ErrClosed", err)
			}
			_, err := tx.Get([]byte("k"))
			if !errors.Is(err, kv.ErrNotFound) {
				return fmt.Errorf("Get in the transaction Close waits for = %v", err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-closed; err != nil {
			t.Fatal(err)
		}
		kvtest.CheckClosed(t, s)
	})
}

// TestGeneration: on one node the generation moves by exactly one per
// committed Update, after its writes are visible; a View or an Update
// whose fn fails does not move it (kvtest checks only that commits move
// it, which every engine owes).
func TestGeneration(t *testing.T) {
	eachStore(t, func(t *testing.T, s *DB) {
		ctx := context.Background()
		g0 := s.Generation()
		if err := s.View(ctx, func(kv.Txn) error { return nil }); err != nil {
			t.Fatal(err)
		}
		err := s.Update(ctx, func(tx kv.Txn) error {
			tx.Set([]byte("k"), []byte("lost"))
			return errors.New("no")
		})
		if err == nil || s.Generation() != g0 {
			t.Fatalf("after a View and a failed Update: %v, generation %d, want %d", err, s.Generation(), g0)
		}
		for i := range 3 {
			if err := s.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("k"), []byte{byte(i)}) }); err != nil {
				t.Fatal(err)
			}
			if g := s.Generation(); g != g0+uint64(i)+1 {
				t.Fatalf("after %d updates: generation %d, want %d", i+1, g, g0+uint64(i)+1)
			}
		}
	})
}

// TestCacheDuringCommit: between a commit becoming visible and Update
// returning, a fresh read already sees the new value; a cached read then
// must not serve the value read before the commit. The hook runs a reader
// in that window, which under load is a goroutine preempted there.
func TestCacheDuringCommit(t *testing.T) {
	eachStore(t, func(t *testing.T, s *DB) {
		ctx := context.Background()
		k := []byte("k")
		kvtest.Set(t, s, k, []byte("old"))
		c := kv.NewCache[string, string](8)
		read := func() string {
			t.Helper()
			var v []byte
			if err := s.View(ctx, func(tx kv.Txn) error {
				var err error
				v, err = tx.Get(k)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return string(v)
		}
		cached := func() string {
			t.Helper()
			g := s.Generation()
			if v, ok := c.Get(g, "k"); ok {
				return v
			}
			v := read()
			c.Put(g, "k", v)
			return v
		}
		if v := cached(); v != "old" {
			t.Fatalf("before the commit: %q", v)
		}
		s.afterCommit = func() {
			fresh := read()
			if v := cached(); v != fresh {
				t.Errorf("while the commit completes: the cache served %q, a fresh read %q", v, fresh)
			}
		}
		kvtest.Set(t, s, k, []byte("new"))
		s.afterCommit = nil
		if v := cached(); v != "new" {
			t.Fatalf("after the commit: %q", v)
		}
	})
}

// TestPrefixEnd: the key a reverse scan seeks to, past every key with
// the prefix (kvtest's ScanStart rows with 0xFF prefixes go through it).
func TestPrefixEnd(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"b/", "b0"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"\xff", ""},
		{"", ""},
	} {
		got := prefixEnd([]byte(tc.in))
		if string(got) != tc.want || (tc.want == "" && got != nil) {
			t.Errorf("prefixEnd(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestLogger: Badger's warnings and errors reach slog, marked as Badger's;
// its info and debug lines, which narrate every compaction, do not.
func TestLogger(t *testing.T) {
	var buf bytes.Buffer
	l := slogLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Infof("compaction %d", 1)
	l.Debugf("compaction %d", 2)
	if buf.Len() != 0 {
		t.Errorf("info and debug lines logged: %q", buf.String())
	}
	l.Warningf("warned %d\n", 3)
	l.Errorf("failed %d", 4)
	for _, want := range []string{`level=WARN msg="warned 3" component=badger`, `level=ERROR msg="failed 4" component=badger`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}
