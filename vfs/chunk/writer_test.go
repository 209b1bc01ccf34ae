package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"berth/vfs/chunk"
)

// TestWriter holds the cases of Writer: what a stream of bytes becomes
// (chunks of the sizes asked, compressed where that pays, stored once), how
// it stops on a cancel or an error of the reader or the store, and what it
// pins. A writer bug found later becomes a row here.
func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"RoundTrip", roundTrip},
		{"CompressionShrinksText", compressionShrinksText},
		{"BlobsAreEncodes", blobsAreEncodes},
		{"Dedup", dedup},
		{"ChunkSizes", chunkSizes},
		{"TooLarge", tooLarge},
		{"CancelMidWrite", cancelMidWrite},
		{"ReadErrorStopsWrite", readErrorStopsWrite},
		{"StoreErrorStopsWrite", storeErrorStopsWrite},
		{"ConcurrentWrites", concurrentWrites},
		{"CorruptAndMissing", corruptAndMissing},
		// was in batch_test.go
		{"CancelLeavesNoFiles", writerCancelLeavesNoFiles},
		// was in batch_test.go
		{"CommitError", writerCommitError},
		// was pins_test.go
		{"Pins", writerPins},
	} {
		t.Run(tc.name, tc.run)
	}
}

const mib = 1 << 20

// randomData returns n incompressible bytes, the same for the same seed.
func randomData(seed uint64, n int) []byte {
	b := make([]byte, n)
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	_, _ = r.Read(b)
	return b
}

// textData returns n compressible bytes shaped like a server log: fixed text
// with varying numbers, so zstd shrinks it several times but content-defined
// cuts still vary.
func textData(seed uint64, n int) []byte {
	paths := []string{"files", "folder", "share", "person", "oauth/token", "link"}
	levels := []string{"INFO", "INFO", "INFO", "WARN", "DEBUG"}
	r := rand.New(rand.NewPCG(seed, 7))
	var b bytes.Buffer
	b.Grow(n + 256)
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "2026-11-25T10:%02d:%02d.%03dZ %s request id=%d path=/api/2/%s/%d status=%d bytes=%d\n",
			(i/60000)%60, (i/1000)%60, i%1000, levels[r.IntN(len(levels))], seed*1e9+uint64(i),
			paths[r.IntN(len(paths))], r.IntN(100000), 200+r.IntN(5)*100, r.IntN(1<<20))
	}
	return b.Bytes()[:n]
}

type counts struct {
	stored, deduped atomic.Int64
	plain, encoded  atomic.Int64
}

func (c *counts) observe(stored bool, plain, encoded int) {
	if stored {
		c.stored.Add(1)
	} else {
		c.deduped.Add(1)
	}
	c.plain.Add(int64(plain))
	c.encoded.Add(int64(encoded))
}

func write(t *testing.T, w *chunk.Writer, data []byte) []chunk.Ref {
	t.Helper()
	return writeFrom(t, w, bytes.NewReader(data), len(data))
}

// writeFrom writes r, of n bytes, through w.
func writeFrom(t *testing.T, w *chunk.Writer, r io.Reader, n int) []chunk.Ref {
	t.Helper()
	refs, size, err := w.Write(context.Background(), r, -1)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if size != int64(n) {
		t.Fatalf("Write size = %d, want %d", size, n)
	}
	var sum int64
	for _, r := range refs {
		sum += r.Size
	}
	if sum != size {
		t.Fatalf("refs sum to %d, want %d", sum, size)
	}
	return refs
}

func readAll(t *testing.T, s chunk.Store, refs []chunk.Ref) []byte {
	t.Helper()
	r := chunk.NewReader(context.Background(), s, refs)
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		t.Fatalf("read back: %v", err)
	}
	return buf.Bytes()
}

func roundTrip(t *testing.T) {
	sizes := []int{0, 1, mib - 1, mib + 1, 20 * mib}
	kinds := map[string]func(uint64, int) []byte{"random": randomData, "text": textData}
	s := newDisk(t)
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	for kind, gen := range kinds {
		for _, n := range sizes {
			data := gen(uint64(n), n)
			refs := write(t, w, data)
			if n == 0 && len(refs) != 0 {
				t.Fatalf("%s/%d: %d refs for empty input", kind, n, len(refs))
			}
			if got := readAll(t, s, refs); !bytes.Equal(got, data) {
				t.Fatalf("%s/%d: read back %d bytes, differs from the %d written", kind, n, len(got), len(data))
			}
		}
	}
}

