package vfs

import (
	"context"

	"berth/kv"
)

// Die stops renewing the node's liveness lease and removes it, as if the
// process had died and the lease expired, without closing anything: the
// operations it runs go on, as a node cut off from the cluster would.
func (fs *FS) Die(ctx context.Context) error {
	fs.stopLiveness(false)
	return fs.db.Update(ctx, func(tx kv.Txn) error { return tx.Delete(kv.LeaseKey(nodeLease(fs.node))) })
}

// Freeze stops renewing the node's lease and leaves it in place, as a
// process that died a moment ago leaves it until it expires.
func (fs *FS) Freeze() { fs.stopLiveness(false) }

// HeldChunks counts the H/ records: chunks some node's uploads pin.
func (fs *FS) HeldChunks(ctx context.Context) (int, error) {
	n := 0
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		return tx.Scan([]byte(pHeld), nil, func(k, v []byte) error {
			n++
			return nil
		})
	})
	return n, err
}
