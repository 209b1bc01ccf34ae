// Package web serves the share-link pages a browser opens: /s/<hash> shows
// a shared file with a download button, or a shared folder as a listing
// with navigation, paging and zip downloads, and previews of images, PDFs
// and text. Pages are server-rendered (html/template), need no JavaScript
// (one small embedded script adds drag-and-drop to upload forms), and
// load nothing but the one embedded style sheet. Downloads go through share's counters, the same
// the REST API's link downloads use, so times_downloaded and
// download_limit hold across both.
package web

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"berth/account"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"

	"github.com/prometheus/client_golang/prometheus"
)

//go:embed assets templates
var files embed.FS

// Prefix is where the pages live: share links' url fields are built as
// the public base URL, Prefix and the hash (rest's linkURL).
const Prefix = "/s/"

// PageSize is how many items a folder page lists.
const PageSize = 100

// hsts is the Strict-Transport-Security of every answer.
const hsts = "max-age=31536000"

// pagePolicy is the Content-Security-Policy of every page. The one script
// a page may run is the embedded drag-and-drop helper, inline and allowed
// by its hash alone (never 'self', under which a shared .js served by
// berth could be run by an injected tag); styles come only from the
// embedded sheet.
func pagePolicy(script []byte) string {
	sum := sha256.Sum256(script)
	return "default-src 'self'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}

// Options are what the pages need.
type Options struct {
	// Share opens links and counts their downloads and views.
	Share *share.Service
	// FS holds the shared files.
	FS *vfs.FS
	// Accounts signs in the creator or a subscriber of a login_required
	// link through the page's form. Nil: such links cannot be opened here.
	Accounts *account.Service
	// Logger gets failures that reach no page, and the request log
	// line of every request. Nil: slog.Default().
	Logger *slog.Logger
	// Registerer gets the request metrics (httpserve.Metrics, shared
	// with the other front ends on the same registry), by route
	// pattern: a link's hash never becomes a label. Nil: a registry of
	// the pages' own, which nobody reads.
	Registerer prometheus.Registerer
}

type handler struct {
	opts   Options
	csp    string      // pagePolicy of the embedded script
	script template.JS // assets/drop.js, inlined where a page has an upload form
	style  sheet       // assets/style.css
	tmpl   *template.Template
	mux    *http.ServeMux
	log    *slog.Logger
	// metrics counts the requests and the downloads aborted midway.
	metrics *httpserve.Metrics
}

// sheet is the pages' style sheet and the URL that names its version.
type sheet struct {
	css  []byte
	url  string // stylePath's, with the version of css
	etag string // the same version, as an entity tag
}

// stylePath is where the style sheet a page links lives, its version (a
// hash of the sheet) between "style." and ".css": a new sheet is a new
// URL, so a browser may keep each for a year without asking again
// (immutable), and a deploy reaches every page at once.
const stylePath = Prefix + "static/style."

// oldStylePath is the style sheet's URL of old, without a version, which
// pages rendered before the versioned URL still link: it answers the
// sheet of now, kept only briefly (oldStyleCache).
const oldStylePath = Prefix + "static/style.css"

// Cache-Control of the style sheet: a versioned URL never names other
// bytes; the old one does after each deploy that changes the sheet.
const (
	styleCache    = "public, max-age=31536000, immutable"
	oldStyleCache = "public, max-age=300"
)

// newSheet versions css by its SHA-256: 64 bits of it, which tell a
// sheet from the few before it.
func newSheet(css []byte) sheet {
	sum := sha256.Sum256(css)
	v := hex.EncodeToString(sum[:8])
	return sheet{css: css, url: stylePath + v + ".css", etag: `"` + v + `"`}
}

// New returns the handler of everything under /s/.
func New(o Options) http.Handler {
	script, err := files.ReadFile("assets/drop.js")
	if err != nil {
		panic(err) // embedded at build time
	}
	css, err := files.ReadFile("assets/style.css")
	if err != nil {
		panic(err) // embedded at build time
	}
	h := &handler{opts: o, log: cmp.Or(o.Logger, slog.Default()), csp: pagePolicy(script), script: template.JS(script), style: newSheet(css)}
	h.tmpl = template.Must(template.New("").Funcs(template.FuncMap{
		"size":  httpserve.FormatSize,
		"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"style": func() string { return h.style.url },
		"shown": shownName,
	}).ParseFS(files, "templates/*.html"))
	m := http.NewServeMux()
	m.HandleFunc("GET "+h.style.url, func(w http.ResponseWriter, r *http.Request) { h.serveStyle(w, r, styleCache) })
	m.HandleFunc("GET "+oldStylePath, func(w http.ResponseWriter, r *http.Request) { h.serveStyle(w, r, oldStyleCache) })
	m.HandleFunc("GET /s/{hash}", h.page)
	m.HandleFunc("GET /s/{hash}/download", h.download)
	m.HandleFunc("GET /s/{hash}/preview", h.preview)
	m.HandleFunc("GET /s/{hash}/file/{id}", h.fileDownload)
	m.HandleFunc("POST /s/{hash}/login", h.login)
	m.HandleFunc("POST /s/{hash}/logout", h.logout)
	m.HandleFunc("POST /s/{hash}/upload", h.upload)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.problem(w, r, http.StatusNotFound, "Not found", "There is nothing at this address.")
	})
	h.mux = m
	reg := o.Registerer
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h.metrics = httpserve.NewMetrics(reg)
	// Observed outside the method check too, so a refused method is
	// logged and counted (route "unmatched") like the API's.
	return h.metrics.Observe(h.log, httpserve.Pattern, h)
}

