package rest

import (
	"errors"
	"net/http"
	"net/url"

	"berth/httpserve"
	"berth/vfs"
)

// fileRoutes registers the file routes (spec 4.2) but share.
//
// GET .../{file_id}/download and GET .../folder/{folder_id} cannot both be
// ServeMux patterns: both match /files/1/folder/download and neither is
// more specific, which ServeMux refuses at registration. One pattern
// serves both and dispatches on the literal segment.
func (s *server) fileRoutes() {
	s.handle("GET /api/2/files/{root_id}/{file_id}", s.authed(s.getFile))
	// Recorded as every other route's, so the walks of every route
	// (access and isolation tests) see it.
	s.registered(itemGetPattern, false)
	s.mux.Handle(itemGetPattern, s.itemGet())
	s.handle("POST /api/2/files/{root_id}/{file_id}/rename", s.authed(s.renameFile))
	s.handle("POST /api/2/files/{root_id}/{file_id}/move", s.authed(s.moveFile))
	s.handle("POST /api/2/files/{root_id}/{file_id}/lock", s.authed(s.lockFile))
	s.handle("POST /api/2/files/{root_id}/{file_id}/unlock", s.authed(s.unlockFile))
	s.handle("POST /api/2/files/{root_id}/{file_id}/delete", s.authed(s.deleteFile))
}

// itemGetPattern is the one pattern of itemGet's two routes.
const itemGetPattern = "GET /api/2/files/{root_id}/{item}/{sub}"

// itemGetServes reports whether itemGet serves the item and sub segments
// of its pattern with a route (a folder, a download) rather than 404:
// unrouted asks it too, so that no method's 405 names GET where GET is a
// 404.
func itemGetServes(item, sub string) bool { return item == "folder" || sub == "download" }

// itemGet serves GET /api/2/files/{root_id}/folder/{folder_id} (a folder
// object) and GET /api/2/files/{root_id}/{file_id}/download (a file's
// contents); anything else of that shape is not_found.
func (s *server) itemGet() http.Handler {
	folder := s.serveStream(s.authedStream(s.getFolder))
	download := s.serveStream(s.authedStream(s.download))
	// Any other item/sub is a path no route serves: answered as one (a
	// token first), so it maps no more than an unknown path does.
	notFound := s.serveJSON(func(r *http.Request) (any, error) { return nil, s.unknownPath(r) })
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch item, sub := r.PathValue("item"), r.PathValue("sub"); {
		case !itemGetServes(item, sub):
			notFound.ServeHTTP(w, r)
		case item == "folder":
			r.SetPathValue("folder_id", sub)
			folder.ServeHTTP(w, r)
		default:
			// download reads the file id from item itself: a path
			// value set here would cost the request an allocation.
			download.ServeHTTP(w, r)
		}
	})
}

// file checks access and loads the file of the path.
func (s *server) file(r *http.Request) (fsAccess, vfs.Node, error) {
	return s.fileOf(r, "file_id")
}

// fileOf is file with the file id in the path parameter param.
func (s *server) fileOf(r *http.Request, param string) (fsAccess, vfs.Node, error) {
	a, err := s.access(r)
	if err != nil {
		return a, vfs.Node{}, err
	}
	n, err := s.item(r, a, param, false)
	return a, n, err
}

func (s *server) getFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	return encodeFile(n, a.perms), nil
}

func (s *server) renameFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	if err := extensionReadOnly(r, a, n); err != nil {
		return nil, err
	}
	return s.rename(r, a, n)
}

func (s *server) moveFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	if err := extensionReadOnly(r, a, n); err != nil {
		return nil, err
	}
	return s.move(r, a, n)
}

func (s *server) lockFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	return nil, s.lock(r, a, n)
}

func (s *server) unlockFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	return nil, s.unlock(r, a, n)
}

func (s *server) deleteFile(r *http.Request) (any, error) {
	a, n, err := s.file(r)
	if err != nil {
		return nil, err
	}
	if err := extensionReadOnly(r, a, n); err != nil {
		return nil, err
	}
	return nil, s.delete(r, a, n)
}

// rename gives n the name of the form field `name` and returns its updated
// object.
func (s *server) rename(r *http.Request, a fsAccess, n vfs.Node) (any, error) {
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	name, err := required(vals, "name")
	if err != nil {
		return nil, err
	}
	// vfs reads an empty name as "keep the name"; here it is a bad name.
	if err := vfs.ValidateName(name); err != nil {
		return nil, nameError(n.Dir, err)
	}
	if err := conditions(r, n, true); err != nil {
		return nil, err
	}
	out, err := s.fs.Rename(r.Context(), a.root.ID, n.ID, name, conditionalOpts(r, a, n))
	if err != nil {
		return nil, nameError(n.Dir, err)
	}
	return encodeNode(out, a.perms), nil
}

