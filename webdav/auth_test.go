package webdav_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// TestAuth: who gets in over WebDAV. Basic and Bearer credentials, the
// lockout they share with REST, the remembered Basic login and the
// policy gate. A row per case, each on a fresh server.
func TestAuth(t *testing.T) {
	runCases(t, []davCase{
		// An organization whose policy turns WebDAV off gets 403 with the
		// reason for every method, OPTIONS included. Formerly
		// TestGateRefusesEveryMethod (webdav_test.go).
		{"a policy with WebDAV off refuses every method", func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.WebDAVEnabled = false
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			for _, m := range []string{"OPTIONS", "GET", "PROPFIND", "PUT", "LOCK"} {
				st, _, body := f.do(m, "/x", strings.NewReader(""), "Depth", "0")
				want(t, m, st, http.StatusForbidden, body)
				contains(t, body, "WebDAV access is disabled")
			}
		}},

		// No credentials is 401 with a Basic challenge; a REST session token
		// works as Bearer; failed Basic logins lock the account, for WebDAV
		// and REST alike. Formerly TestAuthBasicBearerAndLockout
		// (webdav_test.go).
		{"Basic, Bearer, and the lockout shared with REST", func(t *testing.T) {
			f := newFixtureWith(t, fixtureOptions{Lockout: account.LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}})
			req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
			req.Header.Set("Depth", "0")
			st, h, body := f.send(req)
			want(t, "no credentials", st, http.StatusUnauthorized, body)
			if !strings.HasPrefix(h.Get("WWW-Authenticate"), `Basic realm="berth"`) {
				t.Fatalf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
			}

			req, _ = http.NewRequest("PROPFIND", f.url("/"), nil)
			req.Header.Set("Depth", "0")
			req.Header.Set("Authorization", "Bearer "+f.token)
			st, _, body = f.send(req)
			want(t, "bearer", st, http.StatusMultiStatus, body)

			// Failed Basic logins count toward the account's lockout.
			for i := range 3 {
				req, _ = http.NewRequest("PROPFIND", f.url("/"), nil)
				req.Header.Set("Depth", "0")
				req.SetBasicAuth("alice", "wrong password "+strconv.Itoa(i))
				st, _, body = f.send(req)
				if st != http.StatusUnauthorized && st != http.StatusForbidden {
					t.Fatalf("wrong password %d: status %d %q", i, st, body)
				}
			}
			st, _, body = f.do("PROPFIND", "/", nil, "Depth", "0")
			want(t, "right password after lockout", st, http.StatusForbidden, body)
			contains(t, body, "locked")
			// It says until when (an hour's lock).
			contains(t, body, "Too many failed logins; the account is locked until ")
			contains(t, body, " UTC (about 60 minutes).")
			// The same lock holds for the OAuth password grant (REST).
			if _, err := f.accounts.Authenticate(context.Background(), "alice", password); !errors.Is(err, account.ErrAccountLocked) {
				t.Fatalf("REST login after WebDAV lockout: %v, want ErrAccountLocked", err)
			}
		}},

		// A Basic login the handler remembers stops working at once when the
		// password changes, the person or the organization is disabled, or the
		// policy turns WebDAV off. Formerly TestCachedLoginEnds
		// (auth_test.go).
		{"a remembered login ends at once", func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			propfind := func(what, pw string, wantStatus int) {
				t.Helper()
				req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
				req.Header.Set("Depth", "0")
				req.SetBasicAuth("alice", pw)
				st, _, body := f.send(req)
				want(t, what, st, wantStatus, body)
			}
			setPerson := func(active bool) {
				t.Helper()
				if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Active = active; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			setOrg := func(fn func(o *account.Organization)) {
				t.Helper()
				if _, err := f.accounts.UpdateOrganization(ctx, f.org.ID, func(o *account.Organization) error { fn(o); return nil }); err != nil {
					t.Fatal(err)
				}
			}

			propfind("first login", password, http.StatusMultiStatus)
			propfind("remembered login", password, http.StatusMultiStatus)
			const newPassword = "another horse battery"
			if err := f.accounts.SetPassword(ctx, f.person.ID, newPassword); err != nil {
				t.Fatal(err)
			}
			propfind("old password after a change", password, http.StatusUnauthorized)
			propfind("new password", newPassword, http.StatusMultiStatus)
			propfind("new password remembered", newPassword, http.StatusMultiStatus)

			setPerson(false)
			propfind("disabled person", newPassword, http.StatusForbidden)
			setPerson(true)
			propfind("enabled again", newPassword, http.StatusMultiStatus)

			setOrg(func(o *account.Organization) { o.Active = false })
			propfind("disabled organization", newPassword, http.StatusForbidden)
			setOrg(func(o *account.Organization) { o.Active = true })
			propfind("organization enabled again", newPassword, http.StatusMultiStatus)

			// A rename ends the remembered login under the old name.
			if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Username = "alicia"; return nil }); err != nil {
				t.Fatal(err)
			}
			propfind("old username after a rename", newPassword, http.StatusUnauthorized)
			if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Username = "alice"; return nil }); err != nil {
				t.Fatal(err)
			}
			propfind("username given back", newPassword, http.StatusMultiStatus)

			setOrg(func(o *account.Organization) { o.Policy.WebDAVEnabled = false })
			propfind("WebDAV disabled by policy", newPassword, http.StatusForbidden)
		}},

		// File writes leave the remembered login and the session's roots
		// alone (kv.MetaGeneration): a PUT after another reads neither
		// again, but a change of the password, the person or the root
		// between two PUTs still takes effect at the next one.
		{"a remembered login outlasts file writes, not account changes", func(t *testing.T) {
			ctx := context.Background()
			f := newFixture(t)
			put := func(what, pw, name string, wantStatus int) {
				t.Helper()
				req, _ := http.NewRequest("PUT", f.url("/"+name), strings.NewReader("x"))
				req.SetBasicAuth("alice", pw)
				st, _, body := f.send(req)
				want(t, what, st, wantStatus, body)
			}
			// The first login checks the password (and writes its
			// success); the second fills the remembered login.
			put("first PUT", password, "a.txt", http.StatusCreated)
			put("second PUT", password, "a.txt", http.StatusNoContent)
			before := f.stack.DB.TxnStats()
			put("third PUT", password, "b.txt", http.StatusCreated)
			// The PUT's own: the name's lookup, the write's checks
			// before the body, its commit.
			if n := f.stack.DB.TxnStats().Views - before.Views; n > 2 {
				t.Errorf("a PUT after a PUT ran %d read transactions, want at most 2 (login and roots remembered)", n)
			}
			const newPassword = "another horse battery"
			if err := f.accounts.SetPassword(ctx, f.person.ID, newPassword); err != nil {
				t.Fatal(err)
			}
			put("old password after a change", password, "c.txt", http.StatusUnauthorized)
			put("new password", newPassword, "c.txt", http.StatusCreated)
			if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
			put("disabled person", newPassword, "d.txt", http.StatusForbidden)
			if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { p.Active = true; return nil }); err != nil {
				t.Fatal(err)
			}
			put("enabled again", newPassword, "d.txt", http.StatusCreated)
			if err := f.fs.DeleteRoot(ctx, f.root.ID); err != nil {
				t.Fatal(err)
			}
			// The mount is gone: its name is no folder any more.
			put("deleted root", newPassword, "e.txt", http.StatusConflict)
		}},

		// Taking a share away from a person, taking the person out of
		// the group a share is given to, or deleting that group ends
		// their access at their next request, though their remembered login and mounts outlast file
		// writes (kv.MetaGeneration, which file writes leave alone): the
		// share's name is then what a name that is no mount gets, 404 to
		// read and 409 to write below it, and PUTs of their own and of
		// others around the change do not bring it back.
		{"taking a share away ends it at the next request", func(t *testing.T) {
			revokeCase(t, revokeSubscriber)
		}},
		{"taking the person out of the group a share is given to ends it at the next request", func(t *testing.T) {
			revokeCase(t, revokeMember)
		}},
		{"deleting the group a share is given to ends it at the next request", func(t *testing.T) {
			revokeCase(t, revokeGroup)
		}},

		// A client that opens with several requests at once (Windows, rclone's
		// parallel transfers, each time the remembered login expires) sends
		// the same credentials in all of them. They are checked once and share
		// the answer, so they neither spend an argon2 hash each nor count as
		// more login attempts than the lockout allows. Formerly
		// TestParallelFirstLogins (auth_test.go).
		{"parallel first logins are checked once", func(t *testing.T) {
			const parallel = 16
			f := newFixtureWith(t, fixtureOptions{Lockout: account.LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}})
			start := make(chan struct{})
			statuses := make(chan int, parallel)
			var wg sync.WaitGroup
			for range parallel {
				wg.Go(func() {
					req, _ := http.NewRequest("PROPFIND", f.url("/"), nil)
					req.Header.Set("Depth", "0")
					req.SetBasicAuth("alice", password)
					<-start
					resp, err := f.client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					resp.Body.Close()
					statuses <- resp.StatusCode
				})
			}
			close(start)
			wg.Wait()
			close(statuses)
			for st := range statuses {
				if st != http.StatusMultiStatus {
					t.Fatalf("one of %d parallel first requests with the right password: status %d", parallel, st)
				}
			}
		}},
	})
}

