package webdav

import (
	"errors"
	"net/http"
	"strings"

	"berth/vfs"
)

// fileAsCollection refuses a write to a URL that ends in "/", which names
// a collection, where the name is a file: davPath drops the slash, and
// "PUT a.txt/" would otherwise replace a.txt, "DELETE a.txt/" delete it.
// A read of such a URL (GET, HEAD, POST) is 404 too, rather than the
// file's bytes under a URL that is not the file's. Where nothing has the
// name, a PUT or a LOCK (which creates an empty file) would make a file
// that then answers 404 at the URL that made it: 409.
func (s *session) fileAsCollection(r *http.Request) error {
	switch r.Method {
	case http.MethodPut, http.MethodDelete, "COPY", "MOVE", "LOCK", "UNLOCK", "PROPPATCH",
		http.MethodGet, http.MethodHead, http.MethodPost:
	default:
		return nil
	}
	if !strings.HasSuffix(r.URL.EscapedPath(), "/") {
		return nil
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

// parentOrConflict is parent with the answer RFC 4918 gives when the
// parent is missing or not a collection: errParentMissing (409 Conflict),
// saying that what does not exist. Other errors are parent's.
func (s *session) parentOrConflict(t target, what string) (parent vfs.Node, name string, err error) {
	parent, name, err = s.parent(t)
	if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrNotDir) {
		err = describe(errParentMissing, "%s does not exist", what)
	}
	return parent, name, err
}
