package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"berth/vfs/chunk"
)

// TestReader holds the cases of Reader: it reads, seeks and serves like a
// bytes.Reader over the same bytes, reads ahead only when reading in
// order, and gives its buffers back on Close. A reader bug found later
// becomes a row here.
func TestReader(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"SeekAndReadAtMatchBytesReader", seekAndReadAtMatchBytesReader},
		{"ReadaheadOnlyWhenSequential", readaheadOnlyWhenSequential},
		{"ReadAheadFromPoolOptions", readAheadFromPoolOptions},
		{"ReadAheadOnlyOffTheDevice", readAheadOnlyOffTheDevice},
		{"CopyToWholeRecords", copyToWholeRecords},
		{"FailedWriteKeepsBuffers", failedWriteKeepsBuffers},
		{"BuffersKeptWhileOpen", buffersKeptWhileOpen},
		{"KeptOnlyWhatOpenReadersLack", keptOnlyWhatOpenReadersLack},
		{"Close", readerClose},
		{"ServeContent", serveContent},
		{"CorruptAfterVerified", corruptAfterVerified},
		{"CorruptAfterVerifiedWrite", corruptAfterVerifiedWrite},
		{"GrownChunkFileRefusedUnread", grownChunkFileRefusedUnread},
		{"StalledReadersHoldTheBudget", stalledReadersHoldTheBudget},
		{"StalledReadersDoNotHoldUpAnother", stalledReadersDoNotHoldUpAnother},
		{"ReadAheadBackOnceBudgetFrees", readAheadBackOnceBudgetFrees},
	} {
		t.Run(tc.name, tc.run)
	}
}

func seekAndReadAtMatchBytesReader(t *testing.T) {
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
	cases := []struct {
		name  string
		store chunk.Store
		data  []byte
		open  func(chunk.Store, []chunk.Ref) *chunk.Reader
	}{
		{"memory/text", chunk.NewMemory(), textData(3, 12*mib), func(s chunk.Store, refs []chunk.Ref) *chunk.Reader {
			return chunk.NewReader(context.Background(), s, refs)
		}},
		// The pooled reader reuses buffers between chunks: text chunks
		// are zstd-encoded, random ones raw, so both buffer paths run.
		{"disk/pool/text", newDisk(t), textData(4, 12*mib), func(s chunk.Store, refs []chunk.Ref) *chunk.Reader {
			return pool.NewReader(context.Background(), s, refs)
		}},
		{"disk/pool/random", newDisk(t), randomData(5, 12*mib), func(s chunk.Store, refs []chunk.Ref) *chunk.Reader {
			return pool.NewReader(context.Background(), s, refs)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			checkReader(t, c.store, c.data, c.open)
		})
	}
}

func checkReader(t *testing.T, s chunk.Store, data []byte, open func(chunk.Store, []chunk.Ref) *chunk.Reader) {
	w := chunk.NewWriter(s, chunk.WriterOptions{})
	refs := write(t, w, data)
	want := bytes.NewReader(data)
	r := open(s, refs)
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Fatalf("Size = %d, want %d", r.Size(), len(data))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 120 {
		off := rng.Int64N(int64(len(data)) + 100)
		n := rng.IntN(3 * mib)
		if i%3 == 0 {
			n = rng.IntN(100)
		}
		got, exp := make([]byte, n), make([]byte, n)

		gn, gerr := r.ReadAt(got, off)
		en, eerr := want.ReadAt(exp, off)
		if gn != en || !bytes.Equal(got[:gn], exp[:en]) || (gerr == nil) != (eerr == nil) {
			t.Fatalf("ReadAt(%d, %d) = %d, %v; bytes.Reader: %d, %v", n, off, gn, gerr, en, eerr)
		}

		whence := rng.IntN(3)
		so := off
		switch whence {
		case io.SeekCurrent:
			cur, _ := want.Seek(0, io.SeekCurrent)
			so = off - cur
		case io.SeekEnd:
			so = off - int64(len(data))
		}
		gp, gerr := r.Seek(so, whence)
		ep, eerr := want.Seek(so, whence)
		if gp != ep || gerr != nil || eerr != nil {
			t.Fatalf("Seek(%d, %d) = %d, %v; bytes.Reader: %d, %v", so, whence, gp, gerr, ep, eerr)
		}
		if i%4 == 1 {
			// CopyTo sends what Read would, from the same offset, and
			// moves it as far.
			var gb, eb bytes.Buffer
			gn, gerr := r.CopyTo(&gb, int64(n))
			en, eerr := io.Copy(&eb, io.LimitReader(want, int64(n)))
			if gn != en || !bytes.Equal(gb.Bytes(), eb.Bytes()) || gerr != nil || eerr != nil {
				t.Fatalf("CopyTo(%d) at %d = %d, %v; bytes.Reader: %d, %v", n, off, gn, gerr, en, eerr)
			}
			continue
		}
		gn, gerr = io.ReadFull(r, got)
		en, eerr = io.ReadFull(want, exp)
		if gn != en || !bytes.Equal(got[:gn], exp[:en]) || !errors.Is(gerr, eerr) {
			t.Fatalf("ReadFull(%d) at %d = %d, %v; bytes.Reader: %d, %v", n, off, gn, gerr, en, eerr)
		}
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("Seek to -1 succeeded")
	}
	if _, err := r.ReadAt(make([]byte, 1), -1); err == nil {
		t.Fatal("ReadAt(-1) succeeded")
	}
}

