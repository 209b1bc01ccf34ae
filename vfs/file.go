package vfs

import (
	"bytes"
	"context"
	"fmt"
	"io"

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
}

// Open opens the current revision of a live file.
func (fs *FS) Open(ctx context.Context, root, id uint64) (*File, error) {
	return fs.OpenRevision(ctx, root, id, 0)
}

// OpenRevision opens revision rev of a file (0: the current one). Older
// revisions stay readable after the file is deleted, the current one not.
func (fs *FS) OpenRevision(ctx context.Context, root, id, rev uint64) (*File, error) {
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
		if rev == 0 {
			if gone {
				return fmt.Errorf("%w: item %d is deleted", ErrNotExist, id)
			}
			rev = rec.Rev
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

// OpenPath resolves p as Lookup does and, when it names a file, opens the
// current revision in the same read: a download's lookup and open see one
// snapshot, in one transaction instead of two. For a folder the File is
// nil.
func (fs *FS) OpenPath(ctx context.Context, root uint64, p string) (Node, *File, error) {
	segs, err := splitPath(p)
	if err != nil {
		return Node{}, nil, err
	}
	var n Node
	var f *File
	err = fs.db.View(ctx, func(tx kv.Txn) error {
		var rec nodeRec
		var err error
		rec, n, err = fs.lookupNode(tx, root, segs, p)
		if err != nil {
			return err
		}
		if rec.Dir {
			return nil
		}
		var rr revRec
		if err := get(tx, revKey(rec.ID, rec.Rev), &rr, fmt.Errorf("%w: revision %d", ErrNotExist, rec.Rev)); err != nil {
			return err
		}
		f = &File{Node: n, Revision: rr.public(), m: fs.m}
		return nil
	})
	if err != nil || f != nil {
		fs.m.observe(OpRead, err)
	}
	if err != nil {
		return Node{}, nil, err
	}
	if f != nil {
		fs.attach(ctx, f)
	}
	return n, f, nil
}

// attach gives f its reader.
func (fs *FS) attach(ctx context.Context, f *File) {
	if len(f.Revision.Chunks) == 0 {
		f.r = inlineReader{bytes.NewReader(f.Revision.inline)}
	} else {
		f.r = fs.reads.NewReader(ctx, fs.chunks, f.Revision.Chunks)
	}
}

// contents is what a File reads from: chunks, or bytes kept inline.
type contents interface {
	io.ReadSeekCloser
	io.ReaderAt
}

type inlineReader struct{ *bytes.Reader }

func (inlineReader) Close() error { return nil }

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

// Seek sets the offset of the next Read.
func (f *File) Seek(offset int64, whence int) (int64, error) { return f.r.Seek(offset, whence) }

// Size is the revision's size in bytes.
func (f *File) Size() int64 { return f.Revision.Size }

// Close stops any read-ahead.
func (f *File) Close() error { return f.r.Close() }

var _ io.ReadSeekCloser = (*File)(nil)