// How revokeCase takes bob's share away.
const (
	revokeSubscriber = iota // he subscribes himself; the subscription goes
	revokeMember            // a group of his subscribes; he leaves it
	revokeGroup             // a group of his subscribes; it is deleted
)

// revokeCase gives bob an organization share, as a subscriber himself or
// through a group, fills the caches with his requests and file writes,
// takes the share away as how says, and checks his next requests are
// refused, with more file writes before them.
func revokeCase(t *testing.T, how int) {
	ctx := context.Background()
	f := newFixture(t)
	svc, ac, root := f.orgShare("Team")
	bob, _, _ := f.addPerson("bob")
	var (
		subs  share.Subscribers
		group account.Group
		err   error
	)
	viaGroup := how != revokeSubscriber
	if viaGroup {
		if group, err = f.accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: f.org.ID, Name: "Team members"}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.accounts.UpdateMembers(ctx, group.ID, account.MembersChange{AddPersons: []uint64{bob.ID}}); err != nil {
			t.Fatal(err)
		}
		subs.Groups = []share.Entry{{ID: group.ID, Channel: "webdav", Role: "COLLABORATOR"}}
		subs.Persons = []share.Entry{{ID: f.person.ID, Channel: "webdav", Role: "COLLABORATOR"}}
	} else {
		subs.Persons = []share.Entry{
			{ID: bob.ID, Channel: "webdav", Role: "COLLABORATOR"},
			{ID: f.person.ID, Channel: "webdav", Role: "COLLABORATOR"},
		}
	}
	if _, err := svc.SetSubscribers(ctx, ac, f.org.ID, root.ID, subs); err != nil {
		t.Fatal(err)
	}
	as := func(what, user, method, path, body string, wantStatus int) {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.SetBasicAuth(user, password)
		if method == "PROPFIND" {
			req.Header.Set("Depth", "1")
		}
		st, _, b := f.send(req)
		want(t, what, st, wantStatus, b)
	}
	// Writes that leave kv.MetaGeneration alone: new revisions of
	// existing files, in bob's own root and, by alice, in the share.
	fileWrites := func(what string) {
		t.Helper()
		for i := range 3 {
			as(what+": PUT of his own", "bob", "PUT", "/webdav/bob/own.txt", strconv.Itoa(i), http.StatusNoContent)
			as(what+": PUT by alice into the share", "alice", "PUT", "/webdav/Team/alice.txt", strconv.Itoa(i), http.StatusNoContent)
		}
	}
	as("bob's first PUT of his own", "bob", "PUT", "/webdav/bob/own.txt", "x", http.StatusCreated)
	as("alice's first PUT into the share", "alice", "PUT", "/webdav/Team/alice.txt", "x", http.StatusCreated)
	as("PUT into the share", "bob", "PUT", "/webdav/Team/a.txt", "hello", http.StatusCreated)
	fileWrites("before")
	as("GET in the share", "bob", "GET", "/webdav/Team/a.txt", "", http.StatusOK)
	as("PROPFIND of the share", "bob", "PROPFIND", "/webdav/Team/", "", http.StatusMultiStatus)
	before := f.stack.DB.MetaGeneration()
	fileWrites("with the share")
	if after := f.stack.DB.MetaGeneration(); after != before {
		t.Fatalf("file writes moved MetaGeneration from %d to %d: the rows no longer show the caches outlasting them", before, after)
	}
	as("GET in the share, remembered", "bob", "GET", "/webdav/Team/a.txt", "", http.StatusOK)

	switch how {
	case revokeSubscriber:
		subs.Persons = subs.Persons[1:]
		_, err = svc.SetSubscribers(ctx, ac, f.org.ID, root.ID, subs)
	case revokeMember:
		_, err = f.accounts.UpdateMembers(ctx, group.ID, account.MembersChange{RemovePersons: []uint64{bob.ID}})
	case revokeGroup:
		err = f.accounts.DeleteGroup(ctx, group.ID)
	}
	if err != nil {
		t.Fatal(err)
	}
	fileWrites("after")
	as("GET in the share taken away", "bob", "GET", "/webdav/Team/a.txt", "", http.StatusNotFound)
	as("PROPFIND of the share taken away", "bob", "PROPFIND", "/webdav/Team/", "", http.StatusNotFound)
	as("PUT into the share taken away", "bob", "PUT", "/webdav/Team/b.txt", "x", http.StatusConflict)
	fileWrites("after the refusals")
	as("GET in the share taken away, again", "bob", "GET", "/webdav/Team/a.txt", "", http.StatusNotFound)
	// alice, a subscriber herself, keeps it, and bob his own root.
	as("alice's GET in the share", "alice", "GET", "/webdav/Team/a.txt", "", http.StatusOK)
	as("bob's own root", "bob", "GET", "/webdav/bob/own.txt", "", http.StatusOK)
}

// orgShare creates an administrator "adm" of the fixture's organization
// and, as them, an organization share named name; it returns the share
// service, the administrator as a caller and the share's root.
func (f *fixture) orgShare(name string) (*share.Service, account.Caller, vfs.Root) {
	f.t.Helper()
	ctx := context.Background()
	svc := share.New(share.Options{FS: f.fs, Accounts: f.accounts})
	admin, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "adm",
		Email: "adm@example.com", Password: password, Admin: true})
	if err != nil {
		f.t.Fatal(err)
	}
	ac, err := f.accounts.Caller(ctx, admin.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	root, err := svc.CreateOrgShare(ctx, ac, f.org.ID, name)
	if err != nil {
		f.t.Fatal(err)
	}
	return svc, ac, root
}
