package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"berth/kv"
)

func TestPerson(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	if alice.ID == 0 || !alice.Active || alice.DisplayName != "Alice Liddell" || !strings.HasPrefix(alice.PasswordHash, "$argon2id$v=19$m=1024,t=1,p=1$") {
		t.Fatalf("created %+v", alice)
	}
	for _, login := range []string{"alice", "ALICE", "Alice", "alice@acme.example", "ALICE@ACME.EXAMPLE"} {
		p, err := s.PersonByLogin(ctx, login)
		if err != nil || p.ID != alice.ID {
			t.Fatalf("PersonByLogin(%q) = %d, %v", login, p.ID, err)
		}
	}
	if err := s.SetPersonRoot(ctx, alice.ID, 77); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.Person(ctx, alice.ID); p.RootID != 77 || p.PasswordHash != alice.PasswordHash {
		t.Fatalf("after SetPersonRoot %+v", p)
	}

	in := func(username, email string) PersonInput {
		return PersonInput{OrganizationID: org.ID, Username: username, Email: email, Password: pw}
	}
	tests := []struct {
		name string
		in   PersonInput
		err  error
	}{
		{"username taken", in("ALICE", "other@acme.example"), ErrExists},
		{"email taken", in("bob", "alice@ACME.example"), ErrExists},
		{"username is someone's email", in("alice@acme.example", "bob@acme.example"), ErrExists},
		{"empty username", in("", "b@acme.example"), ErrInvalid},
		{"colon in username", in("a:b", "b@acme.example"), ErrInvalid},
		{"space in username", in("a b", "b@acme.example"), ErrInvalid},
		{"bad email", in("bob", "bob"), ErrInvalid},
		{"short password", PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: "short"}, ErrInvalid},
		{"no organization", PersonInput{OrganizationID: 4242, Username: "bob", Email: "bob@acme.example", Password: pw}, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.CreatePerson(ctx, tt.in); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
		})
	}
	if _, err := s.Person(ctx, 999); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing person: %v", err)
	}
	if _, err := s.PersonByLogin(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing login: %v", err)
	}

	// Renaming moves the index entries: the old login is free again.
	bob, err := s.CreatePerson(ctx, in("bob", "bob@acme.example"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePerson(ctx, bob.ID, func(p *Person) error { p.Username = "Alice"; return nil }); !errors.Is(err, ErrExists) {
		t.Fatalf("rename to taken: %v", err)
	}
	if _, err := s.UpdatePerson(ctx, bob.ID, func(p *Person) error { p.Username = "robert"; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PersonByLogin(ctx, "bob"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old username still resolves: %v", err)
	}
	if p, err := s.PersonByLogin(ctx, "Robert"); err != nil || p.ID != bob.ID {
		t.Fatalf("new username: %d, %v", p.ID, err)
	}
	if _, err := s.CreatePerson(ctx, in("bob", "bob2@acme.example")); err != nil {
		t.Fatalf("freed username not reusable: %v", err)
	}
}

// Of many concurrent creations with the same username (in different
// case), exactly one wins and the others get ErrExists.
func TestCreatePersonConcurrentDuplicate(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, _ := fixture(t, s)
	const n = 8
	var wins, dups atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			name := "dave"
			if i%2 == 1 {
				name = "DAVE"
			}
			_, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: name,
				Email: "dave" + string(rune('a'+i)) + "@acme.example", Password: pw})
			switch {
			case err == nil:
				wins.Add(1)
			case errors.Is(err, ErrExists):
				dups.Add(1)
			default:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if wins.Load() != 1 || dups.Load() != n-1 {
		t.Fatalf("wins %d, duplicates %d", wins.Load(), dups.Load())
	}
}

// The quota a person is held to is the smaller one set; 0 is unlimited.
func TestQuotaUnder(t *testing.T) {
	pol := DefaultPolicy()
	cases := []struct {
		person int64
		org    string
		want   int64
	}{{0, "0", 0}, {100, "0", 100}, {0, "500", 500}, {100, "500", 100}, {900, "500", 500}}
	for _, c := range cases {
		pol.SpaceQuota = c.org
		if got := (Person{SpaceQuota: c.person}).QuotaUnder(pol); got != c.want {
			t.Errorf("person %d, org %s: %d, want %d", c.person, c.org, got, c.want)
		}
	}
	pol.ExcludedExtensions = " .exe, ,.BAT"
	if got := pol.ExcludedExtensionList(); len(got) != 2 || got[0] != ".exe" || got[1] != ".BAT" {
		t.Errorf("ExcludedExtensionList = %q", got)
	}
}

func TestLists(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	for i := range 4 {
		if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: fmt.Sprintf("u%d", i),
			Email: fmt.Sprintf("u%d@acme.example", i), Password: pw}); err != nil {
			t.Fatal(err)
		}
	}
	page, total, err := s.Persons(ctx, org.ID, 1, 2)
	if err != nil || total != 5 || len(page) != 2 || page[0].Username != "u0" || page[1].Username != "u1" {
		t.Fatalf("Persons = %v, %d, %v", page, total, err)
	}
	if _, _, err := s.Persons(ctx, 999, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Persons of missing org: %v", err)
	}
	a, _ := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "a"})
	b, _ := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "b"})
	ms, err := s.Machines(ctx, alice.ID)
	if err != nil || len(ms) != 2 || ms[0].ID != a.ID || ms[1].ID != b.ID {
		t.Fatalf("Machines = %v, %v", ms, err)
	}
}

