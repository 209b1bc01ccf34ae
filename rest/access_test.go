package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/kv"
	"berth/share"
	"berth/vfs"
)

// TestRouteAccess walks every route of the file system as each kind of
// caller, through share's one access API: the owner reaches their root;
// anyone without credentials gets 401 access_denied; a person of another
// organization, a plain person of the same one and the organization's
// administrator all get 404 not_found, the answer a root that does not
// exist gets, so no caller learns which roots exist (share.ErrNoRoot).
// Administrators manage persons, not their files: no root of another
// person is theirs to open.
func TestRouteAccess(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("contents"))
	callers := f.strangers()

	r, fi, fo := f.root.ID, fj.ID, d.ID
	// Each route with a request the owner may make; status is the owner's
	// answer.
	routes := []struct {
		method, path string
		form         url.Values
		status       int
	}{
		{"GET", fmt.Sprintf("/api/2/files/%d", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/search?query=f", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/modified_since?since=2024-01-01T00:00:00", r), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/create_folder", r), url.Values{"name": {"E"}}, 200},
		{"UPLOAD", fmt.Sprintf("/api/2/files/%d/upload", r), nil, 200},
		{"UPLOAD", fmt.Sprintf("/api/2/files/%d/folder/%d/upload", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/lock", r), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/unlock", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/%d", r, fi), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/%d/download", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/lock", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/unlock", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/rename", r, fi), url.Values{"name": {"g.txt"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/move", r, fi), url.Values{"folder_id": {fmt.Sprint(fo)}}, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/folder/%d", r, fo), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/folder/%d/download", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/create_folder", r, fo), url.Values{"name": {"F"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/lock", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/unlock", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/rename", r, fo), url.Values{"name": {"D2"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/move", r, fo), url.Values{"folder_id": {"0"}, "name": {"D3"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/delete", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/delete", r, fo), nil, 200},
	}
	for _, rt := range routes {
		for _, c := range callers {
			st, body := f.send(rt.method, rt.path, c.token, rt.form)
			c.answered(t, rt.method+" "+rt.path, st, body)
		}
		// The owner last, so the others saw every item as it was.
		if st, body := f.send(rt.method, rt.path, f.token, rt.form); st != rt.status {
			t.Errorf("%s %s as the owner: %d %s, want %d", rt.method, rt.path, st, body, rt.status)
		}
	}
}

// stranger is a caller of routes into the fixture's root who is not its
// owner, and the answer every such route gives them.
type stranger struct {
	name, token string
	status      int
	code        string
}

// answered fails t unless s got its answer, status and error code, to
// the request what.
func (s stranger) answered(t *testing.T, what string, status int, body []byte) {
	t.Helper()
	if status != s.status || !strings.Contains(string(body), `"error":"`+s.code+`"`) {
		t.Errorf("%s as %s: %d %s, want %d %s", what, s.name, status, body, s.status, s.code)
	}
}

// strangers makes the callers who may not reach the fixture's root, each
// with the answer share's access API gives them: anyone without
// credentials 401 access_denied; a person of another organization, a
// plain person of the same one and the organization's administrator 404
// not_found, as for a root that does not exist.
func (f *fixture) strangers() []stranger {
	f.t.Helper()
	ctx := context.Background()
	_, _, plain := f.addPerson("bob")
	root, err := f.fs.CreateRoot(ctx, "carol", vfs.RootSync)
	if err != nil {
		f.t.Fatal(err)
	}
	admin := f.personToken(account.PersonInput{OrganizationID: f.org.ID, Username: "carol",
		Email: "carol@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		f.t.Fatal(err)
	}
	root, err = f.fs.CreateRoot(ctx, "dave", vfs.RootSync)
	if err != nil {
		f.t.Fatal(err)
	}
	tenant := f.personToken(account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})
	return []stranger{
		{"anonymous", "", http.StatusUnauthorized, "access_denied"},
		{"a bad token", "not-a-token", http.StatusUnauthorized, "access_denied"},
		{"another organization", tenant, http.StatusNotFound, "not_found"},
		{"a plain person of the organization", plain, http.StatusNotFound, "not_found"},
		{"the organization's administrator", admin, http.StatusNotFound, "not_found"},
	}
}

// personToken creates a person from in and returns an access token of
// theirs.
func (f *fixture) personToken(in account.PersonInput) string {
	f.t.Helper()
	p, err := f.accounts.CreatePerson(context.Background(), in)
	if err != nil {
		f.t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(context.Background(), p.ID, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return toks.AccessToken
}

// send makes a request as the holder of token ("" for none), with form as
// its body when it is a POST, and returns status and body. The method
// UPLOAD is a POST of a small file named up.txt.
func (f *fixture) send(method, path, token string, form url.Values) (int, []byte) {
	f.t.Helper()
	return f.sendWith(method, path, token, form, http.Header{})
}

// sendWith is send with the request headers h.
func (f *fixture) sendWith(method, path, token string, form url.Values, h http.Header) (int, []byte) {
	f.t.Helper()
	var body io.Reader
	switch method {
	case "UPLOAD":
		var ct string
		body, ct = multipartBody("up.txt", strings.NewReader("up"))
		h.Set("Content-Type", ct)
		method = http.MethodPost
	case http.MethodPost:
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		body = strings.NewReader(form.Encode())
	}
	return f.readAll(f.request(method, path, token, body, h))
}

// revokeWorld is what TestRevocationUnderFileWrites revokes: alice (the
// fixture's person, whose token the rows refuse) and an organization
// share she collaborates on, which carol administers. File writes come
// between the change and alice's next request: dave's, of another
// organization, into his own root, and carol's into the share.
type revokeWorld struct {
	f           *fixture
	sh          *share.Service
	admin       account.Caller
	share       vfs.Root
	carolRoot   vfs.Root
	carolToken  string
	daveRoot    vfs.Root
	daveToken   string
	aliceTokens account.Tokens
	link        share.Link // a public folder link carol made in the share, where a row makes one
	// shareWrites: carol may still write into the share (a row that
	// disables her organization or deletes the share ends it).
	shareWrites bool
}

// writes are file writes of others: commits of file contents only,
// which leave kv.MetaGeneration, and so the caches of callers and of
// what they reach, where they were.
func (w *revokeWorld) writes(t *testing.T) {
	t.Helper()
	meta := kv.MetaGeneration(w.f.db)
	up := func(who string, root uint64, token string) {
		if st, body := w.f.send("UPLOAD", fmt.Sprintf("/api/2/files/%d/upload", root), token, nil); st != http.StatusOK {
			t.Fatalf("%s's upload into root %d: %d %s", who, root, st, body)
		}
	}
	up("dave", w.daveRoot.ID, w.daveToken)
	if w.shareWrites {
		up("carol", w.share.ID, w.carolToken)
	}
	if got := kv.MetaGeneration(w.f.db); got != meta {
		t.Fatalf("file writes moved MetaGeneration from %d to %d: the row would not test the caches it means to", meta, got)
	}
}

// TestRevocationUnderFileWrites: what revokes a caller, or lowers what
// they reach, refuses their very next request on /api/2 although only
// other people's file writes (which leave kv.MetaGeneration, and so the
// caches of callers and sessions, alone) come between. Each row: alice's
// request is let in, file writes, the change, file writes, then the same
// request (or the row's) is refused with the spec's status and code.
func TestRevocationUnderFileWrites(t *testing.T) {
	ctx := context.Background()
	// probe is alice's request of a row, made twice before the change and
	// twice after: it answers 2xx before.
	type probe func(t *testing.T, w *revokeWorld) (int, []byte)
	send := func(method, format string, id func(*revokeWorld) uint64) probe {
		return func(_ *testing.T, w *revokeWorld) (int, []byte) {
			return w.f.send(method, fmt.Sprintf(format, id(w)), w.aliceTokens.AccessToken, nil)
		}
	}
	ownRoot := func(w *revokeWorld) uint64 { return w.f.root.ID }
	shareRoot := func(w *revokeWorld) uint64 { return w.share.ID }
	// The rows' requests: alice's root, the share, an upload into it, an
	// administrator's route, and the next piece of a tus upload into the
	// share that she began before the change (its record, a staged
	// upload, is file content: the access it was begun with must not
	// outlast the change).
	own := send("GET", "/api/2/files/%d", ownRoot)
	shared := send("GET", "/api/2/files/%d", shareRoot)
	upload := send("UPLOAD", "/api/2/files/%d/upload", shareRoot)
	persons := send("GET", "/api/2/organization/%d/persons", func(w *revokeWorld) uint64 { return w.f.org.ID })
	var tusPath string
	var tusOffset int64
	tusPiece := func(t *testing.T, w *revokeWorld) (int, []byte) {
		c := w.f.tus(t, w.aliceTokens.AccessToken)
		if tusPath == "" {
			tusPath, tusOffset = c.mustCreate(w.share.ID, "big.bin", 10), 0
		}
		resp, body, err := c.patch(tusPath, tusOffset, strings.NewReader("x"), 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusNoContent {
			tusOffset++
		}
		return resp.StatusCode, body
	}
	setAlice := func(fn func(*account.Person)) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdatePerson(ctx, w.f.person.ID, func(p *account.Person) error { fn(p); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	setRole := func(role string) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			var subs share.Subscribers
			if role != "" {
				subs.Persons = []share.Entry{{ID: w.f.person.ID, Channel: share.ChannelWeb, Role: role}}
			}
			if _, err := w.sh.SetSubscribers(ctx, w.admin, w.f.org.ID, w.share.ID, subs); err != nil {
				t.Fatal(err)
			}
		}
	}
	browse := func(v bool) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdatePolicy(ctx, w.f.org.ID, func(p *account.Policy) error { p.AdminBrowseFiles = v; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A public link of a folder of the share, made by carol, that anyone
	// holding its hash lists.
	makeLink := func(t *testing.T, w *revokeWorld) {
		d, err := w.f.fs.Mkdir(ctx, w.share.ID, w.share.FolderID, "Public", vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if w.link, err = w.sh.CreateLink(ctx, w.admin, w.share.ID, d.ID, true, share.LinkSettings{}); err != nil {
			t.Fatal(err)
		}
	}
	linkList := func(_ *testing.T, w *revokeWorld) (int, []byte) {
		return w.f.send("GET", "/api/2/sharelinks/"+w.link.Hash+"/files/children", "", nil)
	}
	rows := []struct {
		name   string
		before func(*testing.T, *revokeWorld) // nil: none
		probe  probe
		change func(*testing.T, *revokeWorld)
		status int
		code   string
	}{
		{"password changed", nil, own, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.SetPassword(ctx, w.f.person.ID, "another correct horse"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, "access_denied"},
		{"person disabled", nil, own, setAlice(func(p *account.Person) { p.Active = false }), http.StatusUnauthorized, "access_denied"},
		{"person deleted", nil, own, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.DeletePerson(ctx, w.f.person.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, "access_denied"},
		{"organization disabled", nil, own, func(t *testing.T, w *revokeWorld) {
			w.shareWrites = false
			if _, err := w.f.accounts.UpdateOrganization(ctx, w.f.org.ID, func(o *account.Organization) error { o.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, "access_denied"},
		{"session signed out", nil, own, func(t *testing.T, w *revokeWorld) {
			form := url.Values{"client_id": {"anchor"}, "token": {w.aliceTokens.RefreshToken}}
			if st, body := w.f.send("POST", "/oauth/revoke", "", form); st != http.StatusOK {
				t.Fatalf("revoke: %d %s", st, body)
			}
		}, http.StatusUnauthorized, "access_denied"},
		{"machine deleted", nil, own, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.DeleteMachine(ctx, w.aliceTokens.MachineID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, "access_denied"},
		{"two-step verification required", nil, own, func(t *testing.T, w *revokeWorld) {
			w.shareWrites = false
			if _, err := w.f.accounts.UpdatePolicy(ctx, w.f.org.ID, func(p *account.Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, "forbidden"},
		{"administrator role removed", setAlice(func(p *account.Person) { p.Admin = true }), persons,
			setAlice(func(p *account.Person) { p.Admin = false }), http.StatusForbidden, "forbidden"},
		{"admin_browse_files turned off", func(t *testing.T, w *revokeWorld) {
			setAlice(func(p *account.Person) { p.Admin = true })(t, w)
			browse(true)(t, w)
		}, send("GET", "/api/2/files/%d", func(w *revokeWorld) uint64 { return w.carolRoot.ID }), browse(false), http.StatusNotFound, "not_found"},
		{"own root deleted", nil, own, func(t *testing.T, w *revokeWorld) {
			if err := w.f.fs.DeleteRoot(ctx, w.f.root.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusGone, "root_deleted"},
		{"share lowered from write to read", nil, upload, setRole(share.RoleViewer), http.StatusForbidden, "forbidden"},
		{"removed from the share", nil, shared, setRole(""), http.StatusNotFound, "not_found"},
		{"share lowered to read during a tus upload", nil, tusPiece, setRole(share.RoleViewer), http.StatusForbidden, "forbidden"},
		{"removed from the share during a tus upload", nil, tusPiece, setRole(""), http.StatusNotFound, "not_found"},
		{"share link deleted", makeLink, linkList, func(t *testing.T, w *revokeWorld) {
			if err := w.sh.DeleteLink(ctx, w.admin, w.link.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusNotFound, "not_found"},
		{"share link expired", makeLink, linkList, func(t *testing.T, w *revokeWorld) {
			yesterday := time.Now().UTC().AddDate(0, 0, -1).Format(share.DateLayout)
			if _, err := w.sh.UpdateLink(ctx, w.admin, w.link.ID, share.LinkSettings{Expires: &yesterday}); err != nil {
				t.Fatal(err)
			}
		}, http.StatusGone, "link_expired"},
		{"share link's creator no longer administers the share", makeLink, linkList, func(t *testing.T, w *revokeWorld) {
			w.shareWrites = false
			if _, err := w.f.accounts.UpdatePerson(ctx, w.admin.Person.ID, func(p *account.Person) error { p.Admin = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, http.StatusNotFound, "not_found"},
		{"share deleted", nil, shared, func(t *testing.T, w *revokeWorld) {
			w.shareWrites = false
			if err := w.sh.DeleteOrgShare(ctx, w.admin, w.f.org.ID, w.share.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusGone, "root_deleted"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newRevokeWorld(t)
			if row.before != nil {
				row.before(t, w)
			}
			tusPath = ""
			for i := range 2 {
				if st, body := row.probe(t, w); st/100 != 2 {
					t.Fatalf("before the change (%d): %d %s", i+1, st, body)
				}
			}
			w.writes(t)
			row.change(t, w)
			w.writes(t)
			for range 2 {
				st, body := row.probe(t, w)
				wantError(t, st, body, row.status, row.code)
			}
		})
	}
}

// newRevokeWorld builds a fixture for TestRevocationUnderFileWrites:
// alice signed in from a machine and a collaborator of a share carol
// administers, and dave of another organization.
func newRevokeWorld(t *testing.T) *revokeWorld {
	t.Helper()
	ctx := context.Background()
	w := &revokeWorld{f: newFixture(t), shareWrites: true}
	var carol account.Person
	carol, w.carolRoot, w.carolToken = w.f.addPerson("carol")
	globex, err := w.f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	if w.daveRoot, err = w.f.fs.CreateRoot(ctx, "dave", vfs.RootSync); err != nil {
		t.Fatal(err)
	}
	w.daveToken = w.f.personToken(account.PersonInput{OrganizationID: globex.ID, Username: "dave",
		Email: "dave@example.com", Password: fixturePassword, RootID: w.daveRoot.ID})
	if _, err := w.f.accounts.UpdatePerson(ctx, carol.ID, func(p *account.Person) error { p.Admin = true; return nil }); err != nil {
		t.Fatal(err)
	}
	admin, err := w.f.accounts.Caller(ctx, carol.ID)
	if err != nil {
		t.Fatal(err)
	}
	w.admin = admin
	w.sh = share.New(share.Options{FS: w.f.fs, Accounts: w.f.accounts})
	if w.share, err = w.sh.CreateOrgShare(ctx, w.admin, w.f.org.ID, "Team"); err != nil {
		t.Fatal(err)
	}
	subs := share.Subscribers{Persons: []share.Entry{{ID: w.f.person.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}}}
	if _, err := w.sh.SetSubscribers(ctx, w.admin, w.f.org.ID, w.share.ID, subs); err != nil {
		t.Fatal(err)
	}
	m, err := w.f.accounts.UpsertMachine(ctx, w.f.person.ID, account.MachineInput{GUID: "alice-laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if w.aliceTokens, err = w.f.accounts.IssueTokens(ctx, w.f.person.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	return w
}
