package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
)

// cheap argon2 parameters: tests exercise the format, not the cost.
var testArgon = Argon2Params{Memory: 1024, Time: 1, Threads: 1, SaltLength: 16, KeyLength: 32}

func testOptions() Options {
	o := DefaultOptions()
	o.Argon2 = testArgon
	return o
}

func openDB(t testing.TB) kv.Store {
	t.Helper()
	db, err := badger.Open(badger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newService(t testing.TB, o Options) *Service {
	t.Helper()
	return New(openDB(t), o)
}

const pw = "correct horse battery"

// fixture creates an organization and one person "alice".
func fixture(t testing.TB, s *Service) (Organization, Person) {
	t.Helper()
	ctx := context.Background()
	org, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Acme Corp", Email: "it@acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePerson(ctx, PersonInput{
		OrganizationID: org.ID, Username: "Alice", Email: "Alice@Acme.example",
		FirstName: "Alice", LastName: "Liddell", Password: pw,
	})
	if err != nil {
		t.Fatal(err)
	}
	return org, p
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

func TestPasswordHash(t *testing.T) {
	ctx := context.Background()
	s := New(nil, testOptions())
	h, err := s.hashPassword(ctx, "pässwörd")
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.verifyPassword(ctx, h, "pässwörd"); !ok || err != nil {
		t.Fatalf("verify right password = %v, %v", ok, err)
	}
	if ok, _ := s.verifyPassword(ctx, h, "passwörd"); ok {
		t.Fatal("verify wrong password = true")
	}
	h2, _ := s.hashPassword(ctx, "pässwörd")
	if h == h2 {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=1024,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=99999999,t=1,p=1$c2FsdA$aGFzaA", "$argon2id$v=19$m=1024,t=1,p=1$!!$aGFzaA"} {
		if _, err := s.verifyPassword(ctx, bad, "x"); err == nil {
			t.Errorf("decoded malformed hash %q", bad)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	for _, login := range []string{"alice", "ALICE@acme.EXAMPLE"} {
		p, err := s.Authenticate(ctx, login, pw)
		if err != nil || p.ID != alice.ID {
			t.Fatalf("Authenticate(%q) = %d, %v", login, p.ID, err)
		}
	}
	tests := []struct {
		name, login, password string
		err                   error
	}{
		{"wrong password", "alice", "wrong password", ErrInvalidCredentials},
		{"password case matters", "alice", strings.ToUpper(pw), ErrInvalidCredentials},
		{"unknown login", "mallory", pw, ErrInvalidCredentials},
		{"empty login", "", pw, ErrInvalidCredentials},
		{"huge password", "alice", strings.Repeat("x", 5000), ErrInvalidCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.Authenticate(ctx, tt.login, tt.password); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
		})
	}
	// The success above reset alice's counter; 4 failures do not lock (default 5).
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatal(err)
	}

	if err := s.SetPassword(ctx, alice.ID, "a new password"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("old password after SetPassword: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", "a new password"); err != nil {
		t.Fatalf("new password: %v", err)
	}

	// Disabled organization, then disabled person: the right password gives ErrInactive.
	if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "a new password"); !errors.Is(err, ErrInactive) {
		t.Fatalf("inactive org: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", "wrong password"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("inactive org, wrong password: %v", err)
	}
	if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = true; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePerson(ctx, alice.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "a new password"); !errors.Is(err, ErrInactive) {
		t.Fatalf("inactive person: %v", err)
	}
}

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestLockout(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	o := testOptions()
	o.Now = clk.Now
	o.Lockout = LockoutOptions{MaxFailures: 3, Window: time.Minute, Duration: 10 * time.Minute}
	s := newService(t, o)
	fixture(t, s)

	fail := func(login string) error { _, err := s.Authenticate(ctx, login, "wrong password"); return err }
	for i := 1; i < 3; i++ {
		if err := fail("alice"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("failure %d: %v", i, err)
		}
	}
	// Username and e-mail share one counter: the third failure, by e-mail, locks.
	if err := fail("ALICE@acme.example"); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("failure 3: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("right password while locked: %v", err)
	}
	clk.Add(10*time.Minute + time.Second)
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatalf("after the lock: %v", err)
	}

	// Failures spread wider than the window never lock.
	for i := range 5 {
		if err := fail("alice"); !errors.Is(err, ErrInvalidCredentials) {
			t.Fatalf("spread failure %d: %v", i, err)
		}
		if i%2 == 1 {
			clk.Add(time.Minute)
		}
	}
	// A success resets the counter.
	clk.Add(time.Minute)
	fail("alice")
	fail("alice")
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatal(err)
	}
	fail("alice")
	if err := fail("alice"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("counter not reset by success: %v", err)
	}

	// Unknown logins lock like known ones.
	for range 2 {
		fail("mallory")
	}
	if err := fail("MALLORY"); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("unknown login: %v", err)
	}
}

// The lock is a kv key with a TTL: it goes away by itself on the real clock.
func TestLockoutExpiresByTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 2, Window: time.Minute, Duration: time.Second}
	s := newService(t, o)
	fixture(t, s)
	s.Authenticate(ctx, "alice", "wrong password")
	if _, err := s.Authenticate(ctx, "alice", "wrong password"); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("second failure: %v", err)
	}
	waitFor(t, 5*time.Second, func() bool {
		_, err := s.Authenticate(ctx, "alice", pw)
		return err == nil
	})
	// The key itself vanishes shortly after its deadline, with no sweeper.
	waitFor(t, 5*time.Second, func() bool { return countKeys(t, s, pfxLock) == 0 })
}

