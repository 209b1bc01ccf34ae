package rest

import (
	"net/http"

	"berth/httpserve"
	"berth/vfs"
)

// zipRoutes registers the folder download (spec 4.3): a zip of the folder.
func (s *server) zipRoutes() {
	s.handleStream("GET /api/2/files/{root_id}/folder/{folder_id}/download", s.authedStream(s.downloadFolder))
}

// downloadFolder answers GET .../folder/{folder_id}/download with a zip of
// the folder's live contents, laid out from the listing before a byte is
// sent (vfs.Zip): an exact Content-Length, an ETag, Range and If-Range, so
// a broken download resumes. Errors found before the first byte (no such
// folder, a deleted one, one too large for a zip) are JSON errors; after
// it, the adapter aborts the connection so a client never takes a cut-off
// archive for a whole one. A client that goes away cancels r.Context(),
// which stops the reads.
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
	// The zips of one person share one part of the budget of zips (as a
	// share link's holders do, share.Link.Requester).
	z, err := s.fs.Zip(r.Context(), a.root.ID, n.ID, vfs.ZipOptions{Requester: callerOf(r).Person.Principal()})
	if err != nil {
		return err
	}
	defer z.Close()
	return httpserve.ServeZip(w, r, name, z, s.zipFail(r, n.ID))
}

// zipFail answers the errors http.ServeContent finds itself in the spec's
// JSON form, as file downloads do.
func (s *server) zipFail(r *http.Request, folder uint64) func(http.ResponseWriter, int) {
	return func(w http.ResponseWriter, status int) {
		if status >= 500 {
			s.log.Error("zip download failed before the response started", "route", r.Pattern, "folder_id", folder)
		}
		jsonStatusError(w, status)
	}
}
