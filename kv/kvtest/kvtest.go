// Package kvtest is the conformance suite every kv engine must pass, after
// restic's internal/backend/test: each engine's own test calls Run with a
// constructor for an empty store, and keeps only what is its own (its
// files on disk, its options, its maintenance) in its package. Only tests
// import it.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
)

// Run checks the stores open returns against the kv.Store contract. open
// must return a new, empty store each call, which it closes when t ends
// (a second Close must be harmless); Run calls it from parallel subtests.
func Run(t *testing.T, open func(t *testing.T) kv.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s kv.Store)
	}{
		{"GetSetDelete", testGetSetDelete},
		{"ValuesCopied", testValuesCopied},
		{"ViewIsReadOnly", testViewIsReadOnly},
		{"UpdateErrorRollsBack", testUpdateErrorRollsBack},
		{"ScanOrder", testScanOrder},
		{"ScanStart", testScanStart},
		{"ScanStop", testScanStop},
		{"TTL", testTTL},
		{"NextID", testNextID},
		{"ConflictsRetried", testConflictsRetried},
		{"Serializable", testSerializable},
		{"BoundedRetry", testBoundedRetry},
		{"Generation", testGeneration},
		{"CancelledContext", testCancelledContext},
		{"Close", testClose},
		{"Lease", testLease},
		{"LeaseRunExclusive", testLeaseRunExclusive},
		{"UnsyncedSerializable", testUnsyncedSerializable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// Set stores the pairs of kvs (key, value, key, value...) in one
// transaction, failing t when it cannot: the set-up step of engines' own
// tests as of this suite.
func Set(t *testing.T, s kv.Store, kvs ...[]byte) {
	t.Helper()
	err := s.Update(context.Background(), func(tx kv.Txn) error {
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

// Get reads key in a transaction of its own.
func Get(t *testing.T, s kv.Store, key []byte) ([]byte, error) {
	t.Helper()
	var v []byte
	err := s.View(context.Background(), func(tx kv.Txn) error {
		var err error
		v, err = tx.Get(key)
		return err
	})
	return v, err
}

func testGetSetDelete(t *testing.T, s kv.Store) {
	ctx := context.Background()
	if _, err := Get(t, s, []byte("a/missing")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	Set(t, s, []byte("a/1"), []byte("one"))
	err := s.Update(ctx, func(tx kv.Txn) error {
		if err := tx.Delete([]byte("a/1")); err != nil {
			return err
		}
		return tx.Delete([]byte("a/never")) // not an error
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Get(t, s, []byte("a/1")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("get deleted: %v, want ErrNotFound", err)
	}

	// A transaction sees its own writes.
	err = s.Update(ctx, func(tx kv.Txn) error {
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
}

// testValuesCopied: Set copies what it is given, because callers reuse
// their buffers before the commit, and Get returns a copy the caller owns.
func testValuesCopied(t *testing.T, s kv.Store) {
	err := s.Update(context.Background(), func(tx kv.Txn) error {
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
	v, err := Get(t, s, []byte("a/1"))
	if err != nil || string(v) != "one" {
		t.Fatalf("get a/1 = %q, %v; want one", v, err)
	}
	v[0] = 'X' // Get returns a copy: scribbling on it changes nothing
	if v, _ := Get(t, s, []byte("a/1")); string(v) != "one" {
		t.Fatalf("a/1 after modifying a returned value = %q", v)
	}
	if v, _ := Get(t, s, []byte("a/2")); string(v) != "two" {
		t.Fatalf("a/2 = %q, want two", v)
	}
	// The same within one transaction, where an engine may answer a
	// second Get from what it kept of the first: neither a change of a
	// returned value nor an append to it reaches the next Get.
	for _, run := range []struct {
		name string
		tx   func(context.Context, func(kv.Txn) error) error
	}{{"View", s.View}, {"Update", s.Update}} {
		err := run.tx(context.Background(), func(tx kv.Txn) error {
			for i := range 3 {
				v, err := tx.Get([]byte("a/1"))
				if err != nil || string(v) != "one" {
					return fmt.Errorf("get %d of a/1 = %q, %v; want one", i, v, err)
				}
				v[0] = 'X'
				_ = append(v, "YZW"...)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", run.name, err)
		}
	}
}

func testViewIsReadOnly(t *testing.T, s kv.Store) {
	err := s.View(context.Background(), func(tx kv.Txn) error {
		return tx.Set([]byte("a/1"), []byte("x"))
	})
	if !errors.Is(err, kv.ErrReadOnly) {
		t.Fatalf("Set in View: %v, want ErrReadOnly", err)
	}
}

func testUpdateErrorRollsBack(t *testing.T, s kv.Store) {
	Set(t, s, []byte("r/1"), []byte("old"))
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx kv.Txn) error {
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
	if v, _ := Get(t, s, []byte("r/1")); string(v) != "old" {
		t.Fatalf("r/1 = %q after rollback, want old", v)
	}
	if _, err := Get(t, s, []byte("r/2")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("r/2 after rollback: %v, want ErrNotFound", err)
	}
}

// collect runs a scan and returns the keys it visited; every value must be
// "v" and its key.
func collect(t *testing.T, s kv.Store, reverse bool, prefix, start []byte) [][]byte {
	t.Helper()
	var keys [][]byte
	err := s.View(context.Background(), func(tx kv.Txn) error {
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

// KeysUnder returns the keys under prefix, whatever their values, in
// key order: how a test, the suite's or an engine's own, sees what a
// prefix holds.
func KeysUnder(t *testing.T, s kv.Store, prefix []byte) []string {
	t.Helper()
	var keys []string
	err := s.View(context.Background(), func(tx kv.Txn) error {
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

// testScanOrder: big-endian integer keys (kv.Key) come back in numeric
// order, forwards and backwards, and neighbouring prefixes stay out.
func testScanOrder(t *testing.T, s kv.Store) {
	ids := []uint64{1 << 40, 256, 1, 65536, 255, 2, 1<<64 - 1, 0}
	var kvs [][]byte
	for _, id := range ids {
		k := kv.Key("n/", 7, id)
		kvs = append(kvs, k, append([]byte("v"), k...))
	}
	// Neighbours that must not show up.
	for _, k := range [][]byte{kv.Key("n/", 6, 9), kv.Key("n/", 8, 0), []byte("m/"), []byte("o/")} {
		kvs = append(kvs, k, append([]byte("v"), k...))
	}
	Set(t, s, kvs...)

	want := slices.Clone(ids)
	slices.Sort(want)
	var got []uint64
	for _, k := range collect(t, s, false, kv.Key("n/", 7), nil) {
		got = append(got, kv.Uint64At(k, len("n/")+8))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Scan ids = %v, want %v", got, want)
	}
	got = got[:0]
	for _, k := range collect(t, s, true, kv.Key("n/", 7), nil) {
		got = append(got, kv.Uint64At(k, len("n/")+8))
	}
	slices.Reverse(want)
	if !slices.Equal(got, want) {
		t.Fatalf("ScanReverse ids = %v, want %v", got, want)
	}
}

// testScanStart: where a scan starts, for every placement of start
// relative to the prefix and its keys, both ways. The rows with 0xFF
// prefixes and "b0" catch a reverse scan that seeks to the prefix's
// successor and lands on it (kv/badger's prefixEnd).
func testScanStart(t *testing.T, s kv.Store) {
	// "b0" is the successor of the prefix "b/" (the smallest key after
	// all of b/'s), the key a naive reverse seek would land on.
	all := []string{"a/1", "b/", "b/1", "b/3", "b/5", "b/5/x", "b0", "c/1",
		"\xff\xff", "\xff\xff\x01", "\xff\xff\xff"}
	var kvs [][]byte
	for _, k := range all {
		kvs = append(kvs, []byte(k), []byte("v"+k))
	}
	Set(t, s, kvs...)

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
				// The engine's own keys (none yet: no sequence was
				// used) and everything else.
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
}

// testScanStop: ErrStop ends a scan with nil; any other error of fn ends
// it with that error, wrapped or not.
func testScanStop(t *testing.T, s kv.Store) {
	var kvs [][]byte
	for i := range uint64(10) {
		kvs = append(kvs, kv.Key("s/", i), []byte("v"))
	}
	Set(t, s, kvs...)
	boom := errors.New("boom")
	for _, reverse := range []bool{false, true} {
		n := 0
		err := s.View(context.Background(), func(tx kv.Txn) error {
			scan := tx.Scan
			if reverse {
				scan = tx.ScanReverse
			}
			if err := scan([]byte("s/"), nil, func(k, v []byte) error {
				n++
				if n == 3 {
					return kv.ErrStop
				}
				return nil
			}); err != nil {
				return err
			}
			return scan([]byte("s/"), nil, func(k, v []byte) error {
				return fmt.Errorf("at %d: %w", kv.Uint64At(k, 2), boom)
			})
		})
		if n != 3 {
			t.Errorf("reverse %v: ErrStop after 3 calls, got %d calls", reverse, n)
		}
		if !errors.Is(err, boom) {
			t.Errorf("reverse %v: error from fn = %v, want boom", reverse, err)
		}
	}
}

// testTTL: a key written with SetTTL vanishes from Get and from scans by
// itself; a non-positive ttl is refused.
func testTTL(t *testing.T, s kv.Store) {
	ctx := context.Background()
	err := s.Update(ctx, func(tx kv.Txn) error {
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
	// Expiry may be a second early (kv/badger's resolution): the key may
	// already be gone here, so only its eventual disappearance is checked.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := Get(t, s, []byte("t/token"))
		if errors.Is(err, kv.ErrNotFound) {
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
	got := KeysUnder(t, s, []byte("t/"))
	if !slices.Equal(got, []string{"t/keep"}) {
		t.Fatalf("scan after expiry = %q, want only t/keep", got)
	}
}

// testNextID: concurrent callers get every id of 1..N once, each caller
// in ascending order, and every kind starts at 1.
func testNextID(t *testing.T, s kv.Store) {
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
}

// testConflictsRetried: two loops incrementing one counter lose no
// increment: each conflict is re-run until it commits.
func testConflictsRetried(t *testing.T, s kv.Store) {
	ctx := context.Background()
	key := []byte("counter")
	const workers, each = 2, 200
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				err := s.Update(ctx, func(tx kv.Txn) error {
					var n uint64
					v, err := tx.Get(key)
					switch {
					case err == nil:
						n = kv.Uint64At(v, 0)
					case !errors.Is(err, kv.ErrNotFound):
						return err
					}
					return tx.Set(key, kv.AppendUint64(nil, n+1))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	v, err := Get(t, s, key)
	if err != nil {
		t.Fatal(err)
	}
	if n := kv.Uint64At(v, 0); n != workers*each {
		t.Fatalf("counter = %d, want %d", n, workers*each)
	}
}

// testSerializable: write skew, the anomaly snapshot isolation allows.
// Two transactions each read x and y and, seeing both set, clear one of
// them; they read before either commits. Serially the second sees the
// first's clear and leaves its key, so exactly one key is cleared.
func testSerializable(t *testing.T, s kv.Store) {
	writeSkew(t, s, s.Update)
}

// testUnsyncedSerializable: an engine's kv.Unsynced commits are ordered
// with its Updates as any two Updates are (vfs's pins and collector
// claims rely on it), and visible once they return.
func testUnsyncedSerializable(t *testing.T, s kv.Store) {
	u, ok := s.(kv.Unsynced)
	if !ok {
		t.Skip("the engine has no unsynced commits")
	}
	writeSkew(t, s, u.UpdateUnsynced)
	if err := u.UpdateUnsynced(context.Background(), func(tx kv.Txn) error { return tx.Set([]byte("z"), []byte{7}) }); err != nil {
		t.Fatal(err)
	}
	if v, err := Get(t, s, []byte("z")); err != nil || len(v) != 1 || v[0] != 7 {
		t.Fatalf("after an unsynced commit: %v, %v", v, err)
	}
}

// writeSkew runs two transactions that each read x and y and clear one
// of them if both are set, the first with update and the second with
// s.Update: a serializable engine lets exactly one clear its key.
func writeSkew(t *testing.T, s kv.Store, update func(context.Context, func(kv.Txn) error) error) {
	ctx := context.Background()
	x, y := []byte("x"), []byte("y")
	Set(t, s, x, []byte{1}, y, []byte{1})
	read := [2]chan struct{}{make(chan struct{}), make(chan struct{})}
	var wg sync.WaitGroup
	for i, mine := range [][]byte{x, y} {
		up := s.Update
		if i == 0 {
			up = update
		}
		wg.Go(func() {
			first := true
			err := up(ctx, func(tx kv.Txn) error {
				sum := 0
				for _, k := range [][]byte{x, y} {
					v, err := tx.Get(k)
					if err != nil {
						return err
					}
					sum += int(v[0])
				}
				if first {
					// Both read before either writes. An engine that
					// makes the other wait here is serializable too.
					first = false
					close(read[i])
					select {
					case <-read[1-i]:
					case <-time.After(5 * time.Second):
					}
				}
				if sum < 2 {
					return nil
				}
				return tx.Set(mine, []byte{0})
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	vx, errx := Get(t, s, x)
	vy, erry := Get(t, s, y)
	if errx != nil || erry != nil {
		t.Fatal(errx, erry)
	}
	if int(vx[0])+int(vy[0]) != 1 {
		t.Fatalf("x = %d, y = %d: want exactly one cleared, as in a serial order", vx[0], vy[0])
	}
}

// testBoundedRetry: a transaction whose every try is overtaken by another
// commit does not loop for ever. It ends either committed (the engine
// made the others wait for it; kv/badger does after a few conflicts) or
// with ErrConflict and none of its writes visible. Its first try must
// conflict: the other commit changed what it read.
func testBoundedRetry(t *testing.T, s kv.Store) {
	ctx := context.Background()
	hot, derived := []byte("hot"), []byte("derived")
	var wg sync.WaitGroup
	defer wg.Wait()
	tries := 0
	err := s.Update(ctx, func(tx kv.Txn) error {
		tries++
		if tries > 1000 {
			return errors.New("fn ran 1000 times: Update retries without bound")
		}
		if _, err := tx.Get(hot); err != nil && !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		// Another transaction changes what this one read, before it
		// commits.
		done := make(chan error, 1)
		n := byte(tries)
		wg.Go(func() {
			done <- s.Update(ctx, func(tx kv.Txn) error { return tx.Set(hot, []byte{n}) })
		})
		wait := 250 * time.Millisecond
		if tries == 1 {
			wait = 30 * time.Second
		}
		select {
		case err := <-done:
			if err != nil {
				return err
			}
		case <-time.After(wait):
			// The engine holds the other back until this one is done.
		}
		return tx.Set(derived, []byte("x"))
	})
	if tries < 2 {
		t.Fatalf("fn ran %d times: a try whose read was overwritten before its commit committed", tries)
	}
	_, derr := Get(t, s, derived)
	switch {
	case errors.Is(err, kv.ErrConflict):
		if !errors.Is(derr, kv.ErrNotFound) {
			t.Fatalf("Update gave up after %d tries, yet its write is there: %v", tries, derr)
		}
	case err == nil:
		if derr != nil {
			t.Fatalf("Update committed after %d tries, yet its write is missing: %v", tries, derr)
		}
	default:
		t.Fatalf("Update = %v after %d tries, want nil or ErrConflict", err, tries)
	}
}

// testGeneration: what kv's package documentation asks of Generation that
// can be seen from outside: every commit moves it, a reader never sees it
// go back, and a reader that saw the new value of a commit never has the
// number from before it.
func testGeneration(t *testing.T, s kv.Store) {
	ctx := context.Background()
	prev := s.Generation()
	for i := range 3 {
		if err := s.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("k"), []byte{byte(i)}) }); err != nil {
			t.Fatal(err)
		}
		g := s.Generation()
		if g <= prev {
			t.Fatalf("after update %d: generation %d, not past %d", i+1, g, prev)
		}
		prev = g
	}

	// Writers commit while readers read a generation, then the value,
	// then the generation again, as a cache does (kv.Cache). An entry
	// read after Generation returned g must not be older than what the
	// store holds when a later call returns g: the value a reader saw
	// before that call was in the store then.
	const writers, each, readers = 2, 50, 2
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				err := s.Update(ctx, func(tx kv.Txn) error {
					return tx.Set(fmt.Appendf(nil, "g/%d", w), kv.AppendUint64(nil, uint64(i+1)))
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var rg sync.WaitGroup
	for range readers {
		rg.Go(func() {
			last := s.Generation()
			entries := map[uint64]uint64{} // generation -> the oldest g/0 read after it
			gen := func() (uint64, bool) {
				g := s.Generation()
				if g < last {
					t.Errorf("generation went back from %d to %d", last, g)
					return g, false
				}
				last = g
				return g, true
			}
			for {
				select {
				case <-stop:
					return
				default:
				}
				g1, ok := gen()
				if !ok {
					return
				}
				var n uint64
				v, err := Get(t, s, []byte("g/0"))
				switch {
				case err == nil:
					n = kv.Uint64At(v, 0)
				case !errors.Is(err, kv.ErrNotFound):
					t.Error(err)
					return
				}
				g2, ok := gen()
				if !ok {
					return
				}
				if old, ok := entries[g2]; ok && old < n {
					t.Errorf("generation %d: a cache would serve g/0 = %d, read after it returned %d, when %d was already read", g2, old, g2, n)
					return
				}
				if old, ok := entries[g1]; !ok || n < old {
					entries[g1] = n
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rg.Wait()
}

// testCancelledContext: no call runs with a context that has ended, the
// optional kv.GCer included.
func testCancelledContext(t *testing.T, s kv.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fn := func(kv.Txn) error {
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
	if g, ok := s.(kv.GCer); ok {
		if err := g.RunGC(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("RunGC = %v, want context.Canceled", err)
		}
	}
}

// testClose: every call after Close returns ErrClosed, the optional
// kv.GCer included, and a second Close is not an error.
func testClose(t *testing.T, s kv.Store) {
	ctx := context.Background()
	if _, err := s.NextID(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	CheckClosed(t, s)
}

// CheckClosed fails t unless every call on s, which was closed, returns
// kv.ErrClosed (the optional kv.GCer's too) and a second Close is no
// error: the end of the suite's Close test, and of an engine's own tests
// of how it closes.
func CheckClosed(t *testing.T, s kv.Store) {
	t.Helper()
	ctx := context.Background()
	fn := func(kv.Txn) error { return nil }
	if err := s.View(ctx, fn); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("View after Close = %v", err)
	}
	if err := s.Update(ctx, fn); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Update after Close = %v", err)
	}
	if _, err := s.NextID(ctx, "x"); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("NextID after Close = %v", err)
	}
	if g, ok := s.(kv.GCer); ok {
		if err := g.RunGC(ctx); !errors.Is(err, kv.ErrClosed) {
			t.Errorf("RunGC after Close = %v", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// testLease: a lease has one holder at a time; the holder renews it, gives
// it up with Release, and a holder that stops renewing loses it when its
// TTL runs out, with no sweeper.
func testLease(t *testing.T, s kv.Store) {
	ctx := context.Background()
	const ttl = 2 * time.Second
	a := kv.NewLease(s, "gc", "node-a", ttl)
	b := kv.NewLease(s, "gc", "node-b", ttl)
	other := kv.NewLease(s, "trim", "node-b", ttl)
	steps := []struct {
		name string
		l    *kv.Lease
		want bool
	}{
		{"a takes it", a, true},
		{"b is refused", b, false},
		{"a renews it", a, true},
		{"b takes another lease", other, true},
		{"b is still refused", b, false},
	}
	for _, st := range steps {
		got, err := st.l.Acquire(ctx)
		if err != nil || got != st.want {
			t.Fatalf("%s: Acquire = %v, %v; want %v", st.name, got, err, st.want)
		}
	}
	if err := b.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Acquire(ctx); got {
		t.Fatal("b's Release gave up a's lease")
	}
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Acquire(ctx); err != nil || !got {
		t.Fatalf("after a's Release: b's Acquire = %v, %v", got, err)
	}
	// b stops renewing: its lease expires by itself.
	deadline := time.Now().Add(3 * ttl)
	for {
		got, err := a.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's lease did not expire within %v", 3*ttl)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testLeaseRunExclusive: holders racing to Run one job never run it at
// once, and a holder whose lease is taken from it has its job cancelled
// with ErrLeaseLost.
func testLeaseRunExclusive(t *testing.T, s kv.Store) {
	ctx := context.Background()
	const ttl = 3 * time.Second
	var running, most, ran atomic.Int32
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := kv.NewLease(s, "job", fmt.Sprintf("node-%d", i), ttl)
			for range 5 {
				_, err := l.Run(ctx, func(context.Context) error {
					n := running.Add(1)
					for {
						m := most.Load()
						if n <= m || most.CompareAndSwap(m, n) {
							break
						}
					}
					ran.Add(1)
					time.Sleep(20 * time.Millisecond)
					running.Add(-1)
					return nil
				})
				if err != nil && !errors.Is(err, kv.ErrConflict) {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if most.Load() > 1 || ran.Load() == 0 {
		t.Fatalf("the job ran %d times, at most %d at once; want at least once, never two at once", ran.Load(), most.Load())
	}

	// Another holder takes the lease over (as after an expiry): the
	// job's context ends and Run says so.
	l := kv.NewLease(s, "lost", "node-a", ttl)
	held, err := l.Run(ctx, func(ctx context.Context) error {
		if err := s.Update(ctx, func(tx kv.Txn) error {
			return tx.SetTTL(kv.KeyString(kv.KVLease, nil, "lost"), []byte("node-b"), ttl)
		}); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(3 * ttl):
			return errors.New("the job ran on after its lease was taken")
		}
	})
	if !held || !errors.Is(err, kv.ErrLeaseLost) {
		t.Fatalf("Run = %v, %v; want true, ErrLeaseLost", held, err)
	}
}
