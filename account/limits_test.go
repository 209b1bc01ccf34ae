package account

import (
	"context"
	"errors"
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
