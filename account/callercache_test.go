package account

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
)

// TestCallerCacheSeesEveryWrite: Caller and AccessCaller keep what they
// read, and every change that matters to a request takes effect at the
// very next one, also when another Service on the same store made it.
func TestCallerCacheSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	s := New(db, testOptions())
	other := New(db, testOptions())
	org, alice := fixture(t, s)
	toks, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// check asserts what both entry points answer now, twice: the second
	// answer comes from the cache.
	check := func(step string, wantErr error, want func(Caller) bool) {
		t.Helper()
		for range 2 {
			c, err := s.Caller(ctx, alice.ID)
			a, aerr := s.AccessCaller(ctx, toks.AccessToken)
			if wantErr == ErrInvalidToken {
				if err != nil || !errors.Is(aerr, ErrInvalidToken) {
					t.Fatalf("%s: Caller %v, AccessCaller %v; want the token refused", step, err, aerr)
				}
				continue
			}
			if !errors.Is(err, wantErr) || !errors.Is(aerr, wantErr) {
				t.Fatalf("%s: Caller %v, AccessCaller %v; want %v", step, err, aerr, wantErr)
			}
			if wantErr == nil && (!want(c) || !want(a)) {
				t.Fatalf("%s: read %+v and %+v", step, c, a)
			}
		}
	}
	any := func(Caller) bool { return true }
	check("start", nil, any)

	setActive := func(v bool) {
		if _, err := other.UpdatePerson(ctx, alice.ID, func(p *Person) error { p.Active = v; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setActive(false)
	check("person disabled", ErrInactive, nil)
	setActive(true)
	// Enabled again, the person is whole, and the sessions from before
	// the disabling are gone.
	check("person enabled", ErrInvalidToken, nil)
	if toks, err = s.IssueTokens(ctx, alice.ID, 0); err != nil {
		t.Fatal(err)
	}
	check("person enabled, signed in again", nil, any)

	setOrg := func(v bool) {
		if _, err := other.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = v; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setOrg(false)
	check("organization disabled", ErrInactive, nil)
	setOrg(true)
	// As for a person: enabled again, the sessions from before are gone.
	check("organization enabled", ErrInvalidToken, nil)
	if toks, err = s.IssueTokens(ctx, alice.ID, 0); err != nil {
		t.Fatal(err)
	}
	check("organization enabled, signed in again", nil, any)

	if _, err := other.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.WebDAVEnabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	check("policy changed", nil, func(c Caller) bool { return !c.Organization.Policy.WebDAVEnabled })

	if err := other.Revoke(ctx, toks.AccessToken); err != nil {
		t.Fatal(err)
	}
	check("token revoked", ErrInvalidToken, nil)

	if toks, err = s.IssueTokens(ctx, alice.ID, 0); err != nil {
		t.Fatal(err)
	}
	check("new session", nil, any)
	if err := other.SetPassword(ctx, alice.ID, "another correct horse"); err != nil {
		t.Fatal(err)
	}
	check("password changed", ErrInvalidToken, nil)
}

// cacheWorld is what TestCallerCacheFileWrites revokes: alice, of an
// organization below another, with a session issued to the machine of
// her device password.
type cacheWorld struct {
	s            *Service
	db           kv.Store
	clk          *clock
	parent, org  Organization
	alice        Person
	toks         Tokens
	device       DevicePassword
	deviceSecret string
}

// errMainPassword: DeviceCallerRef did not take the password as a device
// password (ok false, no error), so the front end judges it as the main
// password, which it is not: the device is refused.
var errMainPassword = errors.New("not a device password")

// fileWrite commits what a file write commits: kv.Content keys only (a
// folder's child, an activity record), which leave MetaGeneration where
// it was.
func fileWrite(t *testing.T, db kv.Store) {
	t.Helper()
	meta, n := kv.MetaGeneration(db), db.Generation()
	err := db.Update(context.Background(), func(tx kv.Txn) error {
		if err := tx.Set(kv.Key(kv.VFSChild, n), []byte("x")); err != nil {
			return err
		}
		return tx.Set(kv.Key(kv.ActivityRecord, n), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := kv.MetaGeneration(db); got != meta {
		t.Fatalf("a file write moved MetaGeneration from %d to %d: the caches would not hold across it, and this test would prove nothing", meta, got)
	}
}

// answers asks the three entry points once each.
func (w *cacheWorld) answers() (login, token, device error) {
	ctx := context.Background()
	_, login = w.s.LoginCallerRef(ctx, w.alice.ID, w.alice.Username, w.alice.PasswordHash)
	_, token = w.s.AccessCaller(ctx, w.toks.AccessToken)
	_, ok, device := w.s.DeviceCallerRef(ctx, w.alice.Username, w.deviceSecret)
	if device == nil && !ok {
		device = errMainPassword
	}
	return login, token, device
}

// TestCallerCacheFileWrites: LoginCallerRef, AccessCaller and DeviceCallerRef
// keep their answers across file writes (commits of kv.Content keys only,
// which leave kv.MetaGeneration alone), yet every revocation takes effect
// at the very next request although only file writes follow it, and so
// does what ends with time alone (an expiry, which commits nothing).
// Each row: the caches are filled, a file write, the change, file writes,
// then each entry point is asked twice (the second answer is the cache's).
func TestCallerCacheFileWrites(t *testing.T) {
	type want struct{ login, token, device error } // nil lets in
	in := want{}
	rows := []struct {
		name   string
		change func(t *testing.T, w *cacheWorld) error
		want   want
	}{
		{"nothing changed", func(*testing.T, *cacheWorld) error { return nil }, in},
		// A device password outlives a new main password its person
		// chose, not one reset by someone else (docs/api.md, device
		// passwords).
		{"password changed", func(_ *testing.T, w *cacheWorld) error {
			self := WithActor(context.Background(), Actor{Type: "person", PersonID: w.alice.ID})
			return w.s.SetPassword(self, w.alice.ID, "another correct horse")
		}, want{ErrInvalidCredentials, ErrInvalidToken, nil}},
		{"password reset", func(_ *testing.T, w *cacheWorld) error {
			return w.s.SetPassword(context.Background(), w.alice.ID, "another correct horse")
		}, want{ErrInvalidCredentials, ErrInvalidToken, ErrInvalidCredentials}},
		{"person disabled", func(_ *testing.T, w *cacheWorld) error {
			_, err := w.s.UpdatePerson(context.Background(), w.alice.ID, func(p *Person) error { p.Active = false; return nil })
			return err
		}, want{ErrInactive, ErrInactive, ErrInactive}},
		{"person deleted", func(_ *testing.T, w *cacheWorld) error {
			return w.s.DeletePerson(context.Background(), w.alice.ID)
		}, want{ErrNotFound, ErrInvalidToken, ErrInvalidCredentials}},
		{"organization disabled", func(_ *testing.T, w *cacheWorld) error {
			_, err := w.s.UpdateOrganization(context.Background(), w.org.ID, func(o *Organization) error { o.Active = false; return nil })
			return err
		}, want{ErrInactive, ErrInactive, ErrInactive}},
		{"parent organization disabled", func(_ *testing.T, w *cacheWorld) error {
			_, err := w.s.UpdateOrganization(context.Background(), w.parent.ID, func(o *Organization) error { o.Active = false; return nil })
			return err
		}, want{ErrInactive, ErrInactive, ErrInactive}},
		{"organization deleted", func(_ *testing.T, w *cacheWorld) error {
			_, err := w.s.DeleteOrganization(context.Background(), w.org.ID)
			return err
		}, want{ErrInactive, ErrInactive, ErrInactive}},
		{"session signed out", func(_ *testing.T, w *cacheWorld) error {
			return w.s.Revoke(context.Background(), w.toks.RefreshToken)
		}, want{nil, ErrInvalidToken, nil}},
		{"signed out by the access token", func(_ *testing.T, w *cacheWorld) error {
			return w.s.SignOut(context.Background(), w.toks.AccessToken)
		}, want{nil, ErrInvalidToken, nil}},
		{"access token revoked", func(_ *testing.T, w *cacheWorld) error {
			return w.s.Revoke(context.Background(), w.toks.AccessToken)
		}, want{nil, ErrInvalidToken, nil}},
		{"every session ended", func(_ *testing.T, w *cacheWorld) error {
			return w.s.RevokeAll(context.Background(), w.alice.ID)
		}, want{nil, ErrInvalidToken, nil}},
		{"machine deleted", func(_ *testing.T, w *cacheWorld) error {
			return w.s.DeleteMachine(context.Background(), w.device.MachineID)
		}, want{nil, ErrInvalidToken, ErrInvalidCredentials}},
		{"device password revoked", func(_ *testing.T, w *cacheWorld) error {
			return w.s.RevokeDevicePassword(context.Background(), w.alice.ID, w.device.ID)
		}, want{nil, nil, ErrInvalidCredentials}},
		{"locked by failed sign-ins", func(t *testing.T, w *cacheWorld) error {
			for range 3 {
				if _, err := w.s.Authenticate(context.Background(), w.alice.Username, "a wrong password 1234"); !errors.Is(err, ErrInvalidCredentials) && !errors.Is(err, ErrAccountLocked) {
					t.Fatalf("a wrong password: %v", err)
				}
			}
			return nil
		}, want{ErrAccountLocked, ErrAccountLocked, ErrAccountLocked}},
		{"policy ends sessions sooner", func(_ *testing.T, w *cacheWorld) error {
			_, err := w.s.UpdatePolicy(context.Background(), w.org.ID, func(p *Policy) error { p.DeactivateTokenFrequency = "1m"; return nil })
			w.clk.Add(2 * time.Minute)
			return err
		}, want{nil, ErrInvalidToken, nil}},
		// What ends with time commits nothing: the answer kept must not
		// outlive it.
		{"access token expired", func(_ *testing.T, w *cacheWorld) error {
			w.clk.Add(w.s.opts.AccessTTL)
			return nil
		}, want{nil, ErrInvalidToken, nil}},
		{"session past the policy's lifetime", func(_ *testing.T, w *cacheWorld) error {
			w.clk.Add(2 * time.Hour)
			return nil
		}, want{nil, ErrInvalidToken, nil}},
		// Sessions already open go on (docs/api.md,
		// change_password_frequency), and so do device passwords.
		{"password past the policy's frequency", func(_ *testing.T, w *cacheWorld) error {
			w.clk.Add(25 * time.Hour)
			return nil
		}, want{ErrPasswordExpired, nil, nil}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newCacheWorld(t, row.name)
			for range 2 {
				if l, tk, d := w.answers(); l != nil || tk != nil || d != nil {
					t.Fatalf("before the change: login %v, token %v, device %v", l, tk, d)
				}
			}
			fileWrite(t, w.db)
			// The file write kept every answer: no read.
			views := w.db.(*badger.DB).TxnStats().Views
			if l, tk, d := w.answers(); l != nil || tk != nil || d != nil {
				t.Fatalf("after a file write: login %v, token %v, device %v", l, tk, d)
			}
			if n := w.db.(*badger.DB).TxnStats().Views - views; n != 0 {
				t.Fatalf("after a file write the entry points read %d times; want their answers kept", n)
			}
			if err := row.change(t, w); err != nil {
				t.Fatal(err)
			}
			fileWrite(t, w.db)
			fileWrite(t, w.db)
			for i := range 2 {
				l, tk, d := w.answers()
				for _, c := range []struct {
					what      string
					got, want error
				}{{"LoginCallerRef", l, row.want.login}, {"AccessCaller", tk, row.want.token}, {"DeviceCallerRef", d, row.want.device}} {
					if (c.want == nil) != (c.got == nil) || !errors.Is(c.got, c.want) {
						t.Errorf("ask %d: %s: %v, want %v", i+1, c.what, c.got, c.want)
					}
				}
			}
		})
	}
}

// newCacheWorld builds the world of TestCallerCacheFileWrites. The
// policy's lifetimes are set for the rows of expiry only.
func newCacheWorld(t *testing.T, row string) *cacheWorld {
	t.Helper()
	ctx := context.Background()
	w := &cacheWorld{db: openDB(t), clk: &clock{t: time.Date(2026, 11, 27, 5, 0, 0, 0, time.UTC)}}
	o := testOptions()
	o.Now = w.clk.Now
	o.Lockout = LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}
	if row != "access token expired" {
		o.AccessTTL = 48 * time.Hour
	}
	w.s = New(w.db, o)
	var err error
	if w.parent, err = w.s.CreateOrganization(ctx, OrganizationInput{Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	pol := DefaultPolicy()
	switch row {
	case "session past the policy's lifetime":
		pol.DeactivateTokenFrequency = "1h"
	case "password past the policy's frequency":
		d := "24h"
		pol.ChangePasswordFrequency = &d
	}
	if w.org, err = w.s.CreateOrganization(ctx, OrganizationInput{ParentID: w.parent.ID, Name: "Acme Labs", Policy: &pol}); err != nil {
		t.Fatal(err)
	}
	if w.alice, err = w.s.CreatePerson(ctx, PersonInput{OrganizationID: w.org.ID, Username: "alice", Email: "alice@acme.example", Password: pw}); err != nil {
		t.Fatal(err)
	}
	if w.device, w.deviceSecret, err = w.s.CreateDevicePassword(ctx, w.alice.ID, DevicePasswordInput{Name: "laptop", Machine: MachineInput{GUID: "laptop-guid", DNSName: "laptop"}}); err != nil {
		t.Fatal(err)
	}
	if w.toks, err = w.s.IssueTokens(ctx, w.alice.ID, w.device.MachineID); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestTwoStepCacheFileWrites: the two-step answer (enrolled, kept by
// MetaGeneration) holds across file writes, yet an enrollment, a reset
// and a policy that requires two-step verification each take effect at
// the next ask although only file writes follow them: the main password
// is refused over WebDAV (NeedsDevicePassword), and a caller who must
// enroll is held to enrollment (TwoStepDue).
func TestTwoStepCacheFileWrites(t *testing.T) {
	ctx := context.Background()
	rows := []struct {
		name     string
		required bool // the policy requires two-step verification before the change
		enrolled bool // the person enrolled before the change
		change   func(t *testing.T, e *twoStepEnv)
		// What follows the change.
		needsDevice bool
		due         error
	}{
		{"enrolled", false, false, func(t *testing.T, e *twoStepEnv) { e.enrollTOTP(t) }, true, nil},
		{"required by the policy", false, false, func(t *testing.T, e *twoStepEnv) {
			if _, err := e.s.UpdatePolicy(ctx, e.org.ID, func(p *Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}, true, ErrTwoStepRequired},
		{"reset under the policy", true, true, func(t *testing.T, e *twoStepEnv) {
			if err := e.s.ResetTwoStep(ctx, e.p.ID); err != nil {
				t.Fatal(err)
			}
		}, true, ErrTwoStepRequired},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			e := newTwoStepEnv(t)
			if row.required {
				if _, err := e.s.UpdatePolicy(ctx, e.org.ID, func(p *Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if row.enrolled {
				e.enrollTOTP(t)
			}
			toks, err := e.s.IssueTokens(ctx, e.p.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			ask := func(when string, needsDevice bool, due error) {
				t.Helper()
				for range 2 {
					c, err := e.s.AccessCaller(ctx, toks.AccessToken)
					if err != nil {
						t.Fatal(err)
					}
					if got, err := e.s.NeedsDevicePassword(ctx, &c); err != nil || got != needsDevice {
						t.Errorf("%s: NeedsDevicePassword %v, %v; want %v", when, got, err, needsDevice)
					}
					if err := e.s.TwoStepDue(ctx, &c); !errors.Is(err, due) || (err == nil) != (due == nil) {
						t.Errorf("%s: TwoStepDue %v, want %v", when, err, due)
					}
				}
			}
			ask("before", row.required || row.enrolled, nil)
			fileWrite(t, e.s.db)
			ask("after a file write", row.required || row.enrolled, nil)
			e.clk.Add(time.Minute) // a TOTP step of its own
			row.change(t, e)
			fileWrite(t, e.s.db)
			fileWrite(t, e.s.db)
			ask("after the change", row.needsDevice, row.due)
		})
	}
}

// TestLoginCallerCacheByNetwork: LoginCallerRef keeps its answers by the
// network the lockout counts a client address as (AddrNet): the IPv6
// privacy addresses of one /64 share an entry, other networks read their
// own, and a throttle of the /64, brought by guesses from a third address
// in it, refuses the remembered password from the very next request of
// every address in it, with no answer kept from before.
func TestLoginCallerCacheByNetwork(t *testing.T) {
	o := floodOptions()
	s := newService(t, o)
	_, alice := fixture(t, s)
	db := s.db.(*badger.DB)
	steps := []struct {
		name, addr string
		guesses    int    // failed sign-ins from addr first
		want       error  // nil: let in
		reads      uint64 // read transactions LoginCallerRef took
	}{
		{"an address of a /64", "2001:db8:1:2::1", 0, nil, 1},
		{"another of the same /64: its entry", "2001:db8:1:2:a1b2:c3d4:e5f6:1", 0, nil, 0},
		{"the first again", "2001:db8:1:2::1", 0, nil, 0},
		{"another /64 of the same /48: an entry of its own", "2001:db8:1:3::1", 0, nil, 1},
		{"an IPv4 address", "192.0.2.1", 0, nil, 1},
		{"its neighbour: an entry of its own", "192.0.2.2", 0, nil, 1},
		{"a third address of the /64 throttles it", "2001:db8:1:2::beef", o.Lockout.AddressMaxFailures, ErrTooManyAttempts, 1},
		{"the first address: refused at once", "2001:db8:1:2::1", 0, ErrTooManyAttempts, 1},
		{"the second: refused at once", "2001:db8:1:2:a1b2:c3d4:e5f6:1", 0, ErrTooManyAttempts, 1},
		{"the other /64 is let in", "2001:db8:1:3::1", 0, nil, 1},
	}
	for _, st := range steps {
		for i := range st.guesses {
			if _, err := s.Authenticate(from(st.addr), fmt.Sprintf("nobody%d", i), "a guess"); err == nil {
				t.Fatalf("%s: a guess let in", st.name)
			}
		}
		views := db.TxnStats().Views
		_, err := s.LoginCallerRef(from(st.addr), alice.ID, "alice", alice.PasswordHash)
		if (st.want == nil) != (err == nil) || !errors.Is(err, st.want) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		if n := db.TxnStats().Views - views; n != st.reads {
			t.Errorf("%s: %d reads, want %d", st.name, n, st.reads)
		}
	}
}
