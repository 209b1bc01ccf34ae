package rest

import (
	"net/http"

	"berth/httpserve"
)

// download answers GET .../{file_id}/download with the file's current
// contents through httpserve.ServeContent: Range (206), If-None-Match and
// If-Modified-Since (304), If-Range, HEAD. The type comes from the name's
// extension, never from sniffing the contents.
func (s *server) download(w http.ResponseWriter, r *http.Request) error {
	// itemGet's pattern names the file id {item}.
	a, n, err := s.fileOf(r, "item")
	if err != nil {
		return err
	}
	f, err := s.fs.Open(r.Context(), a.root.ID, n.ID)
	if err != nil {
		return err
	}
	defer f.Close()
	// Fail keeps the id, not n, which would then live on the heap.
	id := n.ID
	// ServeContent drops read errors; httpserve returns the first, and the
	// adapter aborts the connection: a short body with status 200 must not
	// pass for the file.
	return httpserve.ServeContent(w, r, httpserve.Content{
		Name: f.Node.Name,
		// vfs's entity tag, the same as WebDAV's getetag for the revision.
		ETag:     f.Node.ETag(),
		Modified: f.Node.Modified,
		Body:     f,
		Fail: func(w http.ResponseWriter, status int) {
			if status >= 500 {
				// ServeContent keeps the cause to itself; the answer is written.
				s.log.Error("download failed before the response started", "route", r.Pattern, "file_id", id)
			}
			jsonStatusError(w, status)
		},
	})
}

// jsonStatusError answers the errors http.ServeContent finds itself (it
// would write them in plain text, or with no body at all) with the spec's
// JSON error bodies (spec 1.2: errors are JSON too): 416 for an
// unsatisfiable Range (its Content-Range, bytes */size, stays), 412 for a
// failed If-Match or If-Unmodified-Since, and 500 should seeking the file
// fail.
func jsonStatusError(w http.ResponseWriter, code int) {
	var err error
	switch code {
	case http.StatusRequestedRangeNotSatisfiable:
		err = errRangeNotSatisfiable
	case http.StatusPreconditionFailed:
		err = errPreconditionFailed
	default:
		err = errServeContent
	}
	status, body, _ := classify(err)
	writeBody(w, status, body.json())
}