func countKeys(t *testing.T, s *Service, prefix string) int {
	t.Helper()
	n := 0
	err := s.db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte(prefix), nil, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing after limit. It waits for
// TTL expiry, not measuring speed.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(100 * time.Millisecond)
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

// TestLockoutConcurrentGuesses: attempts made at the same time cannot all
// pass the lock check before any of them has failed. Each attempt is counted
// before its password is checked, so with MaxFailures in progress a further
// one is refused at once, and the right password sent among a burst of
// guesses does not get in once the burst has passed the threshold.
func TestLockoutConcurrentGuesses(t *testing.T) {
	ctx := context.Background()
	const maxFailures, guesses = 3, 9
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: maxFailures, Window: time.Hour, Duration: time.Hour}
	s := newService(t, o)
	fixture(t, s)

	// Take every argon2 slot, so that each attempt that gets as far as
	// checking its password waits there.
	for range cap(s.hashSlots) {
		s.hashSlots <- struct{}{}
	}
	released := false
	release := func() {
		if !released {
			released = true
			for range cap(s.hashSlots) {
				<-s.hashSlots
			}
		}
	}
	defer release()

	results := make(chan error, guesses)
	for i := range guesses {
		go func() {
			// Different passwords: the same one, sent at once, would
			// wait for a single check (TestAuthenticateSimultaneous).
			_, err := s.Authenticate(ctx, "alice", fmt.Sprintf("wrong password %d", i))
			results <- err
		}()
	}
	// Only maxFailures of the guesses may wait for a password check; the
	// others are refused without one.
	timeout := time.After(5 * time.Second)
	for i := range guesses - maxFailures {
		select {
		case err := <-results:
			if !errors.Is(err, ErrAccountLocked) {
				t.Fatalf("guess beyond the threshold: %v, want ErrAccountLocked", err)
			}
		case <-timeout:
			t.Fatalf("%d guesses at once waited for a password check; at most %d may (got %d refusals)",
				guesses, maxFailures, i)
		}
	}
	right := make(chan error, 1)
	go func() {
		_, err := s.Authenticate(ctx, "alice", pw)
		right <- err
	}()
	release()
	if err := <-right; !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("right password after %d concurrent guesses: %v, want ErrAccountLocked", guesses, err)
	}
	locked := 0
	for range maxFailures {
		err := <-results
		switch {
		case errors.Is(err, ErrAccountLocked):
			locked++
		case !errors.Is(err, ErrInvalidCredentials):
			t.Fatalf("guess within the threshold: %v", err)
		}
	}
	// The one that reached the threshold locked (one that failed after it
	// reports the lock too).
	if locked == 0 {
		t.Fatalf("none of the first %d guesses locked the account", maxFailures)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("right password afterwards: %v", err)
	}
}

// TestAuthenticateSimultaneous: attempts with the same login and password
// made while one is being checked wait for that check. With the right
// password, more of them than MaxFailures all get in and the password is
// hashed once; with a wrong one, each counts as a failure, so the burst
// locks the account as a series would.
func TestAuthenticateSimultaneous(t *testing.T) {
	ctx := context.Background()
	const maxFailures, attempts = 3, 12
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: maxFailures, Window: time.Hour, Duration: time.Hour}
	s := newService(t, o)
	org, _ := fixture(t, s)
	if _, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@example.com", Password: pw}); err != nil {
		t.Fatal(err)
	}

	// burst starts the attempts while every argon2 slot is taken, so the
	// first one's check waits there until all have started.
	burst := func(login, password string) []error {
		for range cap(s.hashSlots) {
			s.hashSlots <- struct{}{}
		}
		results := make(chan error, attempts)
		for range attempts {
			go func() {
				_, err := s.Authenticate(ctx, login, password)
				results <- err
			}()
		}
		time.Sleep(200 * time.Millisecond) // let them all reach the check
		for range cap(s.hashSlots) {
			<-s.hashSlots
		}
		errs := make([]error, attempts)
		for i := range errs {
			errs[i] = <-results
		}
		return errs
	}

	for i, err := range burst("alice", pw) {
		if err != nil {
			t.Errorf("right password, attempt %d of %d at once: %v", i+1, attempts, err)
		}
	}
	// The same wrong password sent at once (a file manager's burst with a
	// mistyped saved password) is one check and one failure.
	for i, err := range burst("bob", "wrong password") {
		if !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("the same wrong password, attempt %d of %d at once: %v, want ErrInvalidCredentials", i+1, attempts, err)
		}
	}
	if _, err := s.Authenticate(ctx, "bob", pw); err != nil {
		t.Fatalf("right password after a burst of one wrong one: %v", err)
	}
	// Different wrong passwords at once are guesses, each counted.
	results := make(chan error, attempts)
	for i := range attempts {
		go func() {
			_, err := s.Authenticate(ctx, "bob", fmt.Sprintf("guess %d", i))
			results <- err
		}()
	}
	for range attempts {
		if err := <-results; !errors.Is(err, ErrInvalidCredentials) && !errors.Is(err, ErrAccountLocked) {
			t.Errorf("a guess: %v", err)
		}
	}
	if _, err := s.Authenticate(ctx, "bob", pw); !errors.Is(err, ErrAccountLocked) {
		t.Fatalf("right password after %d guesses at once: %v, want ErrAccountLocked", attempts, err)
	}
}
