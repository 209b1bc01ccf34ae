package webdav

import (
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
	if done, err := s.plainPut(w, r); done {
		return err
	}
	t, n, exists, parent, name, err := s.lookupNew(s.path, newParent)
	if err != nil {
		return err
	}
	if t.isMountRoot() {
		// The roots, or a root's top folder: a collection, also
		// where the root went away since the session began.
		exists, n.Dir = true, true
	}
	if err := putRefusal(parent.err, existing(n, exists)); err != nil {
		return err
	}
	if err := s.preconditions(r, s.path, n, exists); err != nil {
		return err
	}
	pol := s.policyOf(t)
	locked := s.binds(t) && pol.ExtensionLocked(name)
	if exists && locked {
		if err := s.readOnly(t, n); err != nil {
			return err
		}
	}
	// vfs refuses a body announced over the limits before reading it.
	opts := s.optsFor(t.m.root.ID)
	opts.DeclaredSize, opts.BodyOnDemand = declaredSize(r), onDemand(r)
	if conditional(r) || locked {
		// The conditions held for the file as it is now, and
		// locked_extensions' check (absent, or empty at that revision)
		// passed: vfs commits the upload only over that file, however
		// long the body takes, so two PUTs cannot both pass the check.
		opts.IfRevision, opts.IfAbsent = n.RevisionID, !exists
	}
	written, err := s.h.opts.FS.WriteFile(s.ctx, t.m.root.ID, parent.node.ID, name, r.Body, opts)
	if err != nil {
		return err
	}
	putDone(w, written, !exists)
	return nil
}

// putDone answers a PUT that stored written: 201 when it created the
// file, 204 when it replaced its contents.
func putDone(w http.ResponseWriter, written vfs.Node, created bool) {
	w.Header().Set("ETag", written.ETag())
	if created {
		w.WriteHeader(http.StatusCreated)
	} else {
		w.WriteHeader(http.StatusNoContent)
	}
}

// conditional reports whether r has conditions to evaluate against the
// file as it is (RFC 4918 10.4, RFC 9110 13.1).
func conditional(r *http.Request) bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If") != "" ||
		r.Header.Get("If-Unmodified-Since") != ""
}

// plainPut stores a PUT without conditions, of a small body, below a
// root's top folder, in one transaction: vfs looks the file and its folder
// up in the commit (WriteAt), where put would look them up in a read
// transaction of their own before, and refuses what put's checks refuse,
// with the same errors. The policy's locked extensions and every
// conditional request take put's way, as does a body that vfs would not
// read first: those need the file as it is before the body. done says
// plainPut answered the request (err is its error).
func (s *session) plainPut(w http.ResponseWriter, r *http.Request) (done bool, err error) {
	size := declaredSize(r)
	if size <= 0 || size > vfs.InlineMax || s.looked != nil || conditional(r) {
		return false, nil
	}
	t, err := s.resolve(s.path)
	if err != nil || t.isMountRoot() {
		return false, nil
	}
	if s.binds(t) && s.policyOf(t).ExtensionLocked(path.Base(t.rel)) {
		return false, nil
	}
	opts := s.optsFor(t.m.root.ID)
	opts.DeclaredSize, opts.BodyOnDemand = size, onDemand(r)
	written, created, err := s.h.opts.FS.WriteAt(s.ctx, t.m.root.ID, t.rel, r.Body, opts, putRefusal)
	if err != nil {
		return true, err
	}
	putDone(w, written, created)
	return true, nil
}

// putRefusal refuses a PUT of a name that the collection old holds (405),
// or that no folder holds (parentErr: 409, parentConflict). It runs in
// the commit (vfs.WriteAt), or on lookupNew's answer, whose parent error
// is parentConflict's already.
func putRefusal(parentErr error, old *vfs.Node) error {
	if old != nil && old.Dir {
		return describe(errCollectionTarget, "PUT on a collection")
	}
	return parentConflict(parentErr, newParent)
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

// onDemand reports whether the client sends the body only once berth
// reads it (Expect: 100-continue, RFC 9110 10.1.1): a refusal is then
// to be answered before that read, so that the body is never sent.
func onDemand(r *http.Request) bool {
	for _, v := range r.Header.Values("Expect") {
		if strings.Contains(strings.ToLower(v), "100-continue") {
			return true
		}
	}
	return false
}
