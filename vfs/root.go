package vfs

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"berth/kv"
)

// CreateRoot creates an empty root with its top folder.
func (fs *FS) CreateRoot(ctx context.Context, name string, typ RootType) (Root, error) {
	return fs.CreateRootWith(ctx, name, typ, RootOptions{})
}

// CreateRootWith is CreateRoot with options: the root is counted into
// opts.Tallies (their RootCount included) in the transaction that creates it.
func (fs *FS) CreateRootWith(ctx context.Context, name string, typ RootType, opts RootOptions) (Root, error) {
	if !typ.Valid() {
		return Root{}, fmt.Errorf("vfs: root type %q is not sync, share or backup", typ)
	}
	if err := ValidateRootName(name); err != nil {
		return Root{}, err
	}
	if err := fs.roomFor(); err != nil {
		return Root{}, err
	}
	id, err := fs.db.NextID(ctx, "root")
	if err != nil {
		return Root{}, err
	}
	folder, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return Root{}, err
	}
	now := fs.nowNs()
	r := rootRec{ID: id, Name: name, Type: typ, Created: now, Folder: folder, Indexed: true}
	if len(opts.Tallies) > 0 {
		r.Tallies = uniqueTallies(opts.Tallies)
	}
	top := nodeRec{ID: folder, Root: id, Dir: true, Created: now, Modified: now}
	err = fs.update(ctx, func(tx kv.Txn) error {
		if err := put(tx, rootKey(id), r); err != nil {
			return err
		}
		// The top folder's listing sum starts empty, as a new folder's
		// does (startEmpty).
		startEmpty(tx, folder)
		if err := saveNode(tx, top, locRec{Root: id}); err != nil {
			return err
		}
		if err := addTallies(tx, r.Tallies, usageRec{Roots: 1}); err != nil {
			return err
		}
		if err := setModified(tx, top, nil); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpCreateRoot, nil, Event{RootID: id, NodeID: folder, Name: name, Dir: true})
	})
	fs.done(OpCreateRoot, err, Event{RootID: id, NodeID: folder, Name: name, Dir: true})
	if err != nil {
		return Root{}, err
	}
	return Root{ID: id, Name: name, Type: typ, Created: fromNs(now), Named: fromNs(now), FolderID: folder}, nil
}

// SetRootTallies gives a live root created without tallies the tallies
// of opts, counting what it holds (and itself) into them in the same
// transaction. Tallies are set once: a root that has some keeps them, and
// the call does nothing. It serves roots created before their owner's ids
// were known (the first run's, made before its organization so that a full
// disk refuses the first run whole). Errors: ErrNotExist, ErrRootDeleted.
func (fs *FS) SetRootTallies(ctx context.Context, id uint64, opts RootOptions) error {
	return fs.update(ctx, func(tx kv.Txn) error {
		r, err := loadRoot(tx, id)
		if err != nil || len(r.Tallies) > 0 || len(opts.Tallies) == 0 {
			return err
		}
		u, err := loadUsage(tx, id)
		if err != nil {
			return err
		}
		u.Roots = 1
		r.Tallies = uniqueTallies(opts.Tallies)
		if err := addTallies(tx, r.Tallies, u); err != nil {
			return err
		}
		return put(tx, rootKey(id), r)
	})
}

// Root returns a live root; a deleted one is ErrRootDeleted.
func (fs *FS) Root(ctx context.Context, id uint64) (Root, error) {
	gen := fs.db.Generation()
	c, ok := fs.roots.Get(gen, id)
	if !ok {
		var err error
		if c, err = fs.readRoot(ctx, gen, id); err != nil {
			return Root{}, err
		}
	}
	// Locks expire without a commit: which are live is decided now.
	return Root{ID: c.rec.ID, Name: c.rec.Name, Type: c.rec.Type, Created: fromNs(c.rec.Created), Named: fromNs(cmp.Or(c.rec.Named, c.rec.Created)),
		FolderID: c.rec.Folder, Locks: liveLocks(c.locks, fs.nowNs())}, nil
}

