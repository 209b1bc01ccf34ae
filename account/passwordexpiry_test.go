package account

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestPasswordExpiry: under change_password_frequency a password older
// than the frequency is refused at sign-in (Authenticate, and LoginCallerRef
// for remembered WebDAV credentials) with ErrPasswordExpired, after the
// password was checked and without counting a failure; the person signs
// in with SignInWithNewPassword, after which the new password serves and
// the old does not; no frequency (nil or "") never expires; bad new
// passwords are refused with the field new_password.
func TestPasswordExpiry(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newService(t, Options{Now: clk.Now, Argon2: Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, alice := fixture(t, s)

	clk.Add(1000 * time.Hour)
	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatalf("no frequency: %v", err)
	}
	week := "168h"
	if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.ChangePasswordFrequency = &week; return nil }); err != nil {
		t.Fatal(err)
	}
	p, err := s.Authenticate(ctx, "alice", pw)
	if !errors.Is(err, ErrPasswordExpired) || p.ID != alice.ID {
		t.Fatalf("expired: %v (person %d)", err, p.ID)
	}
	if _, err := s.LoginCallerRef(ctx, alice.ID, "alice", p.PasswordHash); !errors.Is(err, ErrPasswordExpired) {
		t.Fatalf("remembered credentials: %v", err)
	}
	// A wrong password is still only a wrong password.
	if _, err := s.Authenticate(ctx, "alice", "wrong password!"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("wrong password: %v", err)
	}
	for _, tc := range []struct {
		name, password, newPassword string
		want                        error
	}{
		{"same password", pw, pw, ErrInvalid},
		{"too short", pw, "x", ErrInvalid},
		{"wrong current password", "wrong password!", "a brand new password", ErrInvalidCredentials},
	} {
		_, err := s.SignInWithNewPassword(ctx, "alice", tc.password, tc.newPassword)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		var fe *FieldError
		if tc.want == ErrInvalid && (!errors.As(err, &fe) || fe.Field != "new_password") {
			t.Fatalf("%s: field of %v", tc.name, err)
		}
	}
	p, err = s.SignInWithNewPassword(ctx, "alice", pw, "a brand new password")
	if err != nil || !p.PasswordChanged.Equal(clk.Now()) {
		t.Fatalf("new password: %v %v", err, p.PasswordChanged)
	}
	if _, err := s.Authenticate(ctx, "alice", "a brand new password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	if _, err := s.Authenticate(ctx, "alice", pw); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatalf("the old password: %v", err)
	}
	clk.Add(168 * time.Hour)
	if _, err := s.Authenticate(ctx, "alice", "a brand new password"); !errors.Is(err, ErrPasswordExpired) {
		t.Fatalf("a week later: %v", err)
	}
	empty := ""
	if _, err := s.UpdatePolicy(ctx, org.ID, func(p *Policy) error { p.ChangePasswordFrequency = &empty; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "a brand new password"); err != nil {
		t.Fatalf(`frequency "": %v`, err)
	}
}
