package share_test

import (
	"context"
	"errors"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
)

// tenants is the permission model's cast: a top-level organization with
// an administrator and a plain person, a child organization with the
// same, and another top-level organization with its administrator.
type tenants struct {
	st                   *berthtest.Stack
	svc                  *share.Service
	top, child, other    account.Organization
	topAdmin, topPerson  account.Caller
	kidAdmin, kidPerson  account.Caller
	otherAdmin           account.Caller
	kidPersonRoot        vfs.Root
	nobodyCreatesInChild account.Organization // a child with admin_create_users false
}

func newTenants(t *testing.T) *tenants {
	t.Helper()
	ctx := context.Background()
	w := &tenants{st: berthtest.New(t, berthtest.Options{})}
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts})
	w.top = w.st.Org
	org := func(name string, parent uint64, pol *account.Policy) account.Organization {
		t.Helper()
		o, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: name, ParentID: parent, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	w.child = org("Child", w.top.ID, nil)
	w.other = org("Other", 0, nil)
	pol := account.DefaultPolicy()
	pol.AdminCreateUsers = false
	w.nobodyCreatesInChild = org("Strict", w.top.ID, &pol)
	person := func(name string, org uint64, admin bool) account.Caller {
		t.Helper()
		p, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: password, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return caller(t, w.st, p.ID)
	}
	w.topAdmin = person("topadmin", w.top.ID, true)
	w.topPerson = person("topperson", w.top.ID, false)
	w.kidAdmin = person("kidadmin", w.child.ID, true)
	w.kidPerson = person("kidperson", w.child.ID, false)
	w.otherAdmin = person("otheradmin", w.other.ID, true)
	var err error
	w.kidPersonRoot, err = w.svc.NewRoot(ctx, w.kidPerson.Person, "kidperson", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	w.kidPerson = caller(t, w.st, w.kidPerson.Person.ID)
	return w
}

// TestOrganizationModel walks every organization action as every kind of
// caller (docs/api.md "Who may do what").
func TestOrganizationModel(t *testing.T) {
	ctx := context.Background()
	w := newTenants(t)
	const ok, forbidden, notFound = "ok", "forbidden", "not found"
	// A grandchild under the child without admin_create_users, which
	// allows it, and its administrator: one the child's administrators
	// could have made, or promoted, and signed in as.
	strictGrand, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "StrictGrand", ParentID: w.nobodyCreatesInChild.ID})
	if err != nil {
		t.Fatal(err)
	}
	sga, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: strictGrand.ID, Username: "sgadmin", Email: "sgadmin@example.com", Password: password, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	strictGrandAdmin := caller(t, w.st, sga.ID)
	for _, tt := range []struct {
		who  string
		c    account.Caller
		org  account.Organization
		want [4]string // OrgRead, OrgManage, OrgCreateUsers, OrgGovern
	}{
		{"top admin, own top-level org", w.topAdmin, w.top, [4]string{ok, ok, ok, ok}},
		{"top admin, child", w.topAdmin, w.child, [4]string{ok, ok, ok, ok}},
		{"top admin, child without admin_create_users", w.topAdmin, w.nobodyCreatesInChild, [4]string{ok, ok, ok, ok}},
		{"top admin, other tenant", w.topAdmin, w.other, [4]string{notFound, notFound, notFound, notFound}},
		{"plain person, own org", w.topPerson, w.top, [4]string{ok, forbidden, forbidden, forbidden}},
		{"plain person, child org", w.topPerson, w.child, [4]string{notFound, notFound, notFound, notFound}},
		{"child admin, own org", w.kidAdmin, w.child, [4]string{ok, ok, ok, forbidden}},
		{"child admin, parent", w.kidAdmin, w.top, [4]string{notFound, notFound, notFound, notFound}},
		{"child admin, sibling", w.kidAdmin, w.nobodyCreatesInChild, [4]string{notFound, notFound, notFound, notFound}},
		{"child person, own org", w.kidPerson, w.child, [4]string{ok, forbidden, forbidden, forbidden}},
		{"other admin, our top", w.otherAdmin, w.top, [4]string{notFound, notFound, notFound, notFound}},
		{"grandchild admin under a child without admin_create_users", strictGrandAdmin, strictGrand, [4]string{ok, ok, forbidden, forbidden}},
		{"top admin, grandchild under a child without admin_create_users", w.topAdmin, strictGrand, [4]string{ok, ok, ok, ok}},
	} {
		t.Run(tt.who, func(t *testing.T) {
			for act, want := range tt.want {
				_, err := w.svc.Organization(ctx, tt.c, tt.org.ID, share.OrgAction(act))
				if got := outcome(err); got != want {
					t.Errorf("action %d: %s (%v), want %s", act, got, err, want)
				}
			}
		})
	}
	if _, err := w.svc.Organization(ctx, w.topAdmin, 999, share.OrgRead); !errors.Is(err, share.ErrNotFound) {
		t.Errorf("a missing organization: %v, want ErrNotFound", err)
	}
	// A refusal says why.
	_, err = w.svc.Organization(ctx, w.kidAdmin, w.child.ID, share.OrgGovern)
	var r *share.Refusal
	if !errors.As(err, &r) || r.Description() == "" {
		t.Errorf("refusal %v carries no reason", err)
	}
}

