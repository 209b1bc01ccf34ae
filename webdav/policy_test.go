package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"berth/account"
)

const lockBody = `<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`

func makeAdmin(t *testing.T, f *fixture) {
	t.Helper()
	if _, err := f.accounts.UpdatePerson(context.Background(), f.person.ID, func(p *account.Person) error {
		p.Admin = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLockedExtensions: the same rule as REST's. A file with a locked
// extension can be created, also the way Windows and macOS do it (an
// empty PUT or a LOCK, then the contents), but once it has contents a
// person cannot overwrite, move, delete or replace it with a COPY or MOVE
// (403); an administrator can; a copy of it is a new file and allowed.
func TestLockedExtensions(t *testing.T) {
	for _, admin := range []bool{false, true} {
		name := "person"
		if admin {
			name = "administrator"
		}
		t.Run(name, func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.LockedExtensions = ".lck,.tpl"
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			if admin {
				makeAdmin(t, f)
			}
			refused := http.StatusForbidden
			ok := func(s int) int {
				if admin {
					return s
				}
				return refused
			}
			st, _, body := f.do("PUT", "/report.lck", strings.NewReader("1"))
			want(t, "create", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/empty.tpl", strings.NewReader(""))
			want(t, "create empty", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/empty.tpl", strings.NewReader("contents"))
			want(t, "fill the empty file", st, http.StatusNoContent, body)
			st, hdr, body := f.do("LOCK", "/locked.tpl", strings.NewReader(lockBody))
			want(t, "LOCK creates an empty file", st, http.StatusCreated, body)
			token := hdr.Get("Lock-Token")
			st, _, body = f.do("PUT", "/locked.tpl", strings.NewReader("filled"), "If", "("+token+")")
			want(t, "fill the LOCK-created file", st, http.StatusNoContent, body)
			st, _, body = f.do("PUT", "/other.txt", strings.NewReader("o"))
			want(t, "another extension", st, http.StatusCreated, body)

			for _, tc := range []struct {
				name   string
				method string
				path   string
				body   string
				hdr    []string
				status int
			}{
				{"overwrite", "PUT", "/report.lck", "2", nil, ok(http.StatusNoContent)},
				{"overwrite the filled file", "PUT", "/empty.tpl", "again", nil, ok(http.StatusNoContent)},
				{"copy is a new file", "COPY", "/report.lck", "", []string{"Destination", f.url("/copy.lck")}, http.StatusCreated},
				{"replace by COPY", "COPY", "/other.txt", "", []string{"Destination", f.url("/copy.lck"), "Overwrite", "T"}, ok(http.StatusNoContent)},
				{"move", "MOVE", "/report.lck", "", []string{"Destination", f.url("/moved.lck")}, ok(http.StatusCreated)},
				{"delete", "DELETE", "/empty.tpl", "", nil, ok(http.StatusNoContent)},
			} {
				st, _, body := f.do(tc.method, tc.path, strings.NewReader(tc.body), tc.hdr...)
				want(t, tc.name, st, tc.status, body)
			}
			if !admin {
				if got, err := f.read("/report.lck"); err != nil || string(got) != "1" {
					t.Fatalf("report.lck: %q %v", got, err)
				}
				if _, err := f.lookup("/empty.tpl"); err != nil {
					t.Fatalf("empty.tpl: %v", err)
				}
			}
		})
	}
}

// TestUserLockFiles: with user_lock_files off a person's LOCK is 403 and
// creates nothing; an administrator still locks.
func TestUserLockFiles(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.UserLockFiles = false
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	for _, p := range []string{"/a.txt", "/new.txt"} {
		st, _, body = f.do("LOCK", p, strings.NewReader(lockBody))
		want(t, "person LOCK "+p, st, http.StatusForbidden, body)
		contains(t, body, "lock files")
	}
	if _, err := f.lookup("/new.txt"); err == nil {
		t.Fatal("a refused LOCK created new.txt")
	}
	makeAdmin(t, f)
	st, _, body = f.do("LOCK", "/a.txt", strings.NewReader(lockBody))
	want(t, "administrator LOCK", st, http.StatusOK, body)
}

// TestChangePasswordFrequency: Basic credentials whose password is older
// than change_password_frequency are refused with 403 (no challenge: a
// new password is set over the OAuth password grant), remembered ones
// too, at the next request after the policy changes.
func TestChangePasswordFrequency(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "before", st, http.StatusCreated, body)
	always := "1ns"
	if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error {
		p.ChangePasswordFrequency = &always
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // remembered credentials, then a fresh check
		st, hdr, body := f.do("GET", "/a.txt", nil)
		want(t, "expired password", st, http.StatusForbidden, body)
		contains(t, body, "new_password")
		if hdr.Get("WWW-Authenticate") != "" {
			t.Fatalf("request %d: a challenge for an expired password", i)
		}
	}
}
