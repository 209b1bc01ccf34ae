package rest

import (
	"io"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"

	"berth/vfs"
)

// download answers GET .../{file_id}/download with the file's current
// contents through http.ServeContent: Range (206), If-None-Match and
// If-Modified-Since (304), If-Range, HEAD. The type comes from the name's
// extension, never from sniffing the contents.
func (s *server) download(w http.ResponseWriter, r *http.Request) error {
	a, n, err := s.file(r)
	if err != nil {
		return err
	}
	f, err := s.fs.Open(r.Context(), a.root.ID, n.ID)
	if err != nil {
		return err
	}
	defer f.Close()
	h := w.Header()
	// vfs's entity tag, the same as WebDAV's getetag for the revision.
	h.Set("ETag", f.Node.ETag())
	h.Set("Content-Type", contentType(f.Node.Name))
	h.Set("Content-Disposition", contentDisposition(f.Node.Name))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "private, no-cache")
	if rng := r.Header.Get("Range"); rng != "" {
		r.Header.Set("Range", vfs.ServableRange(rng))
	}
	body := &readErr{f: f}
	jw := &jsonStatusError{ResponseWriter: w}
	http.ServeContent(jw, r, "", f.Node.Modified, body)
	if jw.failed >= 500 {
		// ServeContent keeps the cause to itself; the answer is written.
		s.log.Error("download failed before the response started", "route", r.Pattern, "file_id", n.ID)
	}
	// ServeContent drops read errors; a short body with status 200 must
	// not pass for the file, so the adapter aborts the connection.
	return body.failure()
}

// readErr keeps the first read error ServeContent would drop. It is
// safe for concurrent use: ServeContent reads the parts of a multi-range
// answer in a goroutine that it does not wait for when a write to the
// client fails, so that goroutine may still read while the handler
// returns.
type readErr struct {
	f   *vfs.File
	mu  sync.Mutex
	err error
}

func (r *readErr) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	if err != nil && err != io.EOF {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	return n, err
}

// failure returns the first read error, or nil.
func (r *readErr) failure() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

func (r *readErr) Seek(off int64, whence int) (int64, error) { return r.f.Seek(off, whence) }

// contentType is the media type of a file name's extension, or
// application/octet-stream.
func contentType(name string) string {
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// contentDisposition is an attachment header that keeps any name (RFC
// 6266): an ASCII fallback in filename for old clients and the exact
// UTF-8 name in filename* (RFC 8187).
func contentDisposition(name string) string {
	var fb, ext strings.Builder
	for _, r := range name {
		switch {
		case r < 0x20 || r >= 0x7f || r == '"' || r == '\\' || r == '%':
			fb.WriteByte('_')
		default:
			fb.WriteRune(r)
		}
	}
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(name); i++ {
		c := name[i]
		if isAttrChar(c) {
			ext.WriteByte(c)
			continue
		}
		ext.WriteByte('%')
		ext.WriteByte(hex[c>>4])
		ext.WriteByte(hex[c&15])
	}
	return `attachment; filename="` + fb.String() + `"; filename*=UTF-8''` + ext.String()
}

// isAttrChar reports whether c may stand unencoded in an RFC 8187 value.
func isAttrChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&+-.^_`|~", c) >= 0
}

// jsonStatusError turns the error answers http.ServeContent writes in
// plain text, or with no body at all, into the spec's JSON error bodies
// (spec 1.2: errors are JSON too): 416 for an unsatisfiable Range (its
// Content-Range, bytes */size, stays), 412 for a failed If-Match or
// If-Unmodified-Since, and 500 should seeking the file fail. Headers set
// for the file's body are dropped.
type jsonStatusError struct {
	http.ResponseWriter
	// failed is the status of an error answer written instead of
	// ServeContent's, 0 while there is none.
	failed int
}

func (j *jsonStatusError) WriteHeader(code int) {
	var err error
	switch {
	case code == http.StatusRequestedRangeNotSatisfiable:
		err = errRangeNotSatisfiable
	case code == http.StatusPreconditionFailed:
		err = errPreconditionFailed
	case code >= 400:
		err = errServeContent
	default:
		j.ResponseWriter.WriteHeader(code)
		return
	}
	h := j.Header()
	for _, k := range []string{"Content-Disposition", "Content-Length", "Content-Encoding"} {
		h.Del(k)
	}
	status, body, _ := classify(err)
	j.failed = status
	writeBody(j.ResponseWriter, status, body.json())
}

func (j *jsonStatusError) Write(b []byte) (int, error) {
	if j.failed != 0 {
		return len(b), nil // ServeContent's text body; the JSON one is out
	}
	return j.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (j *jsonStatusError) Unwrap() http.ResponseWriter { return j.ResponseWriter }
