package account

import (
	"context"
	"slices"
	"testing"
)

// Tally ids of persons, organizations and root types never meet, and keep
// the layout stored in every root's record.
func TestTallyIDs(t *testing.T) {
	seen := map[uint64]string{}
	for _, c := range []struct {
		name string
		id   uint64
		want uint64
	}{
		{"person 7", TallyPerson(7), 1<<56 | 7},
		{"organization 7", TallyOrg(7, ""), 2<<56 | 7},
		{"organization 7 sync", TallyOrg(7, "sync"), 2<<56 | 1<<48 | 7},
		{"organization 7 share", TallyOrg(7, "share"), 2<<56 | 2<<48 | 7},
		{"organization 7 backup", TallyOrg(7, "backup"), 2<<56 | 3<<48 | 7},
		{"organization 8", TallyOrg(8, ""), 2<<56 | 8},
	} {
		if c.id != c.want {
			t.Errorf("%s = %#x, want %#x", c.name, c.id, c.want)
		}
		if other, ok := seen[c.id]; ok {
			t.Errorf("%s and %s share tally %#x", c.name, other, c.id)
		}
		seen[c.id] = c.name
	}
}

// A root counts for its person and, by type and for all types, for its
// organization and every ancestor; the caller's quotas are the nonzero
// ones of the person and of the chain.
func TestRootTallies(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	top, _ := fixture(t, s)
	mid, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: top.ID, Name: "Mid"})
	if err != nil {
		t.Fatal(err)
	}
	low, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: mid.ID, Name: "Low"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: low.ID, Username: "low", Email: "low@example.com", Password: "correct horse battery", SpaceQuota: 50})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.RootTallies(ctx, p, "backup")
	if err != nil {
		t.Fatal(err)
	}
	want := []uint64{TallyPerson(p.ID), TallyOrg(low.ID, "backup"), TallyOrg(low.ID, ""),
		TallyOrg(mid.ID, "backup"), TallyOrg(mid.ID, ""), TallyOrg(top.ID, "backup"), TallyOrg(top.ID, "")}
	if !slices.Equal(got, want) {
		t.Errorf("RootTallies = %#x, want %#x", got, want)
	}
	if _, err := s.RootTallies(ctx, p, ""); err == nil {
		t.Error("RootTallies of no type: no error")
	}
	if _, err := s.UpdatePolicy(ctx, mid.ID, func(pol *Policy) error {
		pol.SpaceQuota = "1000"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c, err := s.Caller(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	if q, want := c.Quotas(), []TallyQuota{{TallyPerson(p.ID), 50, false}, {TallyOrg(mid.ID, ""), 1000, true}}; !slices.Equal(q, want) {
		t.Errorf("Quotas = %+v, want %+v", q, want)
	}
}
