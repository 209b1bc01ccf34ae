package rest

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// Listings of the tus uploads in progress, berth's own (tus has none):
// GET /api/2/tus/ lists the caller's own, so that a person finds the
// uploads they abandoned (and ends them with DELETE), and
// GET /api/2/organization/{org}/uploads those into the roots of an
// organization and of the organizations below it, for its administrators,
// who may end any of them (tusDelete) and before found an upload's id
// only in the logs. Both are read only and in the paged list envelope.

// tusUploadJSON is one upload in progress in a listing. The target is
// its folder's id and the file's name, not a path: the name is what the
// creator sent, and resolving the folder's path would read the root's
// tree, which an administrator without admin_browse_files may not.
type tusUploadJSON struct {
	UploadID uint64 `json:"upload_id"`
	RootID   uint64 `json:"root_id"`
	FolderID uint64 `json:"folder_id"`
	// Name is null in an administrator's listing of an upload into a
	// root they may not read (admin_browse_files): it is the name of
	// the file the creator is putting there.
	Name      *string `json:"name"`
	Length    int64   `json:"length"`
	Offset    int64   `json:"offset"`
	Reserved  int64   `json:"reserved"`
	Created   string  `json:"created"`
	Expires   string  `json:"expires"`
	CreatorID uint64  `json:"creator_id"`
}

func encodeTusUpload(st vfs.Staged) tusUploadJSON {
	return tusUploadJSON{
		UploadID: st.ID, RootID: st.Root, FolderID: st.Parent, Name: &st.Name,
		Length: st.Length, Offset: st.Offset, Reserved: st.Reserved,
		Created: formatDateTime(st.Created), Expires: formatDateTime(st.Expires),
		CreatorID: tusCreator(st.Owner),
	}
}

// tusCreator is the id of the person who created an upload of owner, 0
// for an owner that is not a tus one.
func tusCreator(owner string) uint64 {
	v, ok := strings.CutPrefix(owner, tusOwnerPrefix)
	if !ok {
		return 0
	}
	id, _ := strconv.ParseUint(v, 10, 64)
	return id
}

// listTusUploads answers GET /api/2/tus/: the caller's own uploads in
// progress, in id order, whatever their access to the roots now (the
// sweep ends those they lost).
func (s *server) listTusUploads(r *http.Request) (any, error) {
	p, err := pageOf(r)
	if err != nil {
		return nil, err
	}
	owner := tusOwner(r)
	return s.tusPage(r.Context(), p, func(st vfs.Staged) (bool, error) { return st.Owner == owner, nil }, nil)
}

// listOrganizationUploads answers GET /api/2/organization/{org}/uploads:
// the uploads in progress into the roots of org and of the organizations
// below it, whoever made them, for an administrator of org or above
// (share.OrgManage, as its other lists; with admin_browse_files or
// without, as ending them is). A root's place is the owner's
// organization, or the share's (account.RootPlaceOf). The file's name is
// shown only where the caller may read the root (or made the upload):
// the rest of an upload tells nothing of what the root holds.
func (s *server) listOrganizationUploads(r *http.Request) (any, error) {
	o, p, err := s.orgPage(r)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	c := callerOf(r)
	owner := tusOwner(r)
	shown := func(st vfs.Staged) (bool, error) {
		if st.Owner == owner {
			return true, nil
		}
		return rootPerms(ctx, s.shares, c, st.Root, share.Read)
	}
	return s.tusPage(ctx, p, func(st vfs.Staged) (bool, error) {
		place, err := s.accounts.RootPlaceOf(ctx, st.Root)
		if errors.Is(err, account.ErrNotFound) {
			return false, nil // a root no organization holds
		}
		if err != nil {
			return false, err
		}
		return account.Within(place.Chain, o.ID), nil
	}, shown)
}

// tusPage is page p of the uploads in progress that match picks, in id
// order, with the count of all that match. The uploads stream from vfs
// (EachStaged) and only the page is kept. shown, when not nil, says
// whether an upload of the page shows its file's name.
func (s *server) tusPage(ctx context.Context, p page, match func(vfs.Staged) (bool, error), shown func(vfs.Staged) (bool, error)) (any, error) {
	var out []tusUploadJSON
	total := 0
	err := s.fs.EachStaged(ctx, func(st vfs.Staged) error {
		ok, err := match(st)
		if err != nil || !ok {
			return err
		}
		if total >= p.Offset && len(out) < p.Limit {
			u := encodeTusUpload(st)
			if shown != nil {
				ok, err := shown(st)
				if err != nil {
					return err
				}
				if !ok {
					u.Name = nil
				}
			}
			out = append(out, u)
		}
		total++
		return nil
	})
	if err != nil {
		return nil, err
	}
	return paged(p, out, total), nil
}
