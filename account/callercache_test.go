package account

import (
	"context"
	"errors"
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
	check("person enabled", nil, any)

	setOrg := func(v bool) {
		if _, err := other.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = v; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setOrg(false)
	check("organization disabled", ErrInactive, nil)
	setOrg(true)
	check("organization enabled", nil, any)

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
	s                *Service
	db               kv.Store
	clk              *clock
	parent, org      Organization
	alice            Person
	toks             Tokens
	device           DevicePassword
	deviceSecret     string
	fileWrites       int
	metaBeforeWrites uint64
}

// errMainPassword: DeviceCaller did not take the password as a device
// password (ok false, no error), so the front end judges it as the main
// password, which it is not: the device is refused.
var errMainPassword = errors.New("not a device password")

// fileWrite commits what a file write commits: kv.Content keys only (a
// folder's child, an activity record), which leave MetaGeneration where
// it was.
func (w *cacheWorld) fileWrite(t *testing.T) {
	t.Helper()
	w.fileWrites++
	meta := kv.MetaGeneration(w.db)
	err := w.db.Update(context.Background(), func(tx kv.Txn) error {
		if err := tx.Set(kv.Key(kv.VFSChild, uint64(w.fileWrites)), []byte("x")); err != nil {
			return err
		}
		return tx.Set(kv.Key(kv.ActivityRecord, uint64(w.fileWrites)), []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := kv.MetaGeneration(w.db); got != meta {
		t.Fatalf("a file write moved MetaGeneration from %d to %d: the caches would not hold across it, and this test would prove nothing", meta, got)
	}
}

// answers asks the three entry points once each.
func (w *cacheWorld) answers() (login, token, device error) {
	ctx := context.Background()
	_, login = w.s.LoginCaller(ctx, w.alice.ID, w.alice.Username, w.alice.PasswordHash)
	_, token = w.s.AccessCaller(ctx, w.toks.AccessToken)
	_, ok, device := w.s.DeviceCaller(ctx, w.alice.Username, w.deviceSecret)
	if device == nil && !ok {
		device = errMainPassword
	}
	return login, token, device
}

// TestCallerCacheFileWrites: LoginCaller, AccessCaller and DeviceCaller
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
		// A device password outlives a new main password (docs/api.md,
		// device passwords); it is revoked on its own.
		{"password changed", func(_ *testing.T, w *cacheWorld) error {
			return w.s.SetPassword(context.Background(), w.alice.ID, "another correct horse")
		}, want{ErrInvalidCredentials, ErrInvalidToken, nil}},
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
			w.fileWrite(t)
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
			w.fileWrite(t)
			w.fileWrite(t)
			for i := range 2 {
				l, tk, d := w.answers()
				for _, c := range []struct {
					what      string
					got, want error
				}{{"LoginCaller", l, row.want.login}, {"AccessCaller", tk, row.want.token}, {"DeviceCaller", d, row.want.device}} {
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
