package badger

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"berth/kv"
)

// Export calls fn for every live key after start (every key when start is
// nil), in key order, with its value and its expiry (zero: none): what a
// copy into another engine needs and kv.Txn.Scan does not tell (the TTL).
// Keys of the engine's own (kv.EnginePrefix) are left out; Sequences gives
// what they mean. fn gets slices valid only during the call. Meant for a
// store no other process writes (berth migrate reads a stopped one).
func (b *DB) Export(ctx context.Context, start []byte, fn func(key, value []byte, expires time.Time) error) error {
	if err := b.enter(); err != nil {
		return err
	}
	defer b.leave()
	bt := b.db.NewTransaction(false)
	defer bt.Discard()
	it := bt.NewIterator(iterOptions(nil, false))
	defer it.Close()
	n := 0
	for it.Seek(start); it.Valid(); it.Next() {
		if n++; n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		item := it.Item()
		key := item.Key()
		if strings.HasPrefix(string(key), kv.EnginePrefix) {
			continue
		}
		if start != nil && bytes.Equal(key, start) {
			continue
		}
		var expires time.Time
		if e := item.ExpiresAt(); e > 0 {
			expires = time.Unix(int64(e), 0)
		}
		if err := value(item, func(v []byte) error { return fn(key, v, expires) }); err != nil {
			return err
		}
	}
	return nil
}

// Sequences returns, for each kind of NextID, a bound every id handed out
// so far is at or below (the end of the last lease written): another
// engine whose sequences start above it never repeats an id.
func (b *DB) Sequences(ctx context.Context) (map[string]uint64, error) {
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.leave()
	bt := b.db.NewTransaction(false)
	defer bt.Discard()
	prefix := []byte(seqPrefix)
	it := bt.NewIterator(iterOptions(prefix, false))
	defer it.Close()
	seqs := map[string]uint64{}
	for it.Seek(prefix); it.ValidForPrefix(prefix); it.Next() {
		item := it.Item()
		kind := string(item.Key()[len(prefix):])
		err := value(item, func(v []byte) error {
			if len(v) != 8 {
				return fmt.Errorf("kv: sequence %q: a lease of %d bytes", kind, len(v))
			}
			seqs[kind] = binary.BigEndian.Uint64(v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return seqs, ctx.Err()
}
