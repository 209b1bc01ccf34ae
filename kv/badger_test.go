package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

func openDisk(t testing.TB, dir string, opts BadgerOptions) *Badger {
	t.Helper()
	opts.Dir = dir
	opts.Logger = testLogger(t)
	b, err := OpenBadger(opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// eachStore runs test against an on-disk and an in-memory store.
func eachStore(t *testing.T, test func(t *testing.T, s *Badger)) {
	t.Run("disk", func(t *testing.T) {
		t.Parallel()
		s := openDisk(t, t.TempDir(), BadgerOptions{})
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		s, err := OpenBadger(BadgerOptions{InMemory: true, Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		test(t, s)
	})
}

func set(t *testing.T, s Store, kvs ...[]byte) {
	t.Helper()
	err := s.Update(context.Background(), func(tx Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := tx.Set(kvs[i], kvs[i+1]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s Store, key []byte) ([]byte, error) {
	t.Helper()
	var v []byte
	err := s.View(context.Background(), func(tx Txn) error {
		var err error
		v, err = tx.Get(key)
		return err
	})
	return v, err
}

func TestGetSetDelete(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		if _, err := get(t, s, []byte("a/missing")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get missing: %v, want ErrNotFound", err)
		}

		// Set must copy: the caller reuses its buffers before the commit.
		err := s.Update(ctx, func(tx Txn) error {
			key, val := []byte("a/1"), []byte("one")
			if err := tx.Set(key, val); err != nil {
				return err
			}
			copy(key, "a/2")
			copy(val, "two")
			return tx.Set(key, val)
		})
		if err != nil {
			t.Fatal(err)
		}
		v, err := get(t, s, []byte("a/1"))
		if err != nil || string(v) != "one" {
			t.Fatalf("get a/1 = %q, %v; want one", v, err)
		}
		v[0] = 'X' // Get returns a copy: scribbling on it changes nothing
		if v, _ := get(t, s, []byte("a/1")); string(v) != "one" {
			t.Fatalf("a/1 after modifying a returned value = %q", v)
		}
		if v, _ := get(t, s, []byte("a/2")); string(v) != "two" {
			t.Fatalf("a/2 = %q, want two", v)
		}

		err = s.Update(ctx, func(tx Txn) error {
			if err := tx.Delete([]byte("a/1")); err != nil {
				return err
			}
			return tx.Delete([]byte("a/never")) // not an error
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := get(t, s, []byte("a/1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("get deleted: %v, want ErrNotFound", err)
		}

		// A transaction sees its own writes.
		err = s.Update(ctx, func(tx Txn) error {
			if err := tx.Set([]byte("a/3"), []byte("three")); err != nil {
				return err
			}
			v, err := tx.Get([]byte("a/3"))
			if err != nil || string(v) != "three" {
				return fmt.Errorf("own write: %q, %v", v, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

func TestViewIsReadOnly(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		err := s.View(context.Background(), func(tx Txn) error {
			return tx.Set([]byte("a/1"), []byte("x"))
		})
		if !errors.Is(err, ErrReadOnly) {
			t.Fatalf("Set in View: %v, want ErrReadOnly", err)
		}
	})
}

// collect runs a scan and returns the keys it visited.
func collect(t *testing.T, s Store, reverse bool, prefix, start []byte) [][]byte {
	t.Helper()
	var keys [][]byte
	err := s.View(context.Background(), func(tx Txn) error {
		fn := func(k, v []byte) error {
			if !bytes.Equal(v, append([]byte("v"), k...)) {
				return fmt.Errorf("key %q has value %q", k, v)
			}
			keys = append(keys, bytes.Clone(k))
			return nil
		}
		if reverse {
			return tx.ScanReverse(prefix, start, fn)
		}
		return tx.Scan(prefix, start, fn)
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestScanOrderBigEndian(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ids := []uint64{1 << 40, 256, 1, 65536, 255, 2, 1<<64 - 1, 0}
		var kvs [][]byte
		for _, id := range ids {
			k := Key("n/", 7, id)
			kvs = append(kvs, k, append([]byte("v"), k...))
		}
		// Neighbours that must not show up.
		for _, k := range [][]byte{Key("n/", 6, 9), Key("n/", 8, 0), []byte("m/"), []byte("o/")} {
			kvs = append(kvs, k, append([]byte("v"), k...))
		}
		set(t, s, kvs...)

		want := slices.Clone(ids)
		slices.Sort(want)
		var got []uint64
		for _, k := range collect(t, s, false, Key("n/", 7), nil) {
			got = append(got, Uint64At(k, len("n/")+8))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("Scan ids = %v, want %v", got, want)
		}
		got = got[:0]
		for _, k := range collect(t, s, true, Key("n/", 7), nil) {
			got = append(got, Uint64At(k, len("n/")+8))
		}
		slices.Reverse(want)
		if !slices.Equal(got, want) {
			t.Fatalf("ScanReverse ids = %v, want %v", got, want)
		}
	})
}

func TestScanStart(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		// "b0" is the successor of the prefix "b/" (the smallest key after
		// all of b/'s), the key a naive reverse seek would land on.
		all := []string{"a/1", "b/", "b/1", "b/3", "b/5", "b/5/x", "b0", "c/1",
			"\xff\xff", "\xff\xff\x01", "\xff\xff\xff"}
		var kvs [][]byte
		for _, k := range all {
			kvs = append(kvs, []byte(k), []byte("v"+k))
		}
		set(t, s, kvs...)

		none := []string(nil)
		tests := []struct {
			name          string
			prefix, start string
			nilStart      bool
			fwd, rev      []string
		}{
			{"nil start", "b/", "", true,
				[]string{"b/", "b/1", "b/3", "b/5", "b/5/x"},
				[]string{"b/5/x", "b/5", "b/3", "b/1", "b/"}},
			{"start equal to prefix", "b/", "b/", false,
				[]string{"b/", "b/1", "b/3", "b/5", "b/5/x"},
				[]string{"b/"}},
			{"start on a key", "b/", "b/3", false,
				[]string{"b/3", "b/5", "b/5/x"},
				[]string{"b/3", "b/1", "b/"}},
			{"start between keys", "b/", "b/4", false,
				[]string{"b/5", "b/5/x"},
				[]string{"b/3", "b/1", "b/"}},
			{"start past the last key", "b/", "b/9", false,
				none,
				[]string{"b/5/x", "b/5", "b/3", "b/1", "b/"}},
			{"start shorter than prefix", "b/", "z", false,
				[]string{"b/", "b/1", "b/3", "b/5", "b/5/x"},
				[]string{"b/5/x", "b/5", "b/3", "b/1", "b/"}},
			{"start before prefix", "b/", "a/9", false,
				[]string{"b/", "b/1", "b/3", "b/5", "b/5/x"},
				none},
			{"start after prefix", "b/", "c/0", false,
				none,
				[]string{"b/5/x", "b/5", "b/3", "b/1", "b/"}},
			{"prefix with no keys", "bb", "", true, none, none},
			{"prefix with no keys, start", "a/5", "a/5", false, none, none},
			{"prefix of 0xFF bytes", "\xff\xff", "", true,
				[]string{"\xff\xff", "\xff\xff\x01", "\xff\xff\xff"},
				[]string{"\xff\xff\xff", "\xff\xff\x01", "\xff\xff"}},
			{"prefix of 0xFF bytes, start", "\xff\xff", "\xff\xff\x02", false,
				[]string{"\xff\xff\xff"},
				[]string{"\xff\xff\x01", "\xff\xff"}},
			{"empty prefix", "", "", true, all, nil},
			{"empty prefix, start", "", "b0", false,
				[]string{"b0", "c/1", "\xff\xff", "\xff\xff\x01", "\xff\xff\xff"},
				[]string{"b0", "b/5/x", "b/5", "b/3", "b/1", "b/", "a/1"}},
		}
		for _, tc := range tests {
			var start []byte
			if !tc.nilStart {
				start = []byte(tc.start)
			}
			for _, reverse := range []bool{false, true} {
				want := tc.fwd
				if reverse {
					want = tc.rev
				}
				if tc.prefix == "" && start == nil {
					// kv's own keys (none yet) and everything else.
					want = slices.Clone(all)
					if reverse {
						slices.Reverse(want)
					}
				}
				var got []string
				for _, k := range collect(t, s, reverse, []byte(tc.prefix), start) {
					got = append(got, string(k))
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s (reverse %v): got %q, want %q", tc.name, reverse, got, want)
				}
			}
		}
	})
}

func TestScanStop(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		var kvs [][]byte
		for i := range uint64(10) {
			kvs = append(kvs, Key("s/", i), []byte("v"))
		}
		set(t, s, kvs...)
		boom := errors.New("boom")
		for _, reverse := range []bool{false, true} {
			n := 0
			err := s.View(context.Background(), func(tx Txn) error {
				scan := tx.Scan
				if reverse {
					scan = tx.ScanReverse
				}
				if err := scan([]byte("s/"), nil, func(k, v []byte) error {
					n++
					if n == 3 {
						return ErrStop
					}
					return nil
				}); err != nil {
					return err
				}
				return scan([]byte("s/"), nil, func(k, v []byte) error {
					return fmt.Errorf("at %d: %w", Uint64At(k, 2), boom)
				})
			})
			if n != 3 {
				t.Errorf("reverse %v: ErrStop after 3 calls, got %d calls", reverse, n)
			}
			if !errors.Is(err, boom) {
				t.Errorf("reverse %v: error from fn = %v, want boom", reverse, err)
			}
		}
	})
}

func TestTTL(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		err := s.Update(ctx, func(tx Txn) error {
			if err := tx.Set([]byte("t/keep"), []byte("k")); err != nil {
				return err
			}
			if err := tx.SetTTL([]byte("t/bad"), []byte("x"), 0); err == nil {
				return errors.New("SetTTL with zero ttl succeeded")
			}
			return tx.SetTTL([]byte("t/token"), []byte("x"), time.Second)
		})
		if err != nil {
			t.Fatal(err)
		}
		// Badger's expiry has one-second resolution: the key may already be
		// gone here, so only its eventual disappearance is checked.
		deadline := time.Now().Add(10 * time.Second)
		for {
			_, err := get(t, s, []byte("t/token"))
			if errors.Is(err, ErrNotFound) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatal("key with 1s TTL still readable after 10s")
			}
			time.Sleep(50 * time.Millisecond)
		}
		got := collect2(t, s, []byte("t/"))
		if !slices.Equal(got, []string{"t/keep"}) {
			t.Fatalf("scan after expiry = %q, want only t/keep", got)
		}
	})
}

// collect2 returns the keys under prefix, whatever their values.
func collect2(t *testing.T, s Store, prefix []byte) []string {
	t.Helper()
	var keys []string
	err := s.View(context.Background(), func(tx Txn) error {
		return tx.Scan(prefix, nil, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func TestNextIDConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		const workers, each = 8, 250
		got := make([][]uint64, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for range each {
					id, err := s.NextID(ctx, "node")
					if err != nil {
						t.Error(err)
						return
					}
					got[w] = append(got[w], id)
				}
			})
		}
		wg.Wait()
		seen := make(map[uint64]bool)
		for w, ids := range got {
			if !slices.IsSorted(ids) {
				t.Errorf("worker %d saw ids out of order", w)
			}
			for _, id := range ids {
				if seen[id] {
					t.Fatalf("id %d handed out twice", id)
				}
				seen[id] = true
			}
		}
		// Nothing else used the sequence, so it is exactly 1..N.
		for id := uint64(1); id <= workers*each; id++ {
			if !seen[id] {
				t.Fatalf("id %d missing: ids should be 1..%d", id, workers*each)
			}
		}
		if id, err := s.NextID(ctx, "other"); err != nil || id != 1 {
			t.Fatalf("first id of another kind = %d, %v; want 1", id, err)
		}
	})
}

func TestNextIDAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var last uint64
	for round := range 3 {
		s := openDisk(t, dir, BadgerOptions{})
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

func TestUpdateRetriesConflicts(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		key := []byte("counter")
		const workers, each = 2, 200
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					err := s.Update(ctx, func(tx Txn) error {
						var n uint64
						v, err := tx.Get(key)
						switch {
						case err == nil:
							n = Uint64At(v, 0)
						case !errors.Is(err, ErrNotFound):
							return err
						}
						return tx.Set(key, AppendUint64(nil, n+1))
					})
					if err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		v, err := get(t, s, key)
		if err != nil {
			t.Fatal(err)
		}
		if n := Uint64At(v, 0); n != workers*each {
			t.Fatalf("counter = %d, want %d", n, workers*each)
		}
	})
}

func TestUpdateGivesUpWithErrConflict(t *testing.T) {
	s, err := OpenBadger(BadgerOptions{InMemory: true, ConflictRetries: 3, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	tries := 0
	err = s.Update(ctx, func(tx Txn) error {
		tries++
		if _, err := tx.Get([]byte("hot")); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		// Another transaction changes what this one read, before it
		// commits: every try conflicts.
		if err := s.Update(ctx, func(tx Txn) error {
			return tx.Set([]byte("hot"), []byte{byte(tries)})
		}); err != nil {
			return err
		}
		return tx.Set([]byte("derived"), []byte("x"))
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("Update = %v, want ErrConflict", err)
	}
	if tries != 4 {
		t.Fatalf("fn ran %d times, want 1 + 3 retries", tries)
	}
	if _, err := get(t, s, []byte("derived")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("conflicting write committed: %v", err)
	}
}

func TestErrTxnTooBig(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		val := bytes.Repeat([]byte("x"), 64)
		err := s.Update(context.Background(), func(tx Txn) error {
			// Badger bounds a transaction by a share of the memtable
			// size, in bytes and in keys; values that go to the value
			// log count only as pointers, so many small keys it is.
			for i := range uint64(1_000_000) {
				if err := tx.Set(Key("big/", i), val); err != nil {
					return fmt.Errorf("set %d: %w", i, err)
				}
			}
			return nil
		})
		if !errors.Is(err, ErrTxnTooBig) {
			t.Fatalf("Update = %v, want ErrTxnTooBig", err)
		}
		if keys := collect2(t, s, []byte("big/")); len(keys) != 0 {
			t.Fatalf("%d keys of a failed transaction are visible", len(keys))
		}
	})
}

func TestUpdateErrorRollsBack(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		set(t, s, []byte("r/1"), []byte("old"))
		boom := errors.New("boom")
		err := s.Update(context.Background(), func(tx Txn) error {
			if err := tx.Set([]byte("r/1"), []byte("new")); err != nil {
				return err
			}
			if err := tx.Set([]byte("r/2"), []byte("new")); err != nil {
				return err
			}
			return fmt.Errorf("halfway: %w", boom)
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Update = %v, want the error of fn", err)
		}
		if v, _ := get(t, s, []byte("r/1")); string(v) != "old" {
			t.Fatalf("r/1 = %q after rollback, want old", v)
		}
		if _, err := get(t, s, []byte("r/2")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("r/2 after rollback: %v, want ErrNotFound", err)
		}
	})
}

func TestCancelledContext(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		fn := func(Txn) error {
			t.Error("fn ran with a cancelled context")
			return nil
		}
		if err := s.View(ctx, fn); !errors.Is(err, context.Canceled) {
			t.Errorf("View = %v, want context.Canceled", err)
		}
		if err := s.Update(ctx, fn); !errors.Is(err, context.Canceled) {
			t.Errorf("Update = %v, want context.Canceled", err)
		}
		if _, err := s.NextID(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Errorf("NextID = %v, want context.Canceled", err)
		}
		if err := s.RunGC(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("RunGC = %v, want context.Canceled", err)
		}
	})
}

func TestClose(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		if _, err := s.NextID(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		// Close waits for a transaction in flight; calls made meanwhile,
		// even from inside it, get ErrClosed instead of a deadlock.
		closed := make(chan error)
		err := s.View(ctx, func(tx Txn) error {
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
			if _, err := s.NextID(ctx, "x"); !errors.Is(err, ErrClosed) {
				return fmt.Errorf("NextID while closing = %v, want ErrClosed", err)
			}
			_, err := tx.Get([]byte("k"))
			if !errors.Is(err, ErrNotFound) {
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
		fn := func(Txn) error { return nil }
		if err := s.View(ctx, fn); !errors.Is(err, ErrClosed) {
			t.Errorf("View after Close = %v", err)
		}
		if err := s.Update(ctx, fn); !errors.Is(err, ErrClosed) {
			t.Errorf("Update after Close = %v", err)
		}
		if _, err := s.NextID(ctx, "x"); !errors.Is(err, ErrClosed) {
			t.Errorf("NextID after Close = %v", err)
		}
		if err := s.RunGC(ctx); !errors.Is(err, ErrClosed) {
			t.Errorf("RunGC after Close = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close = %v", err)
		}
	})
}

func TestRunGCAndCollector(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		set(t, s, []byte("g/1"), []byte("v"))
		if err := s.RunGC(context.Background()); err != nil {
			t.Fatalf("RunGC = %v", err)
		}
		names := metricNames(t, s)
		for _, want := range []string{"berth_kv_lsm_size_bytes", "berth_kv_vlog_size_bytes"} {
			if !names[want] {
				t.Errorf("metric %s missing; have %v", want, names)
			}
		}
	})
}

// TestCollectorCaches: the cache figures appear when a cache is configured
// (none is by default).
func TestCollectorCaches(t *testing.T) {
	s := openDisk(t, t.TempDir(), BadgerOptions{BlockCacheSize: 1 << 20})
	defer s.Close()
	set(t, s, []byte("g/1"), []byte("v"))
	names := metricNames(t, s)
	for _, want := range []string{"berth_kv_cache_hits_total", "berth_kv_cache_hit_ratio"} {
		if !names[want] {
			t.Errorf("metric %s missing; have %v", want, names)
		}
	}
}

// metricNames gathers s's collector and returns the metric names it reports.
func metricNames(t *testing.T, s *Badger) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(s.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make(map[string]bool)
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	return names
}

func TestOpenNeedsDir(t *testing.T) {
	if _, err := OpenBadger(BadgerOptions{}); err == nil {
		t.Fatal("OpenBadger without Dir or InMemory succeeded")
	}
}

// TestGeneration: every committed Update moves the generation, after its
// writes are visible; a View or an Update whose fn fails does not.
func TestGeneration(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		g0 := s.Generation()
		if err := s.View(ctx, func(Txn) error { return nil }); err != nil {
			t.Fatal(err)
		}
		err := s.Update(ctx, func(tx Txn) error {
			tx.Set([]byte("k"), []byte("lost"))
			return errors.New("no")
		})
		if err == nil || s.Generation() != g0 {
			t.Fatalf("after a View and a failed Update: %v, generation %d, want %d", err, s.Generation(), g0)
		}
		for i := range 3 {
			if err := s.Update(ctx, func(tx Txn) error { return tx.Set([]byte("k"), []byte{byte(i)}) }); err != nil {
				t.Fatal(err)
			}
			if g := s.Generation(); g != g0+uint64(i)+1 {
				t.Fatalf("after %d updates: generation %d, want %d", i+1, g, g0+uint64(i)+1)
			}
		}
	})
}

// TestCache: an entry is served only at the generation it was read at; a
// value read before a commit the cache has seen is not kept; a full cache
// starts afresh.
func TestCache(t *testing.T) {
	c := NewCache[int, string](2)
	c.Put(5, 1, "one")
	if v, ok := c.Get(5, 1); !ok || v != "one" {
		t.Fatalf("Get at the same generation: %q, %v", v, ok)
	}
	if _, ok := c.Get(6, 1); ok {
		t.Fatal("an entry of generation 5 served at 6")
	}
	// A reader that began at 5 finishes after the cache saw 6.
	c.Put(5, 2, "stale")
	if _, ok := c.Get(6, 2); ok {
		t.Fatal("a read from before the commit was kept")
	}
	c.Put(6, 1, "a")
	c.Put(6, 2, "b")
	c.Put(6, 3, "c")
	if _, ok := c.Get(6, 3); !ok {
		t.Fatal("the newest entry of a full cache was dropped")
	}
	if _, ok := c.Get(6, 1); ok {
		t.Fatal("a full cache kept growing")
	}
}

// TestCacheDuringCommit: between a commit becoming visible and Update
// returning, a fresh read already sees the new value; a cached read then
// must not serve the value read before the commit. The hook runs a reader
// in that window, which under load is a goroutine preempted there.
func TestCacheDuringCommit(t *testing.T) {
	eachStore(t, func(t *testing.T, s *Badger) {
		ctx := context.Background()
		k := []byte("k")
		set(t, s, k, []byte("old"))
		c := NewCache[string, string](8)
		read := func() string {
			t.Helper()
			var v []byte
			if err := s.View(ctx, func(tx Txn) error {
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
		set(t, s, k, []byte("new"))
		s.afterCommit = nil
		if v := cached(); v != "new" {
			t.Fatalf("after the commit: %q", v)
		}
	})
}
