package account

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestGuests(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	in := func(email, password string) GuestInput {
		return GuestInput{CreatorID: alice.ID, OrganizationID: org.ID, Email: email, FirstName: "Gus", Password: password}
	}
	g, err := s.CreateGuest(ctx, in("gus@partner.example", pw))
	if err != nil {
		t.Fatal(err)
	}
	if !g.Guest || g.CreatorID != alice.ID || g.Username != g.Email || !g.Active {
		t.Fatalf("created %+v", g)
	}
	for _, c := range []struct {
		name string
		in   GuestInput
		err  error
	}{
		{"e-mail taken by a guest", in("GUS@partner.example", pw), ErrExists},
		{"e-mail taken by a person", in("alice@acme.example", pw), ErrExists},
		{"no e-mail", in("", pw), ErrInvalid},
		{"bad e-mail", in("gus", pw), ErrInvalid},
		{"short password", in("g2@partner.example", "short"), ErrInvalid},
		{"no organization", GuestInput{OrganizationID: 999, Email: "g3@partner.example", Password: pw}, ErrInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.CreateGuest(ctx, c.in); !errors.Is(err, c.err) {
				t.Fatalf("got %v, want %v", err, c.err)
			}
		})
	}

	// A guest logs in like a person, and is a guest to everything after.
	p, err := s.Authenticate(ctx, "gus@partner.example", pw)
	if err != nil || p.ID != g.ID || !p.Guest {
		t.Fatalf("guest login: %+v, %v", p, err)
	}
	toks, err := s.IssueLoginTokens(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.AccessCaller(ctx, toks.AccessToken)
	if err != nil || !c.Person.Guest || c.Actor().Type != "guest" {
		t.Fatalf("guest caller %+v, %v", c, err)
	}

	// Guests are listed and counted apart from persons.
	guests, total, err := s.Guests(ctx, org.ID, 0, 10)
	if err != nil || total != 1 || len(guests) != 1 || guests[0].ID != g.ID {
		t.Fatalf("Guests = %v, %d, %v", guests, total, err)
	}
	if _, total, _ := s.Persons(ctx, org.ID, 0, 10); total != 1 {
		t.Fatalf("persons total %d with a guest", total)
	}
	if _, err := s.Guest(ctx, alice.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Guest(person): %v", err)
	}
	if _, err := s.UpdateGuest(ctx, alice.ID, func(*Person) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("UpdateGuest(person): %v", err)
	}
	if err := s.DeleteGuest(ctx, alice.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteGuest(person): %v", err)
	}
	if err := s.DeletePerson(ctx, g.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeletePerson(guest): %v", err)
	}

	// The username follows the e-mail address; the kind cannot change.
	g, err = s.UpdateGuest(ctx, g.ID, func(p *Person) error { p.Email, p.Guest = "gus@new.example", false; return nil })
	if err != nil || g.Username != "gus@new.example" || !g.Guest {
		t.Fatalf("update %+v, %v", g, err)
	}
	if _, err := s.Authenticate(ctx, "gus@partner.example", pw); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("old e-mail still logs in: %v", err)
	}

	if err := s.DeleteGuest(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("guest token after delete: %v", err)
	}
	if d, _, _ := s.Counts(ctx, org.ID); d.Guests != 0 {
		t.Fatalf("guest count after delete %d", d.Guests)
	}
}

// Converting a guest keeps its id, login and sessions, and meets the
// user limit of its organization and of every one above it.
func TestConvertGuest(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	parent, alice := fixture(t, s)
	if _, err := s.UpdatePolicy(ctx, parent.ID, func(p *Policy) error { p.NumUsersMaximum = 2; return nil }); err != nil {
		t.Fatal(err)
	}
	child, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Child", ParentID: parent.ID})
	if err != nil {
		t.Fatal(err)
	}
	g1, err := s.CreateGuest(ctx, GuestInput{CreatorID: alice.ID, OrganizationID: child.ID, Email: "g1@x.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.CreateGuest(ctx, GuestInput{CreatorID: alice.ID, OrganizationID: child.ID, Email: "g2@x.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueTokens(ctx, g1.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.ConvertGuest(ctx, g1.ID)
	if err != nil || p.ID != g1.ID || p.Guest || p.Username != "g1@x.example" {
		t.Fatalf("convert %+v, %v", p, err)
	}
	if c, err := s.AccessCaller(ctx, toks.AccessToken); err != nil || c.Person.Guest {
		t.Fatalf("session after convert %+v, %v", c.Person, err)
	}
	// The parent's maximum of 2 (alice and the converted guest) bounds the child.
	if _, err := s.ConvertGuest(ctx, g2.ID); !errors.Is(err, ErrUserLimitExceeded) {
		t.Fatalf("convert past the parent's limit: %v", err)
	}
	if g, err := s.Guest(ctx, g2.ID); err != nil || !g.Guest {
		t.Fatalf("refused conversion changed the guest: %+v, %v", g, err)
	}
	if _, err := s.ConvertGuest(ctx, g1.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("converting a person: %v", err)
	}
	d, sub, _ := s.Counts(ctx, child.ID)
	if d.Accounts != 1 || d.Guests != 1 || sub.Accounts != 1 {
		t.Fatalf("child counts %+v %+v", d, sub)
	}
	if _, sub, _ := s.Counts(ctx, parent.ID); sub.Accounts != 2 || sub.Guests != 1 {
		t.Fatalf("parent subtree counts %+v", sub)
	}
	if ps, total, _ := s.Persons(ctx, child.ID, 0, 10); total != 1 || len(ps) != 1 || ps[0].ID != g1.ID {
		t.Fatalf("child persons %v %d", ps, total)
	}
}

// Every change to a guest is one record of the guest's kind.
func TestGuestJournal(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	o := testOptions()
	o.Journal = j
	s := newService(t, o)
	org, alice := fixture(t, s)
	ctx = WithActor(ctx, Caller{Person: alice}.Actor())
	j.acts()
	g, err := s.CreateGuest(ctx, GuestInput{CreatorID: alice.ID, OrganizationID: org.ID, Email: "g@x.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateGuest(ctx, g.ID, func(p *Person) error { p.LastName = "Gee"; return nil }); err != nil {
		t.Fatal(err)
	}
	j.mu.Lock()
	upd := j.got[1]
	j.mu.Unlock()
	if upd.OnType != "guest" || upd.OnGuestID != g.ID || upd.OnPersonID != 0 || upd.Data != "last_name,display_name" {
		t.Fatalf("guest update record %+v", upd)
	}
	g2, err := s.CreateGuest(ctx, GuestInput{CreatorID: alice.ID, OrganizationID: org.ID, Email: "g2@x.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ConvertGuest(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	// A guest created without a password cannot log in.
	if _, err := s.Authenticate(ctx, "g2@x.example", ""); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("login without a password: %v", err)
	}
	if err := s.DeleteGuest(ctx, g2.ID); err != nil {
		t.Fatal(err)
	}
	// The refused login of a known guest is a failed login like any.
	want := []string{ActGuestCreated, ActGuestUpdated, ActGuestCreated, ActGuestConverted, ActLoginFailed, ActGuestDeleted}
	if got := j.acts(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("recorded %v, want %v", got, want)
	}
}
