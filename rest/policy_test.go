package rest

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"berth/account"
)

// TestLockedExtensions: under locked_extensions a file of that extension
// can be created, and written while still empty, but once it has contents
// a person cannot overwrite, rename, move or delete it (403 forbidden);
// an administrator of the organization can; other files are not held,
// nor is a rename to a locked extension.
func TestLockedExtensions(t *testing.T) {
	for _, admin := range []bool{false, true} {
		name := "person"
		if admin {
			name = "administrator"
		}
		t.Run(name, func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.LockedExtensions = ".LCK, .tpl"
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			if admin {
				if _, err := f.accounts.UpdatePerson(context.Background(), f.person.ID, func(p *account.Person) error {
					p.Admin = true
					return nil
				}); err != nil {
					t.Fatal(err)
				}
			}
			up := f.at("/api/2/files/%d/upload")
			d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
			held := f.mustUpload(up, "report.lck", []byte("1"))
			f.mustUpload(up, "new.tpl", nil)
			free := f.mustUpload(up, "notes.txt", []byte("n"))
			uploadAgain := func(name, data string) func() (int, []byte) {
				return func() (int, []byte) { return f.upload(up, name, bytes.NewReader([]byte(data))) }
			}
			post := func(format string, id uint64, kv ...string) func() (int, []byte) {
				return func() (int, []byte) {
					v := url.Values{}
					for i := 0; i+1 < len(kv); i += 2 {
						v.Set(kv[i], kv[i+1])
					}
					return f.postForm(f.at(format, id), v)
				}
			}
			refused := http.StatusForbidden
			if admin {
				refused = http.StatusOK
			}
			for _, tc := range []struct {
				name   string
				do     func() (int, []byte)
				status int
			}{
				{"overwrite", uploadAgain("report.lck", "2"), refused},
				{"overwrite, other case", uploadAgain("REPORT.LCK", "2"), http.StatusOK}, // another name: a new file
				{"write the empty file", uploadAgain("new.tpl", "contents"), http.StatusOK},
				{"then overwrite it", uploadAgain("new.tpl", "again"), refused},
				{"rename", post("/api/2/files/%d/%d/rename", held.ID, "name", "renamed.lck"), refused},
				{"move", post("/api/2/files/%d/%d/move", held.ID, "folder_id", strconv.FormatUint(d.ID, 10)), refused},
				{"delete", post("/api/2/files/%d/%d/delete", held.ID), refused},
				{"rename to a locked extension", post("/api/2/files/%d/%d/rename", free.ID, "name", "notes.lck"), http.StatusOK},
				{"overwrite another extension", uploadAgain("other.txt", "x"), http.StatusOK},
			} {
				st, body := tc.do()
				if tc.status == http.StatusForbidden {
					wantError(t, st, body, http.StatusForbidden, "forbidden")
					continue
				}
				if st != tc.status {
					t.Fatalf("%s: %d %s", tc.name, st, body)
				}
			}
			if !admin {
				// Nothing of the refused overwrites was stored.
				if _, got := f.download(held.ID, nil); string(got) != "1" {
					t.Fatalf("report.lck holds %q", got)
				}
			}
		})
	}
}

// TestUserLockFiles: with user_lock_files off a person's lock routes
// answer 403 forbidden with a description; an administrator still locks.
func TestUserLockFiles(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.UserLockFiles = false
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "a.txt", []byte("a"))
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	routes := []string{
		f.at("/api/2/files/%d/%d/lock", fj.ID),
		f.at("/api/2/files/%d/folder/%d/lock", d.ID),
		f.at("/api/2/files/%d/lock"),
	}
	for _, p := range routes {
		st, body := f.postForm(p, nil)
		wantError(t, st, body, http.StatusForbidden, "forbidden")
		if !bytes.Contains(body, []byte("lock files")) {
			t.Errorf("%s: no description: %s", p, body)
		}
	}
	if _, err := f.accounts.UpdatePerson(context.Background(), f.person.ID, func(p *account.Person) error {
		p.Admin = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range routes {
		if st, body := f.postForm(p, nil); st != http.StatusOK {
			t.Fatalf("administrator %s: %d %s", p, st, body)
		}
		if st, body := f.postForm(strings.TrimSuffix(p, "lock")+"unlock", nil); st != http.StatusOK {
			t.Fatalf("administrator unlock %s: %d %s", p, st, body)
		}
	}
}

// TestChangePasswordFrequency: a password older than
// change_password_frequency is refused by the password grant with 403
// password_expired and a description that says how to set a new one;
// the grant with new_password beside the expired password succeeds, sets
// it, and the old one stops working; a bad new_password is 400.
func TestChangePasswordFrequency(t *testing.T) {
	pol := account.DefaultPolicy()
	always := "1ns" // every password is older than that
	pol.ChangePasswordFrequency = &always
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	st, body := f.oauthPost("/oauth/token", passwordForm())
	wantError(t, st, body, http.StatusForbidden, "password_expired")
	if !bytes.Contains(body, []byte("new_password")) {
		t.Fatalf("the description does not say how: %s", body)
	}
	for _, tc := range []struct {
		name string
		form url.Values
		st   int
		code string
	}{
		{"new password too short", passwordForm("new_password", "x"), 400, "invalid_request"},
		{"new password the same", passwordForm("new_password", fixturePassword), 400, "invalid_request"},
		{"wrong current password", passwordForm("password", "not the password", "new_password", "a brand new password"), 400, "invalid_grant"},
	} {
		st, body := f.oauthPost("/oauth/token", tc.form)
		wantError(t, st, body, tc.st, tc.code)
	}
	tr := f.grant(passwordForm("new_password", "a brand new password"))
	if st, body := f.personStatus(tr.AccessToken); st != http.StatusOK {
		t.Fatalf("token of the new password: %d %s", st, body)
	}
	if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error {
		p.ChangePasswordFrequency = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	f.grant(passwordForm("password", "a brand new password"))
	st, body = f.oauthPost("/oauth/token", passwordForm())
	wantError(t, st, body, http.StatusBadRequest, "invalid_grant")
}