// blobsAreEncodes: every blob a Writer stores is, byte for byte, what
// Encode makes of its chunk, so the two cannot drift apart on disk:
// compressed (text), raw after the probe (random), and compressed or
// raw by the whole chunk where the probe's samples disagree (mixed).
func blobsAreEncodes(t *testing.T) {
	dec := chunk.NewDecoder()
	defer dec.Close()
	for kind, gen := range map[string]func(uint64, int) []byte{"random": randomData, "text": textData, "mixed": mixedData} {
		s := chunk.NewMemory()
		refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), gen(9, 12*mib))
		for _, r := range refs {
			blob, err := s.Get(context.Background(), r.ID)
			if err != nil {
				t.Fatal(err)
			}
			plain, err := chunk.Decode(r.ID, blob, dec)
			if err != nil {
				t.Fatal(err)
			}
			if want := chunk.Encode(nil, r.ID, plain); !bytes.Equal(blob, want) {
				t.Fatalf("%s: the Writer stored %d bytes for a chunk of %d, Encode makes %d", kind, len(blob), len(plain), len(want))
			}
		}
	}
}

func compressionShrinksText(t *testing.T) {
	var c counts
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{Observer: c.observe})
	write(t, w, textData(1, 8*mib))
	if c.encoded.Load()*2 > c.plain.Load() {
		t.Fatalf("text stored as %d bytes from %d plain; want at least 2x smaller", c.encoded.Load(), c.plain.Load())
	}
	var r counts
	w = chunk.NewWriter(chunk.NewMemory(), chunk.WriterOptions{Observer: r.observe})
	write(t, w, randomData(1, 8*mib))
	// Random data is stored raw: one header byte per chunk.
	if over := r.encoded.Load() - r.plain.Load(); over != r.stored.Load() {
		t.Fatalf("random data: encoded - plain = %d, want %d (one header byte per chunk)", over, r.stored.Load())
	}
}

func dedup(t *testing.T) {
	ctx := context.Background()
	s := newDisk(t)
	var c counts
	w := chunk.NewWriter(s, chunk.WriterOptions{Observer: c.observe})
	data := randomData(42, 64*mib)
	refs := write(t, w, data)
	t.Logf("64 MiB random: %d chunks, average %.2f MiB", len(refs), 64.0/float64(len(refs)))
	before, err := s.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Same data again: nothing new.
	stored := c.stored.Load()
	refs2 := write(t, w, data)
	if after, _ := s.Size(ctx); after != before {
		t.Fatalf("second identical write grew the store from %d to %d", before, after)
	}
	if c.stored.Load() != stored {
		t.Fatalf("second identical write stored %d chunks", c.stored.Load()-stored)
	}
	if len(refs2) != len(refs) {
		t.Fatalf("identical data cut into %d then %d chunks", len(refs), len(refs2))
	}

	// One byte changed in the middle: only the chunk around it is new.
	data[len(data)/2] ^= 0xff
	stored = c.stored.Load()
	write(t, w, data)
	fresh := c.stored.Load() - stored
	t.Logf("one byte changed in 64 MiB: %d new chunks of %d", fresh, len(refs))
	if fresh < 1 || fresh > 3 {
		t.Fatalf("one changed byte stored %d new chunks, want 1 to 3", fresh)
	}

	// One byte inserted: the cut points resynchronise.
	ins := append(append(bytes.Clone(data[:len(data)/3]), 'x'), data[len(data)/3:]...)
	stored = c.stored.Load()
	write(t, w, ins)
	fresh = c.stored.Load() - stored
	t.Logf("one byte inserted in 64 MiB: %d new chunks", fresh)
	if fresh < 1 || fresh > 3 {
		t.Fatalf("one inserted byte stored %d new chunks, want 1 to 3", fresh)
	}
}

