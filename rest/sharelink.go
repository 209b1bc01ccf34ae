package rest

import (
	"cmp"
	"container/heap"
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// sharelinkRoutes registers the share links (spec 4.2 and 4.3 share,
// 4.13, 4.9's guest shares). Managing a link takes its creator's token;
// using one (the routes below /sharelinks/{ref}/files, download, view,
// and GET of the link itself) takes the link's or a subscriber's hash and
// no token, or, when the link has login_required, the token of its
// creator or a subscriber (docs/api.md, "Share links").
func (s *server) sharelinkRoutes() {
	s.handle("POST /api/2/files/{root_id}/{file_id}/share", s.authed(s.createFileLink))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/share", s.authed(s.createFolderLink))
	s.handlePublic("GET /api/2/sharelinks/{ref}", s.getSharelink)
	s.handle("PUT /api/2/sharelinks/{ref}", s.authed(s.updateSharelink))
	s.handle("DELETE /api/2/sharelinks/{ref}", s.authed(s.deleteSharelink))
	s.handle("POST /api/2/sharelinks/{ref}/subscribers", s.authed(s.addSubscriber))
	s.handle("PUT /api/2/sharelinks/{ref}/subscribers/{sub_id}", s.authed(s.updateSubscriber))
	s.handle("DELETE /api/2/sharelinks/{ref}/subscribers/{sub_id}", s.authed(s.deleteSubscriber))
	s.handle("GET /api/2/guest/{id}/shares", s.authed(s.guestShares))

	s.handlePublicStream("GET /api/2/sharelinks/{ref}/files", s.linkTop)
	s.handlePublic("GET /api/2/sharelinks/{ref}/files/children", s.linkChildren)
	s.handlePublic("GET /api/2/sharelinks/{ref}/files/folder/{folder_id}/children", s.linkChildren)
	s.handlePublic("GET /api/2/sharelinks/{ref}/files/{file_id}", s.linkFile)
	s.handlePublicStream("GET /api/2/sharelinks/{ref}/files/{item}/{sub}", s.linkItemGet)
	s.handlePublicStream("GET /api/2/sharelinks/{ref}/files/folder/{folder_id}/download", s.linkFolderDownload)
	s.handlePublicStream("GET /api/2/sharelinks/{ref}/download", s.linkDownload(false))
	s.handlePublicStream("GET /api/2/sharelinks/{ref}/view", s.linkDownload(true))
	s.handlePublic("POST /api/2/sharelinks/{ref}/files/create_folder", s.linkCreateFolder)
	s.handlePublic("POST /api/2/sharelinks/{ref}/files/folder/{folder_id}/create_folder", s.linkCreateFolder)
	s.handlePublic("POST /api/2/sharelinks/{ref}/files/upload", s.linkUpload)
	s.handlePublic("POST /api/2/sharelinks/{ref}/files/folder/{folder_id}/upload", s.linkUpload)
}

// handlePublicStream registers a download handler that takes no token
// (a share link's hash stands for one).
func (s *server) handlePublicStream(pattern string, h StreamHandler) {
	s.registered(pattern, true)
	s.mux.Handle(pattern, s.serveStream(h))
}

// sharelinkBody is the file_sharelink and folder_sharelink of spec 2.18.
type sharelinkBody struct {
	ID              uint64           `json:"id"`
	Hash            string           `json:"hash"`
	File            *fileJSON        `json:"file,omitempty"`
	Folder          *folderJSON      `json:"folder,omitempty"`
	RootID          uint64           `json:"root_id"`
	CreatorID       uint64           `json:"creator_id"`
	CreatorName     string           `json:"creator_name"`
	Created         string           `json:"created"`
	Expires         *string          `json:"expires"`
	LoginRequired   bool             `json:"login_required"`
	DownloadLimit   *int64           `json:"download_limit"`
	DownloadNotify  bool             `json:"download_notify"`
	UploadNotify    *bool            `json:"upload_notify,omitempty"`
	AnonEdit        bool             `json:"anon_edit"`
	Subscribers     []subscriberBody `json:"subscribers"`
	TimesDownloaded int64            `json:"times_downloaded"`
	TimesViewed     int64            `json:"times_viewed"`
	URL             string           `json:"url"`
	Type            string           `json:"type"`
}

// subscriberBody is the sharelink_subscriber of spec 2.19.
type subscriberBody struct {
	ID              uint64 `json:"id"`
	Hash            string `json:"hash"`
	ReadAccess      bool   `json:"read_access"`
	WriteAccess     bool   `json:"write_access"`
	DeleteAccess    bool   `json:"delete_access"`
	SubscriberType  string `json:"subscriber_type"`
	Subscriber      any    `json:"subscriber"`
	TimesDownloaded int64  `json:"times_downloaded"`
	TimesViewed     int64  `json:"times_viewed"`
	URL             string `json:"url"`
	Type            string `json:"type"`
}

// subjectBody is a person, guest or group subscriber's subscriber field.
type subjectBody struct {
	ID    uint64 `json:"id"`
	Name  string `json:"name"`
	Email string `json:"email"`
}

// fileShareBody is the file_share of spec 2.4.
type fileShareBody struct {
	ID           uint64  `json:"id"`
	CreatorID    uint64  `json:"creator_id"`
	FileID       *uint64 `json:"file_id"`
	FolderID     *uint64 `json:"folder_id"`
	RootID       uint64  `json:"root_id"`
	Hash         string  `json:"hash"`
	Expires      *string `json:"expires"`
	ReadAccess   bool    `json:"read_access"`
	WriteAccess  bool    `json:"write_access"`
	DeleteAccess bool    `json:"delete_access"`
	Type         string  `json:"type"`
}

// linkURL is the address a browser opens for hash: the configured public
// base URL, or https:// and the request's host, then /s/ and the hash.
func (s *server) linkURL(r *http.Request, hash string) string {
	base := strings.TrimRight(s.opts.PublicURL, "/")
	if base == "" {
		base = "https://" + r.Host
	}
	return base + "/s/" + hash
}

// encodeLink encodes l. full: the creator's view, with every subscriber;
// otherwise only sub's entry (nil: none).
func (s *server) encodeLink(r *http.Request, l share.Link, full bool, sub *share.Subscriber) (sharelinkBody, error) {
	ctx := r.Context()
	b := sharelinkBody{ID: l.ID, Hash: l.Hash, RootID: l.RootID, CreatorID: l.CreatorID,
		Created: formatDateTime(l.Created), LoginRequired: l.LoginRequired, DownloadLimit: l.DownloadLimit,
		DownloadNotify: l.DownloadNotify, AnonEdit: l.AnonEdit, TimesDownloaded: l.TimesDownloaded,
		TimesViewed: l.TimesViewed, URL: s.linkURL(r, l.Hash), Subscribers: []subscriberBody{}}
	if l.Expires != "" {
		e := l.Expires
		b.Expires = &e
	}
	if p, err := s.accounts.Person(ctx, l.CreatorID); err == nil {
		b.CreatorName = p.DisplayName
	}
	n, err := s.fs.Stat(ctx, l.RootID, l.ItemID())
	if err != nil {
		return b, err
	}
	perms := permissions(linkPerms(l))
	if l.Folder() {
		f := encodeFolder(n, perms)
		up := l.UploadNotify
		b.Folder, b.UploadNotify, b.Type = &f, &up, "folder_sharelink"
	} else {
		f := encodeFile(n, perms)
		b.File, b.Type = &f, "file_sharelink"
	}
	for _, sb := range l.Subscribers {
		if full || (sub != nil && sub.ID == sb.ID) {
			b.Subscribers = append(b.Subscribers, s.encodeSubscriber(r, sb))
		}
	}
	return b, nil
}

func linkPerms(l share.Link) share.Perm {
	p := share.View
	if l.ReadAccess {
		p |= share.Read
	}
	if l.WriteAccess {
		p |= share.Write
	}
	if l.DeleteAccess {
		p |= share.Delete
	}
	return p
}

func (s *server) encodeSubscriber(r *http.Request, sb share.Subscriber) subscriberBody {
	b := subscriberBody{ID: sb.ID, Hash: sb.Hash, ReadAccess: sb.ReadAccess, WriteAccess: sb.WriteAccess,
		DeleteAccess: sb.DeleteAccess, SubscriberType: sb.Kind, TimesDownloaded: sb.TimesDownloaded,
		TimesViewed: sb.TimesViewed, URL: s.linkURL(r, sb.Hash), Type: "sharelink_subscriber"}
	switch sb.Kind {
	case "email":
		b.Subscriber = sb.Email
	case "group":
		sj := subjectBody{ID: sb.SubjectID}
		if g, err := s.accounts.Group(r.Context(), sb.SubjectID); err == nil {
			sj.Name = g.Name
		}
		b.Subscriber = sj
	default:
		sj := subjectBody{ID: sb.SubjectID, Email: sb.Email}
		if p, err := s.accounts.Person(r.Context(), sb.SubjectID); err == nil {
			sj.Name, sj.Email = p.DisplayName, p.Email
		}
		b.Subscriber = sj
	}
	return b
}

// linkSettings reads the link's form fields; absent ones are nil.
func linkSettings(f url.Values) (share.LinkSettings, error) {
	var set share.LinkSettings
	if f.Has("expires") {
		e := f.Get("expires")
		if e == "null" {
			e = ""
		}
		if e != "" {
			if _, err := parseDate(e); err != nil {
				return set, ErrInvalidDateFormat
			}
		}
		set.Expires = &e
	}
	bools := []struct {
		name string
		dst  **bool
	}{
		{"login_required", &set.LoginRequired}, {"download_notify", &set.DownloadNotify},
		{"upload_notify", &set.UploadNotify}, {"anon_edit", &set.AnonEdit},
		{"read_access", &set.ReadAccess}, {"write_access", &set.WriteAccess}, {"delete_access", &set.DeleteAccess},
	}
	for _, b := range bools {
		if !f.Has(b.name) {
			continue
		}
		v, ok := parseBool(f.Get(b.name))
		if !ok {
			return set, Describe(ErrInvalidRequest, "%s must be true or false", b.name)
		}
		*b.dst = &v
	}
	if f.Has("download_limit") {
		var lim *int64
		if v := f.Get("download_limit"); v != "" && v != "null" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return set, Describe(ErrInvalidRequest, "download_limit must be a whole number of downloads, or empty or null for none")
			}
			lim = &n
		}
		set.DownloadLimit = &lim
	}
	return set, nil
}

