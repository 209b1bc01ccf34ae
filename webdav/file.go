package webdav

import (
	"context"
	"io"
	"io/fs"
	"os"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"berth/httpserve"
	"berth/vfs"
)

// fileInfo describes a node. It implements x/net/webdav's ETager and
// ContentTyper, so listing a folder never opens a file.
type fileInfo struct{ n vfs.Node }

var (
	_ xwebdav.ETager       = fileInfo{}
	_ xwebdav.ContentTyper = fileInfo{}
)

func (fi fileInfo) Name() string {
	if fi.n.Name == "" {
		return "/"
	}
	return fi.n.Name
}
func (fi fileInfo) Size() int64 {
	if fi.n.Dir {
		return 0
	}
	return fi.n.Size
}
func (fi fileInfo) Mode() os.FileMode {
	if fi.n.Dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (fi fileInfo) ModTime() time.Time { return fi.n.Modified }
func (fi fileInfo) IsDir() bool        { return fi.n.Dir }
func (fi fileInfo) Sys() any           { return fi.n }

// ETag is vfs's entity tag, the same value REST sends for the revision.
func (fi fileInfo) ETag(context.Context) (string, error) { return fileInfoETag(fi.n), nil }

// ContentType guesses from the name only: contents are never read. It is
// the type REST and WebDAV downloads are sent with (httpserve.ContentType).
func (fi fileInfo) ContentType(context.Context) (string, error) {
	return httpserve.ContentType(fi.n.Name), nil
}

// readFile is an open file for reading: vfs's ReadSeeker over the chunks.
type readFile struct {
	*vfs.File
	fi fileInfo
}

func (f *readFile) Stat() (fs.FileInfo, error)                { return f.fi, nil }
func (f *readFile) Readdir(int) ([]fs.FileInfo, error)        { return nil, os.ErrInvalid }
func (f *readFile) Write([]byte) (int, error)                 { return 0, os.ErrPermission }
func (f *readFile) Seek(off int64, whence int) (int64, error) { return f.File.Seek(off, whence) }

// dirFile is an open folder (or the list of roots).
type dirFile struct {
	s    *session
	t    target
	fi   fileInfo
	list []fs.FileInfo
	pos  int
}

func (d *dirFile) Close() error                   { return nil }
func (d *dirFile) Read([]byte) (int, error)       { return 0, os.ErrInvalid }
func (d *dirFile) Seek(int64, int) (int64, error) { return 0, os.ErrInvalid }
func (d *dirFile) Write([]byte) (int, error)      { return 0, os.ErrPermission }
func (d *dirFile) Stat() (fs.FileInfo, error)     { return d.fi, nil }

// Readdir lists the folder's live children (the roots, at the top).
func (d *dirFile) Readdir(count int) ([]fs.FileInfo, error) {
	if d.list == nil {
		d.list = []fs.FileInfo{}
		if d.t.top() {
			for i := range d.s.mounts {
				n, err := d.s.node(target{m: &d.s.mounts[i], rel: "/"})
				if err != nil {
					return nil, osErr("readdir", "/", err)
				}
				d.list = append(d.list, fileInfo{n: n})
			}
		} else {
			kids, _, err := d.s.h.opts.FS.List(d.s.ctx, d.t.m.root.ID, d.fi.n.ID)
			if err != nil {
				return nil, osErr("readdir", d.t.rel, err)
			}
			for _, k := range kids {
				d.list = append(d.list, fileInfo{n: k})
			}
		}
	}
	rest := d.list[d.pos:]
	if count <= 0 {
		d.pos = len(d.list)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	rest = rest[:min(count, len(rest))]
	d.pos += len(rest)
	return rest, nil
}

// writeFile streams what is written into vfs.WriteFile, running in a
// goroutine on the other end of a pipe; Close ends the body and returns
// the write's error, so a refused or failed upload fails at Close and
// nothing is stored.
type writeFile struct {
	pw   *io.PipeWriter
	done chan struct{}
	node vfs.Node
	err  error
	old  vfs.Node
}

func newWriteFile(ctx context.Context, s *session, root, parent uint64, name string, old vfs.Node) *writeFile {
	pr, pw := io.Pipe()
	w := &writeFile{pw: pw, done: make(chan struct{}), old: old}
	go func() {
		defer close(w.done)
		w.node, w.err = s.h.opts.FS.WriteFile(ctx, root, parent, name, pr, s.optsFor(root))
		pr.CloseWithError(w.err) // unblocks a writer if vfs gave up early
	}()
	return w
}

func (w *writeFile) Write(p []byte) (int, error) { return w.pw.Write(p) }

func (w *writeFile) Close() error {
	w.pw.Close()
	<-w.done
	return osErr("write", w.node.Path, w.err)
}

func (w *writeFile) Read([]byte) (int, error)           { return 0, os.ErrInvalid }
func (w *writeFile) Seek(int64, int) (int64, error)     { return 0, os.ErrInvalid }
func (w *writeFile) Readdir(int) ([]fs.FileInfo, error) { return nil, os.ErrInvalid }

// Stat describes the file as written once closed, as it was before that.
func (w *writeFile) Stat() (fs.FileInfo, error) {
	select {
	case <-w.done:
		if w.err == nil {
			return fileInfo{n: w.node}, nil
		}
	default:
	}
	return fileInfo{n: w.old}, nil
}
