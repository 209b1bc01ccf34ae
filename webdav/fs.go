package webdav

import (
	"context"
	"errors"
	"io/fs"
	"os"

	xwebdav "golang.org/x/net/webdav"

	"berth/vfs"
)

// fileSystem is x/net/webdav's FileSystem over vfs for one session.
// x/net/webdav tests errors with os.IsNotExist and ==, which do not see
// through wrapping, so every vfs error leaves here through osErr.
type fileSystem struct{ s *session }

var _ xwebdav.FileSystem = (*fileSystem)(nil)

func (f *fileSystem) Mkdir(ctx context.Context, name string, perm os.FileMode) error {
	t, err := f.s.resolve(name)
	if err != nil {
		return err
	}
	if t.isMountRoot() {
		return &fs.PathError{Op: "mkdir", Path: name, Err: os.ErrExist}
	}
	parent, base, err := f.s.parent(t)
	if err != nil {
		return osErr("mkdir", name, err)
	}
	_, err = f.s.h.opts.FS.Mkdir(ctx, t.m.root.ID, parent.ID, base, f.s.optsFor(t.m.root.ID))
	return osErr("mkdir", name, err)
}

func (f *fileSystem) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (xwebdav.File, error) {
	t, err := f.s.resolve(name)
	if err != nil {
		return nil, err
	}
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		return f.openWrite(ctx, t, name, flag)
	}
	if t.top() {
		n, err := f.s.node(t)
		if err != nil {
			return nil, osErr("open", name, err)
		}
		return &dirFile{s: f.s, t: t, fi: fileInfo{n: n}}, nil
	}
	// One read for the lookup and the open: a GET is mostly this.
	n, vf, err := f.s.h.opts.FS.OpenPath(ctx, t.m.root.ID, t.rel)
	if err != nil {
		return nil, osErr("open", name, err)
	}
	if n.ParentID == 0 {
		n.Name = t.m.name
	}
	fi := fileInfo{n: n}
	if vf == nil {
		return &dirFile{s: f.s, t: t, fi: fi}, nil
	}
	return &readFile{File: vf, fi: fi}, nil
}

// openWrite checks what a write would need and returns a file whose
// writes stream into vfs.WriteFile; Close commits.
func (f *fileSystem) openWrite(ctx context.Context, t target, name string, flag int) (xwebdav.File, error) {
	if t.isMountRoot() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: os.ErrPermission}
	}
	parent, base, err := f.s.parent(t)
	if err != nil {
		return nil, osErr("open", name, err)
	}
	n, err := f.s.lookupRel(t.m.root.ID, t.rel)
	switch {
	case err == nil && n.Dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: os.ErrPermission}
	case err == nil && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: os.ErrExist}
	case errors.Is(err, vfs.ErrNotExist) && flag&os.O_CREATE == 0:
		return nil, osErr("open", name, err)
	case err != nil && !errors.Is(err, vfs.ErrNotExist):
		return nil, osErr("open", name, err)
	}
	return newWriteFile(ctx, f.s, t.m.root.ID, parent.ID, base, n), nil
}

func (f *fileSystem) RemoveAll(ctx context.Context, name string) error {
	t, err := f.s.resolve(name)
	if err != nil {
		return err
	}
	if t.isMountRoot() {
		return &fs.PathError{Op: "remove", Path: name, Err: os.ErrPermission}
	}
	n, err := f.s.node(t)
	if err != nil {
		return osErr("remove", name, err)
	}
	return osErr("remove", name, f.s.h.opts.FS.Delete(ctx, t.m.root.ID, n.ID, f.s.optsFor(t.m.root.ID)))
}

func (f *fileSystem) Rename(ctx context.Context, oldName, newName string) error {
	from, err := f.s.resolve(oldName)
	if err != nil {
		return err
	}
	to, err := f.s.resolve(newName)
	if err != nil {
		return err
	}
	if from.isMountRoot() || to.isMountRoot() || from.m != to.m {
		return &fs.PathError{Op: "rename", Path: oldName, Err: os.ErrPermission}
	}
	n, err := f.s.node(from)
	if err != nil {
		return osErr("rename", oldName, err)
	}
	parent, base, err := f.s.parent(to)
	if err != nil {
		return osErr("rename", newName, err)
	}
	_, err = f.s.h.opts.FS.Move(ctx, from.m.root.ID, n.ID, parent.ID, base, f.s.optsFor(from.m.root.ID))
	return osErr("rename", oldName, err)
}

func (f *fileSystem) Stat(ctx context.Context, name string) (os.FileInfo, error) {
	t, err := f.s.resolve(name)
	if err != nil {
		return nil, err
	}
	n, err := f.s.node(t)
	if err != nil {
		return nil, osErr("stat", name, err)
	}
	return fileInfo{n: n}, nil
}
