package chunk

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/bits"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"
)

// Reader reads a file's contents from its chunk list. It is an io.Reader,
// io.Seeker and io.ReaderAt, so it can be handed to http.ServeContent. It
// fetches one chunk at a time, verifying each against its ID, and keeps the
// current one. While a caller reads sequentially it fetches the next chunk in
// the background, so fetching and decoding overlap with the consumer; random
// access fetches only what is asked for.
//
// Methods are safe for concurrent use (ReadAt callers may run in parallel;
// they are served one at a time).
type Reader struct {
	ctx   context.Context
	store Store
	refs  []Ref
	offs  []int64 // offs[i] is the offset of chunk i; offs[len(refs)] is the size
	dec   *zstd.Decoder
	pool  *ReadPool  // nil: buffers are not reused, dec is the Reader's own
	held  [2]*[]byte // pooled buffers behind data, returned when data changes
	// lent is set once a write of CopyTo's failed: the writer may still
	// read what it was given (Go's HTTP/2 server returns from a write as
	// soon as the client resets the stream, while the frame may still be
	// copied from those bytes), so the buffers held then are left to the
	// collector, never handed to another download through the pool.
	lent  bool
	ahead int // chunks fetched ahead of a sequential reader, at most
	// out is how many of the pool's buffers r has and has not given
	// back (ReadPool.out), and outBytes their capacity; the pool's mu
	// guards them.
	out      int
	outBytes int64

	mu      sync.Mutex
	pos     int64
	cur     int // index of data, or -1
	data    []byte
	last    int            // index of the last chunk loaded, to spot sequential reads
	carry   []byte         // CopyTo's piece of a record across chunks, recordSize, made when needed
	loads   []*fetch       // loads of the chunks after cur, in order
	fetches sync.WaitGroup // all background loads, abandoned ones too
	cancel  context.CancelFunc
	closed  bool
}

// fetch is one background chunk load.
type fetch struct {
	idx  int
	done chan struct{}
	data []byte
	bufs [2]*[]byte
	warm bool
	err  error
	// room is what f holds of its pool's read-ahead budget
	// (ReadPool.used): what reserve took for it before it started, then
	// the buffers it kept once done (settle). The Reader gives it back
	// when f becomes its current chunk, or once f is done and dropped.
	room int64
	// holds counts f's goroutine and, until it drops f, its Reader: the
	// last to let go of a dropped fetch gives its buffers and room back
	// (letGo). A fetch the Reader takes as its current chunk is never
	// let go of by it.
	holds atomic.Int32
}

// ReadPool is what Readers of one process share: a zstd decoder (safe for
// concurrent DecodeAll) and chunk buffers, so that reading a file does not
// allocate a decoder and a buffer per chunk. A large download otherwise
// makes its whole size in garbage, which the runtime lets pile up before it
// collects. Create one with NewReadPool.
type ReadPool struct {
	dec *zstd.Decoder
	// bufs keeps chunk buffers while a Reader is open, whatever the
	// collector does (see bufList), up to what the open Readers may still
	// ask for (spare): none once the last has closed, when the kept
	// buffers go to bufList's sync.Pool.
	// With a sync.Pool alone, the daemon's collections under its memory
	// limit emptied the pool during a download: each 1 GiB GET of a cold
	// file allocated fresh buffers, which the collector cleared, the
	// scavenger gave back and the next allocation faulted in again (3 to
	// 5% of the server's CPU in perf, with memclr and madvise's TLB
	// flushes).
	bufs *bufList
	// mu guards allowed and out, which bound what bufs keeps (spare).
	mu sync.Mutex
	// allowed sums the open Readers' allowance (Reader.allowance); 0
	// when none is open.
	allowed int
	// out counts the buffers handed to open Readers and not given back,
	// the sum of their Reader.out: those they hold, fetch ahead, or
	// dropped (a failed write's, a chunk that failed to load); outBytes
	// is their capacity (Reader.outBytes).
	out      int
	outBytes int64
	ahead    int
	// budget is the room, in bytes of buffers, that the chunks all
	// Readers fetch ahead share (ReadPoolOptions.AheadBudget); used is
	// what they hold of it (fetch.room), guarded by mu. A Reader's
	// current chunk is its own and takes none: a download always goes
	// on, and a stalled one holds that chunk and what it fetched ahead
	// while there was room, not a share of every other download's.
	budget, used int64
	// checked lets a blob verified once be checked by its XXH3 after.
	checked checked
}