// TestPersonModel walks the person actions.
func TestPersonModel(t *testing.T) {
	ctx := context.Background()
	w := newTenants(t)
	const ok, forbidden, notFound = "ok", "forbidden", "not found"
	for _, tt := range []struct {
		who    string
		c      account.Caller
		target account.Person
		want   [4]string // PersonRead, PersonUpdateSelf, PersonAdminister, PersonDelete
	}{
		{"self", w.kidPerson, w.kidPerson.Person, [4]string{ok, ok, forbidden, forbidden}},
		{"admin, self", w.kidAdmin, w.kidAdmin.Person, [4]string{ok, ok, ok, forbidden}},
		{"child admin, child person", w.kidAdmin, w.kidPerson.Person, [4]string{ok, ok, ok, ok}},
		{"top admin, child person", w.topAdmin, w.kidPerson.Person, [4]string{ok, ok, ok, ok}},
		{"child admin, top person", w.kidAdmin, w.topPerson.Person, [4]string{notFound, notFound, notFound, notFound}},
		{"plain person, colleague", w.topPerson, w.topAdmin.Person, [4]string{notFound, notFound, notFound, notFound}},
		{"other tenant's admin", w.otherAdmin, w.kidPerson.Person, [4]string{notFound, notFound, notFound, notFound}},
	} {
		t.Run(tt.who, func(t *testing.T) {
			for act, want := range tt.want {
				_, err := w.svc.Person(ctx, tt.c, tt.target.ID, share.PersonAction(act))
				if got := outcome(err); got != want {
					t.Errorf("action %d: %s (%v), want %s", act, got, err, want)
				}
			}
		})
	}
}

// TestAdminBrowseFiles: with admin_browse_files in both the policy of a
// person's organization and their own organization's, the administrators
// of that organization and those above it read (never change) the
// person's roots; without it on either side, or from outside, the roots
// do not exist. The administrator's own side binds them everywhere they
// manage, as admin_create_users does (a top-level organization's, which
// its administrators set themselves, only in it): before, a child's administrator
// whom the parent withheld it from made a grandchild, turned it on there
// and read its persons' roots.
func TestAdminBrowseFiles(t *testing.T) {
	ctx := context.Background()
	w := newTenants(t)
	setBrowse := func(org uint64, on bool) {
		t.Helper()
		if _, err := w.st.Accounts.UpdatePolicy(ctx, org, func(p *account.Policy) error { p.AdminBrowseFiles = on; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// The child's administrator makes a grandchild, with a person and
	// their root, and turns admin_browse_files on there.
	grand, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Grandchild", ParentID: w.child.ID})
	if err != nil {
		t.Fatal(err)
	}
	setBrowse(grand.ID, true)
	gp, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: grand.ID, Username: "grandperson", Email: "grandperson@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	gpRoot, err := w.svc.NewRoot(ctx, gp, "grandperson", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: grand.ID, Username: "grandadmin", Email: "grandadmin@example.com", Password: password, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	const browse = share.View | share.Read
	for _, tt := range []struct {
		name string
		// top and child are admin_browse_files in those policies
		// (the grandchild's is on throughout).
		top, child bool
		c          func() account.Caller
		root       uint64
		want       share.Perm // 0: ErrNoRoot
	}{
		{"the owner", false, false, func() account.Caller { return w.kidPerson }, w.kidPersonRoot.ID, share.Owner},
		{"child admin, child's policy withholds it", false, false, func() account.Caller { return w.kidAdmin }, w.kidPersonRoot.ID, 0},
		{"top admin, child's policy withholds it", true, false, func() account.Caller { return w.topAdmin }, w.kidPersonRoot.ID, 0},
		{"child admin, child's policy allows it", false, true, func() account.Caller { return w.kidAdmin }, w.kidPersonRoot.ID, browse},
		{"top admin, both policies allow it", true, true, func() account.Caller { return w.topAdmin }, w.kidPersonRoot.ID, browse},
		{"top admin, own top-level policy withholds it", false, true, func() account.Caller { return w.topAdmin }, w.kidPersonRoot.ID, browse},
		{"plain person", true, true, func() account.Caller { return w.topPerson }, w.kidPersonRoot.ID, 0},
		{"other tenant's admin", true, true, func() account.Caller { return w.otherAdmin }, w.kidPersonRoot.ID, 0},
		{"child admin withheld, grandchild allows it", true, false, func() account.Caller { return w.kidAdmin }, gpRoot.ID, 0},
		{"child admin allowed, grandchild", false, true, func() account.Caller { return w.kidAdmin }, gpRoot.ID, browse},
		{"grandchild admin, child and grandchild allow it, the top-level withholds it", false, true, func() account.Caller { return caller(t, w.st, ga.ID) }, gpRoot.ID, browse},
		// The child's administrator made the grandchild's administrator
		// (admin_create_users), knows their password and browses as them.
		{"grandchild admin, child withholds it, grandchild allows it", false, false, func() account.Caller { return caller(t, w.st, ga.ID) }, gpRoot.ID, 0},
		{"top admin, child withholds it, grandchild allows it", true, false, func() account.Caller { return w.topAdmin }, gpRoot.ID, browse},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setBrowse(w.top.ID, tt.top)
			setBrowse(w.child.ID, tt.child)
			c, err := w.st.Accounts.Caller(ctx, tt.c().Person.ID)
			if err != nil {
				t.Fatal(err)
			}
			a, err := w.svc.Root(ctx, c, tt.root)
			switch {
			case tt.want == 0 && !errors.Is(err, share.ErrNoRoot):
				t.Errorf("%v %v, want ErrNoRoot", a.Perms, err)
			case tt.want != 0 && (err != nil || a.Perms != tt.want):
				t.Errorf("%v %v, want %v", a.Perms, err, tt.want)
			}
		})
	}
}

func outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, share.ErrForbidden):
		return "forbidden"
	case errors.Is(err, share.ErrNotFound):
		return "not found"
	}
	return err.Error()
}
