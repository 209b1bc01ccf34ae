package account

import (
	"context"
	"errors"
	"testing"
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
