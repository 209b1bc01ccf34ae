package vfs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fxamacker/cbor/v2"

	"berth/kv"
)

// Stat returns an item of a root with its path, deleted or not.
func (fs *FS) Stat(ctx context.Context, root, id uint64) (Node, error) {
	c, err := fs.item(ctx, root, id, false)
	if err != nil {
		return Node{}, err
	}
	return c.node(fs.nowNs()), nil
}

// Lookup resolves an absolute path ("/", "/a/b") to a live item of a root.
// The path must be clean: "." and ".." segments and empty segments are
// ErrInvalidName, so a path cannot climb out of where its caller checked.
func (fs *FS) Lookup(ctx context.Context, root uint64, p string) (Node, error) {
	segs, err := splitPath(p)
	if err != nil {
		return Node{}, err
	}
	var n Node
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		var err error
		_, n, err = fs.lookupNode(tx, root, segs, p)
		return err
	})
	return n, err
}

// lookupNode is lookupIn that also returns the public node, with its path.
func (fs *FS) lookupNode(tx kv.Txn, root uint64, segs []string, p string) (nodeRec, Node, error) {
	rec, err := lookupIn(tx, root, segs, p)
	if err != nil {
		return nodeRec{}, Node{}, err
	}
	n := rec.public(fs.nowNs())
	n.Path = "/" + strings.Join(segs, "/")
	return rec, n, nil
}

// lookupIn walks segs from root's top folder to a live item; p names the
// path in errors.
func lookupIn(tx kv.Txn, root uint64, segs []string, p string) (nodeRec, error) {
	rec, n, err := walkIn(tx, root, segs)
	if err != nil {
		return nodeRec{}, err
	}
	if n < len(segs) {
		// The error names p only when it is returned: quoting p for
		// every name made a lookup cost its depth times p's length.
		return nodeRec{}, fmt.Errorf("%w: %q", ErrNotExist, p)
	}
	return rec, nil
}

// walkIn walks segs from root's top folder as far as live items go: the
// deepest item it reaches, and how many of segs lead to it (fewer than
// all where a name is missing or names a file's child).
func walkIn(tx kv.Txn, root uint64, segs []string) (nodeRec, int, error) {
	if _, err := loadRoot(tx, root); err != nil {
		return nodeRec{}, 0, err
	}
	var rec nodeRec
	if err := get(tx, topKey(root), &rec, ErrNotExist); err != nil {
		return nodeRec{}, 0, err
	}
	placed(tx, rec)
	for i, s := range segs {
		if !rec.Dir {
			return rec, i, nil
		}
		// A fresh record: decoding leaves fields the stored one omits
		// (Dir, Locks) as they were in the parent.
		var c nodeRec
		err := get(tx, childKey(rec.ID, s), &c, ErrNotExist)
		if errors.Is(err, ErrNotExist) {
			return rec, i, nil
		}
		if err != nil {
			return nodeRec{}, 0, err
		}
		placed(tx, c)
		rec = c
	}
	return rec, len(segs), nil
}

// splitPath splits an absolute path into validated names.
func splitPath(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("%w: path %q is not absolute", ErrInvalidName, p)
	}
	p = strings.TrimSuffix(p[1:], "/")
	if p == "" {
		return nil, nil
	}
	segs := strings.Split(p, "/")
	for _, s := range segs {
		if err := ValidateName(s); err != nil {
			return nil, err
		}
	}
	return segs, nil
}

