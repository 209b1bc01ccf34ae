package account

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/kv"
)

// TestBootstrap: the first organization and its administrator are stored
// together or not at all, and only once.
func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	opts := testOptions()
	opts.Journal = j
	s := newService(t, opts)
	org := OrganizationInput{Name: "Default"}

	// An administrator refused (password too short) stores no organization
	// either, so the next start runs the first run again.
	if _, _, err := s.Bootstrap(ctx, org, PersonInput{Username: "admin", Email: "admin@localhost", Password: "short"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bootstrap with a bad password: %v, want ErrInvalid", err)
	}
	if has, err := s.HasOrganizations(ctx); err != nil || has {
		t.Fatalf("after a refused bootstrap: organizations %v, %v", has, err)
	}

	o, p, err := s.Bootstrap(ctx, org, PersonInput{Username: "admin", Email: "admin@localhost", Password: pw, Admin: true, RootID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if p.OrganizationID != o.ID || !p.Admin || p.RootID != 7 || o.Name != "Default" {
		t.Fatalf("bootstrap made %+v and %+v", o, p)
	}
	// Both are in the activity log: the administrator's creation was
	// not, so the log began with an organization nobody was created in.
	if acts := j.acts(); strings.Join(acts, " ") != ActOrganizationCreated+" "+ActPersonCreated {
		t.Fatalf("bootstrap recorded %v, want %s and %s", acts, ActOrganizationCreated, ActPersonCreated)
	}
	if got, err := s.Authenticate(ctx, "admin", pw); err != nil || got.ID != p.ID {
		t.Fatalf("the administrator cannot log in: %+v %v", got, err)
	}
	if _, _, err := s.Bootstrap(ctx, OrganizationInput{Name: "Second"}, PersonInput{Username: "other", Email: "o@localhost", Password: pw}); !errors.Is(err, ErrExists) {
		t.Fatalf("a second bootstrap: %v, want ErrExists", err)
	}
	if _, err := s.PersonByLogin(ctx, "other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the second bootstrap stored its person: %v", err)
	}
}

func TestOrganization(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	has, err := s.HasOrganizations(ctx)
	if err != nil || has {
		t.Fatalf("HasOrganizations on empty store = %v, %v", has, err)
	}
	trial := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	org, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Acme Corp", TrialUntil: &trial})
	if err != nil {
		t.Fatal(err)
	}
	if org.ID == 0 || org.Slug != "acme-corp" || !org.Active || org.Policy.CompanyID != org.ID {
		t.Fatalf("created %+v", org)
	}
	if org.Policy != withCompany(DefaultPolicy(), org.ID) {
		t.Fatalf("policy %+v, want defaults", org.Policy)
	}
	if has, _ := s.HasOrganizations(ctx); !has {
		t.Fatal("HasOrganizations = false after create")
	}
	got, err := s.Organization(ctx, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Created.Equal(org.Created) || got.TrialUntil == nil || !got.TrialUntil.Equal(trial) || got.Name != org.Name {
		t.Fatalf("read back %+v, want %+v", got, org)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: org.ID, Name: "Acme Labs"})
	if err != nil || child.ParentID != org.ID || child.ID == org.ID {
		t.Fatalf("child %+v, %v", child, err)
	}

	upd, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error {
		p.MaxFileSize = 1 << 20
		p.ExcludedExtensions = ".exe,.BAT"
		p.SpaceQuota = "1000000"
		p.CompanyID = 999 // ignored
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if upd.Policy.MaxFileSize != 1<<20 || upd.Policy.CompanyID != org.ID || upd.Policy.SpaceQuotaBytes() != 1000000 {
		t.Fatalf("updated policy %+v", upd.Policy)
	}
	if !upd.Policy.ExtensionExcluded("x.bat") || !upd.Policy.ExtensionExcluded("Setup.EXE") || upd.Policy.ExtensionExcluded("notes.txt") {
		t.Fatal("ExtensionExcluded wrong")
	}
	got, _ = s.Organization(ctx, org.ID)
	if got.Policy != upd.Policy {
		t.Fatalf("stored policy %+v, want %+v", got.Policy, upd.Policy)
	}

	if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.ParentID = child.ID; return nil }); !errors.Is(err, ErrInvalid) {
		t.Fatalf("cycle: %v, want ErrInvalid", err)
	}

	tests := []struct {
		name string
		err  error
		call func() error
	}{
		{"missing org", ErrNotFound, func() error { _, err := s.Organization(ctx, 12345); return err }},
		{"update missing org", ErrNotFound, func() error {
			_, err := s.UpdatePolicy(ctx, 12345, func(*Policy) error { return nil })
			return err
		}},
		{"empty name", ErrInvalid, func() error { _, err := s.CreateOrganization(ctx, OrganizationInput{}); return err }},
		{"bad email", ErrInvalid, func() error {
			_, err := s.CreateOrganization(ctx, OrganizationInput{Name: "x", Email: "not an address"})
			return err
		}},
		{"missing parent", ErrInvalid, func() error {
			_, err := s.CreateOrganization(ctx, OrganizationInput{Name: "x", ParentID: 999})
			return err
		}},
		{"negative max size", ErrInvalid, func() error {
			_, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.MaxFileSize = -1; return nil })
			return err
		}},
		{"quota not digits", ErrInvalid, func() error {
			_, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.SpaceQuota = "10 GB"; return nil })
			return err
		}},
		{"extension without dot", ErrInvalid, func() error {
			_, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.ExcludedExtensions = "exe"; return nil })
			return err
		}},
		{"fn error passes through", context.Canceled, func() error {
			_, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { return context.Canceled })
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
		})
	}
	var fe *FieldError
	_, err = s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.SpaceQuota = "x"; return nil })
	if !errors.As(err, &fe) || fe.Field != "space_quota" {
		t.Fatalf("field error %v", err)
	}
	// A failed update changed nothing.
	if got, _ := s.Organization(ctx, org.ID); got.Policy != upd.Policy {
		t.Fatal("failed update was stored")
	}
}

