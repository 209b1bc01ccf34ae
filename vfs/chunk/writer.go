package chunk

import (
	"context"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
)

// Chunk size bounds. FastCDC with normalization level 2 puts the average close
// to MinSize plus NormalSize (about 1.2 MiB measured on random data): large
// enough that per-chunk costs (a file, an fsync, a kv ref) stay small next to
// the bytes, small enough that an edit rewrites little.
const (
	minChunkSize    = 256 << 10
	normalChunkSize = 1 << 20
	maxChunkSize    = 4 << 20
)

// putDepth is how many chunk Puts, or batch Adds, one Write keeps in
// flight. A Put ends with fsyncs, and the disk store's Add with a direct
// write, that wait on the disk, not the CPU; overlapping several lets
// the workers go on hashing and compressing, and lets the file system
// share journal commits between them. Each in-flight Put holds its chunk
// (about 1 MiB) in memory.
const putDepth = 4

// WriterOptions tunes a Writer. The zero value is usable.
type WriterOptions struct {
	// Workers hash, compress and store chunks while segments of the
	// stream are cut on goroutines of their own. Zero means GOMAXPROCS.
	Workers int
	// SegmentSize is the size of the pieces a stream is read in and cut
	// in parallel; at least maxChunkSize (4 MiB). Zero means
	// DefaultSegmentSize.
	SegmentSize int
	// Segments is how many segments one Write holds at most (being read,
	// cut, or holding chunks not yet stored): its memory is about
	// Segments x SegmentSize, whatever the stream's length. Zero means
	// Workers+1, at least 3 and at most 8.
	Segments int
	// SegmentBudget, if positive, bounds the segment memory of all Writes
	// at once: each Write holds one segment of its own and takes any more
	// (up to Segments) from this many bytes shared by all (see slot).
	// Zero: no bound beyond Segments per Write.
	SegmentBudget int64
	// Observer, if set, is called once per chunk from a worker goroutine
	// (so it must be safe for concurrent use): stored is false when the
	// store already had the chunk, plain is its size and encoded the size
	// of the blob written (0 when not stored).
	Observer func(stored bool, plain, encoded int)
	// Pins, if set, holds every chunk a Write handles from before it asks
	// the store whether the chunk is there (see Pinner).
	Pins Pinner
	// Verified, if set, learns each blob a Write stores as verified: the
	// Writer hashed the plain bytes it made the blob from, so the pool's
	// first read of it checks the blob's XXH3 (about a hundredth of
	// the hash's cost) instead of hashing it in full. A download right
	// after an upload, the common case for a file shared or synced to
	// another device, then costs what later ones do.
	Verified *ReadPool

	// blobBuffers, for tests that size the arena, is the memory all
	// Writes share for the blobs on their way to the store (see
	// blobArena); at least the largest blob. Zero, what the daemon
	// runs with, means defaultBlobBuffers, more for a store that asks
	// for more Puts at once (Parallel).
	blobBuffers int
}

// Pinner keeps a garbage collector away from chunks that a Write has
// found in the store, or stored, and its caller has not referenced yet.
// Without it the store's answer to Has is stale the moment it is given:
// the last reference to a chunk found there may go, and the collector
// remove it, before the caller commits its own. The collector must check
// the pins and delete a chunk as one step with respect to Pin, so that a
// chunk pinned before the Writer's Has stays, and one removed first is
// not found and is stored again.
//
// When Write returns, exactly the IDs of the refs it returns are pinned,
// once for each ref (a chunk repeated in the stream, once per
// repetition); the caller unpins them once it has referenced them or
// handed them to its collector. The Writer unpins what it does not return.
//
// Pin may have to record the pin where collectors of other processes see
// it (vfs records it in the metadata store), so it can wait and fail: an
// error fails the Write, and the chunk is not pinned.
type Pinner interface {
	Pin(ctx context.Context, id ID) error
	Unpin(ID)
}

