package chunk_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"berth/vfs/chunk"
)

// BenchmarkWriteFileSizes writes 256 MiB of random data through one
// Writer into memory as files of one size each, and reports the process
// CPU seconds per GiB and MB/s: what a sync of many photos or documents
// costs next to one large stream. Files up to a few MiB are read in the
// buffers a stream's first segment grows through (segment.go).
//
//	go test -run '^$' -bench WriteFileSizes -benchtime 3x ./vfs/chunk
func BenchmarkWriteFileSizes(b *testing.B) {
	data := randomData(7, benchSize)
	for _, size := range []int{300 << 10, 3 * mib, benchSize} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			s := chunk.NewMemory()
			w := chunk.NewWriter(s, chunk.WriterOptions{})
			write := func(mark byte) {
				for off := 0; off < len(data); off += mib {
					data[off] = mark
				}
				for off := 0; off+size <= len(data); off += size {
					if _, _, err := w.Write(context.Background(), bytes.NewReader(data[off:off+size]), -1); err != nil {
						b.Fatal(err)
					}
				}
			}
			write(0xff)
			n := len(data) / size * size
			b.SetBytes(int64(n))
			b.ResetTimer()
			var cpu, wall time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				clearStore(b, s)
				u0, s0 := cpuTime(b)
				t0 := time.Now()
				b.StartTimer()
				write(byte(i))
				b.StopTimer()
				u1, s1 := cpuTime(b)
				cpu += u1 - u0 + s1 - s0
				wall += time.Since(t0)
				b.StartTimer()
			}
			gib := float64(b.N) * float64(n) / (1 << 30)
			b.ReportMetric(cpu.Seconds()/gib, "cpu-s/GiB")
			b.ReportMetric(float64(b.N)*float64(n)/1e6/wall.Seconds(), "MB/s")
		})
	}
}
