package vfs

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"berth/kv"
)

// Bounds on an item's locks, which live in its node record: every listing
// and write of the item reads them, so together they stay within 64 KiB,
// as an item's dead properties do (MaxPropsBytes). Windows and Office send
// an owner of a user or machine name in a DAV:href, litmus a short phrase,
// so 4 KiB is far above real owners; shared locks on one item are rare
// and one per client, and a client that locks again without unlocking
// meets the limit only until its locks expire.
const (
	// MaxLockOwnerBytes bounds a lock's owner (for WebDAV, the DAV:owner
	// XML as stored).
	MaxLockOwnerBytes = 4 << 10
	// MaxLocks bounds the live locks on one item.
	MaxLocks = 16
)

// checkLockRequest refuses an owner over MaxLockOwnerBytes.
func checkLockRequest(req LockRequest) error {
	if len(req.Owner) > MaxLockOwnerBytes {
		return fmt.Errorf("%w: the lock owner is %d bytes, at most %d", ErrMetadataLimit, len(req.Owner), MaxLockOwnerBytes)
	}
	return nil
}

// Lock locks an item (a root's top folder locks the root). An exclusive
// lock conflicts with any live lock on the item, with deep locks above it,
// and, when deep, with any lock below it; a shared lock only with exclusive
// ones. Conflicts are ErrLocked. The token is a URI (urn:uuid:...), as
// WebDAV wants it. An owner over MaxLockOwnerBytes, or an item with
// MaxLocks live locks already, is ErrMetadataLimit; an item not at
// req.IfRevision is ErrChanged.
func (fs *FS) Lock(ctx context.Context, root, id uint64, req LockRequest) (Lock, error) {
	if err := checkLockRequest(req); err != nil {
		return Lock{}, err
	}
	l := lockRec{Token: newToken(), Owner: req.Owner, Holder: req.Holder, Shared: req.Shared,
		Deep: req.Deep, TokenRequired: req.TokenRequired}
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		rec, loc, err := liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if err := atRevision(rec, req.IfRevision); err != nil {
			return err
		}
		conflict := func(locks []lockRec, deepOnly bool) bool { return lockConflict(locks, l, now, deepOnly) }
		if conflict(rec.Locks, false) {
			return fmt.Errorf("%w: %q", ErrLocked, rec.Name)
		}
		if err := lockConflictAbove(tx, rec.Parent, l, now); err != nil {
			return err
		}
		if rec.Dir && l.Deep {
			if err := walkLive(tx, rec.ID, func(c nodeRec) error {
				if conflict(c.Locks, false) {
					return fmt.Errorf("%w: %q", ErrLocked, c.Name)
				}
				return nil
			}); err != nil {
				return err
			}
		}
		rec.Locks = pruneLocks(rec.Locks, now)
		if len(rec.Locks) >= MaxLocks {
			return fmt.Errorf("%w: %q holds %d locks, at most %d", ErrMetadataLimit, rec.Name, len(rec.Locks), MaxLocks)
		}
		l.Created = now
		if req.Duration > 0 {
			l.Expires = now + int64(req.Duration)
		}
		rec.Locks = append(rec.Locks, l)
		if err := saveNode(tx, rec, loc); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpLock, nil, Event{RootID: root, NodeID: id, Name: rec.Name, Dir: rec.Dir})
	})
	fs.done(OpLock, err, Event{RootID: root, NodeID: id})
	if err != nil {
		return Lock{}, err
	}
	return liveLocks([]lockRec{l}, 0)[0], nil
}

// lockConflict reports whether a live lock of locks (only the deep ones
// with deepOnly) conflicts with the new lock l: any does unless both are
// shared.
func lockConflict(locks []lockRec, l lockRec, now int64, deepOnly bool) bool {
	for _, o := range locks {
		if (o.Expires != 0 && o.Expires <= now) || (deepOnly && !o.Deep) {
			continue
		}
		if !(o.Shared && l.Shared) {
			return true
		}
	}
	return false
}

// lockConflictAbove returns ErrLocked when a deep lock on the folder id or
// a folder above it conflicts with the new lock l below it.
func lockConflictAbove(tx kv.Txn, id uint64, l lockRec, now int64) error {
	for id != 0 {
		rec, _, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		if lockConflict(rec.Locks, l, now, true) {
			return fmt.Errorf("%w: %q", ErrLocked, rec.Name)
		}
		id = rec.Parent
	}
	return nil
}

