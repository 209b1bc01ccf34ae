package account

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBootstrap: the first organization and its administrator are stored
// together or not at all, and only once.
func TestBootstrap(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
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
