package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"berth/kv"
)

// File is an open revision of a file: an io.ReadSeeker and io.ReaderAt over
// its chunks that fetches only what is read, so http.ServeContent and Range
// requests cost what they ask for. Close it.
type File struct {
	Node     Node // the file, with Path
	Revision Revision
	r        contents
	m        *metrics
	// inline is r for a file kept inline, in the File's own allocation:
	// a small file's download made two more (the reader and its box).
	inline inlineReader
}

// Open opens the current revision of a live file.
func (fs *FS) Open(ctx context.Context, root, id uint64) (*File, error) {
	return fs.OpenRevision(ctx, root, id, 0)
}

// OpenRevision opens revision rev of a file (0: the current one). Older
// revisions stay readable after the file is deleted, the current one not.
func (fs *FS) OpenRevision(ctx context.Context, root, id, rev uint64) (*File, error) {
	if rev == 0 {
		return fs.openCurrent(ctx, root, id)
	}
	f := &File{m: fs.m}
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		rec, _, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		if rec.Dir {
			return fmt.Errorf("%w: item %d", ErrIsDir, id)
		}
		var gone bool
		f.Node.Path, gone, err = resolve(tx, rec)
		if err != nil {
			return err
		}
		var rr revRec
		if err := get(tx, revKey(id, rev), &rr, fmt.Errorf("%w: revision %d", ErrNotExist, rev)); err != nil {
			return err
		}
		path := f.Node.Path
		f.Node = rec.public(fs.nowNs())
		f.Node.Path, f.Node.Deleted = path, gone
		f.Revision = rr.public()
		return nil
	})
	fs.m.observe(OpRead, err)
	if err != nil {
		return nil, err
	}
	fs.attach(ctx, f)
	return f, nil
}

// openCurrent opens the current revision of a live file through
// FS.items.
func (fs *FS) openCurrent(ctx context.Context, root, id uint64) (*File, error) {
	c, err := fs.item(ctx, root, id, true)
	switch {
	case err != nil:
	case c.rec.Dir:
		err = fmt.Errorf("%w: item %d", ErrIsDir, id)
	case c.gone:
		err = fmt.Errorf("%w: item %d is deleted", ErrNotExist, id)
	}
	fs.m.observe(OpRead, err)
	if err != nil {
		return nil, err
	}
	f := &File{Node: c.node(fs.nowNs()), Revision: c.rev.public(), m: fs.m}
	fs.attach(ctx, f)
	return f, nil
}

// itemKey names an item of a root that Stat or Open read.
type itemKey struct{ root, id uint64 }

// cachedItem is what Stat and Open read of an item by its id, kept in
// FS.items until the next commit. A REST download asks for the item
// twice (the route's Stat, then Open), and each read resolved the path up
// to the root: for a small file that was the largest cost after TLS and
// HTTP. Records are never changed in place, so sharing them is safe.
type cachedItem struct {
	rec  nodeRec
	path string
	gone bool
	// rev is the current revision's record, read when revRead (for a
	// live file; for anything else revRead means there is none to read).
	rev     revRec
	revRead bool
}

// node is the item's public form at now (locks expire without a commit).
func (c cachedItem) node(now int64) Node {
	n := c.rec.public(now)
	n.Path, n.Deleted = c.path, c.gone
	return n
}

// item reads an item, and with withRev its current revision, through
// FS.items.
func (fs *FS) item(ctx context.Context, root, id uint64, withRev bool) (cachedItem, error) {
	gen := fs.db.Generation()
	key := itemKey{root, id}
	if c, ok := fs.items.Get(gen, key); ok && (c.revRead || !withRev) {
		return c, nil
	}
	var c cachedItem
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		c = cachedItem{}
		rec, _, err := nodeIn(tx, root, id)
		if err != nil {
			return err
		}
		c.rec = rec
		if c.path, c.gone, err = resolve(tx, rec); err != nil {
			return err
		}
		if !withRev {
			return nil
		}
		c.revRead = true
		if rec.Dir || c.gone {
			return nil
		}
		return get(tx, revKey(id, rec.Rev), &c.rev, fmt.Errorf("%w: revision %d", ErrNotExist, rec.Rev))
	})
	if err != nil {
		return cachedItem{}, err
	}
	if len(c.rev.Chunks) <= maxCachedPathChunks &&
		len(c.path)+len(c.rec.Name)+lockBytes(c.rec.Locks)+len(c.rev.Inline) <= maxCachedPathBytes {
		fs.items.Put(gen, key, c)
	}
	return c, nil
}