// countingStore counts Gets, to check readahead fetches nothing on random
// access.
type countingStore struct {
	chunk.Store
	gets chan chunk.ID
}

func (c *countingStore) Get(ctx context.Context, id chunk.ID) ([]byte, error) {
	c.gets <- id
	return c.Store.Get(ctx, id)
}

// drain counts the Gets made so far and those still coming: it waits up
// to 10 s for the first want of them, then until none comes for 50 ms.
// Waiting 50 ms for each, a machine loaded enough to start a fetch
// ahead later than that (-race at load 7) counted too few.
func (c *countingStore) drain(want int) int {
	n := 0
	for ; n < want; n++ {
		select {
		case <-c.gets:
		case <-time.After(10 * time.Second):
			return n
		}
	}
	for {
		select {
		case <-c.gets:
			n++
		case <-time.After(50 * time.Millisecond):
			return n
		}
	}
}

func readaheadOnlyWhenSequential(t *testing.T) {
	mem := chunk.NewMemory()
	refs := write(t, chunk.NewWriter(mem, chunk.WriterOptions{}), randomData(8, 20*mib))
	if len(refs) < 5+chunk.ReadAhead {
		t.Fatalf("want at least %d chunks, got %d", 5+chunk.ReadAhead, len(refs))
	}
	s := &countingStore{Store: mem, gets: make(chan chunk.ID, 100)}
	r := chunk.NewReader(context.Background(), s, refs)
	defer r.Close()

	// A read in the middle fetches one chunk and nothing more.
	off := refs[0].Size + refs[1].Size + refs[2].Size
	if _, err := r.ReadAt(make([]byte, 10), off); err != nil {
		t.Fatal(err)
	}
	if n := s.drain(1); n != 1 {
		t.Fatalf("random ReadAt fetched %d chunks, want 1", n)
	}
	// Reading on into the following chunk is sequential: the one after is
	// fetched ahead.
	if _, err := r.ReadAt(make([]byte, 10), off+refs[3].Size); err != nil {
		t.Fatal(err)
	}
	if n := s.drain(1 + chunk.ReadAhead); n != 1+chunk.ReadAhead {
		t.Fatalf("sequential ReadAt fetched %d chunks, want %d (%d ahead)", n, 1+chunk.ReadAhead, chunk.ReadAhead)
	}
	// The prefetched chunk is used, not fetched again.
	if _, err := r.ReadAt(make([]byte, 10), off+refs[3].Size+refs[4].Size); err != nil {
		t.Fatal(err)
	}
	if n := s.drain(0); n > 1 {
		t.Fatalf("reading the prefetched chunk fetched %d, want at most 1 (the next ahead)", n)
	}
}

// readAheadFromPoolOptions: a pool's readers fetch as many chunks ahead
// as ReadPoolOptions.ReadAhead says (0: the default, negative: none).
func readAheadFromPoolOptions(t *testing.T) {
	mem := chunk.NewMemory()
	refs := write(t, chunk.NewWriter(mem, chunk.WriterOptions{}), randomData(9, 20*mib))
	for _, tc := range []struct {
		opt, want int
	}{{0, chunk.DefaultReadAhead}, {-1, 0}, {2, 2}} {
		s := &countingStore{Store: mem, gets: make(chan chunk.ID, 100)}
		r := chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: tc.opt}).NewReader(context.Background(), s, refs)
		if _, err := r.Read(make([]byte, 10)); err != nil {
			t.Fatal(err)
		}
		if n := s.drain(1 + tc.want); n != 1+tc.want {
			t.Errorf("ReadAhead %d: the first read fetched %d chunks, want %d", tc.opt, n, 1+tc.want)
		}
		r.Close()
	}
}

