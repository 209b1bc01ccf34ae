package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/kvtest"
	"berth/kv/postgres/pgtest"
)

// open returns a store on a new database of srv, closed when t ends.
func open(t testing.TB, srv *pgtest.Server, opts Options) *DB {
	t.Helper()
	opts.DSN = srv.NewDatabase(t)
	d, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestConformance runs kv's conformance suite on PostgreSQL, one
// database per subtest.
func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	kvtest.Run(t, func(t *testing.T) kv.Store { return open(t, srv, Options{}) })
}

// TestEngine covers what is the engine's own, on one server: scans that
// cross batches, the expiry delete, the size bound, and two stores on
// one database as two nodes would have.
func TestEngine(t *testing.T) {
	srv := pgtest.Start(t)
	tests := []struct {
		name string
		fn   func(t *testing.T, srv *pgtest.Server)
	}{
		{"ScanBatches", testScanBatches},
		{"Expire", testExpire},
		{"TxnTooBig", testTxnTooBig},
		{"TwoNodes", testTwoNodes},
		{"NestedCalls", testNestedCalls},
		{"RefusedWrite", testRefusedWrite},
		{"OwnWrites", testOwnWrites},
		{"SameValueWrites", testSameValueWrites},
		{"RoundTrips", testRoundTrips},
		{"Now", testNow},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, srv)
		})
	}
}

