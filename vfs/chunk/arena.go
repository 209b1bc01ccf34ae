package chunk

import (
	"context"
	"sync"
	"unsafe"
)

// The blobs a Writer stores are cut from one arena of
// WriterOptions.blobBuffers bytes that all its Writes share, each blob
// as large as it is (in arenaPage steps), the lowest free pages first.
//
// Before, each blob had a buffer of its own, grown to the largest chunk
// it had held: new ones when a larger chunk came (some 30 times in a
// 256 MiB write), dropped between uploads and made again. A 1 GiB WebDAV
// PUT into a fresh daemon took 13,600 minor faults (53 MiB of fresh
// memory: the garbage filled the heap up to the soft memory limit), and
// a first touch of a page is costly on this project's VMs; the PUTs
// after it took a few hundred to two thousand. Cut from the lowest pages
// of one arena, the blobs in flight touch no more memory than the most
// of them in flight at once, and make no garbage; the arena bounds what
// all uploads' blobs hold, whatever their number.
const (
	// arenaPage is the arena's unit: blobs start on one, so at the
	// alignment direct writes need.
	arenaPage = 64 << 10
	// defaultBlobBuffers is the arena's size: room for four or five
	// chunks of the average size on their way to the store, as many as
	// one Write keeps in flight (putDepth) besides the one being
	// encoded. A store that asks for more Puts at once (Parallel) gets
	// it in proportion.
	defaultBlobBuffers = 6 << 20
)

// maxBlob is the largest blob a Writer makes: a sealed S2 block of a
// maximal chunk before it is found to save nothing.
var maxBlob = maxBlobLen(maxChunkSize)

// blobArena hands out blob buffers from one aligned buffer, first fit
// from the lowest page. It is safe for concurrent use.
type blobArena struct {
	pages int // the arena's size in arenaPage

	// order is held by the one alloc that waits for room, so that a
	// large blob is not kept waiting by smaller ones that fit sooner.
	order sync.Mutex

	mu      sync.Mutex
	buf     []byte   // nil until needed, and while idle (then in spare)
	used    []uint64 // a bit per page in use
	inUse   int      // pages in use
	waiting bool     // an alloc waits for freed (guarded by mu)
	freed   chan struct{}
	// spare keeps buf between Writes, for the next upload soon after,
	// but not for an idle server (see bufList).
	spare sync.Pool
}

func newBlobArena(size int) *blobArena {
	pages := max((size+arenaPage-1)/arenaPage, pagesFor(maxBlob))
	return &blobArena{pages: pages, used: make([]uint64, (pages+63)/64)}
}

func pagesFor(n int) int { return (n + arenaPage - 1) / arenaPage }

// alloc returns a buffer of length n (at most maxBlob) from the arena,
// waiting for room while it has none; it fails only when ctx ends. Give
// it back with free, with the start and capacity alloc gave it (shrink
// keeps them right).
func (a *blobArena) alloc(ctx context.Context, n int) ([]byte, error) {
	k := pagesFor(max(n, 1))
	if k > a.pages {
		// Larger than any blob a Writer makes: not from the arena.
		return alignedSlice(n), nil
	}
	a.order.Lock()
	defer a.order.Unlock()
	for {
		a.mu.Lock()
		if a.buf == nil {
			if b, ok := a.spare.Get().(*[]byte); ok {
				a.buf = *b
			} else {
				a.buf = alignedSlice(a.pages * arenaPage)
			}
		}
		if i := a.find(k); i >= 0 {
			a.mark(i, k, true)
			a.inUse += k
			b := a.buf[i*arenaPage : i*arenaPage+n : (i+k)*arenaPage]
			a.mu.Unlock()
			return b, nil
		}
		a.waiting = true
		if a.freed == nil {
			a.freed = make(chan struct{})
		}
		ch := a.freed
		a.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
}

// find returns the first of k free pages in a row, or -1. a.mu is held.
func (a *blobArena) find(k int) int {
	run := 0
	for i := range a.pages {
		if a.used[i/64]&(1<<(i%64)) != 0 {
			run = 0
			continue
		}
		if run++; run == k {
			return i - k + 1
		}
	}
	return -1
}

// mark sets or clears the bits of pages [i, i+k). a.mu is held.
func (a *blobArena) mark(i, k int, on bool) {
	for j := i; j < i+k; j++ {
		if on {
			a.used[j/64] |= 1 << (j % 64)
		} else {
			a.used[j/64] &^= 1 << (j % 64)
		}
	}
}

// extent returns the first page and the page count of b, a buffer alloc
// gave; ok is false for one not from the arena.
func (a *blobArena) extent(b []byte) (i, k int, ok bool) {
	if cap(b) == 0 || a.buf == nil {
		return 0, 0, false
	}
	off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(a.buf))))
	if off < 0 || off >= len(a.buf) || off%arenaPage != 0 {
		return 0, 0, false
	}
	return off / arenaPage, cap(b) / arenaPage, true
}

// shrink returns b cut to n bytes, its pages past them given back.
func (a *blobArena) shrink(b []byte, n int) []byte {
	keep := pagesFor(max(n, 1))
	a.mu.Lock()
	defer a.mu.Unlock()
	i, k, ok := a.extent(b)
	if !ok || keep >= k {
		return b[:n]
	}
	a.release(i+keep, k-keep)
	return b[: n : keep*arenaPage]
}

// free gives b's pages back.
func (a *blobArena) free(b []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if i, k, ok := a.extent(b); ok {
		a.release(i, k)
	}
}

// release clears k pages from i and wakes an alloc waiting. a.mu is held.
func (a *blobArena) release(i, k int) {
	a.mark(i, k, false)
	a.inUse -= k
	if a.waiting {
		a.waiting = false
		close(a.freed)
		a.freed = nil
	}
}

// idle hands the arena to its pool when no blob is out: no Write is
// running.
func (a *blobArena) idle() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.buf == nil || a.inUse != 0 {
		return
	}
	b := a.buf
	a.buf = nil
	a.spare.Put(&b)
}
