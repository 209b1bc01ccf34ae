package vfs

import (
	"sync"

	"berth/vfs/chunk"
)

// pinSet holds the chunks of uploads in flight, from before the chunk
// writer asks the store whether it has one until the upload has
// referenced it or noted it for the collector (see chunk.Pinner). The
// counts in kv cannot do it: a chunk found in the store may have lost
// its last count, or lose it a moment later, and the upload cannot take
// a count before it knows the chunk's ID, one transaction per chunk.
// The collector runs in the same process as the uploads (the commands
// that collect in a separate process need the data directory stopped),
// so an in-memory set is enough, and a crash, which empties it, ends the
// uploads too.
type pinSet struct {
	mu sync.Mutex
	n  map[chunk.ID]int
}

var _ chunk.Pinner = (*pinSet)(nil)

// Pin holds id once more.
func (p *pinSet) Pin(id chunk.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = make(map[chunk.ID]int)
	}
	p.n[id]++
}

// Unpin releases one Pin of id.
func (p *pinSet) Unpin(id chunk.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[id] <= 1 {
		delete(p.n, id)
		return
	}
	p.n[id]--
}

// unpinRefs releases the pins the chunk writer left on refs.
func (p *pinSet) unpinRefs(refs []chunk.Ref) {
	for _, r := range refs {
		p.Unpin(r.ID)
	}
}

// deleteUnpinned runs del, which removes id from the chunk store, unless
// id is pinned, and reports whether it ran. It holds the set meanwhile: a
// writer that pins id waits until the chunk is gone, so its look in the
// store finds it missing and it stores the chunk again.
func (p *pinSet) deleteUnpinned(id chunk.ID, del func() error) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n[id] > 0 {
		return false, nil
	}
	return true, del()
}
