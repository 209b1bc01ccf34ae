package chunk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

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
// with the arena at its default and its least size. Every Write ends,
// every stored chunk reads back checked and, for a Write that succeeded,
// byte for byte; and the arena ends with no page in use, handed to its
// pool.
func TestWriterArenaStress(t *testing.T) {
	writers, rounds := 16, 4
	if testing.Short() {
		writers, rounds = 8, 2
	}
	for _, tc := range []struct {
		name  string
		store func(t *testing.T) Store
		arena int
	}{
		{"disk", func(t *testing.T) Store {
			d, err := NewDisk(filepath.Join(t.TempDir(), "chunks"))
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, 0},
		{"disk, least arena", func(t *testing.T) Store {
			d, err := NewDisk(filepath.Join(t.TempDir(), "chunks"))
			if err != nil {
				t.Fatal(err)
			}
			return d
		}, 1},
		{"flaky puts, least arena", func(t *testing.T) Store {
			return &flakyStore{Store: NewMemory(), fail: 97}
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.store(t)
			w := NewWriter(s, WriterOptions{BlobBuffers: tc.arena})
			var wg sync.WaitGroup
			errs := make(chan error, writers*rounds)
			for g := range writers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(g), 27))
					for range rounds {
						errs <- stressWrite(w, s, rng)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
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
	case err == nil && cancelled:
		// The whole file was read before the cancel came.
		fallthrough
	case err == nil:
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
