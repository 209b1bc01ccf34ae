package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"strings"

	"berth/kv"
	"berth/vfs/chunk"
)

// Mkdir creates a folder named name in the folder parent.
func (fs *FS) Mkdir(ctx context.Context, root, parent uint64, name string, opts WriteOptions) (Node, error) {
	return fs.mkdir(ctx, root, parent, name, opts, nil)
}

// MkdirAt is Mkdir of the folder at path p of root: the folder to hold it
// is looked up in the transaction that creates it, where check runs as
// WriteAt's does (an item at p is then ErrNameConflict).
func (fs *FS) MkdirAt(ctx context.Context, root uint64, p string, opts WriteOptions, check func(parentErr error, old *Node) error) (Node, error) {
	segs, err := fs.itemPath(OpMkdir, root, p, ErrInvalidName, "the top folder exists")
	if err != nil {
		return Node{}, err
	}
	return fs.mkdir(ctx, root, 0, segs[len(segs)-1], opts, &pathAt{segs: segs, check: check})
}

// mkdir is Mkdir, or MkdirAt with at (parent is then found in the
// transaction, by at's path). Every outcome is counted, a refusal before
// the transaction (an invalid name, the disk's reserve) among them.
func (fs *FS) mkdir(ctx context.Context, root, parent uint64, name string, opts WriteOptions, at *pathAt) (Node, error) {
	ev := Event{RootID: root, ParentID: parent, Name: name, Dir: true}
	n, err := fs.newFolder(ctx, &ev, opts, at)
	fs.done(OpMkdir, counted(err, at.refusedErr()), ev)
	if err != nil {
		return Node{}, err
	}
	return n, nil
}

// newFolder makes the folder ev names, and sets ev's ids to the folder's
// and to the folder holding it.
func (fs *FS) newFolder(ctx context.Context, ev *Event, opts WriteOptions, at *pathAt) (Node, error) {
	root, name := ev.RootID, ev.Name
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	if err := fs.roomFor(); err != nil {
		return Node{}, at.refuse(ctx, fs, root, err)
	}
	id, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return Node{}, err
	}
	ev.NodeID = id
	var n Node
	err = fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		parent, err := at.parentIn(tx, root, ev.ParentID, now)
		if err != nil {
			return err
		}
		ev.ParentID = parent
		if err := newChildAllowed(tx, root, parent, name, opts, now); err != nil {
			return err
		}
		rec := nodeRec{ID: id, Root: root, Parent: parent, Name: name, Dir: true, Created: now, Modified: now}
		if err := fs.addChild(ctx, tx, rec, usageRec{Folders: 1}); err != nil {
			return err
		}
		if err := fs.journal(ctx, tx, OpMkdir, opts.Actor, Event{RootID: root, NodeID: id, ParentID: parent, Name: name, Dir: true}); err != nil {
			return err
		}
		n, err = nodeAt(tx, id, now)
		return err
	})
	return n, err
}

