package rest

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"berth/share"
)

// isoLink creates a link of a fresh, marker-free folder (folder true) or
// file of the child's plain person, as they would; login: login_required;
// sub: with an email subscriber. inner is a file inside the folder.
func (k *isoCast) isoLink(q isoReq, folder, login, sub bool) (l share.Link, inner uint64) {
	k.t.Helper()
	ctx := context.Background()
	c, err := k.f.accounts.Caller(ctx, q.c.plain.ID)
	if err != nil {
		k.t.Fatal(err)
	}
	var item uint64
	if folder {
		item = newCFolder(q).(uint64)
		inner = k.upload(q.c, fmt.Sprintf("/api/2/files/%d/folder/%d/upload", q.c.root, item), k.next()+".txt")
	} else {
		item = newCFile(q).(uint64)
	}
	l, err = k.shares.CreateLink(ctx, c, q.c.root, item, folder, share.LinkSettings{LoginRequired: &login})
	if err != nil {
		k.t.Fatal(err)
	}
	if sub {
		sb, err := k.shares.AddSubscriber(ctx, c, l.ID, share.Subscriber{Kind: "email", Email: k.next() + "@example.com"})
		if err != nil {
			k.t.Fatal(err)
		}
		l.Subscribers = append(l.Subscribers, sb)
	}
	return l, inner
}

