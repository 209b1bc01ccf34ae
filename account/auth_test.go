package account

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/kv"
)

// TestAbandonedLoginLeavesTheHashQueue: a login whose every caller has
// gone (a client that sends a password and hangs up at once) gives up its
// place in the queue for an argon2 slot: its attempt counts as failed,
// and no hash is computed for nobody. The check used to run to its end
// regardless, so anyone could queue hashes faster than the server computes
// them, without even holding a connection, and hold the CPU and every
// later login for as long as the queue took to drain.
func TestAbandonedLoginLeavesTheHashQueue(t *testing.T) {
	s := newService(t, testOptions())
	_, p := fixture(t, s)
	subject := s.loginSubject("alice", p.ID)
	failures := func() (int, bool) {
		var fr failRecord
		err := s.db.View(context.Background(), func(tx kv.Txn) error {
			return s.get(tx, keyBytes(pfxFail, subject), &fr, ErrNotFound)
		})
		if errors.Is(err, ErrNotFound) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return fr.Count, true
	}

	// Every slot is busy, as in a burst of logins.
	for range cap(s.hashSlots) {
		s.hashSlots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Authenticate(ctx, "alice", pw)
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		s.gatesMu.Lock()
		g := s.gates[string(subject)]
		s.gatesMu.Unlock()
		if g != nil {
			break // reserved: the check waits for a slot
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt was never counted")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Authenticate after its caller left: %v, want context.Canceled", err)
	}
	time.Sleep(100 * time.Millisecond) // for the check to see it is alone
	for range cap(s.hashSlots) {
		<-s.hashSlots
	}
	// A check still queued would now take a slot, find the password
	// right and clear the count: a login made for nobody.
	time.Sleep(300 * time.Millisecond)
	if n, ok := failures(); !ok || n != 1 {
		t.Fatalf("after the caller left: failure count %d (present %v), want the attempt counted once and no login made", n, ok)
	}
	// The account works as before.
	if _, err := s.Authenticate(context.Background(), "alice", pw); err != nil {
		t.Fatalf("right password afterwards: %v", err)
	}
}

