package rest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/account/directorytest"
	"berth/share"
)

// adFixture is a fixture whose organization's policy enables directory
// servers, trusting roots for LDAPS (nil: the system pool), with an
// administrator's token.
func adFixture(t *testing.T, srv *directorytest.Server) (*fixture, string) {
	t.Helper()
	pol := account.DefaultPolicy()
	pol.ADEnabled = true
	o := fixtureOptions{Policy: &pol}
	if srv != nil {
		o.Accounts.Directory.RootCAs = srv.RootCAs
	}
	f := newFixtureWith(t, o)
	ctx := context.Background()
	admin, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "root",
		Email: "root@example.com", Password: fixturePassword, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, admin.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f, toks.AccessToken
}

func sourceForm(kv ...string) url.Values {
	v := url.Values{"host": {"ldap.example.com"}, "domain": {"example.com"}, "login": {"cn=reader,dc=example,dc=com"}, "password": {"s3cret"}}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "-" {
			v.Del(kv[i])
			continue
		}
		v.Set(kv[i], kv[i+1])
	}
	return v
}

// The routes of directory servers: the auth_source object exactly (the
// password never in it), every bad setting named, the policy gate.
func TestAuthSourceRoutes(t *testing.T) {
	f, admin := adFixture(t, nil)
	orgPath := fmt.Sprintf("/api/2/organization/%d/auth_sources", f.org.ID)
	st, b := f.send(http.MethodPost, orgPath+"/create", admin, sourceForm("port", "10636", "ssl", "true"))
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, b)
	}
	var obj map[string]any
	decode(t, b, &obj)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if strings.Join(keys, ",") != "domain,host,id,login,machine_id,port,protocol,ssl,type" {
		t.Fatalf("fields %v", keys)
	}
	if obj["type"] != "auth_source" || obj["port"] != 10636.0 || obj["ssl"] != true || obj["machine_id"] != nil || obj["protocol"] != nil {
		t.Fatalf("object %s", b)
	}
	id := uint64(obj["id"].(float64))
	srcPath := fmt.Sprintf("/api/2/auth_source/%d", id)

	for _, tc := range []struct {
		name, path string
		form       url.Values
		status     int
		code, desc string
	}{
		{"no host", orgPath + "/create", sourceForm("host", "-"), 400, "invalid_request", "host"},
		{"a URL for a host", orgPath + "/create", sourceForm("host", "ldaps://x.example.com"), 400, "invalid_request", "host"},
		{"a port that is no number", orgPath + "/create", sourceForm("port", "ldap"), 400, "invalid_request", "port"},
		{"a port out of range", orgPath + "/create", sourceForm("port", "70000"), 400, "invalid_request", "port"},
		{"ssl that is no flag", orgPath + "/create", sourceForm("ssl", "maybe"), 400, "invalid_request", "ssl"},
		{"a bad domain", orgPath + "/create", sourceForm("domain", "exa mple.com"), 400, "invalid_request", "domain"},
		{"a login that is no DN", orgPath + "/create", sourceForm("login", "reader"), 400, "invalid_request", "login"},
		{"a bad filter", orgPath + "/create", sourceForm("filter", "uid=*)"), 400, "invalid_request", "filter"},
		{"a bad base", orgPath + "/create", sourceForm("base_dn", "people"), 400, "invalid_request", "base_dn"},
		{"update: a bad port", srcPath + "/update", url.Values{"port": {"-3"}}, 400, "invalid_request", "port"},
		{"update: a bad host", srcPath + "/update", url.Values{"host": {"a/b"}}, 400, "invalid_request", "host"},
		{"no such source", "/api/2/auth_source/999999/update", url.Values{"port": {"389"}}, 404, "not_found", ""},
		{"an id that is no number", "/api/2/auth_source/x/import", nil, 404, "not_found", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := f.send(http.MethodPost, tc.path, admin, tc.form)
			wantError(t, st, b, tc.status, tc.code)
			if !strings.Contains(string(b), tc.desc) {
				t.Errorf("description does not name %q: %s", tc.desc, b)
			}
		})
	}
	// The password only in the body.
	st, b = f.send(http.MethodPost, srcPath+"/update?password=x", admin, nil)
	wantError(t, st, b, 400, "invalid_request")

	st, b = f.send(http.MethodPost, srcPath+"/update", admin, url.Values{"port": {""}, "ssl": {"false"}, "password": {"n3w"}})
	if st != http.StatusOK || !strings.Contains(string(b), `"port":null`) || strings.Contains(string(b), "n3w") {
		t.Fatalf("update: %d %s", st, b)
	}
	if a, _ := f.accounts.AuthSource(context.Background(), id); a.Password != "n3w" || a.EffectivePort() != 389 {
		t.Fatalf("stored %+v", a)
	}
	st, b = f.send(http.MethodGet, srcPath, admin, nil)
	if st != http.StatusOK || strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "n3w") {
		t.Fatalf("get: %d %s", st, b)
	}
	var list struct {
		Total   int              `json:"total"`
		Results []authSourceBody `json:"results"`
	}
	st, b = f.send(http.MethodGet, orgPath, admin, nil)
	decode(t, b, &list)
	if st != http.StatusOK || list.Total != 1 || len(list.Results) != 1 || list.Results[0].ID != id {
		t.Fatalf("list: %d %s", st, b)
	}
	// A server nobody answers at: 502 directory_error, saying so.
	st, b = f.send(http.MethodPost, srcPath+"/update", admin, url.Values{"host": {"127.0.0.1"}, "port": {"1"}})
	if st != http.StatusOK {
		t.Fatalf("update: %d %s", st, b)
	}
	st, b = f.send(http.MethodPost, srcPath+"/import", admin, nil)
	wantError(t, st, b, http.StatusBadGateway, "directory_error")
	if !strings.Contains(string(b), "could not be reached") {
		t.Errorf("import of an unreachable server: %s", b)
	}

	// ad_enabled off: no new source, no change, no import; list and delete stay.
	if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error { p.ADEnabled = false; return nil }); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{orgPath + "/create", srcPath + "/update", srcPath + "/import"} {
		st, b := f.send(http.MethodPost, path, admin, sourceForm())
		wantError(t, st, b, http.StatusForbidden, "forbidden")
		if !strings.Contains(string(b), "ad_enabled") {
			t.Errorf("%s: %s", path, b)
		}
	}
	if st, b := f.send(http.MethodGet, orgPath, admin, nil); st != http.StatusOK {
		t.Fatalf("list with ad_enabled off: %d %s", st, b)
	}
	if st, b := f.send(http.MethodPost, srcPath+"/delete", admin, nil); st != http.StatusOK || strings.TrimSpace(string(b)) != `{"status":"ok"}` {
		t.Fatalf("delete: %d %s", st, b)
	}
	if st, _ := f.send(http.MethodGet, srcPath, admin, nil); st != http.StatusNotFound {
		t.Fatalf("after delete: %d", st)
	}
}

