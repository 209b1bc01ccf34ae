package webdav_test

import (
	"context"
	"net/http"
	"testing"

	"berth/account"
)

// TestCachedLoginEnds: a Basic login the handler remembers stops working
// at once when the password changes, the person or the organization is
// disabled, or the policy turns WebDAV off.
func TestCachedLoginEnds(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	propfind := func(what, pw string, wantStatus int) {
		t.Helper()
		req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
		req.Header.Set("Depth", "0")
		req.SetBasicAuth("alice", pw)
		st, _, body := f.send(req)
		want(t, what, st, wantStatus, body)
	}
	setPerson := func(active bool) {
		t.Helper()
		if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Active = active; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setOrg := func(fn func(o *account.Organization)) {
		t.Helper()
		if _, err := f.accounts.UpdateOrganization(ctx, f.org.ID, func(o *account.Organization) error { fn(o); return nil }); err != nil {
			t.Fatal(err)
		}
	}

	propfind("first login", password, http.StatusMultiStatus)
	propfind("remembered login", password, http.StatusMultiStatus)
	const newPassword = "another horse battery"
	if err := f.accounts.SetPassword(ctx, f.person.ID, newPassword); err != nil {
		t.Fatal(err)
	}
	propfind("old password after a change", password, http.StatusUnauthorized)
	propfind("new password", newPassword, http.StatusMultiStatus)
	propfind("new password remembered", newPassword, http.StatusMultiStatus)

	setPerson(false)
	propfind("disabled person", newPassword, http.StatusForbidden)
	setPerson(true)
	propfind("enabled again", newPassword, http.StatusMultiStatus)

	setOrg(func(o *account.Organization) { o.Active = false })
	propfind("disabled organization", newPassword, http.StatusForbidden)
	setOrg(func(o *account.Organization) { o.Active = true })
	propfind("organization enabled again", newPassword, http.StatusMultiStatus)

	// A rename ends the remembered login under the old name.
	if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Username = "alicia"; return nil }); err != nil {
		t.Fatal(err)
	}
	propfind("old username after a rename", newPassword, http.StatusUnauthorized)
	if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Username = "alice"; return nil }); err != nil {
		t.Fatal(err)
	}
	propfind("username given back", newPassword, http.StatusMultiStatus)

	setOrg(func(o *account.Organization) { o.Policy.WebDAVEnabled = false })
	propfind("WebDAV disabled by policy", newPassword, http.StatusForbidden)
}