// move puts n into the folder of the form field `folder_id` (0: the root's
// top level), optionally renamed to `name`, and returns its updated
// object. An optional `root_id` must name the same root: items do not move
// between roots.
func (s *server) move(r *http.Request, a fsAccess, n vfs.Node) (any, error) {
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	dst, err := destination(vals, a)
	if err != nil {
		return nil, err
	}
	name := ""
	if _, ok := vals["name"]; ok {
		name = vals.Get("name")
		if err := vfs.ValidateName(name); err != nil {
			return nil, nameError(n.Dir, err)
		}
	}
	if err := conditions(r, n, true); err != nil {
		return nil, err
	}
	out, err := s.fs.Move(r.Context(), a.root.ID, n.ID, dst, name, conditionalOpts(r, a, n))
	if err != nil {
		return nil, nameError(n.Dir, err)
	}
	return encodeNode(out, a.perms), nil
}

// nameError gives an over-long file name the code the spec lists for file
// routes. Spec 7.3 lists name_too_long only for folders (create_folder and
// folder rename); file rename and upload list invalid_name, so a client
// written to the spec knows no other code there.
func nameError(dir bool, err error) error {
	if !dir && errors.Is(err, vfs.ErrNameTooLong) {
		return Describe(vfs.ErrInvalidName, "a file name may be at most %d bytes of UTF-8", vfs.MaxNameBytes)
	}
	return err
}

// rootNameError describes a root name vfs refused by the rules of root
// names (vfs.ValidateRootName), which allow "/" and "\", rather than by
// the error table's, which are a file's.
func rootNameError(err error) error {
	if errors.Is(err, vfs.ErrInvalidName) {
		return Describe(vfs.ErrInvalidName, "a root's name must be valid UTF-8 without control characters, U+FFFE or U+FFFF")
	}
	return err
}

// destination reads the target folder of a move.
func destination(vals url.Values, a fsAccess) (uint64, error) {
	if v, ok := vals["root_id"]; ok {
		if id, ok := parseID(v[0]); !ok || id != a.root.ID {
			return 0, Describe(ErrInvalidRequest, "root_id: items move only within their root")
		}
	}
	v, err := required(vals, "folder_id")
	if err != nil {
		return 0, err
	}
	if v == "0" {
		return a.root.FolderID, nil
	}
	id, ok := parseID(v)
	if !ok {
		return 0, Describe(ErrInvalidRequest, "folder_id must be a folder id, or 0 for the root's top level")
	}
	return id, nil
}

// delete moves n (and everything below a folder) to the deleted state.
func (s *server) delete(r *http.Request, a fsAccess, n vfs.Node) error {
	if _, err := form(r); err != nil {
		return err
	}
	if err := conditions(r, n, true); err != nil {
		return err
	}
	return s.fs.Delete(r.Context(), a.root.ID, n.ID, conditionalOpts(r, a, n))
}

// conditionalOpts are a's options for a rename, move or delete of n:
// where r has conditions and n is a file, the change commits only while
// n is at the revision they held for (vfs.WriteOptions.IfRevision), so
// a revision that lands in between is 412 rather than renamed, moved or
// deleted unseen.
func conditionalOpts(r *http.Request, a fsAccess, n vfs.Node) vfs.WriteOptions {
	opts := a.opts
	if httpserve.Conditional(r) && !n.Dir {
		opts.IfRevision = n.RevisionID
	}
	return opts
}

// conditions refuses a change to the item n (exists false: to the name
// an upload takes, free) that r's If-Match, If-Unmodified-Since or
// If-None-Match says the client did not mean (httpserve.FailedCondition:
// RFC 9110 13.2.2's order, the item's ETag as a download sends it): 412
// invalid_request, and nothing changes; a malformed If-Match or
// If-None-Match is 400 invalid_request. A client that read a file, then
// renames, moves, deletes or replaces it with If-Match of the ETag it
// read, does so only while no other revision has come since.
func conditions(r *http.Request, n vfs.Node, exists bool) error {
	if h := httpserve.MalformedCondition(r); h != "" {
		return Describe(ErrInvalidRequest, `%s must be * or a comma-separated list of entity tags, such as "r12"; nothing was changed`, h)
	}
	switch httpserve.FailedCondition(r, n.ETag(), n.Modified, exists) {
	case "If-Match":
		return Describe(errPreconditionFailed, "If-Match does not hold: the item is not at that ETag (it changed, or there is none); nothing was changed")
	case "If-Unmodified-Since":
		return Describe(errPreconditionFailed, "If-Unmodified-Since does not hold: the item was modified in or after that second; nothing was changed")
	case "If-None-Match":
		return Describe(errPreconditionFailed, "If-None-Match does not hold: the item exists at that ETag; nothing was changed")
	}
	return nil
}
