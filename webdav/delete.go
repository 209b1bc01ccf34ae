package webdav

import (
	"errors"
	"net/http"
	"strings"

	"berth/share"
	"berth/vfs"
)

// delete removes a resource (soft delete: it stays restorable over REST).
func (s *session) delete(w http.ResponseWriter, r *http.Request) error {
	if t, ok := s.plainDelete(r); ok && s.looked == nil {
		// vfs looks the item up in the commit, where the checks below
		// and fileAsCollection's, which left it alone, run.
		slash := strings.HasSuffix(r.URL.EscapedPath(), "/")
		var refused error
		err := s.h.opts.FS.DeleteAt(s.ctx, t.m.root.ID, t.rel, s.optsFor(t.m.root.ID), func(n vfs.Node) error {
			refused = nil
			switch d := r.Header.Get("Depth"); {
			case slash && !n.Dir:
				refused = describe(vfs.ErrNotExist, "no collection of that name: %s is a file", n.Name)
			case n.Dir && d != "" && !strings.EqualFold(d, "infinity"):
				refused = describe(errBadDepth, "DELETE of a collection takes Depth: infinity only")
			default:
				refused = s.readOnly(n)
			}
			return refused
		})
		if errors.Is(err, vfs.ErrNotExist) && err != refused {
			return vfs.ErrNotExist // lookup's answer
		}
		if err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
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

// plainDelete reports whether a DELETE of the request's path is one
// transaction (vfs.DeleteAt): it has no conditions to hold against the
// item as it is, and names an item below a root's top folder that the
// caller may delete. t is the path's target.
func (s *session) plainDelete(r *http.Request) (t target, ok bool) {
	if conditional(r) {
		return target{}, false
	}
	t, err := s.resolve(s.path)
	if err != nil || t.isMountRoot() || s.permitted(s.path, share.Delete) != nil {
		return target{}, false
	}
	return t, true
}
