package vfs

import (
	"strconv"
	"time"

	"berth/vfs/chunk"
)

// RootType is the kind of a root (spec 2.1 root_type).
type RootType string

// The root types of the spec.
const (
	RootSync   RootType = "sync"
	RootShare  RootType = "share"
	RootBackup RootType = "backup"
)

// Valid reports whether t is one of the spec's root types.
func (t RootType) Valid() bool {
	return t == RootSync || t == RootShare || t == RootBackup
}

// Root is a top-level container of folders and files.
type Root struct {
	ID      uint64
	Name    string
	Type    RootType
	Created time.Time
	// Named is when the root took its name: its last rename to another
	// name (in lower case), else its creation. Front ends that show roots
	// side by side by name let the one that held a name longest keep it.
	Named    time.Time
	Deleted  bool
	FolderID uint64 // the root's top folder, parent of its top-level items
	Locks    []Lock // live locks on the top folder (the root's is_locked)
}

// Locked reports whether the root holds a live lock.
func (r Root) Locked() bool { return len(r.Locks) > 0 }

// Node is a file or folder as stored, with its path resolved.
type Node struct {
	ID         uint64
	RootID     uint64
	ParentID   uint64 // 0 for a root's top folder
	Name       string // "" for a root's top folder
	Path       string // absolute within the root, "/" for the top folder; "" where not resolved (List)
	Dir        bool
	Created    time.Time
	Modified   time.Time
	Size       int64  // files: bytes of the current revision
	RevisionID uint64 // files: current revision
	Deleted    bool
	Locks      []Lock // live locks on this item itself
	// Listing is a folder's listing hash (List's: it changes with every
	// listed field of every child, and with nothing else), where the
	// read that returned the node reads it: ListOptions.Hashes, the
	// checks of DeleteAt and MoveAt, or FS.ListHash for the caller to
	// set. "" where it was not read, and for a file. WebDAV makes a
	// collection's entity tag of it, which a client that lists a folder
	// only when its tag changed relies on; the hash is read apart from
	// the node because it costs a scan of the folder's kept sum, which
	// most reads of a folder (a path's lookup) do not need.
	Listing string
}

// Locked reports whether the item itself holds a live lock.
func (n Node) Locked() bool { return len(n.Locks) > 0 }

// Revision is one stored version of a file.
type Revision struct {
	ID      uint64
	FileID  uint64
	Size    int64
	Created time.Time
	Chunks  []chunk.Ref // empty for a file kept inline
	inline  []byte
	crc     *uint32
}

// CRC returns the CRC-32 (IEEE) of the revision's contents, kept since it
// was written; ok is false for a revision written before berth kept it
// (an empty one's is always known: 0).
func (r Revision) CRC() (crc uint32, ok bool) {
	switch {
	case r.crc != nil:
		return *r.crc, true
	case r.Size == 0:
		return 0, true
	}
	return 0, false
}

// Lock is a lock on an item. A lock on a folder with Deep set covers
// everything below it; without Deep it covers the folder and its membership.
type Lock struct {
	Token   string
	Owner   string // who took it, opaque to vfs (a principal or a WebDAV owner XML)
	Holder  string // the principal that took it; see LockRequest.TokenRequired
	Created time.Time
	Expires time.Time // zero: never expires
	Shared  bool
	Deep    bool
	// TokenRequired locks (WebDAV) let writes through only for callers that
	// present the token; others (REST) also let their Holder through.
	TokenRequired bool
}

// LockRequest asks for a new lock.
type LockRequest struct {
	Owner         string
	Holder        string
	Duration      time.Duration // 0: until unlocked
	Shared        bool
	Deep          bool
	TokenRequired bool
	// IfRevision, when not 0, lets Lock commit only while the item is a
	// file at that revision (ErrChanged otherwise, and nothing is
	// locked), as WriteOptions.IfRevision does for a write: a front
	// end's If-Match, checked before the lock, then holds at its commit.
	IfRevision uint64
}

// Usage is the space accounting of one root (spec 2.5). Sizes are logical
// bytes of the revisions counted, before deduplication and compression.
type Usage struct {
	FileCount        int64 // live files
	HeadSize         int64 // current revisions of live files
	RevisionCount    int64 // older revisions of live files
	RevisionSize     int64
	DelFileCount     int64 // deleted files
	DelRevisionCount int64 // every revision of deleted files
	DeletedSize      int64
	FolderCount      int64 // live folders, the top folder excluded
	PhysicalSize     int64 // HeadSize + RevisionSize + DeletedSize
	// RootCount is the roots summed into this value; of a tally
	// (FS.TallyUsage), the live ones: a deleted root's usage is summed
	// too, all of it as deleted files and bytes, until it is purged.
	RootCount int64
}

