package account

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestOrgLimitBindsSubtree: num_orgs_maximum, set by the parent, bounds
// every organization below (as num_users_maximum does): a child's
// administrators, who set the policies of the organizations they make,
// cannot get past it by nesting.
func TestOrgLimitBindsSubtree(t *testing.T) {
	s := newService(t, Options{})
	ctx := context.Background()
	top, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Top"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: top.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePolicy(ctx, child.ID, func(p *Policy) error { p.NumOrgsMaximum = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	g1, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: child.ID, Name: "G1"})
	if err != nil {
		t.Fatal(err)
	}
	// The child's administrators govern G1: no limit of its own.
	if _, err := s.UpdatePolicy(ctx, g1.ID, func(p *Policy) error { p.NumOrgsMaximum = 0; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: g1.ID, Name: "G2"}); err != nil {
		t.Fatalf("the second organization below the child: %v", err)
	}
	for _, parent := range []uint64{g1.ID, child.ID} {
		if _, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: parent, Name: "G3"}); !errors.Is(err, ErrOrgLimitExceeded) {
			t.Errorf("a third organization below the child (under %d): %v, want ErrOrgLimitExceeded", parent, err)
		}
	}
}

// TestNothingNewInDeletedOrganization: once an organization is deleted
// (its roots deleted first by the front end), no person, guest or root
// is added in it or below it, as a create racing the delete would do
// after its permission check: they would be unreachable, and a root
// would count into the tallies of the organizations above for ever.
func TestNothingNewInDeletedOrganization(t *testing.T) {
	s := newService(t, Options{})
	ctx := context.Background()
	top, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Top"})
	if err != nil {
		t.Fatal(err)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: top.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	grand, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: child.ID, Name: "Grand"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: grand.ID, Username: "p", Email: "p@example.com", NoPassword: true})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.CreateGuest(ctx, GuestInput{OrganizationID: grand.ID, Email: "g@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteOrganization(ctx, child.ID); err != nil {
		t.Fatal(err)
	}
	for _, org := range []uint64{child.ID, grand.ID} {
		if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org, Username: fmt.Sprint("q", org), Email: fmt.Sprint("q", org, "@example.com"), NoPassword: true}); err == nil {
			t.Errorf("a person created in deleted organization %d", org)
		}
		if _, err := s.CreateGuest(ctx, GuestInput{OrganizationID: org, Email: fmt.Sprint("h", org, "@example.com")}); err == nil {
			t.Errorf("a guest created in deleted organization %d", org)
		}
	}
	if _, err := s.ConvertGuest(ctx, g.ID); err == nil {
		t.Error("a guest of a deleted organization converted")
	}
	if _, err := s.AddRoot(ctx, RootOwner{RootID: 999, PersonID: p.ID, Type: "sync"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a root added for a person of a deleted organization: %v, want ErrNotFound", err)
	}
	if _, err := s.AddRoot(ctx, RootOwner{RootID: 998, OrganizationID: grand.ID, Type: "share"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a root added for a deleted organization: %v, want ErrNotFound", err)
	}
	if _, err := s.RootTallies(ctx, p, "sync"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the tallies of a root of a person of a deleted organization: %v, want ErrNotFound", err)
	}
}
