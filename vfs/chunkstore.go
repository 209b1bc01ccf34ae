package vfs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"berth/kv"
	"berth/vfs/chunk"
)

// ErrOtherChunkStore: the chunk store a process opened is not the one the
// metadata store's files are in (CheckChunkStore).
var ErrOtherChunkStore = errors.New("vfs: this chunk store is not the one the metadata store's files are in")

// keyChunkStore holds the identity of the chunk store the metadata
// store's files are in: the marker CheckChunkStore wrote there.
var keyChunkStore = []byte(kv.VFSMarker + "chunkstore")

// CheckChunkStore refuses, with ErrOtherChunkStore, a chunk store that is
// not the one the metadata store's chunks are in. Several nodes share a
// metadata store and a chunk store by configuration alone, and one node
// whose storage settings differ (storage.backend left at disk, another
// bucket or prefix) served before: every file it stored was missing on
// the others, every file they stored missing on it, and its collector
// settled the others' garbage notes without finding their chunks.
//
// The first process to check a pair that has neither records a random
// identity in the metadata store as pending, marks the chunk store with
// the identity recorded (its own, or that of a process that recorded one
// first), then records it as settled; each later one finds the two
// equal. A chunk store without a marker under a metadata store that
// names a settled one, or with another's, is refused: so is a metadata
// store without a record beside a chunk store another metadata store
// marked (two deployments on one bucket, where a sweep by one removes
// the other's chunks). The database decides and the marker follows it,
// so two processes that find neither at once mark the store alike, and
// a first check stopped at any step (killed, the database unreachable)
// is finished by the next: one that marked the chunk store before it
// recorded anything left a marker no start would ever accept.
func CheckChunkStore(ctx context.Context, db kv.Store, chunks chunk.Marked) error {
	recorded, pending, err := readChunkStoreID(ctx, db)
	if err != nil {
		return err
	}
	marker, err := chunks.Marker(ctx)
	if errors.Is(err, chunk.ErrNotFound) {
		marker, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("vfs: reading the chunk store's marker: %w", err)
	}
	switch {
	case recorded != nil && marker != nil:
		if !bytes.Equal(recorded, marker) {
			return fmt.Errorf("%w: the metadata store's files are in the chunk store marked %q, this one is marked %q", ErrOtherChunkStore, recorded, marker)
		}
		if !pending {
			return nil
		}
	case recorded != nil && !pending:
		return fmt.Errorf("%w: the metadata store's files are in the chunk store marked %q, this one has no marker (another backend, bucket or prefix than the other nodes'?)", ErrOtherChunkStore, recorded)
	case marker != nil:
		return fmt.Errorf("%w: the chunk store is marked %q, the files of another metadata store; this one names none (if this chunk store is truly this metadata store's, remove its marker)", ErrOtherChunkStore, marker)
	}
	if recorded == nil {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id := []byte(hex.EncodeToString(b[:]))
		err = db.Update(ctx, func(tx kv.Txn) error {
			v, err := tx.Get(keyChunkStore)
			switch {
			case err == nil:
				// Another process recorded one a moment ago: its
				// identity is the store's.
				recorded, pending = parseChunkStoreID(v)
				return nil
			case !errors.Is(err, kv.ErrNotFound):
				return err
			}
			recorded, pending = id, true
			return tx.Set(keyChunkStore, append([]byte(chunkStorePending), id...))
		})
		if err != nil {
			return fmt.Errorf("vfs: recording the chunk store's identity: %w", err)
		}
		if !pending {
			// Settled by another process meanwhile: it marked the
			// store; check it as any later start does.
			return CheckChunkStore(ctx, db, chunks)
		}
	}
	if marker == nil {
		if err := chunks.SetMarker(ctx, recorded); err != nil {
			return fmt.Errorf("vfs: marking the chunk store: %w", err)
		}
	}
	err = db.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keyChunkStore)
		if err != nil {
			return err
		}
		if got, _ := parseChunkStoreID(v); !bytes.Equal(got, recorded) {
			return fmt.Errorf("%w: the metadata store's identity of its chunk store changed from %q to %q during the check", ErrOtherChunkStore, recorded, got)
		}
		return tx.Set(keyChunkStore, recorded)
	})
	if err != nil {
		return fmt.Errorf("vfs: recording the chunk store's identity: %w", err)
	}
	return nil
}

// chunkStorePending begins the record of an identity that a first check
// recorded but may not have marked the chunk store with yet.
const chunkStorePending = "pending:"

// parseChunkStoreID reads a record of keyChunkStore: the identity, and
// whether it is pending (chunkStorePending).
func parseChunkStoreID(v []byte) (id []byte, pending bool) {
	if rest, ok := bytes.CutPrefix(v, []byte(chunkStorePending)); ok {
		return bytes.Clone(rest), true
	}
	return bytes.Clone(v), false
}

// readChunkStoreID reads db's record of its chunk store's identity: nil
// when there is none.
func readChunkStoreID(ctx context.Context, db kv.Store) (id []byte, pending bool, err error) {
	err = db.View(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keyChunkStore)
		if errors.Is(err, kv.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		id, pending = parseChunkStoreID(v)
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("vfs: reading the chunk store's identity: %w", err)
	}
	return id, pending, nil
}
