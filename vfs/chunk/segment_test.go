package chunk_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"testing"

	chunkers "github.com/PlakarKorp/go-cdc-chunkers"
	_ "github.com/PlakarKorp/go-cdc-chunkers/chunkers/fastcdc"

	"berth/vfs/chunk"
)

// TestSegments holds the cases of cutting a stream in segments: the cuts
// are those of go-cdc-chunkers' FastCDC reading the whole stream, whatever
// the segment size, the stream's length against it, and the data; an edit
// near a segment boundary adds only a few chunks. A bug found later
// becomes a row here.
func TestSegments(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"CutMatchesLibrary", cutMatchesLibrary},
		{"SegmentsCutAsOne", segmentsCutAsOne},
		{"EditNearBoundary", editNearBoundary},
		{"BudgetSharedByWrites", budgetSharedByWrites},
		{"StalledWritesHoldWhatCame", stalledWritesHoldWhatCame},
		{"StreamsOfABufferSizeKeepIt", streamsOfABufferSizeKeepIt},
		{"StreamsEndingAtBufferEnds", streamsEndingAtBufferEnds},
	} {
		t.Run(tc.name, tc.run)
	}
}

// libraryCuts returns the chunk lengths of the library's FastCDC over data,
// with the Writer's sizes.
func libraryCuts(t *testing.T, data []byte) []int {
	t.Helper()
	ch, err := chunkers.NewChunker("fastcdc-v1.0.0", bytes.NewReader(data), &chunkers.ChunkerOpts{
		MinSize: 256 << 10, NormalSize: 1 << 20, MaxSize: chunk.MaxChunkSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for {
		c, err := ch.Next()
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if len(c) > 0 {
			out = append(out, len(c))
		}
		if err == io.EOF {
			return out
		}
	}
}

func zeroData(_ uint64, n int) []byte { return make([]byte, n) }

var segmentKinds = []struct {
	name string
	gen  func(uint64, int) []byte
}{{"random", randomData}, {"text", textData}, {"mixed", mixedData}, {"zeros", zeroData}}

func cutMatchesLibrary(t *testing.T) {
	const lo, normal, hi = 256 << 10, 1 << 20, chunk.MaxChunkSize
	sizes := []int{0, 1, lo - 1, lo, lo + 1, normal - 1, normal, normal + 1, hi - 1, hi, hi + 1, 20*mib + 123}
	for _, k := range segmentKinds {
		for _, n := range sizes {
			data := k.gen(uint64(n), n)
			var got []int
			for pos := 0; pos < len(data); {
				c := chunk.Cut(data[pos:min(pos+hi, len(data))])
				got = append(got, c)
				pos += c
			}
			if want := libraryCuts(t, data); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%s/%d: cut %v, library %v", k.name, n, got, want)
			}
		}
	}
}

func segmentsCutAsOne(t *testing.T) {
	const seg = chunk.MaxChunkSize
	sizes := []int{0, 1, chunk.GrowTop, chunk.GrowTop + 1, seg - 1, seg, seg + 1, 2 * seg, 5*seg + 777}
	for _, k := range segmentKinds {
		for _, n := range sizes {
			data := k.gen(uint64(n)+9, n)
			want := libraryCuts(t, data)
			for _, opts := range []chunk.WriterOptions{
				{SegmentSize: seg, Segments: 2, Workers: 1},
				{SegmentSize: seg + 12345, Segments: 3},
				{SegmentSize: seg, SegmentBudget: 1}, // its own slot only: one at a time
				{SegmentSize: seg, SegmentBudget: seg},
				{},
			} {
				// Read whole, each Read filling the buffer, and in
				// pieces, so that join cuts while the segment fills
				// and the first segment's buffer grows under it.
				for _, pieces := range []int{0, 7919} {
					s := chunk.NewMemory()
					var r io.Reader = bytes.NewReader(data)
					if pieces > 0 {
						r = &pieceReader{r: r, n: pieces}
					}
					refs := writeFrom(t, chunk.NewWriter(s, opts), r, len(data))
					var got []int
					for _, r := range refs {
						got = append(got, int(r.Size))
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Fatalf("%s/%d, segments of %d, reads of %d: cuts %v, one chunker %v", k.name, n, opts.SegmentSize, pieces, got, want)
					}
					if back := readAll(t, s, refs); !bytes.Equal(back, data) {
						t.Fatalf("%s/%d, reads of %d: read back differs", k.name, n, pieces)
					}
				}
			}
		}
	}
}

// editNearBoundary changes one byte just before, at and just after a
// segment boundary (and a control far from one): the second version adds
// no more than a few chunks.
func editNearBoundary(t *testing.T) {
	const seg = chunk.MaxChunkSize
	for _, off := range []int{2*seg - 1, 2 * seg, 2*seg + 1, 2*seg + 300<<10, 5*seg/2 + 3} {
		data := randomData(77, 12*seg)
		s := chunk.NewMemory()
		var c counts
		w := chunk.NewWriter(s, chunk.WriterOptions{SegmentSize: seg, Segments: 2, Observer: c.observe})
		write(t, w, data)
		before := c.stored.Load()
		data[off] ^= 0xff
		write(t, w, data)
		if added := c.stored.Load() - before; added > 3 {
			t.Fatalf("one byte at %d (segments of %d) added %d chunks", off, seg, added)
		}
	}
}

// budgetSharedByWrites: Writes at once over a budget of one shared
// segment all finish (each has its own slot; the shared one passes
// between them) and store their streams whole.
func budgetSharedByWrites(t *testing.T) {
	const seg = chunk.MaxChunkSize
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{SegmentSize: seg, Segments: 3, SegmentBudget: seg})
	var wg sync.WaitGroup
	datas, refs := make([][]byte, 6), make([][]chunk.Ref, 6)
	for i := range datas {
		datas[i] = randomData(uint64(100+i), 5*seg+i*1000)
		wg.Go(func() {
			var err error
			if refs[i], _, err = w.Write(context.Background(), bytes.NewReader(datas[i]), -1); err != nil {
				t.Errorf("write %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for i, data := range datas {
		if back := readAll(t, s, refs[i]); !bytes.Equal(back, data) {
			t.Fatalf("write %d: read back differs", i)
		}
	}
}

// pieceReader reads at most n bytes at a time, as a network body does.
type pieceReader struct {
	r io.Reader
	n int
}

func (p *pieceReader) Read(b []byte) (int, error) { return p.r.Read(b[:min(len(b), p.n)]) }

// stallReader yields sent bytes, then tells stalled and waits for ctx:
// a client that stops sending.
type stallReader struct {
	ctx     context.Context
	rest    int
	stalled func()
	once    sync.Once
}

func (s *stallReader) Read(b []byte) (int, error) {
	if s.rest > 0 {
		n := min(len(b), s.rest, 64<<10)
		s.rest -= n
		return n, nil
	}
	s.once.Do(s.stalled)
	<-s.ctx.Done()
	return 0, s.ctx.Err()
}

// stalledWritesHoldWhatCame: Writes whose clients stop after their first
// bytes hold a buffer of about what they sent, twice it at most, not a
// whole segment each; the Writer's Held counts exactly what they hold,
// and nothing once they end. The Go heap agrees, with room for noise.
func stalledWritesHoldWhatCame(t *testing.T) {
	const writes = 16
	const grow = chunk.GrowFrom
	for _, tc := range []struct {
		name string
		sent int
		buf  int // what each Write holds
	}{
		{"one byte", 1, grow},
		{"under the first buffer", 100 << 10, grow},
		{"the first buffer exactly", grow, grow}, // it waits for a byte more to grow
		{"past the first buffer", grow + 1, 2 * grow},
		{"a megabyte and a byte", mib + 1, 2 * mib},
		{"past the last doubling", 2*mib + 1, chunk.GrowTop},
		{"three megabytes", 3 * mib, chunk.GrowTop},
		{"the last buffer under a chunk exactly", chunk.GrowTop, chunk.GrowTop},
		{"past the last buffer under a chunk", chunk.GrowTop + 1, chunk.DefaultSegmentSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := chunk.NewWriter(chunk.NewMemory(), chunk.WriterOptions{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			before := settledHeap()
			var stalled, done sync.WaitGroup
			stalled.Add(writes)
			for range writes {
				done.Go(func() {
					r := &stallReader{ctx: ctx, rest: tc.sent, stalled: stalled.Done}
					if _, _, err := w.Write(ctx, r, -1); !errors.Is(err, context.Canceled) {
						t.Errorf("stalled Write: err = %v, want context.Canceled", err)
					}
				})
			}
			stalled.Wait()
			if got, want := w.Held(), int64(writes*tc.buf); got != want {
				t.Errorf("%d Writes stalled after %d bytes hold %d bytes, want %d", writes, tc.sent, got, want)
			}
			// Whole segments would be 128 MiB. Allow each Write half its
			// buffer again, for the smaller ones it grew through that
			// the Writer keeps for the next uploads (at most Segments,
			// eight, of each size: half the Writes'), and 1 MiB for its
			// goroutines and the collector.
			if grew, most := settledHeap()-before, int64(writes*(tc.buf+tc.buf/2+mib)); grew > most {
				t.Errorf("heap grew by %d MiB with %d Writes stalled after %d bytes, want at most %d MiB", grew>>20, writes, tc.sent, most>>20)
			}
			cancel()
			done.Wait()
			if got := w.Held(); got != 0 {
				t.Errorf("after the Writes ended, Held = %d, want 0", got)
			}
		})
	}
}

// settledHeap is the bytes of the Go heap that something holds: after
// two collections, the first of which moves what sync.Pools keep to
// their victim caches and the second frees it.
func settledHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// edgeReader yields d in reads that stop one byte before, at and one
// byte after the end of each buffer a stream's first segment grows
// through, and of the segment; with eof, the read of the last bytes
// also says io.EOF; with fail, a read ends in it once at reaches it,
// with the bytes up to there.
type edgeReader struct {
	d     []byte
	pos   int
	edges []int
	eof   bool
	fail  error
	at    int
}

func (r *edgeReader) Read(b []byte) (int, error) {
	n := min(len(b), len(r.d)-r.pos)
	for _, e := range r.edges {
		for _, x := range []int{e - 1, e, e + 1} {
			if r.pos < x && r.pos+n > x {
				n = x - r.pos
			}
		}
	}
	if r.fail != nil && r.pos+n >= r.at {
		n = r.at - r.pos
		copy(b, r.d[r.pos:r.at])
		r.pos += n
		return n, r.fail
	}
	if n == 0 {
		return 0, io.EOF
	}
	copy(b, r.d[r.pos:r.pos+n])
	r.pos += n
	if r.eof && r.pos == len(r.d) {
		return n, io.EOF
	}
	return n, nil
}

// streamsEndingAtBufferEnds: a stream that ends, or whose reads stop,
// fail or run past its limit, one byte before, at or after the end of
// a buffer its first segment grows through, or of a segment that is no
// power of two, is cut as one chunker cuts it, or fails with its error;
// and Held is back to 0 once each Write has returned.
func streamsEndingAtBufferEnds(t *testing.T) {
	const seg = chunk.MaxChunkSize + 12345
	var edges []int
	for b := chunk.GrowFrom; b < chunk.MaxChunkSize; b *= 2 {
		edges = append(edges, b)
	}
	edges = append(edges, chunk.GrowTop, chunk.MaxChunkSize, seg, 2*seg)
	s := chunk.NewMemory()
	w := chunk.NewWriter(s, chunk.WriterOptions{SegmentSize: seg, Segments: 2, Workers: 1})
	errRead := errors.New("the client went away")
	for _, e := range edges {
		for _, n := range []int{e - 1, e, e + 1} {
			data := randomData(uint64(n), n)
			want := fmt.Sprint(libraryCuts(t, data))
			for _, tc := range []struct {
				name  string
				r     *edgeReader
				limit int64
				err   error
			}{
				{"reads stop at the ends", &edgeReader{d: data, edges: edges}, -1, nil},
				{"the last read says EOF", &edgeReader{d: data, edges: edges, eof: true}, -1, nil},
				{"a byte over the limit", &edgeReader{d: data, edges: edges}, int64(n - 1), chunk.ErrTooLarge},
				{"a read fails with its bytes", &edgeReader{d: data, edges: edges, fail: errRead, at: n}, -1, errRead},
			} {
				refs, size, err := w.Write(context.Background(), tc.r, tc.limit)
				if h := w.Held(); h != 0 {
					t.Errorf("%d bytes, %s: Held = %d after the Write, want 0", n, tc.name, h)
				}
				if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
					t.Errorf("%d bytes, %s: err = %v, want %v", n, tc.name, err, tc.err)
					continue
				}
				if err != nil {
					continue
				}
				var got []int
				for _, r := range refs {
					got = append(got, int(r.Size))
				}
				if size != int64(n) || fmt.Sprint(got) != want {
					t.Errorf("%d bytes, %s: size %d, cuts %v, one chunker %s", n, tc.name, size, got, want)
				} else if back := readAll(t, s, refs); !bytes.Equal(back, data) {
					t.Errorf("%d bytes, %s: read back differs", n, tc.name)
				}
			}
		}
	}
}

// endReader yields data, then records what its Writer holds when asked
// for more, and ends.
type endReader struct {
	data []byte
	w    *chunk.Writer
	held int64 // at the first Read past the data; -1 before it
}

func (e *endReader) Read(b []byte) (int, error) {
	if len(e.data) == 0 {
		if e.held < 0 {
			e.held = e.w.Held()
		}
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), 64<<10)], e.data)
	e.data = e.data[n:]
	return n, nil
}

// streamsOfABufferSizeKeepIt: a stream that ends exactly where a growing
// buffer fills is read to its end in that buffer: the Writer holds no
// larger one when it finds the end. A 2 MiB file took a whole 8 MiB
// segment, and copied itself into it, for nothing; a file of growTop
// would take one now.
func streamsOfABufferSizeKeepIt(t *testing.T) {
	for _, size := range []int{chunk.GrowFrom, 2 * chunk.GrowFrom, mib, 2 * mib, chunk.GrowTop} {
		data := randomData(uint64(size), size)
		s := chunk.NewMemory()
		w := chunk.NewWriter(s, chunk.WriterOptions{})
		r := &endReader{data: data, w: w, held: -1}
		refs := writeFrom(t, w, r, size)
		if r.held != int64(size) {
			t.Errorf("a stream of %d bytes: the Writer held %d at its end, want %d", size, r.held, size)
		}
		if back := readAll(t, s, refs); !bytes.Equal(back, data) {
			t.Fatalf("a stream of %d bytes: read back differs", size)
		}
	}
}