// readAheadOnlyOffTheDevice: a Disk's reader fetches ahead the chunks
// after one read from the device, and reads a file in the page cache
// chunk by chunk as it is sent, with no worker.
func readAheadOnlyOffTheDevice(t *testing.T) {
	d := newDisk(t)
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
	data := randomData(12, 12*mib)
	refs := write(t, chunk.NewWriter(d, chunk.WriterOptions{}), data)
	if len(refs) < 2+chunk.ReadAhead {
		t.Fatalf("want at least %d chunks, got %d", 2+chunk.ReadAhead, len(refs))
	}
	// read reads the file whole, and reports how many chunks were
	// fetched ahead after its first read.
	read := func() int {
		r := pool.NewReader(context.Background(), d, refs)
		defer r.Close()
		p := make([]byte, 10)
		if _, err := io.ReadFull(r, p); err != nil {
			t.Fatal(err)
		}
		ahead := chunk.FetchingAhead(r)
		var got bytes.Buffer
		got.Write(p)
		if _, err := io.Copy(&got, r); err != nil || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("read %d bytes, %v; equal: %v", got.Len(), err, bytes.Equal(got.Bytes(), data))
		}
		return ahead
	}
	for _, ref := range refs {
		evict(t, d.Path(ref.ID))
	}
	if n := read(); n != chunk.ReadAhead {
		t.Fatalf("a file off the device: %d chunks fetched ahead, want %d", n, chunk.ReadAhead)
	}
	// The second read of a blob read directly goes through the page
	// cache, which keeps it for the third.
	read()
	if !chunk.Warm(d, refs[0].ID) {
		t.Skip("the page cache's state is not visible here (no cachestat or RWF_NOWAIT)")
	}
	if n := read(); n != 0 {
		t.Fatalf("a file in the page cache: %d chunks fetched ahead, want none", n)
	}
}

// copyToWholeRecords: CopyTo hands its writer whole 16 KiB records but
// for the last write, across chunk ends, from any offset and for any
// length, with the same bytes as a copy through Read.
// keepingWriter fails its first write and keeps the slice it was given,
// as Go's HTTP/2 server may go on reading a frame's bytes after the write
// returned (the client reset the stream).
type keepingWriter struct{ kept []byte }

func (w *keepingWriter) Write(p []byte) (int, error) {
	w.kept = p
	return 0, errors.New("stream reset")
}

// failedWriteKeepsBuffers: after a failed write, the buffers behind what
// it was given are not handed to the next download through the pool, so
// what the writer still reads stays the first file's bytes.
func failedWriteKeepsBuffers(t *testing.T) {
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
	for _, c := range []struct {
		name string
		data func(seed uint64) []byte
	}{
		{"random", func(seed uint64) []byte { return randomData(seed, 3*mib) }},
		{"text", func(seed uint64) []byte { return textData(seed, 3*mib) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newDisk(t)
			first, other := c.data(21), c.data(22)
			refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), first)
			otherRefs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), other)
			for range 5 {
				r := pool.NewReader(context.Background(), s, refs)
				w := &keepingWriter{}
				if _, err := r.CopyTo(w, int64(len(first))); err == nil || len(w.kept) == 0 {
					t.Fatalf("CopyTo into a failing writer: %v, %d bytes given", err, len(w.kept))
				}
				kept := bytes.Clone(w.kept)
				r.Close()
				// Another download through the same pool.
				r2 := pool.NewReader(context.Background(), s, otherRefs)
				if got, err := io.ReadAll(r2); err != nil || !bytes.Equal(got, other) {
					t.Fatalf("second download: %v, equal %v", err, bytes.Equal(got, other))
				}
				r2.Close()
				if !bytes.Equal(w.kept, kept) {
					t.Fatal("the bytes a failed write was given changed: its buffer went to another download")
				}
			}
		})
	}
}