func chunkSizes(t *testing.T) {
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	refs := write(t, w, randomData(7, 64*mib))
	for i, r := range refs {
		if r.Size > 4*mib || (i < len(refs)-1 && r.Size < 256<<10) {
			t.Fatalf("chunk %d has size %d, outside [256 KiB, 4 MiB]", i, r.Size)
		}
	}
}

func tooLarge(t *testing.T) {
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	data := randomData(3, 3*mib)
	ctx := context.Background()
	if _, _, err := w.Write(ctx, bytes.NewReader(data), int64(len(data)-1)); !errors.Is(err, chunk.ErrTooLarge) {
		t.Fatalf("Write over limit = %v, want ErrTooLarge", err)
	}
	refs, size, err := w.Write(ctx, bytes.NewReader(data), int64(len(data)))
	if err != nil || size != int64(len(data)) || len(refs) == 0 {
		t.Fatalf("Write at exactly the limit = %d refs, %d, %v", len(refs), size, err)
	}
	if _, _, err := w.Write(ctx, bytes.NewReader([]byte{1}), 0); !errors.Is(err, chunk.ErrTooLarge) {
		t.Fatalf("Write of 1 byte with limit 0 = %v, want ErrTooLarge", err)
	}
	if refs, _, err := w.Write(ctx, bytes.NewReader(nil), 0); err != nil || len(refs) != 0 {
		t.Fatalf("Write of 0 bytes with limit 0 = %v, %v", refs, err)
	}
}

// endless yields random bytes forever and cancels its context after a while,
// like a client that goes away mid-upload.
type endless struct {
	n      int
	after  int
	cancel context.CancelFunc
	rng    *rand.ChaCha8
}

func (e *endless) Read(p []byte) (int, error) {
	e.n += len(p)
	if e.n > e.after {
		e.cancel()
	}
	_, _ = e.rng.Read(p)
	return len(p), nil
}

func cancelMidWrite(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := chunk.NewWriter(newDisk(t), chunk.WriterOptions{})
	src := &endless{after: 10 * mib, cancel: cancel, rng: rand.NewChaCha8([32]byte{9})}
	_, _, err := w.Write(ctx, src, -1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write after cancel = %v, want context.Canceled", err)
	}
	if src.n > 30*mib {
		t.Fatalf("Write kept reading %d bytes after cancel at %d", src.n, src.after)
	}
}

var errBoom = errors.New("boom")

type failingReader struct {
	r     io.Reader
	after int
	n     int
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n >= f.after {
		return 0, errBoom
	}
	n, err := f.r.Read(p)
	f.n += n
	return n, err
}

func readErrorStopsWrite(t *testing.T) {
	w := chunk.NewWriter(chunk.NewMemory(), chunk.WriterOptions{})
	src := &failingReader{r: bytes.NewReader(randomData(5, 20*mib)), after: 7 * mib}
	if _, _, err := w.Write(context.Background(), src, -1); !errors.Is(err, errBoom) {
		t.Fatalf("Write with failing reader = %v, want errBoom", err)
	}
}

// failingStore fails every Put, like a full disk.
type failingStore struct{ chunk.Store }

func (failingStore) Put(context.Context, chunk.ID, []byte) error { return errBoom }

func storeErrorStopsWrite(t *testing.T) {
	w := chunk.NewWriter(failingStore{chunk.NewMemory()}, chunk.WriterOptions{})
	src := &endless{after: 1 << 62, cancel: func() {}, rng: rand.NewChaCha8([32]byte{1})}
	if _, _, err := w.Write(context.Background(), src, -1); !errors.Is(err, errBoom) {
		t.Fatalf("Write with failing store = %v, want errBoom", err)
	}
}