// WriteOptions carry who writes and the policy limits vfs enforces
// atomically with the write. The zero value writes without limits as a
// caller that holds no lock.
type WriteOptions struct {
	// Principal is the caller's identity, matched against Lock.Holder.
	Principal string
	// Actor is who makes the change, opaque to vfs: it is passed on in
	// the change's Event for the activity log (the front ends put an
	// account.Actor here).
	Actor any
	// LockTokens the caller presents (WebDAV If header). A token lets the
	// write through its lock only when Principal is the lock's Holder (or
	// the lock has none).
	LockTokens []string
	// MaxFileSize in bytes; 0 means no limit.
	MaxFileSize int64
	// SpaceQuota of the root in bytes (PhysicalSize after the write); 0 means no limit.
	SpaceQuota int64
	// Quotas bound tallies of the root written to (see RootOptions): a
	// change that would grow a listed tally's PhysicalSize past its Bytes
	// is ErrQuotaExceeded and stores nothing. vfs does not check that the
	// root counts into the tally: that is the caller's to match.
	Quotas []Quota
	// ExcludedExtensions, each like ".exe", may not be written or renamed to.
	ExcludedExtensions []string
	// Modified sets the new revision's modification time; zero means now.
	Modified time.Time
	// DeclaredSize is the size the client announced for the body (an HTTP
	// Content-Length), 0 when unknown. A body announced over the maximum
	// size or the space left is refused before a byte of it is read; the
	// bytes that do arrive are held to the limits either way.
	DeclaredSize int64
	// BodyOnDemand says the body is not on its way until it is first
	// read: an HTTP request with Expect: 100-continue, whose client waits
	// for 100 Continue (which net/http sends at that read) before it
	// sends it. Every check that needs none of its bytes (the folder, a
	// lock, the limits) then comes before that read, so a refusal costs
	// the client no body; a small body, which is otherwise read first
	// and checked in its commit alone, costs a read transaction more.
	BodyOnDemand bool
	// IfRevision, when not 0, lets WriteFile commit only while the file's
	// current revision is that one, and Rename, Move and Delete only
	// while the item is a file at that revision; IfAbsent lets WriteFile
	// commit only while there is no file of that name. Otherwise it is
	// ErrChanged and nothing is stored: a front end's If-Match or
	// If-None-Match, checked before a long upload (or a rename, move or
	// delete), then holds at its commit too.
	IfRevision uint64
	IfAbsent   bool
	// Overwrite lets Copy, CopyEmpty and Move replace a live item that
	// already has the name in the destination folder: it is deleted, as
	// Delete does, in the transaction that puts the new item there, so an
	// operation that is refused or fails leaves it in place. Without it
	// that item is ErrNameConflict, as it is when the item replaced would
	// be the one moved or copied, or a folder above it.
	Overwrite bool
	// Listing has DeleteAt and MoveAt hand their check a folder with its
	// Listing read in the commit, for a front end that judges the
	// folder's entity tag there: a read of its listing sum's shards that
	// a plain delete or move of a folder does without.
	Listing bool
}

// Quota bounds the PhysicalSize of one tally; Bytes 0 or less means no
// limit.
type Quota struct {
	Tally uint64
	Bytes int64
	// Shared says that the roots under the quota are written by more
	// than one owner of staged uploads (an organization's persons): each
	// owner's staged uploads then reserve at most their fair share of it
	// (Stage). A quota of one person's roots is theirs to fill.
	Shared bool
}

// RootOptions are the options of a new root.
type RootOptions struct {
	// Tallies are opaque ledger ids the root's usage is also added to,
	// in the transaction of every change, for as long as the root's
	// contents are stored: the sum over many roots (a person's, an
	// organization's) is then a few reads (FS.TallyUsage), and a quota on
	// it (Quota) is checked as exactly as a root's own. Deleting the root
	// takes it out of their live roots (Usage.RootCount); purging it
	// (PurgeDeleted) takes its usage out of them. Fixed at creation;
	// duplicates are dropped.
	Tallies []uint64
}

// ETag is the entity tag of an item's current contents, one value for REST
// downloads and WebDAV getetag: a file's changes with every revision. A
// folder's is its id and creation time, which never change while it
// lives (REST's conditions on a folder); WebDAV's getetag of a collection
// is made of its Listing instead, which follows its children.
func (n Node) ETag() string {
	// strconv rather than Sprintf: a PROPFIND computes one per entry.
	if n.Dir {
		return `"d` + strconv.FormatUint(n.ID, 10) + "-" + strconv.FormatInt(n.Modified.UnixNano(), 10) + `"`
	}
	return `"r` + strconv.FormatUint(n.RevisionID, 10) + `"`
}