// readRoot reads what Root keeps for root id, and keeps it when it is
// small. A function of its own so that the record its transaction fills
// escapes to the heap only on a miss, not on every REST request's Root.
func (fs *FS) readRoot(ctx context.Context, gen, id uint64) (cachedRoot, error) {
	var c cachedRoot
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		r, err := loadRoot(tx, id)
		if err != nil {
			return err
		}
		top, _, err := loadNode(tx, r.Folder)
		c = cachedRoot{r, top.Locks}
		return err
	})
	if err != nil {
		return cachedRoot{}, err
	}
	if len(c.rec.Name)+lockBytes(c.locks) <= maxCachedRootBytes {
		fs.roots.Put(gen, id, c)
	}
	return c, nil
}

// maxCachedRoots bounds FS.roots, and maxCachedRootBytes what one entry
// holds: a root is a few hundred bytes, but its top folder's locks can be
// MaxLocks with owners of MaxLockOwnerBytes, so a root that holds more is
// read every time, and a full cache stays under about 20 MiB.
const (
	maxCachedRoots     = 4096
	maxCachedRootBytes = 4 << 10
)

// cachedRoot is what Root reads, kept in FS.roots until the next commit:
// the WebDAV front end asks for the caller's root on every request, and
// reading and decoding it was a tenth of the CPU of a 4 KiB GET.
type cachedRoot struct {
	rec   rootRec
	locks []lockRec // of the top folder
}

// RenameRoot changes a root's display name; another name than it had
// (in lower case) is taken now, Root.Named.
func (fs *FS) RenameRoot(ctx context.Context, id uint64, name string) (Root, error) {
	if err := ValidateRootName(name); err != nil {
		return Root{}, err
	}
	err := fs.update(ctx, func(tx kv.Txn) error {
		r, err := loadRoot(tx, id)
		if err != nil {
			return err
		}
		if strings.ToLower(r.Name) != strings.ToLower(name) {
			// Another name: taken now (Root.Named), and yielded to a
			// root that held it before wherever names clash. Compared
			// in lower case, as front ends tell clashing names apart
			// (WebDAV's mount names): strings.EqualFold takes "ſam"
			// for "sam", and a root renamed from one to the other kept
			// its earlier time, and took the name from a root that
			// held it meanwhile.
			r.Named = fs.nowNs()
		}
		r.Name = name
		return put(tx, rootKey(id), r)
	})
	if err != nil {
		return Root{}, err
	}
	return fs.Root(ctx, id)
}

// DeleteRoot marks a root deleted: every later operation on it fails with
// ErrRootDeleted. It leaves the live roots its tallies count now, but its
// contents stay until purged (see PurgeDeleted), and so does their usage
// in its tallies, as deleted files and bytes (usageRec.trashed), under
// their quotas: as a trash counts against its owner's quota until it is
// emptied. Before, the usage left at once, and an organization's
// administrator filled a share to the quota, deleted it, made another and
// filled it again, without end, the bytes of every deleted share still on
// disk.
func (fs *FS) DeleteRoot(ctx context.Context, id uint64) error {
	err := fs.update(ctx, func(tx kv.Txn) error {
		r, err := loadRoot(tx, id)
		if err != nil {
			return err
		}
		if len(r.Tallies) > 0 {
			// Its usage stays, moved to the trash: what was live
			// counts as deleted (usageRec.trashed). Reading every
			// shard makes a change of the root committed meanwhile
			// conflict with this transaction.
			u, err := loadUsage(tx, id)
			if err != nil {
				return err
			}
			d := u.trashed()
			d.add(u.neg())
			d.Roots = -1
			if err := addTallies(tx, r.Tallies, d); err != nil {
				return err
			}
			r.TrashCounted = true
		}
		r.Deleted, r.DeletedAt = true, fs.nowNs()
		if err := put(tx, rootKey(id), r); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpDeleteRoot, nil, Event{RootID: id, Name: r.Name})
	})
	fs.done(OpDeleteRoot, err, Event{RootID: id})
	return err
}

// Usage returns the space accounting of a root.
func (fs *FS) Usage(ctx context.Context, root uint64) (Usage, error) {
	var u usageRec
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		if _, err := loadRoot(tx, root); err != nil {
			return err
		}
		var err error
		u, err = loadUsage(tx, root)
		return err
	})
	return u.public(), err
}
