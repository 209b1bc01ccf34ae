// Package webdav serves vfs as a WebDAV share (RFC 4918 class 1 and 2)
// under a URL prefix. golang.org/x/net/webdav answers OPTIONS, GET, HEAD
// and POST through a FileSystem and a LockSystem over vfs; the methods
// where that library falls short of the RFC or of berth's policy (PUT,
// DELETE, MKCOL, COPY, MOVE, LOCK, UNLOCK, PROPFIND, PROPPATCH) are
// handled here first, over the same vfs, so both paths see one store and
// one lock table.
package webdav

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// Options configure the WebDAV handler.
type Options struct {
	// Logger receives request failures; nil discards them.
	Logger *slog.Logger
	// FS is the file system served.
	FS *vfs.FS
	// Accounts authenticates callers and holds their organization's policy.
	Accounts *account.Service
	// Share says which roots a caller reaches and on what terms. Nil
	// means share.New over FS.
	Share *share.Service
	// Prefix is the URL path the handler is mounted at, without a trailing
	// slash; "" means "/webdav".
	Prefix string
	// InfiniteDepth allows PROPFIND with Depth: infinity; when false such a
	// request gets 403 with the RFC's propfind-finite-depth condition.
	InfiniteDepth bool
	// CredentialTTL is how long a successful Basic login is remembered (as a
	// hash) after its last use, so that the next requests skip argon2; 0
	// means 90 seconds.
	CredentialTTL time.Duration
	// CredentialMaxAge bounds how long use keeps a remembered login after
	// its password was last checked in full; 0 means 15 minutes, and
	// less than CredentialTTL means CredentialTTL. A login from a
	// directory server (LDAP) is kept CredentialTTL from its check, used
	// or not: only that check asks the directory.
	CredentialMaxAge time.Duration
	// Registerer receives the HTTP metrics. Nil keeps them unregistered.
	Registerer prometheus.Registerer
	// MaxXMLBodies bounds the XML bodies (PROPFIND, PROPPATCH, LOCK) one
	// person's requests may be sending at once (xmlbodies.go); past it
	// 503. 0 means DefaultMaxXMLBodies, less than 0 no bound.
	MaxXMLBodies int
}

// Handler is the WebDAV front end; build it with New.
type Handler struct {
	opts    Options
	log     *slog.Logger
	creds   *credCache
	mounts  *mountCache
	metrics *httpserve.Metrics
	// observed is serve inside the request log line and metrics.
	observed http.Handler
	// plainMoveDecided, when set (by tests: PlainMoveDecided), runs each
	// time a request works out plainMove's answer.
	plainMoveDecided func()
	// copiedForMove, when set (by tests: CopiedForMove), runs in a MOVE
	// into another root between the copy and the source's delete.
	copiedForMove func()
	// xml counts the XML bodies each person's requests are reading.
	xml *xmlReaders
}

// New returns the WebDAV handler for o.
func New(o Options) *Handler {
	if o.Prefix == "" {
		o.Prefix = "/webdav"
	}
	o.Prefix = strings.TrimSuffix(o.Prefix, "/")
	if o.CredentialTTL == 0 {
		o.CredentialTTL = 90 * time.Second
	}
	if o.CredentialMaxAge == 0 {
		o.CredentialMaxAge = 15 * time.Minute
	}
	if o.Share == nil {
		o.Share = share.New(share.Options{FS: o.FS, Accounts: o.Accounts})
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: o, log: log, creds: newCredCache(o.CredentialTTL, o.CredentialMaxAge, 4096), metrics: httpserve.NewMetrics(o.Registerer),
		mounts: vfs.NewCache[account.Principal, sessionMounts](maxCachedSessions)}
	maxXML := o.MaxXMLBodies
	if maxXML == 0 {
		maxXML = DefaultMaxXMLBodies
	}
	h.xml = newXMLReaders(maxXML)
	h.observed = h.metrics.Observe(log, httpserve.Fixed(route), http.HandlerFunc(h.serve))
	return h
}

// ServeHTTP serves one request and logs it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.observed.ServeHTTP(w, r)
}

// serve checks the path, authenticates, applies the policy gate and
// dispatches the method.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	p, err := h.davPath(r.URL.EscapedPath())
	if err != nil {
		h.finish(w, r, err)
		return
	}
	// Before the caller is read: what newSession keeps is as of no
	// earlier than this.
	gen := h.opts.FS.MetaGeneration()
	c, err := h.authenticate(r)
	if err != nil {
		h.finish(w, r, err)
		return
	}
	if !c.Organization.Policy.WebDAVEnabled {
		h.finish(w, r, errDisabled)
		return
	}
	s, err := h.newSession(r.Context(), gen, c, p)
	if err != nil {
		h.finish(w, r, err)
		return
	}
	// The caller's role is asked once, here: fileAsCollection's answer
	// comes before its refusal, and a DELETE that fileAsCollection
	// leaves to the method is one the role allows.
	var refused error
	if need, ok := changes[r.Method]; ok {
		refused = s.permitted(p, need)
	}
	if err := s.fileAsCollection(r, refused == nil); err != nil {
		h.finish(w, r, err)
		return
	}
	if refused != nil {
		h.finish(w, r, refused)
		return
	}
	body := r.Body
	switch r.Method {
	case http.MethodPut:
		err = s.put(w, r)
	case http.MethodDelete:
		err = s.delete(w, r)
	case "MKCOL":
		err = s.mkcol(w, r)
	case "COPY", "MOVE":
		err = s.copyMove(w, r)
	case "LOCK":
		err = s.lock(w, r)
	case "UNLOCK":
		err = s.unlock(w, r)
	case "PROPFIND":
		err = s.propfind(w, r)
	case "PROPPATCH":
		err = s.proppatch(w, r)
	default:
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPost {
			// The library reads no If header; RFC 4918 10.4.1 fails
			// any request whose If header does not hold.
			if err := s.checkIf(r, p); err != nil {
				h.finish(w, r, err)
				return
			}
			if h.sendWhole(w, r, s, p) {
				return
			}
			// The library answers a POST as a GET; a cross-site
			// form can send one, so it gets the same type.
			h.get(&goneWriter{ResponseWriter: w, r: r}, r, p, h.library(s))
			return
		}
		lib := h.library(s)
		lib.ServeHTTP(&goneWriter{ResponseWriter: w, r: r}, r)
		return
	}
	if stall, ok := body.(interface{ Stalled() error }); ok && err != nil && stall.Stalled() != nil {
		// Whatever the method made of the failed read (bad XML, a
		// cancelled context: net/http cancels it on any read error),
		// the cause is the stall.
		err = errStalled
	}
	h.finish(w, r, err)
}