// ReadPoolOptions tune a ReadPool.
type ReadPoolOptions struct {
	// ReadAhead is how many chunks a sequential Reader fetches, verifies
	// and decodes ahead of the one being sent, each on its own goroutine;
	// each costs up to two chunk buffers (about 2.5 MiB with 1 MiB
	// chunks) per download in progress. 0 means DefaultReadAhead;
	// negative means none (each chunk is fetched when it is read).
	ReadAhead int
	// AheadBudget bounds, in bytes of chunk buffers, what the chunks
	// fetched ahead hold over all Readers of the pool at once: a Reader
	// fetches a chunk ahead only while the budget has room for its
	// buffers (a blob's and a decoded copy's, while it loads), and
	// fetches fewer ahead, down to none, when it has not: it never
	// waits for room, so a slow client's download, holding what it
	// fetched, neither stalls nor fails another. The chunk a Reader
	// sends is outside the budget. 0 means DefaultAheadBudget;
	// negative means none (no chunk is fetched ahead).
	AheadBudget int64
}

// DefaultAheadBudget is ReadPoolOptions.AheadBudget's default: room for
// one download's DefaultReadAhead chunks of up to about 1.75 MiB in
// flight, each a blob buffer and one for its decoded copy (2.5 MiB for
// a chunk of 1.2 MiB, the average, until a raw one gives its copy's
// back), and for those of a second download once the first's are
// loaded. A single cold 128 MiB read kept all four ahead at 109 of its
// 113 chunks, the budget at most 14 MiB full. Without it, N stalled
// downloads held N times their read-ahead (up to about 5 MiB each off
// the disk).
const DefaultAheadBudget = 16 << 20

