package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs/chunk"
)

// TestParallel holds the cases of stores that want many calls in flight
// (chunk.Parallel, an object store): how the wish is found through
// wrappers, and what the Writer, the Reader and Missing make of it.
func TestParallel(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"FoundThroughWrappers", parallelismThroughWrappers},
		{"Missing", missing},
		{"WriterPutsInFlight", writerPutsInFlight},
		{"WriterPutErrorLeavesNoDangling", writerParallelPutError},
		{"ReaderFetchesAhead", readerFetchesParallelismAhead},
	} {
		t.Run(tc.name, tc.run)
	}
}

// remote is a store that says it wants n calls in flight, and whose
// Puts and Hases take a while, as over a network; it records the most
// Puts it had in flight at once. failAfter > 0 fails every Put after
// that many. gate > 0 holds each Put until gate Puts have been in flight
// at once (or 5 s have passed), so that a test of how many a Writer
// keeps going does not depend on how fast the machine hashes.
type remote struct {
	chunk.Store
	n         int
	delay     time.Duration
	failAfter int64
	gate      int64

	puts, inFlight, most atomic.Int64
	// starved counts Puts that waited out the gate's deadline: fewer
	// than gate Puts ever ran at once.
	starved atomic.Int64
}

func (r *remote) Parallelism() int { return r.n }

func (r *remote) Has(ctx context.Context, id chunk.ID) (bool, error) {
	time.Sleep(r.delay / 4)
	return r.Store.Has(ctx, id)
}

