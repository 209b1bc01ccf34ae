package rest

import (
	"net/http"

	"berth/vfs"
)

// folderRoutes registers the folder routes (spec 4.3) but share and the
// zip download. GET .../folder/{folder_id} is served through itemGet (see
// fileRoutes).
func (s *server) folderRoutes() {
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/upload", s.authed(s.uploadToFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/create_folder", s.authed(s.createFolderInFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/rename", s.authed(s.renameFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/move", s.authed(s.moveFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/lock", s.authed(s.lockFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/unlock", s.authed(s.unlockFolder))
	s.handle("POST /api/2/files/{root_id}/folder/{folder_id}/delete", s.authed(s.deleteFolder))
}

// folder checks access and loads the folder of the path.
func (s *server) folder(r *http.Request) (fsAccess, vfs.Node, error) {
	a, err := s.access(r)
	if err != nil {
		return a, vfs.Node{}, err
	}
	n, err := s.item(r, a, "folder_id", true)
	return a, n, err
}

// getFolder answers GET .../folder/{folder_id}: the folder object, with
// children and hash when include_children=true, or 304 when the client's
// hash is current, or one page of them (limit, cursor). A deleted folder
// is shown (is_deleted) without children.
func (s *server) getFolder(w http.ResponseWriter, r *http.Request) error {
	a, n, err := s.folder(r)
	if err != nil {
		return err
	}
	q, err := query(r)
	if err != nil {
		return err
	}
	withChildren, err := boolParam(q, "include_children")
	if err != nil {
		return err
	}
	p, err := listPageOf(q)
	if err != nil {
		return err
	}
	obj := encodeFolder(n, a.perms)
	if withChildren && !n.Deleted {
		return s.writeListing(w, r, q, obj, typeFolder, a.root.ID, n.ID, p, a.perms)
	}
	return writeJSON(w, obj)
}

func (s *server) uploadToFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return s.upload(r, a, n.ID)
}

func (s *server) createFolderInFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return s.createFolder(r, a, n.ID)
}

func (s *server) renameFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return s.rename(r, a, n)
}

func (s *server) moveFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return s.move(r, a, n)
}

func (s *server) lockFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return nil, s.lock(r, a, n)
}

func (s *server) unlockFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return nil, s.unlock(r, a, n)
}

func (s *server) deleteFolder(r *http.Request) (any, error) {
	a, n, err := s.folder(r)
	if err != nil {
		return nil, err
	}
	return nil, s.delete(r, a, n)
}