// ServeHTTP sets the security headers every answer carries, then routes.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Strict-Transport-Security", hsts)
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	// A link's address posted where a crawler reads it makes no page
	// of a search engine's: the names, previews and files of a share
	// are for whoever is given the link, not for whoever searches.
	hd.Set("X-Robots-Tag", "noindex, nofollow")
	if r.Method != http.MethodGet && r.Method != http.MethodHead && !(r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/login") || strings.HasSuffix(r.URL.Path, "/logout") || strings.HasSuffix(r.URL.Path, "/upload"))) {
		hd.Set("Allow", "GET, HEAD")
		h.problem(w, r, http.StatusMethodNotAllowed, "Method not allowed", "These pages are only read.")
		return
	}
	h.mux.ServeHTTP(w, r)
}

// serveStyle answers r with the style sheet, kept as cache says, with
// its version as the ETag: a browser that revalidates the old URL gets
// 304 until a deploy changes the sheet. The Range a sheet is asked in
// (none a browser sends) is read as every download's
// (httpserve.ServableRange).
func (h *handler) serveStyle(w http.ResponseWriter, r *http.Request, cache string) {
	hd := w.Header()
	hd.Set("Content-Type", "text/css; charset=utf-8")
	hd.Set("Cache-Control", cache)
	hd.Set("Etag", h.style.etag)
	httpserve.ServableRange(r)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(h.style.css))
}

// open opens the link of r's hash, as the person signed in through the
// page's form (login_required links) or as no one. A link id (guessable)
// is never accepted here.
func (h *handler) open(r *http.Request) (share.LinkAccess, error) {
	ref := r.PathValue("hash")
	if len(ref) < 16 {
		return share.LinkAccess{}, share.ErrNotFound
	}
	return h.opts.Share.OpenLink(r.Context(), ref, h.caller(r))
}

// fail writes the page for err.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	h.failAfter(w, r, err, "")
}

// failAfter is fail with after added to the page's message (what went
// before the failure: the files of an upload already stored).
func (h *handler) failAfter(w http.ResponseWriter, r *http.Request, err error, after string) {
	if errors.Is(err, share.ErrLoginRequired) {
		h.loginPage(w, r, http.StatusUnauthorized, "This share link is only for the people it was shared with. Sign in to open it.")
		return
	}
	status, title, msg := pageProblem(err)
	if status == 0 {
		if r.Context().Err() == nil {
			// The route, not the path: the path holds the link hash,
			// which opens the link to whoever reads the log.
			h.log.Error("share-link page", "route", httpserve.Pattern(r), "error", err)
		}
		status, title, msg = http.StatusInternalServerError, "Something went wrong", "The page could not be shown. Try again later."
	}
	h.problem(w, r, status, title, msg+after)
}

