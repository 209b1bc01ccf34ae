package account

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSessionCaller: a session outlives its access token, as a refresh
// would find it, and ends with what ends the session.
func TestSessionCaller(t *testing.T) {
	ctx := context.Background()
	rows := []struct {
		name   string
		change func(t *testing.T, w *cacheWorld)
		want   error
	}{
		{"nothing changed", func(*testing.T, *cacheWorld) {}, nil},
		{"access token expired", func(_ *testing.T, w *cacheWorld) { w.clk.Add(72 * time.Hour) }, nil},
		{"refresh token expired", func(_ *testing.T, w *cacheWorld) { w.clk.Add(w.s.opts.RefreshTTL) }, ErrInvalidToken},
		{"session signed out", func(t *testing.T, w *cacheWorld) {
			if err := w.s.Revoke(ctx, w.toks.RefreshToken); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"signed out by its access token", func(t *testing.T, w *cacheWorld) {
			if err := w.s.SignOut(ctx, w.toks.AccessToken); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"password changed", func(t *testing.T, w *cacheWorld) {
			if err := w.s.SetPassword(ctx, w.alice.ID, "another correct horse"); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"person disabled", func(t *testing.T, w *cacheWorld) {
			if _, err := w.s.UpdatePerson(ctx, w.alice.ID, func(p *Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, ErrInactive},
		{"person disabled, then enabled again", func(t *testing.T, w *cacheWorld) {
			for _, active := range []bool{false, true} {
				if _, err := w.s.UpdatePerson(ctx, w.alice.ID, func(p *Person) error { p.Active = active; return nil }); err != nil {
					t.Fatal(err)
				}
			}
		}, ErrInvalidToken},
		{"person deleted", func(t *testing.T, w *cacheWorld) {
			if err := w.s.DeletePerson(ctx, w.alice.ID); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"organization disabled", func(t *testing.T, w *cacheWorld) {
			if _, err := w.s.UpdateOrganization(ctx, w.parent.ID, func(o *Organization) error { o.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, ErrInactive},
		{"organization disabled, then enabled again", func(t *testing.T, w *cacheWorld) {
			if _, err := w.s.DisableOrganization(ctx, w.org.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := w.s.EnableOrganization(ctx, w.org.ID); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"parent organization disabled, then enabled again", func(t *testing.T, w *cacheWorld) {
			for _, active := range []bool{false, true} {
				if _, err := w.s.UpdateOrganization(ctx, w.parent.ID, func(o *Organization) error { o.Active = active; return nil }); err != nil {
					t.Fatal(err)
				}
			}
		}, ErrInvalidToken},
		{"moved to an organization enabled again before", func(t *testing.T, w *cacheWorld) {
			// The enabling ended the sessions of that organization's
			// persons then; alice's was not one of them.
			w.clk.Add(time.Minute)
			other := enabledAgain(t, w)
			w.clk.Add(time.Minute)
			moveTo(t, w, other.ID)
		}, nil},
		{"organization enabled again, then moved to another", func(t *testing.T, w *cacheWorld) {
			// Ended by the enabling, the session stays ended.
			w.clk.Add(time.Minute)
			for _, f := range []func(context.Context, uint64) (Organization, error){w.s.DisableOrganization, w.s.EnableOrganization} {
				if _, err := f(ctx, w.org.ID); err != nil {
					t.Fatal(err)
				}
			}
			other, err := w.s.CreateOrganization(ctx, OrganizationInput{ParentID: w.parent.ID, Name: "Acme Other"})
			if err != nil {
				t.Fatal(err)
			}
			moveTo(t, w, other.ID)
		}, ErrInvalidToken},
		{"organization disabled, then moved to another", func(t *testing.T, w *cacheWorld) {
			// Let out of it by the move as by an enabling.
			if _, err := w.s.DisableOrganization(ctx, w.org.ID); err != nil {
				t.Fatal(err)
			}
			other, err := w.s.CreateOrganization(ctx, OrganizationInput{ParentID: w.parent.ID, Name: "Acme Other"})
			if err != nil {
				t.Fatal(err)
			}
			moveTo(t, w, other.ID)
		}, ErrInvalidToken},
		{"moved, then the organization moved to enabled again", func(t *testing.T, w *cacheWorld) {
			w.clk.Add(time.Minute)
			other := enabledAgain(t, w)
			w.clk.Add(time.Minute)
			moveTo(t, w, other.ID)
			w.clk.Add(time.Minute)
			for _, f := range []func(context.Context, uint64) (Organization, error){w.s.DisableOrganization, w.s.EnableOrganization} {
				if _, err := f(ctx, other.ID); err != nil {
					t.Fatal(err)
				}
			}
		}, ErrInvalidToken},
		{"machine deleted", func(t *testing.T, w *cacheWorld) {
			if err := w.s.DeleteMachine(ctx, w.device.MachineID); err != nil {
				t.Fatal(err)
			}
		}, ErrInvalidToken},
		{"policy ends sessions sooner", func(t *testing.T, w *cacheWorld) {
			if _, err := w.s.UpdatePolicy(ctx, w.org.ID, func(p *Policy) error { p.DeactivateTokenFrequency = "1m"; return nil }); err != nil {
				t.Fatal(err)
			}
			w.clk.Add(2 * time.Minute)
		}, ErrInvalidToken},
		{"locked by failed sign-ins", func(t *testing.T, w *cacheWorld) {
			for range 3 {
				w.s.Authenticate(ctx, w.alice.Username, "a wrong password 1234")
			}
		}, ErrAccountLocked},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newCacheWorld(t, row.name)
			_, ses, err := w.s.SessionOf(ctx, w.toks.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			row.change(t, w)
			c, err := w.s.SessionCaller(ctx, ses)
			if (err == nil) != (row.want == nil) || !errors.Is(err, row.want) {
				t.Fatalf("SessionCaller: %v, want %v", err, row.want)
			}
			if err == nil && (c.Person.ID != w.alice.ID || c.MachineID != w.device.MachineID) {
				t.Fatalf("SessionCaller: person %d machine %d, want %d and %d", c.Person.ID, c.MachineID, w.alice.ID, w.device.MachineID)
			}
		})
	}
	if _, err := (&Service{}).SessionCaller(ctx, Session{}); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("no session: %v", err)
	}
}

// TestSessionsFromNodes: the stamp of an organization enabled again
// (SessionsFrom) is the clock of the node that enabled it, and when a
// session began that of the node that began it. A session begun after
// the enabling holds whichever node's clock is behind, and one begun
// before the disabling is ended whichever is ahead by less than the
// organization was disabled; both over the API and at refresh.
func TestSessionsFromNodes(t *testing.T) {
	ctx := context.Background()
	rows := []struct {
		name   string
		skew   time.Duration // node b's clock against a's, which disables and enables
		before bool          // b began the session before the disabling, not after the enabling
		want   error
	}{
		{"begun after the enabling, same clock", 0, false, nil},
		{"begun after the enabling, on a node behind", -2 * time.Second, false, nil},
		{"begun after the enabling, on a node ahead", 2 * time.Second, false, nil},
		{"begun before the disabling, same clock", 0, true, ErrInvalidToken},
		{"begun before the disabling, on a node behind", -2 * time.Second, true, ErrInvalidToken},
		{"begun before the disabling, on a node ahead", 2 * time.Second, true, ErrInvalidToken},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			db := openDB(t)
			at := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			ca, cb := &clock{t: at}, &clock{t: at.Add(row.skew)}
			oa, ob := testOptions(), testOptions()
			oa.Now, ob.Now = ca.Now, cb.Now
			a, b := New(db, oa), New(db, ob)
			org, alice := fixture(t, a)
			var toks Tokens
			issue := func() {
				var err error
				if toks, err = b.IssueTokens(ctx, alice.ID, 0); err != nil {
					t.Fatal(err)
				}
			}
			if row.before {
				issue()
			}
			for _, c := range []*clock{ca, cb} {
				c.Add(time.Second)
			}
			if _, err := a.DisableOrganization(ctx, org.ID); err != nil {
				t.Fatal(err)
			}
			for _, c := range []*clock{ca, cb} {
				c.Add(time.Minute)
			}
			if _, err := a.EnableOrganization(ctx, org.ID); err != nil {
				t.Fatal(err)
			}
			if !row.before {
				issue()
			}
			for _, node := range []*Service{a, b} {
				if _, err := node.ValidateAccess(ctx, toks.AccessToken); (err == nil) != (row.want == nil) || !errors.Is(err, row.want) {
					t.Fatalf("access: %v, want %v", err, row.want)
				}
			}
			if _, _, err := a.Refresh(ctx, toks.RefreshToken); (err == nil) != (row.want == nil) || !errors.Is(err, row.want) {
				t.Fatalf("refresh: %v, want %v", err, row.want)
			}
		})
	}
}

// enabledAgain makes an organization beside w.org and disables and
// enables it again.
func enabledAgain(t *testing.T, w *cacheWorld) Organization {
	t.Helper()
	ctx := context.Background()
	o, err := w.s.CreateOrganization(ctx, OrganizationInput{ParentID: w.parent.ID, Name: "Acme Other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.s.DisableOrganization(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	if o, err = w.s.EnableOrganization(ctx, o.ID); err != nil {
		t.Fatal(err)
	}
	return o
}

// moveTo moves alice to organization id.
func moveTo(t *testing.T, w *cacheWorld, id uint64) {
	t.Helper()
	if _, err := w.s.UpdatePerson(context.Background(), w.alice.ID, func(p *Person) error { p.OrganizationID = id; return nil }); err != nil {
		t.Fatal(err)
	}
}
