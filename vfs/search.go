package vfs

import (
	"context"
	"errors"
	"strings"
	"time"

	"berth/kv"
)

// Search returns the live items of a root whose name contains query,
// ignoring case, with their paths; at most limit of them (0: no limit).
func (fs *FS) Search(ctx context.Context, root uint64, query string, limit int) ([]Node, error) {
	q := strings.ToLower(query)
	return fs.scanRoot(ctx, root, 0, limit, func(r nodeRec) bool {
		return r.Parent != 0 && strings.Contains(strings.ToLower(r.Name), q)
	})
}

// ModifiedSince returns the live files of a root modified at or after
// since, oldest first, with their paths; at most limit (0: no limit).
func (fs *FS) ModifiedSince(ctx context.Context, root uint64, since time.Time, limit int) ([]Node, error) {
	return fs.scanRoot(ctx, root, clampNs(since), limit, func(r nodeRec) bool { return !r.Dir })
}

// scanRoot visits the live items of a root modified at or after from, in
// modification order, and keeps those match accepts.
func (fs *FS) scanRoot(ctx context.Context, root uint64, from int64, limit int, match func(nodeRec) bool) ([]Node, error) {
	var out []Node
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		now := fs.nowNs()
		start := timeKey(root, max(from, 0), 0)
		return tx.Scan(timePrefix(root), start, func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			rec, _, err := loadNode(tx, timeKeyNode(k))
			if err != nil {
				return err
			}
			if rec.Deleted != 0 || !match(rec) {
				return nil
			}
			n := rec.public(now)
			var gone bool
			if n.Path, gone, err = resolve(tx, rec); errors.Is(err, errStaged) {
				return nil
			} else if err != nil || gone {
				return err
			}
			out = append(out, n)
			if limit > 0 && len(out) >= limit {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}
