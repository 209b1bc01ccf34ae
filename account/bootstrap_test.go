package account

import (
	"context"
	"errors"
	"testing"
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
