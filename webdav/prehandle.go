package webdav

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"berth/vfs"
)

// status maps a vfs error to the HTTP status of a WebDAV answer.
func status(err error) (int, error) {
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, context.Canceled):
		return http.StatusBadRequest, err
	case errors.Is(err, vfs.ErrLocked):
		return describe(http.StatusLocked, "the resource is locked")
	case errors.Is(err, vfs.ErrChanged):
		return describe(http.StatusPreconditionFailed, "the resource changed while the request was sent; nothing was stored")
	case errors.Is(err, vfs.ErrNotExist), errors.Is(err, vfs.ErrRootDeleted):
		return describe(http.StatusNotFound, "not found")
	case errors.Is(err, vfs.ErrNotDir):
		return describe(http.StatusConflict, "a parent of the resource is not a collection")
	case errors.Is(err, vfs.ErrNameConflict):
		return describe(http.StatusConflict, "%v", err)
	case errors.Is(err, vfs.ErrInvalidName), errors.Is(err, vfs.ErrNameTooLong):
		return describe(http.StatusBadRequest, "%v", err)
	case errors.Is(err, vfs.ErrExtensionExcluded):
		return describe(http.StatusForbidden, "files with this extension are not allowed by your organization's policy")
	case errors.Is(err, vfs.ErrFileTooLarge):
		return describe(http.StatusRequestEntityTooLarge, "the file is larger than your organization's policy allows")
	case errors.Is(err, vfs.ErrQuotaExceeded):
		return describe(http.StatusInsufficientStorage, "storing this would exceed your space quota")
	case errors.Is(err, vfs.ErrMetadataLimit):
		// RFC 4918 9.2.1 names 507 for a property the server cannot
		// record; a lock that would not fit is the same refusal.
		return describe(http.StatusInsufficientStorage, "%v; nothing was stored", err)
	case errors.Is(err, vfs.ErrTooDeep):
		return describe(http.StatusForbidden, "folders may nest at most %d levels below the root", vfs.MaxDepth)
	case errors.Is(err, vfs.ErrNoSpace):
		return describe(http.StatusInsufficientStorage, "the server's storage is full; nothing was stored")
	case errors.Is(err, vfs.ErrBusy):
		// A race with the garbage collector, or a store closing under
		// the request: nothing was stored, and the same request can
		// succeed again, as REST's 503 temporarily_unavailable says.
		return describe(http.StatusServiceUnavailable, "the server is busy; nothing was stored, try again")
	case errors.Is(err, vfs.ErrRootItem):
		return describe(http.StatusForbidden, "a root folder cannot be changed this way")
	case errors.Is(err, vfs.ErrIsDir):
		return describe(http.StatusMethodNotAllowed, "the resource is a collection")
	}
	return http.StatusInternalServerError, err
}

// preconditions checks the If header and If-Match / If-None-Match for the
// resource n (exists or not) at dav path p.
func (s *session) preconditions(r *http.Request, p string, n vfs.Node, exists bool) (int, error) {
	if st, err := s.checkIf(r, p); st != 0 {
		return st, err
	}
	return checkMatch(r, n, exists)
}

// fileAsCollection refuses a write to a URL that ends in "/", which names
// a collection, where the name is a file: davPath drops the slash, and
// "PUT a.txt/" would otherwise replace a.txt, "DELETE a.txt/" delete it.
// A read of such a URL (GET, HEAD, POST) is 404 too, rather than the
// file's bytes under a URL that is not the file's. Where nothing has the
// name, a PUT or a LOCK (which creates an empty file) would make a file
// that then answers 404 at the URL that made it: 409.
func (s *session) fileAsCollection(r *http.Request) (int, error) {
	switch r.Method {
	case http.MethodPut, http.MethodDelete, "COPY", "MOVE", "LOCK", "UNLOCK", "PROPPATCH",
		http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		return 0, nil
	}
	if !strings.HasSuffix(r.URL.EscapedPath(), "/") {
		return 0, nil
	}
	_, n, exists, err := s.lookup(s.path)
	if err == nil && !exists && (r.Method == http.MethodPut || r.Method == "LOCK") {
		return describe(http.StatusConflict, "the URL ends in / (a collection), and %s makes a file; use MKCOL for a collection", r.Method)
	}
	if err != nil || !exists || n.Dir {
		return 0, nil
	}
	if r.Method == http.MethodPut {
		return describe(http.StatusConflict, "the URL ends in / (a collection), and %s is a file", n.Name)
	}
	return describe(http.StatusNotFound, "no collection of that name: %s is a file", n.Name)
}

// lookup resolves the request path to a target and, if it exists, its
// node. A path below no root is errNoRoot.
func (s *session) lookup(p string) (target, vfs.Node, bool, error) {
	t, err := s.resolve(p)
	if err != nil {
		return t, vfs.Node{}, false, errNoRoot
	}
	n, err := s.node(t)
	if errors.Is(err, vfs.ErrNotExist) {
		return t, n, false, nil
	}
	return t, n, err == nil, err
}