// MkdirAll returns the folder at path p of root, making it and the
// folders above it that are missing, all in one transaction; an item in
// the way that is a file is ErrNameConflict. Each folder it makes is
// checked as Mkdir checks it: the first against the folder that holds it
// (newChildAllowed), and each below against what Mkdir would find there,
// a live, empty folder this transaction made, one level deeper
// (MaxDepth), covered by the deep locks above it and no lock of its own.
// A Mkdir per level walked the folders above each new one and a lookup
// of the path before it: a path of new folders 1,000 deep read the store
// some 3 million times (rest's agent write took seconds), where this
// walks the path a few times in all.
func (fs *FS) MkdirAll(ctx context.Context, root uint64, p string, opts WriteOptions) (Node, error) {
	segs, err := splitPath(p)
	if err == nil && len(segs) > MaxDepth {
		err = tooDeep()
	}
	if err != nil {
		fs.done(OpMkdir, err, Event{RootID: root})
		return Node{}, err
	}
	// A read first: the folder is mostly there already, and the ids
	// of those missing are taken outside the transaction that makes
	// them.
	var n Node
	missing := 0
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		rec, found, err := walkFolders(tx, root, segs)
		if err == nil && found == len(segs) {
			n = rec.public(fs.nowNs())
			n.Path = "/" + strings.Join(segs, "/")
		}
		missing = len(segs) - found
		return err
	})
	if err != nil {
		fs.done(OpMkdir, err, Event{RootID: root})
		return Node{}, err
	}
	if missing == 0 {
		return n, nil
	}
	var ids []uint64
	var made []Event
	for try := 0; ; try++ {
		for len(ids) < missing {
			id, err := fs.db.NextID(ctx, "node")
			if err != nil {
				fs.done(OpMkdir, err, Event{RootID: root})
				return Node{}, err
			}
			ids = append(ids, id)
		}
		err = fs.update(ctx, func(tx kv.Txn) error {
			made = made[:0]
			now := fs.nowNs()
			rec, found, err := walkFolders(tx, root, segs)
			if err != nil || found == len(segs) {
				if err == nil {
					n, err = nodeAt(tx, rec.ID, now)
				}
				return err
			}
			if missing = len(segs) - found; missing > len(ids) {
				return errNeedIDs
			}
			if err := fs.roomFor(); err != nil {
				return err
			}
			parent := rec.ID
			for i, name := range segs[found:] {
				if i == 0 {
					if err := newChildAllowed(tx, root, parent, name, opts, now); err != nil {
						return err
					}
				}
				if i == 1 {
					// The folders below the first are covered by
					// the deep locks above the first, as a Mkdir
					// in it would find them.
					if err := checkLocks(tx, parent, 1, opts, now); err != nil {
						return err
					}
				}
				id := ids[i]
				c := nodeRec{ID: id, Root: root, Parent: parent, Name: name, Dir: true, Created: now, Modified: now}
				if err := fs.addChild(ctx, tx, c, usageRec{Folders: 1}); err != nil {
					return err
				}
				ev := Event{RootID: root, NodeID: id, ParentID: parent, Name: name, Dir: true}
				if err := fs.journal(ctx, tx, OpMkdir, opts.Actor, ev); err != nil {
					return err
				}
				made = append(made, ev)
				parent = id
			}
			n, err = nodeAt(tx, parent, now)
			return err
		})
		if !errors.Is(err, errNeedIDs) || try == 3 {
			break
		}
	}
	if err != nil {
		fs.done(OpMkdir, err, Event{RootID: root})
		return Node{}, err
	}
	for _, ev := range made {
		fs.done(OpMkdir, nil, ev)
	}
	return n, nil
}

// errNeedIDs is MkdirAll's transaction finding more folders missing than
// it took ids for (others deleted some meanwhile): ids come from outside
// a transaction, so it takes more and tries again, a few times.
var errNeedIDs = fmt.Errorf("%w: the folders of the path changed meanwhile", ErrBusy)

// walkFolders is walkIn for MkdirAll: the deepest item of segs that
// exists, and how many names it took, where a file on the way is
// ErrNameConflict.
func walkFolders(tx kv.Txn, root uint64, segs []string) (nodeRec, int, error) {
	rec, found, err := walkIn(tx, root, segs)
	if err == nil && !rec.Dir {
		err = fmt.Errorf("%w: %q is a file", ErrNameConflict, "/"+strings.Join(segs[:found], "/"))
	}
	return rec, found, err
}

// nodeAt is the public node of item id, with its path, as the write
// transaction tx leaves it (what it saved, locks taken over included):
// the answer of the write, without a read transaction after its commit.
// The folders above the item are in the transaction's reads already (its
// depth and lock checks walked them), so resolving the path reads
// nothing new and conflicts with nothing more.
func nodeAt(tx kv.Txn, id uint64, now int64) (Node, error) {
	rec, _, err := loadNode(tx, id)
	if err != nil {
		return Node{}, err
	}
	path, gone, err := resolve(tx, rec)
	if err != nil {
		return Node{}, err
	}
	return cachedItem{rec: rec, path: path, gone: gone}.node(now), nil
}

