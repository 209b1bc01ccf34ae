package webdav

import (
	"errors"
	"net/http"
	"path"
	"strconv"
	"strings"

	"berth/vfs"
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

// lookupNew resolves the dav path p, the target of a request that
// creates or replaces what it names (PUT, MKCOL, a COPY's or MOVE's
// Destination), with the folder that holds or would hold it, in one read
// where lookup and parentOrConflict would read the folders above twice.
// Its error is lookup's (errNoRoot answered as noRoot); parentOrConflict's
// error, saying what is missing, is left in parent.err, so that the
// method checks its target first, as it did with those two.
func (s *session) lookupNew(p, what string) (t target, n vfs.Node, exists bool, parent lookedParent, name string, err error) {
	t, err = s.resolve(p)
	dir := ""
	if err == nil && !t.isMountRoot() {
		dir, name = path.Split(strings.TrimSuffix(t.rel, "/"))
	}
	if (s.looked != nil && p == s.path) || dir == "" || dir == "/" {
		// A target fileAsCollection looked up already, the top and
		// the roots, or an item in a root's top folder: parent reads
		// nothing there.
		t, n, exists, err = s.lookup(p)
		if errors.Is(err, errNoRoot) {
			return t, n, false, lookedParent{}, "", noRoot(p)
		}
		if err != nil || t.isMountRoot() {
			return t, n, exists, lookedParent{}, "", err
		}
		pn, name, perr := s.parentOrConflict(t, what)
		return t, n, exists, lookedParent{pn, perr}, name, nil
	}
	pn, n, exists, err := s.h.opts.FS.LookupWithParent(s.ctx, t.m.root.ID, t.rel)
	if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrNotDir) {
		// Nothing at the path either: lookup's answer.
		return t, vfs.Node{}, false, lookedParent{err: describe(errParentMissing, "%s does not exist", what)}, name, nil
	}
	if err != nil {
		return t, vfs.Node{}, false, lookedParent{}, "", err
	}
	return t, n, exists, lookedParent{node: pn}, name, nil
}

// lookedParent is the folder lookupNew found, or why there is none
// (parentOrConflict's error).
type lookedParent struct {
	node vfs.Node
	err  error
}