// Imported persons sign in with the OAuth password grant by binding to
// a real slapd, over LDAP and LDAPS; a re-import follows a changed name
// and e-mail, and one gone from the directory can no longer sign in.
func TestAuthSourceSignIn(t *testing.T) {
	for _, ssl := range []bool{false, true} {
		name := "ldap"
		if ssl {
			name = "ldaps"
		}
		t.Run(name, func(t *testing.T) {
			srv := directorytest.Start(t)
			srv.Add(directorytest.User{UID: "mallory", GivenName: "Mal", SN: "Lory", Mail: "mal@example.org", Password: "dir-password-1"})
			srv.Add(directorytest.User{UID: "trent", GivenName: "Trent", SN: "Trusted", Mail: "trent@example.org", Password: "dir-password-2"})
			f, admin := adFixture(t, srv)
			port := srv.Port
			if ssl {
				port = srv.TLSPort
			}
			st, b := f.send(http.MethodPost, fmt.Sprintf("/api/2/organization/%d/auth_sources/create", f.org.ID), admin, url.Values{
				"host": {directorytest.Host}, "domain": {directorytest.Domain}, "login": {directorytest.AdminDN},
				"password": {directorytest.AdminPassword}, "port": {fmt.Sprint(port)}, "ssl": {fmt.Sprint(ssl)}})
			if st != http.StatusOK {
				t.Fatalf("create: %d %s", st, b)
			}
			var src authSourceBody
			decode(t, b, &src)
			importNow := func() importBody {
				t.Helper()
				st, b := f.send(http.MethodPost, fmt.Sprintf("/api/2/auth_source/%d/import", src.ID), admin, nil)
				if st != http.StatusOK {
					t.Fatalf("import: %d %s", st, b)
				}
				var rep importBody
				decode(t, b, &rep)
				return rep
			}
			if rep := importNow(); rep.Created != 2 || rep.Entries != 2 || rep.Type != "auth_source_import" {
				t.Fatalf("import: %+v", rep)
			}
			signIn := func(login, password string) (int, []byte) {
				return f.oauthPost("/oauth/token", url.Values{"grant_type": {"password"}, "client_id": {"anchor"},
					"username": {login}, "password": {password}})
			}
			st, b = signIn("mallory", "dir-password-1")
			if st != http.StatusOK {
				t.Fatalf("sign-in: %d %s", st, b)
			}
			var tok tokenResponse
			decode(t, b, &tok)
			st, b = f.personStatus(tok.AccessToken)
			var me struct {
				Email  string `json:"email"`
				RootID uint64 `json:"root_id"`
			}
			decode(t, b, &me)
			if st != http.StatusOK || me.Email != "mal@example.org" || me.RootID == 0 {
				t.Fatalf("the imported person: %d %s", st, b)
			}
			st, b = signIn("mallory", "wrong-password")
			wantError(t, st, b, http.StatusBadRequest, "invalid_grant")

			srv.Replace("mallory", map[string]string{"mail": "mallory@example.org", "givenName": "Mallory"})
			if rep := importNow(); rep.Updated != 1 || rep.Unchanged != 1 {
				t.Fatalf("re-import: %+v", rep)
			}
			st, b = signIn("mallory@example.org", "dir-password-1")
			if st != http.StatusOK {
				t.Fatalf("sign-in with the new e-mail: %d %s", st, b)
			}

			// Gone from the directory, trent's refresh is refused
			// at once, before any import, and disables him.
			st, b = signIn("trent", "dir-password-2")
			if st != http.StatusOK {
				t.Fatalf("trent's sign-in: %d %s", st, b)
			}
			decode(t, b, &tok)
			srv.Delete("trent")
			st, b = f.oauthPost("/oauth/token", url.Values{"grant_type": {"refresh_token"}, "client_id": {"anchor"}, "refresh_token": {tok.RefreshToken}})
			wantError(t, st, b, http.StatusBadRequest, "invalid_grant")
			if !strings.Contains(string(b), "disabled") {
				t.Errorf("trent's refresh once gone: %s", b)
			}
			if st, _ := f.personStatus(tok.AccessToken); st != http.StatusUnauthorized {
				t.Errorf("trent's access token once gone: %d, want 401", st)
			}
			if rep := importNow(); rep.Disabled != 0 || rep.Unchanged != 1 {
				t.Fatalf("the import after trent's refresh: %+v", rep)
			}
			if st, _ := signIn("trent", "dir-password-2"); st == http.StatusOK {
				t.Fatal("trent signed in after leaving the directory")
			}

			// A directory that does not answer: 502, the server not named.
			st, b = f.send(http.MethodPost, fmt.Sprintf("/api/2/auth_source/%d/update", src.ID), admin, url.Values{"port": {"1"}})
			if st != http.StatusOK {
				t.Fatalf("update: %d %s", st, b)
			}
			st, b = signIn("mallory", "dir-password-1")
			wantError(t, st, b, http.StatusBadGateway, "directory_error")
			if strings.Contains(string(b), directorytest.Host) || !strings.Contains(string(b), "did not answer") {
				t.Errorf("sign-in with the directory down: %s", b)
			}
		})
	}
}

