package account

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestCountsUnderRaces: changes to one account that race each other
// (two deletes, a conversion and a delete, an administrator flag and a
// delete, creations at num_users_maximum) leave every count equal to
// what the lists hold, in the organization and in its parent, and
// exactly one of two exclusive changes wins.
func TestCountsUnderRaces(t *testing.T) {
	s := newService(t, Options{})
	ctx := context.Background()
	top, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Top"})
	if err != nil {
		t.Fatal(err)
	}
	org, err := s.CreateOrganization(ctx, OrganizationInput{ParentID: top.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	newPerson := func(admin bool) Person {
		n++
		p, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: fmt.Sprintf("p%d", n),
			Email: fmt.Sprintf("p%d@example.com", n), NoPassword: true, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	newGuest := func() Person {
		n++
		g, err := s.CreateGuest(ctx, GuestInput{OrganizationID: org.ID, Email: fmt.Sprintf("g%d@example.com", n)})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	both := func(a, b func() error) (error, error) {
		var ea, eb error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); ea = a() }()
		go func() { defer wg.Done(); eb = b() }()
		wg.Wait()
		return ea, eb
	}
	check := func(what string) {
		t.Helper()
		ps, _, err := s.Persons(ctx, org.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		gs, _, err := s.Guests(ctx, org.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		want := Counts{Accounts: int64(len(ps)), Guests: int64(len(gs))}
		for _, p := range ps {
			if p.Admin {
				want.AdminAccounts++
			}
		}
		direct, _, err := s.Counts(ctx, org.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, above, err := s.Counts(ctx, top.ID)
		if err != nil {
			t.Fatal(err)
		}
		above.Organizations = 0
		if direct != want || above != want {
			t.Fatalf("%s: counts %+v, the parent's subtree %+v; the lists hold %+v", what, direct, above, want)
		}
	}

	for i := 0; i < 20; i++ {
		p := newPerson(i%2 == 0)
		ea, eb := both(func() error { return s.DeletePerson(ctx, p.ID) }, func() error { return s.DeletePerson(ctx, p.ID) })
		if (ea == nil) == (eb == nil) || !errors.Is(errors.Join(ea, eb), ErrNotFound) {
			t.Fatalf("two deletes of one person: %v, %v; want one success and one ErrNotFound", ea, eb)
		}
		check("two deletes")

		g := newGuest()
		ea, eb = both(func() error { _, err := s.ConvertGuest(ctx, g.ID); return err }, func() error { return s.DeleteGuest(ctx, g.ID) })
		if (ea == nil) == (eb == nil) {
			t.Fatalf("a conversion and a delete of one guest: %v, %v; want exactly one to succeed", ea, eb)
		}
		check("convert and delete")

		p = newPerson(false)
		_, eb = both(func() error {
			_, err := s.UpdatePerson(ctx, p.ID, func(q *Person) error { q.Admin = true; return nil })
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			return err
		}, func() error { return s.DeletePerson(ctx, p.ID) })
		if eb != nil {
			t.Fatal(eb)
		}
		check("administrator flag and delete")
	}

	// Creations racing at num_users_maximum: exactly the room left is taken.
	_, sub, err := s.Counts(ctx, top.ID)
	if err != nil {
		t.Fatal(err)
	}
	const room = 3
	if _, err := s.UpdatePolicy(ctx, top.ID, func(p *Policy) error { p.NumUsersMaximum = sub.Accounts + room; return nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	made := 0
	for i := 0; i < 12; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: fmt.Sprintf("r%d", i),
				Email: fmt.Sprintf("r%d@example.com", i), NoPassword: true})
			switch {
			case err == nil:
				mu.Lock()
				made++
				mu.Unlock()
			case !errors.Is(err, ErrUserLimitExceeded):
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if made != room {
		t.Errorf("%d persons made at num_users_maximum with room for %d", made, room)
	}
	check("creations at the maximum")
}
