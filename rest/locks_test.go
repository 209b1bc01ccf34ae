package rest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

func TestLocks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", []byte("1"))
	lockPath := f.at("/api/2/files/%d/%d/lock", fj.ID)

	// The owner's lock shows, and does not block the owner's own writes.
	for i := 0; i < 2; i++ { // twice: locking what one holds is a success
		if st, body := f.postForm(lockPath, url.Values{"duration": {"600"}}); st != http.StatusOK {
			t.Fatalf("lock: %d %s", st, body)
		}
	}
	// Locking it again without duration asks for a lock until unlocked,
	// as a first lock without one is: the 200 left the 600 seconds.
	if st, body := f.postForm(lockPath, nil); st != http.StatusOK {
		t.Fatalf("lock without duration: %d %s", st, body)
	}
	if n, _ := f.fs.Stat(ctx, f.root.ID, fj.ID); len(n.Locks) != 1 || !n.Locks[0].Expires.IsZero() {
		t.Fatalf("locks after a lock without duration: %+v, want one that does not expire", n.Locks)
	}
	_, body := f.get(f.at("/api/2/files/%d/%d", fj.ID))
	var got fileJSON
	decode(t, body, &got)
	if !got.IsLocked {
		t.Fatalf("not locked: %s", body)
	}
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", []byte("2"))
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil); st != http.StatusOK {
		t.Fatalf("unlock: %d %s", st, body)
	}
	n, _ := f.fs.Stat(ctx, f.root.ID, fj.ID)
	if n.Locked() {
		t.Fatal("still locked after unlock")
	}

	// The person's own WebDAV lock (another client of theirs, which
	// only its token opens) blocks their REST writes, so a REST lock of
	// the file is refused rather than answered as one they already
	// hold: that 200 was followed by resource_locked on their upload.
	if _, err := f.fs.Lock(ctx, f.root.ID, fj.ID, vfs.LockRequest{Holder: f.person.Principal(), TokenRequired: true}); err != nil {
		t.Fatal(err)
	}
	st, body := f.postForm(lockPath, nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.upload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", strings.NewReader("3"))
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	// Their unlock ends their own locks, that one included.
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil); st != http.StatusOK {
		t.Fatalf("unlock own WebDAV lock: %d %s", st, body)
	}

	// Someone else's lock (a WebDAV client's) blocks the person's writes
	// and their unlock.
	if _, err := f.fs.Lock(ctx, f.root.ID, fj.ID, vfs.LockRequest{Holder: "webdav:other", TokenRequired: true}); err != nil {
		t.Fatal(err)
	}
	st, body = f.upload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "f.txt", strings.NewReader("3"))
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(f.at("/api/2/files/%d/%d/rename", fj.ID), url.Values{"name": {"g.txt"}})
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	st, body = f.postForm(lockPath, nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")
	// A deep folder lock conflicts with the lock below it.
	st, body = f.postForm(f.at("/api/2/files/%d/folder/%d/lock", d.ID), nil)
	wantError(t, st, body, http.StatusConflict, "resource_locked")

	// Root lock and unlock show in the root object (the other lock would
	// conflict with the deep root lock).
	if err := f.fs.Unlock(ctx, f.root.ID, fj.ID, ""); err != nil {
		t.Fatal(err)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/lock"), nil); st != http.StatusOK {
		t.Fatalf("lock root: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d"))
	if !bytes.Contains(body, []byte(`"is_locked":true`)) {
		t.Fatalf("root not locked: %s", body)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/unlock"), nil); st != http.StatusOK {
		t.Fatalf("unlock root: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d"))
	if !bytes.Contains(body, []byte(`"is_locked":false`)) {
		t.Fatalf("root still locked: %s", body)
	}
	st, body = f.postForm(lockPath, url.Values{"duration": {"soon"}})
	wantError(t, st, body, http.StatusBadRequest, "invalid_request")
}

