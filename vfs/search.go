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
	return fs.scanRoot(ctx, root, 0, limit, false, func(r nodeRec) bool {
		return r.Parent != 0 && strings.Contains(strings.ToLower(r.Name), q)
	})
}

// ModifiedSince returns the live files of a root modified at or after
// since, oldest first, with their paths: at least limit of them (0: no
// limit) when there are, and past limit every file modified in the same
// second as the last one, up to wholeSecondMax times limit. Clients see
// times in whole seconds and page by asking again from the second after
// the last one they got; a page that ended inside a second would make
// them miss the rest of it, and a second holding more than limit files
// would stop them for good. The bound keeps one answer from holding a
// whole copied tree whose files share their times.
func (fs *FS) ModifiedSince(ctx context.Context, root uint64, since time.Time, limit int) ([]Node, error) {
	return fs.scanRoot(ctx, root, clampNs(since), limit, true, func(r nodeRec) bool { return !r.Dir })
}

// wholeSecondMax bounds a ModifiedSince page that finishes its last
// second, in multiples of its limit.
const wholeSecondMax = 10

// scanRoot visits the live items of a root modified at or after from, in
// modification order, and keeps those match accepts, up to limit, and
// with wholeSecond also the rest of the last one's second.
func (fs *FS) scanRoot(ctx context.Context, root uint64, from int64, limit int, wholeSecond bool, match func(nodeRec) bool) ([]Node, error) {
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
			if limit > 0 && len(out) >= limit && (fromNs(rec.Modified).Unix() != out[len(out)-1].Modified.Unix() || len(out) >= wholeSecondMax*limit) {
				return kv.ErrStop
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
			if limit > 0 && len(out) >= limit && !wholeSecond {
				return kv.ErrStop
			}
			return nil
		})
	})
	return out, err
}