// pageProblem is the pages' one table from an error to the status, title
// and message of the page that answers it; status 0 for an error it does
// not know (a failure of berth's, not of the request).
func pageProblem(err error) (status int, title, msg string) {
	var ref *share.Refusal
	switch {
	case errors.Is(err, share.ErrNotFound), errors.Is(err, errNoItem),
		// Gone between the page's check and the zip's listing.
		errors.Is(err, vfs.ErrNotExist), errors.Is(err, vfs.ErrNotDir):
		return http.StatusNotFound, "Link not found", "This share link does not exist, or what it shared is gone."
	case errors.Is(err, share.ErrLinkExpired):
		return http.StatusGone, "Link expired", "This share link has expired. Ask the person who shared it for a new one."
	case errors.Is(err, share.ErrDownloadLimit):
		return http.StatusForbidden, "Download limit reached", "This share link has been downloaded as many times as its owner allowed."
	case errors.As(err, &ref):
		return http.StatusForbidden, "Not allowed", ref.Reason
	case errors.Is(err, errBadQuery):
		return http.StatusBadRequest, "Bad address", err.Error()
	case errors.Is(err, vfs.ErrBusy):
		return http.StatusServiceUnavailable, "Busy", "The server is busy. Try again in a moment."
	case errors.Is(err, vfs.ErrZipTooLarge):
		return http.StatusBadRequest, "Too large for one zip", "This folder holds more than one zip can. Download its folders one by one."
	// Uploads through a link.
	case errors.Is(err, vfs.ErrChanged), errors.Is(err, vfs.ErrNameConflict):
		return http.StatusConflict, "Name taken", "Something of that name is already here; rename the file and upload it again."
	case errors.Is(err, vfs.ErrInvalidName), errors.Is(err, vfs.ErrNameTooLong):
		return http.StatusBadRequest, "Bad file name", "That file name cannot be stored here."
	case errors.Is(err, vfs.ErrExtensionExcluded), errors.Is(err, vfs.ErrFileTooLarge):
		return http.StatusForbidden, "Not allowed", "The owner's policy does not allow this file (its type or its size)."
	case errors.Is(err, vfs.ErrQuotaExceeded), errors.Is(err, vfs.ErrNoSpace):
		return http.StatusInsufficientStorage, "No space", "There is no room left for this file."
	case errors.Is(err, vfs.ErrLocked):
		return http.StatusLocked, "Locked", "This folder is locked."
	}
	return 0, "", ""
}

func (h *handler) problem(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	h.render(w, r, status, "problem.html", struct{ Title, Message string }{title, msg})
}

func (h *handler) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	hd := w.Header()
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-store")
	var sb strings.Builder
	if err := h.tmpl.ExecuteTemplate(&sb, name, data); err != nil {
		h.log.Error("share-link page template", "template", name, "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	hd.Set("Content-Length", strconv.Itoa(sb.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		io.WriteString(w, sb.String())
	}
}

var (
	errNoItem   = errors.New("web: no such item in this share link")
	errBadQuery = errors.New("web: bad query")
)

// node returns item id of la's root when it is the shared file or inside
// the shared folder; chain is the folders from the shared one down to it.
func (h *handler) node(ctx context.Context, la share.LinkAccess, id uint64, dir bool) (vfs.Node, []vfs.Node, error) {
	n, err := h.opts.FS.Stat(ctx, la.Root.ID, id)
	if err != nil || n.Dir != dir || n.Deleted {
		return vfs.Node{}, nil, errNoItem
	}
	if !la.Link.Folder() {
		if n.ID != la.Link.FileID {
			return vfs.Node{}, nil, errNoItem
		}
		return n, nil, nil
	}
	chain := []vfs.Node{n}
	for p := n; p.ID != la.Link.FolderID; {
		if p.ParentID == 0 {
			return vfs.Node{}, nil, errNoItem
		}
		if p, err = h.opts.FS.Stat(ctx, la.Root.ID, p.ParentID); err != nil || p.Deleted {
			return vfs.Node{}, nil, errNoItem
		}
		chain = append(chain, p)
	}
	slices.Reverse(chain)
	return n, chain, nil
}

// folder returns the folder a request names (?folder=id), or the shared
// one, when it is inside la's shared folder; chain is the folders from
// the shared one down to it.
func (h *handler) folder(r *http.Request, la share.LinkAccess) (vfs.Node, []vfs.Node, error) {
	id := la.Link.FolderID
	if v := r.URL.Query().Get("folder"); v != "" {
		var err error
		if id, err = strconv.ParseUint(v, 10, 64); err != nil || id == 0 {
			return vfs.Node{}, nil, errNoItem
		}
	}
	return h.node(r.Context(), la, id, true)
}

type crumb struct{ Name, Href string }

type item struct {
	Name     string
	Dir      bool
	Size     int64
	Modified time.Time
	Href     string
}