// journal keeps the changes recorded, for tests that check the records.
type journal struct {
	mu  sync.Mutex
	got []Change
}

func (j *journal) Record(_ kv.Txn, c Change) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.got = append(j.got, c)
	return nil
}

// acts returns the activity names recorded since the last call.
func (j *journal) acts() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, c := range j.got {
		out = append(out, c.Activity)
	}
	j.got = nil
	return out
}

// Every change to a person is one record of its kind, written in the
// change's transaction, with the actor of the context.
func TestPersonJournal(t *testing.T) {
	ctx := context.Background()
	j := &journal{}
	o := testOptions()
	o.Journal = j
	s := newService(t, o)
	org, alice := fixture(t, s)
	j.acts()
	as := func(p Person) context.Context { return WithActor(ctx, Caller{Person: p}.Actor()) }

	bob, err := s.CreatePerson(as(alice), PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePerson(as(alice), bob.ID, func(p *Person) error { p.FirstName, p.Admin = "Bob", true; return nil }); err != nil {
		t.Fatal(err)
	}
	// An update that changes nothing records nothing, as an
	// organization's (TestOrganizationJournal): it recorded a
	// person_updated with no field.
	if _, err := s.UpdatePerson(as(alice), bob.ID, func(p *Person) error { p.FirstName = "Bob"; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(as(bob), bob.ID, pw+"2"); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(as(alice), bob.ID, pw+"3"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResetPassword(ctx, "bob", pw); err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(as(alice), bob.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePerson(as(alice), bob.ID); err != nil {
		t.Fatal(err)
	}
	want := []string{ActPersonCreated, ActPersonUpdated, ActPasswordChanged, ActPasswordReset, ActPasswordReset, ActPersonUnlocked, ActPersonDeleted}
	j.mu.Lock()
	got := append([]Change(nil), j.got...)
	j.mu.Unlock()
	if acts := j.acts(); strings.Join(acts, " ") != strings.Join(want, " ") {
		t.Fatalf("recorded %v, want %v", acts, want)
	}
	if got[1].Data != "first_name,display_name,admin" || got[1].Actor.PersonID != alice.ID || got[1].OnPersonID != bob.ID || got[1].OnType != "person" {
		t.Fatalf("update record %+v", got[1])
	}
	if got[4].Actor != System {
		t.Fatalf("reset on a stopped store is the system's: %+v", got[4].Actor)
	}
}

// Deleting a person ends everything of theirs in account at once: the
// logins are free, the sessions end, the counts drop.
func TestDeletePerson(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.UpsertMachine(ctx, bob.ID, MachineInput{DNSName: "bobs-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueTokens(ctx, bob.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccessCaller(ctx, toks.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LoginCallerRef(ctx, bob.ID, "bob", bob.PasswordHash); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePerson(ctx, bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token after delete: %v", err)
	}
	if _, _, err := s.Refresh(ctx, toks.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh after delete: %v", err)
	}
	if _, err := s.LoginCallerRef(ctx, bob.ID, "bob", bob.PasswordHash); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remembered credentials after delete: %v", err)
	}
	if _, err := s.Authenticate(ctx, "bob", pw); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("login after delete: %v", err)
	}
	direct, _, err := s.Counts(ctx, org.ID)
	if err != nil || direct.Accounts != 1 || direct.AdminAccounts != 0 || direct.Machines != 0 {
		t.Fatalf("counts after delete %+v, %v", direct, err)
	}
	if _, err := s.MachineByGUID(ctx, m.GUID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("machine after delete: %v", err)
	}
	if ps, total, _ := s.Persons(ctx, org.ID, 0, 10); total != 1 || len(ps) != 1 || ps[0].ID != alice.ID {
		t.Fatalf("persons after delete %v %d", ps, total)
	}
	if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw}); err != nil {
		t.Fatalf("login not freed: %v", err)
	}
	if err := s.DeletePerson(ctx, bob.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

// A person created without a password exists but cannot log in until
// one is set.
func TestPersonWithoutPassword(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, _ := fixture(t, s)
	in := PersonInput{OrganizationID: org.ID, Username: "carol", Email: "carol@acme.example", NoPassword: true}
	carol, err := s.CreatePerson(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, try := range []string{"", pw} {
		if _, err := s.Authenticate(ctx, "carol", try); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("login with %q: %v", try, err)
		}
	}
	if err := s.SetPassword(ctx, carol.ID, pw); err != nil {
		t.Fatal(err)
	}
	if p, err := s.Authenticate(ctx, "carol", pw); err != nil || p.ID != carol.ID {
		t.Fatalf("login after set: %v", err)
	}
	in.Username, in.Email, in.Password = "dan", "dan@acme.example", pw
	if _, err := s.CreatePerson(ctx, in); !errors.Is(err, ErrInvalid) {
		t.Fatalf("password with NoPassword: %v", err)
	}
}
