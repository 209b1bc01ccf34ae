package account

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"berth/kv"
)

func TestTokens(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "laptop", OSType: "osx"})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueTokens(ctx, alice.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	if toks.ExpiresIn != time.Hour || toks.MachineID != m.ID || toks.AccessToken == toks.RefreshToken {
		t.Fatalf("tokens %+v", toks)
	}
	if raw, err := base64.RawURLEncoding.DecodeString(toks.AccessToken); err != nil || len(raw) != 32 {
		t.Fatalf("access token is not 32 bytes base64url: %q", toks.AccessToken)
	}
	pr, err := s.ValidateAccess(ctx, toks.AccessToken)
	if err != nil || pr != (Principal{PersonID: alice.ID, MachineID: m.ID}) {
		t.Fatalf("ValidateAccess = %+v, %v", pr, err)
	}
	// A refresh token is not an access token, and vice versa.
	if _, err := s.ValidateAccess(ctx, toks.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh token as access token: %v", err)
	}
	if _, _, err := s.Refresh(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("access token as refresh token: %v", err)
	}

	// Rotation: the new pair works, the old refresh token does not.
	toks2, p, err := s.Refresh(ctx, toks.RefreshToken)
	if err != nil || p.ID != alice.ID || toks2.MachineID != m.ID {
		t.Fatalf("Refresh = %+v, %d, %v", toks2, p.ID, err)
	}
	if _, err := s.ValidateAccess(ctx, toks2.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
		t.Fatalf("earlier access token died on refresh: %v", err)
	}
	// The client moves on with the new refresh token; the old one coming
	// back after that is a copy (TestRefreshRetry has the lost answer).
	toks3, _, err := s.Refresh(ctx, toks2.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Refresh(ctx, toks.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("reused refresh token: %v", err)
	}
	// Reuse of a rotated refresh token revokes the whole session.
	for _, tok := range []string{toks.AccessToken, toks2.AccessToken, toks3.AccessToken} {
		if _, err := s.ValidateAccess(ctx, tok); !errors.Is(err, ErrInvalidToken) {
			t.Fatalf("access token after refresh-token reuse: %v", err)
		}
	}
	if _, _, err := s.Refresh(ctx, toks3.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("current refresh token after reuse: %v", err)
	}

	// Revoking an access token ends only that token.
	a, _ := s.IssueTokens(ctx, alice.ID, 0)
	b, _ := s.IssueTokens(ctx, alice.ID, 0)
	if err := s.Revoke(ctx, a.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, a.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked access token: %v", err)
	}
	a2, _, err := s.Refresh(ctx, a.RefreshToken)
	if err != nil {
		t.Fatalf("refresh after revoking only the access token: %v", err)
	}
	// Revoking a refresh token ends its family, access tokens included,
	// and leaves other sessions alone.
	if err := s.Revoke(ctx, a2.RefreshToken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, a2.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("access token of revoked family: %v", err)
	}
	if _, _, err := s.Refresh(ctx, a2.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("revoked refresh token: %v", err)
	}
	if _, err := s.ValidateAccess(ctx, b.AccessToken); err != nil {
		t.Fatalf("other session: %v", err)
	}
	// Unknown and repeated revocations are not errors.
	for _, tok := range []string{"", "nonsense", a2.RefreshToken} {
		if err := s.Revoke(ctx, tok); err != nil {
			t.Fatalf("Revoke(%q): %v", tok, err)
		}
	}

	// A disabled organization stops its tokens; enabling it again ends
	// them, as for a person.
	setActive := func(on bool) {
		if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = on; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setActive(false)
	if _, err := s.ValidateAccess(ctx, b.AccessToken); !errors.Is(err, ErrInactive) {
		t.Fatalf("inactive org, access: %v", err)
	}
	if _, _, err := s.Refresh(ctx, b.RefreshToken); !errors.Is(err, ErrInactive) {
		t.Fatalf("inactive org, refresh: %v", err)
	}
	if _, err := s.IssueTokens(ctx, alice.ID, 0); !errors.Is(err, ErrInactive) {
		t.Fatalf("inactive org, issue: %v", err)
	}
	setActive(true)
	if _, err := s.ValidateAccess(ctx, b.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("re-enabled org, access: %v", err)
	}
	if _, _, err := s.Refresh(ctx, b.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("re-enabled org, refresh: %v", err)
	}
	if b, err = s.IssueTokens(ctx, alice.ID, 0); err != nil {
		t.Fatalf("re-enabled org, issue: %v", err)
	}

	// A changed password ends every session.
	if err := s.SetPassword(ctx, alice.ID, "another password"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, b.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("access token after SetPassword: %v", err)
	}
	if _, _, err := s.Refresh(ctx, b.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh token after SetPassword: %v", err)
	}

	tests := []struct {
		name            string
		person, machine uint64
		err             error
	}{
		{"unknown person", 999, 0, ErrNotFound},
		{"unknown machine", alice.ID, 999, ErrNotFound},
	}
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	tests = append(tests, struct {
		name            string
		person, machine uint64
		err             error
	}{"someone else's machine", bob.ID, m.ID, ErrNotFound})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := s.IssueTokens(ctx, tt.person, tt.machine); !errors.Is(err, tt.err) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
		})
	}
}

