package vfs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
	"berth/vfs/chunk"
)

// Several berth processes (nodes) may share one metadata store and one
// chunk store, each with its own FS. What one node holds for operations
// in flight (intent parts, I/, and upload pins, H/) is recorded with the
// node's name, and each node keeps a liveness lease in the store
// (kv.Lease "vfs-node/<name>", renewed every third of nodeTTL). Only what
// a node that is gone left behind is released by another: a node is gone
// when its lease has expired, and the release reads the lease key in the
// transaction that releases, so a node that renews meanwhile conflicts
// with it and keeps what it holds.
//
// At Open a node also releases what its own name holds (a process of the
// same name that crashed, restarted within the lease's life) and, on a
// store that one process opens at a time (kv.Exclusive: Badger), every
// node's: whoever left it is gone. A single node so recovers at once, as
// it always did.

// nodeTTL is how long a node's liveness lease lasts without a renewal:
// what another node waits, after this one died, before it releases what
// this one held. Long enough that a pause of the process (a stop-the-world
// collection, a slow disk) does not get a live node's uploads released.
const nodeTTL = 30 * time.Second

// nodeLease is the name of node's liveness lease.
func nodeLease(node string) string { return "vfs-node/" + node }

// newNodeName names a node that was not given a name: host, process and
// a random part, so that no two processes share it.
func newNodeName() string {
	host, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// exclusive reports whether this process is the store's only user.
func exclusive(db kv.Store) bool {
	x, ok := db.(kv.Exclusive)
	return ok && x.Exclusive()
}

// startLiveness takes the node's lease and renews it until Close.
func (fs *FS) startLiveness(ctx context.Context) error {
	l := kv.NewLease(fs.db, nodeLease(fs.node), fs.node, fs.nodeTTL)
	if _, err := l.Acquire(ctx); err != nil {
		return err
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	fs.liveStop, fs.liveDone = stop, done
	go func() {
		defer close(done)
		t := time.NewTicker(fs.nodeTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			held, err := l.Acquire(context.Background())
			switch {
			case errors.Is(err, kv.ErrClosed):
				return
			case err != nil:
				fs.log.Warn("vfs: could not renew this node's liveness lease; other nodes release its uploads once it expires", "node", fs.node, "err", err)
			case !held:
				fs.log.Error("vfs: another process holds this node's name", "node", fs.node)
			}
		}
	}()
	fs.lease = l
	return nil
}

// stopLiveness stops renewing the lease and, with release, gives it up,
// so that other nodes release what this one left at once.
func (fs *FS) stopLiveness(release bool) {
	if fs.liveStop == nil {
		return
	}
	close(fs.liveStop)
	<-fs.liveDone
	fs.liveStop = nil
	if release {
		if err := fs.lease.Release(context.Background()); err != nil && !errors.Is(err, kv.ErrClosed) {
			fs.log.Warn("vfs: could not give up this node's liveness lease; it expires by itself", "node", fs.node, "err", err)
		}
	}
}

// nodeGone reports, in tx, whether node is gone: its lease has expired
// (or was given up). Reading the key makes a renewal conflict with tx.
func nodeGone(tx kv.Txn, node string) (bool, error) {
	_, err := tx.Get(kv.LeaseKey(nodeLease(node)))
	if errors.Is(err, kv.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// leftBy says which nodes' leftovers a release takes: at Open, the
// node's own name (a crashed predecessor) and, on an exclusive store,
// everyone; otherwise only nodes that are gone. This node's own records
// outside Open belong to operations in flight.
func (fs *FS) leftBy(atOpen bool) func(kv.Txn, string) (bool, error) {
	all := atOpen && exclusive(fs.db)
	return func(tx kv.Txn, node string) (bool, error) {
		switch {
		case all:
			return true, nil
		case node == fs.node:
			return atOpen, nil
		default:
			return nodeGone(tx, node)
		}
	}
}

// ReleaseDead releases what nodes that are gone left behind: the intents
// of their operations in flight (their chunk counts, their staged trees)
// and their upload pins; a chunk only a dead node's pin held is noted for
// the collector. It never touches a live node's, this node's included.
// GC runs it first; it returns how many intents it released.
func (fs *FS) ReleaseDead(ctx context.Context) (int, error) {
	return fs.releaseLeft(ctx, false)
}

// releaseLeft releases the intents and pins leftBy(atOpen) names.
func (fs *FS) releaseLeft(ctx context.Context, atOpen bool) (int, error) {
	left := fs.leftBy(atOpen)
	n, err := fs.releaseIntents(ctx, left)
	if err != nil {
		return n, err
	}
	return n, fs.releasePins(ctx, left)
}

// releasePins takes the nodes left names out of every H/ record.
func (fs *FS) releasePins(ctx context.Context, left func(kv.Txn, string) (bool, error)) error {
	var ids []chunk.ID
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		ids = ids[:0]
		return tx.Scan([]byte(pHeld), nil, func(k, v []byte) error {
			var rec heldRec
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return err
			}
			for _, n := range rec.Nodes {
				// Only a glance: the transaction below decides.
				if g, err := left(tx, n); err != nil {
					return err
				} else if g {
					ids = append(ids, chunkIDFromKey(k))
					break
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for start := 0; start < len(ids); start += fs.refBatch {
		batch := ids[start:min(start+fs.refBatch, len(ids))]
		err := fs.update(ctx, func(tx kv.Txn) error {
			for _, id := range batch {
				if err := dropHolders(tx, id, func(n string) (bool, error) { return left(tx, n) }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if len(ids) > 0 {
		fs.log.Warn("vfs: released the upload pins of nodes that are gone", "chunks", len(ids))
	}
	return nil
}
