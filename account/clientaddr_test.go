package account

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"berth/kv"
)

// from is ctx as a front end sets it for a request from addr.
func from(addr string) context.Context {
	return WithClientAddr(context.Background(), netip.MustParseAddr(addr))
}

// floodOptions are small thresholds, for the tests of this file.
func floodOptions() Options {
	o := testOptions()
	o.Lockout = LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour,
		AddressMaxFailures: 4, AddressWindow: time.Hour, AddressDuration: time.Hour,
		KnownAddressTTL: 24 * time.Hour}
	return o
}

// TestLockoutPerAddressAndAccount walks the two counters and the known
// address, one step after another against one Service: one address
// cannot lock everyone out (it is throttled after AddressMaxFailures,
// and its further attempts reach no account's counter), many addresses
// cannot guess one password (the account's counter takes every address's
// failures), and a person keeps signing in where they did before.
func TestLockoutPerAddressAndAccount(t *testing.T) {
	o := floodOptions()
	o.Now = (&clock{t: time.Date(2026, 11, 26, 18, 0, 0, 0, time.UTC)}).Now
	s := newService(t, o)
	org, _ := fixture(t, s)
	for _, u := range []string{"bob", "carol", "dave", "erin"} {
		if _, err := s.CreatePerson(context.Background(), PersonInput{OrganizationID: org.ID, Username: u, Email: u + "@acme.example", Password: pw}); err != nil {
			t.Fatal(err)
		}
	}
	// Erin has signed in from her office before.
	if _, err := s.Authenticate(from("198.51.100.7"), "erin", pw); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, addr, login, password string
		want                        error // nil: signed in
	}{
		// One attacker address tries a password on several accounts.
		{"attacker: alice", "192.0.2.1", "alice", "guess 1", ErrInvalidCredentials},
		{"attacker: bob", "192.0.2.1", "bob", "guess 1", ErrInvalidCredentials},
		{"attacker: carol", "192.0.2.1", "carol", "guess 1", ErrInvalidCredentials},
		{"attacker: the failure that throttles the address", "192.0.2.1", "nobody", "guess 1", ErrTooManyAttempts},
		{"attacker: refused unchecked, even the right password", "192.0.2.1", "dave", pw, ErrTooManyAttempts},
		{"attacker's neighbour on another address is not throttled", "192.0.2.2", "dave", pw, nil},
		{"nobody the attacker tried is locked", "203.0.113.9", "alice", pw, nil},
		// Many addresses guess one account's password.
		{"botnet 1", "10.0.0.1", "bob", "guess 2", ErrInvalidCredentials},
		{"botnet 2 locks bob: his 3rd failure, the attacker's counted too", "10.0.0.2", "bob", "guess 3", ErrAccountLocked},
		{"bob is locked for every unknown address", "10.0.0.4", "bob", pw, ErrAccountLocked},
		// IPv6: a /64 is one address.
		{"v6 1", "2001:db8:1:2::1", "carol", "guess 5", ErrInvalidCredentials},
		{"v6 2, same /64, locks carol", "2001:db8:1:2::ffff", "carol", "guess 6", ErrAccountLocked},
		{"v6 other /64 of the same /48 is another address, carol still locked", "2001:db8:1:3::1", "carol", pw, ErrAccountLocked},
		// Erin's account is locked by strangers; her office still works.
		{"stranger 1", "10.1.0.1", "erin", "guess 7", ErrInvalidCredentials},
		{"stranger 2", "10.1.0.2", "erin", "guess 8", ErrInvalidCredentials},
		{"stranger 3 locks erin", "10.1.0.3", "erin", "guess 9", ErrAccountLocked},
		{"erin at a new address: locked", "10.9.9.9", "erin", pw, ErrAccountLocked},
		{"erin at her office: in", "198.51.100.7", "erin", pw, nil},
		// Guesses at the office count on the office's own counter.
		{"office guess 1", "198.51.100.7", "erin", "guess 10", ErrInvalidCredentials},
		{"office guess 2", "198.51.100.7", "erin", "guess 11", ErrInvalidCredentials},
		{"office guess 3 locks erin there too", "198.51.100.7", "erin", "guess 12", ErrAccountLocked},
		{"erin at her office: locked now", "198.51.100.7", "erin", pw, ErrAccountLocked},
		// Dave's account is not locked; guesses where he is known lock him there.
		{"dave's address guess 1", "192.0.2.2", "dave", "guess 13", ErrInvalidCredentials},
		{"dave's address guess 2", "192.0.2.2", "dave", "guess 14", ErrInvalidCredentials},
		{"dave's address guess 3 locks dave there", "192.0.2.2", "dave", "guess 15", ErrAccountLocked},
		{"dave there: locked", "192.0.2.2", "dave", pw, ErrAccountLocked},
		{"dave elsewhere: in", "203.0.113.10", "dave", pw, nil},
	}
	for _, st := range steps {
		_, err := s.Authenticate(from(st.addr), st.login, st.password)
		if st.want == nil && err != nil || !errors.Is(err, st.want) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		// The right password, as a front end remembers it
		// (LoginCallerRef), gets the same answer: else it would tell a
		// throttled address, or a guesser where the person is known,
		// which guess was right.
		if p, err := s.PersonByLogin(context.Background(), st.login); err == nil && st.password == pw {
			if _, err := s.LoginCallerRef(from(st.addr), p.ID, st.login, p.PasswordHash); st.want == nil && err != nil || !errors.Is(err, st.want) {
				t.Fatalf("%s, remembered: %v, want %v", st.name, err, st.want)
			}
		}
		if errors.Is(st.want, ErrTooManyAttempts) {
			var te *ThrottledError
			if !errors.As(err, &te) || te.Left != time.Hour {
				t.Fatalf("%s: %#v, want a *ThrottledError with an hour left", st.name, err)
			}
			if d, ok := RetryAfter(err); !ok || d != time.Hour {
				t.Fatalf("%s: RetryAfter %v %v", st.name, d, ok)
			}
		}
	}
	// An administrator's unlock ends the locks at known addresses too.
	erin, err := s.PersonByLogin(context.Background(), "erin")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unlock(context.Background(), erin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(from("198.51.100.7"), "erin", pw); err != nil {
		t.Fatalf("erin at her office after the unlock: %v", err)
	}
	// Without an address (a caller that set none) only the account counts.
	if _, err := s.Authenticate(context.Background(), "dave", pw); err != nil {
		t.Fatalf("no address: %v", err)
	}
}