// maxCachedItems bounds FS.items as maxCachedPaths does FS.paths: at most
// about 24 MiB, usually far less.
const maxCachedItems = 1024

// OpenPath resolves p as Lookup does and, when it names a file, opens the
// current revision in the same read: a download's lookup and open see one
// snapshot, in one transaction instead of two. For a folder the File is
// nil.
func (fs *FS) OpenPath(ctx context.Context, root uint64, p string) (Node, *File, error) {
	gen := fs.db.Generation()
	key := pathKey{root, p}
	// A path is checked and split only on a miss: one kept was checked
	// when it was read (readPath keeps only what it found).
	c, ok := fs.paths.Get(gen, key)
	if !ok {
		segs, err := splitPath(p)
		if err != nil {
			return Node{}, nil, err
		}
		if c, err = fs.readPath(ctx, gen, key, segs); err != nil {
			fs.m.observe(OpRead, err)
			return Node{}, nil, err
		}
	}
	// Locks expire without a commit: which are live is decided now.
	n := c.rec.public(fs.nowNs())
	// splitPath refused empty segments: p is clean but for a trailing
	// slash, and needs no joining again.
	if n.Path = strings.TrimSuffix(p, "/"); n.Path == "" {
		n.Path = "/"
	}
	if c.rec.Dir {
		return n, nil, nil
	}
	fs.m.observe(OpRead, nil)
	f := &File{Node: n, Revision: c.rev.public(), m: fs.m}
	fs.attach(ctx, f)
	return n, f, nil
}

// readPath reads what OpenPath keeps for key, whose path splitPath split
// into segs, and keeps it when it is small. A function of its own so that
// the record its transaction fills escapes to the heap only on a miss.
func (fs *FS) readPath(ctx context.Context, gen uint64, key pathKey, segs []string) (cachedPath, error) {
	var c cachedPath
	err := fs.db.View(ctx, func(tx kv.Txn) error {
		rec, err := lookupIn(tx, key.root, segs, key.path)
		if err != nil {
			return err
		}
		c = cachedPath{rec: rec}
		if rec.Dir {
			return nil
		}
		return get(tx, revKey(rec.ID, rec.Rev), &c.rev, fmt.Errorf("%w: revision %d", ErrNotExist, rec.Rev))
	})
	if err != nil {
		return cachedPath{}, err
	}
	if len(c.rev.Chunks) <= maxCachedPathChunks && len(key.path)+c.size() <= maxCachedPathBytes {
		fs.paths.Put(gen, key, c)
	}
	return c, nil
}

// pathKey names what OpenPath resolved: a path in a root.
type pathKey struct {
	root uint64
	path string
}

// cachedPath is what OpenPath read, kept in FS.paths until the next
// commit: a WebDAV GET or HEAD resolves its path through it, and reading
// and decoding the path's records was the largest part of a small GET's
// CPU after TLS and HTTP. Revisions and records are never changed in
// place, so sharing them between requests is safe.
type cachedPath struct {
	rec nodeRec
	rev revRec // zero for a folder
}

// size is about what c holds beside its fixed fields, which
// maxCachedPathChunks bounds for the chunk list.
func (c cachedPath) size() int {
	return len(c.rec.Name) + lockBytes(c.rec.Locks) + len(c.rev.Inline)
}

// maxCachedPaths bounds FS.paths, and maxCachedPathBytes what one entry
// holds (its path, locks and inline contents), so a full cache is at most
// about 24 MiB, and usually far less. Without the second bound, paths up
// to MaxDepth names of MaxNameBytes (256 KB) and MaxLocks locks with
// owners of MaxLockOwnerBytes would let 1,024 entries pin hundreds of MiB.
const (
	maxCachedPaths     = 1024
	maxCachedPathBytes = InlineMax + 8<<10
)

// maxCachedPathChunks leaves large files out of FS.paths: their chunk
// lists are long, and one lookup is nothing beside their transfer.
const maxCachedPathChunks = 16

// attach gives f its reader.
func (fs *FS) attach(ctx context.Context, f *File) {
	if len(f.Revision.Chunks) == 0 {
		f.inline.Reset(f.Revision.inline)
		f.inline.b = f.Revision.inline
		f.r = &f.inline
	} else {
		f.r = fs.reads.NewReader(ctx, fs.chunks, f.Revision.Chunks)
	}
}

// contents is what a File reads from: chunks, or bytes kept inline.
type contents interface {
	io.ReadSeekCloser
	io.ReaderAt
}