// List returns the live children of a folder in name order with their
// paths, and the listing hash: a signature of every listed field of every
// child, which changes whenever one of them does and is stable otherwise.
func (fs *FS) List(ctx context.Context, root, folder uint64) ([]Node, string, error) {
	gen := fs.db.Generation()
	key := listKey{root, folder}
	if c, ok := fs.lists.Get(gen, key); ok && fs.nowNs() < c.until {
		return slices.Clone(c.nodes), c.sum, nil
	}
	var out []Node
	var sum string
	until := int64(math.MaxInt64)
	size := 0
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out, until, size = out[:0], math.MaxInt64, 0
		dir, _, err := liveDirIn(tx, root, folder)
		if err != nil {
			return err
		}
		base, err := pathOf(tx, dir)
		if err != nil {
			return err
		}
		now := fs.nowNs()
		if base != "/" {
			base += "/"
		}
		if sum, err = listHash(tx, folder, now); err != nil {
			return err
		}
		var rec nodeRec
		err = tx.Scan(childPrefix(folder), nil, func(k, v []byte) error {
			rec = nodeRec{}
			if err := cbor.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("vfs: decode child of %d: %w", folder, err)
			}
			n := rec.public(now)
			n.Path = base + rec.Name
			if len(out) == cap(out) {
				// append grows big slices by a quarter; a large folder
				// would be copied dozens of times.
				out = append(make([]Node, 0, max(64, 2*cap(out))), out...)
			}
			out = append(out, n)
			for _, l := range rec.Locks {
				if l.Expires > now {
					until = min(until, l.Expires)
				}
			}
			size += nodeBytes + len(n.Path) + lockBytes(rec.Locks)
			return nil
		})
		return err
	})
	if err == nil && size <= maxCachedListBytes {
		fs.lists.Put(gen, key, cachedList{nodes: slices.Clone(out), sum: sum, until: until})
	}
	return out, sum, err
}

// listKey names a folder List read.
type listKey struct{ root, folder uint64 }

// cachedList is what List read of one folder, kept in FS.lists until the
// next commit: the share-link pages list the folder they show at every
// visit. List hands out copies of the slice, so no caller can change what
// the next one gets; the Nodes' Locks are shared and, as everywhere, only
// read. ListEach, which the REST and WebDAV listings use, reads afresh
// (see list.go).
type cachedList struct {
	nodes []Node
	sum   string
	// until is the first expiry of a child's lock: then is_locked and the
	// listing hash change without a commit, so the entry no longer holds.
	until int64
}

// maxCachedLists bounds FS.lists, and maxCachedListBytes what one entry
// holds (about 4,000 items of 200 bytes per MiB), so a full cache is at
// most about 32 MiB, and a folder larger than that is read each time.
const (
	maxCachedLists     = 8
	maxCachedListBytes = 4 << 20
)

// nodeBytes is about what a Node takes beside its strings and locks.
const nodeBytes = 200

// listingFields appends the fields of n a listing shows, unambiguously.
func listingFields(b []byte, n Node) []byte {
	b = binary.BigEndian.AppendUint64(b, n.ID)
	b = binary.BigEndian.AppendUint64(b, n.RevisionID)
	b = binary.BigEndian.AppendUint64(b, uint64(n.Size))
	b = binary.BigEndian.AppendUint64(b, uint64(n.Created.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(n.Modified.UnixNano()))
	flags := byte(0)
	if n.Dir {
		flags |= 1
	}
	if n.Locked() {
		flags |= 2
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(len(n.Name)))
	return append(b, n.Name...)
}

// Revisions returns the stored revisions of a file, oldest first.
func (fs *FS) Revisions(ctx context.Context, root, file uint64) ([]Revision, error) {
	var out []Revision
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		out = out[:0]
		rec, _, err := nodeIn(tx, root, file)
		if err != nil {
			return err
		}
		if _, _, err := resolve(tx, rec); err != nil {
			return err
		}
		if rec.Dir {
			return fmt.Errorf("%w: item %d", ErrIsDir, file)
		}
		return tx.Scan(revPrefix(file), nil, func(k, v []byte) error {
			var r revRec
			if err := cbor.Unmarshal(v, &r); err != nil {
				return err
			}
			out = append(out, r.public())
			return nil
		})
	})
	return out, err
}

// Cache keeps values derived from the store until its next commit (by
// Generation). It is kv's, offered here because the front ends reach the
// store only through vfs and take nothing from kv but its errors.
type Cache[K comparable, V any] = kv.Cache[K, V]

// NewCache returns an empty Cache of at most max entries.
func NewCache[K comparable, V any](max int) *Cache[K, V] { return kv.NewCache[K, V](max) }
