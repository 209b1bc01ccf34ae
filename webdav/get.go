package webdav

import (
	"context"
	"io"
	"net/http"
	"os"
	"path"

	xwebdav "golang.org/x/net/webdav"

	"berth/httpserve"
)

// get serves a GET, HEAD or POST of the dav path p through x/net/webdav
// (http.ServeContent), under httpserve's rule for downloads:
// ServeContent drops read errors, so the body is read through an
// httpserve.Body, and an error after the first byte (a chunk lost under
// the file) is logged, counted and aborts the connection. The client
// sees a broken transfer, never a short file with status 200.
func (h *Handler) get(w http.ResponseWriter, r *http.Request, p string, lib *xwebdav.Handler) {
	g := newGetWriter(w, r, p)
	files := &getFS{FileSystem: lib.FileSystem, r: r}
	lib.FileSystem = files
	// A ranged read (how mounts read files) is sent in large writes, as
	// a whole one (sendWhole); the file's decoded chunks are at hand.
	release := httpserve.Hold(g, r)
	lib.ServeHTTP(g, r)
	_ = release() // a failed write is the client's, as in ServeContent
	if files.body == nil {
		return
	}
	err := files.body.Err()
	if err == nil {
		return
	}
	if !g.stream.Started() {
		// ServeContent writes its status before it reads a byte; should
		// that change, the error still gets an answer.
		h.finish(g, r, err)
		return
	}
	h.metrics.Abort(h.log, r, route, g.stream.WriteFailed() || httpserve.ClientGone(r, err), err)
}

// sendWhole answers a GET or HEAD of a file that asks for the whole of it
// (no Range, no precondition) without x/net/webdav: one lookup and open
// (vfs.OpenPath), the headers the library's answer has (newGetWriter's,
// the ETag, and http.ServeContent's) set at once, and the body written
// straight from the file (httpserve.SendWhole). That is most of what a
// mount reads, and the library's way there (a handler, a FileSystem and
// a File per request, ServeContent's header-by-header work) was a third
// of a small GET's CPU in the handler. It reports whether it answered;
// anything else (a folder, an error, a Range) is left untouched for get,
// which answers it as the library does. A read error after the answer
// started aborts it, as in get.
func (h *Handler) sendWhole(w http.ResponseWriter, r *http.Request, s *session, p string) bool {
	if !httpserve.PlainGet(r) {
		return false
	}
	t, err := s.resolve(p)
	if err != nil || t.top() {
		return false
	}
	n, vf, err := h.opts.FS.OpenPath(r.Context(), t.m.root.ID, t.rel)
	if err != nil || vf == nil {
		return false
	}
	defer vf.Close()
	send := httpserve.NewSend(w, vf)
	stream, body := &send.Stream, &send.Body
	var hdrs [12]string
	if !httpserve.SendWhole(stream, r, n.Modified, body, appendGetHeaders(hdrs[:0], p, "Etag", fileInfoETag(n))...) {
		return false
	}
	if err := body.Err(); err != nil {
		h.metrics.Abort(h.log, r, route, stream.WriteFailed() || httpserve.ClientGone(r, err), err)
	}
	return true
}

// getHeaders are the headers every GET or HEAD of the dav path p sends,
// as pairs, whichever path serves it, followed by the pairs of more (in
// the same allocation).
func getHeaders(p string, more ...string) []string {
	return appendGetHeaders(make([]string, 0, 10+len(more)), p, more...)
}

// appendGetHeaders appends getHeaders(p, more...) to dst, which may be
// on the caller's stack.
func appendGetHeaders(dst []string, p string, more ...string) []string {
	return append(append(dst,
		"Content-Type", httpserve.ContentType(path.Base(p)),
		"X-Content-Type-Options", "nosniff",
		// A browser opening a shared .html over the mount must not run
		// it as berth's page, with the Basic credentials it keeps for
		// the origin.
		"Content-Security-Policy", httpserve.DownloadCSP,
		// Nor may another site's page load it as its own subresource
		// (<script src>, a style sheet, an image) with those
		// credentials: such loads need no CORS, and ran a .js file in
		// that page, where it could read what the code defines.
		"Cross-Origin-Resource-Policy", "same-origin",
		// Revalidated before each reuse, as every download is: a
		// mount's or a browser's cache would otherwise reuse a file
		// for a while it guesses from Last-Modified, stale all along
		// once a new revision is there.
		"Cache-Control", httpserve.DownloadCacheControl,
	), more...)
}

