package chunk

import (
	"context"
	"time"
)

// GrowFrom is growFrom.
const GrowFrom = growFrom

// GrowTop is growTop.
const GrowTop = growTop

// ReadAhead is readAhead, for tests that count prefetched chunks.
const ReadAhead = DefaultReadAhead

// SetBeforeSync makes d run f after it renames chunks into place and
// before it syncs their directories.
func SetBeforeSync(d *Disk, f func()) { d.beforeSync = f }

// NoSpace is noSpace, for the test that feeds it the kernel's errors.
var NoSpace = noSpace

// FetchingAhead is how many chunks r is fetching or has fetched ahead.
func FetchingAhead(r *Reader) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.loads)
}

// Warm reads id's blob from d and reports whether it was in the page
// cache whole.
func Warm(d *Disk, id ID) bool {
	_, warm, err := d.getWarm(context.Background(), id, nil, -1)
	return err == nil && warm
}

// SetStatfs makes d read its file system's free space from f, trusting a
// reading far from the reserve for fresh, as it trusts statfs.
func SetStatfs(d *Disk, f func() (int64, error), fresh time.Duration) {
	d.free, d.fresh = f, fresh
}

// FreeMargin is freeMargin.
const FreeMargin = freeMargin

// Kept is how many chunk buffers p keeps through collections.
func Kept(p *ReadPool) int {
	p.bufs.mu.Lock()
	defer p.bufs.mu.Unlock()
	return len(p.bufs.free)
}

// ChunkBuffers is what a chunk of size plain bytes took of a pool's
// buffers at most before the read-ahead budget, fetched ahead or sent,
// when no larger buffer was kept: its blob's and its decoded copy's,
// each of its size class.
func ChunkBuffers(size int64) int64 {
	return int64(bufSize(blobRoom(size)) + bufSize(int(size)))
}

// WaitAhead waits until the chunks r fetches ahead are loaded.
func WaitAhead(r *Reader) {
	r.mu.Lock()
	loads := r.loads
	r.mu.Unlock()
	for _, f := range loads {
		<-f.done
	}
}
