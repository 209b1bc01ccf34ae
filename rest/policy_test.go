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