// setting is an option that 0 leaves at its default and a negative
// value turns off (0).
func setting[T int | int64](v, def T) T {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// NewReadPool returns a pool for Readers.
func NewReadPool(opts ReadPoolOptions) *ReadPool {
	dec, err := zstd.NewReader(nil,
		zstd.WithDecoderConcurrency(0), // GOMAXPROCS
		zstd.WithDecoderMaxMemory(2*maxChunkSize))
	if err != nil {
		panic(err) // only invalid options fail, ours are constant
	}
	ahead := setting(opts.ReadAhead, DefaultReadAhead)
	budget := setting(opts.AheadBudget, DefaultAheadBudget)
	// The current chunk, the ones fetched ahead and one being replaced,
	// each a blob and its decoded copy.
	return &ReadPool{dec: dec, ahead: ahead, budget: budget, bufs: newBufList(2 * (ahead + 2))}
}

// ReadMemory is what a pool's open Readers hold, in bytes of chunk
// buffers.
type ReadMemory struct {
	// Held is the capacity of the buffers the open Readers have taken
	// and not given back: their current chunks, those fetched ahead,
	// and any left to the collector (a failed write's).
	Held int64
	// Ahead is the part of the read-ahead budget in use by the chunks
	// fetched ahead and not yet sent: the buffers of those loaded, and
	// for those loading their blob's buffer and the room of a decoded
	// copy, taken or not yet (so it may be more than what they hold).
	Ahead int64
	// Budget is the read-ahead budget (ReadPoolOptions.AheadBudget).
	Budget int64
}

// Memory reports what p's Readers hold.
func (p *ReadPool) Memory() ReadMemory {
	p.mu.Lock()
	defer p.mu.Unlock()
	return ReadMemory{Held: p.outBytes, Ahead: p.used, Budget: p.budget}
}

// NewReader is NewReader with the pool's decoder, buffers and read-ahead,
// or the store's Parallelism where that is more (see Parallel): on an
// object store each fetch waits a round trip, and only many in flight
// keep a download going.
func (p *ReadPool) NewReader(ctx context.Context, store Store, refs []Ref) *Reader {
	r := newReader(ctx, store, refs)
	r.pool, r.dec, r.ahead = p, p.dec, max(p.ahead, ParallelismOf(store))
	p.mu.Lock()
	p.allowed += r.allowance()
	p.mu.Unlock()
	return r
}

// allowance is how many buffers of its pool r may have at once: a blob
// and its decoded copy for the current chunk, those fetched ahead and
// one being replaced, as NewReadPool sizes the pool's list for.
func (r *Reader) allowance() int { return 2 * (r.ahead + 2) }

// get hands r a chunk buffer of at least need bytes: a kept one that
// fits, or a new one of need's size class.
//
// Every buffer was the largest chunk's blob (4 MiB) before, whatever
// the chunk: a download's allowance of twelve was 48 MiB of the
// daemon's 72 MiB soft memory limit, for chunks of about 1 MiB, and the
// collector ran as if all of it were in use.
func (p *ReadPool) get(r *Reader, need int) *[]byte {
	b := p.take(need)
	p.mu.Lock()
	p.lend(r, b)
	p.mu.Unlock()
	return b
}

// getAhead is get for the decoded copy of a chunk fetched ahead, whose
// room holds need's size class for it (reserve): a kept buffer larger
// than that takes the difference from the budget too, while it has
// it, else a new buffer of the size class is made. Kept buffers fit
// only their own size class otherwise, and a compressible file's read
// allocated 162 MB for 256 MiB instead of 10, at twice the CPU.
func (p *ReadPool) getAhead(r *Reader, need int, room *int64) *[]byte {
	b := p.take(need)
	extra := int64(cap(*b) - bufSize(need))
	p.mu.Lock()
	if extra > 0 && p.used+extra > p.budget {
		p.mu.Unlock()
		p.bufs.put(b)
		nb := alignedSlice(bufSize(need))[:0]
		b, extra = &nb, 0
		p.mu.Lock()
	}
	if extra > 0 {
		p.used += extra
		*room += extra
	}
	p.lend(r, b)
	p.mu.Unlock()
	return b
}

// take is a kept buffer of at least need bytes, or a new one of need's
// size class, not yet counted as r's.
func (p *ReadPool) take(need int) *[]byte {
	if b := p.bufs.get(need); b != nil {
		return b
	}
	// Aligned and rounded to whole blocks, so that a direct read of a
	// cold blob (readCold) lands in it instead of a buffer of its own.
	b := alignedSlice(bufSize(need))[:0]
	return &b
}

// lend counts b as r's. p.mu is held.
func (p *ReadPool) lend(r *Reader, b *[]byte) {
	n := int64(cap(*b))
	r.out++
	p.out++
	r.outBytes += n
	p.outBytes += n
}

// keep makes b hold s, a store's or decoder's result in b's array or,
// when it did not fit, in one it grew, and counts the difference.
func (p *ReadPool) keep(r *Reader, b *[]byte, s []byte) {
	if d := int64(cap(s) - cap(*b)); d != 0 {
		p.mu.Lock()
		r.outBytes += d
		p.outBytes += d
		p.mu.Unlock()
	}
	*b = s[:0]
}

// reserve takes room in the read-ahead budget for r to fetch a chunk of
// size plain bytes ahead: the buffer for its blob, taken now (when the
// store reads into one: into; else the blob's size class, which the
// store allocates) and charged at its capacity, and the size class of a
// decoded copy, which the fetch takes only if the chunk is compressed
// (getAhead). ok is false, with nothing taken,
// when the budget lacks that room. The blob's buffer is taken before
// the fetch starts, so that a kept one larger than the chunk's size
// class is still reused and the budget holds what it is; settle trues
// the room up to what the fetch kept.
//
// Taken up front whatever the chunk, the decoded copy's buffer went
// back unused from every raw chunk, and each download started with
// nearly twice the fresh buffers (BenchmarkReadCPUCold: 6 to 7.5 MB
// allocated a 256 MiB read against 3.5 to 4.3, and 5% more CPU).
func (p *ReadPool) reserve(r *Reader, size int64, into bool) (blob *[]byte, room int64, ok bool) {
	need := blobRoom(size)
	decoded := int64(bufSize(int(size)))
	p.mu.Lock()
	short := p.used+int64(bufSize(need))+decoded > p.budget
	p.mu.Unlock()
	if short {
		return nil, 0, false
	}
	room = int64(bufSize(need))
	if into {
		blob = p.take(need)
		room = int64(cap(*blob))
	}
	room += decoded
	p.mu.Lock()
	if p.used+room > p.budget {
		p.mu.Unlock()
		if blob != nil {
			p.bufs.put(blob)
		}
		return nil, 0, false
	}
	p.used += room
	if blob != nil {
		p.lend(r, blob)
	}
	p.mu.Unlock()
	return blob, room, true
}

// settle makes f's room what its buffers hold now that it is done: the
// one its chunk did not need went back, and a store may have grown
// one. A store that brings its own blobs keeps, for a raw chunk, the
// blob the data is a slice of.
func (p *ReadPool) settle(f *fetch, into bool) {
	var room int64
	for _, b := range f.bufs {
		if b != nil {
			room += int64(cap(*b))
		}
	}
	if !into && f.bufs[1] == nil {
		room += int64(cap(f.data))
	}
	p.mu.Lock()
	p.used += room - f.room
	f.room = room
	p.mu.Unlock()
}

// unreserve gives back room of the read-ahead budget.
func (p *ReadPool) unreserve(room int64) {
	if room == 0 {
		return
	}
	p.mu.Lock()
	p.used -= room
	p.mu.Unlock()
}

// bufSize is the capacity of a new buffer for need bytes: need's size
// class, but never more than the room of the longest blob a Writer
// stores. That room, 4 MiB and a block, is just past a power of two, and
// its class is 5 MiB: the chunks of a zero-filled file (a disk image)
// are all of the largest size, and their buffers were a quarter more
// than the 4 MiB each had before size classes.
func bufSize(need int) int {
	if room := blobRoom(maxChunkSize); need <= room {
		return min(sizeClass(need), room)
	}
	return sizeClass(need)
}

// sizeClass rounds n up to a quarter of the power of two below it, and
// to whole blocks: buffers of a few sizes fit chunks of many, wasting at
// most a quarter.
func sizeClass(n int) int {
	step := dioAlign
	if n > 4*dioAlign {
		step = 1 << (bits.Len(uint(n-1)) - 3)
	}
	return (n + step - 1) &^ (step - 1)
}

// blobRoom is the buffer a chunk of size plain bytes is read into: its
// longest blob, raw, in whole blocks for a direct read (a sealed blob of
// a chunk shorter than a block, longer than the raw one, fits too).
func blobRoom(size int64) int {
	return (1 + int(size) + dioAlign - 1) &^ (dioAlign - 1)
}

// put takes back buffers of r's, and keeps no more than the open Readers
// may still ask for.
func (p *ReadPool) put(r *Reader, bufs [2]*[]byte) {
	n, size := 0, int64(0)
	for _, b := range bufs {
		if b != nil {
			size += int64(cap(*b))
			p.bufs.put(b)
			n++
		}
	}
	p.mu.Lock()
	r.out -= n
	p.out -= n
	r.outBytes -= size
	p.outBytes -= size
	spare := p.spare()
	p.mu.Unlock()
	p.bufs.trim(spare)
}

// spare is how many buffers the open Readers may still ask for beyond
// those they have (their allowance at once, less what they have out).
// Kept beyond that, buffers given back after a burst of downloads
// stayed on top of those a download still going held, as much again,
// for as long as any download was open. p.mu is held.
func (p *ReadPool) spare() int { return p.allowed - p.out }

// BufferGetter is a Store that can read a blob into a buffer the caller
// provides (and may reuse); found by type assertion.
type BufferGetter interface {
	// GetInto is Get reading into dst[:0], growing it if it is too small.
	GetInto(ctx context.Context, id ID, dst []byte) ([]byte, error)
}

// NewReader returns a Reader over refs. ctx bounds every fetch; cancelling it
// makes reads fail.
func NewReader(ctx context.Context, store Store, refs []Ref) *Reader {
	r := newReader(ctx, store, refs)
	dec, err := zstd.NewReader(nil,
		// One decoder per background load and one for the caller.
		zstd.WithDecoderConcurrency(DefaultReadAhead+1),
		zstd.WithDecoderMaxMemory(2*maxChunkSize))
	if err != nil {
		panic(err) // only invalid options fail, ours are constant
	}
	r.dec = dec
	return r
}

func newReader(ctx context.Context, store Store, refs []Ref) *Reader {
	ctx, cancel := context.WithCancel(ctx)
	offs := make([]int64, len(refs)+1)
	for i, r := range refs {
		offs[i+1] = offs[i] + r.Size
	}
	return &Reader{
		ctx: ctx, store: store, refs: refs, offs: offs,
		cur: -1, last: -1, cancel: cancel, ahead: DefaultReadAhead,
	}
}

// Size returns the total plain size.
func (r *Reader) Size() int64 { return r.offs[len(r.refs)] }

// Read reads from the current offset. It returns at most the rest of one
// chunk per call.
func (r *Reader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, fs.ErrClosed
	}
	if r.pos >= r.Size() {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n, err := r.readAt(p, r.pos, false)
	r.pos += int64(n)
	return n, err
}

// ReadAt reads len(p) bytes at off, unless the end comes first (then io.EOF).
// It does not move the Read offset.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("chunk: negative offset %d", off)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, fs.ErrClosed
	}
	n, err := r.readAt(p, off, true)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// readAt copies from chunks starting at off; with all it fills p as far as