// An import makes persons only where the administrators of the source's
// organization may create users (admin_create_users in the policy they
// act under): a child's administrator whom the parent withheld it from,
// refused person/create, set up a directory server and imported its
// entries as persons, in the child or in a grandchild of theirs that
// turns it on. Each row is a fresh organization below the fixture's
// (top-level) one and its administrator's source of one slapd; the
// directory's entries are made persons once, so the row that makes them
// comes last.
func TestAuthSourceAdminCreateUsers(t *testing.T) {
	srv := directorytest.Start(t)
	srv.Add(directorytest.User{UID: "ivan", SN: "Ivan", Mail: "ivan@example.org", Password: "dir-password-3"})
	srv.Add(directorytest.User{UID: "judy", SN: "Judy", Mail: "judy@example.org", Password: "dir-password-4"})
	f, _ := adFixture(t, srv)
	ctx := context.Background()
	org := func(parent uint64, createUsers bool) account.Organization {
		t.Helper()
		o, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: parent, Name: fmt.Sprintf("org below %d", parent)})
		if err != nil {
			t.Fatal(err)
		}
		o, err = f.accounts.UpdatePolicy(ctx, o.ID, func(p *account.Policy) error {
			p.ADEnabled, p.AdminCreateUsers = true, createUsers
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for i, tc := range []struct {
		name string
		// child: the child's admin_create_users; grandchild: the
		// source is a grandchild's that turns it on.
		child, grandchild bool
		// created by the import; persons in the source's organization
		// after it.
		created, persons int
	}{
		{"the child withholds it", false, false, 0, 1},
		{"a grandchild turns it on below a child that withholds it", false, true, 0, 0},
		{"the child allows it", true, false, 2, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			child := org(f.org.ID, tc.child)
			admin, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: child.ID, Username: fmt.Sprintf("childadmin%d", i),
				Email: fmt.Sprintf("childadmin%d@example.com", i), Password: fixturePassword, Admin: true})
			if err != nil {
				t.Fatal(err)
			}
			toks, err := f.accounts.IssueTokens(ctx, admin.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			tok := toks.AccessToken
			in := child
			if tc.grandchild {
				in = org(child.ID, true)
			}
			st, b := f.send(http.MethodPost, "/api/2/person/create", tok, url.Values{"company_id": {fmt.Sprint(in.ID)},
				"username": {fmt.Sprintf("direct%d", i)}, "email": {fmt.Sprintf("direct%d@example.com", i)}})
			if want := map[bool]int{false: 403, true: 200}[tc.created > 0]; st != want {
				t.Fatalf("person/create beside it: %d %s, want %d", st, b, want)
			}
			st, b = f.send(http.MethodPost, fmt.Sprintf("/api/2/organization/%d/auth_sources/create", in.ID), tok, url.Values{
				"host": {directorytest.Host}, "domain": {directorytest.Domain}, "login": {directorytest.AdminDN},
				"password": {directorytest.AdminPassword}, "port": {fmt.Sprint(srv.Port)}})
			if st != http.StatusOK {
				t.Fatalf("create: %d %s", st, b)
			}
			var src authSourceBody
			decode(t, b, &src)
			st, b = f.send(http.MethodPost, fmt.Sprintf("/api/2/auth_source/%d/import", src.ID), tok, nil)
			if st != http.StatusOK {
				t.Fatalf("import: %d %s", st, b)
			}
			var rep importBody
			decode(t, b, &rep)
			if rep.Created != tc.created || rep.Entries != 2 {
				t.Fatalf("import: %s, want %d created", b, tc.created)
			}
			if tc.created == 0 && !strings.Contains(strings.Join(rep.Skipped, "\n"), "admin_create_users") {
				t.Errorf("the skipped entries do not say why: %q", rep.Skipped)
			}
			_, total, err := f.accounts.Persons(ctx, in.ID, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.persons {
				t.Errorf("%d persons in the organization, want %d", total, tc.persons)
			}
		})
	}
}