// TestLoginCallerSeesEveryChange: LoginCallerRef, which a front end asks for
// credentials it verified before, answers every change at the next call,
// also the second time (from its cache) and when another Service on the
// same store made it. Before, WebDAV asked Caller, which knows nothing of
// the failed-login lock, and a locked account was served for up to 90 s
// after its last login (issue 11).
func TestLoginCallerSeesEveryChange(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		change func(t *testing.T, s *Service, org Organization, p Person)
		want   error
	}{
		{"locked by failed logins", func(t *testing.T, s *Service, _ Organization, p Person) {
			for range s.opts.Lockout.MaxFailures {
				s.Authenticate(ctx, p.Username, "wrong")
			}
		}, ErrAccountLocked},
		{"person disabled", func(t *testing.T, s *Service, _ Organization, p Person) {
			if _, err := s.UpdatePerson(ctx, p.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, ErrInactive},
		{"organization disabled", func(t *testing.T, s *Service, org Organization, _ Person) {
			if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, ErrInactive},
		{"password changed", func(t *testing.T, s *Service, _ Organization, p Person) {
			if err := s.SetPassword(ctx, p.ID, "another correct horse"); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidCredentials},
		{"login renamed", func(t *testing.T, s *Service, _ Organization, p Person) {
			if _, err := s.UpdatePerson(ctx, p.ID, func(p *Person) error { p.Username = "alice2"; return nil }); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidCredentials},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openDB(t)
			s, other := New(db, testOptions()), New(db, testOptions())
			org, alice := fixture(t, s)
			p, err := s.Authenticate(ctx, alice.Username, pw)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if got, err := s.LoginCallerRef(ctx, p.ID, alice.Username, p.PasswordHash); err != nil || got.Person.ID != p.ID {
					t.Fatalf("before the change: %+v, %v", got.Person, err)
				}
			}
			c.change(t, other, org, p)
			for range 2 {
				if _, err := s.LoginCallerRef(ctx, p.ID, alice.Username, p.PasswordHash); !errors.Is(err, c.want) {
					t.Fatalf("after the change: %v, want %v", err, c.want)
				}
			}
		})
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

// TestLockoutTellsAndCounts: a lock says until when and about how long
// (*LockedError, for the front ends' error_description), and every refused
// login is logged at warn with the login, never the password, and counted
// by reason; the failure that locks counts a lockout too. The steps run in
// order against one Service.
func TestLockoutTellsAndCounts(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 11, 26, 13, 53, 0, 0, time.UTC)
	clk := &clock{t: start}
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	o := testOptions()
	o.Now = clk.Now
	o.Lockout = LockoutOptions{MaxFailures: 3, Window: time.Minute, Duration: 12 * time.Minute}
	o.Registerer = reg
	o.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	s := newService(t, o)
	org, _ := fixture(t, s)
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdatePerson(ctx, bob.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
		t.Fatal(err)
	}
	const wrong = "wrong password 1234"
	until := start.Add(12 * time.Minute)

	steps := []struct {
		name            string
		advance         time.Duration
		login, password string
		want            error
		reason          string
		lockouts        float64
		locked          *LockedError // the lock the error must carry
		description     string
		logged          string // the login as logged, when not login itself
	}{
		{name: "first failure", login: "alice", password: wrong, want: ErrInvalidCredentials, reason: "bad_password"},
		{name: "second failure", login: "alice", password: wrong, want: ErrInvalidCredentials, reason: "bad_password"},
		{name: "the failure that locks says for how long", login: "alice", password: wrong, want: ErrAccountLocked,
			reason: "bad_password", lockouts: 1, locked: &LockedError{Until: until, Left: 12 * time.Minute},
			description: "too many failed logins; the account is locked until 14:05:00 UTC (about 12 minutes)"},
		{name: "the right password while locked: the time left shrinks", advance: 2 * time.Minute, login: "alice", password: pw,
			want: ErrAccountLocked, reason: "locked", lockouts: 1, locked: &LockedError{Until: until, Left: 10 * time.Minute},
			description: "too many failed logins; the account is locked until 14:05:00 UTC (about 10 minutes)"},
		{name: "in the lock's last seconds", advance: 9*time.Minute + 40*time.Second, login: "ALICE@acme.example", password: pw,
			want: ErrAccountLocked, reason: "locked", lockouts: 1, locked: &LockedError{Until: until, Left: 20 * time.Second},
			description: "too many failed logins; the account is locked until 14:05:00 UTC (less than a minute)"},
		{name: "unknown login", login: "nobody", password: wrong, want: ErrInvalidCredentials, reason: "unknown_login", lockouts: 1},
		// A login no person can have (over 255 bytes) is logged cut
		// short: each refused attempt, locked or not, would otherwise
		// write what the client sent, up to a form's or a header's limit.
		// It is cut before a character the limit would split.
		{name: "an over-long login is logged cut short", login: strings.Repeat("x", 254) + "é" + strings.Repeat("x", 64<<10), password: wrong,
			want: ErrInvalidCredentials, reason: "unknown_login", lockouts: 1, logged: strings.Repeat("x", 254)},
		{name: "disabled person, right password", login: "bob", password: pw, want: ErrInactive, reason: "inactive", lockouts: 1},
		{name: "after the lock", advance: time.Minute, login: "alice", password: pw, lockouts: 1},
	}
	counts := map[string]float64{}
	for _, st := range steps {
		clk.Add(st.advance)
		logs.Reset()
		_, err := s.Authenticate(ctx, st.login, st.password)
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		var le *LockedError
		if got := errors.As(err, &le); got != (st.locked != nil) {
			t.Fatalf("%s: %v is a *LockedError: %v", st.name, err, got)
		}
		if le != nil {
			if !le.Until.Equal(st.locked.Until) || le.Left != st.locked.Left {
				t.Errorf("%s: locked until %v (%v left), want %v (%v)", st.name, le.Until, le.Left, st.locked.Until, st.locked.Left)
			}
			if d := le.Description(); d != st.description {
				t.Errorf("%s: description %q, want %q", st.name, d, st.description)
			}
		}
		if st.reason != "" {
			counts[st.reason]++
		}
		for _, r := range []string{"bad_password", "unknown_login", "locked", "inactive"} {
			if got := counterValue(t, reg, "berth_login_failures_total", r); got != counts[r] {
				t.Errorf("%s: berth_login_failures_total{reason=%q} = %v, want %v", st.name, r, got, counts[r])
			}
		}
		if got := counterValue(t, reg, "berth_account_lockouts_total", ""); got != st.lockouts {
			t.Errorf("%s: berth_account_lockouts_total = %v, want %v", st.name, got, st.lockouts)
		}
		out := logs.String()
		logged := st.login
		if st.logged != "" {
			logged = st.logged
			if !strings.Contains(out, fmt.Sprintf(`"login_bytes":%d`, len(st.login))) {
				t.Errorf("%s: the login's length is not logged:\n%.300s", st.name, out)
			}
		}
		if len(out) > 1024 {
			t.Errorf("%s: %d bytes logged", st.name, len(out))
		}
		if strings.Contains(out, st.password) {
			t.Errorf("%s: the password is in the log:\n%s", st.name, out)
		}
		if st.reason != "" && (!strings.Contains(out, `"level":"WARN","msg":"login failed"`) || !strings.Contains(out, `"login":"`+logged+`"`) || !strings.Contains(out, `"reason":"`+st.reason+`"`)) {
			t.Errorf("%s: no warning with the login and reason:\n%s", st.name, out)
		}
		if locking := st.name == "the failure that locks says for how long"; locking != strings.Contains(out, "account locked") {
			t.Errorf("%s: lockout logged: %v, want %v:\n%s", st.name, !locking, locking, out)
		}
		if st.reason == "" && out != "" {
			t.Errorf("%s: a successful login logged:\n%s", st.name, out)
		}
	}
}

// TestLockedErrorDescription: how the time left reads, and that a lock
// longer than most of a day names its date.
func TestLockedErrorDescription(t *testing.T) {
	until := time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		left time.Duration
		want string
	}{
		{59 * time.Second, "until 09:30:00 UTC (less than a minute)"},
		{time.Minute, "until 09:30:00 UTC (about 1 minute)"},
		{15*time.Minute + 29*time.Second, "until 09:30:00 UTC (about 15 minutes)"},
		{15*time.Minute + 30*time.Second, "until 09:30:00 UTC (about 16 minutes)"},
		{119 * time.Minute, "until 09:30:00 UTC (about 119 minutes)"},
		{5*time.Hour + 10*time.Minute, "until 09:30:00 UTC (about 5 hours)"},
		{30 * time.Hour, "until 2026-11-27 09:30:00 UTC (about 30 hours)"},
	} {
		e := &LockedError{Until: until.In(time.FixedZone("CET", 3600)), Left: c.left}
		if got := e.Description(); got != "too many failed logins; the account is locked "+c.want {
			t.Errorf("%v left: %q, want ...%q", c.left, got, c.want)
		}
		if !errors.Is(e, ErrAccountLocked) || !strings.Contains(e.Error(), "2026-11-27T09:30:00Z") {
			t.Errorf("%v left: Error %q, Is ErrAccountLocked %v", c.left, e.Error(), errors.Is(e, ErrAccountLocked))
		}
	}
}

// TestResetPasswordAndUnlock: the operator's way back into an account
// (berth reset-password) sets the password, clears the lock and ends the
// sessions, for any person; Unlock clears the lock alone.
func TestResetPasswordAndUnlock(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 2, Window: time.Minute, Duration: time.Hour}
	s := newService(t, o)
	_, alice := fixture(t, s)
	lock := func() {
		t.Helper()
		s.Authenticate(ctx, "alice", "wrong password")
		if _, err := s.Authenticate(ctx, "alice", "wrong password"); !errors.Is(err, ErrAccountLocked) {
			t.Fatalf("not locked: %v", err)
		}
	}
	const newPW = "a brand new password"
	for _, c := range []struct {
		name string
		do   func() error
		want error
		// after: the password that logs in afterwards ("" none checked).
		after string
	}{
		{"Unlock clears the lock and keeps the password", func() error { lock(); return s.Unlock(ctx, alice.ID) }, nil, pw},
		{"Unlock of nobody", func() error { return s.Unlock(ctx, alice.ID+100) }, ErrNotFound, ""},
		{"reset by e-mail: locked person, live session", func() error {
			tok, err := s.IssueTokens(ctx, alice.ID, 0)
			if err != nil {
				return err
			}
			lock()
			p, err := s.ResetPassword(ctx, "ALICE@acme.example", newPW)
			if err != nil {
				return err
			}
			if p.ID != alice.ID {
				t.Errorf("reset person %d, want %d", p.ID, alice.ID)
			}
			if _, err := s.ValidateAccess(ctx, tok.AccessToken); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("access token after the reset: %v", err)
			}
			if _, _, err := s.Refresh(ctx, tok.RefreshToken); !errors.Is(err, ErrInvalidToken) {
				t.Errorf("refresh token after the reset: %v", err)
			}
			if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrInvalidCredentials) {
				t.Errorf("old password after the reset: %v", err)
			}
			return nil
		}, nil, newPW},
		{"reset of an unknown login", func() error { _, err := s.ResetPassword(ctx, "nobody", newPW); return err }, ErrNotFound, ""},
		{"reset with a short password", func() error { _, err := s.ResetPassword(ctx, "alice", "short"); return err }, ErrInvalid, ""},
	} {
		if err := c.do(); !errors.Is(err, c.want) || (c.want == nil && err != nil) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		if c.after != "" {
			if _, err := s.Authenticate(ctx, "alice", c.after); err != nil {
				t.Fatalf("%s: login afterwards: %v", c.name, err)
			}
		}
	}
	if n := countKeys(t, s, pfxLock); n != 0 {
		t.Errorf("%d lock keys left", n)
	}
}