// the file goes, else it stops at the end of the first chunk.
func (r *Reader) readAt(p []byte, off int64, all bool) (int, error) {
	n := 0
	for n < len(p) && off < r.Size() {
		i := sort.Search(len(r.refs), func(i int) bool { return r.offs[i+1] > off })
		if err := r.load(i); err != nil {
			return n, err
		}
		c := copy(p[n:], r.data[off-r.offs[i]:])
		n += c
		off += int64(c)
		if !all {
			break
		}
	}
	return n, nil
}

// CopyTo writes up to n bytes from the Read offset to w, straight from the
// decoded chunks: no copy into a caller's buffer, and each write hands w
// a large piece of a chunk (up to about a MiB). Every write but the last
// is a whole number of recordSize (16 KiB, a full TLS record): the few
// bytes of a chunk past its last whole record are sent together with the
// start of the next chunk, through a small buffer of the Reader's, so a
// TLS connection below cuts the stream into full records, as it does a
// server's that sends from one large buffer. It moves the Read offset by
// what it wrote. The end of the file before n bytes is no error (it
// returns the count, as io.Copy does); a chunk that cannot be read is,
// and so is a failed or short write. w must not keep the slices it is
// given (the io.Writer rule): the buffers behind them are reused.
//
// http.ServeContent sends a single range with io.CopyN, which hides a
// WriterTo behind an io.LimitedReader; httpserve's writers find CopyTo
// there (httpserve.ReadFrom).
func (r *Reader) CopyTo(w io.Writer, n int64) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, fs.ErrClosed
	}
	end := r.Size()
	if n < end-r.pos { // not r.pos+n, which overflows for WriteTo's n
		end = r.pos + max(n, 0)
	}
	var done int64
	write := func(p []byte) error {
		m, err := w.Write(p)
		done += int64(m)
		r.pos += int64(m)
		if err == nil && m < len(p) {
			err = io.ErrShortWrite
		}
		if err != nil {
			r.lent, r.carry = true, nil
		}
		return err
	}
	// off is where reading goes on: past r.pos by what carry holds.
	off := r.pos
	carry := r.carry[:0]
	for off < end {
		i := sort.Search(len(r.refs), func(i int) bool { return r.offs[i+1] > off })
		if err := r.load(i); err != nil {
			return done, err
		}
		p := r.data[off-r.offs[i] : min(end, r.offs[i+1])-r.offs[i]]
		off += int64(len(p))
		if len(carry) > 0 {
			k := min(len(p), recordSize-len(carry))
			carry = append(carry, p[:k]...)
			p = p[k:]
			if len(carry) < recordSize && off < end {
				continue // a chunk shorter than what the record lacks
			}
			if err := write(carry); err != nil {
				return done, err
			}
			carry = carry[:0]
		}
		whole := len(p)
		if off < end {
			whole -= whole % recordSize
		}
		if whole > 0 {
			if err := write(p[:whole]); err != nil {
				return done, err
			}
		}
		if whole < len(p) {
			if r.carry == nil {
				r.carry = make([]byte, 0, recordSize)
				carry = r.carry
			}
			carry = append(carry, p[whole:]...)
		}
	}
	return done, nil
}

