package chunk

import (
	"runtime"
	"testing"
)

// TestHugeSlice: a pool buffer on huge pages is as long as asked, aligned
// for direct reads, writable to its end, and its mapping goes when it is
// collected (the cleanup must not crash the process).
func TestHugeSlice(t *testing.T) {
	for _, n := range []int{dioAlign, 1 << 20, (1 + maxChunkSize + dioAlign - 1) &^ (dioAlign - 1)} {
		p, ok := hugeSlice(n)
		if !ok {
			t.Skip("mmap refused: buffers come from the heap")
		}
		b := *p
		if len(b) != n || cap(b) != n || !isAligned(b) {
			t.Fatalf("n=%d: len %d cap %d aligned %v", n, len(b), cap(b), isAligned(b))
		}
		b[0], b[n-1] = 1, 2
		if b[0]+b[n-1] != 3 {
			t.Fatal("lost a write")
		}
		runtime.KeepAlive(p)
	}
	runtime.GC()
	runtime.GC()
}
