package webdav

import (
	"net/http"
	"strconv"
)

// put stores the body as the file: 201 when it creates it, 204 when it
// replaces the contents (a new revision). The body streams into vfs, which
// commits only a complete body within the policy's limits.
func (s *session) put(w http.ResponseWriter, r *http.Request) error {
	if r.Header.Get("Content-Range") != "" {
		// A partial PUT would otherwise store its fragment as the whole
		// file (RFC 9110 14.5: a server that does not apply them must
		// answer 400).
		return errPartialPut
	}
	t, n, exists, parent, name, err := s.lookupNew(s.path, "the parent collection")
	if err != nil {
		return err
	}
	if t.isMountRoot() || (exists && n.Dir) {
		return describe(errCollectionTarget, "PUT on a collection")
	}
	if parent.err != nil {
		return parent.err
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	locked := s.policy.Binds(s.person) && s.policy.ExtensionLocked(name)
	if exists && locked {
		if err := s.policy.ExtensionReadOnly(s.person, n.Name, n.Size); err != nil {
			return err
		}
	}
	// vfs refuses a body announced over the limits before reading it.
	opts := s.optsFor(t.m.root.ID)
	opts.DeclaredSize = declaredSize(r)
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If") != "" ||
		r.Header.Get("If-Unmodified-Since") != "" {
		// The conditions held for the file as it is now; vfs commits
		// the upload only if it still is, however long the body takes.
		opts.IfRevision, opts.IfAbsent = n.RevisionID, !exists
	}
	if locked {
		// locked_extensions: commit only over the file as checked above
		// (absent, or empty at that revision), so two PUTs cannot both
		// pass the check.
		opts.IfRevision, opts.IfAbsent = n.RevisionID, !exists
	}
	written, err := s.h.opts.FS.WriteFile(s.ctx, t.m.root.ID, parent.node.ID, name, r.Body, opts)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", written.ETag())
	if exists {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	return nil
}

// declaredSize is the body's announced size: Content-Length, or macOS's
// X-Expected-Entity-Length on chunked uploads; 0 when neither says.
func declaredSize(r *http.Request) int64 {
	if r.ContentLength >= 0 {
		return r.ContentLength
	}
	n, _ := strconv.ParseInt(r.Header.Get("X-Expected-Entity-Length"), 10, 64)
	return max(n, 0)
}
