package chunk_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"berth/vfs/chunk"
)

// mixedData interleaves 64 KiB of random bytes with 64 KiB of text: the
// shape of an archive of sources and binaries, where a chunk is neither
// all compressible nor all not.
func mixedData(seed uint64, n int) []byte {
	r, t := randomData(seed, n), textData(seed, n)
	out := make([]byte, n)
	for off := 0; off < n; off += 64 << 10 {
		src := r
		if (off>>16)%2 == 1 {
			src = t
		}
		copy(out[off:min(off+64<<10, n)], src[off:])
	}
	return out
}

// BenchmarkEncode compares the codecs a chunk can be stored with, on
// 1 MiB chunks (about the average chunk) of three kinds of data: MB/s of
// plain bytes per core and the stored/plain ratio, both sides in the same
// run. The choice in encode.go rests on these numbers.
//
//	go test -run '^$' -bench Encode -cpu 1 ./vfs/chunk
func BenchmarkEncode(b *testing.B) {
	kinds := []struct {
		name string
		gen  func(uint64, int) []byte
	}{{"random", randomData}, {"text", textData}, {"mixed", mixedData}}
	zenc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
		zstd.WithEncoderConcurrency(1), zstd.WithEncoderCRC(false), zstd.WithLowerEncoderMem(true))
	if err != nil {
		b.Fatal(err)
	}
	codecs := []struct {
		name string
		enc  func(dst, src []byte) []byte
	}{
		{"zstd-fastest", func(dst, src []byte) []byte { return zenc.EncodeAll(src, dst[:0]) }},
		{"s2", func(dst, src []byte) []byte { return s2.Encode(dst[:cap(dst)], src) }},
		{"s2-better", func(dst, src []byte) []byte { return s2.EncodeBetter(dst[:cap(dst)], src) }},
		// What the Writer stores: the hash, then the chosen codec with its
		// seal, or the plain bytes when the codec does not pay.
		{"berth", func(dst, src []byte) []byte { return chunk.Encode(dst, chunk.Sum(src), src) }},
	}
	const n = 16 * mib
	for _, k := range kinds {
		data := k.gen(3, n)
		for _, c := range codecs {
			b.Run(k.name+"/"+c.name, func(b *testing.B) {
				dst := make([]byte, 0, s2.MaxEncodedLen(mib))
				var plain, stored int64
				b.SetBytes(n)
				for b.Loop() {
					for off := 0; off < n; off += mib {
						dst = c.enc(dst, data[off:off+mib])
						plain += mib
						stored += int64(len(dst))
					}
				}
				b.ReportMetric(float64(stored)/float64(plain), "stored/plain")
			})
		}
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime(b *testing.B) (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// BenchmarkWriteCPU writes one 256 MiB random stream through a Writer into
// a fresh Disk store (fsynced) or into memory, and reports MB/s and the
// process CPU seconds spent per GiB (user plus system, from getrusage, so
// the copies into the page cache count; user-s/GiB is the part in user
// space). Run with -cpu 1,2 (and 16 where a
// machine has them): one stream should use the cores it is given.
//
//	go test -run '^$' -bench WriteCPU -cpu 1,2 -benchtime 3x ./vfs/chunk
func BenchmarkWriteCPU(b *testing.B) {
	data := randomData(5, benchSize)
	for _, dest := range []string{"disk", "memory"} {
		b.Run(dest, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			var user, sys, wall time.Duration
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				// A new first byte per MiB: nothing deduplicates.
				for off := 0; off < len(data); off += mib {
					data[off] = byte(i + 1)
				}
				var s chunk.Store = chunk.NewMemory()
				dir := ""
				if dest == "disk" {
					dir = b.TempDir()
					d, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
					if err != nil {
						b.Fatal(err)
					}
					s = d
				}
				w := chunk.NewWriter(s, chunk.WriterOptions{})
				u0, s0 := cpuTime(b)
				t0 := time.Now()
				b.StartTimer()
				if _, _, err := w.Write(context.Background(), bytes.NewReader(data), -1); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				u1, s1 := cpuTime(b)
				user, sys = user+u1-u0, sys+s1-s0
				wall += time.Since(t0)
				if dir != "" {
					_ = os.RemoveAll(dir)
				}
				b.StartTimer()
			}
			gib := float64(b.N) * float64(len(data)) / (1 << 30)
			b.ReportMetric((user+sys).Seconds()/gib, "cpu-s/GiB")
			// The system part is mostly the copy into the page cache
			// and the syncs, which the store does, not the Writer.
			b.ReportMetric(user.Seconds()/gib, "user-s/GiB")
			b.ReportMetric(float64(b.N)*float64(len(data))/1e6/wall.Seconds(), "MB/s")
		})
	}
}