// counterValue reads a counter of reg; label is the value of its one
// label, "" for a counter without labels.
func counterValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s} in the registry", name, label)
	return 0
}

// TestLockRefusesTokens: while a person is locked by failed logins, the
// access and refresh tokens issued before are refused with the lock's
// error (issues 11 and 12: a locked person is refused on the very next
// request, tokens included); the refusal uses nothing up, and once the
// lock is over the same tokens serve again.
func TestLockRefusesTokens(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	o := testOptions()
	o.Now = clk.Now
	o.AccessTTL = 24 * time.Hour
	o.Lockout = LockoutOptions{MaxFailures: 2, Window: time.Minute, Duration: 10 * time.Minute}
	s := newService(t, o)
	_, alice := fixture(t, s)
	toks, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.Authenticate(ctx, "alice", "wrong password"); err == nil {
			t.Fatal("a wrong password was accepted")
		}
	}
	for _, step := range []struct {
		name   string
		after  time.Duration
		locked bool
	}{
		{"at once", 0, true},
		{"within the lock", 9 * time.Minute, true},
		{"after the lock", 2 * time.Minute, false},
	} {
		clk.Add(step.after)
		_, aerr := s.AccessCaller(ctx, toks.AccessToken)
		_, _, rerr := s.Refresh(ctx, toks.RefreshToken)
		if step.locked {
			var le *LockedError
			if !errors.As(aerr, &le) || !errors.Is(rerr, ErrAccountLocked) {
				t.Errorf("%s: access %v, refresh %v; want the lock's error for both", step.name, aerr, rerr)
			}
			continue
		}
		if aerr != nil || rerr != nil {
			t.Errorf("%s: access %v, refresh %v; want both served", step.name, aerr, rerr)
		}
	}
}
