package vfs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"berth/kv"
	"berth/vfs/chunk"
)

// pinSet holds the chunks of uploads in flight, from before the chunk
// writer asks the store whether it has one until the upload has
// referenced it or noted it for the collector (see chunk.Pinner). The
// counts in kv cannot do it: a chunk found in the store may have lost
// its last count, or lose it a moment later, and the upload cannot take
// a count before it knows the chunk's ID.
//
// Several processes (nodes) may share the metadata and chunk stores, and
// any of them may collect, so a pin is recorded where every collector
// looks: the chunk's H/ key lists the nodes holding it. A node writes its
// name there when its first pin of the chunk is taken and removes it when
// its last is given back; the pins in between are counted in memory. The
// record is written in a transaction that reads the chunk's B/ key, which
// a collector writes, in a transaction that reads H/ and K/, before it
// removes the chunk: serializable transactions put one before the other.
// Either the pin comes first, and the collector leaves the chunk, or the
// collector does, and the pin waits until the removal is over (B/ gone),
// so the writer's look in the store that follows finds the chunk missing
// and stores it again. A node that dies leaves its name in H/; a survivor
// removes it once the node's liveness lease has expired (node.go).
type pinSet struct {
	db   kv.Store
	node string
	log  *slog.Logger

	mu   sync.Mutex
	pins map[chunk.ID]*pinEntry
}

// pinEntry is one chunk this node pins.
type pinEntry struct {
	n    int           // pins held in this process
	held bool          // the node is listed in the chunk's H/ record
	busy chan struct{} // closed when the H/ change in flight on it ends
}

// heldRec is an H/ record: the nodes holding the chunk. Field numbers
// are the wire format.
type heldRec struct {
	Nodes []string `cbor:"1,keyasint"`
}

// pinRetry is how long a pin waits before it looks again at a chunk a
// collector is removing.
const pinRetry = 20 * time.Millisecond

var _ chunk.Pinner = (*pinSet)(nil)

// Pin holds id once more. The first pin of a chunk in this process
// records the node in the chunk's H/ key; if a collector is removing the
// chunk, it waits until the chunk is gone first.
func (p *pinSet) Pin(ctx context.Context, id chunk.ID) error {
	p.mu.Lock()
	for {
		if p.pins == nil {
			p.pins = make(map[chunk.ID]*pinEntry)
		}
		e := p.pins[id]
		if e == nil {
			e = &pinEntry{}
			p.pins[id] = e
		}
		if b := e.busy; b != nil {
			p.mu.Unlock()
			select {
			case <-b:
			case <-ctx.Done():
				return ctx.Err()
			}
			p.mu.Lock()
			continue
		}
		e.n++
		if e.held {
			p.mu.Unlock()
			return nil
		}
		b := make(chan struct{})
		e.busy = b
		p.mu.Unlock()
		err := p.hold(ctx, id)
		p.mu.Lock()
		e.busy = nil
		close(b)
		if err != nil {
			e.n--
			if e.n == 0 && !e.held {
				delete(p.pins, id)
			}
			p.mu.Unlock()
			if errors.Is(err, kv.ErrConflict) || errors.Is(err, kv.ErrClosed) {
				// As fs.update: the same upload succeeds when tried again.
				err = fmt.Errorf("%w: %w", ErrBusy, err)
			}
			return fmt.Errorf("vfs: pinning chunk %s: %w", id, err)
		}
		e.held = true
		p.mu.Unlock()
		return nil
	}
}

