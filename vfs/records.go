package vfs

import (
	"fmt"
	"math"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
	"berth/vfs/chunk"
)

// Stored records. Field numbers are the wire format: never reuse one.

type rootRec struct {
	ID      uint64   `cbor:"1,keyasint"`
	Name    string   `cbor:"2,keyasint"`
	Type    RootType `cbor:"3,keyasint"`
	Created int64    `cbor:"4,keyasint"`
	Deleted bool     `cbor:"5,keyasint,omitempty"`
	Folder  uint64   `cbor:"6,keyasint"`
	// DeletedAt is when the root was deleted (unix ns); 0 for a root
	// deleted before it was recorded (see PurgeDeleted).
	DeletedAt int64 `cbor:"7,keyasint,omitempty"`
	// Purged says a deleted root's contents are gone; the record stays,
	// so its id keeps answering ErrRootDeleted.
	Purged bool `cbor:"8,keyasint,omitempty"`
	// Tallies the root's usage is also added to while it is live, and
	// while it is deleted until it is purged (see RootOptions.Tallies,
	// TrashCounted); fixed at creation.
	Tallies []uint64 `cbor:"9,keyasint,omitempty"`
	// Indexed says the root's name index (index.go) is whole: set at
	// creation, or by the backfill for a root older than the index.
	Indexed bool `cbor:"10,keyasint,omitempty"`
	// Named is when the root last took a new name (unix ns); 0 for one
	// never renamed, or renamed before it was recorded: Created then.
	Named int64 `cbor:"11,keyasint,omitempty"`
	// TrashCounted says the deleted root's usage stayed in its tallies
	// when it was deleted, to leave them when it is purged (its bytes are
	// stored until then). A root deleted before berth kept deleted roots
	// counted left its tallies at its deletion, and its purge must not
	// take it out a second time.
	TrashCounted bool `cbor:"12,keyasint,omitempty"`
}

// counted reports whether r's usage is in its tallies now: a live root's
// is, and a deleted root's until its purge, but for one deleted before
// deleted roots stayed counted (TrashCounted).
func (r rootRec) counted() bool {
	return !r.Deleted || r.TrashCounted && !r.Purged
}

type locRec struct {
	Root    uint64 `cbor:"1,keyasint"`
	Parent  uint64 `cbor:"2,keyasint,omitempty"` // 0: the root's top folder
	Name    string `cbor:"3,keyasint,omitempty"`
	Deleted bool   `cbor:"4,keyasint,omitempty"`
}

type lockRec struct {
	Token         string `cbor:"1,keyasint"`
	Owner         string `cbor:"2,keyasint,omitempty"`
	Holder        string `cbor:"3,keyasint,omitempty"`
	Created       int64  `cbor:"4,keyasint"`
	Expires       int64  `cbor:"5,keyasint,omitempty"`
	Shared        bool   `cbor:"6,keyasint,omitempty"`
	Deep          bool   `cbor:"7,keyasint,omitempty"`
	TokenRequired bool   `cbor:"8,keyasint,omitempty"`
}

type nodeRec struct {
	ID       uint64    `cbor:"1,keyasint"`
	Root     uint64    `cbor:"2,keyasint"`
	Parent   uint64    `cbor:"3,keyasint,omitempty"`
	Name     string    `cbor:"4,keyasint,omitempty"`
	Dir      bool      `cbor:"5,keyasint,omitempty"`
	Created  int64     `cbor:"6,keyasint"`
	Modified int64     `cbor:"7,keyasint"`
	Size     int64     `cbor:"8,keyasint,omitempty"`
	Rev      uint64    `cbor:"9,keyasint,omitempty"`
	Deleted  int64     `cbor:"10,keyasint,omitempty"` // unix ns of deletion; 0 live
	Locks    []lockRec `cbor:"11,keyasint,omitempty"`
	// Staged marks the top of a tree a large Copy is still building (see
	// copyStaged): deleted, so invisible with everything below it, and
	// not the user's to purge; its intent purges it if the copy fails.
	Staged bool `cbor:"12,keyasint,omitempty"`
}

type revRec struct {
	ID      uint64      `cbor:"1,keyasint"`
	File    uint64      `cbor:"2,keyasint"`
	Size    int64       `cbor:"3,keyasint"`
	Created int64       `cbor:"4,keyasint"`
	Chunks  []chunk.Ref `cbor:"5,keyasint"`
	Inline  []byte      `cbor:"6,keyasint,omitempty"` // the contents of a small file (see InlineMax)
	// CRC is the CRC-32 (IEEE) of the contents, computed as they were
	// written, for zips laid out without reading them; nil in revisions
	// written before it was kept (a zip computes and stores it once).
	CRC *uint32 `cbor:"7,keyasint,omitempty"`
}

