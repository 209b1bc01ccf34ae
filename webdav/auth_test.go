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

		// Under a lock, a remembered login is refused as a guess is: by
		// the sign-in's own refusal, unchecked, counted and held
		// (Lockout.RefusalDelay) like a guess's. Answered at once from
		// the memory, it told a guesser that the guess was right.
		{"a remembered login under a lock is refused as a guess is", func(t *testing.T) {
			f := newFixtureWith(t, fixtureOptions{Lockout: account.LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour}})
			propfind := func(what, pw string, wantStatus int) {
				t.Helper()
				st, _, body := f.propfindAs("alice", pw)
				want(t, what, st, wantStatus, body)
			}
			refusals := func() int { return strings.Count(f.logs.String(), "reason=locked") }
			propfind("right password, remembered", password, http.StatusMultiStatus)
			for i, st := range []int{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusForbidden} {
				// The third failure locks the account at once.
				propfind("guess "+strconv.Itoa(i), "wrong password "+strconv.Itoa(i), st)
			}
			before := refusals()
			propfind("a guess under the lock", "wrong password 9", http.StatusForbidden)
			if n := refusals() - before; n != 1 {
				t.Fatalf("a guess under the lock: %d refusals logged, want 1", n)
			}
			propfind("the remembered password under the lock", password, http.StatusForbidden)
			if n := refusals() - before; n != 2 {
				t.Fatalf("the remembered password under the lock: %d refusals logged in all, want 2 (as a guess)", n)
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
				st, _, body := f.propfindAs("alice", pw)
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
