package vfs

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