// recordSize is the most plain bytes TLS sends in a record (RFC 8446
// 5.1), which CopyTo writes whole numbers of. A stream of downloads cut
// at chunk ends left a record of a few hundred bytes at every chunk
// (and net/http's 4 KiB buffer one more now and then): 66,012 records
// for a 1 GiB file against 65,549 from one buffer.
const recordSize = 16 << 10

// WriteTo is CopyTo of everything from the Read offset to the end.
func (r *Reader) WriteTo(w io.Writer) (int64, error) { return r.CopyTo(w, math.MaxInt64) }

// Seek sets the Read offset. Offsets past the end are allowed; reads there
// return io.EOF.
func (r *Reader) Seek(offset int64, whence int) (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.pos
	case io.SeekEnd:
		offset += r.Size()
	default:
		return r.pos, fmt.Errorf("chunk: seek: invalid whence %d", whence)
	}
	if offset < 0 {
		return r.pos, fmt.Errorf("chunk: seek: negative position %d", offset)
	}
	r.pos = offset
	return offset, nil
}

// Close stops the prefetcher and releases the decoder. Reads after Close
// return fs.ErrClosed.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.cancel()
	// Abandoned loads still use the decoder; wait for them before closing it.
	r.fetches.Wait()
	r.drop()
	r.data = nil
	if r.pool != nil {
		p := r.pool
		if !r.lent {
			p.put(r, r.held)
		}
		r.held = [2]*[]byte{}
		// What r has out now is dropped: a failed write's buffers,
		// a chunk's that failed to load.
		p.mu.Lock()
		p.out -= r.out
		p.outBytes -= r.outBytes
		r.out, r.outBytes = 0, 0
		p.allowed -= r.allowance()
		spare := p.spare() // 0 after the last
		p.mu.Unlock()
		p.bufs.trim(spare)
	} else {
		r.dec.Close()
	}
	return nil
}

