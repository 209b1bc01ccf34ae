package chunk

import (
	"sync"
)

// bufList holds a Writer's large buffers of one kind (segments, chunks
// across segments, blobs) between uses.
//
// A sync.Pool alone empties at every other garbage collection, and under
// the daemon's soft memory limit a 1 GiB upload ran some 70 of them: each
// emptied the pool, the next chunks allocated megabytes of fresh buffers,
// and those brought the next collection sooner. vfs-write under
// GOMEMLIMIT=72MiB allocated 970 MB for a 1 GiB write instead of 133, and
// took 7.8 CPU s/GiB instead of 2.6 (BenchmarkREST). So while a Write is
// running, up to max buffers are kept whatever the collector does. When
// the last running Write ends they go to a sync.Pool, as before: kept
// for a next upload soon after, but not held by an idle server, nor by a
// download that follows and needs the room (kept through a 1 GiB GET
// after the PUT, they made it run 330 collections instead of 4).
type bufList struct {
	mu   sync.Mutex
	free []*[]byte
	max  int
	pool sync.Pool // *[]byte, between Writes
}

func newBufList(max int) *bufList { return &bufList{max: max} }

// get returns a kept buffer of at least need bytes of capacity, the
// smallest kept (the last put, among those of one size), or nil. A
// pooled buffer too small for need is left to the collector.
func (l *bufList) get(need int) *[]byte {
	l.mu.Lock()
	best := -1
	for i := len(l.free) - 1; i >= 0; i-- {
		if c := cap(*l.free[i]); c >= need && (best < 0 || c < cap(*l.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		b := l.free[best]
		last := len(l.free) - 1
		copy(l.free[best:], l.free[best+1:])
		l.free[last] = nil
		l.free = l.free[:last]
		l.mu.Unlock()
		return b
	}
	l.mu.Unlock()
	if b, _ := l.pool.Get().(*[]byte); b != nil && cap(*b) >= need {
		return b
	}
	return nil
}

// put keeps b for a later get: in the list while max are not kept yet,
// else in the pool. Writes put their buffers back before they end.
func (l *bufList) put(b *[]byte) {
	l.mu.Lock()
	if len(l.free) < l.max {
		l.free = append(l.free, b)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.pool.Put(b)
}

// idle moves the kept buffers to the pool: no Write is running.
func (l *bufList) idle() { l.trim(0) }

// trim moves the kept buffers past the first limit to the pool.
func (l *bufList) trim(limit int) {
	limit = max(limit, 0)
	l.mu.Lock()
	if len(l.free) <= limit {
		l.mu.Unlock()
		return
	}
	extra := l.free[limit:]
	// Capped, so that the next put appends to a new array, not over extra.
	l.free = l.free[:limit:limit]
	l.mu.Unlock()
	for _, b := range extra {
		l.pool.Put(b)
	}
}
