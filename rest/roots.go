package rest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// rootRoutes registers the file-system view of a root (spec 4.4).
func (s *server) rootRoutes() {
	s.handleStream("GET /api/2/files/{root_id}", s.authedStream(s.getRoot))
	s.handle("POST /api/2/files/{root_id}/upload", s.authed(s.uploadToRoot))
	s.handle("POST /api/2/files/{root_id}/create_folder", s.authed(s.createFolderInRoot))
	s.handleStream("GET /api/2/files/{root_id}/search", s.authedStream(s.search))
	s.handle("GET /api/2/files/{root_id}/modified_since", s.authed(s.modifiedSince))
	s.handle("POST /api/2/files/{root_id}/lock", s.authed(s.lockRoot))
	s.handle("POST /api/2/files/{root_id}/unlock", s.authed(s.unlockRoot))
}

// Limits of requests to the file-system routes (berth's choices, see
// docs/api.md).
const (
	// maxFormBytes bounds a form body and the non-file parts of an upload.
	maxFormBytes = 64 << 10
	// maxFormParts bounds the number of parts of a multipart body.
	maxFormParts = 64
	// defaultResultLimit and maxResultLimit bound search and modified_since.
	defaultResultLimit = 1000
	maxResultLimit     = 10000
)

// fsAccess is what a file-system handler knows once the caller may use the
// root of the request's path: share's answer, with the permissions as the
// spec lists them.
type fsAccess struct {
	root vfs.Root
	// granted is what the caller may do in the root; perms shows it.
	granted share.Perm
	perms   []string
	policy  account.Policy
	// place is the chain of policy's organization: whom it binds
	// (account.Policy.Binds).
	place []uint64
	// opts carry the caller's principal and its organization's limits to
	// every vfs write.
	opts vfs.WriteOptions
}

// accessOf is the fsAccess of share's answer a.
func accessOf(a share.Access) fsAccess {
	return fsAccess{root: a.Root, granted: a.Perms, perms: permissions(a.Perms), policy: a.Policy, place: a.Place, opts: a.Opts}
}

// parseID reads an integer id of a path or form; anything else (signs,
// spaces, zero, leading zeros, overflow) is not an id. The spec's ids are
// JSON integers, which clients hold as int64, so ids stop at
// math.MaxInt64: a larger number is no more an id than one past uint64
// is. An id is spelled as JSON writes it, without leading zeros, so one
// spelling names one item (and 19 digits bound every id).
func parseID(s string) (uint64, bool) {
	if s == "" || len(s) > 19 || s[0] == '0' {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return uint64(id), err == nil && id != 0
}

// access checks that the caller may use the root named by the path's
// root_id, and loads it with the caller's permissions and policy (share
// decides). A root id that is not an id is no root the caller reaches.
func (s *server) access(r *http.Request) (fsAccess, error) {
	id, ok := parseID(r.PathValue("root_id"))
	if !ok {
		return fsAccess{}, share.ErrNoRoot
	}
	a, err := s.shares.Root(r.Context(), callerOf(r), id)
	if err != nil {
		return fsAccess{}, err
	}
	if need := neededPerms(r); !a.Perms.Has(need) {
		return fsAccess{}, &share.Refusal{Reason: "this root is yours to read, not to change (" + need.String() + ")"}
	}
	return accessOf(a), nil
}

// neededPerms is what a file-system request asks of its root: a read
// (GET, HEAD) needs view and read, anything else write, and a delete
// delete too. Every file route changes only by POST, so the method and
// the path's last segment decide it in one place.
func neededPerms(r *http.Request) share.Perm {
	switch {
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		return share.View | share.Read
	case strings.HasSuffix(r.URL.Path, "/delete"):
		return share.Write | share.Delete
	}
	return share.Write
}

// item loads the file (dir false) or folder (dir true) named by the path
// parameter param. A file id on a folder route, or the other way round, is
// not_found. Deleted items are returned (their objects say is_deleted);
// vfs refuses to change them.
func (s *server) item(r *http.Request, a fsAccess, param string, dir bool) (vfs.Node, error) {
	what := "file"
	if dir {
		what = "folder"
	}
	id, ok := parseID(r.PathValue(param))
	if !ok {
		return vfs.Node{}, Describe(ErrNotFound, "no such %s", what)
	}
	n, err := s.fs.Stat(r.Context(), a.root.ID, id)
	if errors.Is(err, vfs.ErrNotExist) || (err == nil && n.Dir != dir) {
		return vfs.Node{}, Describe(ErrNotFound, "no such %s", what)
	}
	return n, err
}

// topFolder returns the root's top folder as a node (lock and unlock of a
// root act on it).
func (s *server) topFolder(ctx context.Context, a fsAccess) (vfs.Node, error) {
	return s.fs.Stat(ctx, a.root.ID, a.root.FolderID)
}

// form returns the request's form fields: those of an
// application/x-www-form-urlencoded or multipart/form-data body of at most
// maxFormBytes, then those of the query string, so a field in both is the
// body's with either encoding (as http.Request.ParseForm orders them).
// Other bodies are ignored.
func form(r *http.Request) (url.Values, error) {
	r.Body = http.MaxBytesReader(nil, r.Body, maxFormBytes)
	q, err := query(r)
	if err != nil {
		return nil, err
	}
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		if err := r.ParseForm(); err != nil {
			return nil, formError(err)
		}
		return r.Form, nil
	}
	if params["boundary"] == "" {
		return nil, Describe(ErrInvalidRequest, "a multipart/form-data body needs a boundary parameter")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, formError(err)
	}
	vals := url.Values{}
	budget := &fieldBudget{left: maxFormBytes, parts: maxFormParts}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			for k, v := range q {
				vals[k] = append(vals[k], v...)
			}
			return vals, nil
		}
		if err != nil {
			return nil, formError(err)
		}
		v, err := budget.read(p)
		if err != nil {
			return nil, err
		}
		if name := p.FormName(); name != "" {
			vals.Add(name, v)
		}
	}
}