// DefaultReadAhead is how many chunks a sequential reader fetches ahead, each
// fetched, verified and decoded by its own goroutine. Measured on two
// cores (vfs BenchmarkRead, 5 runs each of 2, 3 and 4): from 2 to 4, warm
// reads of random data went from 3.1-3.4 to 3.7 GB/s, of compressible
// data from 1.9 to 2.0-2.2, and cold reads from 1.2 to 1.4-1.6: a chunk
// that waits on the disk no longer holds up the ones behind it. It costs
// two more chunks of memory (about 2.5 MiB) per download in progress.
const DefaultReadAhead = 4

// load makes chunk i current, taking it from the background loads when it is
// the next one, and keeps r.ahead loads going when reads look sequential.
func (r *Reader) load(i int) error {
	if r.cur == i {
		return nil
	}
	var data []byte
	var bufs [2]*[]byte
	var err error
	var warm bool
	if len(r.loads) > 0 && r.loads[0].idx == i {
		f := r.loads[0]
		<-f.done
		r.loads = r.loads[1:]
		data, bufs, warm, err = f.data, f.bufs, f.warm, f.err
		// Now r's current chunk, out of the budget.
		if r.pool != nil {
			r.pool.unreserve(f.room)
		}
	} else {
		// A jump, or nothing fetched ahead: drop the loads in flight
		// (they finish on their own, nobody waits for chunks nobody
		// wants) and fetch i directly.
		r.drop()
		data, bufs, warm, err = r.get(r.ctx, i, nil, nil)
	}
	// The chunk being replaced is no longer read: its buffers go back,
	// unless a failed write may still read them (lent).
	if r.pool != nil {
		if !r.lent {
			r.pool.put(r, r.held)
		}
		r.held = [2]*[]byte{}
	}
	if err != nil {
		r.cur, r.data = -1, nil
		r.drop()
		return err
	}
	r.cur, r.data, r.held = i, data, bufs
	// Only a chunk that came off the device has the ones after it
	// fetched ahead: read-ahead is there to wait for the disk while
	// the connection sends. A chunk in the page cache costs the same CPU
	// on whichever goroutine reads it, and a worker per chunk only adds
	// hand-offs: on this project's 2-core VM, a WebDAV GET of a cached 1
	// GiB file cost the server 0.99 CPU s/GiB read by the sender against
	// 1.18 with four workers (medians of 6, load 5 to 6; 0.84 against
	// 1.26 in a run of 5 at load 3), and the bare Go server's 0.99.
	if i == r.last+1 && !warm {
		next := i + 1
		if n := len(r.loads); n > 0 {
			next = r.loads[n-1].idx + 1
		}
		// As many as the pool's budget has room for: the first it
		// has none for ends them until the next chunk, when room
		// others gave back lets r fetch ahead again.
		for ; next < len(r.refs) && next <= i+r.ahead; next++ {
			f := r.start(next)
			if f == nil {
				break
			}
			r.loads = append(r.loads, f)
		}
	}
	r.last = i
	return nil
}