// Writer cuts streams into chunks and stores them. It keeps pools of
// segment and blob buffers, so one Writer should serve the whole process. It is safe for
// concurrent Write calls.
type Writer struct {
	store    Store
	workers  int
	segSize  int
	segments int
	observe  func(stored bool, plain, encoded int)
	pins     Pinner
	verified *ReadPool // nil: stored blobs are not remembered

	budget chan struct{} // slots of SegmentBudget; nil: none

	// held is the bytes of the buffers the Writes' segments hold now.
	held atomic.Int64

	segs *bufList // segment buffers of segSize
	// grows holds the buffers a stream's first segment grows through,
	// growFrom<<i bytes in grows[i] (see fill); growTop's are in bufs.
	grows []*bufList
	bufs  *bufList   // chunks across segments, and growTop buffers
	arena *blobArena // encoded blobs and raw copies (arena.go)

	// encoding bounds, over all Writes at once, the chunks being
	// compressed to the number of workers. The
	// work is CPU-bound, so more at a time would not go faster; but each
	// holds a blob buffer, and eight uploads with a pair of workers each
	// peaked at 264 MiB where four took 85.
	encoding chan struct{}

	// active counts the Writes under way: the last to end hands the
	// kept buffers to their pools (see bufList).
	active atomic.Int64
}

// NewWriter returns a Writer storing into store.
func NewWriter(store Store, opts WriterOptions) *Writer {
	w := &Writer{store: store, workers: opts.Workers, observe: opts.Observer, pins: opts.Pins, verified: opts.Verified}
	if w.workers <= 0 {
		w.workers = runtime.GOMAXPROCS(0)
	}
	w.segSize = opts.SegmentSize
	if w.segSize <= 0 {
		w.segSize = DefaultSegmentSize
	}
	w.segSize = max(w.segSize, maxChunkSize)
	w.segments = opts.Segments
	if w.segments <= 0 {
		w.segments = max(min(w.workers+1, maxSegments), 3)
	}
	w.segments = max(w.segments, 2)
	if opts.SegmentBudget > 0 {
		w.budget = make(chan struct{}, opts.SegmentBudget/int64(w.segSize))
	}
	w.encoding = make(chan struct{}, w.workers)
	// What one Write holds at once: its segments and a chunk across
	// two of them; the blobs of all, encoded and being stored, are cut
	// from the arena.
	if opts.blobBuffers <= 0 {
		// A store that wants more Puts at once than putDepth (S3, see
		// Parallel) gets room for its blobs in proportion: a Write
		// keeps that many in flight, each holding its blob until its
		// Put ends, and an arena sized for the disk held them to four.
		opts.blobBuffers = defaultBlobBuffers * max(putDepth, ParallelismOf(store)) / putDepth
	}
	w.segs = newBufList(w.segments + cap(w.budget))
	for size := growFrom; size < maxChunkSize; size *= 2 {
		w.grows = append(w.grows, newBufList(w.segments))
	}
	w.bufs = newBufList(2)
	w.arena = newBlobArena(opts.blobBuffers)
	return w
}

// Held is the bytes of the buffers that the Writes under way hold for the
// segments of their streams, being read, cut or stored: what uploads in
// flight cost in memory, beyond the blobs on their way to the store.
func (w *Writer) Held() int64 { return w.held.Load() }

// job is one chunk for a worker: plain is a slice of seg's buffer, or,
// for a chunk that spans two segments, of buf, which holds it.
type job struct {
	idx   int
	plain []byte
	seg   *segment
	buf   *[]byte
}

