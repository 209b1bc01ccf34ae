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
	// deleting are the chunks the collector is removing now; each
	// channel closes when its removal is over.
	deleting map[chunk.ID]chan struct{}
}

var _ chunk.Pinner = (*pinSet)(nil)

// Pin holds id once more. If the collector is removing id, it waits until
// the chunk is gone, so the writer's look in the store that follows finds
// it missing and stores it again.
func (p *pinSet) Pin(id chunk.ID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.deleting[id] != nil {
		done := p.deleting[id]
		p.mu.Unlock()
		<-done
		p.mu.Lock()
	}
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
// id is pinned, and reports whether it ran. Pins of id wait for del to
// return; pins of other chunks do not (del syncs a directory).
func (p *pinSet) deleteUnpinned(id chunk.ID, del func() error) (bool, error) {
	p.mu.Lock()
	if p.n[id] > 0 {
		p.mu.Unlock()
		return false, nil
	}
	if p.deleting == nil {
		p.deleting = make(map[chunk.ID]chan struct{})
	}
	done := make(chan struct{})
	p.deleting[id] = done
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.deleting, id)
		close(done)
		p.mu.Unlock()
	}()
	return true, del()
}
