package vfs

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"berth/kv"
)

// Dead properties are small named values a client attaches to an item
// (WebDAV PROPPATCH). vfs treats names and values as opaque; the webdav
// front end names them in Clark notation ("{namespace}local") and stores
// the property's XML value. They live under P/<node>/<name>, so a Move
// (which keeps the node id) carries them, Copy duplicates them and Purge
// removes them.

// Props returns the dead properties of a live item, by name.
func (fs *FS) Props(ctx context.Context, root, id uint64) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		clear(out)
		if _, _, err := liveNodeIn(tx, root, id); err != nil {
			return err
		}
		prefix := propPrefix(id)
		return tx.Scan(prefix, nil, func(k, v []byte) error {
			out[string(k[len(prefix):])] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PatchProps removes the properties named in remove, then sets those of
// set, in one transaction: all or nothing. The item must be live and not
// locked against the caller (ErrLocked). Removing a missing property is
// not an error. Names may not be empty (ErrInvalidName). A name over
// MaxPropNameBytes, or properties that would be more than MaxProps or
// MaxPropsBytes for the item after the change, are ErrMetadataLimit.
func (fs *FS) PatchProps(ctx context.Context, root, id uint64, set map[string][]byte, remove []string, opts WriteOptions) error {
	for name := range set {
		if name == "" {
			return fmt.Errorf("%w: empty property name", ErrInvalidName)
		}
		if len(name) > MaxPropNameBytes {
			return fmt.Errorf("%w: a property name of %d bytes, at most %d", ErrMetadataLimit, len(name), MaxPropNameBytes)
		}
	}
	if len(set) > 0 {
		if err := fs.roomFor(); err != nil {
			return err
		}
	}
	return fs.update(ctx, func(tx kv.Txn) error {
		if _, _, err := liveNodeIn(tx, root, id); err != nil {
			return err
		}
		if err := checkLocks(tx, id, 1, opts, fs.nowNs()); err != nil {
			return err
		}
		for _, name := range remove {
			if err := tx.Delete(propKey(id, name)); err != nil {
				return err
			}
		}
		for name, v := range set {
			if err := tx.Set(propKey(id, name), v); err != nil {
				return err
			}
		}
		count, size, err := propsSize(tx, id)
		if err != nil {
			return err
		}
		if len(set) > 0 { // removing never passes a bound
			if err := checkPropLimits(count, size); err != nil {
				return err
			}
		}
		counted, err := countedProps(tx, id)
		if err != nil {
			return err
		}
		if len(set) == 0 {
			// Properties stored before they were counted stay
			// uncounted: a removal never grows the usage, so it is
			// never refused.
			size = min(size, counted)
		}
		if size == counted {
			return nil
		}
		if err := setCountedProps(tx, id, size); err != nil {
			return err
		}
		// The root's usage and its quotas count what the properties
		// grow by, as a write's bytes: at its quota a tenant stored
		// 64 KiB more on every empty folder it made.
		return fs.addUsage(ctx, tx, root, usageRec{PropSize: size - counted}, limitsOf(opts))
	})
}

// propsSize returns how many dead properties the node id has, as the
// transaction sees them, and the bytes of their names and values.
func propsSize(tx kv.Txn, id uint64) (count int, size int64, err error) {
	prefix := propPrefix(id)
	err = tx.Scan(prefix, nil, func(k, v []byte) error {
		count++
		size += int64(len(k) - len(prefix) + len(v))
		return nil
	})
	return count, size, err
}

// checkPropLimits returns ErrMetadataLimit when count dead properties of
// size bytes (propsSize, after the writes: a replaced value counts once
// and a removed one not at all) are over MaxProps or MaxPropsBytes.
func checkPropLimits(count int, size int64) error {
	switch {
	case count > MaxProps:
		return fmt.Errorf("%w: %d dead properties, at most %d", ErrMetadataLimit, count, MaxProps)
	case size > MaxPropsBytes:
		return fmt.Errorf("%w: dead properties of %d bytes, at most %d", ErrMetadataLimit, size, MaxPropsBytes)
	}
	return nil
}

// countedProps returns the bytes of the node id's dead properties that
// its root's usage counts (usageRec.PropSize). Properties stored by a
// berth that did not count them are not, until a PROPPATCH sets one.
func countedProps(tx kv.Txn, id uint64) (int64, error) {
	var n int64
	err := get(tx, propSizeKey(id), &n, nil)
	return n, err
}

// setCountedProps records that the usage counts n bytes of the node id's
// dead properties; 0 removes the record.
func setCountedProps(tx kv.Txn, id uint64, n int64) error {
	if n <= 0 {
		return tx.Delete(propSizeKey(id))
	}
	return put(tx, propSizeKey(id), n)
}

// copyProps gives the node dst a copy of every dead property of src, and
// returns their bytes, which the copy's usage counts (dst's counted
// record says so).
func copyProps(tx kv.Txn, src, dst uint64) (int64, error) {
	props, err := propKeys(tx, src)
	if err != nil {
		return 0, err
	}
	prefix := propPrefix(src)
	var size int64
	for _, kvp := range props {
		name := kvp[0][len(prefix):]
		if err := tx.Set(propKey(dst, string(name)), kvp[1]); err != nil {
			return 0, err
		}
		size += int64(len(name) + len(kvp[1]))
	}
	return size, setCountedProps(tx, dst, size)
}

// propNames returns copies of the keys of a node's properties, for a
// purge that removes them: a batch of items holds their keys only, not
// up to MaxPropsBytes of values each.
func propNames(tx kv.Txn, id uint64) ([][]byte, error) {
	var out [][]byte
	err := tx.Scan(propPrefix(id), nil, func(k, _ []byte) error {
		out = append(out, append([]byte(nil), k...))
		return nil
	})
	return out, err
}

// propKeys returns copies of the keys and values of a node's properties;
// collected first because a transaction may not change what it scans.
func propKeys(tx kv.Txn, id uint64) ([][2][]byte, error) {
	var out [][2][]byte
	err := tx.Scan(propPrefix(id), nil, func(k, v []byte) error {
		out = append(out, [2][]byte{append([]byte(nil), k...), append([]byte(nil), v...)})
		return nil
	})
	return out, err
}

// PropsOf returns the dead properties of the items ids of a root, in one
// snapshot, keyed by id; items without properties are absent. It serves a
// listing (PROPFIND Depth 1) without one transaction per item. Ids that are
// not items of the root are skipped, not errors: a listing may race a delete.
func (fs *FS) PropsOf(ctx context.Context, root uint64, ids []uint64) (map[uint64]map[string][]byte, error) {
	var out map[uint64]map[string][]byte
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		var err error
		if out, err = propsIn(tx, ids); err != nil {
			return err
		}
		for id := range out {
			if err := ctx.Err(); err != nil {
				return err
			}
			if rec, _, err := liveNodeIn(tx, root, id); err != nil || rec.ID != id {
				delete(out, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// propsIn reads the dead properties of the nodes ids, keyed by id (those
// without any absent), in one ordered scan of P/ from the least id to the
// greatest: a scan per node (an iterator opened per child) cost a listing
// more the larger the store around the folder. The ids of a folder's
// children are mostly close together; where the range holds the
// properties of many other nodes (a folder filled over years), the scan
// gives up after skipping a few keys per wanted node and reads the rest
// one by one, so no listing costs more than it did.
func propsIn(tx kv.Txn, ids []uint64) (map[uint64]map[string][]byte, error) {
	out := map[uint64]map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	last := sorted[len(sorted)-1]
	i, skipped, budget, gaveUp := 0, 0, 64+4*len(sorted), false
	add := func(id uint64, k, v []byte) {
		m := out[id]
		if m == nil {
			m = map[string][]byte{}
			out[id] = m
		}
		m[string(k[len(propPrefix(id)):])] = append([]byte(nil), v...)
	}
	err := tx.Scan([]byte(pProp), propPrefix(sorted[0]), func(k, v []byte) error {
		if len(k) < len(pProp)+9 {
			return nil
		}
		id := binary.BigEndian.Uint64(k[len(pProp):])
		if id > last {
			return kv.ErrStop
		}
		for i < len(sorted) && sorted[i] < id {
			i++
		}
		if sorted[i] == id {
			add(id, k, v)
			return nil
		}
		if skipped++; skipped > budget {
			gaveUp = true
			return kv.ErrStop
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !gaveUp {
		i = len(sorted) // the scan read every property in the range
	}
	// What the scan gave up on: the ids from the one it stopped at (whose
	// properties it may have read in part) on.
	for _, id := range sorted[i:] {
		delete(out, id)
		prefix := propPrefix(id)
		err := tx.Scan(prefix, nil, func(k, v []byte) error {
			add(id, k, v)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Bounds on an item's dead properties. A listing reads every child's
// properties (PROPFIND allprop holds them for a whole folder at once), and
// the name is part of a kv key, which Badger limits to 65,000 bytes. Real
// clients store a handful of short values (Windows its Win32 times and
// attributes, Office and litmus under a hundred bytes each), so these are
// far above what they use and far below what would hurt.
const (
	// MaxPropNameBytes bounds a property's name as vfs stores it (for
	// WebDAV, "{namespace}local").
	MaxPropNameBytes = 1024
	// MaxProps bounds the number of dead properties of one item.
	MaxProps = 1024
	// MaxPropsBytes bounds the names and values of one item's dead
	// properties together.
	MaxPropsBytes = 64 << 10
)
