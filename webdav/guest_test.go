package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"berth/account"
)

// TestGuestOverWebDAV: a guest signs in over WebDAV with its password
// but reaches nothing (nothing is shared with it yet): no mounts, no
// quota figures, and a person's root of its own organization is 404 for
// every method, with nothing stored. A guest of a disabled organization
// is refused.
func TestGuestOverWebDAV(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	g, err := f.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: f.person.ID, OrganizationID: f.org.ID,
		Email: "gus@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	as := func(method, path, body string, hdr ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(g.Email, password)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		st, _, b := f.send(req)
		return st, b
	}
	const allprop = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`
	st, b := as("PROPFIND", "/webdav/", allprop, "Depth", "1")
	want(t, "PROPFIND /webdav/ as a guest", st, http.StatusMultiStatus, b)
	if strings.Count(b, "<D:response>") != 1 || strings.Contains(b, "alice") || strings.Contains(b, "quota-available-bytes>") {
		t.Errorf("a guest's /webdav/ lists more than itself, or quota figures: %s", b)
	}
	for _, m := range []struct{ method, path, body string }{
		{"PROPFIND", "/webdav/alice/", allprop},
		{"GET", "/webdav/alice/", ""},
		{"PUT", "/webdav/alice/planted.txt", "x"},
		{"MKCOL", "/webdav/alice/planted", ""},
		{"DELETE", "/webdav/alice/", ""},
	} {
		st, b := as(m.method, m.path, m.body, "Depth", "0")
		if st != http.StatusNotFound && st != http.StatusForbidden && st != http.StatusMethodNotAllowed && st != http.StatusConflict {
			t.Errorf("%s %s as a guest: %d %s", m.method, m.path, st, b)
		}
	}
	for _, p := range []string{"/planted.txt", "/planted"} {
		if _, err := f.lookup(p); err == nil {
			t.Errorf("a guest stored %s in alice's root", p)
		}
	}
	child, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	cg, err := f.accounts.CreateGuest(ctx, account.GuestInput{OrganizationID: child.ID, Email: "cg@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	g = cg
	st, b = as("PROPFIND", "/webdav/", allprop, "Depth", "0")
	want(t, "the child's guest", st, http.StatusMultiStatus, b)
	if _, err := f.accounts.DisableOrganization(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	st, b = as("PROPFIND", "/webdav/", allprop, "Depth", "0")
	want(t, "a guest of a disabled organization", st, http.StatusForbidden, b)
	if _, err := f.accounts.DeleteOrganization(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	st, b = as("PROPFIND", "/webdav/", allprop, "Depth", "0")
	want(t, "a guest of a deleted organization", st, http.StatusForbidden, b)
}