func withCompany(p Policy, id uint64) Policy {
	p.CompanyID = id
	return p
}

func TestUserLimit(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	pol := DefaultPolicy()
	pol.NumUsersMaximum = 1
	org, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Tiny", Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "a", Email: "a@x.example", Password: pw}); err != nil {
		t.Fatal(err)
	}
	_, err = s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "b", Email: "b@x.example", Password: pw})
	if !errors.Is(err, ErrUserLimitExceeded) {
		t.Fatalf("second person: %v", err)
	}
}

// memJournal keeps the changes recorded, in order.
type memJournal struct {
	mu      sync.Mutex
	changes []Change
}

func (j *memJournal) Record(_ kv.Txn, c Change) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.changes = append(j.changes, c)
	return nil
}

func (j *memJournal) last() Change {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.changes) == 0 {
		return Change{}
	}
	return j.changes[len(j.changes)-1]
}

// TestOrganizationJournal: every change of an organization is one record
// with its activity and, for updates, the fields that changed.
func TestOrganizationJournal(t *testing.T) {
	ctx := WithActor(context.Background(), Actor{Type: "person", PersonID: 7})
	j := &memJournal{}
	o := testOptions()
	o.Journal = j
	s := newService(t, o)
	top, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Top"})
	if err != nil {
		t.Fatal(err)
	}
	if c := j.last(); c.Activity != ActOrganizationCreated || c.OnCompanyID != top.ID || c.Actor.PersonID != 7 || c.OnType != "organization" {
		t.Fatalf("create recorded %+v", c)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Child", ParentID: top.ID})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name     string
		do       func() error
		activity string
		data     string
	}{
		{"update", func() error {
			_, err := s.UpdateOrganization(ctx, child.ID, func(o *Organization) error { o.Description, o.Hostname = "d", "h.example"; return nil })
			return err
		}, ActOrganizationUpdated, "description,hostname"},
		{"policy", func() error {
			_, err := s.UpdatePolicy(ctx, child.ID, func(p *Policy) error { p.WebDAVEnabled, p.ADEnabled, p.TrimRevisionsX = false, true, "3"; return nil })
			return err
		}, ActPolicyUpdated, "policy.ad_enabled,policy.trim_revisions_x,policy.webdav_enabled"},
		{"disable", func() error { _, err := s.DisableOrganization(ctx, child.ID); return err }, ActOrganizationDisabled, ""},
		{"enable", func() error { _, err := s.EnableOrganization(ctx, child.ID); return err }, ActOrganizationEnabled, ""},
		{"delete", func() error { _, err := s.DeleteOrganization(ctx, child.ID); return err }, ActOrganizationDeleted, ""},
	}
	for _, st := range steps {
		n := len(j.changes)
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		c := j.last()
		if len(j.changes) != n+1 || c.Activity != st.activity || c.Data != st.data || c.OnCompanyID != child.ID {
			t.Fatalf("%s recorded %d changes, last %+v", st.name, len(j.changes)-n, c)
		}
	}
	// Enabling an enabled organization, or an update that changes no
	// field, changes and records nothing.
	n := len(j.changes)
	if _, err := s.EnableOrganization(ctx, top.ID); err != nil || len(j.changes) != n {
		t.Fatalf("enable of an enabled organization: %v, %d records", err, len(j.changes)-n)
	}
	if _, err := s.UpdatePolicy(ctx, top.ID, func(p *Policy) error { p.WebDAVEnabled = true; return nil }); err != nil || len(j.changes) != n {
		t.Fatalf("a policy update that changes nothing: %v, %d records", err, len(j.changes)-n)
	}
}

