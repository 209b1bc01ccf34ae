package webdav

import (
	"net/http"
	"path"

	"berth/vfs"
)

// getWriter is the ResponseWriter of a GET, HEAD or POST served by x/net/webdav
// (http.ServeContent): its Content-Type is the name's, and its error
// answers are plain text.
type getWriter struct {
	http.ResponseWriter
}

// newGetWriter prepares the answer to a GET or HEAD of the dav path p. Its
// Content-Type is set before http.ServeContent runs, so that it is the
// getcontenttype PROPFIND reports (by the name's extension) and the
// contents are never sniffed: an HTML body in a file of an unknown type
// would otherwise be served as text/html. A Range with zero-length suffix
// parts (bytes=-0), which no byte satisfies, loses them first
// (vfs.ServableRange): ServeContent would send each as a part that ends
// before it starts ("bytes 11-10/11").
func newGetWriter(w http.ResponseWriter, r *http.Request, p string) *getWriter {
	h := w.Header()
	h.Set("Content-Type", contentType(path.Base(p)))
	h.Set("X-Content-Type-Options", "nosniff")
	if rng := r.Header.Get("Range"); rng != "" {
		r.Header.Set("Range", vfs.ServableRange(rng))
	}
	return &getWriter{ResponseWriter: w}
}

func (g *getWriter) WriteHeader(code int) {
	if code >= 400 {
		// x/net/webdav's own error answers (404, 405) and ServeContent's
		// (416) are plain text.
		g.Header().Set("Content-Type", "text/plain; charset=utf-8")
	}
	g.ResponseWriter.WriteHeader(code)
}

// Unwrap gives http.ResponseController the underlying writer.
func (g *getWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