// TestDeletedItemLocks pins what docs/api.md says of locks on deleted
// items: a lock held when the item was deleted stays (is_locked), the
// holder may still release it (unlock is the one change a deleted item
// takes), and anything else, a new lock included, is 404.
func TestDeletedItemLocks(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, step := range []string{"lock", "delete"} {
		if st, body := f.postForm(f.at("/api/2/files/%d/%d/"+step, fj.ID), nil); st != http.StatusOK {
			t.Fatalf("%s: %d %s", step, st, body)
		}
	}
	state := func() fileJSON {
		t.Helper()
		_, body := f.get(f.at("/api/2/files/%d/%d", fj.ID))
		var got fileJSON
		decode(t, body, &got)
		return got
	}
	if got := state(); !got.IsDeleted || !got.IsLocked {
		t.Fatalf("deleted while locked: %+v", got)
	}
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/unlock", fj.ID), nil); st != http.StatusOK {
		t.Fatalf("unlock deleted: %d %s", st, body)
	}
	if got := state(); !got.IsDeleted || got.IsLocked {
		t.Fatalf("after unlock: %+v", got)
	}
	st, body := f.postForm(f.at("/api/2/files/%d/%d/lock", fj.ID), nil)
	wantError(t, st, body, http.StatusNotFound, "not_found")
}