func (h *handler) page(w http.ResponseWriter, r *http.Request) {
	la, err := h.open(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	base := Prefix + url.PathEscape(la.Link.Hash)
	// A view is the link's own page opened; navigating and paging in it
	// are not counted again.
	if r.Method == http.MethodGet && len(q) == 0 {
		if err := h.opts.Share.CountView(r.Context(), la); err != nil && !errors.Is(err, share.ErrNotFound) {
			h.log.Warn("share-link view count", "link", la.Link.ID, "error", err)
		}
	}
	canRead := la.Perms.Has(share.Read)
	if !la.Link.Folder() {
		n, _, err := h.node(r.Context(), la, la.Link.FileID, false)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		data := map[string]any{
			"Title": n.Name, "File": n, "CanRead": canRead, "Download": base + "/download", "Expires": la.Link.Expires,
		}
		if kind := previewKind(n.Name); kind != "" && mayPreview(la) {
			data["Preview"], data["PreviewURL"] = kind, base+"/preview"
			if kind == previewText {
				text, more, ok := h.previewText(r, la, n)
				if !ok {
					delete(data, "Preview")
				}
				data["Text"], data["TextMore"], data["TextMax"] = text, more, int64(PreviewTextMax)
			}
		}
		h.signOutForm(w, r, base, data)
		h.render(w, r, http.StatusOK, "file.html", data)
		return
	}
	n, chain, err := h.folder(r, la)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name := func(f vfs.Node) string {
		if f.ID == la.Root.FolderID || f.Name == "" {
			return la.Root.Name
		}
		return f.Name
	}
	// folderURL is the page of folder id: from its start, at page (a
	// small folder's), or after the name after (a large folder's).
	folderURL := func(id uint64, page int, after string) string {
		v := url.Values{}
		if id != la.Link.FolderID {
			v.Set("folder", strconv.FormatUint(id, 10))
		}
		if page > 1 {
			v.Set("page", strconv.Itoa(page))
		}
		if after != "" {
			v.Set("after", after)
		}
		if len(v) == 0 {
			return base
		}
		return base + "?" + v.Encode()
	}
	var crumbs []crumb
	for i, c := range chain {
		cr := crumb{Name: name(c)}
		if i < len(chain)-1 {
			cr.Href = folderURL(c.ID, 1, "")
		}
		crumbs = append(crumbs, cr)
	}
	kids, nav, err := h.listFolder(r, la, n.ID)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	items := make([]item, 0, len(kids))
	for _, k := range kids {
		it := item{Name: k.Name, Dir: k.Dir, Size: k.Size, Modified: k.Modified}
		if k.Dir {
			it.Href = folderURL(k.ID, 1, "")
		} else {
			it.Href = base + "/file/" + strconv.FormatUint(k.ID, 10)
		}
		items = append(items, it)
	}
	zip, up := base+"/download", base+"/upload"
	if n.ID != la.Link.FolderID {
		zip += "?folder=" + strconv.FormatUint(n.ID, 10)
		up += "?folder=" + strconv.FormatUint(n.ID, 10)
	}
	data := map[string]any{
		"Title": name(n), "Folder": name(n), "Crumbs": crumbs, "Items": items, "CanRead": canRead,
		"Zip": zip, "Upload": "", "Page": nav.page, "MaxPage": nav.maxPage, "Prev": "", "Next": "", "First": "",
	}
	if h.canWrite(r, la) {
		data["Upload"], data["CSRF"], data["Script"] = up, csrfToken(w, r), h.script
	}
	h.signOutForm(w, r, base, data)
	switch {
	case nav.page > 1 && nav.maxPage > 1:
		data["Prev"] = folderURL(n.ID, nav.page-1, "")
	case nav.page > 1 || nav.after != "":
		data["First"] = folderURL(n.ID, 1, "")
	}
	switch {
	case nav.page < nav.maxPage:
		data["Next"] = folderURL(n.ID, nav.page+1, "")
	case nav.next != "":
		data["Next"] = folderURL(n.ID, 1, nav.next)
	}
	h.render(w, r, http.StatusOK, "folder.html", data)
}

// smallFolder is the most items a folder page sorts: a folder of up to
// this many is read whole (about 1 MiB), listed folders first and by
// name regardless of case, in numbered pages. A larger one is listed as
// it is stored, by name bytewise, a page at a time from the name a Next
// link carries, so a visitor of a link to a folder of a million files
// costs a page's memory and reading (a numbered page, at most a small
// folder's reading), never the folder's. A variable for
// the tests, which list large folders of a few files.
var smallFolder = int64(5000)

// folderNav is where a folder page stands: page of maxPage for a small
// folder; for a large one after, the name it lists after ("" from the
// start), and next, the last name it lists when more follow.
type folderNav struct {
	page, maxPage int
	after, next   string
}

// listFolder reads the page of folder that r's query names (?page=N of
// a small folder, ?after=NAME of a large one).
func (h *handler) listFolder(r *http.Request, la share.LinkAccess, folder uint64) ([]vfs.Node, folderNav, error) {
	q := r.URL.Query()
	nav := folderNav{page: 1, maxPage: 1, after: q.Get("after")}
	if v := q.Get("page"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			return nil, nav, fmt.Errorf("%w: page must be a whole number from 1", errBadQuery)
		}
		nav.page = p
	}
	if nav.after != "" {
		if err := vfs.ValidateName(nav.after); err != nil {
			return nil, nav, fmt.Errorf("%w: after must be a name", errBadQuery)
		}
		if nav.page > 1 {
			return nil, nav, fmt.Errorf("%w: page and after do not go together", errBadQuery)
		}
	}
	count := int64(-1)
	if nav.after == "" {
		err := h.opts.FS.ListEach(r.Context(), la.Root.ID, folder, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
			count = l.Count
			return nil
		})
		if err != nil {
			return nil, nav, err
		}
	}
	if count >= 0 && count <= smallFolder {
		kids, _, err := h.opts.FS.List(r.Context(), la.Root.ID, folder)
		if err != nil {
			return nil, nav, err
		}
		// Folders first, then by name, as a file manager lists them.
		slices.SortFunc(kids, func(a, b vfs.Node) int {
			if a.Dir != b.Dir {
				if a.Dir {
					return -1
				}
				return 1
			}
			return cmp.Or(strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)), strings.Compare(a.Name, b.Name))
		})
		nav.maxPage = max(1, (len(kids)+PageSize-1)/PageSize)
		if nav.page > nav.maxPage {
			return nil, nav, fmt.Errorf("%w: this folder has %d pages", errBadQuery, nav.maxPage)
		}
		return kids[(nav.page-1)*PageSize : min(nav.page*PageSize, len(kids))], nav, nil
	}
	// By name from after; a numbered page (a link followed while the
	// folder was small) skips the pages before it, reading them but
	// holding one page. Only a page a small folder had: a greater number
	// was followed from no page, and would have a visitor's request read
	// the folder through.
	if maxSmall := int((smallFolder + PageSize - 1) / PageSize); nav.page > max(1, maxSmall) {
		return nil, nav, fmt.Errorf("%w: this folder is listed by name from a Next link past page %d", errBadQuery, max(1, maxSmall))
	}
	skip := (nav.page - 1) * PageSize
	kids := make([]vfs.Node, 0, PageSize)
	err := h.opts.FS.ListEach(r.Context(), la.Root.ID, folder, vfs.ListOptions{After: nav.after, Limit: skip + PageSize}, func(l *vfs.Listing) error {
		for c, err := range l.Children() {
			if err != nil {
				return err
			}
			if skip > 0 {
				skip--
				continue
			}
			kids = append(kids, c.Node)
		}
		nav.next = l.Next()
		return nil
	})
	if err == nil && nav.page > 1 && len(kids) == 0 {
		return nil, nav, fmt.Errorf("%w: this folder has fewer pages", errBadQuery)
	}
	return kids, nav, err
}