// buffersKeptWhileOpen: while a Reader of the pool is open, the chunk
// buffers given back stay kept through collections (the daemon collects
// often under its memory limit), so the chunks of a download in progress
// are not read into freshly allocated, cleared and faulted-in buffers.
func buffersKeptWhileOpen(t *testing.T) {
	s := newDisk(t)
	data := randomData(31, 3*mib)
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), data)
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: -1})
	inProgress := pool.NewReader(context.Background(), s, refs)
	defer inProgress.Close()
	read := func() {
		r := pool.NewReader(context.Background(), s, refs)
		defer r.Close()
		if n, err := r.CopyTo(io.Discard, int64(len(data))); err != nil || n != int64(len(data)) {
			t.Fatalf("CopyTo: %d bytes, %v", n, err)
		}
	}
	read()
	// Two collections empty a sync.Pool.
	runtime.GC()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	read()
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n >= mib {
		t.Errorf("a read after two collections allocated %d bytes, want the kept buffers reused (less than a chunk's %d)", n, mib)
	}
}

// keptOnlyWhatOpenReadersLack: the buffers a pool keeps through
// collections are what its open Readers may still need beyond those they
// hold, not its whole allowance on top of them. Kept whole after a burst
// of downloads had ended, while one went on, they held as much again as
// that download used (24 to 32 MiB of 4 MiB buffers more, beside its
// 40, in a pool of the daemon's read-ahead: its whole soft memory limit
// of 72 MiB), for as long as any download stayed open.
func keptOnlyWhatOpenReadersLack(t *testing.T) {
	s := newDisk(t)
	data := textData(37, 2*mib) // compressible: a blob and its decoded copy a chunk
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), data)
	// Without read-ahead each Reader holds one buffer, its chunk's
	// decoded copy (the blob's goes back once decoded), and the pool's
	// allowance is four a Reader.
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: -1})
	open := func() *chunk.Reader {
		r := pool.NewReader(context.Background(), s, refs)
		if _, err := r.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		return r
	}
	goingOn := open()
	defer goingOn.Close()
	var burst []*chunk.Reader
	for range 4 {
		burst = append(burst, open())
	}
	for _, r := range burst {
		r.Close()
	}
	if kept := chunk.Kept(pool); kept > 3 {
		t.Errorf("one Reader open, holding 1 buffer: %d kept, want at most the 3 more it may need", kept)
	}
}

func copyToWholeRecords(t *testing.T) {
	const record = 16 << 10
	s := chunk.NewMemory()
	data := randomData(13, 6*mib)
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), data)
	if len(refs) < 3 {
		t.Fatalf("want several chunks, got %d", len(refs))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 40 {
		off := rng.Int64N(int64(len(data)))
		n := rng.Int64N(int64(len(data)))
		if i == 0 {
			off, n = 0, math.MaxInt64 // WriteTo
		}
		r := chunk.NewReader(context.Background(), s, refs)
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		w := &sizesWriter{}
		m, err := r.CopyTo(w, n)
		want := data[off:min(int64(len(data)), off+min(n, int64(len(data))))]
		if err != nil || m != int64(len(want)) || !bytes.Equal(w.b.Bytes(), want) {
			t.Fatalf("CopyTo(%d) at %d = %d, %v; want %d bytes, equal: %v", n, off, m, err, len(want), bytes.Equal(w.b.Bytes(), want))
		}
		for j, size := range w.sizes[:max(0, len(w.sizes)-1)] {
			if size%record != 0 {
				t.Fatalf("CopyTo(%d) at %d: write %d of %d is %d bytes, not whole records", n, off, j, len(w.sizes), size)
			}
		}
		if pos, _ := r.Seek(0, io.SeekCurrent); pos != off+m {
			t.Fatalf("CopyTo(%d) at %d left the offset at %d, want %d", n, off, pos, off+m)
		}
		r.Close()
	}
}

// sizesWriter keeps what it is written and the size of each write.
type sizesWriter struct {
	b     bytes.Buffer
	sizes []int
}

func (w *sizesWriter) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	return w.b.Write(p)
}

func readerClose(t *testing.T) {
	s := chunk.NewMemory()
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), randomData(2, 3*mib))
	r := chunk.NewReader(context.Background(), s, refs)
	if _, err := r.Read(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 10)); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("Read after Close = %v, want fs.ErrClosed", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}