// put stores the body as the file: 201 when it creates it, 204 when it
// replaces the contents (a new revision). The body streams into vfs, which
// commits only a complete body within the policy's limits.
func (s *session) put(w http.ResponseWriter, r *http.Request) (int, error) {
	if r.Header.Get("Content-Range") != "" {
		// A partial PUT would otherwise store its fragment as the whole
		// file (RFC 9110 14.5: a server that does not apply them must
		// answer 400).
		return describe(http.StatusBadRequest, "PUT with Content-Range (a partial update) is not supported; send the whole file")
	}
	t, n, exists, err := s.lookup(s.path)
	if errors.Is(err, errNoRoot) {
		return noRoot(s.path)
	}
	if err != nil {
		return status(err)
	}
	if t.isMountRoot() || (exists && n.Dir) {
		return describe(http.StatusMethodNotAllowed, "PUT on a collection")
	}
	parent, name, st, err := s.parentOrConflict(t, "the parent collection")
	if st != 0 {
		return st, err
	}
	if st, err := s.preconditions(r, s.path, n, exists); st != 0 {
		return st, err
	}
	// vfs refuses a body announced over the limits before reading it.
	opts := s.opts
	opts.DeclaredSize = declaredSize(r)
	if r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Header.Get("If") != "" ||
		r.Header.Get("If-Unmodified-Since") != "" {
		// The conditions held for the file as it is now; vfs commits
		// the upload only if it still is, however long the body takes.
		opts.IfRevision, opts.IfAbsent = n.RevisionID, !exists
	}
	written, err := s.h.opts.FS.WriteFile(s.ctx, t.m.root.ID, parent.ID, name, r.Body, opts)
	if err != nil {
		return status(err)
	}
	w.Header().Set("ETag", written.ETag())
	if exists {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	return 0, nil
}

// parentOrConflict is parent with the answer RFC 4918 gives when the
// parent is missing or not a collection: 409 Conflict, saying that what
// does not exist. Other errors map as usual; st is 0 on success.
func (s *session) parentOrConflict(t target, what string) (parent vfs.Node, name string, st int, err error) {
	parent, name, err = s.parent(t)
	switch {
	case errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrNotDir):
		st, err = describe(http.StatusConflict, "%s does not exist", what)
	case err != nil:
		st, err = status(err)
	}
	return parent, name, st, err
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

// delete removes a resource (soft delete: it stays restorable over REST).
func (s *session) delete(w http.ResponseWriter, r *http.Request) (int, error) {
	t, n, exists, err := s.lookup(s.path)
	if err != nil {
		return status(err)
	}
	if !exists {
		return describe(http.StatusNotFound, "not found")
	}
	if t.isMountRoot() {
		return describe(http.StatusForbidden, "a root folder cannot be deleted over WebDAV")
	}
	if d := r.Header.Get("Depth"); n.Dir && d != "" && !strings.EqualFold(d, "infinity") {
		// RFC 4918 9.6.1: only Depth infinity; a client that asks for
		// less does not mean to delete what the collection holds.
		return describe(http.StatusBadRequest, "DELETE of a collection takes Depth: infinity only")
	}
	if st, err := s.preconditions(r, s.path, n, exists); st != 0 {
		return st, err
	}
	if err := s.h.opts.FS.Delete(s.ctx, t.m.root.ID, n.ID, s.opts); err != nil {
		return status(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return 0, nil
}

// mkcol creates a collection. A body is refused (415): berth knows no
// MKCOL body format.
func (s *session) mkcol(w http.ResponseWriter, r *http.Request) (int, error) {
	if r.ContentLength > 0 || (r.ContentLength < 0 && r.Body != nil && r.Body != http.NoBody) {
		return describe(http.StatusUnsupportedMediaType, "MKCOL with a body is not supported")
	}
	t, n, exists, err := s.lookup(s.path)
	if errors.Is(err, errNoRoot) {
		return noRoot(s.path)
	}
	if err != nil {
		return status(err)
	}
	if exists {
		return describe(http.StatusMethodNotAllowed, "the resource already exists")
	}
	parent, name, st, err := s.parentOrConflict(t, "the parent collection")
	if st != 0 {
		return st, err
	}
	if st, err := s.preconditions(r, s.path, n, exists); st != 0 {
		return st, err
	}
	if _, err := s.h.opts.FS.Mkdir(s.ctx, t.m.root.ID, parent.ID, name, s.opts); err != nil {
		return status(err)
	}
	w.WriteHeader(http.StatusCreated)
	return 0, nil
}

// sameAuthority reports whether two host[:port] authorities name this
// server alike: hosts compare without case, and a default port (443, 80)
// is the same as none (RFC 3986 6.2.2.1, 6.2.3). Either default counts
// for either scheme, because a TLS-terminating proxy hands on https
// requests as http ones; the Destination's scheme is not compared for
// the same reason.
func sameAuthority(a, b string) bool {
	trim := func(h string) string {
		for _, p := range []string{":443", ":80"} {
			if s, ok := strings.CutSuffix(h, p); ok {
				return s
			}
		}
		return h
	}
	return strings.EqualFold(trim(a), trim(b))
}

// copyMove handles COPY and MOVE with Destination, Overwrite and Depth.
func (s *session) copyMove(w http.ResponseWriter, r *http.Request) (int, error) {
	move := r.Method == "MOVE"
	dh := r.Header.Get("Destination")
	if dh == "" {
		return describe(http.StatusBadRequest, "Destination header required")
	}
	u, err := url.Parse(dh)
	if err != nil {
		return describe(http.StatusBadRequest, "malformed Destination")
	}
	if u.Host != "" && !sameAuthority(u.Host, r.Host) {
		return describe(http.StatusBadGateway, "Destination is on another server")
	}
	dstPath, err := s.h.davPath(u.EscapedPath())
	if err != nil {
		return describe(http.StatusBadRequest, "Destination: %v", err)
	}
	depth := r.Header.Get("Depth")
	switch {
	case depth == "" || strings.EqualFold(depth, "infinity"):
		depth = "infinity"
	case depth == "0" || depth == "1":
	default:
		return describe(http.StatusBadRequest, "invalid Depth header")
	}
	overwrite := true
	switch r.Header.Get("Overwrite") {
	case "", "T", "t":
	case "F", "f":
		overwrite = false
	default:
		return describe(http.StatusBadRequest, "invalid Overwrite header")
	}

	src, sn, exists, err := s.lookup(s.path)
	if err != nil {
		return status(err)
	}
	if !exists {
		return describe(http.StatusNotFound, "not found")
	}
	if src.isMountRoot() {
		return describe(http.StatusForbidden, "a root folder cannot be copied or moved")
	}
	// RFC 4918 9.8.3 and 9.9.2 bound Depth for a collection: COPY takes
	// 0 or infinity, MOVE infinity only. A file has nothing below it for
	// a Depth to apply to, and clients send "Depth: 0" with a file's
	// MOVE; only a COPY's Depth 1 is refused for any source.
	if (move && sn.Dir && depth != "infinity") || (!move && depth == "1") {
		return describe(http.StatusBadRequest, "invalid Depth for %s", r.Method)
	}
	if dstPath == s.path {
		return describe(http.StatusForbidden, "source and destination are the same")
	}
	if sn.Dir && strings.HasPrefix(dstPath, strings.TrimSuffix(s.path, "/")+"/") {
		return describe(http.StatusForbidden, "a collection cannot go inside itself")
	}
	dst, dn, dstExists, err := s.lookup(dstPath)
	if errors.Is(err, errNoRoot) {
		return noRoot(dstPath)
	} else if err != nil {
		return status(err)
	}
	if dstExists && !dn.Dir && strings.HasSuffix(u.EscapedPath(), "/") {
		return describe(http.StatusConflict, "the Destination ends in / (a collection), and %s is a file", dn.Name)
	}
	if !dstExists && !sn.Dir && strings.HasSuffix(u.EscapedPath(), "/") {
		return describe(http.StatusConflict, "the Destination ends in / (a collection), and %s is a file", sn.Name)
	}
	if dst.isMountRoot() {
		return describe(http.StatusForbidden, "a root folder cannot be replaced")
	}
	if st, err := s.preconditions(r, s.path, sn, exists); st != 0 {
		return st, err
	}
	parent, name, st, err := s.parentOrConflict(dst, "the destination's parent collection")
	if st != 0 {
		return st, err
	}
	if dstExists {
		if !overwrite {
			return describe(http.StatusPreconditionFailed, "the destination exists and Overwrite is F")
		}
		if src.m == dst.m && strings.HasPrefix(s.path, strings.TrimSuffix(dstPath, "/")+"/") {
			return describe(http.StatusForbidden, "the destination is a collection that holds the source")
		}
	}
	// vfs deletes an existing destination in the transaction that puts
	// the copy or the moved item in its place: a refused or failed COPY
	// or MOVE leaves it as it was.
	fs, opts := s.h.opts.FS, s.opts
	opts.Overwrite = dstExists
	switch {
	case move && src.m == dst.m:
		_, err = fs.Move(s.ctx, src.m.root.ID, sn.ID, parent.ID, name, opts)
	case depth == "0" && sn.Dir:
		// An empty collection with the source's dead properties.
		_, err = fs.CopyEmpty(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.ID, name, opts)
	default:
		_, err = fs.Copy(s.ctx, src.m.root.ID, sn.ID, dst.m.root.ID, parent.ID, name, opts)
		if err == nil && move {
			err = fs.Delete(s.ctx, src.m.root.ID, sn.ID, s.opts)
		}
	}
	if err != nil {
		return status(err)
	}
	if dstExists {
		w.WriteHeader(http.StatusNoContent)
	} else {
		w.WriteHeader(http.StatusCreated)
	}
	return 0, nil
}