// Tokens expire on their own: exactly at the stored deadline, and their
// keys vanish by kv TTL without a sweeper.
func TestTokenExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := testOptions()
	o.AccessTTL = time.Second
	o.RefreshTTL = 2 * time.Second
	s := newService(t, o)
	_, alice := fixture(t, s)
	toks, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, func() bool {
		_, err := s.ValidateAccess(ctx, toks.AccessToken)
		return errors.Is(err, ErrInvalidToken)
	})
	waitFor(t, 6*time.Second, func() bool {
		_, _, err := s.Refresh(ctx, toks.RefreshToken)
		return errors.Is(err, ErrInvalidToken)
	})
	waitFor(t, 6*time.Second, func() bool {
		return countKeys(t, s, pfxAccess)+countKeys(t, s, pfxRefresh)+countKeys(t, s, pfxFamily)+countKeys(t, s, pfxPersonFamily) == 0
	})
}

// TestPageSession: a page's session has no refresh token and is stored
// only as long as its access token, not RefreshTTL; it counts toward
// MaxSessions like any other, and SignOut ends it and deletes it.
func TestPageSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	o := testOptions()
	o.AccessTTL = time.Second
	o.RefreshTTL = time.Hour
	o.MaxSessions = 2
	s := newService(t, o)
	_, alice := fixture(t, s)
	api, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	page, err := s.IssuePageSession(ctx, alice)
	if err != nil || page.RefreshToken != "" || page.ExpiresIn != o.AccessTTL {
		t.Fatalf("IssuePageSession: %+v %v, want an access token alone", page, err)
	}
	if _, err := s.ValidateAccess(ctx, page.AccessToken); err != nil {
		t.Fatal(err)
	}
	// The cap counts it: a third session ends the oldest, the API's.
	third, err := s.IssuePageSession(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Refresh(ctx, api.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the oldest session past the cap: %v", err)
	}
	if err := s.SignOut(ctx, third.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, third.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("signed out: %v", err)
	}
	if n := countKeys(t, s, pfxPersonFamily); n != 1 {
		t.Fatalf("%d sessions stored after the sign-out, want 1", n)
	}
	// The one left is gone with its access token, not an hour later.
	waitFor(t, 6*time.Second, func() bool {
		return countKeys(t, s, pfxAccess)+countKeys(t, s, pfxFamily)+countKeys(t, s, pfxPersonFamily) == 0
	})
	for _, tok := range []string{"", "nonsense", third.AccessToken} {
		if err := s.SignOut(ctx, tok); err != nil {
			t.Fatalf("SignOut(%q): %v", tok, err)
		}
	}
}

