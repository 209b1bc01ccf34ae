package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"berth/httpserve"
	"berth/share"
	"berth/vfs"
)

// The object types of spec section 2, as they go on the wire.
const (
	typeRoot   = "root"
	typeFile   = "file"
	typeFolder = "folder"
)

// Permission values of spec 2.1. The spec shows these three and leaves the
// full set open; berth shows only these for now.
const (
	permView  = "FILE_VIEW"
	permRead  = "FILE_READ"
	permWrite = "FILE_WRITE"
)

// permissions lists share's permissions p as the spec's values, always in
// the same order (the listing hash covers them). Those the spec has no
// value for (delete, reshare) are not shown.
func permissions(p share.Perm) []string {
	return permissionSets[p&shownPerms]
}

// shownPerms are the bits permissions shows: the three lowest.
const shownPerms = share.View | share.Read | share.Write

// permissionSets holds permissions' answer for each set of the shown
// bits, made once: every file request of the API computes its root's
// (fsAccess), most never show them. Each slice is full (length ==
// capacity), so an append to one copies it instead of changing the set.
var permissionSets = func() (sets [shownPerms + 1][]string) {
	for p := range sets {
		l := listPermissions(share.Perm(p))
		sets[p] = l[:len(l):len(l)]
	}
	return sets
}()

// listPermissions is permissions, made afresh.
func listPermissions(p share.Perm) []string {
	out := []string{}
	for _, v := range []struct {
		perm share.Perm
		name string
	}{{share.View, permView}, {share.Read, permRead}, {share.Write, permWrite}} {
		if p.Has(v.perm) {
			out = append(out, v.name)
		}
	}
	return out
}

// ownerPermissions are the permissions of a root's owner on the root and
// everything in it.
func ownerPermissions() []string { return permissions(share.Owner) }

// rootJSON is a root object (spec 2.1).
type rootJSON struct {
	ID                 uint64   `json:"id"`
	Name               string   `json:"name"`
	Path               string   `json:"path"`
	IsLocked           bool     `json:"is_locked"`
	RootType           string   `json:"root_type"`
	SpaceUsed          int64    `json:"space_used"`
	SpaceUsedFormatted string   `json:"space_used_formatted"`
	Permissions        []string `json:"permissions"`
	Hash               string   `json:"hash,omitempty"`
	// Children is nil unless include_children asked for it; then it is a
	// list, possibly empty, never null.
	Children []any  `json:"children,omitzero"`
	Type     string `json:"type"`
}

// fileJSON is a file object (spec 2.2).
type fileJSON struct {
	ID            uint64   `json:"id"`
	RevisionID    uint64   `json:"revision_id"`
	RootID        uint64   `json:"root_id"`
	Path          string   `json:"path"`
	IsDeleted     bool     `json:"is_deleted"`
	Created       string   `json:"created"`
	Modified      string   `json:"modified"`
	Size          int64    `json:"size"`
	SizeFormatted string   `json:"size_formatted"`
	IsLocked      bool     `json:"is_locked"`
	Permissions   []string `json:"permissions"`
	Type          string   `json:"type"`
}

// folderJSON is a folder object (spec 2.3).
type folderJSON struct {
	ID          uint64   `json:"id"`
	RootID      uint64   `json:"root_id"`
	Path        string   `json:"path"`
	IsDeleted   bool     `json:"is_deleted"`
	IsLocked    bool     `json:"is_locked"`
	Permissions []string `json:"permissions"`
	Hash        string   `json:"hash,omitempty"`
	Children    []any    `json:"children,omitzero"`
	Type        string   `json:"type"`
}

// resultsJSON is the body of search and modified_since (spec 4.4).
type resultsJSON struct {
	Results []any `json:"results"`
}

// encodeRoot builds the root object without children.
func encodeRoot(r vfs.Root, u vfs.Usage, perms []string) rootJSON {
	return rootJSON{
		ID:                 r.ID,
		Name:               r.Name,
		Path:               "/",
		IsLocked:           r.Locked(),
		RootType:           string(r.Type),
		SpaceUsed:          u.PhysicalSize,
		SpaceUsedFormatted: httpserve.FormatSize(u.PhysicalSize),
		Permissions:        perms,
		Type:               typeRoot,
	}
}

// encodeFile builds a file object.
func encodeFile(n vfs.Node, perms []string) fileJSON {
	return fileJSON{
		ID:            n.ID,
		RevisionID:    n.RevisionID,
		RootID:        n.RootID,
		Path:          n.Path,
		IsDeleted:     n.Deleted,
		Created:       formatDateTime(n.Created),
		Modified:      formatDateTime(n.Modified),
		Size:          n.Size,
		SizeFormatted: httpserve.FormatSize(n.Size),
		IsLocked:      n.Locked(),
		Permissions:   perms,
		Type:          typeFile,
	}
}

// encodeFolder builds a folder object without children.
func encodeFolder(n vfs.Node, perms []string) folderJSON {
	return folderJSON{
		ID:          n.ID,
		RootID:      n.RootID,
		Path:        n.Path,
		IsDeleted:   n.Deleted,
		IsLocked:    n.Locked(),
		Permissions: perms,
		Type:        typeFolder,
	}
}

// encodeNode builds the file or folder object of n.
func encodeNode(n vfs.Node, perms []string) any {
	if n.Dir {
		return encodeFolder(n, perms)
	}
	return encodeFile(n, perms)
}

// encodeNodes builds a list of file and folder objects, never null.
func encodeNodes(ns []vfs.Node, perms []string) []any {
	out := make([]any, 0, len(ns))
	for _, n := range ns {
		out = append(out, encodeNode(n, perms))
	}
	return out
}

// listingHash is the `hash` of a root or folder object with its children:
// a signature of everything the response shows. It covers the vfs listing
// hash (every listed field of every child, to the nanosecond) and the JSON
// of the object itself (its own name, path, lock state, space used, and the
// permissions), so it changes whenever the answer would, including when
// only permissions do. The children's JSON follows from those two (their
// paths from the object's path and their names, their permissions are the
// object's), so v is hashed before its children are set: a large folder is
// not encoded twice. v must have Hash empty and no Children.
func listingHash(vfsHash string, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	h.Write([]byte(strconv.Itoa(len(vfsHash))))
	h.Write([]byte(vfsHash))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil)[:16]), nil
}
