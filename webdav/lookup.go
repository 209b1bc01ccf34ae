package webdav

import (
	"errors"
	"net/http"
	"path"
	"strings"

	"berth/vfs"
)

// fileAsCollection refuses a write to a URL that ends in "/", which names
// a collection, where the name is a file: davPath drops the slash, and
// "PUT a.txt/" would otherwise replace a.txt, "DELETE a.txt/" delete it.
// A read of such a URL (GET, HEAD, POST) is 404 too, rather than the
// file's bytes under a URL that is not the file's. Where nothing has the
// name, a PUT or a LOCK (which creates an empty file) would make a file
// that then answers 404 at the URL that made it: 409. A DELETE the
// caller's role allows (permitted) is left to delete, which checks the
// slash where it looks the item up (deleteRefusal).
func (s *session) fileAsCollection(r *http.Request, permitted bool) error {
	switch r.Method {
	case http.MethodPut, http.MethodDelete, "COPY", "MOVE", "LOCK", "UNLOCK", "PROPPATCH",
		http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		return nil
	}
	if !strings.HasSuffix(r.URL.EscapedPath(), "/") {
		return nil
	}
	if r.Method == http.MethodDelete && permitted {
		return nil
	}
	if r.Method == "MOVE" {
		if _, _, ok := s.plainMove(r); ok {
			return nil // moveAt checks it in its commit
		}
	}
	if r.Method == "COPY" || r.Method == "MOVE" {
		s.lookupPair(r)
	}
	t, n, exists, err := s.lookup(s.path)
	s.looked = &lookedUp{t, n, exists, err}
	if err == nil && !exists && (r.Method == http.MethodPut || r.Method == "LOCK") {
		return describe(errFileAsCollection, "the URL ends in / (a collection), and %s makes a file; use MKCOL for a collection", r.Method)
	}
	if err != nil || !exists || n.Dir {
		return nil
	}
	if r.Method == http.MethodPut {
		return describe(errFileAsCollection, "the URL ends in / (a collection), and %s is a file", n.Name)
	}
	return notACollection(n)
}

// notACollection is the 404 of a URL that ends in "/" at the file n.
func notACollection(n vfs.Node) error {
	return describe(vfs.ErrNotExist, "no collection of that name: %s is a file", n.Name)
}

// lookedUp is what lookup returned.
type lookedUp struct {
	t      target
	n      vfs.Node
	exists bool
	err    error
}

// lookup resolves the request path to a target and, if it exists, its
// node. A path below no root is errNoRoot.
func (s *session) lookup(p string) (target, vfs.Node, bool, error) {
	if l := s.looked; l != nil && p == s.path {
		s.looked = nil
		return l.t, l.n, l.exists, l.err
	}
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

// lookupItem is lookup of the request's path for a method that changes
// the item there (DELETE, COPY, MOVE): nothing there is vfs.ErrNotExist,
// a root's top folder (or the roots) vfs.ErrRootItem, which rootMsg
// describes.
func (s *session) lookupItem(rootMsg string) (target, vfs.Node, error) {
	t, n, exists, err := s.lookup(s.path)
	switch {
	case err != nil:
		return t, n, err
	case !exists:
		return t, n, vfs.ErrNotExist
	case t.isMountRoot():
		return t, n, describe(vfs.ErrRootItem, "%s", rootMsg)
	}
	return t, n, nil
}

// parentOrConflict is parent with the answer RFC 4918 gives when the
// parent is missing or not a collection: errParentMissing (409 Conflict),
// saying that what does not exist. Other errors are parent's.
func (s *session) parentOrConflict(t target, what string) (parent vfs.Node, name string, err error) {
	parent, name, err = s.parent(t)
	return parent, name, parentConflict(err, what)
}

// parentConflict is err, why no folder holds a new item, as RFC 4918
// answers it: a parent missing or no collection (vfs.ErrNotExist,
// ErrNotDir) is errParentMissing (409 Conflict), saying that what does
// not exist. Other errors, and one it gave already, are themselves.
func parentConflict(err error, what string) error {
	if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrNotDir) {
		return describe(errParentMissing, "%s does not exist", what)
	}
	return err
}

// lookupNew resolves the dav path p, the target of a request that
// creates or replaces what it names (PUT, MKCOL, a COPY's or MOVE's
// Destination), with the folder that holds or would hold it, in one read
// where lookup and parentOrConflict would read the folders above twice.
// Its error is lookup's (errNoRoot answered as noRoot); parentOrConflict's
// error, saying what is missing, is left in parent.err, so that the
// method checks its target first, as it did with those two.
func (s *session) lookupNew(p, what string) (t target, n vfs.Node, exists bool, parent lookedParent, name string, err error) {
	if l := s.lookedDst; l != nil && p == l.p && what == destinationParent {
		s.lookedDst = nil
		return l.t, l.n, l.exists, l.parent, l.name, l.err
	}
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
		return t, vfs.Node{}, false, lookedParent{err: parentConflict(err, what)}, name, nil
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

// destinationParent is what a COPY's or MOVE's missing Destination
// folder is called in its error.
const destinationParent = "the destination's parent collection"

// lookedNew is what lookupNew returned for the dav path p.
type lookedNew struct {
	p      string
	t      target
	n      vfs.Node
	exists bool
	parent lookedParent
	name   string
	err    error
}

// lookupPair looks up a COPY's or MOVE's source, the request's path, and
// its Destination in one read, where both lie below the top folder of
// one root (vfs.LookupMove), and leaves what lookup and lookupNew would
// return for them: two reads would walk the folders above both twice.
// It leaves nothing where the two are not so, or the Destination is not
// this server's: those are looked up, and refused, as before.
func (s *session) lookupPair(r *http.Request) {
	if s.looked != nil || s.lookedDst != nil {
		return
	}
	d := s.destination(r)
	if d.err != nil {
		return
	}
	dst := d.path
	st, err := s.resolve(s.path)
	if err != nil || st.isMountRoot() {
		return
	}
	dt, err := s.resolve(dst)
	if err != nil || dt.isMountRoot() || dt.m != st.m {
		return
	}
	sn, srcErr, pn, dn, found, dstErr := s.h.opts.FS.LookupMove(s.ctx, st.m.root.ID, st.rel, dt.rel)
	// lookup's answer for the source.
	if errors.Is(srcErr, vfs.ErrNotExist) {
		s.looked = &lookedUp{st, sn, false, nil}
	} else {
		s.looked = &lookedUp{st, sn, srcErr == nil, srcErr}
	}
	// lookupNew's for the destination.
	dir, name := path.Split(strings.TrimSuffix(dt.rel, "/"))
	l := &lookedNew{p: dst, t: dt, name: name}
	switch {
	case dir == "/" && (dstErr == nil || errors.Is(dstErr, vfs.ErrNotExist)):
		// The top folder, unread: lookup's answer, or nothing there.
		if dstErr == nil {
			l.n, l.exists = dn, found
		}
		l.parent.node, _, l.parent.err = s.parentOrConflict(dt, destinationParent)
	case errors.Is(dstErr, vfs.ErrNotExist) || errors.Is(dstErr, vfs.ErrNotDir):
		l.parent.err = parentConflict(dstErr, destinationParent)
	case dstErr != nil:
		l.name, l.err = "", dstErr
	default:
		l.n, l.exists, l.parent.node = dn, found, pn
	}
	s.lookedDst = l
}