// CreateLocked creates the empty file name in the folder parent and locks
// it with req, in one transaction (WebDAV's LOCK of a missing name): when
// the lock is refused (ErrLocked), the name is taken (ErrNameConflict) or
// opts refuse the write, or the owner is over MaxLockOwnerBytes
// (ErrMetadataLimit), nothing is created. req.Deep is ignored: a file
// has nothing below it.
func (fs *FS) CreateLocked(ctx context.Context, root, parent uint64, name string, req LockRequest, opts WriteOptions) (Node, Lock, error) {
	n, l, err := fs.createLocked(ctx, root, parent, name, req, opts)
	fs.done(OpWrite, err, Event{RootID: root, NodeID: n.ID, ParentID: parent, Name: name})
	fs.done(OpLock, err, Event{RootID: root, NodeID: n.ID})
	return n, l, err
}

func (fs *FS) createLocked(ctx context.Context, root, parent uint64, name string, req LockRequest, opts WriteOptions) (Node, Lock, error) {
	if err := ValidateName(name); err != nil {
		return Node{}, Lock{}, err
	}
	if err := checkLockRequest(req); err != nil {
		return Node{}, Lock{}, err
	}
	if excluded(name, opts.ExcludedExtensions) {
		return Node{}, Lock{}, fmt.Errorf("%w: %q", ErrExtensionExcluded, extension(name))
	}
	if err := fs.roomFor(); err != nil {
		return Node{}, Lock{}, err
	}
	id, err := fs.db.NextID(ctx, "node")
	if err != nil {
		return Node{}, Lock{}, err
	}
	l := lockRec{Token: newToken(), Owner: req.Owner, Holder: req.Holder, Shared: req.Shared,
		TokenRequired: req.TokenRequired}
	var rec nodeRec
	var path string
	err = fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		if err := newChildAllowed(tx, root, parent, name, opts, now); err != nil {
			return err
		}
		if err := lockConflictAbove(tx, parent, l, now); err != nil {
			return err
		}
		revID, err := fs.db.NextID(ctx, "revision")
		if err != nil {
			return err
		}
		if err := put(tx, revKey(id, revID), revRec{ID: revID, File: id, Created: now}); err != nil {
			return err
		}
		l.Created, l.Expires = now, 0
		if req.Duration > 0 {
			l.Expires = now + int64(req.Duration)
		}
		rec = nodeRec{ID: id, Root: root, Parent: parent, Name: name, Created: now, Modified: now,
			Rev: revID, Locks: []lockRec{l}}
		if err := fs.addChild(ctx, tx, rec, usageRec{Files: 1}); err != nil {
			return err
		}
		if path, err = pathOf(tx, rec); err != nil {
			return err
		}
		// Two changes, as the observer hears them: a new file, locked.
		if err := fs.journal(ctx, tx, OpWrite, opts.Actor, Event{RootID: root, NodeID: id, ParentID: parent, Name: name, Created: true}); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpLock, opts.Actor, Event{RootID: root, NodeID: id, Name: name})
	})
	if err != nil {
		return Node{}, Lock{}, err
	}
	n := rec.public(fs.nowNs())
	n.Path = path
	return n, liveLocks([]lockRec{l}, 0)[0], nil
}

// RefreshLock extends the lock token on an item by d from now.
func (fs *FS) RefreshLock(ctx context.Context, root, id uint64, token string, d time.Duration) (Lock, error) {
	var out Lock
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		rec, loc, err := liveNodeIn(tx, root, id)
		if err != nil {
			return err
		}
		rec.Locks = pruneLocks(rec.Locks, now)
		i := slices.IndexFunc(rec.Locks, func(l lockRec) bool { return l.Token == token })
		if i < 0 {
			return fmt.Errorf("%w: %q", ErrNoSuchLock, token)
		}
		rec.Locks[i].Expires = 0
		if d > 0 {
			rec.Locks[i].Expires = now + int64(d)
		}
		out = liveLocks(rec.Locks[i:i+1], 0)[0]
		return saveNode(tx, rec, loc)
	})
	return out, err
}

