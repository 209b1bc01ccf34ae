package chunk_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"berth/vfs/chunk"
)

// BenchmarkReadCPU reads a 256 MiB random file, stored through a Writer
// in a Disk store, from the page cache (each op the whole file, after
// two unmeasured reads: the first of a fresh blob is direct, the second
// fills the cache), as a download of a file read often does. It reports
// the process CPU seconds per GiB: what the server spends on a large
// download besides TLS and the socket (issue 15, item 2). "floor" reads
// the same blob files with one pread each into one buffer, which is the
// least any server reading from the page cache pays.
//
//	go test -run '^$' -bench ReadCPU -benchtime 4x ./vfs/chunk
func BenchmarkReadCPU(b *testing.B) {
	data := randomData(7, benchSize)
	d, pool, refs := writeBenchFile(b, filepath.Join(b.TempDir(), "chunks"), data)
	read := func() {
		r := pool.NewReader(context.Background(), d, refs)
		defer r.Close()
		if n, err := r.CopyTo(io.Discard, int64(len(data))); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
	}
	read()
	read()
	b.Run("reader", func(b *testing.B) {
		measureCPU(b, int64(len(data)), read)
	})
	b.Run("floor", func(b *testing.B) {
		buf := make([]byte, 8<<20)
		measureCPU(b, int64(len(data)), func() {
			for _, ref := range refs {
				f, err := os.Open(d.Path(ref.ID))
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.ReadAt(buf[:ref.Size+1], 0); err != nil && err != io.EOF {
					b.Fatal(err)
				}
				f.Close()
			}
		})
	})
}

// measureCPU runs op b.N times and reports MB/s and the process CPU
// seconds per GiB of size bytes an op moves.
func measureCPU(b *testing.B, size int64, op func()) {
	b.SetBytes(size)
	u0, s0 := cpuTime(b)
	t0 := time.Now()
	for b.Loop() {
		op()
	}
	u1, s1 := cpuTime(b)
	gib := float64(b.N) * float64(size) / (1 << 30)
	b.ReportMetric((u1-u0+s1-s0).Seconds()/gib, "cpu-s/GiB")
	b.ReportMetric((u1-u0).Seconds()/gib, "user-s/GiB")
	b.ReportMetric(float64(b.N)*float64(size)/1e6/time.Since(t0).Seconds(), "MB/s")
}

// BenchmarkReadCPUCold reads a 256 MiB random file just written through a
// Writer, so every chunk comes off the device by a direct read, as the
// first download of a fresh upload does (each op opens the store afresh,
// which forgets the blobs it read directly). The consumer seals every 16
// KiB with AES-GCM, as a TLS connection does, so that where the chunk's
// bytes are (memory or the CPU's cache) when it is sent shows. It reports
// the process CPU seconds per GiB and MB/s (issue 15, item 2).
// "text" reads a compressible file (each chunk a sealed blob decoded
// into a buffer of its own), "random" an incompressible one.
//
//	go test -run '^$' -bench ReadCPUCold -benchtime 4x ./vfs/chunk
func BenchmarkReadCPUCold(b *testing.B) {
	b.Run("random", func(b *testing.B) { readCPUCold(b, randomData(8, benchSize)) })
	b.Run("text", func(b *testing.B) { readCPUCold(b, textData(8, benchSize)) })
}

func readCPUCold(b *testing.B, data []byte) {
	dir := filepath.Join(b.TempDir(), "chunks")
	_, pool, refs := writeBenchFile(b, dir, data)
	block, err := aes.NewCipher(make([]byte, 16))
	if err != nil {
		b.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		b.Fatal(err)
	}
	sealer := &sealWriter{gcm: gcm, nonce: make([]byte, gcm.NonceSize())}
	measureCPU(b, int64(len(data)), func() {
		d, err := chunk.NewDisk(dir)
		if err != nil {
			b.Fatal(err)
		}
		r := pool.NewReader(context.Background(), d, refs)
		defer r.Close()
		if n, err := r.CopyTo(sealer, int64(len(data))); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
	})
}

// sealWriter seals what it is given in 16 KiB records and drops them, the
// CPU work of a TLS connection's writes.
type sealWriter struct {
	gcm   cipher.AEAD
	nonce []byte
	out   []byte
}

func (s *sealWriter) Write(p []byte) (int, error) {
	for off := 0; off < len(p); off += 16 << 10 {
		rec := p[off:min(len(p), off+16<<10)]
		s.out = s.gcm.Seal(s.out[:0], s.nonce, rec, nil)
	}
	return len(p), nil
}

// writeBenchFile stores data through a Writer in a Disk store in dir, with
// a ReadPool that knows its blobs as verified, as the daemon's does.
func writeBenchFile(b *testing.B, dir string, data []byte) (*chunk.Disk, *chunk.ReadPool, []chunk.Ref) {
	d, err := chunk.NewDisk(dir)
	if err != nil {
		b.Fatal(err)
	}
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
	w := chunk.NewWriter(d, chunk.WriterOptions{Verified: pool})
	refs, _, err := w.Write(context.Background(), bytes.NewReader(data), -1)
	if err != nil {
		b.Fatal(err)
	}
	return d, pool, refs
}