// start begins loading chunk i in the background, with buffers and room
// taken from the pool's read-ahead budget; nil when it has no room.
func (r *Reader) start(i int) *fetch {
	f := &fetch{idx: i, done: make(chan struct{})}
	_, into := r.store.(BufferGetter)
	if r.pool != nil {
		var ok bool
		if f.bufs[0], f.room, ok = r.pool.reserve(r, r.refs[i].Size, into); !ok {
			return nil
		}
	}
	f.holds.Store(2)
	r.fetches.Add(1)
	go func() {
		defer r.fetches.Done()
		f.data, f.bufs, f.warm, f.err = r.get(r.ctx, f.idx, f.bufs[0], &f.room)
		if r.pool != nil {
			r.pool.settle(f, into)
		}
		close(f.done)
		r.letGo(f)
	}()
	return f
}

// drop lets go of the loads r no longer waits for.
func (r *Reader) drop() {
	for _, f := range r.loads {
		r.letGo(f)
	}
	r.loads = nil
}

// letGo drops a hold on f (its goroutine's, once done, or its Reader's);
// the last gives its buffers and its room back to the pool. They were
// never sent from, so no writer may still read them.
func (r *Reader) letGo(f *fetch) {
	if f.holds.Add(-1) == 0 && r.pool != nil {
		r.pool.put(r, f.bufs)
		r.pool.unreserve(f.room)
	}
}