func serveContent(t *testing.T) {
	s := chunk.NewMemory()
	data := randomData(4, 6*mib)
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), data)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := chunk.NewReader(req.Context(), s, refs)
		defer r.Close()
		http.ServeContent(w, req, "f.bin", time.Time{}, r)
	}))
	defer srv.Close()

	get := func(rng string) []byte {
		req, _ := http.NewRequest("GET", srv.URL, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if !bytes.Equal(get(""), data) {
		t.Fatal("full GET differs")
	}
	if got := get("bytes=1048570-2097160"); !bytes.Equal(got, data[1048570:2097161]) {
		t.Fatalf("range GET returned %d bytes, differs", len(got))
	}
	if got := get("bytes=-5"); !bytes.Equal(got, data[len(data)-5:]) {
		t.Fatal("suffix range differs")
	}
	if got := string(get("bytes=0-0,100-101")); !strings.Contains(got, "multipart") && !strings.Contains(got, "Content-Range") {
		t.Fatalf("multi-range body not multipart: %.100q", got)
	}
}

// corruptAfterVerifiedWrite: a Writer that tells the pool of the blobs it
// stores (WriterOptions.Verified) spares their first read the full hash,
// not its check: a chunk changed on disk right after the write is
// ErrCorrupt at the first read, and the file reads whole once repaired.
func corruptAfterVerifiedWrite(t *testing.T) {
	for _, c := range []struct {
		name        string
		data, other []byte // other shares no chunk with data
	}{
		{"random", randomData(9, 3*mib), randomData(19, 2*mib)},
		{"text", textData(10, 3*mib), textData(20, 2*mib)},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := newDisk(t)
			pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
			w := chunk.NewWriter(d, chunk.WriterOptions{Verified: pool})
			read := func(refs []chunk.Ref) ([]byte, error) {
				r := pool.NewReader(context.Background(), d, refs)
				defer r.Close()
				return io.ReadAll(r)
			}
			if got, err := read(write(t, w, c.data)); err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("first read after the write: %d bytes, %v", len(got), err)
			}
			other := c.other
			refs := write(t, w, other)
			path := d.Path(refs[0].ID)
			blob, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(blob)
			bad[len(bad)/3] ^= 1
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := read(refs); !errors.Is(err, chunk.ErrCorrupt) {
				t.Fatalf("first read of a chunk corrupt since its write: %d bytes, %v; want ErrCorrupt", len(got), err)
			}
			if err := os.WriteFile(path, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := read(refs); err != nil || !bytes.Equal(got, other) {
				t.Fatalf("read once repaired: %d bytes, %v", len(got), err)
			}
		})
	}
}

// corruptAfterVerified: a pool checks a blob in full once and by its
// XXH3 after; a blob changed on disk since fails that check and is
// verified in full again, so a corrupt chunk is ErrCorrupt on every read,
// the first or a later one, and never served. Raw chunks (random data)
// and sealed S2 ones (text) alike.
func corruptAfterVerified(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
	}{{"random", randomData(7, 3*mib)}, {"text", textData(8, 3*mib)}} {
		t.Run(c.name, func(t *testing.T) {
			d := newDisk(t)
			refs := write(t, chunk.NewWriter(d, chunk.WriterOptions{}), c.data)
			pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
			read := func() ([]byte, error) {
				r := pool.NewReader(context.Background(), d, refs)
				defer r.Close()
				return io.ReadAll(r)
			}
			for i := range 2 { // verified in full, then by the XXH3
				if got, err := read(); err != nil || !bytes.Equal(got, c.data) {
					t.Fatalf("read %d: %d bytes, %v", i, len(got), err)
				}
			}
			path := d.Path(refs[len(refs)/2].ID)
			blob, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(blob)
			bad[len(bad)/2] ^= 1
			if err := os.WriteFile(path, bad, 0o644); err != nil {
				t.Fatal(err)
			}
			for i := range 2 {
				if got, err := read(); !errors.Is(err, chunk.ErrCorrupt) {
					t.Fatalf("read %d of a corrupt chunk: %d bytes, %v; want ErrCorrupt", i, len(got), err)
				}
			}
			if err := os.WriteFile(path, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			if got, err := read(); err != nil || !bytes.Equal(got, c.data) {
				t.Fatalf("read once repaired: %d bytes, %v", len(got), err)
			}
		})
	}
}

