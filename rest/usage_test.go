package rest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/httpserve"
	"berth/vfs"
)

// tenant is a person made for a usage test, with a root counted into the
// ledger as share.NewRoot counts one.
type tenant struct {
	p     account.Person
	root  vfs.Root
	token string
}

// addTenant creates a person of organization org with a root of type typ
// counted into its tallies, and returns it with an access token.
func (f *fixture) addTenant(org uint64, username string, admin bool, typ vfs.RootType) tenant {
	f.t.Helper()
	ctx := context.Background()
	p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: username,
		Email: username + "@example.com", Password: fixturePassword, Admin: admin})
	if err != nil {
		f.t.Fatal(err)
	}
	tn := tenant{p: p, root: f.newRoot(p, username, typ)}
	toks, err := f.accounts.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	tn.token = toks.AccessToken
	return tn
}

// newRoot creates a root of owner counted into their tallies.
func (f *fixture) newRoot(owner account.Person, name string, typ vfs.RootType) vfs.Root {
	f.t.Helper()
	ctx := context.Background()
	tallies, err := f.accounts.RootTallies(ctx, owner, string(typ))
	if err != nil {
		f.t.Fatal(err)
	}
	r, err := f.fs.CreateRootWith(ctx, name, typ, vfs.RootOptions{Tallies: tallies})
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.accounts.AddRoot(ctx, account.RootOwner{RootID: r.ID, PersonID: owner.ID, Type: string(typ)}); err != nil {
		f.t.Fatal(err)
	}
	return r
}

// uploadAs uploads n bytes as the file name into the top folder of root as
// the holder of token.
func (f *fixture) uploadAs(token string, root uint64, name string, n int) (int, []byte) {
	f.t.Helper()
	body, ct := multipartBody(name, bytes.NewReader(bytes.Repeat([]byte{'x'}, n)))
	return f.readAll(f.request(http.MethodPost, fmt.Sprintf("/api/2/files/%d/upload", root), token, body, http.Header{"Content-Type": {ct}}))
}

// usageWorld is Acme (the fixture's organization, alice a plain person
// in it) with an administrator, a child organization Sales with its own
// administrator and a plain person, and another top-level organization.
type usageWorld struct {
	f                           *fixture
	child                       account.Organization
	parentAdmin, childAdmin     tenant
	childPlain, otherOrgsPerson tenant
}

func newUsageWorld(t *testing.T) *usageWorld {
	f := newFixture(t)
	ctx := context.Background()
	w := &usageWorld{f: f}
	var err error
	if w.child, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: "Sales"}); err != nil {
		t.Fatal(err)
	}
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	w.parentAdmin = f.addTenant(f.org.ID, "root-admin", true, vfs.RootSync)
	w.childAdmin = f.addTenant(w.child.ID, "sales-admin", true, vfs.RootSync)
	w.childPlain = f.addTenant(w.child.ID, "sales-bob", false, vfs.RootSync)
	w.otherOrgsPerson = f.addTenant(other.ID, "globex-dave", true, vfs.RootSync)
	return w
}

// TestOrgUsageAccess walks metrics/usage of the child organization and of
// the parent as every kind of caller: only those who manage an
// organization read its usage.
func TestOrgUsageAccess(t *testing.T) {
	w := newUsageWorld(t)
	f := w.f
	child := fmt.Sprintf("/api/2/organization/%d/metrics/usage", w.child.ID)
	parent := fmt.Sprintf("/api/2/organization/%d/metrics/usage", f.org.ID)
	for _, c := range []struct {
		name, token, path string
		status            int
		code              string
	}{
		{"no token", "", child, 401, "access_denied"},
		{"another organization", w.otherOrgsPerson.token, child, 404, "not_found"},
		{"a plain person of the organization", w.childPlain.token, child, 403, "forbidden"},
		{"the child's administrator", w.childAdmin.token, child, 200, ""},
		{"the child's administrator, the parent", w.childAdmin.token, parent, 404, "not_found"},
		{"the parent's administrator", w.parentAdmin.token, child, 200, ""},
		{"the parent's administrator, the parent", w.parentAdmin.token, parent, 200, ""},
		{"a plain person of the parent", f.token, parent, 403, "forbidden"},
		{"no such organization", w.parentAdmin.token, "/api/2/organization/999999/metrics/usage", 404, "not_found"},
		{"not an id", w.parentAdmin.token, "/api/2/organization/x1/metrics/usage", 404, "not_found"},
	} {
		st, body := f.send("GET", c.path, c.token, nil)
		if st != c.status || (c.code != "" && !strings.Contains(string(body), `"error":"`+c.code+`"`)) {
			t.Errorf("%s: %d %s, want %d %s", c.name, st, body, c.status, c.code)
		}
	}
}