// TestRememberedPasswordMeetsLoweredLimits: a remembered password
// (LoginCallerRef) is refused wherever Authenticate refuses the same
// password unchecked, also where failures written under higher limits
// reach limits lowered since (a restart with a new configuration; the
// counters live on in the store for their window): Authenticate refused
// the right password there, while the remembered one, which asked only
// whether a lock was written, was let in.
func TestRememberedPasswordMeetsLoweredLimits(t *testing.T) {
	for _, row := range []struct {
		name   string
		before func(*testing.T, *Service) // failed sign-ins under floodOptions
		lower  func(*LockoutOptions)
		addr   string
		want   error
	}{
		{"the account's failures", func(t *testing.T, s *Service) {
			for _, a := range []string{"10.0.0.1", "10.0.0.2"} {
				s.Authenticate(from(a), "alice", "a guess")
			}
		}, func(lo *LockoutOptions) { lo.MaxFailures = 2 }, "203.0.113.1", ErrAccountLocked},
		{"the address's failures", func(t *testing.T, s *Service) {
			for _, login := range []string{"nobody", "somebody", "anybody"} {
				s.Authenticate(from("192.0.2.1"), login, "a guess")
			}
		}, func(lo *LockoutOptions) { lo.AddressMaxFailures = 3 }, "192.0.2.1", ErrTooManyAttempts},
		{"a known address's failures", func(t *testing.T, s *Service) {
			if _, err := s.Authenticate(from("198.51.100.7"), "alice", pw); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				s.Authenticate(from("198.51.100.7"), "alice", "a guess")
			}
		}, func(lo *LockoutOptions) { lo.MaxFailures = 2 }, "198.51.100.7", ErrAccountLocked},
		{"below the lowered limits", func(t *testing.T, s *Service) {
			s.Authenticate(from("10.0.0.1"), "alice", "a guess")
		}, func(lo *LockoutOptions) { lo.MaxFailures = 2 }, "10.0.0.1", nil},
	} {
		t.Run(row.name, func(t *testing.T) {
			db := openDB(t)
			o := floodOptions()
			before := New(db, o)
			_, alice := fixture(t, before)
			row.before(t, before)
			row.lower(&o.Lockout)
			s := New(db, o)
			_, err := s.LoginCallerRef(from(row.addr), alice.ID, "alice", alice.PasswordHash)
			if (row.want == nil) != (err == nil) || !errors.Is(err, row.want) {
				t.Errorf("remembered: %v, want %v", err, row.want)
			}
			if _, err := s.Authenticate(from(row.addr), "alice", pw); (row.want == nil) != (err == nil) || !errors.Is(err, row.want) {
				t.Errorf("checked: %v, want %v", err, row.want)
			}
		})
	}
}

// countingStore is a real store that counts write transactions.
type countingStore struct {
	kv.Store
	updates atomic.Int64
}

func (c *countingStore) Update(ctx context.Context, fn func(kv.Txn) error) error {
	c.updates.Add(1)
	return c.Store.Update(ctx, fn)
}

