package chunk_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

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
			timedWrites(b, int64(len(data)/size*size), func() { clearStore(b, s) }, func(i int) { write(byte(i)) })
		})
	}
}