// TestOrgUsage: metrics/usage sums the roots of the organization and of
// every descendant, by type, as spec 2.8 writes it; a deleted root leaves
// root_count, but its bytes, still stored, stay in the figures (as
// deleted files and bytes) and in its owner's space_usage until it is
// purged; a person's space_usage is their roots'.
func TestOrgUsage(t *testing.T) {
	w := newUsageWorld(t)
	f := w.f
	backup := f.newRoot(w.childAdmin.p, "laptop", vfs.RootBackup)
	for _, u := range []struct {
		tn   tenant
		root uint64
		n    int
	}{
		{w.childPlain, w.childPlain.root.ID, 1500},
		{w.childAdmin, backup.ID, 2500},
		{w.parentAdmin, w.parentAdmin.root.ID, 700},
	} {
		if st, body := f.uploadAs(u.tn.token, u.root, "f", u.n); st != 200 {
			t.Fatalf("upload: %d %s", st, body)
		}
	}
	var child, parent orgUsage
	st, body := f.send("GET", fmt.Sprintf("/api/2/organization/%d/metrics/usage", w.child.ID), w.parentAdmin.token, nil)
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	decode(t, body, &child)
	want := func(name string, got rootSpaceUsage, roots, files, size int64) {
		t.Helper()
		if got.RootCount != roots || got.FileCount != files || got.PhysicalSize != size || got.HeadSize != size ||
			got.PhysicalSizeFormatted != httpserve.FormatSize(size) || got.Type != "root_space_usage" {
			t.Errorf("%s = %+v, want %d roots, %d files, %d bytes", name, got, roots, files, size)
		}
	}
	want("child user_space_usage", child.UserSpaceUsage, 2, 1, 1500)
	want("child backup_space_usage", child.BackupSpaceUsage, 1, 1, 2500)
	want("child team_share_space_usage", child.TeamShareSpaceUsage, 0, 0, 0)
	want("child total_space_usage", child.TotalSpaceUsage, 3, 2, 4000)
	if child.Type != "organization_usage" || child.Counts.Accounts != 2 || child.Counts.AdminAccounts != 1 ||
		child.Counts.Organizations != 0 || child.Counts.Type != "organization_usage_counts" {
		t.Errorf("child = %+v", child)
	}
	st, body = f.send("GET", fmt.Sprintf("/api/2/organization/%d/metrics/usage", f.org.ID), w.parentAdmin.token, nil)
	if st != 200 {
		t.Fatalf("%d %s", st, body)
	}
	decode(t, body, &parent)
	// alice's root (berthtest's) counts too: 4 sync roots in all.
	want("parent user_space_usage", parent.UserSpaceUsage, 4, 2, 2200)
	want("parent total_space_usage", parent.TotalSpaceUsage, 5, 3, 4700)
	if parent.Counts.Organizations != 1 || parent.Counts.Accounts != 4 {
		t.Errorf("parent counts = %+v, want the child and 4 accounts", parent.Counts)
	}
	// The golden body pins the exact fields of spec 2.8 and 2.5.
	golden(t, "org_usage", body)

	// A person's space_usage is every root of theirs.
	st, body = f.send("GET", "/api/2/person", w.childAdmin.token, nil)
	if st != 200 || !strings.Contains(string(body), `"space_usage":2500,`) {
		t.Errorf("the child administrator's person: %d %s, want space_usage 2500", st, body)
	}
	// A deleted root leaves the live roots, but what it holds is in the
	// trash, stored and counted, until it is purged.
	if err := f.fs.DeleteRoot(context.Background(), backup.ID); err != nil {
		t.Fatal(err)
	}
	_, body = f.send("GET", fmt.Sprintf("/api/2/organization/%d/metrics/usage", f.org.ID), w.parentAdmin.token, nil)
	decode(t, body, &parent)
	if got := parent.TotalSpaceUsage; got.RootCount != 4 || got.FileCount != 2 || got.HeadSize != 2200 ||
		got.DelFileCount != 1 || got.DeletedSize != 2500 || got.PhysicalSize != 4700 {
		t.Errorf("parent total_space_usage after a root's deletion = %+v, want 4 roots, 2 files of 2200 bytes, 1 deleted of 2500", got)
	}
	st, body = f.send("GET", "/api/2/person", w.childAdmin.token, nil)
	if st != 200 || !strings.Contains(string(body), `"space_usage":2500,`) {
		t.Errorf("the child administrator's person after their root's deletion: %d %s, want space_usage 2500", st, body)
	}
	if _, err := f.fs.PurgeDeleted(context.Background(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	_, body = f.send("GET", fmt.Sprintf("/api/2/organization/%d/metrics/usage", f.org.ID), w.parentAdmin.token, nil)
	decode(t, body, &parent)
	want("parent total_space_usage after the root's purge", parent.TotalSpaceUsage, 4, 2, 2200)
	if got := parent.TotalSpaceUsage; got.DelFileCount != 0 || got.DeletedSize != 0 {
		t.Errorf("parent total_space_usage after the root's purge = %+v, want nothing deleted", got)
	}
	st, body = f.send("GET", "/api/2/person", w.childAdmin.token, nil)
	if st != 200 || !strings.Contains(string(body), `"space_usage":0,`) {
		t.Errorf("the child administrator's person after their root's purge: %d %s, want space_usage 0", st, body)
	}
}

// TestParentQuotaBoundsChild: the parent's space_quota bounds a person of
// its child organization, over REST (409 policy_error), counting what the
// whole subtree holds; the person's own quota bounds their roots.
func TestParentQuotaBoundsChild(t *testing.T) {
	w := newUsageWorld(t)
	f := w.f
	ctx := context.Background()
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error {
		p.SpaceQuota = "5000"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st, body := f.uploadAs(w.parentAdmin.token, w.parentAdmin.root.ID, "a", 3000); st != 200 {
		t.Fatalf("upload under the quota: %d %s", st, body)
	}
	st, body := f.uploadAs(w.childPlain.token, w.childPlain.root.ID, "b", 2500)
	wantError(t, st, body, http.StatusConflict, "policy_error")
	if u, _ := f.fs.Usage(ctx, w.childPlain.root.ID); u.FileCount != 0 {
		t.Errorf("a refused upload stored something: %+v", u)
	}
	if st, body := f.uploadAs(w.childPlain.token, w.childPlain.root.ID, "b", 2000); st != 200 {
		t.Fatalf("upload to the quota's last byte: %d %s", st, body)
	}
	// A person's quota under the organization's.
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error {
		p.SpaceQuota = "0"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePerson(ctx, w.childAdmin.p.ID, func(p *account.Person) error {
		p.SpaceQuota = 100
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	st, body = f.uploadAs(w.childAdmin.token, w.childAdmin.root.ID, "c", 101)
	wantError(t, st, body, http.StatusConflict, "policy_error")
	if st, body := f.uploadAs(w.childAdmin.token, w.childAdmin.root.ID, "c", 100); st != 200 {
		t.Fatalf("upload to the person's quota: %d %s", st, body)
	}
}

// BenchmarkOrgUsage: metrics/usage of an organization with 100 children
// and 10,000 roots among them, besides alice's and the administrator's
// (issue 12: under 5 ms). The answer reads four tallies and one count
// record, so it costs the same at any size.
func BenchmarkOrgUsage(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	admin := f.addTenant(f.org.ID, "root-admin", true, vfs.RootSync)
	const children, roots = 100, 10_000
	kids := make([]account.Organization, children)
	for i := range kids {
		var err error
		if kids[i], err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: fmt.Sprint("child ", i)}); err != nil {
			b.Fatal(err)
		}
	}
	types := []vfs.RootType{vfs.RootSync, vfs.RootShare, vfs.RootBackup}
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := g; i < roots; i += 8 {
				owner := account.Person{OrganizationID: kids[i%children].ID} // the organization's own
				tallies, err := f.accounts.RootTallies(ctx, owner, string(types[i%3]))
				if err == nil {
					_, err = f.fs.CreateRootWith(ctx, fmt.Sprint("r", i), types[i%3], vfs.RootOptions{Tallies: tallies})
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	path := fmt.Sprintf("/api/2/organization/%d/metrics/usage", f.org.ID)
	var body orgUsage
	st, raw := f.send("GET", path, admin.token, nil)
	if st != 200 {
		b.Fatalf("%d %s", st, raw)
	}
	decode(b, raw, &body)
	if body.TotalSpaceUsage.RootCount != roots+2 || body.Counts.Organizations != children {
		b.Fatalf("usage of %d roots and %d organizations, want %d and %d", body.TotalSpaceUsage.RootCount, body.Counts.Organizations, roots+2, children)
	}
	for b.Loop() {
		if st, raw := f.send("GET", path, admin.token, nil); st != 200 {
			b.Fatalf("%d %s", st, raw)
		}
	}
}
