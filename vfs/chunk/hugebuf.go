package chunk

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read buffers on huge pages. A direct read (readCold) pins the pages of
// the buffer it lands in and hands the device one segment per physically
// contiguous piece: 4 KiB pages make a 1 MiB read 256 segments, which the
// kernel pins one by one and the block layer splits into several requests,
// each with its own completion. A buffer on 2 MiB pages is one segment.
// Measured on this project's 2-core VM (O_DIRECT preads of 1 MiB from a
// file written directly, 512 MiB, three runs each, load 7): 0.24 to 0.27
// CPU s/GiB and 665 to 768 MB/s into heap buffers, 0.10 to 0.18 and 1,778
// to 1,866 MB/s into huge pages.
//
// The memory is mapped outside the Go heap, with madvise(MADV_HUGEPAGE)
// (transparent huge pages are commonly "madvise" only), and unmapped by a
// cleanup when the buffer's *[]byte is collected: a ReadPool drops
// buffers at a GC, as any sync.Pool does. Every user of a pooled buffer
// holds its *[]byte while it reads the bytes (Reader.held, fetch.bufs),
// which keeps the mapping. A pool buffer touches at most one more huge
// page than it holds bytes: a 1 MiB chunk costs 2 MiB of memory while
// it is read, not 1.

// hugeAlign is the huge page size mappings are aligned to; where pages
// are another size, or THP is off, the buffer is still correct, only
// made of small pages.
const hugeAlign = 2 << 20

// hugeSlice returns a slice of length n, aligned for direct reads (to
// hugeAlign), in memory the kernel is asked to back with huge pages; ok
// is false when mapping fails, and the caller allocates on the heap.
// The returned pointer owns the mapping: it is unmapped when the pointer
// is collected.
func hugeSlice(n int) (p *[]byte, ok bool) {
	m, err := unix.Mmap(-1, 0, n+hugeAlign, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, false
	}
	off := 0
	if r := int(uintptr(unsafe.Pointer(unsafe.SliceData(m))) % hugeAlign); r != 0 {
		off = hugeAlign - r
	}
	b := m[off : off+n : off+n]
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // a hint: EINVAL without THP
	p = &b
	runtime.AddCleanup(p, func(m []byte) { _ = unix.Munmap(m) }, m)
	return p, true
}