// With a fake clock the deadline is exact, whatever the TTL resolution.
func TestTokenExpiryClock(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	o := testOptions()
	o.Now = clk.Now
	o.AccessTTL = 30 * time.Second
	s := newService(t, o)
	_, alice := fixture(t, s)
	toks, _ := s.IssueTokens(ctx, alice.ID, 0)
	clk.Add(29 * time.Second)
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
		t.Fatalf("before deadline: %v", err)
	}
	clk.Add(time.Second)
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("at deadline: %v", err)
	}
}

func TestUpsertMachine(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	o := testOptions()
	o.Now = clk.Now
	s := newService(t, o)
	org, alice := fixture(t, s)

	m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "laptop", OSType: "win", OSVersion: "10"})
	if err != nil {
		t.Fatal(err)
	}
	if m.ID == 0 || len(m.GUID) != 36 || m.PersonID != alice.ID || m.LastLogin == nil || !m.Created.Equal(clk.Now()) {
		t.Fatalf("new machine %+v", m)
	}
	// Unknown GUID: a new machine with a server-assigned GUID.
	u, err := s.UpsertMachine(ctx, alice.ID, MachineInput{GUID: "6f1c0e02-0000-4000-8000-000000000000", DNSName: "phone"})
	if err != nil || u.ID == m.ID || u.GUID == m.GUID || u.GUID == "6f1c0e02-0000-4000-8000-000000000000" {
		t.Fatalf("unknown GUID gave %+v, %v", u, err)
	}
	// Known GUID (any case): same machine, fields updated when given, last_login moved.
	clk.Add(time.Hour)
	k, err := s.UpsertMachine(ctx, alice.ID, MachineInput{GUID: toUpper(m.GUID), OSVersion: "11"})
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != m.ID || k.GUID != m.GUID || k.DNSName != "laptop" || k.OSType != "win" || k.OSVersion != "11" ||
		!k.LastLogin.Equal(clk.Now()) || !k.Created.Equal(m.Created) {
		t.Fatalf("known GUID gave %+v", k)
	}
	got, err := s.Machine(ctx, m.ID)
	if err != nil || got.OSVersion != "11" || !got.LastLogin.Equal(*k.LastLogin) {
		t.Fatalf("Machine = %+v, %v", got, err)
	}
	if byGUID, err := s.MachineByGUID(ctx, m.GUID); err != nil || byGUID.ID != m.ID {
		t.Fatalf("MachineByGUID = %+v, %v", byGUID, err)
	}
	// Another person naming alice's GUID gets a machine of their own.
	bob, err := s.CreatePerson(ctx, PersonInput{OrganizationID: org.ID, Username: "bob", Email: "bob@acme.example", Password: pw})
	if err != nil {
		t.Fatal(err)
	}
	bm, err := s.UpsertMachine(ctx, bob.ID, MachineInput{GUID: m.GUID})
	if err != nil || bm.ID == m.ID || bm.GUID == m.GUID || bm.PersonID != bob.ID {
		t.Fatalf("foreign GUID gave %+v, %v", bm, err)
	}

	tests := []struct {
		name string
		err  error
		call func() error
	}{
		{"unknown machine", ErrNotFound, func() error { _, err := s.Machine(ctx, 999); return err }},
		{"unknown person", ErrNotFound, func() error { _, err := s.UpsertMachine(ctx, 999, MachineInput{}); return err }},
		{"control chars", ErrInvalid, func() error {
			_, err := s.UpsertMachine(ctx, alice.ID, MachineInput{DNSName: "a\x00b"})
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
}

func toUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// TestCaller: the person and organization come with the principal, and a
// disabled organization or person is ErrInactive, as for ValidateAccess.
func TestCaller(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	org, alice := fixture(t, s)
	toks, err := s.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.AccessCaller(ctx, toks.AccessToken)
	if err != nil || c.PersonID != alice.ID || c.Person.ID != alice.ID || c.Organization.ID != org.ID || c.Organization.Policy != org.Policy {
		t.Fatalf("AccessCaller = %+v, %v", c, err)
	}
	c, err = s.Caller(ctx, alice.ID)
	if err != nil || c.Person.Username != alice.Username || c.Organization.ID != org.ID || c.MachineID != 0 {
		t.Fatalf("Caller = %+v, %v", c, err)
	}
	if _, err := s.Caller(ctx, alice.ID+1000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Caller(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.AccessCaller(ctx, "nonsense"); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("AccessCaller(nonsense) = %v, want ErrInvalidToken", err)
	}
	if _, err := s.UpdateOrganization(ctx, org.ID, func(o *Organization) error { o.Active = false; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Caller(ctx, alice.ID); !errors.Is(err, ErrInactive) {
		t.Fatalf("Caller of a disabled organization = %v, want ErrInactive", err)
	}
	if _, err := s.AccessCaller(ctx, toks.AccessToken); !errors.Is(err, ErrInactive) {
		t.Fatalf("AccessCaller of a disabled organization = %v, want ErrInactive", err)
	}
}

// TestLoginTokensAfterPasswordChange: a password grant checks the password,
// then starts the session. A password change that lands in between (and
// ends every session) must not leave the login with the old password a
// session that outlives it.
func TestLoginTokensAfterPasswordChange(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	_, alice := fixture(t, s)
	p, err := s.Authenticate(ctx, "alice", pw)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetPassword(ctx, alice.ID, "a new password"); err != nil {
		t.Fatal(err)
	}
	if toks, err := s.IssueLoginTokens(ctx, p, 0); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("tokens for a login with the replaced password: %+v, %v", toks, err)
	}
	if n := countKeys(t, s, pfxFamily); n != 0 {
		t.Fatalf("%d sessions after the refused login", n)
	}
	p, err = s.Authenticate(ctx, "alice", "a new password")
	if err != nil {
		t.Fatal(err)
	}
	toks, err := s.IssueLoginTokens(ctx, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
		t.Fatal(err)
	}
}

// TestPasswordChangeRacingLogin: SetPassword ends the person's sessions by
// sweeping their families, and a prefix scan does not see a family that a
// login commits during the sweep. A session that began under the replaced
// password still ends: its tokens work only under the password they were
// issued for.
func TestPasswordChangeRacingLogin(t *testing.T) {
	ctx := context.Background()
	s := newService(t, testOptions())
	_, alice := fixture(t, s)
	for i := range 100 {
		p, err := s.Person(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			toks []Tokens
		)
		for range 4 {
			wg.Go(func() {
				tk, err := s.IssueLoginTokens(ctx, p, 0)
				if err == nil {
					mu.Lock()
					toks = append(toks, tk)
					mu.Unlock()
				}
			})
		}
		wg.Go(func() {
			if err := s.SetPassword(ctx, alice.ID, fmt.Sprintf("new password %d", i)); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		for _, tk := range toks {
			if _, err := s.ValidateAccess(ctx, tk.AccessToken); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("round %d: access token of a login with the replaced password: %v", i, err)
			}
			if _, _, err := s.Refresh(ctx, tk.RefreshToken); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("round %d: refresh token of a login with the replaced password: %v", i, err)
			}
		}
	}
}

// TestSessionsBounded: a person holds at most MaxSessions sessions; a new
// one ends the least recently used, counting a refresh as use, so a device
// in use keeps its session while a script's stale logins make room.
func TestSessionsBounded(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	o := testOptions()
	o.Now = clk.Now
	o.MaxSessions = 3
	s := newService(t, o)
	_, alice := fixture(t, s)
	login := func() Tokens {
		t.Helper()
		clk.Add(time.Second)
		toks, err := s.IssueTokens(ctx, alice.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return toks
	}
	valid := func(toks Tokens) bool {
		_, err := s.ValidateAccess(ctx, toks.AccessToken)
		return err == nil
	}
	a, b, c := login(), login(), login()
	d := login() // ends a, the oldest
	if valid(a) || !valid(b) || !valid(c) || !valid(d) {
		t.Fatalf("after a fourth session: valid %v %v %v %v, want all but the first", valid(a), valid(b), valid(c), valid(d))
	}
	if _, _, err := s.Refresh(ctx, a.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh of an ended session: %v", err)
	}
	// b is used: refreshed, it is now the most recent.
	clk.Add(time.Second)
	b2, _, err := s.Refresh(ctx, b.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	e := login() // ends c, now the least recently used
	if valid(c) || !valid(b2) || !valid(d) || !valid(e) {
		t.Fatalf("after a fifth: valid c %v, b %v, d %v, e %v; want c ended", valid(c), valid(b2), valid(d), valid(e))
	}
	if n := countKeys(t, s, pfxPersonFamily); n != 3 {
		t.Fatalf("%d sessions indexed, want 3", n)
	}
}

// TestMachinesBounded: a person holds at most MaxMachines machine
// records; a new one (a password grant without a known guid, a device
// password for a new machine) takes the place of the least recently
// signed-in one that nothing is set up on, one without a session first
// (a device signed in long ago may still refresh its session), ending
// its sessions; machines
// with a mapping, a backup, a file server or a device password stay, and
// when all have one the new machine is refused. Each guid-less sign-in
// of a script grew a person's machines without end before.
func TestMachinesBounded(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	o := testOptions()
	o.Now = clk.Now
	o.MaxMachines = 4
	s := newService(t, o)
	_, alice := fixture(t, s)
	// Sign-ins two minutes apart: a machine signed in from within the
	// last minute counts as in use (its session may be on its way).
	signIn := func() Machine {
		t.Helper()
		clk.Add(2 * time.Minute)
		m, err := s.UpsertMachine(ctx, alice.ID, MachineInput{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ids := func() []uint64 {
		t.Helper()
		ms, err := s.Machines(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	a, b, c, d := signIn(), signIn(), signIn(), signIn()
	toks, err := s.IssueTokens(ctx, alice.ID, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	// a, the oldest, holds a session a device still uses: b, the
	// oldest of those without one, makes room.
	e := signIn()
	if got := ids(); !slices.Equal(got, []uint64{a.ID, c.ID, d.ID, e.ID}) {
		t.Fatalf("after a fifth machine: %v, want a, c, d, e (b %d made room)", got, b.ID)
	}
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
		t.Fatalf("the session of a machine still in use ended to make room: %v", err)
	}
	// c signs in again (a known guid): now d is the least recent.
	clk.Add(2 * time.Minute)
	if _, err := s.UpsertMachine(ctx, alice.ID, MachineInput{GUID: c.GUID}); err != nil {
		t.Fatal(err)
	}
	f := signIn()
	if got := ids(); !slices.Equal(got, []uint64{a.ID, c.ID, e.ID, f.ID}) {
		t.Fatalf("after c's sign-in and a sixth: %v, want a, c, e, f", got)
	}
	// Set up on each but a: a file server, a mapping, a device password.
	if _, err := s.SetFileServer(ctx, c.ID, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateMapping(ctx, MachineMapping{MachineID: e.ID, RootID: 1, Path: "/home/a"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "webdav", MachineID: f.ID}); err != nil {
		t.Fatal(err)
	}
	g := signIn() // only a may make room, session and all
	if got := ids(); !slices.Equal(got, []uint64{c.ID, e.ID, f.ID, g.ID}) {
		t.Fatalf("with three set up: %v, want c, e, f, g", got)
	}
	if _, err := s.ValidateAccess(ctx, toks.AccessToken); err == nil {
		t.Fatal("the session of the machine that made room still serves")
	}
	if _, err := s.CreateBackup(ctx, Backup{RootID: 2, MachineID: g.ID, Path: "/home/b"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpsertMachine(ctx, alice.ID, MachineInput{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a fifth machine with every one set up: %v, want ErrInvalid", err)
	}
	if _, _, err := s.CreateDevicePassword(ctx, alice.ID, DevicePasswordInput{Name: "another"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a device password for a new machine with every one set up: %v, want ErrInvalid", err)
	}
	if got := ids(); len(got) != 4 {
		t.Fatalf("%d machines, want 4", len(got))
	}
}

// TestMachinesBoundedParallel: the bound is read apart from the sign-in's
// transaction, so that a person's parallel sign-ins do not conflict on
// their list of machines (they failed on it, on two nodes); those that
// ran at once may pass it, and the next sign-in brings the person back
// under it, deleting as many machines as it must.
func TestMachinesBoundedParallel(t *testing.T) {
	ctx := context.Background()
	o := testOptions()
	o.MaxMachines = 20
	s := newService(t, o)
	_, alice := fixture(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for range 40 {
		wg.Go(func() {
			_, err := s.UpsertMachine(ctx, alice.ID, MachineInput{})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a parallel sign-in: %v", err)
		}
	}
	ms, err := s.Machines(ctx, alice.ID)
	if err != nil || len(ms) < 20 {
		t.Fatalf("%d machines after 40 sign-ins (%v), want at least the bound, 20", len(ms), err)
	}
	// Past the bound by however many ran at once: one more sign-in
	// brings it back under.
	s.opts.MaxMachines = 5
	if _, err := s.UpsertMachine(ctx, alice.ID, MachineInput{}); err != nil {
		t.Fatal(err)
	}
	if ms, err = s.Machines(ctx, alice.ID); err != nil || len(ms) != 5 {
		t.Fatalf("%d machines after a sign-in over the bound (%v), want 5", len(ms), err)
	}
}

// TestRefreshRetry: a client whose refresh answer was lost retries with the
// refresh token it still has. Within RefreshReuseGrace that gets a new
// pair, and the pair it never received stops working; after the grace, or
// once the token that replaced it was used, the old token coming back is a
// copy and revokes the session, as it always does with no grace.
func TestRefreshRetry(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	opts := testOptions()
	opts.Now = clock
	s := newService(t, opts)
	_, alice := fixture(t, s)
	login := func() Tokens {
		t.Helper()
		toks, err := s.IssueTokens(ctx, alice.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return toks
	}
	refresh := func(what string, tok string) Tokens {
		t.Helper()
		toks, _, err := s.Refresh(ctx, tok)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return toks
	}
	works := func(what string, toks Tokens, want bool) {
		t.Helper()
		if _, err := s.ValidateAccess(ctx, toks.AccessToken); (err == nil) != want {
			t.Fatalf("%s: access token: %v, want working %v", what, err, want)
		}
	}

	// Lost answers, retried twice within the grace: each retry gets a
	// working pair, and the pairs never received stop working.
	t0 := login()
	lost1 := refresh("first refresh", t0.RefreshToken)
	advance(10 * time.Second)
	lost2 := refresh("retry", t0.RefreshToken)
	advance(10 * time.Second)
	got := refresh("second retry", t0.RefreshToken)
	works("received pair", got, true)
	works("first lost pair", lost1, false)
	works("second lost pair", lost2, false)
	// The session goes on with what the client got.
	next := refresh("refresh with the received pair", got.RefreshToken)
	works("next pair", next, true)
	// A pair the client never got stays dead; one presented anyway was
	// not lost but stolen (or the client did get it after all), and
	// ends the session.
	if _, _, err := s.Refresh(ctx, lost1.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("refresh token of a lost pair: %v", err)
	}
	works("session after a lost pair came back", next, false)

	// A thief replays the old token within the grace, after the client
	// got its pair but before it refreshed: the thief gets a pair, and
	// the client's next refresh ends the session, the thief's pair too.
	t4 := login()
	clients := refresh("refresh", t4.RefreshToken)
	thiefs := refresh("the thief's replay", t4.RefreshToken)
	works("the thief's pair at first", thiefs, true)
	if _, _, err := s.Refresh(ctx, clients.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("the client's refresh after the replay: %v", err)
	}
	works("the thief's pair after the client refreshed", thiefs, false)

	// The grace counts from the first rotation: retries do not stretch it.
	t1 := login()
	refresh("refresh", t1.RefreshToken)
	advance(20 * time.Second)
	refresh("retry at 20s", t1.RefreshToken)
	advance(15 * time.Second)
	if _, _, err := s.Refresh(ctx, t1.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("retry 35s after the rotation: %v", err)
	}
	// ... and it then revoked the session, as any reuse does.
	works("session after a late reuse", t1, false)

	// Once the new refresh token was used, the old one is a copy even
	// within the grace.
	t2 := login()
	n1 := refresh("refresh", t2.RefreshToken)
	n2 := refresh("the client moves on", n1.RefreshToken)
	if _, _, err := s.Refresh(ctx, t2.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("old token after its successor was used: %v", err)
	}
	works("session after reuse", n2, false)

	// With no grace, any reuse revokes.
	opts.RefreshReuseGrace = 0
	s0 := New(s.db, opts)
	t3, err := s0.IssueTokens(ctx, alice.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	m1, _, err := s0.Refresh(ctx, t3.RefreshToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s0.Refresh(ctx, t3.RefreshToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("reuse with no grace: %v", err)
	}
	if _, err := s0.ValidateAccess(ctx, m1.AccessToken); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("session after reuse with no grace: %v", err)
	}
}

// TestDeactivateTokenFrequency: the policy's deactivate_token_frequency
// ends a session (one sign-in and the refreshes that carry it on) that
// long after the sign-in. It is checked at each use of the session's
// tokens, through the cached answers too, so a policy change applies at
// once to sessions already open, both ways.
func TestDeactivateTokenFrequency(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name    string
		freq    string        // policy when the session begins
		refresh time.Duration // > 0: refresh this long after the sign-in, then go on with the new pair
		advance time.Duration // time from the sign-in (or the refresh) to the check
		change  *string       // policy set just before the check
		want    bool          // access and refresh tokens work
	}{
		{name: "never (default)", freq: "", advance: 47 * time.Hour, want: true},
		{name: "0 is never", freq: "0", advance: 47 * time.Hour, want: true},
		{name: "not yet", freq: "24h", advance: 24*time.Hour - time.Second, want: true},
		{name: "past, at the deadline", freq: "24h", advance: 24 * time.Hour, want: false},
		{name: "past, long after", freq: "24h", advance: 40 * time.Hour, want: false},
		// The sign-in counts, not the last refresh (which renews the
		// refresh token's own lifetime).
		{name: "refresh does not restart it", freq: "24h", refresh: 12 * time.Hour, advance: 12 * time.Hour, want: false},
		{name: "refreshed, not yet", freq: "24h", refresh: 12 * time.Hour, advance: 12*time.Hour - time.Second, want: true},
		{name: "tightened after issue", freq: "", advance: 2 * time.Hour, change: str("1h"), want: false},
		{name: "tightened after issue, not yet", freq: "", advance: 2 * time.Hour, change: str("3h"), want: true},
		// Refused, not deleted: the session comes back.
		{name: "loosened after issue", freq: "1h", advance: 2 * time.Hour, change: str(""), want: true},
		{name: "lengthened after issue", freq: "1h", advance: 2 * time.Hour, change: str("72h"), want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
			o := testOptions()
			o.Now = clk.Now
			// Long enough that the tokens' own expiry never decides.
			o.AccessTTL = 72 * time.Hour
			o.RefreshTTL = 90 * 24 * time.Hour
			s := newService(t, o)
			org, alice := fixture(t, s)
			setPolicy := func(v string) {
				t.Helper()
				if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error {
					p.DeactivateTokenFrequency = v
					return nil
				}); err != nil {
					t.Fatalf("policy %q: %v", v, err)
				}
			}
			setPolicy(tc.freq)
			toks, err := s.IssueTokens(ctx, alice.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refresh > 0 {
				clk.Add(tc.refresh)
				if toks, _, err = s.Refresh(ctx, toks.RefreshToken); err != nil {
					t.Fatalf("refresh within the limit: %v", err)
				}
			}
			// A first use fills the cache of answers, which the
			// check below must not outlive.
			if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
				t.Fatalf("access token when issued: %v", err)
			}
			clk.Add(tc.advance)
			if tc.change != nil {
				if tc.freq != "" {
					// A session refused before a loosening is
					// refused first, so its return is tested.
					if _, err := s.ValidateAccess(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
						t.Fatalf("access token before the change: %v, want ErrInvalidToken", err)
					}
				}
				setPolicy(*tc.change)
			}
			_, err = s.ValidateAccess(ctx, toks.AccessToken)
			if tc.want && err != nil || !tc.want && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("access token: %v, want working %v", err, tc.want)
			}
			_, _, err = s.Refresh(ctx, toks.RefreshToken)
			if tc.want && err != nil || !tc.want && !errors.Is(err, ErrInvalidToken) {
				t.Errorf("refresh: %v, want working %v", err, tc.want)
			}
			// A new sign-in is always a new session.
			fresh, err := s.IssueTokens(ctx, alice.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.ValidateAccess(ctx, fresh.AccessToken); err != nil {
				t.Errorf("access token of a new sign-in: %v", err)
			}
		})
	}

	// A session stored before berth recorded the sign-in time counts
	// from its last refresh, and its next refresh keeps that as its
	// sign-in.
	t.Run("session stored without a sign-in time", func(t *testing.T) {
		t.Parallel()
		clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		o := testOptions()
		o.Now = clk.Now
		o.AccessTTL = 72 * time.Hour
		s := newService(t, o)
		org, alice := fixture(t, s)
		toks, err := s.IssueTokens(ctx, alice.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		err = s.db.Update(ctx, func(tx kv.Txn) error {
			var ar accessRecord
			if err := s.get(tx, keyBytes(pfxAccess, tokenHash(toks.AccessToken)), &ar, ErrNotFound); err != nil {
				return err
			}
			var fam familyRecord
			if err := s.get(tx, keyBytes(pfxFamily, ar.Family), &fam, ErrNotFound); err != nil {
				return err
			}
			fam.SignedIn = time.Time{}
			return s.putTTL(tx, keyBytes(pfxFamily, ar.Family), &fam, o.RefreshTTL)
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.DeactivateTokenFrequency = "24h"; return nil }); err != nil {
			t.Fatal(err)
		}
		clk.Add(12 * time.Hour)
		if toks, _, err = s.Refresh(ctx, toks.RefreshToken); err != nil {
			t.Fatalf("refresh at 12h: %v", err)
		}
		clk.Add(12*time.Hour - time.Second)
		if _, err := s.ValidateAccess(ctx, toks.AccessToken); err != nil {
			t.Fatalf("access token just before 24h: %v", err)
		}
		clk.Add(time.Second)
		if _, err := s.ValidateAccess(ctx, toks.AccessToken); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("access token at 24h: %v, want ErrInvalidToken", err)
		}
	})

	t.Run("values", func(t *testing.T) {
		t.Parallel()
		s := newService(t, testOptions())
		org, _ := fixture(t, s)
		for _, v := range []struct{ in, stored string }{
			{"", ""}, {"0", ""}, {"0s", ""}, {"720h", "720h"}, {"90m", "90m"},
			// Refused with the field named: no unit, negative, words, days.
			{"30", "!"}, {"-1h", "!"}, {"soon", "!"}, {"1d", "!"},
		} {
			got, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error {
				p.DeactivateTokenFrequency = v.in
				return nil
			})
			if v.stored == "!" {
				var fe *FieldError
				if !errors.As(err, &fe) || fe.Field != "deactivate_token_frequency" {
					t.Errorf("%q: %v, want a deactivate_token_frequency FieldError", v.in, err)
				}
				continue
			}
			if err != nil || got.Policy.DeactivateTokenFrequency != v.stored {
				t.Errorf("%q: stored %q, %v; want %q", v.in, got.Policy.DeactivateTokenFrequency, err, v.stored)
			}
		}
		if _, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Bad", Policy: &Policy{SpaceQuota: "0", DeactivateTokenFrequency: "week"}}); !errors.Is(err, ErrInvalid) {
			t.Errorf("create with a bad value: %v, want ErrInvalid", err)
		}
	})
}
