package vfs

import (
	"context"

	"berth/kv"
)

// WithRefBatch returns opts with the number of chunk references one
// transaction changes set to n, so tests reach the split paths with small
// files.
func WithRefBatch(opts Options, n int) Options {
	opts.refBatch = n
	return opts
}

// WithBatchHook returns opts with fn run between the transactions of a
// split operation.
func WithBatchHook(opts Options, fn func(Op)) Options {
	opts.batchHook = fn
	return opts
}

// IntentParts counts the I/ keys: operations not finished or not released.
func (fs *FS) IntentParts(ctx context.Context) (int, error) {
	n := 0
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		n = 0
		return tx.Scan([]byte(pIntent), nil, func(k, v []byte) error {
			n++
			return nil
		})
	})
	return n, err
}
