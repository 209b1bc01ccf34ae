package chunk

import (
	"context"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// DefaultSegmentSize is the size of the pieces a Writer reads a stream in
// and cuts in parallel. One chunker reading a stream runs at 1 to 2 GB/s
// on one core and would bound an upload; cut in segments on several
// goroutines, and joined as below, the cuts are exactly those of one
// chunker. Each segment boundary costs re-cutting about one chunk (the
// join) and copying the chunk that spans it, some 15% of a segment at
// 8 MiB; larger segments cost less of that and more memory. With the
// default Segments, a 2-core server holds 3 x 8 MiB per upload.
const DefaultSegmentSize = 8 << 20

// growFrom is the buffer the first segment of a stream starts in. It
// doubles as bytes arrive (512 KiB, 1 and 2 MiB), then grows to growTop,
// then becomes a whole segment (see grown), and the segments after it
// start whole: a Write holds at most twice the bytes its client sent
// (and growFrom before that), give or take the 8 KiB by which growTop
// falls short of half a segment, until about a chunk's worth (4 MiB)
// has come, and a whole segment from there on. An upload whose client
// stalled after its first bytes held a whole segment before (64 of
// them, 385 MiB of heap), which let anyone who can start uploads hold
// the server's memory for nothing; and one that stalled past 2 MiB
// still did (16 of them, 139 MiB of heap), until growTop. A quarter of a normal
// chunk: smaller buffers would add copies and gain little. A fast
// upload pays them once: under 8 MiB of memmove, 4 MiB of it only for
// streams past growTop (files of 4 and 5 MiB, into memory: 1.30 and
// 1.11 CPU s/GiB where they took 1.01 and 0.94 without growTop, the
// best of ten runs of BenchmarkWriteFileSizes each on a loaded VM).
const growFrom = minChunkSize

// growTop is the last buffer the first segment grows through before it
// becomes a whole segment: the largest that keeps the rule fill relies
// on to give a replaced buffer back at once, that join never reads a
// buffer being filled. join reads the first segment while it fills only
// through await, for q+maxChunkSize bytes past its cut q >= 0 (the first
// segment has no carry before it; only later ones, which start whole,
// are awaited for less); await returns the buffer only once filled says
// it holds that many, and fill stores a buffer before any filled past
// the one before it, so the buffer join loads then is at least
// maxChunkSize long: the whole segment, which is never replaced. Any
// length under maxChunkSize would do; 4 KiB under it ends the buffer on
// a page, as it starts (it is cut from an aligned chunk buffer, see
// segBuf).
const growTop = maxChunkSize - dioAlign

// maxSegments caps the default Segments on machines with many cores:
// eight segments in flight keep 16 cores busy with one stream, and more
// would only hold memory.
const maxSegments = 8

// segment is one piece of a stream being written. Once read whole it is
// cut on a goroutine of its own (cutAll) as if a chunk began where join
// stands in it (at first, its start). FastCDC's cut depends only on the
// bytes since the previous cut, so once the cuts of the whole stream,
// followed across the boundary from the previous segment, land on one of
// the segment's own, the two agree from there on: join follows the true
// cuts one by one only until they meet (usually within a chunk or two)
// and takes the segment's own after that. While a segment is still being
// read, join cuts what has arrived itself, so a slow stream's chunks are
// stored as they come, as with one chunker.
type segment struct {
	// buf is the buffer being read into. In a stream's first segment it
	// is replaced by a larger one holding the same bytes when it fills
	// (see fill); the reader stores the new buf before any filled past
	// the old one, so the buf join loads after filled holds what filled
	// says.
	buf atomic.Pointer[[]byte]

	filled   atomic.Int64  // bytes read so far
	progress chan struct{} // a read added bytes (capacity 1)
	complete chan struct{} // closed once data and last are set
	data     []byte        // the bytes read
	last     bool          // the stream ends with this segment

	from     atomic.Int64  // a true cut join has reached: cutAll starts there
	cut      chan struct{} // closed once starts and resolved are set (or the read failed)
	starts   []int         // from and the end of each genuine chunk cut from it (see genuine)
	resolved int           // the last of starts: after it the cuts depend on the next segment

	refs   atomic.Int32  // join's, the reader's (then cutAll's), one per job
	tokens chan struct{} // the Write's segments in flight
	// slot is where s's memory slot goes back to: the Write's own or
	// the Writer's shared budget (see Writer.slot); nil when unbounded.
	slot chan struct{}
}

// cutAll finds the segment's own cuts from s.from. Near its end a cut
// that only the end of the data made is not kept (unless the stream
// ends there): the next segment decides it.
func (s *segment) cutAll() {
	d := s.data
	pos := int(s.from.Load())
	s.starts = append(make([]int, 0, (len(d)-pos)/normalChunkSize+2), pos)
	for pos < len(d) {
		n := min(len(d)-pos, maxChunkSize)
		p := cut(d[pos : pos+n])
		if !s.last && !genuine(p, n) {
			break
		}
		pos += p
		s.starts = append(s.starts, pos)
	}
	s.resolved = pos
	close(s.cut)
}

// read fills segments from src in order, handing each to join before it
// is read and starting to cut it once it is, holding at most w.segments
// at once. It closes segs when the stream ends, or after cancelling ctx
// with the reader's error.
func (w *Writer) read(ctx context.Context, fail context.CancelCauseFunc, src io.Reader, segs chan<- *segment, cutters *sync.WaitGroup) {
	defer close(segs)
	tokens := make(chan struct{}, w.segments)
	own := make(chan struct{}, 1)
	size := growFrom // the buffer the next segment starts in
	for {
		select {
		case tokens <- struct{}{}:
		case <-ctx.Done():
			return
		}
		s := &segment{
			tokens:   tokens,
			progress: make(chan struct{}, 1), complete: make(chan struct{}), cut: make(chan struct{}),
		}
		if !w.slot(ctx, s, own) {
			<-tokens
			return
		}
		s.buf.Store(w.segBuf(size))
		s.refs.Store(2)
		// segs holds as many as there are tokens: this never waits.
		segs <- s
		n, err := w.fill(src, s)
		s.data, s.last = (*s.buf.Load())[:n], err == io.EOF
		size = w.segSize
		close(s.complete)
		if (err != nil && err != io.EOF) || n == 0 {
			if err != nil && err != io.EOF {
				fail(err)
			}
			close(s.cut)
			w.release(s)
			return
		}
		cutters.Go(func() {
			s.cutAll()
			w.release(s)
		})
		if s.last {
			return
		}
	}
}

// fill reads into s's buffer until the segment is full (nil) or r ends
// (io.EOF) or fails, telling s of its progress. A full buffer smaller
// than a segment is replaced by a larger one holding the same bytes
// (see grown). Not io.ReadFull: a cut-off body's ErrUnexpectedEOF must
// stay an error, not be taken for the end of a short segment.
func (w *Writer) fill(r io.Reader, s *segment) (int, error) {
	buf := *s.buf.Load()
	n := 0
	for {
		if n == len(buf) {
			if n >= w.segSize {
				return n, nil
			}
			// A stream that ends right here (a file of exactly 256 KiB,
			// 2 MiB or growTop) needs no larger buffer: one byte read
			// first tells.
			var probe [1]byte
			m, err := r.Read(probe[:])
			for m == 0 && err == nil {
				m, err = r.Read(probe[:])
			}
			if m == 0 {
				return n, err
			}
			// The buffer replaced goes back at once: join never read it
			// (see growTop).
			old := s.buf.Load()
			nb := w.segBuf(w.grown(n))
			copy(*nb, buf[:n])
			s.buf.Store(nb)
			w.putSegBuf(old)
			buf = *nb
			buf[n] = probe[0]
			n++
			s.fillTo(n)
			if err != nil {
				return n, err
			}
			continue
		}
		m, err := r.Read(buf[n:])
		if m > 0 {
			n += m
			s.fillTo(n)
		}
		if err != nil {
			return n, err
		}
	}
}

// fillTo tells join that s holds n bytes.
func (s *segment) fillTo(n int) {
	s.filled.Store(int64(n))
	select {
	case s.progress <- struct{}{}:
	default:
	}
}

// grown is the size of the buffer that replaces a full one of n bytes in
// a stream's first segment: twice n while that is under maxChunkSize,
// then growTop, then a whole segment. A segment of at most twice n (of 4
// MiB, in tests) comes at once, without growTop's copy for nothing.
func (w *Writer) grown(n int) int {
	switch {
	case 2*n < maxChunkSize:
		return 2 * n
	case n < growTop && 2*n < w.segSize:
		return growTop
	}
	return w.segSize
}

// segBuf returns a segment buffer of size bytes, a whole segment or one
// grown returns, from its pool or new, and counts it in w.held.
func (w *Writer) segBuf(size int) *[]byte {
	w.held.Add(int64(size))
	switch size {
	case w.segSize:
		return w.getBuf(w.segs, size)
	case growTop:
		// Cut from a chunk buffer, the kind a chunk across segments
		// takes: once a large stream's first segment is whole it goes
		// back there and carries that chunk, where a pool of its own
		// would keep 4 MiB through the rest of the upload for the next
		// one.
		b := w.getBuf(w.bufs, maxChunkSize)
		*b = (*b)[:growTop]
		return b
	}
	return w.getBuf(w.grows[growClass(size)], size)
}

// putSegBuf gives back a buffer segBuf returned.
func (w *Writer) putSegBuf(b *[]byte) {
	w.held.Add(-int64(len(*b)))
	switch len(*b) {
	case w.segSize:
		w.segs.put(b)
	case growTop:
		w.bufs.put(b)
	default:
		w.grows[growClass(len(*b))].put(b)
	}
}

// growClass is the pool of a growing buffer of size bytes under
// maxChunkSize: growFrom<<growClass(size) == size.
func growClass(size int) int { return bits.Len(uint(size/growFrom)) - 1 }

// await waits until s holds at least need bytes or is read whole, and
// returns what it holds and whether that is all; nil when p.ctx ends.
func await(p *pipeline, s *segment, need int) ([]byte, bool) {
	for {
		select {
		case <-s.complete:
			return s.data, true
		default:
		}
		if f := int(s.filled.Load()); f >= need {
			return (*s.buf.Load())[:f], false
		}
		select {
		case <-s.progress:
		case <-s.complete:
		case <-p.ctx.Done():
			return nil, false
		}
	}
}

// slot takes the memory for segment s, when the Writer bounds it (see
// WriterOptions.SegmentBudget): the Write's own slot if it is free, else
// one of the budget's, shared by all Writes, waiting for either. Every
// Write can thus always go on with one segment at a time, whatever the
// others hold (a slow client's upload holds its own slot, not everyone's),
// and cuts in parallel with the budget's. False when ctx ends first.
func (w *Writer) slot(ctx context.Context, s *segment, own chan struct{}) bool {
	if w.budget == nil {
		return true
	}
	select {
	case own <- struct{}{}:
		s.slot = own
		return true
	default:
	}
	select {
	case own <- struct{}{}:
		s.slot = own
	case w.budget <- struct{}{}:
		s.slot = w.budget
	case <-ctx.Done():
		return false
	}
	return true
}

// release drops one hold on s; the last gives its buffer and its slot
// back and lets the reader take another segment.
func (w *Writer) release(s *segment) {
	if s.refs.Add(-1) == 0 {
		w.putSegBuf(s.buf.Load())
		if s.slot != nil {
			<-s.slot
		}
		<-s.tokens
	}
}

// join turns the segments, in order, into the chunks one chunker reading
// the whole stream would cut, numbers them in p.refs and hands them to
// the workers. It returns the bytes it handed on; it stops early when
// p.ctx ends, leaving the rest of segs to its caller.
func (w *Writer) join(p *pipeline, segs <-chan *segment, jobs chan<- job) (size int64) {
	// carry is the tail of the previous segment after its last true cut:
	// the start of a chunk across the boundary.
	var carry *[]byte
	emit := func(j job) bool {
		if j.seg != nil {
			j.seg.refs.Add(1)
		}
		p.mu.Lock()
		j.idx = len(*p.refs)
		*p.refs = append(*p.refs, Ref{Size: int64(len(j.plain))})
		p.mu.Unlock()
		size += int64(len(j.plain))
		select {
		case jobs <- j:
			return true
		case <-p.ctx.Done():
			w.done(j)
			return false
		}
	}
	for s := range segs {
		q := 0 // the true cut, in s
		if carry != nil {
			// The carry ended where no cut was found in it, so the
			// chunk across the boundary ends in s. It is genuine: either
			// maxChunkSize bytes are in view or the stream ends in s.
			c := *carry
			d, _ := await(p, s, maxChunkSize-len(c))
			if d == nil {
				w.bufs.put(carry)
				w.release(s)
				return size
			}
			q = cutSplit(c, d) - len(c)
			*carry = append(*carry, d[:q]...)
			j := job{plain: *carry, buf: carry}
			carry = nil
			if !emit(j) {
				w.release(s)
				return size
			}
		}
		// While s is being read, cut what has come.
		for {
			s.from.Store(int64(q))
			d, whole := await(p, s, q+maxChunkSize)
			if d == nil {
				w.release(s)
				return size
			}
			if whole {
				break
			}
			c := cut(d[q : q+maxChunkSize])
			if !emit(job{plain: d[q : q+c], seg: s}) {
				w.release(s)
				return size
			}
			q += c
		}
		<-s.cut
		if p.ctx.Err() != nil {
			w.release(s)
			return size
		}
		d := s.data
		i := 0
	follow:
		for q < len(d) {
			for i < len(s.starts) && s.starts[i] < q {
				i++
			}
			if i < len(s.starts) && s.starts[i] == q {
				// Met the segment's own cuts: they are the true ones
				// from here to where they stop.
				for ; i+1 < len(s.starts); i++ {
					if !emit(job{plain: d[s.starts[i]:s.starts[i+1]], seg: s}) {
						w.release(s)
						return size
					}
				}
				q = s.resolved
				break follow
			}
			n := min(len(d)-q, maxChunkSize)
			c := cut(d[q : q+n])
			if !s.last && !genuine(c, n) {
				break
			}
			if !emit(job{plain: d[q : q+c], seg: s}) {
				w.release(s)
				return size
			}
			q += c
		}
		if q < len(d) {
			carry = w.getBuf(w.bufs, maxChunkSize)
			*carry = append((*carry)[:0], d[q:]...)
		}
		w.release(s)
	}
	if carry != nil {
		// The stream ended on a segment boundary: the tail, in which no
		// cut was found, is the last chunk, as for one chunker at EOF.
		if p.ctx.Err() == nil {
			emit(job{plain: *carry, buf: carry})
		} else {
			w.bufs.put(carry)
		}
	}
	return size
}