// TestFailedSignInIsOneWrite: a failed sign-in, known login or not, from
// an address or not, the one that locks too, is one write transaction;
// one refused unchecked (locked, throttled) writes nothing.
func TestFailedSignInIsOneWrite(t *testing.T) {
	db := &countingStore{Store: openDB(t)}
	s := New(db, floodOptions())
	fixture(t, s)
	for _, c := range []struct {
		name   string
		ctx    context.Context
		login  string
		want   error
		writes int64
	}{
		{"known login", context.Background(), "alice", ErrInvalidCredentials, 1},
		{"unknown login", context.Background(), "nobody", ErrInvalidCredentials, 1},
		{"from an address", from("192.0.2.1"), "alice", ErrInvalidCredentials, 1},
		{"the failure that locks", from("192.0.2.1"), "alice", ErrAccountLocked, 1},
		{"refused: locked", from("192.0.2.1"), "alice", ErrAccountLocked, 0},
		{"a third from the address", from("192.0.2.1"), "nobody", ErrInvalidCredentials, 1},
		{"the failure that throttles", from("192.0.2.1"), "somebody", ErrTooManyAttempts, 1},
		{"refused: throttled", from("192.0.2.1"), "somebody", ErrTooManyAttempts, 0},
	} {
		before := db.updates.Load()
		_, err := s.Authenticate(c.ctx, c.login, "wrong password")
		if !errors.Is(err, c.want) {
			t.Fatalf("%s: %v, want %v", c.name, err, c.want)
		}
		if n := db.updates.Load() - before; n != c.writes {
			t.Errorf("%s: %d write transactions, want %d", c.name, n, c.writes)
		}
	}
}

// TestHashQueueBounded: with every argon2 slot busy, MaxHashQueue checks
// wait and the next is refused at once with ErrBusy (a Retry-After of a
// second), counting as no failure; the waiting ones go on once slots free.
func TestHashQueueBounded(t *testing.T) {
	o := floodOptions()
	o.MaxHashQueue = 2
	s := newService(t, o)
	_, p := fixture(t, s)
	for range cap(s.hashSlots) {
		s.hashSlots <- struct{}{}
	}
	results := make(chan error, o.MaxHashQueue)
	for i := range o.MaxHashQueue {
		go func() {
			_, err := s.Authenticate(from(fmt.Sprintf("192.0.2.%d", i+1)), "alice", fmt.Sprintf("guess %d", i))
			results <- err
		}()
	}
	waitFor(t, 5*time.Second, func() bool { return s.hashWaiting.Load() == int64(o.MaxHashQueue) })
	start := time.Now()
	_, err := s.Authenticate(from("192.0.2.99"), "alice", pw)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("a check beyond the queue: %v, want ErrBusy", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("ErrBusy took %v: it must not wait", time.Since(start))
	}
	if d, ok := RetryAfter(err); !ok || d != time.Second {
		t.Errorf("RetryAfter(ErrBusy) = %v, %v", d, ok)
	}
	for range cap(s.hashSlots) {
		<-s.hashSlots
	}
	for range o.MaxHashQueue {
		if err := <-results; !errors.Is(err, ErrInvalidCredentials) {
			t.Errorf("a queued check: %v", err)
		}
	}
	// The refused one counted nowhere: alice has 2 failures of 3, and the
	// right password gets in.
	subject := s.loginSubject("alice", p.ID)
	var fr failRecord
	if err := s.db.View(context.Background(), func(tx kv.Txn) error { return s.get(tx, keyBytes(pfxFail, subject), &fr, ErrNotFound) }); err != nil || fr.Count != 2 {
		t.Fatalf("failures %d (%v), want 2", fr.Count, err)
	}
	if _, err := s.Authenticate(from("192.0.2.99"), "alice", pw); err != nil {
		t.Fatalf("right password afterwards: %v", err)
	}
}

// TestRefusalDelay: a refusal of a network client (one with an address)
// is held for RefusalDelay; one without an address is not. Each row has
// its own delay: a held answer is checked from below (at least the
// delay), and an unheld one against a delay of an hour, so that neither
// depends on how fast a loaded machine answers (a bound of 200 ms on the
// unheld one failed so, at 224 ms).
func TestRefusalDelay(t *testing.T) {
	for _, c := range []struct {
		name  string
		ctx   context.Context
		delay time.Duration
		held  bool
	}{
		{"from an address", from("192.0.2.1"), 300 * time.Millisecond, true},
		{"without one", context.Background(), time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := floodOptions()
			o.Lockout.MaxFailures = 1
			o.Lockout.RefusalDelay = c.delay
			s := newService(t, o)
			fixture(t, s)
			s.Authenticate(context.Background(), "alice", "wrong")
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := s.Authenticate(c.ctx, "alice", pw)
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("no answer within a minute: held for the delay of %v", c.delay)
			}
			d := time.Since(start)
			if !errors.Is(err, ErrAccountLocked) {
				t.Fatalf("%v, want ErrAccountLocked", err)
			}
			if c.held && d < c.delay {
				t.Errorf("answered after %v, want at least %v", d, c.delay)
			}
		})
	}
}