// warmGetter is a store that tells, as it reads a blob into a buffer,
// whether the blob was in memory (the page cache) whole: Disk.
type warmGetter interface {
	getWarm(ctx context.Context, id ID, dst []byte, limit int) (blob []byte, warm bool, err error)
}

// get fetches, decodes and verifies chunk i, into pooled buffers when the
// Reader has a pool (returned with the data, to give back when it is no
// longer read): blob, taken ahead (reserve), or a new one, and for a
// compressed chunk one for its decoded copy, within the room of a
// chunk fetched ahead (getAhead). Of the two, only
// the one the data is in is returned once the chunk is decoded: a raw
// chunk is a slice of its blob, a compressed one needs its blob no
// longer. warm is whether the store read it from memory (only a
// warmGetter says so). It touches only immutable Reader fields, so the
// prefetcher may run it. A read-ahead worker checks the chunk's XXH3
// here, not the sender before it encrypts: checking on the sender, so
// that TLS would read bytes the check had just brought into the CPU's
// cache, measured no better (BenchmarkReadCPUCold, 14 pairs at load 7:
// medians 0.65 and 0.72 CPU s/GiB against 0.74 and 0.75 for the sender).
func (r *Reader) get(ctx context.Context, i int, blobBuf *[]byte, room *int64) (data []byte, bufs [2]*[]byte, warm bool, err error) {
	ref := r.refs[i]
	bufs[0] = blobBuf
	var blob []byte
	bg, ok := r.store.(BufferGetter)
	wg, warmOK := r.store.(warmGetter)
	switch {
	case r.pool != nil && ok:
		if bufs[0] == nil {
			bufs[0] = r.pool.get(r, blobRoom(ref.Size))
		}
		if warmOK {
			blob, warm, err = wg.getWarm(ctx, ref.ID, *bufs[0], maxStoredBlob)
		} else {
			blob, err = bg.GetInto(ctx, ref.ID, *bufs[0])
		}
		if err == nil {
			r.pool.keep(r, bufs[0], blob)
		}
	case warmOK:
		// Not warm to the caller: without a pool every chunk is read
		// ahead, as before.
		blob, _, err = wg.getWarm(ctx, ref.ID, nil, maxStoredBlob)
	default:
		blob, err = r.store.Get(ctx, ref.ID)
	}
	if err != nil {
		return nil, bufs, false, err
	}
	var dst []byte
	if r.pool != nil && compressed(blob) {
		if room != nil {
			bufs[1] = r.pool.getAhead(r, int(ref.Size), room)
		} else {
			bufs[1] = r.pool.get(r, int(ref.Size))
		}
		dst = *bufs[1]
	}
	if r.pool != nil {
		data, err = r.pool.checked.decode(dst, ref.ID, blob, r.dec)
	} else {
		data, err = decodeInto(dst, ref.ID, blob, r.dec)
	}
	if bufs[1] != nil && data != nil {
		r.pool.keep(r, bufs[1], data)
	}
	if err != nil {
		return nil, bufs, false, err
	}
	if int64(len(data)) != ref.Size {
		return nil, bufs, false, fmt.Errorf("%w: %s: size %d, ref says %d", ErrCorrupt, ref.ID, len(data), ref.Size)
	}
	if bufs[0] != nil && bufs[1] != nil {
		// Decoded: the blob's buffer is free for the next chunk, where
		// it was held as long as this one, as much again for every
		// compressible chunk sent or fetched ahead.
		r.pool.put(r, [2]*[]byte{bufs[0]})
		bufs[0] = nil
	}
	return data, bufs, warm, nil
}

var _ interface {
	io.ReadSeekCloser
	io.ReaderAt
} = (*Reader)(nil)

// maxStoredBlob is the longest blob a Writer stores: a raw chunk of the
// largest size (a sealed S2 blob is kept only when it is shorter than
// its plain bytes by more than its seal). A Reader refuses a longer
// blob file unread (Disk.getWarm).
const maxStoredBlob = 1 + maxChunkSize
