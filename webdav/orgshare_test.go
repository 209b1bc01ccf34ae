package webdav_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"berth/account"
	"berth/share"
)

// An organization share shows under /webdav/ only to a subscriber whose
// subscription names the webdav channel, and a VIEWER changes nothing in
// it; a lock one subscriber holds refuses another's writes (423).
func TestOrgShareOverWebDAV(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	svc, ac, root := f.orgShare("Team")
	view, _, _ := f.addPerson("viewer")
	web, _, _ := f.addPerson("webonly")
	collab, _, _ := f.addPerson("collab")
	if _, err := svc.SetSubscribers(ctx, ac, f.org.ID, root.ID, share.Subscribers{Persons: []share.Entry{
		{ID: view.ID, Channel: "webdav", Role: "VIEWER"},
		{ID: web.ID, Channel: "web", Role: "COLLABORATOR"},
		{ID: collab.ID, Channel: "webdav", Role: "COLLABORATOR"},
		{ID: f.person.ID, Channel: "webdav", Role: "COLLABORATOR"},
	}}); err != nil {
		t.Fatal(err)
	}
	as := func(user, method, path, body string, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, password)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		st, _, b := f.send(req)
		return st, b
	}
	const allprop = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`
	for _, tc := range []struct {
		user string
		sees bool
	}{{"viewer", true}, {"webonly", false}, {"collab", true}} {
		st, b := as(tc.user, "PROPFIND", "/webdav/", allprop, "Depth", "1")
		want(t, "PROPFIND /webdav/ as "+tc.user, st, http.StatusMultiStatus, b)
		if strings.Contains(b, "/webdav/Team/") != tc.sees {
			t.Errorf("%s sees the share: %v, want %v:\n%s", tc.user, !tc.sees, tc.sees, b)
		}
	}
	st, b := as("collab", "PUT", "/webdav/Team/a.txt", "hello")
	want(t, "PUT as collaborator", st, http.StatusCreated, b)
	st, b = as("viewer", "GET", "/webdav/Team/a.txt", "")
	want(t, "GET as viewer", st, http.StatusOK, b)
	for _, m := range []struct{ method, path string }{
		{"PUT", "/webdav/Team/b.txt"},
		{"PUT", "/webdav/Team/a.txt"},
		{"DELETE", "/webdav/Team/a.txt"},
		{"MKCOL", "/webdav/Team/d"},
		{"PROPPATCH", "/webdav/Team/a.txt"},
		{"LOCK", "/webdav/Team/a.txt"},
		{"MOVE", "/webdav/Team/a.txt"},
	} {
		st, b := as("viewer", m.method, m.path, "x", "Destination", f.srv.URL+"/webdav/Team/moved.txt")
		want(t, m.method+" as viewer", st, http.StatusForbidden, b)
	}
	st, b = as("viewer", "COPY", "/webdav/Team/a.txt", "", "Destination", f.srv.URL+"/webdav/viewer/a.txt")
	want(t, "COPY out of the share as viewer", st, http.StatusCreated, b)
	st, b = as("viewer", "COPY", "/webdav/viewer/a.txt", "", "Destination", f.srv.URL+"/webdav/Team/c.txt")
	want(t, "COPY into the share as viewer", st, http.StatusForbidden, b)

	const lockBody = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, b = as("collab", "LOCK", "/webdav/Team/a.txt", lockBody, "Timeout", "Second-60")
	want(t, "LOCK as collaborator", st, http.StatusOK, b)
	st, b = as("alice", "PUT", "/webdav/Team/a.txt", "overwrite")
	want(t, "PUT into another subscriber's lock", st, http.StatusLocked, b)

	// Writes into the share are held to the organization's quota, not
	// the writer's own: collab's 1-byte quota does not stop a 5-byte
	// file, the organization's 64 KiB stops a bigger one.
	if _, err := f.accounts.UpdatePerson(ctx, collab.ID, func(p *account.Person) error { p.SpaceQuota = 1; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.SpaceQuota = "65536"; return nil }); err != nil {
		t.Fatal(err)
	}
	st, b = as("collab", "PUT", "/webdav/Team/small.txt", "hello")
	want(t, "PUT past the writer's own quota, into the share", st, http.StatusCreated, b)
	st, b = as("collab", "PUT", "/webdav/Team/big.bin", strings.Repeat("x", 1<<17))
	want(t, "PUT past the organization's quota", st, http.StatusInsufficientStorage, b)

	// The share renamed to a subscriber's own root's name: the older
	// root, it took the plain name in id order, and collab's client,
	// mapped to /webdav/collab/, wrote into the share. Their own root
	// keeps the name; the share is "collab (id)".
	if _, err := svc.RenameOrgShare(ctx, ac, f.org.ID, root.ID, "collab"); err != nil {
		t.Fatal(err)
	}
	st, b = as("collab", "PUT", "/webdav/collab/mine.txt", "") // their quota is 1 byte
	want(t, "PUT into one's own root's name", st, http.StatusCreated, b)
	if _, err := f.fs.Lookup(ctx, root.ID, "/mine.txt"); err == nil {
		t.Fatal("a PUT to /webdav/collab/ landed in the share renamed to collab")
	}
	st, b = as("collab", "GET", fmt.Sprintf("/webdav/collab%%20(%d)/a.txt", root.ID), "")
	want(t, "GET from the renamed share", st, http.StatusOK, b)

	// The older share renamed to a newer share's name: the newer one
	// had the name first and keeps it. In id order the older took it,
	// and a drive mapped to the newer share wrote into the older, whose
	// administrators need not be the newer's.
	later, err := svc.CreateOrgShare(ctx, ac, f.org.ID, "Later")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetSubscribers(ctx, ac, f.org.ID, later.ID, share.Subscribers{Persons: []share.Entry{
		{ID: collab.ID, Channel: "webdav", Role: "COLLABORATOR"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RenameOrgShare(ctx, ac, f.org.ID, root.ID, "Later"); err != nil {
		t.Fatal(err)
	}
	st, b = as("collab", "PUT", "/webdav/Later/later.txt", "x")
	want(t, "PUT into the newer share's name", st, http.StatusCreated, b)
	if _, err := f.fs.Lookup(ctx, later.ID, "/later.txt"); err != nil {
		t.Fatalf("a PUT to /webdav/Later/ landed in the older share renamed to Later: %v", err)
	}
	st, b = as("collab", "GET", fmt.Sprintf("/webdav/Later%%20(%d)/a.txt", root.ID), "")
	want(t, "GET from the older share, renamed", st, http.StatusOK, b)

	// A rename that strings.EqualFold takes for no change ("ſam" to
	// "sam") is one to another mount name, which folds with ToLower:
	// the older share renamed so after a newer "sam" was made took its
	// name with the time it took "ſam", and the newer's drive wrote
	// into it.
	if _, err := svc.RenameOrgShare(ctx, ac, f.org.ID, root.ID, "ſam"); err != nil {
		t.Fatal(err)
	}
	sam, err := svc.CreateOrgShare(ctx, ac, f.org.ID, "sam")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetSubscribers(ctx, ac, f.org.ID, sam.ID, share.Subscribers{Persons: []share.Entry{
		{ID: collab.ID, Channel: "webdav", Role: "COLLABORATOR"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RenameOrgShare(ctx, ac, f.org.ID, root.ID, "sam"); err != nil {
		t.Fatal(err)
	}
	st, b = as("collab", "PUT", "/webdav/sam/sam.txt", "x")
	want(t, "PUT into the newer share's name", st, http.StatusCreated, b)
	if _, err := f.fs.Lookup(ctx, sam.ID, "/sam.txt"); err != nil {
		t.Fatalf("a PUT to /webdav/sam/ landed in the older share renamed from ſam: %v", err)
	}
}