// TestAddrSubject: an IPv4 address is itself, an IPv6 address its /64,
// and an IPv4-mapped IPv6 address the IPv4 one.
func TestAddrSubject(t *testing.T) {
	subj := func(a string) string { return string(addrSubject(netip.MustParseAddr(a).Unmap())) }
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"192.0.2.1", "192.0.2.2", false},
		{"192.0.2.1", "::ffff:192.0.2.1", true},
		{"2001:db8:1:2::1", "2001:db8:1:2:ffff:ffff:ffff:ffff", true},
		{"2001:db8:1:2::1", "2001:db8:1:3::1", false},
		{"127.0.0.1", "::1", false},
	} {
		if got := subj(c.a) == subj(c.b); got != c.same {
			t.Errorf("%s and %s: one subject %v, want %v", c.a, c.b, got, c.same)
		}
	}
	if addrSubject(netip.Addr{}) != nil {
		t.Error("no address has a subject")
	}
}

// TestRememberedPasswordMeetsAttemptsUnderWay: a remembered password
// (LoginCallerRef) is refused wherever Authenticate refuses the same
// password unchecked because attempts still being checked (reserved, not
// settled) reach a limit, also where its answer was kept from before
// they began. Else a guesser with MaxFailures wrong guesses held in the
// hash queue tries any number more meanwhile: each wrong one is refused
// unchecked and counts nowhere, and the right one, if a WebDAV client of
// the person's keeps it remembered, is let in at once.
func TestRememberedPasswordMeetsAttemptsUnderWay(t *testing.T) {
	for _, row := range []struct {
		name     string
		addr     string // where the remembered password comes from
		known    string // where alice signed in before ("": nowhere)
		pendAddr string // where the attempts under way come from
		onKnown  bool   // they are counted on alice's known pair
		others   bool   // they are guesses at other accounts
		pending  int
		want     error
	}{
		{"the account's", "203.0.113.1", "", "10.0.0.1", false, false, 3, ErrAccountLocked},
		{"the account's, fewer than its limit", "203.0.113.1", "", "10.0.0.1", false, false, 2, nil},
		{"the address's", "192.0.2.1", "", "192.0.2.1", false, true, 4, ErrTooManyAttempts},
		{"the /64's", "2001:db8:1:2::1", "", "2001:db8:1:2::beef", false, true, 4, ErrTooManyAttempts},
		{"another address's", "192.0.2.2", "", "192.0.2.1", false, true, 4, nil},
		{"the known pair's", "198.51.100.7", "198.51.100.7", "198.51.100.7", true, false, 3, ErrAccountLocked},
		{"the account's, alice at her known address", "198.51.100.7", "198.51.100.7", "10.0.0.1", false, false, 3, nil},
	} {
		t.Run(row.name, func(t *testing.T) {
			s := newService(t, floodOptions())
			_, alice := fixture(t, s)
			if row.known != "" {
				if _, err := s.Authenticate(from(row.known), "alice", pw); err != nil {
					t.Fatal(err)
				}
			}
			// The answer kept from before the attempts began.
			if _, err := s.LoginCallerRef(from(row.addr), alice.ID, "alice", alice.PasswordHash); err != nil {
				t.Fatalf("before: %v", err)
			}
			pa := netip.MustParseAddr(row.pendAddr)
			for i := range row.pending {
				subject := s.loginSubject("", alice.ID)
				if row.others {
					subject = s.loginSubject(fmt.Sprintf("nobody%d", i), 0)
				}
				a, err := s.reserve(context.Background(), s.counters(subject, alice.ID, pa, row.onKnown), pa)
				if err != nil {
					t.Fatalf("reserve %d: %v", i, err)
				}
				defer s.release(a)
			}
			_, err := s.LoginCallerRef(from(row.addr), alice.ID, "alice", alice.PasswordHash)
			if (row.want == nil) != (err == nil) || !errors.Is(err, row.want) {
				t.Errorf("remembered: %v, want %v", err, row.want)
			}
			s.opts.Lockout.RefusalDelay = 0
			checked, cancel := context.WithTimeout(from(row.addr), time.Second)
			defer cancel()
			if row.want == nil {
				return // the checked password would wait for the hash slots
			}
			if _, err := s.Authenticate(checked, "alice", pw); !errors.Is(err, row.want) {
				t.Errorf("checked: %v, want %v", err, row.want)
			}
		})
	}
}
