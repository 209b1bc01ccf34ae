package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/zstd"

	"berth/vfs/chunk"
)

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
	refs, size, err := w.Write(context.Background(), bytes.NewReader(data), -1)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if size != int64(len(data)) {
		t.Fatalf("Write size = %d, want %d", size, len(data))
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

func TestRoundTrip(t *testing.T) {
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

func TestCompressionShrinksText(t *testing.T) {
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

func TestDedup(t *testing.T) {
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

func TestChunkSizes(t *testing.T) {
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	refs := write(t, w, randomData(7, 64*mib))
	for i, r := range refs {
		if r.Size > 4*mib || (i < len(refs)-1 && r.Size < 256<<10) {
			t.Fatalf("chunk %d has size %d, outside [256 KiB, 4 MiB]", i, r.Size)
		}
	}
}

func TestTooLarge(t *testing.T) {
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

func TestCancelMidWrite(t *testing.T) {
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

func TestReadErrorStopsWrite(t *testing.T) {
	w := chunk.NewWriter(chunk.NewMemory(), chunk.WriterOptions{})
	src := &failingReader{r: bytes.NewReader(randomData(5, 20*mib)), after: 7 * mib}
	if _, _, err := w.Write(context.Background(), src, -1); !errors.Is(err, errBoom) {
		t.Fatalf("Write with failing reader = %v, want errBoom", err)
	}
}

// failingStore fails every Put, like a full disk.
type failingStore struct{ chunk.Store }

func (failingStore) Put(context.Context, chunk.ID, []byte) error { return errBoom }

func TestStoreErrorStopsWrite(t *testing.T) {
	w := chunk.NewWriter(failingStore{chunk.NewMemory()}, chunk.WriterOptions{})
	src := &endless{after: 1 << 62, cancel: func() {}, rng: rand.NewChaCha8([32]byte{1})}
	if _, _, err := w.Write(context.Background(), src, -1); !errors.Is(err, errBoom) {
		t.Fatalf("Write with failing store = %v, want errBoom", err)
	}
}

func TestConcurrentWrites(t *testing.T) {
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

func TestCorruptAndMissing(t *testing.T) {
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
	n, err := io.Copy(io.Discard, r)
	r.Close()
	if !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("reading a corrupt chunk = %d bytes, %v; want ErrCorrupt", n, err)
	}
	if n != refs[0].Size {
		t.Fatalf("served %d bytes before the corrupt chunk, want exactly %d", n, refs[0].Size)
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

func TestEncodeDecode(t *testing.T) {
	enc, dec := chunk.NewEncoder(), chunk.NewDecoder()
	defer dec.Close()
	for _, plain := range [][]byte{nil, []byte("x"), textData(1, mib), randomData(1, mib)} {
		id := chunk.Sum(plain)
		blob := chunk.Encode(nil, enc, id, plain)
		got, err := chunk.Decode(id, blob, dec)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Decode(Encode(%d bytes)) = %d bytes, %v", len(plain), len(got), err)
		}
		if err := chunk.Verify(id, blob, dec); err != nil {
			t.Fatalf("Verify(Encode(%d bytes)) = %v", len(plain), err)
		}
		if _, err := chunk.Decode(chunk.Sum([]byte("other")), blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("Decode with wrong id = %v, want ErrCorrupt", err)
		}
	}
	for _, blob := range [][]byte{nil, {7, 1, 2}, {1, 0xde, 0xad}, {2, 0xde, 0xad}} {
		if _, err := chunk.Decode(chunk.ID{}, blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("Decode(%v) = %v, want ErrCorrupt", blob, err)
		}
	}
}

// TestSealedCorruption flips one bit at a time across a compressed blob:
// every flip, in the header, the seal or the frame, is ErrCorrupt.
func TestSealedCorruption(t *testing.T) {
	enc, dec := chunk.NewEncoder(), chunk.NewDecoder()
	defer dec.Close()
	plain := textData(3, mib)
	id := chunk.Sum(plain)
	blob := chunk.Encode(nil, enc, id, plain)
	if len(blob) > len(plain)/2 {
		t.Fatalf("text did not compress: %d of %d bytes", len(blob), len(plain))
	}
	step := len(blob)/200 + 1
	for i := 0; i < len(blob); i += step {
		bad := bytes.Clone(blob)
		bad[i] ^= 0x10
		if _, err := chunk.Decode(id, bad, dec); !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("bit flipped at %d of %d: Decode = %v, want ErrCorrupt", i, len(blob), err)
		}
	}
	if _, err := chunk.Decode(id, blob[:len(blob)-1], dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("truncated blob: Decode = %v, want ErrCorrupt", err)
	}
}

// TestLegacyZstdBlob reads the encoding earlier versions wrote: header 1 and
// a checksummed zstd frame, verified by hashing the plain bytes.
func TestLegacyZstdBlob(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	dec := chunk.NewDecoder()
	defer dec.Close()
	plain := textData(4, mib)
	id := chunk.Sum(plain)
	blob := enc.EncodeAll(plain, []byte{1})
	got, err := chunk.Decode(id, blob, dec)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("legacy blob: %d bytes, %v", len(got), err)
	}
	if _, err := chunk.Decode(chunk.Sum(nil), blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("legacy blob with wrong id = %v, want ErrCorrupt", err)
	}
}

// TestVerifyPlain: a frame sealed for an id whose plain bytes it does not
// hold passes the fast check (only a writer bug could make one) but not
// fsck's deep one.
func TestVerifyPlain(t *testing.T) {
	enc, dec := chunk.NewEncoder(), chunk.NewDecoder()
	defer dec.Close()
	plain := textData(5, mib)
	wrong := chunk.Sum([]byte("not these bytes"))
	blob := chunk.Encode(nil, enc, wrong, plain)
	if _, err := chunk.Decode(wrong, blob, dec); err != nil {
		t.Fatalf("Decode = %v, want the seal to hold", err)
	}
	if err := chunk.Verify(wrong, blob, dec); !errors.Is(err, chunk.ErrCorrupt) {
		t.Fatalf("Verify = %v, want ErrCorrupt", err)
	}
}
