package vfs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// PurgeReport says what PurgeDeleted did.
type PurgeReport struct {
	Purged  int // deleted items (with everything below them) removed for good
	Skipped int // deleted items left: in a deleted root, or gone meanwhile
}

// String reads like a log line.
func (r PurgeReport) String() string {
	return fmt.Sprintf("purged %d deleted items, skipped %d", r.Purged, r.Skipped)
}

// PurgeDeleted purges, in every root, each item deleted before the given
// time, with everything below it (see Purge); their chunks become garbage
// for the next GC. Nothing else frees the space of deleted items, so it is
// how an operator empties the trash of a server whose disk filled up.
// Items in a deleted root are skipped (Purge refuses them), as are the
// trees of copies still being built.
func (fs *FS) PurgeDeleted(ctx context.Context, before time.Time) (PurgeReport, error) {
	type item struct{ root, id uint64 }
	var due []item
	cutoff := before.UnixNano()
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		due = due[:0]
		return tx.Scan([]byte(pDeleted), nil, func(k, v []byte) error {
			var rec nodeRec
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("vfs: decode %q: %w", k, err)
			}
			if rec.Deleted != 0 && rec.Deleted < cutoff && !rec.Staged {
				due = append(due, item{rec.Root, rec.ID})
			}
			return ctx.Err()
		})
	})
	var rep PurgeReport
	if err != nil {
		return rep, err
	}
	for _, it := range due {
		err := fs.Purge(ctx, it.root, it.id)
		switch {
		case err == nil:
			rep.Purged++
		case errors.Is(err, ErrNotExist), errors.Is(err, ErrRootDeleted):
			// Purged with a folder deleted later, or in a deleted root.
			rep.Skipped++
		default:
			return rep, err
		}
	}
	return rep, nil
}