func (s *server) createFileLink(r *http.Request) (any, error) {
	return s.createLink(r, "file_id", false)
}
func (s *server) createFolderLink(r *http.Request) (any, error) {
	return s.createLink(r, "folder_id", true)
}

// createLink answers POST .../share: the caller needs Reshare on the root
// and a policy that lets them share (can_share).
func (s *server) createLink(r *http.Request, param string, dir bool) (any, error) {
	root, ok := parseID(r.PathValue("root_id"))
	if !ok {
		return nil, share.ErrNoRoot
	}
	id, ok := parseID(r.PathValue(param))
	if !ok {
		return nil, Describe(ErrNotFound, "no such item")
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	set, err := linkSettings(f)
	if err != nil {
		return nil, err
	}
	l, err := s.shares.CreateLink(r.Context(), callerOf(r), root, id, dir, set)
	if err != nil {
		return nil, err
	}
	return s.encodeLink(r, l, true, nil)
}

// optionalCaller authenticates r when it carries an Authorization header:
// a link's user may come signed in or not.
func (s *server) optionalCaller(r *http.Request) (*caller, error) {
	if r.Header.Get("Authorization") == "" {
		return nil, nil
	}
	r2, err := s.authenticate(r)
	if err != nil {
		return nil, err
	}
	c := callerOf(r2)
	return &c, nil
}

// getSharelink answers GET /api/2/sharelinks/{id or hash}: the creator
// sees the whole link; anyone else who may use it (share.OpenLink) sees it
// with their own subscriber entry only, and the view is counted.
func (s *server) getSharelink(r *http.Request) (any, error) {
	c, err := s.optionalCaller(r)
	if err != nil {
		return nil, err
	}
	if c != nil {
		if l, err := s.shares.ManagedLink(r.Context(), *c, r.PathValue("ref")); err == nil {
			return s.encodeLink(r, l, true, nil)
		}
	}
	la, err := s.shares.OpenLink(r.Context(), r.PathValue("ref"), c)
	if err != nil {
		return nil, err
	}
	if err := s.shares.CountView(r.Context(), la); err != nil {
		return nil, err
	}
	l := la.Link
	l.TimesViewed++
	b, err := s.encodeLink(r, l, false, la.Subscriber)
	if err != nil {
		return nil, err
	}
	// The item's permissions say what this user may do through the link
	// (a subscriber's hash may allow less than the link).
	perms := permissions(la.Perms)
	if b.File != nil {
		b.File.Permissions = perms
	}
	if b.Folder != nil {
		b.Folder.Permissions = perms
	}
	return b, nil
}

// managedID returns the id of the caller's link of the path.
func (s *server) managedID(r *http.Request) (uint64, error) {
	l, err := s.shares.ManagedLink(r.Context(), callerOf(r), r.PathValue("ref"))
	return l.ID, err
}

func (s *server) updateSharelink(r *http.Request) (any, error) {
	id, err := s.managedID(r)
	if err != nil {
		return nil, err
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	set, err := linkSettings(f)
	if err != nil {
		return nil, err
	}
	l, err := s.shares.UpdateLink(r.Context(), callerOf(r), id, set)
	if err != nil {
		return nil, err
	}
	return s.encodeLink(r, l, true, nil)
}

func (s *server) deleteSharelink(r *http.Request) (any, error) {
	id, err := s.managedID(r)
	if err != nil {
		return nil, err
	}
	if err := s.shares.DeleteLink(r.Context(), callerOf(r), id); err != nil {
		return nil, err
	}
	return statusBody{Status: "ok"}, nil
}

// accessFields reads read_access, write_access and delete_access.
func accessFields(f url.Values) (read, write, del *bool, err error) {
	out := make([]*bool, 3)
	for i, name := range []string{"read_access", "write_access", "delete_access"} {
		if !f.Has(name) {
			continue
		}
		v, ok := parseBool(f.Get(name))
		if !ok {
			return nil, nil, nil, Describe(ErrInvalidRequest, "%s must be true or false", name)
		}
		out[i] = &v
	}
	return out[0], out[1], out[2], nil
}

// addSubscriber answers POST .../subscribers. Form fields:
// subscriber_type (person, guest, group, email), subscriber_id (person,
// guest, group) or email, and the access flags (default: the link's).
func (s *server) addSubscriber(r *http.Request) (any, error) {
	l, err := s.shares.ManagedLink(r.Context(), callerOf(r), r.PathValue("ref"))
	if err != nil {
		return nil, err
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	sb := share.Subscriber{Kind: f.Get("subscriber_type"), Email: f.Get("email"),
		ReadAccess: l.ReadAccess, WriteAccess: l.WriteAccess, DeleteAccess: l.DeleteAccess}
	if sb.Kind != "email" {
		sb.Email = ""
		if v := f.Get("subscriber_id"); v != "" {
			id, ok := parseID(v)
			if !ok {
				return nil, Describe(ErrInvalidRequest, "subscriber_id must be an id")
			}
			sb.SubjectID = id
		}
	}
	read, write, del, err := accessFields(f)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		dst *bool
		v   *bool
	}{{&sb.ReadAccess, read}, {&sb.WriteAccess, write}, {&sb.DeleteAccess, del}} {
		if p.v != nil {
			*p.dst = *p.v
		}
	}
	out, err := s.shares.AddSubscriber(r.Context(), callerOf(r), l.ID, sb)
	if err != nil {
		return nil, err
	}
	return s.encodeSubscriber(r, out), nil
}

func (s *server) subscriberOf(r *http.Request) (uint64, uint64, error) {
	id, err := s.managedID(r)
	if err != nil {
		return 0, 0, err
	}
	sub, ok := parseID(r.PathValue("sub_id"))
	if !ok {
		return 0, 0, Describe(ErrNotFound, "no such subscriber")
	}
	return id, sub, nil
}

func (s *server) updateSubscriber(r *http.Request) (any, error) {
	id, sub, err := s.subscriberOf(r)
	if err != nil {
		return nil, err
	}
	f, err := form(r)
	if err != nil {
		return nil, err
	}
	read, write, del, err := accessFields(f)
	if err != nil {
		return nil, err
	}
	out, err := s.shares.UpdateSubscriber(r.Context(), callerOf(r), id, sub, read, write, del)
	if err != nil {
		return nil, err
	}
	return s.encodeSubscriber(r, out), nil
}

func (s *server) deleteSubscriber(r *http.Request) (any, error) {
	id, sub, err := s.subscriberOf(r)
	if err != nil {
		return nil, err
	}
	if err := s.shares.RemoveSubscriber(r.Context(), callerOf(r), id, sub); err != nil {
		return nil, err
	}
	return statusBody{Status: "ok"}, nil
}

// guestShares answers GET /api/2/guest/{id}/shares: the links the guest
// subscribes to, as file_share objects with the guest's own hash and
// access. The guest and the administrators who read the guest see them.
func (s *server) guestShares(r *http.Request) (any, error) {
	g, err := s.personOrGuest(r, r.PathValue("id"), true, share.PersonRead)
	if err != nil {
		return nil, err
	}
	links, err := s.shares.SubjectLinks(r.Context(), g.ID)
	if err != nil {
		return nil, err
	}
	out := []fileShareBody{}
	for _, l := range links {
		for _, sb := range l.Subscribers {
			if sb.Kind != "guest" || sb.SubjectID != g.ID {
				continue
			}
			b := fileShareBody{ID: l.ID, CreatorID: l.CreatorID, RootID: l.RootID, Hash: sb.Hash,
				ReadAccess: sb.ReadAccess, WriteAccess: sb.WriteAccess, DeleteAccess: sb.DeleteAccess, Type: "file_share"}
			if l.Expires != "" {
				e := l.Expires + "T23:59:59"
				b.Expires = &e
			}
			id := l.ItemID()
			if l.Folder() {
				b.FolderID = &id
			} else {
				b.FileID = &id
			}
			out = append(out, b)
		}
	}
	return struct {
		Results []fileShareBody `json:"results"`
	}{out}, nil
}

// openLink opens the link of the path for its user.
func (s *server) openLink(r *http.Request) (share.LinkAccess, error) {
	c, err := s.optionalCaller(r)
	if err != nil {
		return share.LinkAccess{}, err
	}
	return s.shares.OpenLink(r.Context(), r.PathValue("ref"), c)
}

// linkNode returns item id (of the path parameter param) of the link's
// root, when it is the shared file or inside the shared folder.
func (s *server) linkNode(ctx context.Context, la share.LinkAccess, param string, dir bool) (vfs.Node, error) {
	what := "file"
	if dir {
		what = "folder"
	}
	notFound := Describe(ErrNotFound, "no such %s in this share link", what)
	id, ok := parseID(param)
	if !ok {
		return vfs.Node{}, notFound
	}
	n, err := s.fs.Stat(ctx, la.Root.ID, id)
	if err != nil || n.Dir != dir || n.Deleted {
		return vfs.Node{}, notFound
	}
	if !la.Link.Folder() {
		if n.ID != la.Link.FileID {
			return vfs.Node{}, notFound
		}
		return n, nil
	}
	// The shared folder must be n or above it (one walk up in vfs: a
	// Stat of each folder on the way resolved each one's path, the
	// square of the depth).
	if in, err := s.fs.Within(ctx, la.Root.ID, n.ID, la.Link.FolderID); err != nil || !in {
		return vfs.Node{}, notFound
	}
	return n, nil
}

// linkTop answers GET .../sharelinks/{ref}/files: the shared folder (or,
// for a file link, the shared file), with children on include_children.
func (s *server) linkTop(w http.ResponseWriter, r *http.Request) error {
	la, err := s.openLink(r)
	if err != nil {
		return err
	}
	return s.writeLinkObject(w, r, la, strconv.FormatUint(la.Link.ItemID(), 10), !la.Link.Folder())
}

// writeLinkObject writes the link's file or folder object of id; a
// folder's children, with include_children=true, stream from the
// listing as the folder route's do (writeListing), or 304 when the
// client's hash is current: a link to a folder of a million files costs
// its visitor a batch of them in memory, never the folder.
func (s *server) writeLinkObject(w http.ResponseWriter, r *http.Request, la share.LinkAccess, id string, file bool) error {
	perms := permissions(la.Perms)
	if file {
		n, err := s.linkNode(r.Context(), la, id, false)
		if err != nil {
			return err
		}
		return writeJSON(w, encodeFile(n, perms))
	}
	n, err := s.linkNode(r.Context(), la, id, true)
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
	obj := encodeFolder(n, perms)
	if !withChildren {
		return writeJSON(w, obj)
	}
	return s.writeListing(w, r, q, obj, typeFolder, la.Root.ID, n.ID, listPage{}, perms)
}

// linkFile answers GET .../sharelinks/{ref}/files/{file_id}.
func (s *server) linkFile(r *http.Request) (any, error) {
	la, err := s.openLink(r)
	if err != nil {
		return nil, err
	}
	n, err := s.linkNode(r.Context(), la, r.PathValue("file_id"), false)
	if err != nil {
		return nil, err
	}
	return encodeFile(n, permissions(la.Perms)), nil
}

// Paging of a link's children: page (from 1), page_size (1 to
// maxLinkPageSize, default defaultLinkPageSize), sort (name, size,
// modified) and order (asc, desc).
const (
	defaultLinkPageSize = 100
	maxLinkPageSize     = 1000
)

// linkChildren answers GET .../files/children and
// .../files/folder/{folder_id}/children with the paged envelope of spec
// 4.13.
func (s *server) linkChildren(r *http.Request) (any, error) {
	la, err := s.openLink(r)
	if err != nil {
		return nil, err
	}
	if !la.Link.Folder() {
		return nil, Describe(ErrNotFound, "a file share link has no children")
	}
	id := r.PathValue("folder_id")
	if id == "" {
		id = strconv.FormatUint(la.Link.FolderID, 10)
	}
	n, err := s.linkNode(r.Context(), la, id, true)
	if err != nil {
		return nil, err
	}
	q, err := query(r)
	if err != nil {
		return nil, err
	}
	num := func(name string, def, max int) (int, error) {
		v := q.Get(name)
		if v == "" {
			return def, nil
		}
		i, err := strconv.Atoi(v)
		if err != nil || i < 1 || i > max {
			return 0, Describe(ErrInvalidRequest, "%s must be a whole number from 1 to %d", name, max)
		}
		return i, nil
	}
	page, err := num("page", 1, 1<<30)
	if err != nil {
		return nil, err
	}
	size, err := num("page_size", defaultLinkPageSize, maxLinkPageSize)
	if err != nil {
		return nil, err
	}
	var less func(a, b vfs.Node) int
	byName := false // the listing's own order: read as it is stored
	switch q.Get("sort") {
	case "", "name":
		byName = true
		less = func(a, b vfs.Node) int { return strings.Compare(a.Name, b.Name) }
	case "size":
		less = func(a, b vfs.Node) int { return cmp.Or(cmp.Compare(a.Size, b.Size), strings.Compare(a.Name, b.Name)) }
	case "modified":
		less = func(a, b vfs.Node) int {
			return cmp.Or(a.Modified.Compare(b.Modified), strings.Compare(a.Name, b.Name))
		}
	default:
		return nil, Describe(ErrInvalidRequest, "sort must be name, size or modified")
	}
	switch q.Get("order") {
	case "", "asc":
	case "desc":
		asc := less
		less = func(a, b vfs.Node) int { return asc(b, a) }
		byName = false
	default:
		return nil, Describe(ErrInvalidRequest, "order must be asc or desc")
	}
	lo := (page - 1) * size
	kids, total, err := s.linkPage(r.Context(), la.Root.ID, n.ID, lo, lo+size, byName, less)
	if err != nil {
		return nil, err
	}
	return struct {
		Page     int   `json:"page"`
		PageSize int   `json:"page_size"`
		MaxPage  int   `json:"max_page"`
		Results  []any `json:"results"`
		Total    int   `json:"total"`
	}{page, size, max(1, (total+size-1)/size), encodeNodes(kids, permissions(la.Perms)), total}, nil
}

// maxSortedWindow is how far into a folder of more children than this a
// page sorted other than by name, ascending, may reach: such a page is
// chosen in one pass over the children keeping the best lo+page_size of
// them (about 300 bytes each), so a link to a folder of a million files
// costs its visitor at most this many in memory, never the folder. A
// variable for the tests.
var maxSortedWindow = 10_000

// linkPage returns the children of folder from lo to hi (exclusive) in
// less's order, and how many it has. byName says less is the listing's
// own order (by name, bytewise, ascending): then the page is read as
// stored, skipping lo children, at any depth.
func (s *server) linkPage(ctx context.Context, root, folder uint64, lo, hi int, byName bool, less func(a, b vfs.Node) int) ([]vfs.Node, int, error) {
	var page []vfs.Node
	count, seen := -1, 0
	// One snapshot for the count and the children: the count decides
	// how much a sorted page may keep, and the folder may grow between
	// two.
	err := s.fs.ListEach(ctx, root, folder, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
		count = int(l.Count)
		if !byName && hi > maxSortedWindow && (count < 0 || count > maxSortedWindow) {
			return Describe(ErrInvalidRequest, "a folder of more than %d items is paged by name (ascending) past its first %d items; sort by name", maxSortedWindow, maxSortedWindow)
		}
		h := &nodeHeap{less: less}
		for c, err := range l.Children() {
			if err != nil {
				return err
			}
			seen++
			switch {
			case byName:
				if seen > lo && seen <= hi {
					page = append(page, c.Node)
				}
				if seen >= hi && count >= 0 {
					return nil // the count is known: no need to read on
				}
			case len(h.nodes) < hi:
				heap.Push(h, c.Node)
			case less(c.Node, h.nodes[0]) < 0:
				h.nodes[0] = c.Node
				heap.Fix(h, 0)
			}
		}
		if !byName {
			slices.SortFunc(h.nodes, less)
			if lo < len(h.nodes) {
				page = h.nodes[lo:]
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	if count < 0 {
		count = seen
	}
	return page, count, nil
}

// nodeHeap keeps the least nodes under less seen so far, the greatest of
// them on top (container/heap), so that a node less than it replaces it.
type nodeHeap struct {
	nodes []vfs.Node
	less  func(a, b vfs.Node) int
}

func (h *nodeHeap) Len() int           { return len(h.nodes) }
func (h *nodeHeap) Less(i, j int) bool { return h.less(h.nodes[i], h.nodes[j]) > 0 }
func (h *nodeHeap) Swap(i, j int)      { h.nodes[i], h.nodes[j] = h.nodes[j], h.nodes[i] }
func (h *nodeHeap) Push(x any)         { h.nodes = append(h.nodes, x.(vfs.Node)) }
func (h *nodeHeap) Pop() any {
	n := h.nodes[len(h.nodes)-1]
	h.nodes = h.nodes[:len(h.nodes)-1]
	return n
}

// linkItemGet serves GET .../files/folder/{folder_id} and
// .../files/{file_id}/download|view (one pattern: ServeMux cannot tell
// them apart, as itemGet's).
func (s *server) linkItemGet(w http.ResponseWriter, r *http.Request) error {
	item, sub := r.PathValue("item"), r.PathValue("sub")
	switch {
	case item == "folder":
		la, err := s.openLink(r)
		if err != nil {
			return err
		}
		return s.writeLinkObject(w, r, la, sub, false)
	case sub == "download" || sub == "view":
		la, err := s.openLink(r)
		if err != nil {
			return err
		}
		n, err := s.linkNode(r.Context(), la, item, false)
		if err != nil {
			return err
		}
		return s.serveLinkFile(w, r, la, n, sub == "view")
	}
	return s.unknownPath(r)
}

// linkDownload serves GET .../sharelinks/{ref}/download and view: the
// shared file, or a zip of the shared folder (download only).
func (s *server) linkDownload(view bool) StreamHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		la, err := s.openLink(r)
		if err != nil {
			return err
		}
		if la.Link.Folder() {
			if view {
				return Describe(ErrNotFound, "a shared folder has no view; download it as a zip")
			}
			n, err := s.linkNode(r.Context(), la, strconv.FormatUint(la.Link.FolderID, 10), true)
			if err != nil {
				return err
			}
			return s.serveLinkZip(w, r, la, n)
		}
		n, err := s.linkNode(r.Context(), la, strconv.FormatUint(la.Link.FileID, 10), false)
		if err != nil {
			return err
		}
		return s.serveLinkFile(w, r, la, n, view)
	}
}

// linkFolderDownload serves GET .../files/folder/{folder_id}/download.
func (s *server) linkFolderDownload(w http.ResponseWriter, r *http.Request) error {
	la, err := s.openLink(r)
	if err != nil {
		return err
	}
	n, err := s.linkNode(r.Context(), la, r.PathValue("folder_id"), true)
	if err != nil {
		return err
	}
	return s.serveLinkZip(w, r, la, n)
}

// count reserves the download (or view) of r before anything is written,
// by share's one counting rule (share.CountRequest), for a file or a zip
// alike: etag is the entity tag of what is served (and modified its
// Last-Modified, zero for a zip), which decides whether a precondition
// or a Range or If-Range answer sends its first byte, and which content a
// download's credit of resumptions is for (a zip's narrowed by file_ids
// is another content than the whole folder's). Under a
// download_limit it returns w wrapped to see what the answer sends, and
// settle, deferred by the caller, gives back to the link what a cut
// answer did not send (share.Charge).
func (s *server) count(w http.ResponseWriter, r *http.Request, la share.LinkAccess, view bool, etag string, modified time.Time, size int64) (http.ResponseWriter, func(), error) {
	if !la.Perms.Has(share.Read) {
		return w, func() {}, &share.Refusal{Reason: "this share link does not allow reading the contents"}
	}
	sends, fromStart := httpserve.Sends(r, etag, modified)
	c, err := s.shares.CountRequest(r.Context(), la, view, sends, fromStart, etag, httpserve.RangeBytes(r, size), size)
	if err != nil {
		return w, func() {}, err
	}
	w, settle := httpserve.Charged(w, r, c, s.log, "link", la.Link.ID)
	return w, settle, nil
}

// serveLinkFile serves file n through link la (httpserve.ServeContent:
// ranges, conditionals), as an attachment or inline for view.
func (s *server) serveLinkFile(w http.ResponseWriter, r *http.Request, la share.LinkAccess, n vfs.Node, view bool) error {
	f, err := s.fs.Open(r.Context(), la.Root.ID, n.ID)
	if err != nil {
		return err
	}
	defer f.Close()
	w, settle, err := s.count(w, r, la, view, f.Node.ETag(), f.Node.Modified, f.Size())
	defer settle()
	if err != nil {
		return err
	}
	return httpserve.ServeContent(w, r, httpserve.Content{
		Name: f.Node.Name, ETag: f.Node.ETag(), Modified: f.Node.Modified, Body: f, Inline: view,
		Fail: func(w http.ResponseWriter, status int) { jsonStatusError(w, status) },
	})
}

// serveLinkZip serves a zip of folder n through link la, narrowed by
// file_ids and folder_ids (comma-separated ids), as downloadFolder does:
// exact size, ETag, Range; counted as a file is.
func (s *server) serveLinkZip(w http.ResponseWriter, r *http.Request, la share.LinkAccess, n vfs.Node) error {
	q, err := query(r)
	if err != nil {
		return err
	}
	var zo vfs.ZipOptions
	for _, p := range []struct {
		name string
		dst  *[]uint64
	}{{"file_ids", &zo.FileIDs}, {"folder_ids", &zo.FolderIDs}} {
		v := q.Get(p.name)
		if v == "" {
			continue
		}
		for part := range strings.SplitSeq(v, ",") {
			id, ok := parseID(strings.TrimSpace(part))
			if !ok {
				return Describe(ErrInvalidRequest, "%s must be ids separated by commas", p.name)
			}
			*p.dst = append(*p.dst, id)
		}
	}
	zo.Requester, zo.Group = la.Link.Requester(), la.Link.RequesterGroup()
	z, err := s.fs.Zip(r.Context(), la.Root.ID, n.ID, zo)
	if err != nil {
		return err
	}
	defer z.Close()
	w, settle, err := s.count(w, r, la, false, z.ETag(), time.Time{}, z.Size())
	defer settle()
	if err != nil {
		return err
	}
	name := n.Name
	if n.ID == la.Root.FolderID {
		name = la.Root.Name
	}
	return httpserve.ServeZip(w, r, name, z, s.zipFail(r, n.ID))
}

// linkWriteTarget opens the link for a write into the folder of the path
// (the shared folder when the path names none).
func (s *server) linkWriteTarget(r *http.Request) (share.LinkAccess, fsAccess, vfs.Node, error) {
	c, err := s.optionalCaller(r)
	if err != nil {
		return share.LinkAccess{}, fsAccess{}, vfs.Node{}, err
	}
	la, err := s.shares.OpenLink(r.Context(), r.PathValue("ref"), c)
	if err != nil {
		return la, fsAccess{}, vfs.Node{}, err
	}
	if !la.Link.Folder() {
		return la, fsAccess{}, vfs.Node{}, Describe(ErrNotFound, "a file share link has no folder to write into")
	}
	id := r.PathValue("folder_id")
	if id == "" {
		id = strconv.FormatUint(la.Link.FolderID, 10)
	}
	n, err := s.linkNode(r.Context(), la, id, true)
	if err != nil {
		return la, fsAccess{}, vfs.Node{}, err
	}
	a, err := s.shares.LinkWrite(r.Context(), la, c)
	if err != nil {
		return la, fsAccess{}, vfs.Node{}, err
	}
	return la, accessOf(a), n, nil
}

// linkCreateFolder answers POST .../sharelinks/{ref}/files/create_folder
// and .../files/folder/{folder_id}/create_folder (form field name).
func (s *server) linkCreateFolder(r *http.Request) (any, error) {
	_, a, n, err := s.linkWriteTarget(r)
	if err != nil {
		return nil, err
	}
	return s.createFolder(r, a, n.ID)
}

// linkUpload answers POST .../sharelinks/{ref}/files/upload and
// .../files/folder/{folder_id}/upload (berth's: the spec has no upload
// through a link), as the root's upload does; the creator is told when
// the link has upload_notify.
func (s *server) linkUpload(r *http.Request) (any, error) {
	la, a, n, err := s.linkWriteTarget(r)
	if err != nil {
		return nil, err
	}
	v, err := s.upload(r, a, n.ID)
	if err != nil {
		return nil, err
	}
	name := ""
	if fj, ok := v.(fileJSON); ok {
		name = fj.Path
	}
	s.shares.CountUpload(r.Context(), la, name)
	return v, nil
}
