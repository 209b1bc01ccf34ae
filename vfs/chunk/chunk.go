// Package chunk is berth's content layer: files are cut into
// content-defined chunks (FastCDC, in segments chunked in parallel and
// joined at the cut points one chunker would find), each addressed by the
// BLAKE3 hash of its plain bytes, compressed with S2 when that helps
// (blobs of the earlier zstd codecs still read; encode.go has the
// measurements behind the choice), and kept in a Store.
// Identical chunks are stored once. The package speaks only standard types so
// that a second store (S3) can sit behind the same interface.
package chunk

import (
	"context"
	"encoding/hex"
	"errors"
)

// ID is the BLAKE3-256 hash of a chunk's plain (uncompressed) bytes.
type ID [32]byte

// String returns the lowercase hex form used in file names and logs.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// ParseID parses the hex form written by String.
func ParseID(s string) (ID, error) {
	var id ID
	if len(s) != 2*len(id) {
		return id, ErrInvalidID
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, ErrInvalidID
	}
	return id, nil
}

// Ref names one chunk of a file and its plain size. A file's revision is an
// ordered list of Refs.
type Ref struct {
	ID   ID    `cbor:"1,keyasint"`
	Size int64 `cbor:"2,keyasint"`
}

// Errors returned by stores and readers. Compare with errors.Is.
var (
	// ErrNotFound: no chunk with that ID is stored.
	ErrNotFound = errors.New("chunk: not found")
	// ErrCorrupt: a stored chunk does not decode or its bytes do not hash to
	// its ID. Corruption is always reported, never served.
	ErrCorrupt = errors.New("chunk: corrupt")
	// ErrInvalidID: a string is not the hex form of an ID.
	ErrInvalidID = errors.New("chunk: invalid id")
	// ErrTooLarge: a Writer received more bytes than the limit it was
	// given.
	ErrTooLarge = errors.New("chunk: too large")
	// ErrNoSpace: the store's storage is full, or storing more would eat
	// into the space it keeps in reserve (see DiskOptions.Reserve). Nothing
	// was stored; the same write succeeds once space is freed.
	ErrNoSpace = errors.New("chunk: storage full")
)

// SpaceChecker is a Store that can tell before a write whether its storage
// has room. Callers that add data stored elsewhere beside the chunks (the
// metadata store) ask it first, so they stop at the same point the chunks
// do. Found by type assertion; stores without a limit do not implement it.
type SpaceChecker interface {
	// CheckSpace returns ErrNoSpace (wrapped, with the figures) when
	// storing need more bytes would leave less free space than the
	// store's reserve.
	CheckSpace(need int64) error
}

// Marked is a Store that keeps, beside its chunks and out of Walk's
// sight, one small marker: the identity of the metadata store whose files
// it holds (vfs.CheckChunkStore). Several nodes share one chunk store
// only by configuration, which one node may get wrong; the marker lets a
// node see that the chunk store it opened is not the one the metadata
// store's chunks are in. Found by type assertion.
type Marked interface {
	// Marker returns the marker, or ErrNotFound when none was set.
	Marker(ctx context.Context) ([]byte, error)
	// SetMarker stores m durably as the marker, replacing any.
	SetMarker(ctx context.Context, m []byte) error
}

// Store keeps encoded chunk blobs by ID. It knows nothing of chunking or
// compression: callers hand it the already-encoded blob (see Encode) and get
// the same bytes back. Implementations are safe for concurrent use. Put does
// not keep blob after it returns (callers reuse their buffers) and Get returns
// a slice the caller owns.
type Store interface {
	// Put stores blob under id durably: when Put returns nil the blob
	// survives a crash. Putting an id that exists is a no-op that returns nil.
	Put(ctx context.Context, id ID, blob []byte) error
	// Get returns the blob stored under id, or ErrNotFound.
	Get(ctx context.Context, id ID) ([]byte, error)
	// Has reports whether id is stored durably, as a Put that returned
	// nil leaves it: a caller that finds it may skip storing it. A chunk
	// another Put or Batch is still making durable is not stored yet; an
	// implementation may wait for it.
	Has(ctx context.Context, id ID) (bool, error)
	// Delete removes id; deleting a missing id returns nil.
	Delete(ctx context.Context, id ID) error
	// Walk calls fn for every stored id, in no particular order. An error
	// from fn stops the walk and is returned.
	Walk(ctx context.Context, fn func(ID) error) error
	// Size returns the total bytes the stored blobs occupy.
	Size(ctx context.Context) (int64, error)
}

// Batcher is a Store that can take many chunks and make them durable
// together. One fsync per chunk leaves the disk waiting on its journal for
// every megabyte; a batch writes all its chunks first and syncs them at the
// end, where the file system shares the commits. Writer uses it when the
// store has it (found by type assertion, so stores without it still work).
type Batcher interface {
	// NewBatch starts an empty batch.
	NewBatch() Batch
}

// Batch stages chunks and makes them visible and durable at once. None is
// visible (Has, Get, Walk) until Commit returns nil, and then all are
// durable. Add is safe for concurrent use; Commit and Abort are called once
// the Adds have returned. Adding an id twice, or one the store has, is
// harmless.
type Batch interface {
	// Add stages blob under id without waiting for the disk. It does not
	// keep blob after it returns.
	Add(ctx context.Context, id ID, blob []byte) error
	// Commit makes every staged chunk durable and visible. If it fails,
	// some of the chunks may be visible (and durable or not); call Abort
	// to remove the rest.
	Commit(ctx context.Context) error
	// Abort removes whatever is still staged. It is idempotent and safe
	// after Commit, failed or not.
	Abort()
}
