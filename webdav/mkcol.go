package webdav

import (
	"net/http"

	"berth/vfs"
)

// mkcol creates a collection. A body is refused (415): berth knows no
// MKCOL body format.
func (s *session) mkcol(w http.ResponseWriter, r *http.Request) error {
	if r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody) {
		return errMkcolBody
	}
	if t, err := s.resolve(s.path); err == nil && !t.isMountRoot() && s.looked == nil && !conditional(r) {
		// No conditions to hold against the folder as it is: vfs looks
		// the name and the folder above it up in the commit, and
		// mkcolRefusal runs there.
		if _, err := s.h.opts.FS.MkdirAt(s.ctx, t.m.root.ID, t.rel, s.optsFor(t.m.root.ID), mkcolRefusal); err != nil {
			return err
		}
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	t, n, exists, parent, name, err := s.lookupNew(s.path, newParent)
	if err != nil {
		return err
	}
	if err := mkcolRefusal(parent.err, existing(n, exists)); err != nil {
		return err
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	if _, err := s.h.opts.FS.Mkdir(s.ctx, t.m.root.ID, parent.node.ID, name, s.optsFor(t.m.root.ID)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusCreated)
	return nil
}

// mkcolRefusal refuses a MKCOL of a name that old holds already (405), or
// that no folder holds (parentErr: 409, parentConflict). It runs in the
// commit (vfs.MkdirAt), or on lookupNew's answer, whose parent error is
// parentConflict's already.
func mkcolRefusal(parentErr error, old *vfs.Node) error {
	if old != nil {
		return describe(errCollectionTarget, "the resource already exists")
	}
	return parentConflict(parentErr, newParent)
}

// newParent is what the missing folder of a PUT or MKCOL is called in
// its error.
const newParent = "the parent collection"

// existing is n where exists says there is one, else nil: what a
// refusal's old is.
func existing(n vfs.Node, exists bool) *vfs.Node {
	if !exists {
		return nil
	}
	return &n
}