// hold lists the node in id's H/ record, once no collector is removing
// the chunk.
func (p *pinSet) hold(ctx context.Context, id chunk.ID) error {
	for {
		doomed := false
		err := updateUnsynced(ctx, p.db, func(tx kv.Txn) error {
			doomed = false
			if _, err := tx.Get(doomKey(id)); err == nil {
				doomed = true
				return nil
			} else if !errors.Is(err, kv.ErrNotFound) {
				return err
			}
			var rec heldRec
			if err := get(tx, heldKey(id), &rec, nil); err != nil {
				return err
			}
			if slices.Contains(rec.Nodes, p.node) {
				return nil
			}
			rec.Nodes = append(rec.Nodes, p.node)
			return put(tx, heldKey(id), rec)
		})
		if err != nil || !doomed {
			return err
		}
		select {
		case <-time.After(pinRetry):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Unpin releases one Pin of id.
func (p *pinSet) Unpin(id chunk.ID) { p.unpin([]chunk.ID{id}) }

// unpinRefs releases the pins the chunk writer left on refs.
func (p *pinSet) unpinRefs(refs []chunk.Ref) {
	if len(refs) == 0 {
		return
	}
	p.unpin(chunkIDs(refs))
}

// unpin releases one pin of each of ids and takes the node out of the H/
// records of the chunks it no longer pins, in batches of a transaction
// each. A record it cannot change stays until the next unpin of the chunk,
// Close, or, after a crash, the next Open or a survivor's collection.
func (p *pinSet) unpin(ids []chunk.ID) {
	p.mu.Lock()
	var drop []chunk.ID
	for _, id := range ids {
		e := p.pins[id]
		if e == nil || e.n == 0 {
			continue
		}
		e.n--
		if e.n > 0 {
			continue
		}
		if !e.held {
			delete(p.pins, id)
			continue
		}
		// No Pin is in flight on an entry it holds, so busy is nil.
		e.busy = make(chan struct{})
		drop = append(drop, id)
	}
	p.mu.Unlock()
	p.letGo(drop)
}

// letGo removes the node from the H/ records of drop, whose entries are
// busy with it, and settles the entries.
func (p *pinSet) letGo(drop []chunk.ID) {
	for start := 0; start < len(drop); start += defaultRefBatch {
		batch := drop[start:min(start+defaultRefBatch, len(drop))]
		err := updateUnsynced(context.Background(), p.db, func(tx kv.Txn) error {
			for _, id := range batch {
				if err := dropHolders(tx, id, func(n string) (bool, error) { return n == p.node, nil }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			p.log.Warn("vfs: could not record the end of upload pins; they go at the next unpin, close or start", "chunks", len(batch), "err", err)
		}
		p.mu.Lock()
		for _, id := range batch {
			e := p.pins[id]
			if err == nil {
				e.held = false
			}
			close(e.busy)
			e.busy = nil
			if e.n == 0 && !e.held {
				delete(p.pins, id)
			}
		}
		p.mu.Unlock()
	}
}

// flush takes the node out of the H/ records of the chunks it no longer
// pins but could not let go of before (Close runs it).
func (p *pinSet) flush() {
	p.mu.Lock()
	var drop []chunk.ID
	for id, e := range p.pins {
		if e.n == 0 && e.held && e.busy == nil {
			e.busy = make(chan struct{})
			drop = append(drop, id)
		}
	}
	p.mu.Unlock()
	p.letGo(drop)
}

// dropHolders removes from id's H/ record the nodes gone reports true
// for; when none is left, the record goes, and a chunk that no revision
// counts either is noted for the collector (the upload that stored it may
// have died before it could note it).
func dropHolders(tx kv.Txn, id chunk.ID, gone func(string) (bool, error)) error {
	var rec heldRec
	if err := get(tx, heldKey(id), &rec, kv.ErrNotFound); errors.Is(err, kv.ErrNotFound) {
		return nil
	} else if err != nil {
		return err
	}
	keep := rec.Nodes[:0]
	for _, n := range rec.Nodes {
		g, err := gone(n)
		if err != nil {
			return err
		}
		if !g {
			keep = append(keep, n)
		}
	}
	if len(keep) > 0 {
		return put(tx, heldKey(id), heldRec{Nodes: keep})
	}
	if err := tx.Delete(heldKey(id)); err != nil {
		return err
	}
	if _, err := tx.Get(refKey(id)); errors.Is(err, kv.ErrNotFound) {
		return noteOrphan(tx, id)
	} else {
		return err
	}
}

// noteOrphan notes id for the collector unless it is noted already (a
// note may carry the time a collector first saw it, see gc.go).
func noteOrphan(tx kv.Txn, id chunk.ID) error {
	if _, err := tx.Get(orphanKey(id)); err == nil {
		return nil
	} else if !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	return tx.Set(orphanKey(id), nil)
}

// updateUnsynced commits fn without waiting for durability where the
// store can (kv.Unsynced). A pin is worth nothing after its node crashed,
// and losing one only leaves a chunk the node stored un-noted, for a
// sweep; a sync per chunk would double the syncs of an upload.
func updateUnsynced(ctx context.Context, db kv.Store, fn func(kv.Txn) error) error {
	if u, ok := db.(kv.Unsynced); ok {
		return u.UpdateUnsynced(ctx, fn)
	}
	return db.Update(ctx, fn)
}
