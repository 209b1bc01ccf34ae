package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"testing"

	"berth/vfs/chunk"
)

// pinLog is a chunk.Pinner that counts pins and notes any Has of a chunk
// not pinned.
type pinLog struct {
	mu       sync.Mutex
	n        map[chunk.ID]int
	unpinned int // Has calls for a chunk not pinned
	negative bool
}

func (p *pinLog) Pin(id chunk.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[id]++
}

func (p *pinLog) Unpin(id chunk.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[id]--
	if p.n[id] < 0 {
		p.negative = true
	}
	if p.n[id] == 0 {
		delete(p.n, id)
	}
}

// pinCheckStore fails the test's check when the writer asks for a chunk
// it has not pinned first.
type pinCheckStore struct {
	chunk.Store
	pins *pinLog
}

func (s pinCheckStore) Has(ctx context.Context, id chunk.ID) (bool, error) {
	s.pins.mu.Lock()
	if s.pins.n[id] == 0 {
		s.pins.unpinned++
	}
	s.pins.mu.Unlock()
	return s.Store.Has(ctx, id)
}

// pinCheckBatcher is a pinCheckStore over a store that batches.
type pinCheckBatcher struct {
	pinCheckStore
	b chunk.Batcher
}

func (s pinCheckBatcher) NewBatch() chunk.Batch { return s.b.NewBatch() }

// waitReader reads r, then waits until ready is closed before it fails:
// the new chunks read so far are staged or stored by then.
type waitReader struct {
	r     io.Reader
	ready <-chan struct{}
}

func (w *waitReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	if err == io.EOF {
		<-w.ready
		return n, errBoom
	}
	return n, err
}

// batchless hides a store's Batcher, so Write takes the Put path.
type batchless struct{ chunk.Store }

// TestWriterPins: whatever the outcome of a Write, the chunks pinned when
// it returns are exactly those of the refs it returned, once per ref, and
// it pinned each chunk before asking the store for it.
func TestWriterPins(t *testing.T) {
	half := randomData(21, 6*mib)
	twice := append(bytes.Clone(half), half...)
	// Half found in the store, half new: the failure comes with new
	// chunks staged or stored.
	mixed := append(bytes.Clone(half), randomData(22, 6*mib)...)
	cases := []struct {
		name  string
		store func(t *testing.T) chunk.Store
		src   func(ready <-chan struct{}) io.Reader
		fails bool
	}{
		{"disk", func(t *testing.T) chunk.Store { return newDisk(t) },
			func(<-chan struct{}) io.Reader { return bytes.NewReader(twice) }, false},
		{"disk read error", func(t *testing.T) chunk.Store { return newDisk(t) },
			func(ready <-chan struct{}) io.Reader { return &waitReader{bytes.NewReader(mixed), ready} }, true},
		{"put read error", func(t *testing.T) chunk.Store { return batchless{newDisk(t)} },
			func(ready <-chan struct{}) io.Reader { return &waitReader{bytes.NewReader(mixed), ready} }, true},
		{"put error", func(t *testing.T) chunk.Store { return failingStore{chunk.NewMemory()} },
			func(<-chan struct{}) io.Reader { return bytes.NewReader(mixed) }, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pins := &pinLog{n: map[chunk.ID]int{}}
			inner := c.store(t)
			var store chunk.Store = pinCheckStore{inner, pins}
			if b, ok := inner.(chunk.Batcher); ok {
				store = pinCheckBatcher{pinCheckStore{inner, pins}, b}
			}
			ready := make(chan struct{})
			var once sync.Once
			w := chunk.NewWriter(store, chunk.WriterOptions{Pins: pins, Observer: func(stored bool, _, _ int) {
				if stored {
					once.Do(func() { close(ready) })
				}
			}})
			// Half the stream is in the store already: the second Write
			// finds those chunks.
			first, _, err := w.Write(context.Background(), bytes.NewReader(half), -1)
			if err != nil && !c.fails {
				t.Fatal(err)
			}
			for _, r := range first {
				pins.Unpin(r.ID)
			}
			ready = make(chan struct{})
			once = sync.Once{}
			refs, _, err := w.Write(context.Background(), c.src(ready), -1)
			if (err != nil) != c.fails {
				t.Fatalf("Write: %v", err)
			}
			if c.fails && !errors.Is(err, errBoom) {
				t.Fatalf("Write: %v, want errBoom", err)
			}
			want := map[chunk.ID]int{}
			for _, r := range refs {
				want[r.ID]++
			}
			pins.mu.Lock()
			defer pins.mu.Unlock()
			if pins.negative {
				t.Error("a chunk was unpinned more often than pinned")
			}
			if pins.unpinned > 0 {
				t.Errorf("%d chunks looked up before they were pinned", pins.unpinned)
			}
			if len(pins.n) != len(want) {
				t.Errorf("%d chunks pinned, %d returned", len(pins.n), len(want))
			}
			for id, n := range want {
				if pins.n[id] != n {
					t.Errorf("chunk %s pinned %d times, returned %d", id, pins.n[id], n)
				}
			}
		})
	}
}
