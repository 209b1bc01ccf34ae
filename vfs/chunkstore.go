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
// The first process to check a store that has neither writes a random
// identity as the chunk store's marker and records it in the metadata
// store; each later one finds the two equal. A chunk store without a
// marker under a metadata store that names one, or with another's, is
// refused: so is a metadata store without a record beside a chunk store
// another metadata store marked (two deployments on one bucket, where a
// sweep by one removes the other's chunks). Two processes that find
// neither at the same moment settle on the identity whose record
// commits.
func CheckChunkStore(ctx context.Context, db kv.Store, chunks chunk.Marked) error {
	var recorded []byte
	err := db.View(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keyChunkStore)
		if errors.Is(err, kv.ErrNotFound) {
			recorded = nil
			return nil
		}
		recorded = bytes.Clone(v)
		return err
	})
	if err != nil {
		return fmt.Errorf("vfs: reading the chunk store's identity: %w", err)
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
		return nil
	case recorded != nil:
		return fmt.Errorf("%w: the metadata store's files are in the chunk store marked %q, this one has no marker (another backend, bucket or prefix than the other nodes'?)", ErrOtherChunkStore, recorded)
	case marker != nil:
		return fmt.Errorf("%w: the chunk store is marked %q, the files of another metadata store; this one names none (if this chunk store is truly this metadata store's, remove its marker)", ErrOtherChunkStore, marker)
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := []byte(hex.EncodeToString(b[:]))
	if err := chunks.SetMarker(ctx, id); err != nil {
		return fmt.Errorf("vfs: marking the chunk store: %w", err)
	}
	err = db.Update(ctx, func(tx kv.Txn) error {
		v, err := tx.Get(keyChunkStore)
		switch {
		case err == nil:
			recorded = bytes.Clone(v)
			return nil
		case !errors.Is(err, kv.ErrNotFound):
			return err
		}
		recorded = id
		return tx.Set(keyChunkStore, id)
	})
	if err != nil {
		return fmt.Errorf("vfs: recording the chunk store's identity: %w", err)
	}
	if !bytes.Equal(recorded, id) {
		// Another process found neither too, a moment ago, and its
		// record committed first: the store takes its identity.
		if err := chunks.SetMarker(ctx, recorded); err != nil {
			return fmt.Errorf("vfs: marking the chunk store: %w", err)
		}
	}
	return nil
}
