package account

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"berth/kv"
)

// tree is three levels: top > mid > leaf, with a sibling of mid.
type tree struct {
	top, mid, leaf, sibling Organization
}

func newTree(t *testing.T, s *Service, top *Policy) tree {
	t.Helper()
	ctx := context.Background()
	var tr tree
	var err error
	if tr.top, err = s.CreateOrganization(ctx, OrganizationInput{Name: "Top", Policy: top}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dst    *Organization
		parent uint64
		name   string
	}{{&tr.mid, tr.top.ID, "Mid"}, {&tr.leaf, 0, "Leaf"}, {&tr.sibling, tr.top.ID, "Sibling"}} {
		if c.dst == &tr.leaf {
			c.parent = tr.mid.ID
		}
		if *c.dst, err = s.CreateOrganization(ctx, OrganizationInput{Name: c.name, ParentID: c.parent}); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func TestChain(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	tr := newTree(t, s, nil)
	for _, tt := range []struct {
		name string
		id   uint64
		want []uint64
		err  error
	}{
		{"top-level", tr.top.ID, []uint64{tr.top.ID}, nil},
		{"child", tr.mid.ID, []uint64{tr.mid.ID, tr.top.ID}, nil},
		{"grandchild", tr.leaf.ID, []uint64{tr.leaf.ID, tr.mid.ID, tr.top.ID}, nil},
		{"missing", 999, nil, ErrNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.Chain(ctx, tt.id)
			if !errors.Is(err, tt.err) || !slices.Equal(got, tt.want) {
				t.Fatalf("Chain(%d) = %v, %v; want %v, %v", tt.id, got, err, tt.want, tt.err)
			}
		})
	}
	if !Within([]uint64{tr.leaf.ID, tr.mid.ID, tr.top.ID}, tr.mid.ID) || Within([]uint64{tr.leaf.ID, tr.mid.ID}, tr.sibling.ID) {
		t.Fatal("Within answers wrongly")
	}
}

// TestTreeLimits: depth, num_orgs_maximum over the subtree, a parent that
// cannot move or be missing.
func TestTreeLimits(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	pol := DefaultPolicy()
	pol.NumOrgsMaximum = 3
	tr := newTree(t, s, &pol) // top holds mid, leaf and sibling

	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Third", ParentID: tr.top.ID}); !errors.Is(err, ErrOrgLimitExceeded) {
		t.Fatalf("a fourth organization under num_orgs_maximum 3: %v, want ErrOrgLimitExceeded", err)
	}
	// The limit is on the whole subtree: mid, whose own policy has no
	// limit, takes no more either (nesting is no way around it).
	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Leaf 2", ParentID: tr.mid.ID}); !errors.Is(err, ErrOrgLimitExceeded) {
		t.Fatalf("a child of mid under top's num_orgs_maximum 3: %v, want ErrOrgLimitExceeded", err)
	}
	if _, err := s.UpdatePolicy(ctx, tr.top.ID, func(p *Policy) error { p.NumOrgsMaximum = 4; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Leaf 2", ParentID: tr.mid.ID}); err != nil {
		t.Fatalf("a second child of mid: %v", err)
	}
	if _, err := s.UpdateOrganization(ctx, tr.leaf.ID, func(o *Organization) error { o.ParentID = tr.sibling.ID; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("moving an organization: %v, want ErrInvalid", err)
	}
	if _, err := s.UpdateOrganization(ctx, tr.leaf.ID, func(o *Organization) error { o.Deleted = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if o, _ := s.Organization(ctx, tr.leaf.ID); o.Deleted {
		t.Fatal("UpdateOrganization changed Deleted")
	}

	// MaxOrgDepth levels, and not one more.
	if _, err := s.UpdatePolicy(ctx, tr.top.ID, func(p *Policy) error { p.NumOrgsMaximum = 0; return nil }); err != nil {
		t.Fatal(err)
	}
	parent := tr.leaf.ID // depth 3
	for d := 4; d <= MaxOrgDepth; d++ {
		o, err := s.CreateOrganization(ctx, OrganizationInput{Name: fmt.Sprintf("Depth %d", d), ParentID: parent})
		if err != nil {
			t.Fatalf("depth %d: %v", d, err)
		}
		parent = o.ID
	}
	var fe *FieldError
	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Too deep", ParentID: parent}); !errors.As(err, &fe) || fe.Field != "parent_id" {
		t.Fatalf("depth %d: %v, want a parent_id FieldError", MaxOrgDepth+1, err)
	}
}

// TestCounts: what an organization holds is counted directly and in
// every ancestor's subtree, in the transactions that change it.
func TestCounts(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	tr := newTree(t, s, nil)
	mk := func(org uint64, name string, admin bool) Person {
		t.Helper()
		p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: pw, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	mk(tr.top.ID, "t1", true)
	mk(tr.mid.ID, "m1", false)
	m2 := mk(tr.mid.ID, "m2", true)
	l1 := mk(tr.leaf.ID, "l1", false)
	if _, err := s.UpsertMachine(ctx, l1.ID, MachineInput{DNSName: "laptop"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePerson(ctx, m2.ID, func(p *Person) error { p.Admin = false; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name            string
		org             uint64
		direct, subtree Counts
	}{
		{"top", tr.top.ID, Counts{Accounts: 1, AdminAccounts: 1, Organizations: 2}, Counts{Accounts: 4, AdminAccounts: 1, Machines: 1, Organizations: 3}},
		{"mid", tr.mid.ID, Counts{Accounts: 2, Organizations: 1}, Counts{Accounts: 3, Machines: 1, Organizations: 1}},
		{"leaf", tr.leaf.ID, Counts{Accounts: 1, Machines: 1}, Counts{Accounts: 1, Machines: 1}},
		{"sibling", tr.sibling.ID, Counts{}, Counts{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d, sub, err := s.Counts(ctx, tt.org)
			if err != nil || d != tt.direct || sub != tt.subtree {
				t.Fatalf("Counts = %+v, %+v, %v; want %+v, %+v", d, sub, err, tt.direct, tt.subtree)
			}
		})
	}
	if _, _, err := s.Counts(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Counts of a missing organization: %v", err)
	}
	persons, total, err := s.Persons(ctx, tr.mid.ID, 1, 10)
	if err != nil || total != 2 || len(persons) != 1 || persons[0].ID != m2.ID {
		t.Fatalf("Persons(mid, 1, 10) = %v, %d, %v", persons, total, err)
	}
	kids, total, err := s.ChildOrganizations(ctx, tr.top.ID, 0, 1)
	if err != nil || total != 2 || len(kids) != 1 || kids[0].ID != tr.mid.ID {
		t.Fatalf("ChildOrganizations(top, 0, 1) = %v, %d, %v", kids, total, err)
	}
}

// TestUserLimitOfAncestors: a parent's num_users_maximum bounds its whole
// subtree, not only its own persons.
func TestUserLimitOfAncestors(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	pol := DefaultPolicy()
	pol.NumUsersMaximum = 2
	tr := newTree(t, s, &pol)
	for i, org := range []uint64{tr.leaf.ID, tr.sibling.ID, tr.mid.ID} {
		_, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org, Username: fmt.Sprint("u", i), Email: fmt.Sprint("u", i, "@example.com"), Password: pw})
		if want := i >= 2; errors.Is(err, ErrUserLimitExceeded) != want || (!want && err != nil) {
			t.Fatalf("person %d: %v, want limit %v", i, err, want)
		}
	}
}

// TestDisabledAncestor: disabling or deleting an organization refuses its
// descendants' persons at login, over their tokens and over remembered
// credentials, and enabling it lets them back (signed in again: the
// session from before is ended).
func TestDisabledAncestor(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	tr := newTree(t, s, nil)
	p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: tr.leaf.ID, Username: "leafy", Email: "leafy@example.com", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	set := func(id uint64, f func(*Organization)) {
		t.Helper()
		if _, err := s.UpdateOrganization(ctx, id, func(o *Organization) error { f(o); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want error) {
		t.Helper()
		if _, err := s.Authenticate(ctx, "leafy", pw); !errors.Is(err, want) {
			t.Fatalf("Authenticate: %v, want %v", err, want)
		}
		if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, want) {
			t.Fatalf("AccessCaller: %v, want %v", err, want)
		}
		if _, err := s.LoginCallerRef(ctx, p.ID, "leafy", p.PasswordHash); !errors.Is(err, want) {
			t.Fatalf("LoginCallerRef: %v, want %v", err, want)
		}
		if _, err := s.ChainLive(ctx, tr.leaf.ID); !errors.Is(err, want) {
			t.Fatalf("ChainLive: %v, want %v", err, want)
		}
	}
	check(nil)
	if c, _ := s.AccessCaller(ctx, toks.AccessToken); !slices.Equal(c.Chain, []uint64{tr.leaf.ID, tr.mid.ID, tr.top.ID}) {
		t.Fatalf("caller chain %v", c.Chain)
	}
	set(tr.mid.ID, func(o *Organization) { o.Active = false })
	check(ErrInactive)
	set(tr.mid.ID, func(o *Organization) { o.Active = true })
	// Enabled again: the session from before is ended (TestSessionCaller).
	if toks, err = s.IssueTokens(ctx, p.ID, 0); err != nil {
		t.Fatal(err)
	}
	check(nil)
	// Deleted is not for UpdateOrganization to set; write it as the
	// deletion does.
	if err := s.db.Update(ctx, func(tx kv.Txn) error {
		var o Organization
		if err := s.get(tx, key(pfxOrg, tr.top.ID), &o, nil); err != nil {
			return err
		}
		o.Deleted = true
		return s.put(tx, key(pfxOrg, o.ID), &o)
	}); err != nil {
		t.Fatal(err)
	}
	check(ErrInactive)
}

// TestEffectivePolicy: a person acts under their organization's policy
// tightened by every ancestor's, so a child's administrators cannot make
// a grandchild with looser limits and put users there (found in review:
// only the person's own organization counted); admin_browse_files too,
// by every ancestor below the top level, or they made an administrator
// there and browsed as them.
func TestEffectivePolicy(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	tr := newTree(t, s, nil)
	set := func(id uint64, f func(*Policy)) {
		t.Helper()
		if _, err := s.UpdatePolicy(ctx, id, func(p *Policy) error { f(p); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	set(tr.top.ID, func(p *Policy) {
		p.MaxFileSize = 1000
		p.ExcludedExtensions = ".exe"
		p.WebDAVEnabled = false
		p.DeactivateTokenFrequency = "2h"
	})
	set(tr.mid.ID, func(p *Policy) {
		p.MaxFileSize = 5000
		p.ExcludedExtensions = ".bat,.EXE"
		p.LockedExtensions = ".pdf"
		p.RequireTwoStepAuth = true
		p.DeactivateTokenFrequency = "1h"
	})
	set(tr.leaf.ID, func(p *Policy) {
		p.MaxFileSize = 0 // as loose as it gets
		p.UserLockFiles = false
		p.WebDAVEnabled = true
		p.DeactivateTokenFrequency = "24h"
		p.AdminBrowseFiles = true // the mid's (default) withholds it
		p.AdminBrowseRemote = true
		p.FileServerEnabled = true // the mid's and the top's (default) withhold it
	})
	p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: tr.leaf.ID, Username: "leafy", Email: "leafy@example.com", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Caller(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := c.Organization.Policy
	for _, tt := range []struct {
		field     string
		got, want any
	}{
		{"max_file_size", got.MaxFileSize, int64(1000)},
		{"excluded_extensions", got.ExcludedExtensions, ".bat,.EXE"},
		{"locked_extensions", got.LockedExtensions, ".pdf"},
		{"webdav_enabled", got.WebDAVEnabled, false},
		{"user_lock_files", got.UserLockFiles, false},
		{"user_create_shares", got.UserCreateShares, true},
		{"require_two_step_auth", got.RequireTwoStepAuth, true},
		{"deactivate_token_frequency", got.DeactivateTokenFrequency, "1h"},
		{"company_id", got.CompanyID, tr.leaf.ID},
		{"admin_browse_files", got.AdminBrowseFiles, false},
		{"admin_browse_remote", got.AdminBrowseRemote, false},
		{"file_server_enabled", got.FileServerEnabled, false},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.field, tt.got, tt.want)
		}
	}
	if !got.ExtensionExcluded("setup.exe") {
		t.Error("the top's .exe is not excluded for a grandchild's person")
	}
	// The organizations' own policies stay as they were set.
	if o, _ := s.Organization(ctx, tr.leaf.ID); o.Policy.MaxFileSize != 0 || !o.Policy.WebDAVEnabled || !o.Policy.AdminBrowseFiles {
		t.Errorf("the leaf's stored policy changed: %+v", o.Policy)
	}
	// A top-level organization's admin_browse_files binds only its own
	// administrators (the top's is the default, off).
	set(tr.mid.ID, func(p *Policy) { p.AdminBrowseFiles = true })
	if c, err := s.Caller(ctx, p.ID); err != nil || !c.Organization.Policy.AdminBrowseFiles {
		t.Errorf("admin_browse_files on in the leaf and the mid, off in the top-level: %v %v", c.Organization.Policy.AdminBrowseFiles, err)
	}
}