// signOutForm adds to a page's data the sign-out form (SignOut, its
// action, and CSRF) when r has the link's session.
func (h *handler) signOutForm(w http.ResponseWriter, r *http.Request, base string, data map[string]any) {
	if h.caller(r) != nil {
		data["SignOut"], data["CSRF"] = base+"/logout", csrfToken(w, r)
	}
}

// download serves /s/<hash>/download: the shared file, or a zip of the
// shared folder (or of the subfolder ?folder= names).
func (h *handler) download(w http.ResponseWriter, r *http.Request) {
	la, err := h.open(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if !la.Link.Folder() {
		n, _, err := h.node(r.Context(), la, la.Link.FileID, false)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		h.serveFile(w, r, la, n)
		return
	}
	n, _, err := h.folder(r, la)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.serveZip(w, r, la, n)
}

// fileDownload serves /s/<hash>/file/<id>: one file of a shared folder.
func (h *handler) fileDownload(w http.ResponseWriter, r *http.Request) {
	la, err := h.open(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil || !la.Link.Folder() {
		h.fail(w, r, errNoItem)
		return
	}
	n, _, err := h.node(r.Context(), la, id, false)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.serveFile(w, r, la, n)
}

// count reserves the download of r before anything is written, by the
// counting rule the REST API's link downloads use (share.CountRequest),
// for a file or a zip alike: etag is the entity tag of what is served
// (modified its Last-Modified, zero for a zip), which also keys a
// download's credit of resumptions to that content (another file of the
// folder, or another folder's zip, has none).
// Under a download_limit it returns w wrapped to see what the answer
// sends, and settle, deferred by the caller (abort panics), gives back
// to the link what a cut answer did not send (share.Charge).
func (h *handler) count(w http.ResponseWriter, r *http.Request, la share.LinkAccess, etag string, modified time.Time, size int64) (http.ResponseWriter, func(), error) {
	if !la.Perms.Has(share.Read) {
		return w, func() {}, &share.Refusal{Reason: "This share link lets you see what it shares, but not download it."}
	}
	sends, fromStart := httpserve.Sends(r, etag, modified)
	c, err := h.opts.Share.CountRequest(r.Context(), la, false, sends, fromStart, etag, httpserve.RangeBytes(r, size), size)
	if err != nil {
		return w, func() {}, err
	}
	w, settle := httpserve.Charged(w, r, c, h.log, "link", la.Link.ID)
	return w, settle, nil
}

func (h *handler) serveFile(w http.ResponseWriter, r *http.Request, la share.LinkAccess, n vfs.Node) {
	f, err := h.opts.FS.Open(r.Context(), la.Root.ID, n.ID)
	if err != nil {
		h.fail(w, r, errNoItem)
		return
	}
	defer f.Close()
	w, settle, err := h.count(w, r, la, f.Node.ETag(), f.Node.Modified, f.Size())
	defer settle()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	err = httpserve.ServeContent(w, r, httpserve.Content{
		Name: f.Node.Name, ETag: f.Node.ETag(), Modified: f.Node.Modified, Body: f,
	})
	if err != nil {
		h.abort(r, err)
	}
}

// serveZip serves the zip of folder n (vfs.Zip): exact size, ETag and
// Range, so a browser resumes a broken download; counted as a file is.
func (h *handler) serveZip(w http.ResponseWriter, r *http.Request, la share.LinkAccess, n vfs.Node) {
	z, err := h.opts.FS.Zip(r.Context(), la.Root.ID, n.ID, vfs.ZipOptions{Requester: la.Link.Requester(), Group: la.Link.RequesterGroup()})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	defer z.Close()
	w, settle, err := h.count(w, r, la, z.ETag(), time.Time{}, z.Size())
	defer settle()
	if err != nil {
		h.fail(w, r, err)
		return
	}
	name := n.Name
	if n.ID == la.Root.FolderID || name == "" {
		name = la.Root.Name
	}
	if err := httpserve.ServeZip(w, r, name, z, nil); err != nil {
		h.abort(r, err)
	}
}

// abort ends a download that failed after its status was sent: the
// connection is cut (http.ErrAbortHandler), so the client sees a broken
// transfer rather than a short file that looks whole.
func (h *handler) abort(r *http.Request, err error) {
	if !httpserve.ClientGone(r, err) {
		// The route, not the path: the path holds the link's hash,
		// which opens the link to whoever reads the log.
		h.log.Warn("share-link download aborted", "route", httpserve.Pattern(r), "error", err)
	}
	h.metrics.AbortedStreams.Inc()
	panic(http.ErrAbortHandler)
}

// shownName is a name as the pages show it: each bidirectional
// embedding, override or isolate (U+202A to U+202E, U+2066 to U+2069)
// is shown as U+FFFD. Those characters reorder the text after them, so
// "photo\u202Egpj.exe" read "photoexe.jpg" on the page, and a file that
// one who may upload through a link named so passed for another type
// than it downloads as. Names are kept as they are everywhere else (a
// download's Content-Disposition, the API); the marks (U+200E, U+200F,
// U+061C), which names in right-to-left scripts need and which reorder
// nothing but the neutral characters around them, are kept here too.
func shownName(name string) string {
	if !strings.ContainsFunc(name, bidiControl) {
		return name
	}
	return strings.Map(func(r rune) rune {
		if bidiControl(r) {
			return utf8.RuneError
		}
		return r
	}, name)
}

// bidiControl reports whether r is a bidirectional embedding, override,
// pop or isolate (Unicode's explicit formatting characters, less the
// marks).
func bidiControl(r rune) bool {
	return (r >= '\u202a' && r <= '\u202e') || (r >= '\u2066' && r <= '\u2069')
}