// getWriter is the ResponseWriter of a GET, HEAD or POST served by x/net/webdav
// (http.ServeContent): its Content-Type is the name's, and its error
// answers are plain text.
type getWriter struct {
	http.ResponseWriter
	// stream is the writer below, which knows whether the answer started.
	stream *httpserve.Stream
}

// newGetWriter prepares the answer to a GET or HEAD of the dav path p. Its
// Content-Type is set before http.ServeContent runs, so that it is the
// getcontenttype PROPFIND reports (by the name's extension) and the
// contents are never sniffed: an HTML body in a file of an unknown type
// would otherwise be served as text/html. The Range is the one berth
// serves (httpserve.ServableRange): without zero-length suffix parts
// (bytes=-0), which ServeContent would send as parts that end before they
// start ("bytes 11-10/11"), and none for an If-Range date.
func newGetWriter(w http.ResponseWriter, r *http.Request, p string) *getWriter {
	httpserve.SetHeaders(w.Header(), getHeaders(p)...)
	httpserve.ServableRange(r)
	s := &httpserve.Stream{ResponseWriter: w}
	return &getWriter{ResponseWriter: s, stream: s}
}

// WriteHeader marks an error answer as plain text before it is sent.
func (g *getWriter) WriteHeader(code int) {
	if code >= 400 {
		// x/net/webdav's own error answers (404, 405) and ServeContent's
		// (416) are plain text.
		g.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	g.ResponseWriter.WriteHeader(code)
}

// ReadFrom lets x/net's http.ServeContent send the file straight from its
// decoded chunks (httpserve.ReadFrom), writing through g.
func (g *getWriter) ReadFrom(src io.Reader) (int64, error) {
	return httpserve.ReadFrom(struct{ io.Writer }{g}, src)
}

// Unwrap gives http.ResponseController the underlying writer.
func (g *getWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// getFS is the FileSystem of a GET: the file it opens for reading is read
// through an httpserve.Body, which keeps the read error ServeContent drops,
// and the request's dates are made to claim no more than they prove of it
// (httpserve.DateConditions).
type getFS struct {
	xwebdav.FileSystem
	// body is the contents of the file opened, nil before one is.
	body *httpserve.Body
	// r is the request being answered, whose Range OpenFile drops for
	// an empty file (httpserve.DropEmptyRange) before the library's
	// http.ServeContent reads it.
	r *http.Request
}

// OpenFile wraps a file opened for reading so that its read errors are
// kept; anything else is x/net's FileSystem's as it is.
func (g *getFS) OpenFile(ctx context.Context, name string, flag int, perm os.FileMode) (xwebdav.File, error) {
	f, err := g.FileSystem.OpenFile(ctx, name, flag, perm)
	if err != nil || flag != os.O_RDONLY {
		return f, err
	}
	g.body = httpserve.NewBody(f)
	if fi, err := f.Stat(); err == nil {
		// The library's ServeContent compares dates at whole seconds.
		httpserve.DateConditions(g.r, fi.ModTime())
	}
	if g.r.Header.Get("Range") != "" {
		httpserve.DropEmptyRange(g.r, g.body)
	}
	return &getFile{File: f, body: g.body}, nil
}

// getFile is a file being served: reads go through its Body.
type getFile struct {
	xwebdav.File
	body *httpserve.Body
}

// Read reads through the Body, which keeps the first error.
func (f *getFile) Read(p []byte) (int, error) { return f.body.Read(p) }

// CopyTo sends through the Body, which keeps the first read error.
func (f *getFile) CopyTo(w io.Writer, n int64) (int64, error) { return f.body.CopyTo(w, n) }

// Seek seeks through the Body, so that reads and seeks meet one offset.
func (f *getFile) Seek(off int64, whence int) (int64, error) { return f.body.Seek(off, whence) }
