package vfs_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"berth/vfs"
)

// BenchmarkSearch builds a root of n items (folders of 10,000 named
// file-<7 digits>.dat, written many to a transaction) and searches it for
// a name that 10 items hold, reporting ms per query from the index, the
// same query scanned the old way (the root's index forgotten) in the same
// run for roots up to 100,000, and the cost of building the tree per item.
// BERTH_BENCH_1M=1 adds a root of 1,000,000 items.
func BenchmarkSearch(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("BERTH_BENCH_1M") != "" {
		sizes = append(sizes, 1_000_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("root=%d", n), func(b *testing.B) {
			e := openEnv(b, b.TempDir())
			b.Cleanup(e.close)
			root, err := e.fs.CreateRoot(ctx, "big", vfs.RootSync)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			for d := 0; d*10_000 < n; d++ {
				dirs, err := e.fs.MkdirMany(ctx, root.ID, root.FolderID, []string{fmt.Sprintf("d%03d", d)})
				if err != nil {
					b.Fatal(err)
				}
				names := make([]string, 0, 10_000)
				for i := d * 10_000; i < min(n, (d+1)*10_000); i++ {
					names = append(names, fmt.Sprintf("file-%07d.dat", i))
				}
				if _, err := e.fs.MkdirMany(ctx, root.ID, dirs[0], names); err != nil {
					b.Fatal(err)
				}
			}
			build := time.Since(start)
			q := fmt.Sprintf("-%06d", n/20) // file-<q>0 to file-<q>9
			b.ResetTimer()
			for b.Loop() {
				ns, err := e.fs.Search(ctx, root.ID, q, 1000)
				if err != nil || len(ns) != 10 {
					b.Fatalf("search %q: %d results, %v", q, len(ns), err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/query")
			b.ReportMetric(float64(build.Nanoseconds())/float64(n), "ns/create")
			if n <= 100_000 {
				if err := e.fs.ForgetNames(ctx, root.ID); err != nil {
					b.Fatal(err)
				}
				t0 := time.Now()
				if ns, err := e.fs.Search(ctx, root.ID, q, 1000); err != nil || len(ns) != 10 {
					b.Fatalf("scan %q: %d results, %v", q, len(ns), err)
				}
				b.ReportMetric(float64(time.Since(t0).Microseconds())/1000, "scan-ms/query")
			}
		})
	}
}

// BenchmarkNameIndexWrite times what the name index adds to a create: its
// writes for one new item named like BenchmarkSearch's, in the
// transaction (the commit, shared by all, is not in it), beside a whole
// create of the same items many to a transaction.
func BenchmarkNameIndexWrite(b *testing.B) {
	e := newEnv(b)
	const batch = 1000
	names := make([]string, batch)
	for i := range names {
		names[i] = fmt.Sprintf("file-%07d.dat", i)
	}
	var index, create time.Duration
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if err := e.fs.IndexOnly(ctx, e.root.ID, names); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		dir, err := e.fs.MkdirMany(ctx, e.root.ID, e.root.FolderID, []string{fmt.Sprint("b", i)})
		if err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := e.fs.MkdirMany(ctx, e.root.ID, dir[0], names); err != nil {
			b.Fatal(err)
		}
		index, create = index+t1.Sub(t0), create+time.Since(t2)
	}
	b.ReportMetric(float64(index.Nanoseconds())/float64(b.N*batch), "index-ns/create")
	b.ReportMetric(float64(create.Nanoseconds())/float64(b.N*batch), "ns/create")
	b.ReportMetric(0, "ns/op")
}