// formError describes a body that could not be parsed as a form.
func formError(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return Describe(ErrInvalidRequest, "the form body is larger than %d bytes", maxFormBytes)
	}
	return Describe(ErrInvalidRequest, "malformed form body")
}

// fieldBudget bounds the non-file parts of a multipart body: their number
// and their total size, so a body of endless small fields cannot hold
// memory.
type fieldBudget struct {
	left  int64
	parts int
}

// read reads one non-file part into a string, charged to the budget.
func (b *fieldBudget) read(p io.Reader) (string, error) {
	if b.parts--; b.parts < 0 {
		return "", Describe(ErrInvalidRequest, "the multipart body has more than %d parts", maxFormParts)
	}
	v, err := io.ReadAll(io.LimitReader(p, b.left+1))
	if errors.Is(err, errUploadHead) {
		return "", err // the upload's own bound, which it describes
	}
	if err != nil {
		return "", formError(err)
	}
	if int64(len(v)) > b.left {
		return "", Describe(ErrInvalidRequest, "the form fields are larger than %d bytes", maxFormBytes)
	}
	b.left -= int64(len(v))
	return string(v), nil
}

// required returns the form field name, which must be present (it may be
// empty; the domain judges the value).
func required(vals url.Values, name string) (string, error) {
	v, ok := vals[name]
	if !ok || len(v) == 0 {
		return "", Describe(ErrInvalidRequest, "missing parameter %q", name)
	}
	return v[0], nil
}

// query parses the request's query string. url.Values drops what it
// cannot parse (a bad %-escape, a semicolon) without a word, which would
// quietly turn include_children=true;x into no include_children at all,
// so a malformed query string is invalid_request instead.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, Describe(ErrInvalidRequest, "malformed query string")
	}
	return q, nil
}

// boolParam reads an optional boolean parameter (parseBool); absent is
// false.
func boolParam(q url.Values, name string) (bool, error) {
	if !q.Has(name) {
		return false, nil
	}
	if b, ok := parseBool(q.Get(name)); ok {
		return b, nil
	}
	return false, Describe(ErrInvalidRequest, "%s must be true or false", name)
}

// parseBool is the one reading of a boolean parameter, in a query or a
// form: true or 1, false or 0, exactly (docs/api.md); TRUE, t or yes
// are refused rather than guessed at.
func parseBool(v string) (b, ok bool) {
	switch v {
	case "true", "1":
		return true, true
	case "false", "0":
		return false, true
	}
	return false, false
}

// limitParam reads the optional `limit` of search and modified_since.
func limitParam(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return defaultResultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxResultLimit {
		return 0, Describe(ErrInvalidRequest, "limit must be an integer from 1 to %d", maxResultLimit)
	}
	return n, nil
}

// notModifiedBody is the 304 answer of spec 1.4. HTTP forbids a body on
// 304, so net/http drops it on the wire; it is written anyway so the
// answer stays what the spec shows should a proxy ever translate it.
var notModifiedBody = []byte(`{"status":"not_modified"}`)

// writeJSON writes v as a 200 JSON body from a stream handler. It
// marshals first, so a failure is still a clean JSON error.
func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, b)
	return nil
}