// newChildAllowed checks, in tx, that a new item named name may go into the
// folder parent of root: the folder is live, no live item there has the
// name, it is not at MaxDepth (ErrTooDeep), and no lock on the folder or
// above it refuses opts.
func newChildAllowed(tx kv.Txn, root, parent uint64, name string, opts WriteOptions, now int64) error {
	if _, _, err := liveDirIn(tx, root, parent); err != nil {
		return err
	}
	if err := fitsDepth(tx, nodeRec{}, parent); err != nil {
		return err
	}
	if err := nameFree(tx, parent, name); err != nil {
		return err
	}
	return checkLocks(tx, parent, 1, opts, now)
}

// addChild stores rec, a new item that newChildAllowed let in, with an
// id no committed transaction has written, indexes its modification time
// and adds u to its root's usage.
func (fs *FS) addChild(ctx context.Context, tx kv.Txn, rec nodeRec, u usageRec) error {
	if err := saveNewNode(tx, rec, locRec{Root: rec.Root, Parent: rec.Parent, Name: rec.Name}); err != nil {
		return err
	}
	if err := setModified(tx, rec, nil); err != nil {
		return err
	}
	return fs.addUsage(ctx, tx, rec.Root, u, limits{})
}

// WriteFile stores the contents of r as the file name in the folder parent:
// a new file, or a new revision when a file of that name exists. It streams
// r through the chunker and commits only once all of r has arrived and every
// chunk is durable; until then the previous contents stay visible, and on
// any error (including a cancelled ctx or a body over the limits) nothing
// changes.
func (fs *FS) WriteFile(ctx context.Context, root, parent uint64, name string, r io.Reader, opts WriteOptions) (Node, error) {
	n, err := fs.writeFile(ctx, root, parent, name, r, opts, nil)
	fs.done(OpWrite, err, Event{RootID: root, NodeID: n.ID, ParentID: parent, Name: name, Size: n.Size})
	return n, err
}

// WriteAt is WriteFile for the file at path p of root, and says whether
// it created the file. The folder that holds it is looked up in the
// transaction that commits the file, not in one of its own before, so a
// small body (read first, see writeFile) costs one transaction. check,
// when not nil, runs in that transaction (and in the checks before
// reading a larger body) with what the path names: parentErr is why
// there is no folder to hold the file (ErrNotExist, ErrNotDir), old the
// item of that name, if any. An error from check refuses the write as it
// is; where check returns nil, parentErr does, and a folder at p is
// ErrNameConflict.
func (fs *FS) WriteAt(ctx context.Context, root uint64, p string, r io.Reader, opts WriteOptions, check func(parentErr error, old *Node) error) (Node, bool, error) {
	segs, err := fs.itemPath(OpWrite, root, p, ErrInvalidName, "the top folder is no file")
	if err != nil {
		return Node{}, false, err
	}
	at := &pathAt{segs: segs, check: check}
	name := segs[len(segs)-1]
	n, err := fs.writeFile(ctx, root, 0, name, r, opts, at)
	fs.done(OpWrite, counted(err, at.refused), Event{RootID: root, NodeID: n.ID, ParentID: at.parent, Name: name, Size: n.Size})
	return n, at.created, err
}

// itemPath is the names of path p of root that op (WriteAt, MkdirAt,
// DeleteAt) changes, from the top folder down; the top folder itself is
// top, with what. op counts a path it refuses, as it counts its other
// refusals.
func (fs *FS) itemPath(op Op, root uint64, p string, top error, what string) ([]string, error) {
	segs, err := splitPath(p)
	if err == nil && len(segs) == 0 {
		err = fmt.Errorf("%w: %s", top, what)
	}
	if err != nil {
		fs.done(op, err, Event{RootID: root})
	}
	return segs, err
}