// TestDeleteOrganization: a deleted organization is gone for every
// change, frees its place under num_orgs_maximum, leaves its parent's
// list and counts, and its persons cannot sign in.
func TestDeleteOrganization(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	pol := DefaultPolicy()
	pol.NumOrgsMaximum = 2 // the child and the grandchild: the whole subtree counts
	top, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Top", Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Child", ParentID: top.ID})
	if err != nil {
		t.Fatal(err)
	}
	grand, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Grand", ParentID: child.ID})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: grand.ID, Username: "g", Email: "g@x.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Second", ParentID: top.ID}); !errors.Is(err, ErrOrgLimitExceeded) {
		t.Fatalf("second child past num_orgs_maximum 2: %v", err)
	}
	if _, err := s.DeleteOrganization(ctx, top.ID); !errors.Is(err, ErrInvalid) {
		t.Fatalf("delete of a top-level organization: %v, want ErrInvalid", err)
	}
	del, err := s.DeleteOrganization(ctx, child.ID)
	if err != nil || !del.Deleted || !del.Active {
		t.Fatalf("delete: %+v %v", del, err)
	}
	d, sub, err := s.Counts(ctx, top.ID)
	if err != nil || d.Organizations != 0 || sub != (Counts{}) {
		t.Fatalf("top's counts after the delete: direct %+v subtree %+v %v", d, sub, err)
	}
	if kids, total, err := s.ChildOrganizations(ctx, top.ID, 0, 10); err != nil || total != 0 || len(kids) != 0 {
		t.Fatalf("children after the delete: %v %d %v", kids, total, err)
	}
	if _, err := s.Authenticate(ctx, "g", pw); !errors.Is(err, ErrInactive) {
		t.Fatalf("sign-in below a deleted organization: %v", err)
	}
	if _, err := s.OrgPlaceOf(ctx, grand.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("OrgPlaceOf below a deleted organization: %v", err)
	}
	for name, call := range map[string]func() error{
		"update": func() error {
			_, err := s.UpdateOrganization(ctx, child.ID, func(*Organization) error { return nil })
			return err
		},
		"enable":  func() error { _, err := s.EnableOrganization(ctx, child.ID); return err },
		"delete":  func() error { _, err := s.DeleteOrganization(ctx, child.ID); return err },
		"license": func() error { _, err := s.OrganizationByLicenseKey(ctx, child.LicenseKey); return err },
	} {
		if err := call(); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s of a deleted organization: %v, want ErrNotFound", name, err)
		}
	}
	// A change inside the deleted subtree no longer reaches top's counts.
	if _, err := s.UpsertMachine(ctx, p.ID, MachineInput{}); err != nil {
		t.Fatal(err)
	}
	if _, sub, _ := s.Counts(ctx, top.ID); sub != (Counts{}) {
		t.Fatalf("top's subtree counts after a change below a deleted organization: %+v", sub)
	}
	// Deleting below a deleted organization leaves top's counts alone.
	if _, err := s.DeleteOrganization(ctx, grand.ID); err != nil {
		t.Fatal(err)
	}
	if d, sub, _ := s.Counts(ctx, top.ID); sub != (Counts{}) || d != (Counts{}) {
		t.Fatalf("top's counts after a delete below a deleted organization: %+v %+v", d, sub)
	}
	if d, _, _ := s.Counts(ctx, child.ID); d.Organizations != 0 {
		t.Fatalf("the deleted child still counts its deleted child: %+v", d)
	}
	// The place is free again.
	if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Second", ParentID: top.ID}); err != nil {
		t.Fatalf("a child after the delete: %v", err)
	}
}