// TestLockBreak: a lock of someone else's is ended by its holder alone,
// or by unlock with `force` from a caller who holds every permission on
// the root (a share's manager, the administrators of its organization
// and of those above): a collaborator's lock of a whole share, without
// duration, lasted forever, and past the collaborator's removal from
// the share, with nobody left who could end it (each row: bob, a
// collaborator of Team, has locked its root).
func TestLockBreak(t *testing.T) {
	f := newFixture(t)
	shares := share.New(share.Options{FS: f.fs, Accounts: f.accounts})
	carol, _, carolTok := f.addPerson("carol")
	if _, err := f.accounts.UpdatePerson(ctx0, carol.ID, func(p *account.Person) error { p.Admin = true; return nil }); err != nil {
		t.Fatal(err)
	}
	bob, _, bobTok := f.addPerson("bob")
	dave, _, daveTok := f.addPerson("dave")
	ac, err := f.accounts.Caller(ctx0, carol.ID)
	if err != nil {
		t.Fatal(err)
	}
	team, err := shares.CreateOrgShare(ctx0, ac, f.org.ID, "Team")
	if err != nil {
		t.Fatal(err)
	}
	erin, _, erinTok := f.addPerson("erin")
	// Administrators of a child organization and of another: neither
	// reaches a share of f.org's.
	child, err := f.accounts.CreateOrganization(ctx0, account.OrganizationInput{ParentID: f.org.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	globex, err := f.accounts.CreateOrganization(ctx0, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	admin := func(org uint64, name string) string {
		return f.personToken(account.PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: fixturePassword, Admin: true})
	}
	childAdminTok, globexAdminTok := admin(child.ID, "childadm"), admin(globex.ID, "globexadm")
	subscribe := func(withBob bool) {
		t.Helper()
		subs := []share.Entry{{ID: dave.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator},
			{ID: erin.ID, Channel: share.ChannelWeb, Role: share.RoleViewer},
			{ID: f.person.ID, Channel: share.ChannelWeb, Role: share.RoleManager}}
		if withBob {
			subs = append(subs, share.Entry{ID: bob.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator})
		}
		if _, err := shares.SetSubscribers(ctx0, ac, f.org.ID, team.ID, share.Subscribers{Persons: subs}); err != nil {
			t.Fatal(err)
		}
	}
	// A file in Team: a forced unlock of it ends the root's deep lock
	// that covers it.
	inTeam, err := f.fs.WriteFile(ctx0, team.ID, team.FolderID, "f.txt", strings.NewReader("f"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := func(s string) string { return fmt.Sprintf("/api/2/files/%d/%s", team.ID, s) }
	send := func(token, route string, form url.Values) (int, []byte) {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		return f.readAll(f.request(http.MethodPost, path(route), token, strings.NewReader(form.Encode()), h))
	}
	force := url.Values{"force": {"true"}}
	for _, tc := range []struct {
		name   string
		token  string
		form   url.Values
		left   bool // bob left the share after he locked
		dav    bool // bob's lock is a WebDAV client's (its token required)
		file   bool // unlock the file in Team, not the root bob locked
		status int
		code   string
		ended  bool
	}{
		{name: "the holder's unlock", token: bobTok, status: http.StatusOK, ended: true},
		{name: "a collaborator's unlock", token: daveTok, status: http.StatusConflict, code: "resource_locked"},
		{name: "a collaborator's forced unlock", token: daveTok, form: force, status: http.StatusForbidden, code: "forbidden"},
		{name: "the manager's unlock, not forced", token: f.token, status: http.StatusConflict, code: "resource_locked"},
		{name: "the manager's forced unlock", token: f.token, form: force, status: http.StatusOK, ended: true},
		{name: "the administrator's forced unlock", token: carolTok, form: force, status: http.StatusOK, ended: true},
		{name: "forced after the holder left the share", token: carolTok, form: force, left: true, status: http.StatusOK, ended: true},
		{name: "force not a boolean", token: carolTok, form: url.Values{"force": {"yes"}}, status: http.StatusBadRequest, code: "invalid_request"},
		{name: "the holder's own forced unlock", token: bobTok, form: force, status: http.StatusForbidden, code: "forbidden"},
		{name: "a viewer's forced unlock", token: erinTok, form: force, status: http.StatusForbidden, code: "forbidden"},
		{name: "a child organization's administrator's forced unlock", token: childAdminTok, form: force, status: http.StatusNotFound, code: "not_found"},
		{name: "another organization's administrator's forced unlock", token: globexAdminTok, form: force, status: http.StatusNotFound, code: "not_found"},
		{name: "an anonymous forced unlock", token: "", form: force, status: http.StatusUnauthorized, code: "access_denied"},
		{name: "the manager's forced unlock of a WebDAV lock", token: f.token, form: force, dav: true, status: http.StatusOK, ended: true},
		{name: "the manager's forced unlock of a file under the root's lock", token: f.token, form: force, file: true, status: http.StatusOK, ended: true},
		{name: "the administrator's forced unlock of a file under a WebDAV lock of the root", token: carolTok, form: force, file: true, dav: true, status: http.StatusOK, ended: true},
		{name: "a collaborator's forced unlock of a file under the root's lock", token: daveTok, form: force, file: true, status: http.StatusForbidden, code: "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subscribe(true)
			if tc.dav {
				if _, err := f.fs.Lock(ctx0, team.ID, team.FolderID, vfs.LockRequest{Holder: bob.Principal(), TokenRequired: true, Deep: true}); err != nil {
					t.Fatal(err)
				}
			} else if st, body := send(bobTok, "lock", nil); st != http.StatusOK {
				t.Fatalf("bob's lock: %d %s", st, body)
			}
			if tc.left {
				subscribe(false)
			}
			route := "unlock"
			if tc.file {
				route = fmt.Sprintf("%d/unlock", inTeam.ID)
			}
			st, body := send(tc.token, route, tc.form)
			if tc.code != "" {
				wantError(t, st, body, tc.status, tc.code)
			} else if st != tc.status {
				t.Fatalf("unlock: %d %s, want %d", st, body, tc.status)
			}
			n, err := f.fs.Stat(ctx0, team.ID, team.FolderID)
			if err != nil {
				t.Fatal(err)
			}
			if n.Locked() == tc.ended {
				t.Fatalf("locked %v after the unlock, want %v", n.Locked(), !tc.ended)
			}
			st, body = f.upload(path("upload"), "x.txt", strings.NewReader("x"))
			if tc.ended && st != http.StatusOK {
				t.Fatalf("the manager's upload after the lock ended: %d %s", st, body)
			}
			if err := f.fs.Unlock(ctx0, team.ID, team.FolderID, ""); err != nil {
				t.Fatal(err)
			}
		})
	}
}
