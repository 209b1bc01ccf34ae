package postgres

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
	"berth/kv/postgres/pgtest"
)

// The benchmarks run each figure on PostgreSQL and on Badger (on disk,
// fsynced) in the same run, so the two sides of a ratio share the
// machine's load. Run them with -benchtime=1x to check they work, longer
// (-benchtime=2000x) for figures.

// engines opens an empty store of each engine for b.
func engines(b *testing.B, srv *pgtest.Server) []struct {
	name string
	open func() kv.Store
} {
	return []struct {
		name string
		open func() kv.Store
	}{
		{"badger", func() kv.Store {
			s, err := badger.Open(badger.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			return s
		}},
		{"postgres", func() kv.Store { return open(b, srv, Options{}) }},
	}
}

// BenchmarkCommit is a small metadata commit, the shape of a small
// upload's: read the parent, write a node and a revision record of 150
// bytes, by one writer and by 8 at once. It reports commits/s.
func BenchmarkCommit(b *testing.B) {
	srv := pgtest.Start(b)
	val := bytes.Repeat([]byte("v"), 150)
	for _, e := range engines(b, srv) {
		for _, writers := range []int{1, 8} {
			b.Run(fmt.Sprintf("engine=%s/writers=%d", e.name, writers), func(b *testing.B) {
				s := e.open()
				ctx := context.Background()
				var next atomic.Uint64
				commit := func() error {
					i := next.Add(1)
					return s.Update(ctx, func(tx kv.Txn) error {
						if _, err := tx.Get(kv.Key("p/", i%16)); err != nil && err != kv.ErrNotFound {
							return err
						}
						if err := tx.Set(kv.Key("n/", i), val); err != nil {
							return err
						}
						return tx.Set(kv.Key("r/", i), val)
					})
				}
				start := time.Now()
				if writers == 1 {
					for b.Loop() {
						if err := commit(); err != nil {
							b.Fatal(err)
						}
					}
				} else {
					b.SetParallelism(writers)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							if err := commit(); err != nil {
								b.Error(err)
								return
							}
						}
					})
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
				if d, ok := s.(*DB); ok {
					b.ReportMetric(float64(d.Retries())/float64(b.N), "retries/commit")
				}
			})
		}
	}
}

// BenchmarkScan scans a prefix of BERTH_BENCH_SCAN_KEYS keys (default
// 100,000; the check is 1,000,000) in one View and reports keys/s
// and the most live heap added during the scan (sampled every 50,000
// keys, after a collection): flat, whatever the count, since one batch at
// a time is in memory.
func BenchmarkScan(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("BERTH_BENCH_SCAN_KEYS")); err == nil && v > 0 {
		n = v
	}
	srv := pgtest.Start(b)
	val := bytes.Repeat([]byte("v"), 150)
	for _, e := range engines(b, srv) {
		b.Run("engine="+e.name, func(b *testing.B) {
			s := e.open()
			fill(b, s, n, val)
			ctx := context.Background()
			runtime.GC()
			var base, peak runtime.MemStats
			runtime.ReadMemStats(&base)
			peakHeap := base.HeapAlloc
			b.ResetTimer()
			start := time.Now()
			for b.Loop() {
				seen := 0
				err := s.View(ctx, func(tx kv.Txn) error {
					return tx.Scan([]byte("s/"), nil, func(k, v []byte) error {
						seen++
						if seen%50_000 == 0 {
							// Live heap only: what the scan holds,
							// not garbage waiting for a collection.
							runtime.GC()
							runtime.ReadMemStats(&peak)
							peakHeap = max(peakHeap, peak.HeapAlloc)
						}
						return nil
					})
				})
				if err != nil {
					b.Fatal(err)
				}
				if seen != n {
					b.Fatalf("scanned %d keys, want %d", seen, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/time.Since(start).Seconds(), "keys/s")
			b.ReportMetric(float64(peakHeap-min(peakHeap, base.HeapAlloc))/(1<<20), "heap-growth-MiB")
		})
	}
}

// fill writes n keys "s/<i>" with val, 5,000 a transaction.
func fill(b *testing.B, s kv.Store, n int, val []byte) {
	b.Helper()
	ctx := context.Background()
	for i := 0; i < n; i += 5000 {
		err := s.Update(ctx, func(tx kv.Txn) error {
			for j := i; j < min(i+5000, n); j++ {
				if err := tx.Set(kv.Key("s/", uint64(j)), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNextID reports ids/s with leases of 100 ids (the default) and
// of 1 (every id a statement of its own).
func BenchmarkNextID(b *testing.B) {
	srv := pgtest.Start(b)
	for _, lease := range []int{1, DefaultIDLease} {
		b.Run(fmt.Sprintf("lease=%d", lease), func(b *testing.B) {
			d := open(b, srv, Options{IDLease: lease})
			ctx := context.Background()
			start := time.Now()
			for b.Loop() {
				if _, err := d.NextID(ctx, "node"); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ids/s")
		})
	}
}

// BenchmarkGeneration is one Generation call: one round trip to the
// database, the floor under every request's cost on this engine. Compare
// ns/op with the machine's load: on a loaded machine a round trip waits
// for the database's process to be scheduled.
func BenchmarkGeneration(b *testing.B) {
	srv := pgtest.Start(b)
	d := open(b, srv, Options{})
	for b.Loop() {
		d.Generation()
	}
}