// pathAt is the file a WriteAt names, with what the write found.
type pathAt struct {
	segs  []string // from the root's top folder down, the file's name last
	check func(parentErr error, old *Node) error
	// parent is the folder found in the last transaction; created
	// says the committed write created the file.
	parent  uint64
	created bool
	// refused is check's error in the last lookup, for the metrics
	// (counted).
	refused error
	// old is the item of the file's name in the folder the last lookup
	// found, nil if none, when there is a check: read there for it and
	// for checkWrite.
	old *nodeRec
}

// refuse is err, a refusal before the write's transaction, unless the
// path has no place for the item or its check refuses it: what a caller
// that looks the path up before the write answers comes first. a may be
// nil (no path: err).
func (a *pathAt) refuse(ctx context.Context, fs *FS, root uint64, err error) error {
	if a == nil {
		return err
	}
	if lerr := fs.db.View(ctx, func(tx kv.Txn) error {
		_, err := a.lookup(tx, root, fs.nowNs())
		return err
	}); lerr != nil {
		return lerr
	}
	return err
}

// parentIn is the folder that holds the file, found in tx by a's path,
// or parent where a is nil (the caller named the folder by id).
func (a *pathAt) parentIn(tx kv.Txn, root, parent uint64, now int64) (uint64, error) {
	if a == nil {
		return parent, nil
	}
	return a.lookup(tx, root, now)
}

// checkIn is parentIn, then checkWrite of the file in that folder:
// with the item of its name that a's lookup read for its check, where
// there is one, so that the file is read once.
func (a *pathAt) checkIn(fs *FS, tx kv.Txn, root, parent uint64, name string, opts WriteOptions, now int64) (uint64, *nodeRec, error) {
	if a != nil {
		var err error
		if parent, err = a.lookup(tx, root, now); err != nil {
			return 0, nil, err
		}
		if a.check != nil {
			old, err := fs.checkWriteOver(tx, root, parent, name, a.old, opts, now)
			return parent, old, err
		}
	}
	old, err := fs.checkWrite(tx, root, parent, name, opts, now)
	return parent, old, err
}

// refusedErr is a's check's error in the last lookup, nil where a is.
func (a *pathAt) refusedErr() error {
	if a == nil {
		return nil
	}
	return a.refused
}

// lookup finds, in tx, the folder that holds the file, and lets check
// refuse what it found.
func (a *pathAt) lookup(tx kv.Txn, root uint64, now int64) (uint64, error) {
	dir := a.segs[:len(a.segs)-1]
	rec, err := lookupIn(tx, root, dir, "the folder above "+a.segs[len(a.segs)-1])
	if err == nil && !rec.Dir {
		err = fmt.Errorf("%w: the folder above %q", ErrNotDir, a.segs[len(a.segs)-1])
	}
	if err != nil && !errors.Is(err, ErrNotExist) && !errors.Is(err, ErrNotDir) {
		return 0, err
	}
	a.old = nil
	if err == nil && a.check != nil {
		if a.old, err = childIn(tx, rec.ID, a.segs[len(a.segs)-1]); err != nil {
			return 0, err
		}
	}
	var old *Node
	if a.old != nil {
		n := a.old.public(now)
		old = &n
	}
	a.refused = nil
	if a.check != nil {
		if cerr := a.check(err, old); cerr != nil {
			a.refused = cerr
			return 0, cerr
		}
	}
	a.parent = rec.ID
	return rec.ID, err
}

