package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
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
		t.Run(tc.name, func(t *testing.T) {
			a := newBlobArena(defaultBlobBuffers)
			tc.run(t, a)
			if a.inUse != 0 {
				t.Fatalf("%d pages in use after every blob is freed", a.inUse)
			}
		})
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

// flakyStore fails about one Put in fail: a Write whose Put fails ends with
// blobs of its own still in flight.
type flakyStore struct {
	Store
	fail uint64
	n    atomic.Uint64
}

var errFlaky = errors.New("flaky store")

func (s *flakyStore) Put(ctx context.Context, id ID, blob []byte) error {
	if s.n.Add(1)%s.fail == 0 {
		return errFlaky
	}
	return s.Store.Put(ctx, id, blob)
}

// cancelAfter reads r and ends its Write's context after n bytes.
type cancelAfter struct {
	r      io.Reader
	n      int
	cancel context.CancelFunc
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		c.cancel()
		return 0, context.Canceled
	}
	m, err := c.r.Read(p[:min(len(p), c.n)])
	c.n -= m
	return m, err
}

// stressData is n bytes from seed: random, text, or random with runs of
// text, so that blobs are raw, sealed and both; a few seeds only, so that
// Writes share chunks (dedup, the same id Put twice at once).
func stressData(rng *rand.Rand, n int) []byte {
	seed := rng.Uint64N(6)
	src := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	words := [][]byte{[]byte("arena "), []byte("page "), []byte("blob "), []byte("shrink "), []byte("o_direct ")}
	for i := 0; i < n; {
		if seed%3 == 0 || (seed%3 == 2 && src.IntN(4) == 0) {
			run := min(n-i, 1+src.IntN(64<<10))
			for j := range run {
				b[i+j] = byte(src.Uint32())
			}
			i += run
			continue
		}
		i += copy(b[i:], words[src.IntN(len(words))])
	}
	return b
}

// stressSize: mostly tiny and small files, some of several chunks.
func stressSize(rng *rand.Rand) int {
	switch rng.IntN(10) {
	case 0, 1:
		return rng.IntN(1 << 10)
	case 2, 3, 4:
		return rng.IntN(256 << 10)
	case 5, 6, 7:
		return rng.IntN(3 << 20)
	default:
		return rng.IntN(12 << 20)
	}
}

// TestWriterArenaStress runs many Writes at once through one Writer, of
// random sizes and data, some cancelled part way and some failed by their
// store, over a disk (batches, direct writes) and a flaky store (Puts),
// with the arena at its default and its least size, and with more
// workers than cores. Every Write ends,
// every stored chunk reads back checked and, for a Write that succeeded,
// byte for byte; no segment buffer is held (Held); and the arena ends
// with no page in use, handed to its pool.
func TestWriterArenaStress(t *testing.T) {
	writers, rounds := 16, 4
	if testing.Short() {
		writers, rounds = 8, 2
	}
	disk := func(t *testing.T) Store {
		d, err := NewDisk(filepath.Join(t.TempDir(), "chunks"))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		store   func(t *testing.T) Store
		arena   int
		workers int // zero: one a core
	}{
		{"disk", disk, 0, 0},
		{"disk, least arena", disk, 1, 0},
		{"flaky puts, least arena", func(t *testing.T) Store {
			return &flakyStore{Store: NewMemory(), fail: 97}
		}, 1, 0},
		// Many workers encode at once, each probing and sealing in
		// its own blob's pages (encodeInto), none in a buffer of the
		// worker's: a chunk sealed with another's probe or frame
		// fails Verify below.
		{"disk, many workers", disk, 0, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t)
			w := NewWriter(s, WriterOptions{blobBuffers: tc.arena, Workers: tc.workers})
			var g errgroup.Group
			for i := range writers {
				g.Go(func() error {
					rng := rand.New(rand.NewPCG(uint64(i), 27))
					var errs []error
					for range rounds {
						errs = append(errs, stressWrite(w, s, rng))
					}
					return errors.Join(errs...)
				})
			}
			if err := g.Wait(); err != nil {
				t.Error(err)
			}
			if h := w.Held(); h != 0 {
				t.Errorf("the segments hold %d bytes after every Write ended", h)
			}
			a := w.arena
			a.mu.Lock()
			defer a.mu.Unlock()
			if a.inUse != 0 {
				t.Errorf("%d arena pages in use after every Write ended", a.inUse)
			}
			for i, word := range a.used {
				if word != 0 {
					t.Errorf("arena pages %d to %d: bits %#x still set", 64*i, 64*i+63, word)
				}
			}
			if a.buf != nil {
				t.Error("the arena was not handed to its pool once idle")
			}
		})
	}
}

// stressWrite writes one random file, maybe cancelled part way, and
// checks what the store holds of it.
func stressWrite(w *Writer, s Store, rng *rand.Rand) error {
	data := stressData(rng, stressSize(rng))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var src io.Reader = bytes.NewReader(data)
	cancelled := rng.IntN(3) == 0
	if cancelled {
		// Half at a byte of the stream, half at a moment: then the
		// workers are often waiting for room or for a turn to encode.
		if rng.IntN(2) == 0 {
			src = &cancelAfter{r: src, n: rng.IntN(len(data) + 1), cancel: cancel}
		} else {
			stop := time.AfterFunc(time.Duration(rng.IntN(20_000))*time.Microsecond, cancel)
			defer stop.Stop()
		}
	}
	refs, size, err := w.Write(ctx, src, -1)
	for _, ref := range refs {
		if ref.ID == (ID{}) {
			continue
		}
		blob, gerr := s.Get(context.Background(), ref.ID)
		if err != nil && errors.Is(gerr, ErrNotFound) {
			// A failed Write's refs are of chunks that may be in the
			// store: a Commit cancelled before its renames left none.
			continue
		}
		if gerr != nil {
			return fmt.Errorf("chunk %s of a Write (err %v): %w", ref.ID, err, gerr)
		}
		if verr := Verify(ref.ID, blob, nil); verr != nil {
			return fmt.Errorf("chunk of a Write (err %v): %w", err, verr)
		}
	}
	switch {
	case err == nil:
		// Not cancelled, or the whole file was read before the cancel
		// came.
		if size != int64(len(data)) {
			return fmt.Errorf("Write of %d bytes: size %d", len(data), size)
		}
		r := NewReader(context.Background(), s, refs)
		got, rerr := io.ReadAll(r)
		r.Close()
		if rerr != nil || !bytes.Equal(got, data) {
			return fmt.Errorf("read back %d bytes: %v, equal %v", len(data), rerr, bytes.Equal(got, data))
		}
	case errors.Is(err, context.Canceled) && cancelled, errors.Is(err, errFlaky):
	default:
		return fmt.Errorf("Write of %d bytes (cancelled %v): %w", len(data), cancelled, err)
	}
	return nil
}