// getRoot answers GET /api/2/files/{root_id}: the root object, with
// children and hash when include_children=true, or 304 when the client's
// hash is current, or one page of them (limit, cursor). It is a stream
// handler to answer 304 and to write the children as they are read.
func (s *server) getRoot(w http.ResponseWriter, r *http.Request) error {
	a, err := s.access(r)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	withChildren, err := boolParam(q, "include_children")
	if err != nil {
		return err
	}
	p, err := listPageOf(q)
	if err != nil {
		return err
	}
	u, err := s.fs.Usage(r.Context(), a.root.ID)
	if err != nil {
		return err
	}
	obj := encodeRoot(a.root, u, a.perms)
	if withChildren {
		return s.writeListing(w, r, q, obj, typeRoot, a.root.ID, a.root.FolderID, p, a.perms)
	}
	return writeJSON(w, obj)
}

func (s *server) uploadToRoot(r *http.Request) (any, error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	return s.upload(r, a, a.root.FolderID)
}

func (s *server) createFolderInRoot(r *http.Request) (any, error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	return s.createFolder(r, a, a.root.FolderID)
}

// createFolder creates the folder named by the form field `name` in parent.
func (s *server) createFolder(r *http.Request, a fsAccess, parent uint64) (any, error) {
	vals, err := form(r)
	if err != nil {
		return nil, err
	}
	name, err := required(vals, "name")
	if err != nil {
		return nil, err
	}
	n, err := s.fs.Mkdir(r.Context(), a.root.ID, parent, name, a.opts)
	if err != nil {
		return nil, err
	}
	return encodeFolder(n, a.perms), nil
}

// search answers GET .../search?query=<text>[&limit=<n>][&after=<id>]:
// live files and folders whose name contains query, ignoring case, by id,
// those after the item id after only. When there may be more, a Link
// header (RFC 8288, rel="next") gives the next page's URL: the spec's
// body has no room for a cursor. It is a stream handler only to set it.
func (s *server) search(w http.ResponseWriter, r *http.Request) error {
	a, err := s.access(r)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	text := q.Get("query")
	if text == "" {
		return Describe(ErrInvalidRequest, "missing parameter %q", "query")
	}
	// No name holds more characters than bytes: a longer query matches
	// nothing, and would cost a scan of the index per trigram.
	if utf8.RuneCountInString(text) > vfs.MaxNameBytes {
		return Describe(ErrInvalidRequest, "query may be at most %d characters: no name is longer", vfs.MaxNameBytes)
	}
	limit, err := limitParam(q)
	if err != nil {
		return err
	}
	var after uint64
	if v := q.Get("after"); v != "" {
		if after, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Describe(ErrInvalidRequest, "after must be an item id (an integer from 0)")
		}
	}
	ns, next, err := s.fs.SearchAfter(r.Context(), a.root.ID, text, after, limit)
	if err != nil {
		return err
	}
	if next != 0 {
		u := url.URL{Path: r.URL.Path, RawQuery: url.Values{
			"query": {text}, "limit": {strconv.Itoa(limit)}, "after": {strconv.FormatUint(next, 10)},
		}.Encode()}
		w.Header().Set("Link", "<"+u.String()+`>; rel="next"`)
	}
	return writeJSON(w, resultsJSON{Results: encodeNodes(ns, a.perms)})
}

// modifiedSince answers GET .../modified_since?since=<YYYY-MM-DDTHH:MM:SS>
// (or date=<YYYY-MM-DD>)[&limit=<n>]: live files modified at or after
// that instant, oldest first.
func (s *server) modifiedSince(r *http.Request) (any, error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	q, err := query(r)
	if err != nil {
		return nil, err
	}
	var since time.Time
	switch {
	case q.Has("since"):
		if since, err = parseDateTime(q.Get("since")); err != nil {
			return nil, err
		}
	case q.Has("date"):
		if since, err = parseDate(q.Get("date")); err != nil {
			return nil, err
		}
	default:
		return nil, Describe(ErrInvalidRequest, "missing parameter %q (YYYY-MM-DDTHH:MM:SS, UTC) or %q (YYYY-MM-DD)", "since", "date")
	}
	limit, err := limitParam(q)
	if err != nil {
		return nil, err
	}
	ns, err := s.fs.ModifiedSince(r.Context(), a.root.ID, since, limit)
	if err != nil {
		return nil, err
	}
	return resultsJSON{Results: encodeNodes(ns, a.perms)}, nil
}

func (s *server) lockRoot(r *http.Request) (any, error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	top, err := s.topFolder(r.Context(), a)
	if err != nil {
		return nil, err
	}
	return nil, s.lock(r, a, top)
}

