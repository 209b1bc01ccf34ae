// Package webdav serves vfs as a WebDAV share (RFC 4918 class 1 and 2)
// under a URL prefix. golang.org/x/net/webdav answers OPTIONS, GET, HEAD
// and POST through a FileSystem and a LockSystem over vfs; the methods
// where that library falls short of the RFC or of berth's policy (PUT,
// DELETE, MKCOL, COPY, MOVE, LOCK, UNLOCK, PROPFIND, PROPPATCH) are
// handled here first, over the same vfs, so both paths see one store and
// one lock table.
package webdav

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
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
	// hash) so that the next requests skip argon2; 0 means 90 seconds.
	CredentialTTL time.Duration
	// Registerer receives the HTTP metrics. Nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Handler is the WebDAV front end; build it with New.
type Handler struct {
	opts    Options
	log     *slog.Logger
	creds   *credCache
	metrics *metrics
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
	if o.Share == nil {
		o.Share = share.New(share.Options{FS: o.FS})
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{opts: o, log: log, creds: newCredCache(o.CredentialTTL, 4096), metrics: newMetrics(o.Registerer)}
}

// ServeHTTP serves one request and logs it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.observe(w, r, h.serve)
}

// serve checks the path, authenticates, applies the policy gate and
// dispatches the method.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	p, err := h.davPath(r.URL.EscapedPath())
	if errors.Is(err, errPathTooDeep) {
		plain(w, http.StatusRequestURITooLong, err.Error())
		return
	}
	if err != nil {
		plain(w, http.StatusBadRequest, err.Error())
		return
	}
	c, err := h.authenticate(r)
	if err != nil {
		h.authFailed(w, r, err)
		return
	}
	if !c.Organization.Policy.WebDAVEnabled {
		plain(w, http.StatusForbidden, "WebDAV access is disabled by your organization's policy; use the web or sync clients instead.")
		return
	}
	s, err := h.newSession(r.Context(), c, p)
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	if st, err := s.fileAsCollection(r); st != 0 {
		h.finish(w, r, st, err)
		return
	}
	body := r.Body
	var status int
	switch r.Method {
	case http.MethodPut:
		status, err = s.put(w, r)
	case http.MethodDelete:
		status, err = s.delete(w, r)
	case "MKCOL":
		status, err = s.mkcol(w, r)
	case "COPY", "MOVE":
		status, err = s.copyMove(w, r)
	case "LOCK":
		status, err = s.lock(w, r)
	case "UNLOCK":
		status, err = s.unlock(w, r)
	case "PROPFIND":
		status, err = s.propfind(w, r)
	case "PROPPATCH":
		status, err = s.proppatch(w, r)
	default:
		lib := &xwebdav.Handler{
			Prefix:     h.opts.Prefix,
			FileSystem: &fileSystem{s: s},
			LockSystem: &lockSystem{s: s},
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodPost {
			// The library reads no If header; RFC 4918 10.4.1 fails
			// any request whose If header does not hold.
			if st, err := s.checkIf(r, p); st != 0 {
				h.finish(w, r, st, err)
				return
			}
			// The library answers a POST as a GET; a cross-site
			// form can send one, so it gets the same type.
			w = newGetWriter(w, r, p)
		}
		lib.ServeHTTP(w, r)
		return
	}
	if stall, ok := body.(interface{ Stalled() error }); ok && status != 0 && stall.Stalled() != nil {
		// Whatever the method made of the failed read (bad XML, a
		// cancelled context: net/http cancels it on any read error),
		// the cause is the stall.
		status, err = describe(http.StatusRequestTimeout, "the request body stopped arriving; nothing was stored")
	}
	h.finish(w, r, status, err)
}

// finish writes an error status (when status is not 0) and logs what is
// not the client's doing.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, status int, err error) {
	if status == 0 {
		return
	}
	if r.Context().Err() != nil && status != http.StatusRequestTimeout {
		// The client went away; nobody reads a body. A stalled body
		// cancels the context too, but that client is still there.
		return
	}
	if status >= 500 && status != http.StatusInsufficientStorage {
		h.log.Error("webdav request failed", "method", r.Method, "path", r.URL.Path, "status", status, "error", err)
		plain(w, status, http.StatusText(status))
		return
	}
	msg := http.StatusText(status)
	var d describedErr
	if errors.As(err, &d) {
		msg = d.msg
	}
	plain(w, status, msg)
}

func (h *Handler) serverError(w http.ResponseWriter, r *http.Request, err error) {
	h.finish(w, r, http.StatusInternalServerError, err)
}

// describedErr carries a message for the client with a status.
type describedErr struct{ msg string }

func (e describedErr) Error() string { return e.msg }

// describe returns status with a message the client sees.
func describe(status int, format string, args ...any) (int, error) {
	return status, describedErr{fmt.Sprintf(format, args...)}
}

// plain writes a short text/plain answer.
func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// maxPathDepth bounds the segments of a path below the prefix (the root's
// name is the first). Finding a lock walks from a path up to the deepest
// folder that exists, resolving each level from the top, so the work
// grows with the square of the depth; a URL within the server's 1 MiB
// header limit could otherwise name 500,000 levels. macOS's PATH_MAX
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
		return "", fmt.Errorf("path %q is outside %s/", escaped, h.opts.Prefix)
	}
	var segs []string
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" {
			continue
		}
		if len(segs) == maxPathDepth {
			return "", errPathTooDeep
		}
		if strings.Contains(strings.ToLower(seg), "%2f") || strings.Contains(strings.ToLower(seg), "%5c") {
			return "", errors.New("a path segment may not contain an escaped slash or backslash")
		}
		name, err := url.PathUnescape(seg)
		if err != nil {
			return "", fmt.Errorf("invalid escape in path: %v", err)
		}
		if name == "." || name == ".." {
			return "", errors.New(`a path may not contain "." or ".." segments`)
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