// library is x/net/webdav's handler over session s, for the methods it
// serves.
func (h *Handler) library(s *session) *xwebdav.Handler {
	return &xwebdav.Handler{
		Prefix:     h.opts.Prefix,
		FileSystem: &fileSystem{s: s},
		LockSystem: &lockSystem{s: s},
	}
}

// maxPathDepth bounds the segments of a path below the prefix (the root's
// name is the first). A request reads its path, and the lock searches it
// makes read theirs, from the top, so the work grows with the depth; a
// URL within the server's 1 MiB header limit could otherwise name 500,000
// levels. macOS's PATH_MAX
// (1,024 bytes) allows at most 512, Windows's MAX_PATH 130.
const maxPathDepth = 1024

// errPathTooDeep is a path of more than maxPathDepth segments.
var errPathTooDeep = fmt.Errorf("a path may have at most %d segments", maxPathDepth)

// davPath turns the escaped request path into a clean path below the
// prefix ("/", "/root/a/b"). An escaped slash (%2F) or a "." or ".."
// segment is refused rather than reinterpreted: a client that sends them
// means something berth would otherwise silently change. A path deeper
// than maxPathDepth is errPathTooDeep.
func (h *Handler) davPath(escaped string) (string, error) {
	rest, ok := strings.CutPrefix(escaped, h.opts.Prefix)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", describe(errBadPath, "path %q is outside %s/", escaped, h.opts.Prefix)
	}
	if p, ok := plainPath(rest); ok {
		return p, nil
	}
	return cleanPath(rest)
}

// plainPath is davPath's answer for rest, the path below the prefix, when
// it has nothing to unescape or refuse: no '%', no empty, "." or ".."
// segment but for one trailing slash, and no more than maxPathDepth
// segments. Most requests' paths are such, and it is rest itself then
// (or a part of it), where cleanPath builds a new string from its parts.
func plainPath(rest string) (string, bool) {
	rest = strings.TrimSuffix(rest, "/")
	if rest == "" {
		return "/", true
	}
	if strings.IndexByte(rest, '%') >= 0 {
		return "", false
	}
	left, depth := rest[1:], 0
	for more := true; more; {
		var seg string
		seg, left, more = strings.Cut(left, "/")
		if depth++; seg == "" || seg == "." || seg == ".." || depth > maxPathDepth {
			return "", false
		}
	}
	return rest, true
}

// cleanPath is davPath's answer for rest, the path below the prefix, in
// full.
func cleanPath(rest string) (string, error) {
	var segs []string
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" {
			continue
		}
		if len(segs) == maxPathDepth {
			return "", errPathTooDeep
		}
		if strings.Contains(strings.ToLower(seg), "%2f") || strings.Contains(strings.ToLower(seg), "%5c") {
			return "", describe(errBadPath, "a path segment may not contain an escaped slash or backslash")
		}
		name, err := url.PathUnescape(seg)
		if err != nil {
			return "", describe(errBadPath, "invalid escape in path: %v", err)
		}
		if name == "." || name == ".." {
			return "", describe(errBadPath, `a path may not contain "." or ".." segments`)
		}
		segs = append(segs, name)
	}
	return "/" + strings.Join(segs, "/"), nil
}

// href is the escaped URL path of the clean dav path p; collections end in "/".
func (h *Handler) href(p string, dir bool) string {
	u := h.opts.Prefix + p
	if dir && !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return (&url.URL{Path: u}).EscapedPath()
}

// urlPath escapes a path the way net/url does.
type urlPath struct{ p string }

func (u *urlPath) escaped() string { return (&url.URL{Path: "/" + u.p}).EscapedPath() }

// changes are the methods that change what the request path names, and
// the permission each needs in its root (COPY's and MOVE's destination is
// checked in copyMove).
var changes = map[string]share.Perm{
	http.MethodPut:    share.Write,
	http.MethodDelete: share.Delete,
	"MKCOL":           share.Write,
	"MOVE":            share.Write | share.Delete,
	"PROPPATCH":       share.Write,
	"LOCK":            share.Write,
	"UNLOCK":          share.Write,
}