func concurrentWrites(t *testing.T) {
	s := newDisk(t)
	w := chunk.NewWriter(s, chunk.WriterOptions{Workers: 3})
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			data := randomData(uint64(100+i%2), 6*mib)
			refs, _, err := w.Write(context.Background(), bytes.NewReader(data), -1)
			if err == nil {
				r := chunk.NewReader(context.Background(), s, refs)
				var got []byte
				got, err = io.ReadAll(r)
				r.Close()
				if err == nil && !bytes.Equal(got, data) {
					err = errors.New("read back differs")
				}
			}
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func corruptAndMissing(t *testing.T) {
	s := newDisk(t)
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	data := randomData(11, 5*mib)
	refs := write(t, w, data)
	if len(refs) < 2 {
		t.Fatalf("want several chunks, got %d", len(refs))
	}

	// Flip one byte inside the second chunk's file.
	path := s.Path(refs[1].ID)
	blob, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blob[len(blob)/2] ^= 1
	if err := os.WriteFile(path, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	r := chunk.NewReader(context.Background(), s, refs)
	var got bytes.Buffer
	n, err := io.Copy(&got, r) // CopyTo, as a download sends
	r.Close()
	if !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("reading a corrupt chunk = %d bytes, %v; want ErrCorrupt", n, err)
	}
	// What was sent is the first chunk, less the part of a 16 KiB
	// record that would have gone out with the second's start.
	if n > refs[0].Size || n <= refs[0].Size-16<<10 || !bytes.Equal(got.Bytes(), data[:n]) {
		t.Fatalf("served %d bytes before the corrupt chunk (equal: %v), want the first chunk's %d but its last partial record", n, bytes.Equal(got.Bytes(), data[:n]), refs[0].Size)
	}
	// Unknown encoding byte.
	blob[len(blob)/2] ^= 1
	blob[0] = 9
	if err := os.WriteFile(path, blob, 0o600); err != nil {
		t.Fatal(err)
	}
	r = chunk.NewReader(context.Background(), s, refs)
	if _, err := r.ReadAt(make([]byte, 10), refs[0].Size); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("ReadAt of a chunk with unknown encoding = %v, want ErrCorrupt", err)
	}
	r.Close()

	// Missing chunk.
	if err := s.Delete(context.Background(), refs[len(refs)-1].ID); err != nil {
		t.Fatal(err)
	}
	r = chunk.NewReader(context.Background(), s, refs)
	if _, err := r.Seek(refs[0].Size+refs[1].Size, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, chunk.ErrNotFound) {
		t.Fatalf("reading a missing chunk = %v, want ErrNotFound", err)
	}
	r.Close()
}

func writerCancelLeavesNoFiles(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := newDisk(t)
	w := chunk.NewWriter(d, chunk.WriterOptions{})
	src := &endless{after: 10 * mib, cancel: cancel, rng: rand.NewChaCha8([32]byte{9})}
	refs, _, err := w.Write(ctx, src, -1)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write after cancel = %v, want context.Canceled", err)
	}
	if len(refs) != 0 {
		t.Fatalf("cancelled batch write returned %d refs of aborted chunks", len(refs))
	}
	if got := files(t, d); len(got) != 0 {
		t.Fatalf("files after a cancelled write: %v", got)
	}
}

func writerCommitError(t *testing.T) {
	d := newDisk(t)
	w := chunk.NewWriter(failCommit{d}, chunk.WriterOptions{})
	refs, _, err := w.Write(context.Background(), bytes.NewReader(randomData(7, 5*mib)), -1)
	if !errors.Is(err, errBoom) {
		t.Fatalf("Write with failing Commit = %v, want errBoom", err)
	}
	// A failed Commit may have made some chunks visible: all are reported.
	if len(refs) == 0 {
		t.Fatal("failed Commit reported no refs for the collector")
	}
	if got := files(t, d); len(got) != 0 {
		t.Fatalf("files after a failed Commit: %v", got)
	}
}

// TestWriterPins: whatever the outcome of a Write, the chunks pinned when
// it returns are exactly those of the refs it returned, once per ref, and
// it pinned each chunk before asking the store for it.
func writerPins(t *testing.T) {
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

// pinLog is a chunk.Pinner that counts pins and notes any Has of a chunk
// not pinned.
type pinLog struct {
	mu       sync.Mutex
	n        map[chunk.ID]int
	unpinned int // Has calls for a chunk not pinned
	negative bool
}

func (p *pinLog) Pin(_ context.Context, id chunk.ID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n[id]++
	return nil
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