// writeFile is WriteFile, or WriteAt with at (parent is then found in
// the transactions, by at's path).
func (fs *FS) writeFile(ctx context.Context, root, parent uint64, name string, r io.Reader, opts WriteOptions, at *pathAt) (Node, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, err
	}
	// Until its chunks are referenced, or noted for the collector on
	// failure, the upload keeps Close from recording a clean shutdown.
	if err := fs.beginUpload(); err != nil {
		return Node{}, err
	}
	defer fs.endUpload()
	refuse := func(err error) (Node, error) { return Node{}, at.refuse(ctx, fs, root, err) }
	if excluded(name, opts.ExcludedExtensions) {
		return refuse(fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(name)))
	}
	// Refuse early what would be refused at commit, before reading a byte.
	if opts.MaxFileSize > 0 && opts.DeclaredSize > opts.MaxFileSize {
		return refuse(fmt.Errorf("%w: %d bytes announced, at most %d", ErrFileTooLarge, opts.DeclaredSize, opts.MaxFileSize))
	}
	lim := limitsOf(opts)
	// Each new chunk checks the space again (chunk.Disk); this refuses a
	// small file, kept in the metadata store, and saves reading the body
	// of any other when the disk is down to its reserve already.
	if err := fs.roomFor(); err != nil {
		return refuse(err)
	}
	limit, quotaBound := int64(-1), false
	if opts.MaxFileSize > 0 {
		limit = opts.MaxFileSize
	}
	// A body announced to fit in its revision record is read first, where
	// no quota binds the write: when it does fit, the commit's own checks
	// are all there is to do, and the read transaction that would check
	// the same before it is saved (a sixth of a small PUT's store reads).
	// One that turns out larger is checked before a chunk of it is
	// stored, as any other. Under a quota, that transaction refuses a
	// body announced over it unread, as it does any body on demand
	// (BodyOnDemand), whose refusal must come before its first read.
	var (
		inline, head []byte
		small        bool
		err          error
	)
	if opts.DeclaredSize > 0 && opts.DeclaredSize <= InlineMax && !lim.bound() && !opts.BodyOnDemand {
		hp := fs.heads.Get().(*[]byte)
		defer fs.heads.Put(hp)
		if head, small, err = readHead(r, *hp); err != nil {
			return refuse(err)
		}
		if small && limit >= 0 && int64(len(head)) > limit {
			return refuse(fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, opts.MaxFileSize))
		}
		if small {
			if err := ctx.Err(); err != nil {
				return refuse(err)
			}
		} else {
			r = io.MultiReader(bytes.NewReader(head), r)
		}
	}
	var refs []chunk.Ref
	var size int64
	var crc uint32
	if small {
		// The pooled buffer goes back only when this returns: the
		// revision's record, encoded in each try of the commit, is
		// the last to read it.
		inline, size, crc = head, int64(len(head)), crc32.ChecksumIEEE(head)
	} else {
		var left int64 // what the quotas leave, when bound
		var bound bool
		err = fs.db.View(ctx, func(tx kv.Txn) error {
			var err error
			if parent, _, err = at.checkIn(fs, tx, root, parent, name, opts, fs.nowNs()); err != nil {
				return err
			}
			left, bound, err = lim.left(tx, root)
			return err
		})
		if err != nil {
			return Node{}, err
		}
		if bound && opts.DeclaredSize > left && fs.freeRoom(ctx, root, lim) > 0 {
			err = fs.db.View(ctx, func(tx kv.Txn) error {
				var err error
				left, bound, err = lim.left(tx, root)
				return err
			})
			if err != nil {
				return Node{}, err
			}
		}
		if bound && opts.DeclaredSize > left {
			return Node{}, lim.refuse("%d bytes announced, %d left", opts.DeclaredSize, left)
		}
		if bound && (limit < 0 || left < limit) {
			limit, quotaBound = left, true
		}
		inline, refs, size, crc, err = fs.store(ctx, r, limit)
	}
	// The writer pinned refs; they are released once the revision counts
	// them or forget has noted them, so the collector never sees them
	// with neither.
	defer fs.pins.unpinRefs(refs)
	if err != nil {
		fs.forget(refs)
		if errors.Is(err, chunk.ErrTooLarge) {
			if quotaBound {
				return Node{}, lim.refuse("%q", name)
			}
			return Node{}, fmt.Errorf("%w: more than %d bytes", ErrFileTooLarge, opts.MaxFileSize)
		}
		return Node{}, err
	}
	// A revision of more references than one transaction should change
	// pins them first, in batches held by an intent; the commit then hands
	// them to the revision. Small ones, nearly all, commit in one go.
	var in *intent
	if len(refs) > fs.refBatch {
		if in, err = fs.newIntent(ctx); err == nil {
			err = fs.pin(ctx, in, OpWrite, refs, func(tx kv.Txn, batch []chunk.Ref) error {
				return fs.checkStored(ctx, tx, batch)
			})
		}
		if err != nil {
			fs.releaseFailed(ctx, in)
			fs.forget(refs)
			return Node{}, err
		}
	} else {
		// Released right after the commit: forget takes it again.
		fs.gcMu.RLock()
	}
	var newID uint64
	var rec nodeRec
	var path string
	err = fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		if !opts.Modified.IsZero() {
			now = opts.Modified.UnixNano()
		}
		var old *nodeRec
		var err error
		if parent, old, err = at.checkIn(fs, tx, root, parent, name, opts, fs.nowNs()); err != nil {
			return err
		}
		if at != nil {
			at.created = old == nil
		}
		var d usageRec
		if old != nil {
			rec = *old
			d.Revisions++
			d.RevisionSize += rec.Size
			d.HeadSize += size - rec.Size
		} else {
			if newID == 0 {
				if newID, err = fs.db.NextID(ctx, "node"); err != nil {
					return err
				}
			}
			rec = nodeRec{ID: newID, Root: root, Parent: parent, Name: name, Created: now}
			d.Files++
			d.HeadSize += size
		}
		shardBy(tx, rec.ID)
		if err := fs.addUsage(ctx, tx, root, d, lim); err != nil {
			return err
		}
		// The revision's id is taken in the transaction that commits it,
		// after the one it replaces: of two writes racing on one file, the
		// one committed last, current, then has the higher id, and a
		// file's revisions in id order are in the order they were written
		// on one node. Not across nodes: each takes ids from leases of
		// its own, so what orders revisions by age (trim.go) reads Created.
		revID, err := fs.db.NextID(ctx, "revision")
		if err != nil {
			return err
		}
		rec.Modified, rec.Size, rec.Rev = now, size, revID
		rev := revRec{ID: revID, File: rec.ID, Size: size, Created: fs.nowNs(), Chunks: refs, Inline: inline, CRC: &crc}
		if err := put(tx, revKey(rec.ID, revID), rev); err != nil {
			return err
		}
		if in != nil {
			if err := in.handOver(tx); err != nil {
				return err
			}
		} else {
			if err := fs.checkStored(ctx, tx, refs); err != nil {
				return err
			}
			if err := addRefs(tx, refs, 1); err != nil {
				return err
			}
		}
		save := saveNode
		if old == nil {
			save = saveNewNode
		}
		if err := save(tx, rec, locRec{Root: root, Parent: parent, Name: name}); err != nil {
			return err
		}
		if err := setModified(tx, rec, old); err != nil {
			return err
		}
		if path, err = pathOf(tx, rec); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpWrite, opts.Actor, Event{RootID: root, NodeID: rec.ID, ParentID: parent, Name: name, Size: size, Created: old == nil})
	})
	if in == nil {
		fs.gcMu.RUnlock()
	}
	if err != nil {
		fs.releaseFailed(ctx, in)
		fs.forget(refs)
		if errors.Is(err, kv.ErrTxnTooBig) {
			// The revision record lists every chunk, and one value is
			// bounded too.
			return Node{}, fmt.Errorf("%w: %d chunks are more than one commit takes", ErrFileTooLarge, len(refs))
		}
		return Node{}, err
	}
	fs.m.bytesWritten.Add(float64(size))
	n := rec.public(fs.nowNs())
	n.Path = path
	return n, nil
}