func (r *remote) Put(ctx context.Context, id chunk.ID, blob []byte) error {
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for {
		m := r.most.Load()
		if n <= m || r.most.CompareAndSwap(m, n) {
			break
		}
	}
	for deadline := time.Now().Add(5 * time.Second); r.most.Load() < r.gate; {
		if time.Now().After(deadline) {
			r.starved.Add(1)
			break
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(r.delay)
	if r.failAfter > 0 && r.puts.Add(1) > r.failAfter {
		return errBoom
	}
	return r.Store.Put(ctx, id, blob)
}

func parallelismThroughWrappers(t *testing.T) {
	mem := chunk.NewMemory()
	r := &remote{Store: mem, n: 12}
	for _, tc := range []struct {
		name  string
		store chunk.Store
		want  int
	}{
		{"local", mem, 0},
		{"bare", r, 12},
		{"retry(limit)", chunk.NewRetry(chunk.NewLimit(r, 32), chunk.RetryOptions{}), 12},
		{"retry(limit(local))", chunk.NewRetry(chunk.NewLimit(mem, 32), chunk.RetryOptions{}), 0},
	} {
		if got := chunk.ParallelismOf(tc.store); got != tc.want {
			t.Errorf("%s: ParallelismOf = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// hasError fails Has for one id.
type hasError struct {
	*remote
	bad chunk.ID
}

func (h hasError) Has(ctx context.Context, id chunk.ID) (bool, error) {
	if id == h.bad {
		return false, errBoom
	}
	return h.remote.Has(ctx, id)
}

func missing(t *testing.T) {
	ctx := context.Background()
	mem := chunk.NewMemory()
	var ids []chunk.ID
	for i := range 40 {
		b := []byte{byte(i)}
		id := chunk.Sum(b)
		ids = append(ids, id)
		if i != 17 && i != 30 {
			if err := mem.Put(ctx, id, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, s := range []chunk.Store{mem, &remote{Store: mem, n: 8, delay: time.Millisecond}} {
		if id, ok, err := chunk.Missing(ctx, s, ids); err != nil || !ok || id != ids[17] {
			t.Errorf("%T: Missing = %s, %v, %v; want the first missing, %s", s, id, ok, err, ids[17])
		}
		if _, ok, err := chunk.Missing(ctx, s, ids[:17]); err != nil || ok {
			t.Errorf("%T: Missing of present ids = %v, %v; want none", s, ok, err)
		}
		if _, ok, err := chunk.Missing(ctx, s, nil); err != nil || ok {
			t.Errorf("%T: Missing of no ids = %v, %v", s, ok, err)
		}
	}
	s := hasError{&remote{Store: mem, n: 8}, ids[5]}
	if _, _, err := chunk.Missing(ctx, s, ids); !errors.Is(err, errBoom) {
		t.Errorf("Missing with a failing Has = %v, want errBoom", err)
	}
}

// writerPutsInFlight: on a Parallel store a Write keeps more Puts going
// than the disk's few, up to the store's wish, and the file reads back.
func writerPutsInFlight(t *testing.T) {
	r := &remote{Store: chunk.NewMemory(), n: 8, delay: time.Millisecond, gate: 5}
	data := randomData(31, 24*mib)
	refs := write(t, chunk.NewWriter(r, chunk.WriterOptions{Workers: 2}), data)
	if got := readAll(t, r, refs); !bytes.Equal(got, data) {
		t.Fatal("read back differs")
	}
	if m := r.most.Load(); m <= 4 || m > int64(r.n) {
		t.Errorf("at most %d Puts in flight, want more than 4 and at most %d", m, r.n)
	}
	if n := r.starved.Load(); n > 0 {
		t.Errorf("%d Puts waited 5 s for %d at once: the Write let fewer run", n, r.gate)
	}
}

// writerParallelPutError: a Put that fails among many in flight fails the
// Write, which waits for the others and returns only chunks in the store
// (for the collector): none it returns is missing, and every one it
// pinned is returned.
func writerParallelPutError(t *testing.T) {
	pins := &pinLog{n: map[chunk.ID]int{}}
	r := &remote{Store: pinCheckStore{chunk.NewMemory(), pins}, n: 8, delay: 10 * time.Millisecond, failAfter: 5}
	w := chunk.NewWriter(r, chunk.WriterOptions{Workers: 2, Pins: pins})
	refs, size, err := w.Write(context.Background(), bytes.NewReader(randomData(32, 24*mib)), -1)
	if !errors.Is(err, errBoom) {
		t.Fatalf("Write = %v, want errBoom", err)
	}
	if size != 0 {
		t.Errorf("failed Write says %d bytes", size)
	}
	if r.inFlight.Load() != 0 {
		t.Errorf("%d Puts still in flight after Write returned", r.inFlight.Load())
	}
	for _, ref := range refs {
		if ok, err := r.Store.Has(context.Background(), ref.ID); err != nil || !ok {
			t.Errorf("failed Write returned chunk %s, not in the store", ref.ID)
		}
	}
	pins.mu.Lock()
	defer pins.mu.Unlock()
	if pins.unpinned > 0 || pins.negative {
		t.Errorf("%d chunks looked up before they were pinned (or unpinned too often: %v)", pins.unpinned, pins.negative)
	}
	n := 0
	for _, c := range pins.n {
		n += c
	}
	if n != len(refs) {
		t.Errorf("%d pins held after the failed Write, %d refs returned", n, len(refs))
	}
}

// readerFetchesParallelismAhead: a pool's reader on a Parallel store
// fetches as many chunks ahead as the store wants, when that is more than
// the pool's read-ahead, given the budget's room for them (nine 1 MiB
// chunks in flight take about 23 MiB, more than the default's 16).
func readerFetchesParallelismAhead(t *testing.T) {
	mem := chunk.NewMemory()
	refs := write(t, chunk.NewWriter(mem, chunk.WriterOptions{}), randomData(33, 30*mib))
	for _, tc := range []struct {
		pool, store, want int
	}{{2, 9, 9}, {-1, 9, 9}, {6, 3, 6}} {
		if len(refs) < 2+tc.want {
			t.Fatalf("want at least %d chunks, got %d", 2+tc.want, len(refs))
		}
		counting := &countingStore{Store: mem, gets: make(chan chunk.ID, 100)}
		s := &remote{Store: counting, n: tc.store}
		rd := chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: tc.pool, AheadBudget: 32 * mib}).NewReader(context.Background(), s, refs)
		if _, err := rd.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if n := counting.drain(1 + tc.want); n != 1+tc.want {
			t.Errorf("pool %d, store %d: the first read fetched %d chunks, want %d", tc.pool, tc.store, n, 1+tc.want)
		}
		rd.Close()
	}
}
