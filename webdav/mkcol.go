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
		// the name and the folder above it up in the commit, and these
		// checks, lookupNew's and mkcol's below, run there.
		_, err := s.h.opts.FS.MkdirAt(s.ctx, t.m.root.ID, t.rel, s.optsFor(t.m.root.ID), func(parentErr error, old *vfs.Node) error {
			switch {
			case old != nil:
				return describe(errCollectionTarget, "the resource already exists")
			case parentErr != nil:
				return describe(errParentMissing, "the parent collection does not exist")
			}
			return nil
		})
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusCreated)
		return nil
	}
	t, n, exists, parent, name, err := s.lookupNew(s.path, "the parent collection")
	if err != nil {
		return err
	}
	if exists {
		return describe(errCollectionTarget, "the resource already exists")
	}
	if parent.err != nil {
		return parent.err
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
