package chunk_test

import (
	"bytes"
	"context"
	"fmt"
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

// BenchmarkWriteCPU writes 256 MiB random streams through a Writer into
// a Disk store (fsynced) or into memory, and reports MB/s and the process
// CPU seconds spent per GiB (user plus system, from getrusage, so the
// kernel's part counts; user-s/GiB is the part in user space). Run with -cpu 1,2 (and 16 where a
// machine has them): one stream should use the cores it is given.
//
//	go test -run '^$' -bench WriteCPU -cpu 1,2 -benchtime 3x ./vfs/chunk
func BenchmarkWriteCPU(b *testing.B) {
	data := randomData(5, benchSize)
	for _, dest := range []string{"disk", "memory"} {
		b.Run(dest, func(b *testing.B) {
			var s chunk.Store = chunk.NewMemory()
			if dest == "disk" {
				d, err := chunk.NewDisk(filepath.Join(b.TempDir(), "chunks"))
				if err != nil {
					b.Fatal(err)
				}
				s = d
			}
			// One Writer and one store for the run, as a daemon keeps
			// them: the first Write (not measured) fills the Writer's
			// buffer pools, as the first upload after a start does. A
			// Writer made per Write faulted in some 55 MiB of fresh
			// buffers each time, a tenth of the CPU measured, which no
			// later upload pays.
			w := chunk.NewWriter(s, chunk.WriterOptions{})
			write := func(mark byte) {
				// A new first byte per MiB: nothing deduplicates.
				for off := 0; off < len(data); off += mib {
					data[off] = mark
				}
				if _, _, err := w.Write(context.Background(), bytes.NewReader(data), -1); err != nil {
					b.Fatal(err)
				}
			}
			write(0xff)
			// The system part of the CPU is mostly the file creations
			// and syncs, and page faults: the disk store writes large
			// blobs with O_DIRECT, past the page cache.
			timedWrites(b, int64(len(data)), func() {
				if dest == "memory" {
					clearStore(b, s)
				}
			}, func(i int) { write(byte(i)) })
		})
	}
}

// BenchmarkWriteFileSizes writes 256 MiB of random data through one
// Writer into memory as files of one size each, and reports the process
// CPU seconds per GiB and MB/s: what a sync of many photos or documents
// costs next to one large stream. Files up to a few MiB are read in the
// buffers a stream's first segment grows through (segment.go); those of
// 1 to 8 MiB show what the growth copies cost where they weigh most.
//
//	go test -run '^$' -bench WriteFileSizes -benchtime 3x ./vfs/chunk
func BenchmarkWriteFileSizes(b *testing.B) {
	data := randomData(7, benchSize)
	for _, size := range []int{300 << 10, mib, 2 * mib, 3 * mib, 4 * mib, 5 * mib, 6 * mib, 8 * mib, benchSize} {
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
			timedWrites(b, int64(len(data)/size*size), func() { clearStore(b, s) }, func(i int) { write(byte(i)) })
		})
	}
}

// timedWrites runs write(i) b.N times, each of n bytes, with prepare
// before each outside the measure, and reports the process CPU seconds
// per GiB (user plus system, from getrusage, so the kernel's part
// counts), the user part alone, and MB/s.
func timedWrites(b *testing.B, n int64, prepare func(), write func(i int)) {
	b.SetBytes(n)
	b.ResetTimer()
	var user, sys, wall time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		prepare()
		u0, s0 := cpuTime(b)
		t0 := time.Now()
		b.StartTimer()
		write(i)
		b.StopTimer()
		u1, s1 := cpuTime(b)
		user, sys = user+u1-u0, sys+s1-s0
		wall += time.Since(t0)
		b.StartTimer()
	}
	gib := float64(b.N) * float64(n) / (1 << 30)
	b.ReportMetric((user+sys).Seconds()/gib, "cpu-s/GiB")
	b.ReportMetric(user.Seconds()/gib, "user-s/GiB")
	b.ReportMetric(float64(b.N)*float64(n)/1e6/wall.Seconds(), "MB/s")
}

// clearStore deletes every chunk of s, so that a benchmark writing into
// memory stays within it.
func clearStore(b *testing.B, s chunk.Store) {
	var ids []chunk.ID
	ctx := context.Background()
	if err := s.Walk(ctx, func(id chunk.ID) error { ids = append(ids, id); return nil }); err != nil {
		b.Fatal(err)
	}
	for _, id := range ids {
		if err := s.Delete(ctx, id); err != nil {
			b.Fatal(err)
		}
	}
}
