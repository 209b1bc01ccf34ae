package rest

import (
	"net/http"

	"berth/httpserve"
	"berth/vfs"
)

// zipRoutes registers the folder download (spec 4.3): a zip of the folder
// streamed while it is read.
func (s *server) zipRoutes() {
	s.handleStream("GET /api/2/files/{root_id}/folder/{folder_id}/download", s.authedStream(s.downloadFolder))
}

// downloadFolder answers GET .../folder/{folder_id}/download with a zip of
// the folder's live contents (vfs.WriteZip). The length is not known in
// advance, so the body is chunked (HTTP/1.1) or framed (HTTP/2) and has no
// Content-Length. Errors found before the first byte (no such folder, a
// deleted one) are JSON errors; after it, the adapter aborts the connection
// so a client never takes a cut-off archive for a whole one. A client that
// goes away cancels r.Context(), which stops WriteZip.
func (s *server) downloadFolder(w http.ResponseWriter, r *http.Request) error {
	a, n, err := s.folder(r)
	if err != nil {
		return err
	}
	if n.Deleted {
		return Describe(ErrNotFound, "no such folder")
	}
	name := n.Name
	if n.ID == a.root.FolderID {
		name = a.root.Name // the top folder has no name of its own
	}
	httpserve.ZipHeaders(w, name)
	if r.Method == http.MethodHead {
		// The archive's size is unknown without building it.
		w.WriteHeader(http.StatusOK)
		return nil
	}
	return s.fs.WriteZip(r.Context(), w, a.root.ID, n.ID, vfs.ZipOptions{})
}