// An import gives a sync root to each person it makes, and to each of
// the source's persons an earlier import made whose root was never made:
// a failed import (its persons made before it failed) or a kill between
// the import's commits and the roots left them without one, and the
// next import, which found them as its own, left them so for good.
func TestAuthSourceImportRoots(t *testing.T) {
	srv := directorytest.Start(t)
	srv.Add(directorytest.User{UID: "rita", GivenName: "Rita", SN: "Root", Mail: "rita@example.org", Password: "dir-password-1"})
	f, admin := adFixture(t, srv)
	ctx := context.Background()
	st, b := f.send(http.MethodPost, fmt.Sprintf("/api/2/organization/%d/auth_sources/create", f.org.ID), admin, url.Values{
		"host": {directorytest.Host}, "domain": {directorytest.Domain}, "login": {directorytest.AdminDN},
		"password": {directorytest.AdminPassword}, "port": {fmt.Sprint(srv.Port)}})
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, b)
	}
	var src authSourceBody
	decode(t, b, &src)
	// The import's commits without the step after them: what a kill
	// between the two leaves.
	rep, err := f.accounts.ImportAuthSource(ctx, src.ID)
	if err != nil || len(rep.Created) != 1 || rep.Created[0].RootID != 0 {
		t.Fatalf("import: %s, %v", rep, err)
	}
	st, b = f.send(http.MethodPost, fmt.Sprintf("/api/2/auth_source/%d/import", src.ID), admin, nil)
	if st != http.StatusOK {
		t.Fatalf("import: %d %s", st, b)
	}
	rita, err := f.accounts.Person(ctx, rep.Created[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if rita.RootID == 0 {
		t.Fatal("the next import left rita without a sync root")
	}
	if _, err := f.fs.Root(ctx, rita.RootID); err != nil {
		t.Fatalf("rita's root: %v", err)
	}
	// The first import's own step after it, late, while the second made
	// the root (rita as the first read her, rootless): no second root,
	// where NewRoot made her a second sync root.
	shares := share.New(share.Options{FS: f.fs, Accounts: f.accounts})
	if _, made, err := shares.FirstSyncRoot(ctx, rep.Created[0]); err != nil || made {
		t.Fatalf("the first import's late step: made %v, %v", made, err)
	}
	// Once made, no import makes another.
	st, b = f.send(http.MethodPost, fmt.Sprintf("/api/2/auth_source/%d/import", src.ID), admin, nil)
	if st != http.StatusOK {
		t.Fatalf("import: %d %s", st, b)
	}
	if again, _ := f.accounts.Person(ctx, rita.ID); again.RootID != rita.RootID {
		t.Fatalf("rita's root moved from %d to %d", rita.RootID, again.RootID)
	}
	roots, err := f.accounts.PersonRoots(ctx, rita)
	if err != nil || len(roots) != 1 {
		t.Fatalf("rita's roots: %v, %v", roots, err)
	}
}