// grownChunkFileRefusedUnread: a chunk file longer than any blob a
// Writer stores (grown on disk, by a bug or a hand) is ErrCorrupt
// before it is read. Read whole first, it cost a buffer of its size:
// 64 MiB for this one, and as much as the file for any larger.
func grownChunkFileRefusedUnread(t *testing.T) {
	s := newDisk(t)
	data := randomData(41, 2*mib)
	refs := write(t, chunk.NewWriter(s, chunk.WriterOptions{}), data)
	const grown = 64 * mib
	if err := os.Truncate(s.Path(refs[0].ID), grown); err != nil {
		t.Fatal(err)
	}
	for _, pooled := range []bool{false, true} {
		r := chunk.NewReader(context.Background(), s, refs)
		if pooled {
			r = chunk.NewReadPool(chunk.ReadPoolOptions{ReadAhead: -1}).NewReader(context.Background(), s, refs)
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := r.Read(make([]byte, 1))
		runtime.ReadMemStats(&after)
		r.Close()
		if !errors.Is(err, chunk.ErrCorrupt) {
			t.Fatalf("pooled %v: read of a grown chunk file: %v, want ErrCorrupt", pooled, err)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n >= grown/2 {
			t.Errorf("pooled %v: refusing a grown chunk file of %d bytes allocated %d", pooled, grown, n)
		}
	}
	// Get reads blobs of any length: its callers are not only Readers.
	if blob, err := s.Get(context.Background(), refs[0].ID); err != nil || len(blob) != grown {
		t.Fatalf("Get of the grown file: %d bytes, %v", len(blob), err)
	}
}

// coldFiles writes n files of size bytes (random, or compressible with
// text) to a Disk in a temp dir, and drops their chunks from the page
// cache, so that a Reader fetches ahead after its first chunk. It
// returns the files' refs and bytes, and the largest chunk's size.
func coldFiles(t *testing.T, n, size int, text bool) (*chunk.Disk, [][]chunk.Ref, [][]byte, int64) {
	t.Helper()
	d := newDisk(t)
	w := chunk.NewWriter(d, chunk.WriterOptions{})
	var refs [][]chunk.Ref
	var data [][]byte
	var largest int64
	for i := range n {
		b := randomData(uint64(100+i), size)
		if text {
			b = textData(uint64(100+i), size)
		}
		rs := write(t, w, b)
		if len(rs) < 2+chunk.ReadAhead {
			t.Fatalf("file %d: %d chunks, want at least %d", i, len(rs), 2+chunk.ReadAhead)
		}
		for _, r := range rs {
			evict(t, d.Path(r.ID))
			largest = max(largest, r.Size)
		}
		refs, data = append(refs, rs), append(data, b)
	}
	return d, refs, data, largest
}

// stall opens a Reader of pool over refs and reads its first bytes, as
// a download whose client then stops reading; it waits until what the
// Reader fetches ahead is loaded, so the pool's count is what it holds.
func stall(ctx context.Context, t *testing.T, pool *chunk.ReadPool, d *chunk.Disk, refs []chunk.Ref) *chunk.Reader {
	t.Helper()
	r := pool.NewReader(ctx, d, refs)
	t.Cleanup(func() { r.Close() })
	if _, err := io.ReadFull(r, make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	chunk.WaitAhead(r)
	return r
}

// stalledReadersHoldTheBudget: downloads whose clients stopped reading
// hold, all together, at most the pool's read-ahead budget beyond the
// chunk each is sending, whatever their number, by the pool's own
// count of the buffers they took. Before the budget each held its
// read-ahead (four chunks off the disk, about 5 MiB) on top of its
// chunk: 64 stalled downloads, 86 MiB more heap from the page cache and
// up to 320 MiB off the disk.
func stalledReadersHoldTheBudget(t *testing.T) {
	for _, c := range []struct {
		name    string
		readers int
		budget  int64 // ReadPoolOptions.AheadBudget
		text    bool
	}{
		{"one reader, the default budget", 1, 0, false},
		{"eight readers, random", 8, 6 * mib, false},
		{"eight readers, compressible", 8, 6 * mib, true},
		{"eight readers, the default budget", 8, 0, false},
		{"eight readers, no budget", 8, -1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, files, _, largest := coldFiles(t, c.readers, 8*mib, c.text)
			pool := chunk.NewReadPool(chunk.ReadPoolOptions{AheadBudget: c.budget})
			ahead := 0
			for _, refs := range files {
				ahead += chunk.FetchingAhead(stall(t.Context(), t, pool, d, refs))
			}
			m := pool.Memory()
			if c.budget == 0 && m.Budget != chunk.DefaultAheadBudget {
				t.Errorf("budget %d, want the default %d", m.Budget, chunk.DefaultAheadBudget)
			}
			own := chunk.ChunkBuffers(largest) // the chunk each sends
			t.Logf("%d chunks fetched ahead; held %.1f MiB, %.1f of them ahead, budget %.1f", ahead, float64(m.Held)/mib, float64(m.Ahead)/mib, float64(m.Budget)/mib)
			if m.Ahead > m.Budget || m.Held > m.Budget+int64(c.readers)*own {
				t.Errorf("%d stalled readers fetched %d chunks ahead and hold %d bytes, %d of them ahead; want at most the budget %d ahead and %d in all (budget plus %d each)",
					c.readers, ahead, m.Held, m.Ahead, m.Budget, m.Budget+int64(c.readers)*own, own)
			}
			switch {
			case c.budget < 0 && ahead != 0:
				t.Errorf("no budget: %d chunks fetched ahead, want none", ahead)
			case c.readers == 1 && ahead != chunk.ReadAhead:
				t.Errorf("one reader: %d chunks fetched ahead, want its whole read-ahead %d", ahead, chunk.ReadAhead)
			case c.budget >= 0 && ahead == 0:
				t.Error("no chunk fetched ahead: the case shows nothing")
			}
		})
	}
}

// spend opens stalled Readers over files until one of them finds the
// read-ahead budget spent (it fetches nothing ahead): the stalled ones
// and that one.
func spend(ctx context.Context, t *testing.T, pool *chunk.ReadPool, d *chunk.Disk, files [][]chunk.Ref) (stalled []*chunk.Reader, starved *chunk.Reader, file int) {
	t.Helper()
	for i, refs := range files {
		r := stall(ctx, t, pool, d, refs)
		if chunk.FetchingAhead(r) == 0 {
			return stalled, r, i
		}
		stalled = append(stalled, r)
	}
	t.Fatalf("%d stalled readers left room in a budget of %d: %+v", len(stalled), pool.Memory().Budget, pool.Memory())
	return nil, nil, 0
}

// stalledReadersDoNotHoldUpAnother: while stalled downloads hold the
// read-ahead budget, another, which found no room to fetch ahead, reads
// its file whole and right: a Reader never waits for room. (One that
// did would wait here until the context's minute ran out, and fail.)
func stalledReadersDoNotHoldUpAnother(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d, files, data, _ := coldFiles(t, 6, 8*mib, false)
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{AheadBudget: 6 * mib})
	stalled, starved, i := spend(ctx, t, pool, d, files)
	before := pool.Memory()
	var got bytes.Buffer
	got.Write(data[i][:10])
	if n, err := starved.WriteTo(&got); err != nil || !bytes.Equal(got.Bytes(), data[i]) {
		t.Fatalf("reading on while %d stalled readers hold the budget: %d bytes, %v; equal: %v", len(stalled), n, err, bytes.Equal(got.Bytes(), data[i]))
	}
	if after := pool.Memory(); after.Ahead != before.Ahead || after.Ahead > after.Budget {
		t.Errorf("the budget held %d bytes before the read and %d after, want the stalled readers' %d (at most %d)", before.Ahead, after.Ahead, before.Ahead, after.Budget)
	}
}

// readAheadBackOnceBudgetFrees: a Reader that found the read-ahead
// budget spent fetches ahead again at its next chunk once the stalled
// downloads that held it have closed: its whole read-ahead, which the
// default budget has room for.
func readAheadBackOnceBudgetFrees(t *testing.T) {
	d, files, data, _ := coldFiles(t, 8, 8*mib, false)
	pool := chunk.NewReadPool(chunk.ReadPoolOptions{})
	stalled, starved, i := spend(t.Context(), t, pool, d, files)
	for _, r := range stalled {
		r.Close()
	}
	if m := pool.Memory(); m.Ahead != 0 {
		t.Fatalf("all stalled readers closed, the budget still holds %d bytes", m.Ahead)
	}
	// Into the second chunk, which nobody has read.
	p := make([]byte, files[i][0].Size)
	if _, err := io.ReadFull(starved, p); err != nil || !bytes.Equal(p, data[i][10:10+len(p)]) {
		t.Fatalf("reading on: %v", err)
	}
	if n := chunk.FetchingAhead(starved); n != chunk.ReadAhead {
		t.Errorf("the budget free again: %d chunks fetched ahead, want %d", n, chunk.ReadAhead)
	}
}