type usageRec struct {
	Files        int64 `cbor:"1,keyasint,omitempty"`
	HeadSize     int64 `cbor:"2,keyasint,omitempty"`
	Revisions    int64 `cbor:"3,keyasint,omitempty"`
	RevisionSize int64 `cbor:"4,keyasint,omitempty"`
	DelFiles     int64 `cbor:"5,keyasint,omitempty"`
	DelRevisions int64 `cbor:"6,keyasint,omitempty"`
	DeletedSize  int64 `cbor:"7,keyasint,omitempty"`
	Folders      int64 `cbor:"8,keyasint,omitempty"`
	// Roots counts the live roots summed into a tally; 0 in a root's own.
	Roots int64 `cbor:"9,keyasint,omitempty"`
	// Reserved is the declared length of the staged uploads in flight
	// (staged.go): not stored yet, so not in physical(), but held
	// against the quotas (held()).
	Reserved int64 `cbor:"10,keyasint,omitempty"`
	// PropSize is the bytes of the items' dead properties (names and
	// values, live and deleted items alike) that PROPPATCH and copies
	// stored: they are stored as much as a file's bytes, and were counted
	// by no quota, so a tenant at its quota kept storing 64 KiB on every
	// empty folder it made.
	PropSize int64 `cbor:"11,keyasint,omitempty"`
}

func (u usageRec) physical() int64 {
	return u.HeadSize + u.RevisionSize + u.DeletedSize + u.PropSize
}

// held is what the quotas see: the bytes stored and those reserved.
func (u usageRec) held() int64 { return u.physical() + u.Reserved }

func (u usageRec) public() Usage {
	return Usage{
		FileCount: u.Files, HeadSize: u.HeadSize,
		RevisionCount: u.Revisions, RevisionSize: u.RevisionSize,
		DelFileCount: u.DelFiles, DelRevisionCount: u.DelRevisions, DeletedSize: u.DeletedSize,
		FolderCount: u.Folders, PhysicalSize: u.physical(), RootCount: 1,
	}
}

func enc(v any) []byte {
	b, err := cbor.Marshal(v)
	if err != nil {
		// Only unsupported Go types fail, which is a programming error in
		// this file, not a runtime condition.
		panic(fmt.Sprintf("vfs: encode %T: %v", v, err))
	}
	return b
}

// get reads key into v; kv.ErrNotFound becomes notFound. In a write
// transaction, or a read one of listStore.View, a record it read before
// comes from the transaction's memo (recMemo) without being read and
// decoded again.
func get(tx kv.Txn, key []byte, v any, notFound error) error {
	m := memoOf(tx)
	if m != nil && m.recall(key, v) {
		return nil
	}
	b, err := tx.Get(key)
	if err != nil {
		if err == kv.ErrNotFound {
			return notFound
		}
		return err
	}
	if m != nil {
		// What the memo keeps is the stored record alone: decoding
		// into a used value leaves the fields the stored one omits.
		clearRec(v)
	}
	if err := cbor.Unmarshal(b, v); err != nil {
		return fmt.Errorf("vfs: decode %q: %w", key[:2], err)
	}
	if m != nil {
		m.keep(key, v)
	}
	return nil
}

func put(tx kv.Txn, key []byte, v any) error { return tx.Set(key, enc(v)) }

// clampNs is t in Unix nanoseconds, held to what an int64 holds:
// UnixNano wraps around for instants before 1678 or after 2262, which a
// client's date (modified_since) may well name. Earlier is MinInt64, later
// MaxInt64, so the order of instants is kept.
func clampNs(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func fromNs(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// lockBytes is about what locks hold in memory, for the caches' bounds.
func lockBytes(locks []lockRec) int {
	n := 0
	for _, l := range locks {
		n += len(l.Token) + len(l.Owner) + len(l.Holder) + 64
	}
	return n
}

// liveLocks returns the locks of r that have not expired at now.
func liveLocks(locks []lockRec, now int64) []Lock {
	var out []Lock
	for _, l := range locks {
		if l.Expires != 0 && l.Expires <= now {
			continue
		}
		out = append(out, Lock{
			Token: l.Token, Owner: l.Owner, Holder: l.Holder,
			Created: fromNs(l.Created), Expires: fromNs(l.Expires),
			Shared: l.Shared, Deep: l.Deep, TokenRequired: l.TokenRequired,
		})
	}
	return out
}

func (r nodeRec) public(now int64) Node {
	return Node{
		ID: r.ID, RootID: r.Root, ParentID: r.Parent, Name: r.Name, Dir: r.Dir,
		Created: fromNs(r.Created), Modified: fromNs(r.Modified),
		Size: r.Size, RevisionID: r.Rev, Deleted: r.Deleted != 0,
		Locks: liveLocks(r.Locks, now),
	}
}

func (r revRec) public() Revision {
	return Revision{ID: r.ID, FileID: r.File, Size: r.Size, Created: fromNs(r.Created), Chunks: r.Chunks, inline: r.Inline, crc: r.CRC}
}