func (s *server) unlockRoot(r *http.Request) (any, error) {
	a, err := s.access(r)
	if err != nil {
		return nil, err
	}
	top, err := s.topFolder(r.Context(), a)
	if err != nil {
		return nil, err
	}
	return nil, s.unlock(r, a, top)
}

// lock locks n for the caller: exclusive, deep for a folder (it covers
// everything below), until unlocked or for the optional form field
// `duration` in seconds. Locking what the caller already holds is a
// success that renews it to what the request asks (a duration from now,
// or none). If-Match,
// If-None-Match and If-Unmodified-Since are judged as for a rename
// (conditions), and a new lock of a file commits only while the file is
// at the revision they held for.
func (s *server) lock(r *http.Request, a fsAccess, n vfs.Node) error {
	if !a.policy.UserLockFiles && a.policy.Binds(callerOf(r).Person, a.place) {
		return Describe(ErrForbidden, "the organization's policy does not let users lock files")
	}
	vals, err := form(r)
	if err != nil {
		return err
	}
	var d time.Duration
	if v := vals.Get("duration"); v != "" {
		secs, err := strconv.ParseInt(v, 10, 64)
		if err != nil || secs < 1 || secs > 10*365*24*3600 {
			return Describe(ErrInvalidRequest, "duration must be a number of seconds from 1 to 315360000")
		}
		d = time.Duration(secs) * time.Second
	}
	if err := conditions(r, n, true); err != nil {
		return err
	}
	for _, l := range n.Locks {
		// Only a lock of the caller's that REST writes pass counts as
		// held: the caller's WebDAV lock (another client of theirs)
		// opens to its token alone, and the 200 it got here was
		// followed by resource_locked on the caller's own upload.
		if l.Holder == a.opts.Principal && !l.TokenRequired {
			// Held: renewed to what this request asks, d from now or,
			// without duration, until unlocked (RefreshLock with 0), as
			// a first lock would be; a lock without duration left an
			// earlier one's expiry in place and answered 200.
			if d > 0 || !l.Expires.IsZero() {
				_, err := s.fs.RefreshLock(r.Context(), a.root.ID, n.ID, l.Token, d)
				return err
			}
			return nil
		}
	}
	_, err = s.fs.Lock(r.Context(), a.root.ID, n.ID, vfs.LockRequest{
		Owner:    a.opts.Principal,
		Holder:   a.opts.Principal,
		Duration: d,
		Deep:     n.Dir,
		// A revision that lands between the check and the lock is
		// 412, not locked unseen, as for a rename.
		IfRevision: conditionalOpts(r, a, n).IfRevision,
	})
	return err
}

// unlock removes the caller's own locks on n. An item without locks is
// already unlocked (success); one locked only by someone else is
// resource_locked. With the form field `force` true it ends every lock
// that covers n, whoever holds it: n's own and the deep locks of the
// folders above it (vfs.ForceUnlock), as a WebDAV UNLOCK of a resource
// within a lock's scope ends the whole lock; n's own alone answered 200
// and left n locked under a folder's lock. Only a caller who holds every
// permission on the root may ask that (its owner, a share's manager, the
// administrators of a share's organization and of those above): no one
// else could end a lock its holder does not, and a collaborator's lock
// of a share without duration kept the share for good, after the
// collaborator had left it too. If-Match, If-None-Match and
// If-Unmodified-Since are judged as for a rename (conditions), just
// before: removing a lock changes no contents, so a revision that lands
// after the check loses nothing by it, and a lock taken after the check
// is ended with the rest (force ends what is there when it commits).
func (s *server) unlock(r *http.Request, a fsAccess, n vfs.Node) error {
	vals, err := form(r)
	if err != nil {
		return err
	}
	force, err := boolParam(vals, "force")
	if err != nil {
		return err
	}
	if force && !a.granted.Has(share.Owner) {
		return Describe(ErrForbidden, "only those with every permission on the root (its owner, a share's managers, the organization's administrators) end the locks of others")
	}
	if err := conditions(r, n, true); err != nil {
		return err
	}
	if force {
		return s.fs.ForceUnlock(r.Context(), a.root.ID, n.ID)
	}
	mine := 0
	for _, l := range n.Locks {
		if l.Holder != a.opts.Principal {
			continue
		}
		mine++
		if err := s.fs.Unlock(r.Context(), a.root.ID, n.ID, l.Token); err != nil && !errors.Is(err, vfs.ErrNoSuchLock) {
			return err
		}
	}
	if mine == 0 && len(n.Locks) > 0 {
		return Describe(vfs.ErrLocked, "the item is locked by someone else")
	}
	return nil
}