// TestLicenseKey: every new organization has a random key in groups,
// found again in any case and with or without dashes; an organization
// without one gets one on first asking.
func TestLicenseKey(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	a, _ := s.CreateOrganization(ctx, OrganizationInput{Name: "A"})
	b, _ := s.CreateOrganization(ctx, OrganizationInput{Name: "B"})
	if len(a.LicenseKey) != 39 || strings.Count(a.LicenseKey, "-") != 7 || a.LicenseKey == b.LicenseKey {
		t.Fatalf("keys %q %q", a.LicenseKey, b.LicenseKey)
	}
	for _, k := range []string{a.LicenseKey, strings.ToLower(a.LicenseKey), strings.ReplaceAll(a.LicenseKey, "-", "")} {
		got, err := s.OrganizationByLicenseKey(ctx, k)
		if err != nil || got.ID != a.ID {
			t.Fatalf("by %q: %+v %v", k, got, err)
		}
	}
	for _, k := range []string{"", "nope", strings.Repeat("A", 32), a.LicenseKey + "A", "1111-1111-1111-1111-1111-1111-1111-1111"} {
		if _, err := s.OrganizationByLicenseKey(ctx, k); !errors.Is(err, ErrNotFound) {
			t.Fatalf("by %q: %v, want ErrNotFound", k, err)
		}
	}
	if lk, err := s.LicenseKey(ctx, a.ID); err != nil || lk != a.LicenseKey {
		t.Fatalf("LicenseKey = %q %v", lk, err)
	}
	// An organization stored before keys existed.
	err := s.db.Update(ctx, func(tx kv.Txn) error {
		if err := tx.Delete(licenseKey(b.LicenseKey)); err != nil {
			return err
		}
		b.LicenseKey = ""
		return s.put(tx, key(pfxOrg, b.ID), &b)
	})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := s.LicenseKey(ctx, b.ID)
	if err != nil || lk == "" {
		t.Fatalf("lazy key %q %v", lk, err)
	}
	if got, err := s.OrganizationByLicenseKey(ctx, lk); err != nil || got.ID != b.ID {
		t.Fatalf("by the lazy key: %+v %v", got, err)
	}
	if again, _ := s.LicenseKey(ctx, b.ID); again != lk {
		t.Fatalf("the lazy key changed: %q then %q", lk, again)
	}
}

// TestOrganizationMachines: machines are listed under their person's
// organization, paged, with the count as total.
func TestOrganizationMachines(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, p := fixture(t, s)
	other, _ := s.CreateOrganization(ctx, OrganizationInput{Name: "Other"})
	var ids []uint64
	for range 3 {
		m, err := s.UpsertMachine(ctx, p.ID, MachineInput{DNSName: "laptop"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	// A known GUID updates its machine: no new entry.
	if _, err := s.UpsertMachine(ctx, p.ID, MachineInput{GUID: mustMachine(t, s, ids[0]).GUID}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		offset, limit int
		want          []uint64
	}{{0, 10, ids}, {1, 1, ids[1:2]}, {2, 5, ids[2:]}, {3, 5, nil}} {
		ms, total, err := s.OrganizationMachines(ctx, org.ID, tc.offset, tc.limit)
		if err != nil || total != 3 || len(ms) != len(tc.want) {
			t.Fatalf("page %d+%d: %d machines, total %d, %v", tc.offset, tc.limit, len(ms), total, err)
		}
		for i, m := range ms {
			if m.ID != tc.want[i] {
				t.Fatalf("page %d+%d: machine %d is %d, want %d", tc.offset, tc.limit, i, m.ID, tc.want[i])
			}
		}
	}
	if ms, total, err := s.OrganizationMachines(ctx, other.ID, 0, 10); err != nil || total != 0 || len(ms) != 0 {
		t.Fatalf("other organization: %v %d %v", ms, total, err)
	}
	if _, _, err := s.OrganizationMachines(ctx, 999, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing organization: %v", err)
	}
}

func mustMachine(t *testing.T, s *Service, id uint64) Machine {
	t.Helper()
	m, err := s.Machine(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPolicyExtensions is the policy's extension rule as locked_extensions
// and excluded_extensions apply it: a name as a Windows client stores it
// counts too (the four Windows rows failed before: "report.pdf." stayed
// writable and became report.pdf on every Windows machine that synced it).
func TestPolicyExtensions(t *testing.T) {
	p := Policy{LockedExtensions: ".pdf, .TAR.GZ", ExcludedExtensions: ".exe"}
	for _, tc := range []struct {
		name           string
		locked, exclud bool
	}{
		{"report.pdf", true, false},
		{"REPORT.PDF", true, false},
		{"a.tar.gz", true, false},
		{"setup.exe", false, true},
		{".pdf", false, false}, // only the extension
		{"notes.txt", false, false},
		{"pdf", false, false},
		// Names Windows stores otherwise.
		{"report.pdf.", true, false},
		{"report.pdf .. ", true, false},
		{"report.PDF::$DATA", true, false},
		{"a.tar.gz:x", true, false},
		{"setup.exe.", false, true},
		// A colon before the extension leaves a name without it.
		{"x:report.pdf", true, false},
		{"notes.txt:x.pdf", true, false},
		{"report.pdf.txt", false, false},
	} {
		if got := p.ExtensionLocked(tc.name); got != tc.locked {
			t.Errorf("ExtensionLocked(%q) = %v, want %v", tc.name, got, tc.locked)
		}
		if got := p.ExtensionExcluded(tc.name); got != tc.exclud {
			t.Errorf("ExtensionExcluded(%q) = %v, want %v", tc.name, got, tc.exclud)
		}
	}
}
