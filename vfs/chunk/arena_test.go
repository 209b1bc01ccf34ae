package chunk

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func arenaRandom(n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{1}).Read(b)
	return b
}

// TestBlobArena holds the Writer's blob arena to what it promises: blobs
// cut first fit from the lowest pages, aligned for direct writes, pages
// given back by shrink and free, an alloc that waits for room woken by a
// free (or failed by its context), and nothing kept once idle. A bug
// found later becomes a row here.
func TestBlobArena(t *testing.T) {
	const page = arenaPage
	first := func(a *blobArena, b []byte) int {
		a.mu.Lock()
		defer a.mu.Unlock()
		i, _, ok := a.extent(b)
		if !ok {
			t.Fatal("a blob not from the arena")
		}
		return i
	}
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, a *blobArena)
	}{
		{"lowest pages first, aligned", func(t *testing.T, a *blobArena) {
			x, _ := a.alloc(context.Background(), page+1) // two pages
			y, _ := a.alloc(context.Background(), 10)
			if first(a, x) != 0 || first(a, y) != 2 || !isAligned(x) || !isAligned(y) {
				t.Fatalf("blobs at pages %d and %d (aligned %v %v), want 0 and 2", first(a, x), first(a, y), isAligned(x), isAligned(y))
			}
			if len(x) != page+1 || cap(x) != 2*page {
				t.Fatalf("len %d cap %d, want %d and %d", len(x), cap(x), page+1, 2*page)
			}
			a.free(x)
			z, _ := a.alloc(context.Background(), page)
			if first(a, z) != 0 {
				t.Fatalf("after a free, the next blob at page %d, want 0", first(a, z))
			}
			a.free(y)
			a.free(z)
			if a.inUse != 0 {
				t.Fatalf("%d pages in use after every blob is freed", a.inUse)
			}
		}},
		{"shrink gives the pages past it back", func(t *testing.T, a *blobArena) {
			x, _ := a.alloc(context.Background(), 4*page)
			x = a.shrink(x, page/2)
			if a.inUse != 1 || len(x) != page/2 || cap(x) != page {
				t.Fatalf("after shrink: %d pages in use, len %d cap %d", a.inUse, len(x), cap(x))
			}
			y, _ := a.alloc(context.Background(), page)
			if first(a, y) != 1 {
				t.Fatalf("the next blob at page %d, want 1, where x's pages were given back", first(a, y))
			}
			a.free(x)
			a.free(y)
			if a.inUse != 0 {
				t.Fatalf("%d pages in use after every blob is freed", a.inUse)
			}
		}},
		{"a full arena waits for a free", func(t *testing.T, a *blobArena) {
			x, _ := a.alloc(context.Background(), a.pages*page)
			got := make(chan []byte)
			go func() {
				b, err := a.alloc(context.Background(), page)
				if err != nil {
					t.Error(err)
				}
				got <- b
			}()
			select {
			case <-got:
				t.Fatal("alloc did not wait for room")
			case <-time.After(50 * time.Millisecond):
			}
			a.free(x)
			a.free(<-got)
		}},
		{"a wait ends with its context", func(t *testing.T, a *blobArena) {
			x, _ := a.alloc(context.Background(), a.pages*page)
			defer a.free(x)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := a.alloc(ctx, page); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("alloc in a full arena, context ended: %v", err)
			}
		}},
		{"larger than the arena: a buffer of its own", func(t *testing.T, a *blobArena) {
			x, err := a.alloc(context.Background(), a.pages*page+1)
			if err != nil || len(x) != a.pages*page+1 || a.inUse != 0 {
				t.Fatalf("len %d, %d pages in use, %v", len(x), a.inUse, err)
			}
			a.free(x) // ignored
		}},
		{"idle keeps nothing", func(t *testing.T, a *blobArena) {
			x, _ := a.alloc(context.Background(), page)
			a.idle()
			if a.buf == nil {
				t.Fatal("idle let go of the arena while a blob was out")
			}
			a.free(x)
			a.idle()
			if a.buf != nil {
				t.Fatal("an idle arena keeps its buffer")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newBlobArena(DefaultBlobBuffers)) })
	}
}

// TestWriterBlobsInFlight: a Write's blobs, encoded or raw copies, come
// from the arena and all go back, whatever the data, and the stored
// chunks read back as written.
func TestWriterBlobsInFlight(t *testing.T) {
	for _, data := range map[string][]byte{
		"random": arenaRandom(20 << 20),
		"text":   bytes.Repeat([]byte("the blobs of a write come from one arena; "), 500_000),
	} {
		s := NewMemory()
		w := NewWriter(s, WriterOptions{SegmentSize: maxChunkSize})
		refs, size, err := w.Write(context.Background(), bytes.NewReader(data), -1)
		if err != nil || size != int64(len(data)) {
			t.Fatalf("Write: %d bytes, %v", size, err)
		}
		if w.arena.inUse != 0 {
			t.Fatalf("%d arena pages in use after the Write", w.arena.inUse)
		}
		r := NewReader(context.Background(), s, refs)
		got := make([]byte, len(data))
		if _, err := r.ReadAt(got, 0); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, data))
		}
		r.Close()
	}
}