// checkWrite checks that name may be written in parent now (opts' locks,
// IfRevision and IfAbsent; a new file within MaxDepth) and returns the
// existing file of that name, if any.
func (fs *FS) checkWrite(tx kv.Txn, root, parent uint64, name string, opts WriteOptions, now int64) (*nodeRec, error) {
	old, err := childIn(tx, parent, name)
	if err != nil {
		return nil, err
	}
	return fs.checkWriteOver(tx, root, parent, name, old, opts, now)
}

// checkWriteOver is checkWrite with old, the item name in parent that
// the caller read in tx (nil: none).
func (fs *FS) checkWriteOver(tx kv.Txn, root, parent uint64, name string, old *nodeRec, opts WriteOptions, now int64) (*nodeRec, error) {
	if _, _, err := liveDirIn(tx, root, parent); err != nil {
		return nil, err
	}
	switch {
	case old == nil && opts.IfRevision != 0:
		return nil, fmt.Errorf("%w: %q does not exist", ErrChanged, name)
	case old == nil:
		if err := fitsDepth(tx, nodeRec{}, parent); err != nil {
			return nil, err
		}
		return nil, checkLocks(tx, parent, 1, opts, now)
	case old.Dir:
		return nil, fmt.Errorf("%w: %q is a folder", ErrNameConflict, name)
	case opts.IfAbsent || (opts.IfRevision != 0 && opts.IfRevision != old.Rev):
		return nil, fmt.Errorf("%w: %q is at revision %d", ErrChanged, name, old.Rev)
	}
	return old, checkLocks(tx, old.ID, 1, opts, now)
}

