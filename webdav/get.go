package webdav

import (
	"net/http"
	"path"
	"strconv"
	"strings"
)

// getWriter corrects what http.ServeContent answers a GET or HEAD (through
// x/net/webdav) where that is wrong: a zero-length suffix range
// (bytes=-0), which no byte satisfies (RFC 9110 14.1.1), comes out as 206
// with a Content-Range that ends before it starts ("bytes 11-10/11"); it
// becomes 416 with bytes */size.
type getWriter struct {
	http.ResponseWriter
	replaced bool // the answer was replaced; ServeContent's body is dropped
}

// newGetWriter prepares the answer to a GET or HEAD of the dav path p. Its
// Content-Type is set before http.ServeContent runs, so that it is the
// getcontenttype PROPFIND reports (by the name's extension) and the
// contents are never sniffed: an HTML body in a file of an unknown type
// would otherwise be served as text/html.
func newGetWriter(w http.ResponseWriter, p string) *getWriter {
	h := w.Header()
	h.Set("Content-Type", contentType(path.Base(p)))
	h.Set("X-Content-Type-Options", "nosniff")
	return &getWriter{ResponseWriter: w}
}

func (g *getWriter) WriteHeader(code int) {
	h := g.Header()
	if code >= 400 {
		// x/net/webdav's own error answers (404, 405) are plain text.
		h.Set("Content-Type", "text/plain; charset=utf-8")
	}
	if size, ok := emptyRange(h.Get("Content-Range")); code == http.StatusPartialContent && ok {
		h.Set("Content-Range", "bytes */"+size)
		h.Del("Content-Length")
		g.replaced = true
		plain(g.ResponseWriter, http.StatusRequestedRangeNotSatisfiable, "the requested range is not satisfiable")
		return
	}
	g.ResponseWriter.WriteHeader(code)
}

func (g *getWriter) Write(b []byte) (int, error) {
	if g.replaced {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (g *getWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }

// emptyRange reports whether a Content-Range ("bytes 11-10/11") ends
// before it starts, and returns its size.
func emptyRange(cr string) (size string, ok bool) {
	rng, size, ok := strings.Cut(strings.TrimPrefix(cr, "bytes "), "/")
	if !ok {
		return "", false
	}
	first, last, ok := strings.Cut(rng, "-")
	f, err1 := strconv.ParseInt(first, 10, 64)
	l, err2 := strconv.ParseInt(last, 10, 64)
	if !ok || err1 != nil || err2 != nil || l >= f {
		return "", false
	}
	return size, true
}