// inlineReader reads a small file's contents kept in its revision record;
// b is the whole of them, for CopyTo.
type inlineReader struct {
	bytes.Reader
	b []byte
}

func (*inlineReader) Close() error { return nil }

// CopyTo writes up to n bytes from the offset to w in one Write, straight
// from the revision's record: a small file's download needs no buffer (an
// io.Copy through a LimitReader made one of its size per request). A
// short write is io.ErrShortWrite.
func (r *inlineReader) CopyTo(w io.Writer, n int64) (int64, error) {
	pos := int64(len(r.b)) - int64(r.Len())
	if pos >= int64(len(r.b)) || n <= 0 {
		return 0, nil
	}
	p := r.b[pos:min(int64(len(r.b)), pos+n)]
	m, err := w.Write(p)
	if m < 0 || m > len(p) {
		m = 0
	}
	if _, serr := r.Seek(int64(m), io.SeekCurrent); serr != nil && err == nil {
		err = serr
	}
	if err == nil && m < len(p) {
		err = io.ErrShortWrite
	}
	return int64(m), err
}

// Read reads the contents; a missing or corrupt chunk is an error, never
// short data.
func (f *File) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	f.m.bytesRead.Add(float64(n))
	return n, err
}

// ReadAt reads len(p) bytes at off.
func (f *File) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.r.ReadAt(p, off)
	f.m.bytesRead.Add(float64(n))
	return n, err
}

// CopyTo writes up to n bytes from the Read offset to w, straight from the
// decoded chunks (chunk.Reader.CopyTo): a download sends them without a
// copy through a buffer of its own. Reaching the end first is no error; a
// missing or corrupt chunk is, as is a failed write.
func (f *File) CopyTo(w io.Writer, n int64) (int64, error) {
	var m int64
	var err error
	if c, ok := f.r.(interface {
		CopyTo(io.Writer, int64) (int64, error)
	}); ok {
		m, err = c.CopyTo(w, n)
	} else {
		m, err = io.Copy(w, io.LimitReader(f.r, n))
	}
	f.m.bytesRead.Add(float64(m))
	return m, err
}

// Seek sets the offset of the next Read.
func (f *File) Seek(offset int64, whence int) (int64, error) { return f.r.Seek(offset, whence) }

// Size is the revision's size in bytes.
func (f *File) Size() int64 { return f.Revision.Size }

// Close stops any read-ahead.
func (f *File) Close() error { return f.r.Close() }

var _ io.ReadSeekCloser = (*File)(nil)

// LookupWithParent is Lookup of the path p and of the folder that holds,
// or would hold, its last name, in one read: a write that creates or
// replaces an item needs both, and two lookups read the folders above
// twice. found is false, with n zero, when the folder holds no live item
// of that name. The folder's errors are Lookup's, and ErrNotDir when it
// is a file; p must name an item below the top folder (ErrInvalidName).
func (fs *FS) LookupWithParent(ctx context.Context, root uint64, p string) (parent, n Node, found bool, err error) {
	segs, err := splitPath(p)
	if err != nil {
		return Node{}, Node{}, false, err
	}
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		parent, n, found, err = fs.lookupWithParent(tx, root, segs)
		return err
	})
	if err != nil {
		return Node{}, Node{}, false, err
	}
	return parent, n, found, nil
}

// lookupWithParent is LookupWithParent in tx, of the path's names segs.
func (fs *FS) lookupWithParent(tx kv.Txn, root uint64, segs []string) (parent, n Node, found bool, err error) {
	if len(segs) == 0 {
		return Node{}, Node{}, false, fmt.Errorf("%w: the top folder has no folder above it", ErrInvalidName)
	}
	dir := "/" + strings.Join(segs[:len(segs)-1], "/")
	rec, parent, err := fs.lookupNode(tx, root, segs[:len(segs)-1], dir)
	if err != nil {
		return Node{}, Node{}, false, err
	}
	if !rec.Dir {
		return Node{}, Node{}, false, fmt.Errorf("%w: %q", ErrNotDir, dir)
	}
	var c nodeRec
	err = get(tx, childKey(rec.ID, segs[len(segs)-1]), &c, ErrNotExist)
	if errors.Is(err, ErrNotExist) {
		return parent, Node{}, false, nil
	}
	if err != nil {
		return Node{}, Node{}, false, err
	}
	n = c.public(fs.nowNs())
	n.Path = "/" + strings.Join(segs, "/")
	return parent, n, true, nil
}