// childIn is the item name in the folder parent, read in tx; nil if
// there is none.
func childIn(tx kv.Txn, parent uint64, name string) (*nodeRec, error) {
	var rec nodeRec
	switch err := get(tx, childKey(parent, name), &rec, kv.ErrNotFound); {
	case errors.Is(err, kv.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return &rec, nil
}

// addRefs changes the reference count of every chunk of refs by delta,
// noting chunks whose count falls to zero for the garbage collector.
func addRefs(tx kv.Txn, refs []chunk.Ref, delta int64) error {
	counts := make(map[chunk.ID]int64, len(refs))
	for _, r := range refs {
		counts[r.ID] += delta
	}
	for id, d := range counts {
		var n int64
		if err := get(tx, refKey(id), &n, nil); err != nil {
			return err
		}
		n += d
		if n <= 0 {
			if err := tx.Delete(refKey(id)); err != nil {
				return err
			}
			if err := tx.Set(orphanKey(id), nil); err != nil {
				return err
			}
			continue
		}
		if err := put(tx, refKey(id), n); err != nil {
			return err
		}
		if d > 0 && n == d {
			if err := tx.Delete(orphanKey(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// forget notes the chunks of a failed upload as candidates for the garbage
// collector; those another revision references are kept by their count.
// It goes fs.refBatch chunks a transaction, so a failed upload of any size
// is noted whole. It holds gcMu shared: the upload may have stored again a
// chunk the collector has just removed, and the collector, clearing the
// notes of what it removed, would clear this note with them.
func (fs *FS) forget(refs []chunk.Ref) {
	if len(refs) == 0 {
		return
	}
	fs.gcMu.RLock()
	defer fs.gcMu.RUnlock()
	for start := 0; start < len(refs); start += fs.refBatch {
		batch := refs[start:min(start+fs.refBatch, len(refs))]
		err := fs.db.Update(context.Background(), func(tx kv.Txn) error {
			for _, r := range batch {
				if _, err := tx.Get(refKey(r.ID)); errors.Is(err, kv.ErrNotFound) {
					if err := tx.Set(orphanKey(r.ID), nil); err != nil {
						return err
					}
				} else if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fs.log.Warn("vfs: could not note chunks of a failed upload; the next sweep removes them", "err", err)
			return
		}
	}
}

// checkStored checks that every chunk of refs that no revision references
// yet is in the chunk store and that no collector is removing it. The
// upload's pins keep every collector, on any node, from removing one it
// found there and skipped, so this fails only on a bug, a chunk removed
// behind berth's back, or pins released by another node because this
// one's liveness lease expired (node.go); a revision naming a missing
// chunk would lose data for good, a failed upload can be retried. The
// read of the collector's claim (B/) orders tx with the claim, so a
// collector that had not claimed the chunk when tx read it sees the
// count tx adds. The caller holds gcMu shared.
func (fs *FS) checkStored(ctx context.Context, tx kv.Txn, refs []chunk.Ref) error {
	seen := make(map[chunk.ID]bool, len(refs))
	var ask []chunk.ID // after their B/ reads, asked together below
	for _, r := range refs {
		if seen[r.ID] {
			continue
		}
		seen[r.ID] = true
		if _, err := tx.Get(refKey(r.ID)); err == nil {
			continue
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		if _, err := tx.Get(doomKey(r.ID)); err == nil {
			return fmt.Errorf("%w: chunk %s is being removed by a collector", ErrBusy, r.ID)
		} else if !errors.Is(err, kv.ErrNotFound) {
			return err
		}
		ask = append(ask, r.ID)
	}
	// An object store answers each in a round trip: asked in parallel.
	if id, missing, err := chunk.Missing(ctx, fs.chunks, ask); err != nil {
		return err
	} else if missing {
		return fmt.Errorf("%w: chunk %s is missing from the chunk store", ErrBusy, id)
	}
	return nil
}

// InlineMax is the largest file kept inside its revision record instead of
// the chunk store. A small file then costs one metadata commit, not a
// chunk file, its fsyncs and a directory entry: small files are most files
// and least bytes. They are not deduplicated.
const InlineMax = 16 << 10

// store reads r to its end, keeping a body of at most InlineMax bytes
// inline and sending a longer one through the chunk writer, and returns
// the CRC-32 of what it read (kept in the revision for zips, see Zip: the
// bytes pass through it once, at about 10 GB/s on amd64's CLMUL). limit is
// as for chunk.Writer.Write. On failure refs are the chunks stored, for the
// collector.
func (fs *FS) store(ctx context.Context, r io.Reader, limit int64) (inline []byte, refs []chunk.Ref, size int64, crc uint32, err error) {
	hp := fs.heads.Get().(*[]byte)
	defer fs.heads.Put(hp)
	head, whole, err := readHead(r, *hp)
	switch {
	case err != nil:
		return nil, nil, 0, 0, err
	case whole:
		if limit >= 0 && int64(len(head)) > limit {
			return nil, nil, 0, 0, chunk.ErrTooLarge
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, 0, 0, err
		}
		return bytes.Clone(head), nil, int64(len(head)), crc32.ChecksumIEEE(head), nil
	}
	h := crc32.NewIEEE()
	h.Write(head)
	refs, size, err = fs.writer.Write(ctx, io.MultiReader(bytes.NewReader(head), io.TeeReader(r, h)), limit)
	return nil, refs, size, h.Sum32(), err
}

// readHead reads r into buf, of InlineMax+1 bytes, until r ends or buf is
// full. whole says that r ended there: a body of at most InlineMax bytes,
// all of it in head.
func readHead(r io.Reader, buf []byte) (head []byte, whole bool, err error) {
	// Not io.ReadFull: it turns a plain EOF after some bytes into
	// ErrUnexpectedEOF, the very error a cut-off body reports.
	n := 0
	for n < len(buf) && err == nil {
		var m int
		m, err = r.Read(buf[n:])
		n += m
	}
	if err == io.EOF {
		return buf[:n], true, nil
	}
	return buf[:n], false, err
}

// bound reports whether a quota of l may bound a change.
func (l limits) bound() bool {
	return l.space > 0 || slices.ContainsFunc(l.quotas, func(q Quota) bool { return q.Bytes > 0 })
}