// Write reads r to EOF, cuts it into chunks, hashes, compresses and stores
// each chunk the store does not already have, and returns the ordered refs
// and the total plain size. When it returns nil every chunk is durable.
//
// The stream is read into segments (see segment.go) that are cut on
// goroutines of their own and joined in order with the cuts one chunker
// reading the whole stream would make, while Workers goroutines hash,
// encode and store the chunks in place. Memory stays flat whatever the
// stream length: Segments segments, plus a chunk per worker.
//
// When the store is a Batcher, the chunks of one Write go into one Batch
// committed before Write returns: the disk syncs them together instead of
// once per chunk.
//
// If limit >= 0 and r yields more than limit bytes, Write stops and returns
// ErrTooLarge. On any error (from r, ctx or the store) it stops the workers
// and returns the error with the refs of the chunks that may be in the store
// (no size): nothing references them, and the caller should hand them to its
// garbage collector. With a Batcher that is the chunks the store already had
// (the staged ones are aborted) plus, if Commit itself failed, the batch's
// chunks, some of which it may have made visible. With Pins set, the chunks
// of the refs returned, on success or failure, are pinned for the caller.
func (w *Writer) Write(ctx context.Context, r io.Reader, limit int64) (refs []Ref, size int64, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	w.active.Add(1)
	defer w.idle()

	// On an object store (Parallel) every Has and Put waits a round
	// trip: more Puts in flight, and workers beyond the cores, so that
	// the CPU goes on hashing while some wait on a Has.
	par := ParallelismOf(w.store)
	p := &pipeline{ctx: ctx, fail: cancel, sem: make(chan struct{}, max(putDepth, par)), refs: &refs}
	if b, ok := w.store.(Batcher); ok {
		p.batch = b.NewBatch()
	}
	var wg sync.WaitGroup
	jobs := make(chan job, 1)
	for range w.workers + par/2 {
		wg.Go(func() { w.work(p, jobs) })
	}

	src := &guardReader{ctx: ctx, r: r, limit: limit}
	segs := make(chan *segment, w.segments)
	var reader, cutters sync.WaitGroup
	reader.Go(func() { w.read(ctx, cancel, src, segs, &cutters) })
	size = w.join(p, segs, jobs)
	// After a failure join stops early: the reader sees it and ends; let
	// go of what it sent that join did not take.
	for s := range segs {
		w.release(s)
	}
	reader.Wait()
	cutters.Wait()
	close(jobs)
	wg.Wait()
	p.puts.Wait()

	err = context.Cause(ctx)
	if err == nil && limit >= 0 && size > limit {
		err = ErrTooLarge
	}
	if p.batch != nil {
		if err == nil {
			if err = p.batch.Commit(ctx); err == nil {
				return refs, size, nil
			}
			// Commit may have renamed some chunks into place: their
			// refs stay, for the caller's collector.
			p.staged = nil
		}
		p.batch.Abort()
		for _, i := range p.staged {
			w.unpin(refs[i].ID)
			refs[i].ID = ID{}
		}
	}
	if err != nil {
		return stored(refs), 0, err
	}
	return refs, size, nil
}

// pipeline is the state one Write shares with its workers.
type pipeline struct {
	ctx   context.Context
	fail  context.CancelCauseFunc
	batch Batch         // nil when the store is not a Batcher
	sem   chan struct{} // bounds Put (or Add) goroutines to putDepth
	puts  sync.WaitGroup

	mu     sync.Mutex // guards refs and staged
	refs   *[]Ref     // workers fill in IDs as the cutter appends
	staged []int      // indexes of refs whose chunks are only in the batch
}

// stored keeps the refs whose chunks reached the store, so that a caller
// whose write failed can hand them to the garbage collector.
func stored(refs []Ref) []Ref {
	var zero ID
	out := refs[:0]
	for _, r := range refs {
		if r.ID != zero {
			out = append(out, r)
		}
	}
	return out
}

