package postgres

import (
	"context"
	"fmt"
)

// RaiseSequence makes every id NextID hands out for kind from now on
// greater than floor, leaving a sequence already past it alone: berth
// migrate carries the sequences of a single-node store over with it, so
// no id is ever handed out twice. Processes that hold a lease of kind
// keep it; call it before any node serves.
func (d *DB) RaiseSequence(ctx context.Context, kind string, floor uint64) error {
	if err := d.enter(); err != nil {
		return err
	}
	defer d.leave()
	_, err := d.aux.Exec(ctx, `INSERT INTO berth_kv_seq (kind, hi) VALUES ($1, $2)
		ON CONFLICT (kind) DO UPDATE SET hi = GREATEST(berth_kv_seq.hi, excluded.hi)`, kind, int64(floor))
	if err != nil {
		return fmt.Errorf("kv: raising the sequence %q: %w", kind, mapErr(err))
	}
	return nil
}