// linkIsoRows are the share link routes: managing a link is its
// creator's alone (others: 404, as if it did not exist); using one by its
// hash is anyone's, token or not, unless it requires login.
func linkIsoRows() []isoRow {
	const (
		creator = "CP=200 CA=404 PA=404"
		anyone  = "none=200 OP=200 OA=200 PP=200 CG=200 CP=200 CA=200 PA=200"
		byID    = "none=404 OP=404 OA=404 PP=404 CG=404 CP=200 CA=404 PA=404"
		login   = "none=401 OP=401 OA=401 PP=401 CG=401 CP=200 CA=401 PA=401"
	)
	folderLink := func(q isoReq) share.Link { l, _ := q.k.isoLink(q, true, false, false); return l }
	fileLink := func(q isoReq) share.Link { l, _ := q.k.isoLink(q, false, false, false); return l }
	hashOf := func(link func(isoReq) share.Link, suffix string) func(isoReq) string {
		return func(q isoReq) string { return "/api/2/sharelinks/" + link(q).Hash + suffix }
	}
	idOf := func(suffix string, sub bool) func(isoReq) string {
		return func(q isoReq) string {
			l, _ := q.k.isoLink(q, true, false, sub)
			s := suffix
			if sub {
				s = fmt.Sprintf(suffix, l.Subscribers[0].ID)
			}
			return fmt.Sprintf("/api/2/sharelinks/%d%s", l.ID, s)
		}
	}
	inner := func(format string) func(isoReq) string {
		return func(q isoReq) string {
			l, f := q.k.isoLink(q, true, false, false)
			return fmt.Sprintf("/api/2/sharelinks/%s/files/"+format, l.Hash, f)
		}
	}
	folderOf := func(format string) func(isoReq) string {
		return func(q isoReq) string {
			l := folderLink(q)
			return fmt.Sprintf("/api/2/sharelinks/%s/files/"+format, l.Hash, l.FolderID)
		}
	}
	writeLink := func(anon bool, suffix string) func(isoReq) string {
		return func(q isoReq) string {
			l := q.k.isoWriteLink(q, anon)
			if !strings.Contains(suffix, "%d") {
				return "/api/2/sharelinks/" + l.Hash + "/files" + suffix
			}
			return fmt.Sprintf("/api/2/sharelinks/%s/files"+suffix, l.Hash, l.FolderID)
		}
	}
	const writer = "none=403 OP=403 OA=403 PP=403 CG=403 CP=200 CA=403 PA=403"
	return []isoRow{
		{pattern: "POST /api/2/sharelinks/{ref}/files/create_folder", method: "POST", path: writeLink(false, "/create_folder"), form: newNamed("name", nil), want: writer},
		{pattern: "POST /api/2/sharelinks/{ref}/files/create_folder", name: "anon_edit", method: "POST", path: writeLink(true, "/create_folder"), form: newNamed("name", nil), want: anyone},
		{pattern: "POST /api/2/sharelinks/{ref}/files/folder/{folder_id}/create_folder", method: "POST", path: writeLink(false, "/folder/%d/create_folder"), form: newNamed("name", nil), want: writer},
		{pattern: "POST /api/2/sharelinks/{ref}/files/upload", method: "UPLOAD", path: writeLink(false, "/upload"), want: writer},
		{pattern: "POST /api/2/sharelinks/{ref}/files/folder/{folder_id}/upload", method: "UPLOAD", path: writeLink(true, "/folder/%d/upload"), want: anyone},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/share", method: "POST", path: pf("/api/2/files/%d/%d/share", cRoot, cFile), want: creator},
		{pattern: "POST /api/2/files/{root_id}/{file_id}/share", name: "admin_browse_files", method: "POST", path: pf("/api/2/files/%d/%d/share", cRoot, cFile),
			want: "CP=200 CA=403 PA=403", tenant: "browse"},
		{pattern: "POST /api/2/files/{root_id}/folder/{folder_id}/share", method: "POST", path: pf("/api/2/files/%d/folder/%d/share", cRoot, cFolder),
			form: fields("expires", "2099-12-31"), want: creator},
		{pattern: "GET /api/2/sharelinks/{ref}", name: "by id", path: idOf("", false), want: byID},
		{pattern: "PUT /api/2/sharelinks/{ref}", method: "PUT", path: idOf("", false), form: fields("download_limit", "3"), want: creator},
		{pattern: "DELETE /api/2/sharelinks/{ref}", method: "DELETE", path: idOf("", false), want: creator},
		{pattern: "POST /api/2/sharelinks/{ref}/subscribers", method: "POST", path: idOf("/subscribers", false),
			form: func(q isoReq) url.Values {
				return url.Values{"subscriber_type": {"email"}, "email": {q.k.next() + "@example.com"}}
			}, want: creator},
		{pattern: "PUT /api/2/sharelinks/{ref}/subscribers/{sub_id}", method: "PUT", path: idOf("/subscribers/%d", true),
			form: fields("write_access", "true"), want: creator},
		{pattern: "DELETE /api/2/sharelinks/{ref}/subscribers/{sub_id}", method: "DELETE", path: idOf("/subscribers/%d", true), want: creator},
		{pattern: "GET /api/2/guest/{id}/shares", path: pf("/api/2/guest/%d/shares", cGuest), want: "CP=404 CA=200 PA=200 CG=200"},

		{pattern: "GET /api/2/sharelinks/{ref}/files", name: "by hash", path: hashOf(folderLink, "/files"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files", name: "login_required", want: login,
			path: func(q isoReq) string {
				l, _ := q.k.isoLink(q, true, true, false)
				return "/api/2/sharelinks/" + l.Hash + "/files"
			}},
		{pattern: "GET /api/2/sharelinks/{ref}/files/children", path: hashOf(folderLink, "/files/children"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files/folder/{folder_id}/children", path: folderOf("folder/%d/children"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files/{file_id}", path: inner("%d"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files/{item}/{sub}", name: "a file's download", path: inner("%d/download"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files/{item}/{sub}", name: "a folder", path: folderOf("folder/%d"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/files/folder/{folder_id}/download", path: folderOf("folder/%d/download"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/download", path: hashOf(fileLink, "/download"), want: anyone},
		{pattern: "GET /api/2/sharelinks/{ref}/view", path: hashOf(fileLink, "/view"), want: anyone},
	}
}

// isoWriteLink creates a folder link with write access (and anon_edit
// when anon) of a fresh folder of the child's plain person.
func (k *isoCast) isoWriteLink(q isoReq, anon bool) share.Link {
	k.t.Helper()
	ctx := context.Background()
	c, err := k.f.accounts.Caller(ctx, q.c.plain.ID)
	if err != nil {
		k.t.Fatal(err)
	}
	yes := true
	l, err := k.shares.CreateLink(ctx, c, q.c.root, newCFolder(q).(uint64), true, share.LinkSettings{WriteAccess: &yes, AnonEdit: &anon})
	if err != nil {
		k.t.Fatal(err)
	}
	return l
}