// Unlock removes the lock token from an item; an empty token removes every
// lock on it (an administrator's or owner's unlock). A token the item does
// not hold is ErrNoSuchLock.
func (fs *FS) Unlock(ctx context.Context, root, id uint64, token string) error {
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		rec, loc, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if _, _, err := resolve(tx, rec); err != nil {
			return err
		}
		rec.Locks = pruneLocks(rec.Locks, now)
		if token == "" {
			rec.Locks = nil
		} else {
			i := slices.IndexFunc(rec.Locks, func(l lockRec) bool { return l.Token == token })
			if i < 0 {
				return fmt.Errorf("%w: %q", ErrNoSuchLock, token)
			}
			rec.Locks = slices.Delete(rec.Locks, i, i+1)
		}
		if err := saveNode(tx, rec, loc); err != nil {
			return err
		}
		return fs.journal(ctx, tx, OpUnlock, nil, Event{RootID: root, NodeID: id, Name: rec.Name, Dir: rec.Dir})
	})
	fs.done(OpUnlock, err, Event{RootID: root, NodeID: id})
	return err
}

// ForceUnlock ends every live lock that covers item id, whoever holds
// it: the item's own and the deep locks of the folders above it, in one
// transaction (RFC 4918 9.11: an UNLOCK may name any resource in a
// lock's scope, and removes the whole lock). It is for those who may
// end others' locks (a root's owner, a share's managers); ending only
// the item's own left it locked, read-only for everyone, under a folder's
// deep lock. A deleted item has only its own locks ended: the folders
// above it are live and their locks are not its. Each lock ended is one
// OpUnlock event of the item that held it, with Event.Forced set. An
// item that nothing covers is a success that changes nothing.
func (fs *FS) ForceUnlock(ctx context.Context, root, id uint64) error {
	var ended int
	err := fs.update(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		ended = 0
		rec, loc, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		_, gone, err := resolve(tx, rec)
		if err != nil {
			return err
		}
		for first := true; ; first = false {
			var keep, end []lockRec
			for _, l := range pruneLocks(rec.Locks, now) {
				if first || l.Deep {
					end = append(end, l)
				} else {
					keep = append(keep, l)
				}
			}
			if len(end) > 0 {
				rec.Locks = keep
				if err := saveNode(tx, rec, loc); err != nil {
					return err
				}
			}
			for _, l := range liveLocks(end, 0) {
				ended++
				if err := fs.journal(ctx, tx, OpUnlock, nil, Event{RootID: root, NodeID: rec.ID, Name: rec.Name, Dir: rec.Dir, Forced: &l}); err != nil {
					return err
				}
			}
			if gone || rec.Parent == 0 {
				return nil
			}
			if rec, loc, err = nodeIn(tx, root, rec.Parent); err != nil {
				return err
			}
		}
	})
	if ended > 0 || err != nil {
		fs.done(OpUnlock, err, Event{RootID: root, NodeID: id})
	}
	return err
}

// FindLock returns the item holding the lock token among from and the
// folders above it: a WebDAV request names a resource that a lock on one of
// its folders may cover.
func (fs *FS) FindLock(ctx context.Context, root, from uint64, token string) (Node, Lock, error) {
	var n Node
	var lk Lock
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		now := fs.nowNs()
		for id := from; id != 0; {
			rec, _, err := nodeIn(tx, root, id)
			if err != nil {
				return err
			}
			for _, l := range liveLocks(rec.Locks, now) {
				if l.Token == token {
					n, lk = rec.public(now), l
					n.Path, err = pathOf(tx, rec)
					return err
				}
			}
			id = rec.Parent
		}
		return fmt.Errorf("%w: %q", ErrNoSuchLock, token)
	})
	return n, lk, err
}

// FindLockAt is FindLock from the item at the path p of root, or, when p
// names nothing, from the deepest item on the way to it: a lock on a
// folder covers the names below it that do not exist yet. It is one read
// of the path from the top. Walking up from p and looking each folder up
// again from the top cost the square of the depth: an If header of 256
// tagged lists, each 1,000 names deep, took one request 17 seconds.
func (fs *FS) FindLockAt(ctx context.Context, root uint64, p, token string) (Node, Lock, error) {
	segs, err := splitPath(p)
	if err != nil {
		return Node{}, Lock{}, err
	}
	var from uint64
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		rec, _, err := walkIn(tx, root, segs)
		from = rec.ID
		return err
	})
	if err != nil {
		return Node{}, Lock{}, err
	}
	return fs.FindLock(ctx, root, from, token)
}

// isPathLock reports whether l is a token-required (WebDAV) lock, which
// names the path it was taken on rather than the item.
func isPathLock(l lockRec) bool { return l.TokenRequired }

func pruneLocks(locks []lockRec, now int64) []lockRec {
	return slices.DeleteFunc(locks, func(l lockRec) bool { return l.Expires != 0 && l.Expires <= now })
}

func newToken() string {
	return "urn:uuid:" + uuid.NewString()
}