// testScanBatches: a scan of more keys than one batch holds visits each
// once, in order, both ways and from a start key, while fn writes.
func testScanBatches(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{})
	const n = 3000
	ctx := context.Background()
	err := d.Update(ctx, func(tx kv.Txn) error {
		for i := range uint64(n) {
			if err := tx.Set(kv.Key("b/", i), kv.AppendUint64(nil, i)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		reverse bool
		start   []byte
		first   uint64
		count   int
	}{
		{"forward", false, nil, 0, n},
		{"forward from 1000", false, kv.Key("b/", 1000), 1000, n - 1000},
		{"reverse", true, nil, n - 1, n},
		{"reverse from 2500", true, kv.Key("b/", 2500), 2500, 2501},
	}
	for _, tc := range tests {
		var got []uint64
		// fn writes elsewhere between the batches: the next batch's
		// query runs on the same transaction.
		err := d.Update(ctx, func(tx kv.Txn) error {
			got = got[:0]
			scan := tx.Scan
			if tc.reverse {
				scan = tx.ScanReverse
			}
			return scan([]byte("b/"), tc.start, func(k, v []byte) error {
				got = append(got, kv.Uint64At(v, 0))
				if len(got)%700 == 0 {
					return tx.Set([]byte("c/seen"), v)
				}
				return nil
			})
		})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(got) != tc.count {
			t.Fatalf("%s: %d keys, want %d", tc.name, len(got), tc.count)
		}
		for i, id := range got {
			want := tc.first + uint64(i)
			if tc.reverse {
				want = tc.first - uint64(i)
			}
			if id != want {
				t.Fatalf("%s: key %d is %d, want %d", tc.name, i, id, want)
			}
		}
	}
}

// testExpire: the delete removes expired rows and keeps live ones and
// ones renewed since they were written.
func testExpire(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{ExpireEvery: -1})
	ctx := context.Background()
	err := d.Update(ctx, func(tx kv.Txn) error {
		for i := range uint64(1200) {
			if err := tx.SetTTL(kv.Key("e/", i), []byte("x"), time.Millisecond); err != nil {
				return err
			}
		}
		if err := tx.SetTTL([]byte("e/renewed"), []byte("x"), time.Millisecond); err != nil {
			return err
		}
		return tx.SetTTL([]byte("e/live"), []byte("x"), time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	kvtest.Set(t, d, []byte("e/renewed"), []byte("y"))
	time.Sleep(50 * time.Millisecond)
	n, err := d.Expire(ctx)
	if err != nil || n != 1200 {
		t.Fatalf("Expire = %d, %v; want 1200 rows", n, err)
	}
	var rows int
	if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM berth_kv`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Fatalf("%d rows left, want e/live and e/renewed", rows)
	}
	if got := kvtest.KeysUnder(t, d, []byte("e/")); !slices.Equal(got, []string{"e/live", "e/renewed"}) {
		t.Fatalf("keys = %q", got)
	}

	// The engine deletes them by itself, without a call.
	d2 := open(t, srv, Options{ExpireEvery: 20 * time.Millisecond})
	err = d2.Update(ctx, func(tx kv.Txn) error {
		return tx.SetTTL([]byte("e/1"), []byte("x"), time.Millisecond)
	})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := d2.pool.QueryRow(ctx, `SELECT count(*) FROM berth_kv`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an expired row is still in the table after 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// testTxnTooBig: writes past MaxTxnBytes fail with kv.ErrTxnTooBig and
// nothing is committed.
func testTxnTooBig(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{MaxTxnBytes: 1000})
	err := d.Update(context.Background(), func(tx kv.Txn) error {
		for i := range uint64(100) {
			if err := tx.Set(kv.Key("z/", i), make([]byte, 50)); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, kv.ErrTxnTooBig) {
		t.Fatalf("Update = %v, want ErrTxnTooBig", err)
	}
	if got := kvtest.KeysUnder(t, d, []byte("z/")); len(got) != 0 {
		t.Fatalf("%d keys committed", len(got))
	}
}

// testTwoNodes: two stores on one database, as two berth nodes have.
// Each one's commits move the other's Generation, a kv.Cache on one
// never serves what the other has overwritten, and sequences never hand
// out an id twice between them, across a reopen too.
func testTwoNodes(t *testing.T, srv *pgtest.Server) {
	dsn := srv.NewDatabase(t)
	ctx := context.Background()
	nodes := make([]*DB, 2)
	for i := range nodes {
		d, err := Open(ctx, Options{DSN: dsn, IDLease: 10})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		nodes[i] = d
	}
	a, b := nodes[0], nodes[1]

	cache := kv.NewCache[string, string](10)
	read := func() string {
		g := a.Generation()
		if v, ok := cache.Get(g, "k"); ok {
			return v
		}
		v, err := kvtest.Get(t, a, []byte("k"))
		if err != nil {
			t.Fatal(err)
		}
		cache.Put(g, "k", string(v))
		return string(v)
	}
	for i := range 20 {
		want := fmt.Sprint(i)
		g := a.Generation()
		kvtest.Set(t, b, []byte("k"), []byte(want))
		if ga := a.Generation(); ga <= g {
			t.Fatalf("b's commit did not move a's generation (%d, then %d)", g, ga)
		}
		if got := read(); got != want {
			t.Fatalf("a read %q after b wrote %q", got, want)
		}
		if got := read(); got != want { // from the cache
			t.Fatalf("a's cache served %q after b wrote %q", got, want)
		}
	}

	seen := map[uint64]bool{}
	take := func(d *DB, n int) {
		for range n {
			id, err := d.NextID(ctx, "node")
			if err != nil {
				t.Fatal(err)
			}
			if seen[id] {
				t.Fatalf("id %d handed out twice", id)
			}
			seen[id] = true
		}
	}
	take(a, 15)
	take(b, 15)
	take(a, 15)
	// A node that restarts takes a new lease, past what it had.
	a.Close()
	a2, err := Open(ctx, Options{DSN: dsn, IDLease: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	take(a2, 15)
	take(b, 15)
}

// testNestedCalls: more concurrent Updates than the pool has connections,
// each calling NextID and View from inside fn (which kv allows), all
// finish: those calls never wait for a connection that only another
// Update's end would free.
func testNestedCalls(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{MaxConns: 2, IDLease: 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			err := d.Update(ctx, func(tx kv.Txn) error {
				id, err := d.NextID(ctx, "nested")
				if err != nil {
					return err
				}
				if err := d.View(ctx, func(kv.Txn) error { return nil }); err != nil {
					return err
				}
				d.Generation()
				return tx.Set(kv.Key("w/", uint64(w)), kv.AppendUint64(nil, id))
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// testRefusedWrite: a write the database refuses (a key longer than a
// B-tree entry may be), which is sent with the transaction's next
// statement, fails the Update, commits none of its writes, and leaves
// the store working.
func testRefusedWrite(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{})
	huge := make([]byte, 10000)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range huge {
		huge[i] = byte(r.Uint32()) // not compressible into an index entry
	}
	err := d.Update(context.Background(), func(tx kv.Txn) error {
		if err := tx.Set([]byte("q/ok"), []byte("x")); err != nil {
			return err
		}
		return tx.Set(append([]byte("q/"), huge...), []byte("x"))
	})
	if err == nil {
		t.Fatal("Update with a key longer than the index takes succeeded")
	}
	if got := kvtest.KeysUnder(t, d, []byte("q/")); len(got) != 0 {
		t.Fatalf("keys committed: %q", got)
	}
	kvtest.Set(t, d, []byte("q/after"), []byte("y"))
}

// testOwnWrites: writes wait in the queue until the commit or a read
// that must see them, and a key read or written once is answered from
// the transaction: every read still sees the transaction's own writes
// (a scan of their range, a value too large to keep, a delete), and
// values returned are the caller's.
func testOwnWrites(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{})
	ctx := context.Background()
	kvtest.Set(t, d, []byte("o/a"), []byte("1"), []byte("o/c"), []byte("3"))
	big := bytes.Repeat([]byte("b"), knownMax+1)
	err := d.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get([]byte("o/a"))
		if err != nil || string(v) != "1" {
			return fmt.Errorf("Get o/a = %q, %v", v, err)
		}
		v[0] = 'x' // the caller's copy
		if v, err := tx.Get([]byte("o/a")); err != nil || string(v) != "1" {
			return fmt.Errorf("second Get o/a = %q, %v", v, err)
		}
		if err := tx.Set([]byte("o/b"), []byte("2")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("o/a")); err != nil {
			return err
		}
		if err := tx.Set([]byte("p/big"), big); err != nil {
			return err
		}
		if _, err := tx.Get([]byte("o/a")); !errors.Is(err, kv.ErrNotFound) {
			return fmt.Errorf("Get of a deleted key: %v", err)
		}
		if v, err := tx.Get([]byte("p/big")); err != nil || !bytes.Equal(v, big) {
			return fmt.Errorf("Get of a large value written: %d bytes, %v", len(v), err)
		}
		var keys []string
		err = tx.Scan([]byte("o/"), nil, func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
		if err != nil {
			return err
		}
		if !slices.Equal(keys, []string{"o/b", "o/c"}) {
			return fmt.Errorf("scan after writes = %q", keys)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := kvtest.KeysUnder(t, d, []byte("o/")); !slices.Equal(got, []string{"o/b", "o/c"}) {
		t.Fatalf("committed keys %q", got)
	}
}

// testSameValueWrites: two transactions at once that each write a key
// the value it holds, and read nothing the other writes, both commit on
// their first try (the write changes nothing; see setSQL), where an
// update of the row by each made the second fail. A write of another
// value still fails a transaction that read the key.
func testSameValueWrites(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{ConflictRetries: -1})
	var shard atomic.Int64
	d.genShard = func() int { return int(shard.Add(1)) % genShards } // no two alike
	ctx := context.Background()
	kvtest.Set(t, d, []byte("g/folder"), []byte{}, []byte("g/other"), []byte("o"))
	began := make(chan struct{})
	firstDone := make(chan error)
	go func() {
		firstDone <- d.Update(ctx, func(tx kv.Txn) error {
			if _, err := tx.Get([]byte("g/other")); err != nil {
				return err
			}
			<-began
			return tx.Set([]byte("g/folder"), nil)
		})
	}()
	err := d.Update(ctx, func(tx kv.Txn) error {
		// The snapshot is taken before the first commits.
		if _, err := tx.Get([]byte("g/other")); err != nil {
			return err
		}
		close(began)
		if err := <-firstDone; err != nil {
			return fmt.Errorf("first: %w", err)
		}
		return tx.Set([]byte("g/folder"), []byte{})
	})
	if err != nil {
		t.Fatalf("a write of the value a key holds conflicted: %v", err)
	}

	// A change of value still fails a transaction that read the key.
	read := make(chan struct{})
	err = d.Update(ctx, func(tx kv.Txn) error {
		if _, err := tx.Get([]byte("g/folder")); err != nil {
			return err
		}
		kvtest.Set(t, d, []byte("g/folder"), []byte("changed"))
		close(read)
		return tx.Set([]byte("g/derived"), []byte("x"))
	})
	<-read
	if !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("a transaction that read a key changed meanwhile committed: %v", err)
	}
}

// testRoundTrips: what the engine's batching promises, in round trips
// (RoundTrips): a View of one Get is one for its caller and one for its
// end; an Update that reads a key twice and writes two is two (BEGIN
// with the read, the writes with the checks and COMMIT); a blind write
// is one; a scan of 5,000 keys is one per batch; a transaction that
// reads nothing costs none.
func testRoundTrips(t *testing.T, srv *pgtest.Server) {
	d := open(t, srv, Options{})
	ctx := context.Background()
	kvtest.Set(t, d, []byte("r/a"), []byte("1"))
	err := d.Update(ctx, func(tx kv.Txn) error {
		for i := range uint64(5000) {
			if err := tx.Set(kv.Key("s/", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	trips := func(fn func() error) uint64 {
		t.Helper()
		d.ends.Wait()
		n := d.RoundTrips()
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		d.ends.Wait()
		return d.RoundTrips() - n
	}
	get := func(tx kv.Txn) error { _, err := tx.Get([]byte("r/a")); return err }
	scan := func(tx kv.Txn) error { return tx.Scan([]byte("s/"), nil, func(k, v []byte) error { return nil }) }
	// The first run of each prepares its statements on the connection.
	for range 2 {
		trips(func() error { return d.View(ctx, get) })
		trips(func() error { return d.View(ctx, scan) })
	}
	tests := []struct {
		name string
		fn   func() error
		want uint64
	}{
		{"view of one get", func() error { return d.View(ctx, get) }, 2},
		{"view of nothing", func() error { return d.View(ctx, func(kv.Txn) error { return nil }) }, 0},
		{"update reading twice, writing twice", func() error {
			return d.Update(ctx, func(tx kv.Txn) error {
				if err := get(tx); err != nil {
					return err
				}
				if err := tx.Set([]byte("r/b"), []byte("2")); err != nil {
					return err
				}
				if err := get(tx); err != nil {
					return err
				}
				return tx.Set([]byte("r/a"), []byte("1"))
			})
		}, 2},
		{"blind write", func() error {
			return d.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("r/c"), []byte("3")) })
		}, 1},
		// 32, then 64, 128, 256, 512 and 1024 at a time: 1 + 4 + 4.
		{"scan of 5000", func() error { return d.View(ctx, scan) }, 10},
	}
	for _, tc := range tests {
		if got := trips(tc.fn); got != tc.want {
			t.Errorf("%s: %d round trips, want %d", tc.name, got, tc.want)
		}
	}
}

// testNow: the database tells its clock, which on one machine is this
// process's, and a closed store refuses.
func testNow(t *testing.T, srv *pgtest.Server) {
	db := open(t, srv, Options{})
	// The server runs on this machine: its now() falls between the
	// process's clock before and after the call, however long the call
	// takes on a loaded machine (a second either side for a step of the
	// clock between them).
	before := time.Now()
	now, err := db.Now(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if now.Before(before.Add(-time.Second)) || now.After(after.Add(time.Second)) {
		t.Errorf("the database's clock reads %v, outside this process's %v to %v", now, before, after)
	}
	db.Close()
	if _, err := db.Now(t.Context()); !errors.Is(err, kv.ErrClosed) {
		t.Errorf("Now on a closed store = %v, want kv.ErrClosed", err)
	}
}
