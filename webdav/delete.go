package webdav

import (
	"net/http"
	"strings"

	"berth/vfs"
)

// delete removes a resource (soft delete: it stays restorable over REST).
func (s *session) delete(w http.ResponseWriter, r *http.Request) error {
	t, n, exists, err := s.lookup(s.path)
	if err != nil {
		return err
	}
	if !exists {
		return vfs.ErrNotExist
	}
	if t.isMountRoot() {
		return describe(vfs.ErrRootItem, "a root folder cannot be deleted over WebDAV")
	}
	if d := r.Header.Get("Depth"); n.Dir && d != "" && !strings.EqualFold(d, "infinity") {
		// RFC 4918 9.6.1: only Depth infinity; a client that asks for
		// less does not mean to delete what the collection holds.
		return describe(errBadDepth, "DELETE of a collection takes Depth: infinity only")
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	if err := s.readOnly(n); err != nil {
		return err
	}
	if err := s.h.opts.FS.Delete(s.ctx, t.m.root.ID, n.ID, s.optsFor(t.m.root.ID)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
