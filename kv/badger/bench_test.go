package badger

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"berth/kv"
)

// benchStore opens an on-disk store holding n keys "bench/<i>" with
// 150-byte values, the size of a typical CBOR-encoded node record.
func benchStore(b *testing.B, n int) *DB {
	b.Helper()
	s := openDisk(b, b.TempDir(), Options{})
	b.Cleanup(func() { s.Close() })
	val := bytes.Repeat([]byte("v"), 150)
	ctx := context.Background()
	for i := 0; i < n; {
		err := s.Update(ctx, func(tx kv.Txn) error {
			for j := 0; j < 1000 && i+j < n; j++ {
				if err := tx.Set(kv.Key("bench/", uint64(i+j)), val); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		i += 1000
	}
	return s
}

func BenchmarkGet(b *testing.B) {
	const n = 10000
	s := benchStore(b, n)
	ctx := context.Background()
	i := uint64(0)
	for b.Loop() {
		key := kv.Key("bench/", i%n)
		i += 7919 // a prime: spread the reads
		err := s.View(ctx, func(tx kv.Txn) error {
			_, err := tx.Get(key)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdate is one durable (fsynced) commit of one key.
func BenchmarkUpdate(b *testing.B) {
	s := benchStore(b, 0)
	ctx := context.Background()
	val := bytes.Repeat([]byte("v"), 150)
	key := kv.Key("bench/", 1)
	for b.Loop() {
		err := s.Update(ctx, func(tx kv.Txn) error { return tx.Set(key, val) })
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUpdateParallel measures concurrent writers of distinct keys,
// whose commits share fsync rounds (groupSync): compare its ns/op with
// BenchmarkUpdate. Values of 150 bytes and of 4 KiB (a small file kept
// inline) stay in the write-ahead log, and a round syncs that one log;
// values of 32 KiB also go to the value log, and their rounds sync two.
func BenchmarkUpdateParallel(b *testing.B) {
	for _, size := range []int{150, 4096, 32 << 10} {
		b.Run(fmt.Sprintf("value=%d", size), func(b *testing.B) {
			s := benchStore(b, 0)
			val := bytes.Repeat([]byte("v"), size)
			b.SetParallelism(8)
			before := s.SyncStats()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					id, err := s.NextID(ctx, "bench")
					if err != nil {
						b.Error(err)
						return
					}
					err = s.Update(ctx, func(tx kv.Txn) error { return tx.Set(kv.Key("bench/", id), val) })
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			after := s.SyncStats()
			if rounds := after.Rounds - before.Rounds; rounds > 0 {
				b.ReportMetric(float64(after.Files-before.Files)/float64(rounds), "fsyncs/round")
			}
		})
	}
}

// BenchmarkSyncRound is one writer's durable commits of a small file's
// record (a 4 KiB value, as a small PUT writes), on an idle machine and
// with every core kept busy by spinning goroutines, as a loaded server's
// requests keep them. A round's fdatasync needs the kernel's writeback
// and journal threads to run, so its time grows with the load: on the
// 2-core VM of issue 15, with Badger's two logs synced in each round,
// 0.4 ms idle against about 1 ms busy. A commit that arrives during a round
// waits for about one and a half rounds, so this time, not the CPU a
// commit costs, bounds the rate of a few clients' small writes.
func BenchmarkSyncRound(b *testing.B) {
	for _, busy := range []bool{false, true} {
		b.Run(fmt.Sprintf("busy=%v", busy), func(b *testing.B) {
			s := benchStore(b, 0)
			val := bytes.Repeat([]byte("v"), 4096)
			ctx := context.Background()
			if busy {
				stop := make(chan struct{})
				var wg sync.WaitGroup
				defer wg.Wait()
				defer close(stop)
				for range runtime.GOMAXPROCS(0) {
					wg.Go(func() {
						// Yielding keeps the cores busy for the
						// kernel while the writer still gets a P
						// at once, as between requests.
						for {
							select {
							case <-stop:
								return
							default:
								runtime.Gosched()
							}
						}
					})
				}
			}
			before := s.SyncStats()
			for i := uint64(0); b.Loop(); i++ {
				err := s.Update(ctx, func(tx kv.Txn) error { return tx.Set(kv.Key("bench/", i), val) })
				if err != nil {
					b.Fatal(err)
				}
			}
			after := s.SyncStats()
			if rounds := after.Rounds - before.Rounds; rounds > 0 {
				b.ReportMetric(float64((after.RoundTime-before.RoundTime).Microseconds())/float64(rounds), "round-µs")
				b.ReportMetric(float64(after.Files-before.Files)/float64(rounds), "fsyncs/round")
			}
		})
	}
}

// BenchmarkScan10k is one Scan over 10,000 keys; ns/op is per scan.
func BenchmarkScan10k(b *testing.B) {
	const n = 10000
	s := benchStore(b, n)
	ctx := context.Background()
	for _, reverse := range []bool{false, true} {
		name := "forward"
		if reverse {
			name = "reverse"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				count, size := 0, 0
				err := s.View(ctx, func(tx kv.Txn) error {
					scan := tx.Scan
					if reverse {
						scan = tx.ScanReverse
					}
					return scan([]byte("bench/"), nil, func(k, v []byte) error {
						count++
						size += len(v)
						return nil
					})
				})
				if err != nil || count != n {
					b.Fatalf("scan: %d keys, %v", count, err)
				}
			}
		})
	}
}

func BenchmarkNextID(b *testing.B) {
	s := benchStore(b, 0)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.NextID(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