// work hashes and encodes jobs until the channel closes. A new chunk goes
// to a goroutine (at most putDepth per Write, through sem) that adds it to
// the batch when there is one, else Puts it. Encoding holds a token of
// w.encoding. After the first error it only recycles buffers, so the
// cutter never blocks on a dead pipeline.
func (w *Writer) work(p *pipeline, jobs <-chan job) {
	for j := range jobs {
		if p.ctx.Err() != nil {
			w.done(j)
			continue
		}
		plain := j.plain
		id := Sum(plain)
		if err := w.pin(p.ctx, id); err != nil {
			p.fail(err)
			w.done(j)
			continue
		}
		has, err := w.store.Has(p.ctx, id)
		if err != nil || has {
			if err != nil {
				w.unpin(id)
				p.fail(err)
			} else {
				p.setRef(j.idx, id, false)
				if w.observe != nil {
					w.observe(false, len(plain), 0)
				}
			}
			w.done(j)
			continue
		}
		// Compression is skipped for chunks the store has: it is the
		// costly step. Every blob, raw ones too, is a copy in the arena,
		// so that the chunk's segment, or its buffer across segments,
		// goes back now, not after the Put's round trip. A chunk across
		// segments was stored raw from its own buffer before, without
		// the copy; but that buffer (4 MiB) was then held through the
		// Put, and the next one often had to be made beside it.
		blob, err := w.arena.alloc(p.ctx, maxBlobLen(len(plain)))
		if err != nil {
			w.unpin(id)
			w.done(j)
			continue
		}
		select {
		case w.encoding <- struct{}{}:
		case <-p.ctx.Done():
			w.unpin(id)
			w.arena.free(blob)
			w.done(j)
			continue
		}
		blob = w.arena.shrink(blob, len(encodeInto(blob, id, plain)))
		w.done(j)
		j = job{idx: j.idx}
		store := func() {
			var err error
			if p.batch != nil {
				err = p.batch.Add(p.ctx, id, blob)
			} else {
				err = w.store.Put(p.ctx, id, blob)
			}
			if err != nil {
				w.unpin(id)
				p.fail(err)
			} else {
				p.setRef(j.idx, id, p.batch != nil)
				if w.verified != nil {
					w.verified.checked.remember(id, blob)
				}
				if w.observe != nil {
					w.observe(true, len(plain), len(blob))
				}
			}
			w.done(j)
			w.arena.free(blob)
		}
		// A Put, and a batch's Add of a blob the disk store writes
		// directly (see direct.go), wait on the disk, not the CPU: the
		// worker goes on while they do, their blobs bounded by putDepth
		// and by the arena.
		<-w.encoding
		p.sem <- struct{}{}
		p.puts.Go(func() {
			defer func() { <-p.sem }()
			store()
		})
	}
}

// done gives back what a job held: its share of a segment, or its buffer.
func (w *Writer) done(j job) {
	if j.seg != nil {
		w.release(j.seg)
	}
	if j.buf != nil {
		w.bufs.put(j.buf)
	}
}

func (w *Writer) pin(ctx context.Context, id ID) error {
	if w.pins != nil {
		return w.pins.Pin(ctx, id)
	}
	return nil
}

func (w *Writer) unpin(id ID) {
	if w.pins != nil {
		w.pins.Unpin(id)
	}
}

func (p *pipeline) setRef(idx int, id ID, staged bool) {
	p.mu.Lock()
	(*p.refs)[idx].ID = id
	if staged {
		p.staged = append(p.staged, idx)
	}
	p.mu.Unlock()
}

// idle ends a Write's hold on the kept buffers; the last Write to end
// hands them to their pools.
func (w *Writer) idle() {
	if w.active.Add(-1) == 0 {
		w.segs.idle()
		for _, l := range w.grows {
			l.idle()
		}
		w.bufs.idle()
		w.arena.idle()
	}
}

// getBuf returns a kept buffer, or a new one of length size.
func (w *Writer) getBuf(l *bufList, size int) *[]byte {
	if b := l.get(size); b != nil {
		return b
	}
	// Aligned, so that the disk store writes blobs and raw chunks
	// from them without staging them (see direct.go).
	b := alignedSlice(size)
	return &b
}

// guardReader stops the chunker when ctx ends or the limit is passed, so an
// oversized or abandoned upload is not read to its end.
type guardReader struct {
	ctx   context.Context
	r     io.Reader
	limit int64
	n     int64
}

func (g *guardReader) Read(p []byte) (int, error) {
	if err := g.ctx.Err(); err != nil {
		return 0, context.Cause(g.ctx)
	}
	if g.limit >= 0 {
		// Read at most one byte past the limit: enough to tell.
		if rest := g.limit + 1 - g.n; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	if g.limit >= 0 && g.n > g.limit {
		return n, ErrTooLarge
	}
	return n, err
}