// lockHeld reports whether opts hold the lock l. A lock's token counts
// only when its Holder presents it (RFC 4918 6.4: the server checks the
// principal as well as the token), so a token seen by someone else is no
// key; a lock without a Holder is the token's alone. A lock that does not
// require its token (REST's) is held by its Holder.
func lockHeld(l lockRec, opts WriteOptions) bool {
	if l.Holder != "" && l.Holder != opts.Principal {
		return false
	}
	return slices.Contains(opts.LockTokens, l.Token) || (!l.TokenRequired && l.Holder != "")
}

// blocks reports whether the live locks covering one item refuse a write
// by opts: an exclusive one opts do not hold, or shared ones of which
// opts hold none. Of shared locks one is enough: "any principal that has
// both access privileges and a valid lock can use the locked resource"
// (RFC 4918 6.2). A lock request never mixes an exclusive lock with
// others on one item, but a move can bring an item with an exclusive
// lock under a folder's shared deep locks, and those do not open it.
func blocks(locks []lockRec, opts WriteOptions, now int64) bool {
	locked, held := false, false
	for _, l := range locks {
		switch {
		case l.Expires != 0 && l.Expires <= now:
		case lockHeld(l, opts):
			held = true
		case !l.Shared:
			return true
		default:
			locked = true
		}
	}
	return locked && !held
}

// checkLocks walks up from id. The first levels items change (the item
// written and, for a change of membership, its folder); each is covered
// by its own locks and the deep locks of the folders above it, and is
// refused unless blocks lets it through.
func checkLocks(tx kv.Txn, id uint64, levels int, opts WriteOptions, now int64) error {
	var chain []nodeRec
	for id != 0 {
		rec, _, err := loadNode(tx, id)
		if err != nil {
			return err
		}
		chain = append(chain, rec)
		id = rec.Parent
	}
	for i := 0; i < levels && i < len(chain); i++ {
		cover := chain[i].Locks
		for _, above := range chain[i+1:] {
			for _, l := range above.Locks {
				if l.Deep {
					cover = append(cover[:len(cover):len(cover)], l)
				}
			}
		}
		if blocks(cover, opts, now) {
			return fmt.Errorf("%w: %q", ErrLocked, chain[i].Name)
		}
	}
	return nil
}

// DeepLocksAbove returns the folders above the item id of root that hold a
// live deep lock, nearest first, each with its path: the locks that cover
// the item from above (a WebDAV lockdiscovery's). It is one walk up in
// one read, where a Stat of each folder above, each resolving its own
// path to the top, cost the square of the depth: 492,000 reads for a
// PROPFIND 992 folders deep whenever a commit had emptied the item cache.
func (fs *FS) DeepLocksAbove(ctx context.Context, root, id uint64) ([]Node, error) {
	var out []Node
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		now := fs.nowNs()
		rec, _, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		var chain []nodeRec // from the item's folder up to the top folder
		for rec.Parent != 0 {
			if rec.Staged {
				return errStaged
			}
			if rec, _, err = loadNode(tx, rec.Parent); err != nil {
				return err
			}
			if chain = append(chain, rec); len(chain) > 4096 {
				return fmt.Errorf("vfs: path of item %d does not end", id)
			}
		}
		// Nearest first, as the walk found them; a folder is deleted
		// when it or one above it is (resolve).
		for i, r := range chain {
			if !slices.ContainsFunc(liveLocks(r.Locks, now), func(l Lock) bool { return l.Deep }) {
				continue
			}
			names := make([]string, 0, len(chain)-1-i)
			gone := false
			for j := len(chain) - 1; j >= i; j-- {
				if j < len(chain)-1 {
					names = append(names, chain[j].Name)
				}
				gone = gone || chain[j].Deleted != 0
			}
			n := r.public(now)
			n.Path, n.Deleted = "/"+strings.Join(names, "/"), gone
			out = append(out, n)
		}
		return nil
	})
	return out, err
}

// Within reports whether the item id of root is the folder folder or lies
// below it, in one walk up from the item in one read: a share link's
// check that an item is in the shared folder Stat'ed each folder on the
// way, each resolving its own path to the top, the square of the depth.
func (fs *FS) Within(ctx context.Context, root, id, folder uint64) (bool, error) {
	var in bool
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		if _, _, err := nodeIn(tx, root, id); err != nil {
			return err
		}
		var err error
		in, err = ancestorOf(tx, folder, id)
		return err
	})
	return in, err
}
