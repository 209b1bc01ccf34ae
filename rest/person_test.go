package rest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"berth/account"
	"berth/httpserve"
	"berth/vfs"
)

// personIDs matches the id fields of a person body, which depend on the
// order the fixture created things in.
var personIDs = regexp.MustCompile(`"(id|root_id|company_id)":\d+`)

func normalisePersonIDs(b []byte) []byte {
	return personIDs.ReplaceAll(b, []byte(`"$1":1`))
}

func TestPersonSelfGolden(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = "5000000000"
	pol.ExcludedExtensions = ".exe,.tmp"
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	ctx := context.Background()
	if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "a.txt", bytes.NewReader(make([]byte, 1500)), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	status, body := f.get("/api/2/person")
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	var p personBody
	decode(t, body, &p)
	if p.ID != f.person.ID || p.RootID == nil || *p.RootID != f.root.ID || p.CompanyID != f.org.ID ||
		len(p.Roots) != 1 || p.Roots[0].ID != f.root.ID || p.CompanyPolicy.CompanyID != f.org.ID {
		t.Fatalf("ids do not match the fixture: %s", body)
	}
	golden(t, "person.json", normalisePersonIDs(body))
}

func TestPersonByIDAndEmail(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	bob, _, bobToken := f.addPerson("bob")
	carol, _, carolToken := f.addPerson("carol")
	if _, err := f.accounts.UpdatePerson(ctx, carol.ID, func(p *account.Person) error {
		p.Admin = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// dave administers another organization.
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	dave, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.org", Password: fixturePassword, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	daveToks, err := f.accounts.IssueTokens(ctx, dave.ID, 0)
	if err != nil {
		t.Fatal(err)
	}

	id := func(p account.Person) string { return strconv.FormatUint(p.ID, 10) }
	for _, c := range []struct {
		name, token, ref string
		want             uint64 // 0: 404
	}{
		{"self by id", f.token, id(f.person), f.person.ID},
		{"self by e-mail", f.token, "alice@example.com", f.person.ID},
		{"self by e-mail, other case", f.token, "Alice@Example.COM", f.person.ID},
		{"self by escaped e-mail", f.token, "alice%40example.com", f.person.ID},
		{"another by id", f.token, id(bob), 0},
		{"another by e-mail", f.token, "bob@example.com", 0},
		{"no such id", f.token, "999999", 0},
		{"no such e-mail", f.token, "nobody@example.com", 0},
		{"username is not an e-mail", f.token, "bob", 0},
		{"not an integer", f.token, "1x", 0},
		{"negative", f.token, "-1", 0},
		{"too large", f.token, "18446744073709551616", 0},
		{"bob reads himself", bobToken, id(bob), bob.ID},
		{"admin reads a member by id", carolToken, id(bob), bob.ID},
		{"admin reads a member by e-mail", carolToken, "alice@example.com", f.person.ID},
		{"admin of another organization", daveToks.AccessToken, id(bob), 0},
		{"member does not read an admin", bobToken, id(carol), 0},
		{"member does not read another organization", f.token, id(dave), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.readAll(f.request(http.MethodGet, "/api/2/person/"+c.ref, c.token, nil, nil))
			if c.want == 0 {
				wantError(t, status, body, http.StatusNotFound, "not_found")
				return
			}
			var p personBody
			decode(t, body, &p)
			if status != http.StatusOK || p.ID != c.want || p.Type != "person" {
				t.Fatalf("%d %s, want person %d", status, body, c.want)
			}
		})
	}

	status, body := f.readAll(f.request(http.MethodGet, "/api/2/person/1", "", nil, nil))
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")
}

func TestPersonQuotaAndDeletedRoot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Default policy: no quota.
	_, body := f.get("/api/2/person")
	var p personBody
	decode(t, body, &p)
	if p.SpaceQuota != 0 || p.SpaceQuotaFormatted != "unlimited" || p.CompanyPolicy.SpaceQuota != "0" ||
		p.CompanyPolicy.SpaceQuotaFormatted != "unlimited" || p.SpaceUsage != 0 || p.SpaceUsageFormatted != "0 B" {
		t.Fatalf("unlimited quota: %s", body)
	}
	// The person's own quota wins over the organization's.
	if _, err := f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error {
		p.SpaceQuota = 2_500_000
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	_, body = f.get("/api/2/person")
	decode(t, body, &p)
	if p.SpaceQuota != 2_500_000 || p.SpaceQuotaFormatted != "2.5 MB" {
		t.Fatalf("person quota: %s", body)
	}
	// A deleted sync root is no longer listed.
	if err := f.fs.DeleteRoot(ctx, f.root.ID); err != nil {
		t.Fatal(err)
	}
	status, body := f.get("/api/2/person")
	if status != http.StatusOK || !strings.Contains(string(body), `"roots":[]`) {
		t.Fatalf("after deleting the root: %d %s", status, body)
	}
}

func TestFormatSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 KB", 1500: "1.5 KB", 999_949: "999.9 KB",
		999_950: "1.0 MB", 5_000_000_000: "5.0 GB", 1 << 62: "4.6 EB",
	} {
		if got := httpserve.FormatSize(n); got != want {
			t.Errorf("httpserve.FormatSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// member is a person of a tenancy test and an access token of theirs.
type member struct {
	p     account.Person
	token string
}

// tenants is the organization tree the access walks run over: Acme (the
// fixture's, top-level) holds Mid, which holds Kid; Globex is another
// top-level organization. The persons and guests acted on live in Mid.
type tenants struct {
	f                               *fixture
	mid, kid, other                 account.Organization
	parentAdmin, midAdmin, kidAdmin member
	plain, otherAdmin               member // plain: a person of Mid
	n                               int    // names made so far
}

func newTenants(t *testing.T, f *fixture) *tenants {
	t.Helper()
	ctx := context.Background()
	tn := &tenants{f: f}
	var err error
	if tn.mid, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Mid", ParentID: f.org.ID}); err != nil {
		t.Fatal(err)
	}
	if tn.kid, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Kid", ParentID: tn.mid.ID}); err != nil {
		t.Fatal(err)
	}
	if tn.other, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"}); err != nil {
		t.Fatal(err)
	}
	tn.parentAdmin = tn.person(f.org.ID, true)
	tn.midAdmin = tn.person(tn.mid.ID, true)
	tn.kidAdmin = tn.person(tn.kid.ID, true)
	tn.plain = tn.person(tn.mid.ID, false)
	tn.otherAdmin = tn.person(tn.other.ID, true)
	return tn
}

// name returns a fresh username.
func (tn *tenants) name() string {
	tn.n++
	return "user" + strconv.Itoa(tn.n)
}

// person creates a person of organization org with a sync root, and a token.
func (tn *tenants) person(org uint64, admin bool) member {
	tn.f.t.Helper()
	ctx := context.Background()
	name := tn.name()
	root, err := tn.f.fs.CreateRoot(ctx, name, vfs.RootSync)
	if err != nil {
		tn.f.t.Fatal(err)
	}
	p, err := tn.f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: name,
		Email: name + "@example.com", Password: fixturePassword, Admin: admin})
	if err != nil {
		tn.f.t.Fatal(err)
	}
	if _, err := tn.f.accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: p.ID, Type: "sync"}); err != nil {
		tn.f.t.Fatal(err)
	}
	if p, err = tn.f.accounts.Person(ctx, p.ID); err != nil {
		tn.f.t.Fatal(err)
	}
	toks, err := tn.f.accounts.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		tn.f.t.Fatal(err)
	}
	return member{p, toks.AccessToken}
}

// guest creates a guest of organization org, and a token.
func (tn *tenants) guest(org uint64) member {
	tn.f.t.Helper()
	ctx := context.Background()
	g, err := tn.f.accounts.CreateGuest(ctx, account.GuestInput{CreatorID: tn.parentAdmin.p.ID, OrganizationID: org,
		Email: tn.name() + "@guest.example", Password: fixturePassword})
	if err != nil {
		tn.f.t.Fatal(err)
	}
	toks, err := tn.f.accounts.IssueTokens(ctx, g.ID, 0)
	if err != nil {
		tn.f.t.Fatal(err)
	}
	return member{g, toks.AccessToken}
}

// accessRoute is one route of an access walk: path builds the request
// for a fresh target (a person of Mid, or a guest for guest routes), so
// routes that delete find one each time; want is the status each caller
// gets, in the order of accessCallers.
type accessRoute struct {
	method string
	path   func(target member) string
	form   func(tn *tenants) url.Values
	guest  bool
	want   [5]int
}

// accessCallers names the callers of an access walk, in want's order.
var accessCallers = [5]string{"no token", "another organization's administrator", "a plain person of the same organization",
	"an administrator of a child organization", "an administrator of the parent"}

func (tn *tenants) walk(t *testing.T, routes []accessRoute) {
	t.Helper()
	for _, rt := range routes {
		for i, who := range accessCallers {
			target := func() member {
				if rt.guest {
					return tn.guest(tn.mid.ID)
				}
				return tn.person(tn.mid.ID, false)
			}()
			token := [5]string{"", tn.otherAdmin.token, tn.plain.token, tn.kidAdmin.token, tn.parentAdmin.token}[i]
			var form url.Values
			if rt.form != nil {
				form = rt.form(tn)
			}
			path := rt.path(target)
			st, body := tn.f.send(rt.method, path, token, form)
			if st != rt.want[i] {
				t.Errorf("%s %s as %s: %d %s, want %d", rt.method, path, who, st, body, rt.want[i])
			}
		}
	}
}

func idPath(format string) func(member) string {
	return func(m member) string { return fmt.Sprintf(format, m.p.ID) }
}

// TestPersonRouteAccess walks every person route as each kind of caller
// (docs/api.md "Who may do what"): the parent's administrator does all,
// the child's administrator and another organization's see nothing
// (404), a plain person sees only themself.
func TestPersonRouteAccess(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	seeNothing := [5]int{401, 404, 404, 404, 200}
	create := func(tn *tenants) url.Values {
		n := tn.name()
		return url.Values{"company_id": {strconv.FormatUint(tn.mid.ID, 10)}, "username": {n}, "email": {n + "@example.com"}, "password": {fixturePassword}}
	}
	tn.walk(t, []accessRoute{
		{method: "GET", path: idPath("/api/2/person/%d"), want: seeNothing},
		{method: "GET", path: func(m member) string { return "/api/2/person/" + m.p.Email }, want: seeNothing},
		{method: "POST", path: func(member) string { return "/api/2/person/create" }, form: create, want: [5]int{401, 404, 403, 404, 200}},
		{method: "POST", path: idPath("/api/2/person/%d/update"), form: func(*tenants) url.Values { return url.Values{"first_name": {"X"}} }, want: seeNothing},
		{method: "POST", path: idPath("/api/2/person/%d/update"), form: func(*tenants) url.Values { return url.Values{"space_quota": {"5"}} }, want: seeNothing},
		{method: "POST", path: idPath("/api/2/person/%d/roots/create"), want: seeNothing},
		{method: "POST", path: idPath("/api/2/person/%d/unlock"), want: seeNothing},
		{method: "POST", path: idPath("/api/2/person/%d/delete"), want: seeNothing},
		{method: "GET", path: func(member) string { return fmt.Sprintf("/api/2/organization/%d/persons", tn.mid.ID) }, want: [5]int{401, 404, 403, 404, 200}},
	})
}

// TestPersonCreate checks the created person and every bad input.
func TestPersonCreate(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	admin := tn.parentAdmin.token
	mid := strconv.FormatUint(tn.mid.ID, 10)
	st, body := f.send("POST", "/api/2/person/create", admin, url.Values{"company_id": {mid}, "username": {"erin"},
		"email": {"erin@example.com"}, "first_name": {"Erin"}, "last_name": {"Ek"}, "password": {fixturePassword},
		"admin": {"true"}, "space_quota": {"1000000"}})
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var p personBody
	decode(t, body, &p)
	if p.ID == 0 || p.CompanyID != tn.mid.ID || p.Username != "erin" || p.DisplayName != "Erin Ek" || p.SpaceQuota != 1000000 ||
		p.RootID == nil || len(p.Roots) != 1 || p.Roots[0].ID != *p.RootID || p.Roots[0].RootType != "sync" ||
		p.Roots[0].Name != "erin" || p.CompanyPolicy.CompanyID != tn.mid.ID || p.Type != "person" {
		t.Fatalf("created %s", body)
	}
	// The person's own token reaches the new root as its owner.
	tr := f.grant(passwordForm("username", "erin"))
	if st, body := f.send("GET", fmt.Sprintf("/api/2/files/%d", *p.RootID), tr.AccessToken, nil); st != 200 {
		t.Fatalf("new root: %d %s", st, body)
	}

	// Without company_id the person joins the caller's organization.
	st, body = f.send("POST", "/api/2/person/create", tn.midAdmin.token, url.Values{"username": {"finn"}, "email": {"finn@example.com"}, "password": {fixturePassword}})
	decode(t, body, &p)
	if st != 200 || p.CompanyID != tn.mid.ID {
		t.Fatalf("default company: %d %s", st, body)
	}

	valid := func(kv ...string) url.Values {
		v := url.Values{"company_id": {mid}, "username": {"gina"}, "email": {"gina@example.com"}, "password": {fixturePassword}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "-" {
				v.Del(kv[i])
			} else {
				v.Set(kv[i], kv[i+1])
			}
		}
		return v
	}
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no username", valid("username", "-"), 400, "invalid_request"},
		{"no e-mail", valid("email", "-"), 400, "invalid_request"},
		{"bad e-mail", valid("email", "gina"), 400, "invalid_request"},
		{"space in username", valid("username", "gi na"), 400, "invalid_request"},
		{"short password", valid("password", "short"), 400, "invalid_request"},
		{"empty password", valid("password", ""), 400, "invalid_request"},
		{"username taken", valid("username", "ERIN"), 409, "name_conflict"},
		{"e-mail taken", valid("email", "erin@example.com"), 409, "name_conflict"},
		{"company_id not a number", valid("company_id", "x"), 400, "invalid_request"},
		{"company_id of nobody", valid("company_id", "99999"), 404, "not_found"},
		{"admin not a boolean", valid("admin", "yes please"), 400, "invalid_request"},
		{"negative quota", valid("space_quota", "-1"), 400, "invalid_request"},
		{"quota not a number", valid("space_quota", "1GB"), 400, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, body := f.send("POST", "/api/2/person/create", admin, c.form)
			wantError(t, st, body, c.status, c.code)
		})
	}
}

// A person created without a password cannot log in until an
// administrator sets one.
func TestPersonCreateWithoutPassword(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	st, body := f.send("POST", "/api/2/person/create", tn.midAdmin.token, url.Values{"username": {"hal"}, "email": {"hal@example.com"}})
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var p personBody
	decode(t, body, &p)
	st, body = f.oauthPost("/oauth/token", passwordForm("username", "hal", "password", "anything at all"))
	wantError(t, st, body, 400, "invalid_grant")
	st, body = f.send("POST", fmt.Sprintf("/api/2/person/%d/update", p.ID), tn.midAdmin.token, url.Values{"password": {fixturePassword}})
	if st != 200 {
		t.Fatalf("set password: %d %s", st, body)
	}
	f.grant(passwordForm("username", "hal"))
}

// A parent's num_users_maximum bounds the persons of its whole subtree.
func TestPersonUserLimit(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	ctx := context.Background()
	_, sub, err := f.accounts.Counts(ctx, f.org.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.NumUsersMaximum = sub.Accounts + 1; return nil }); err != nil {
		t.Fatal(err)
	}
	kid := strconv.FormatUint(tn.kid.ID, 10)
	form := func(n string) url.Values {
		return url.Values{"company_id": {kid}, "username": {n}, "email": {n + "@example.com"}, "password": {fixturePassword}}
	}
	if st, body := f.send("POST", "/api/2/person/create", tn.kidAdmin.token, form("ivy")); st != 200 {
		t.Fatalf("the last place: %d %s", st, body)
	}
	st, body := f.send("POST", "/api/2/person/create", tn.kidAdmin.token, form("jon"))
	wantError(t, st, body, 409, "user_limit_exceeded")
	// A guest is not a user: it still fits.
	st, body = f.send("POST", "/api/2/guest/create", tn.kidAdmin.token, url.Values{"email": {"kim@guest.example"}, "password": {fixturePassword}})
	if st != 200 {
		t.Fatalf("guest at the limit: %d %s", st, body)
	}
}

// TestPersonUpdate covers who changes what, and how a password changes.
func TestPersonUpdate(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	upd := func(m member, token string, kv ...string) (int, []byte) {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return f.send("POST", fmt.Sprintf("/api/2/person/%d/update", m.p.ID), token, v)
	}
	me := tn.plain
	st, body := upd(me, me.token, "first_name", "Pat", "last_name", "Lee")
	var p personBody
	decode(t, body, &p)
	if st != 200 || p.FirstName != "Pat" || p.DisplayName != "Pat Lee" {
		t.Fatalf("names: %d %s", st, body)
	}
	for _, c := range []struct {
		name   string
		token  string
		kv     []string
		status int
		code   string
	}{
		{"own quota", me.token, []string{"space_quota", "1"}, 403, "forbidden"},
		{"own admin flag", me.token, []string{"admin", "true"}, 403, "forbidden"},
		{"own password without the current one", me.token, []string{"password", "a new password!"}, 400, "invalid_request"},
		{"own password, wrong current one", me.token, []string{"password", "a new password!", "current_password", "wrong guess"}, 403, "forbidden"},
		{"short password", me.token, []string{"password", "short", "current_password", fixturePassword}, 400, "invalid_request"},
		{"company_id", tn.parentAdmin.token, []string{"company_id", strconv.FormatUint(f.org.ID, 10)}, 400, "invalid_request"},
		{"username taken", me.token, []string{"username", tn.midAdmin.p.Username}, 409, "name_conflict"},
		{"bad e-mail", me.token, []string{"email", "nope", "current_password", fixturePassword}, 400, "invalid_request"},
		// The e-mail address is a login and where e-mail sign-in codes
		// go: a token alone does not move it.
		{"own e-mail without the current password", me.token, []string{"email", "thief@elsewhere.example"}, 400, "invalid_request"},
		{"own e-mail, wrong current password", me.token, []string{"email", "thief@elsewhere.example", "current_password", "wrong guess"}, 403, "forbidden"},
		{"active not a boolean", tn.parentAdmin.token, []string{"active", "maybe"}, 400, "invalid_request"},
		{"administrator drops their own flag", tn.midAdmin.token, []string{"admin", "false"}, 403, "forbidden"},
		{"administrator disables themself", tn.midAdmin.token, []string{"active", "false"}, 403, "forbidden"},
		{"bad id", me.token, nil, 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			target := me
			if strings.HasPrefix(c.name, "administrator") {
				target = tn.midAdmin
			}
			path := fmt.Sprintf("/api/2/person/%d/update", target.p.ID)
			if c.name == "bad id" {
				path = "/api/2/person/0x1/update"
			}
			v := url.Values{}
			for i := 0; i+1 < len(c.kv); i += 2 {
				v.Set(c.kv[i], c.kv[i+1])
			}
			st, body := f.send("POST", path, c.token, v)
			wantError(t, st, body, c.status, c.code)
		})
	}
	// With the current password, or by an administrator, it moves.
	if st, body := upd(me, me.token, "email", "pat@new.example", "current_password", fixturePassword); st != 200 {
		t.Fatalf("own e-mail with the current password: %d %s", st, body)
	}
	if st, body := upd(me, tn.midAdmin.token, "email", "pat@newer.example"); st != 200 {
		t.Fatalf("an administrator sets the e-mail: %d %s", st, body)
	}
	// A password in the URL is refused, whoever sends it.
	st, body = f.send("POST", fmt.Sprintf("/api/2/person/%d/update?password=in+the+url+is+bad", me.p.ID), tn.midAdmin.token, nil)
	wantError(t, st, body, 400, "invalid_request")
	st, body = f.send("POST", "/api/2/guest/create?password=in+the+url+is+bad", tn.midAdmin.token, url.Values{"email": {"q@guest.example"}})
	wantError(t, st, body, 400, "invalid_request")
	// An administrator sets quota, flags and another's password.
	st, body = upd(me, tn.midAdmin.token, "space_quota", "2000000", "admin", "true", "password", "set by the admin")
	decode(t, body, &p)
	if st != 200 || p.SpaceQuota != 2000000 {
		t.Fatalf("admin update: %d %s", st, body)
	}
	if st, _ := f.personStatus(me.token); st != 401 {
		t.Fatalf("a reset password left the old session alive: %d", st)
	}
	tr := f.grant(passwordForm("username", me.p.Username, "password", "set by the admin"))
	// The person changes their own with the current one; the session ends.
	st, body = upd(me, tr.AccessToken, "password", "my very own one", "current_password", "set by the admin")
	if st != 200 {
		t.Fatalf("own password: %d %s", st, body)
	}
	if st, _ := f.personStatus(tr.AccessToken); st != 401 {
		t.Fatalf("a changed password left the session alive: %d", st)
	}
	tr = f.grant(passwordForm("username", me.p.Username, "password", "my very own one"))
	// Disabled by an administrator: refused at the next request.
	if st, body := upd(me, tn.parentAdmin.token, "active", "false"); st != 200 {
		t.Fatalf("disable: %d %s", st, body)
	}
	if st, _ := f.personStatus(tr.AccessToken); st != 401 {
		t.Fatalf("a disabled person's token still works: %d", st)
	}
}

// Deleting a person ends their tokens at once, and their root answers
// 410 to an administrator who may browse it.
func TestPersonDelete(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	ctx := context.Background()
	if _, err := f.accounts.UpdatePolicy(ctx, tn.mid.ID, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
		t.Fatal(err)
	}
	victim := tn.person(tn.mid.ID, false)
	rootPath := fmt.Sprintf("/api/2/files/%d", victim.p.RootID)
	if st, body := f.send("GET", rootPath, tn.parentAdmin.token, nil); st != 200 {
		t.Fatalf("browse before delete: %d %s", st, body)
	}
	st, body := f.send("POST", fmt.Sprintf("/api/2/person/%d/delete", victim.p.ID), tn.midAdmin.token, nil)
	if st != 200 || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, _ := f.personStatus(victim.token); st != 401 {
		t.Fatalf("token after delete: %d", st)
	}
	st, body = f.send("GET", rootPath, tn.parentAdmin.token, nil)
	wantError(t, st, body, 410, "root_deleted")
	st, body = f.send("GET", fmt.Sprintf("/api/2/person/%d", victim.p.ID), tn.parentAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")
	st, body = f.oauthPost("/oauth/token", passwordForm("username", victim.p.Username))
	wantError(t, st, body, 400, "invalid_grant")
	// Nobody deletes their own account.
	st, body = f.send("POST", fmt.Sprintf("/api/2/person/%d/delete", tn.midAdmin.p.ID), tn.midAdmin.token, nil)
	wantError(t, st, body, 403, "forbidden")
}

// roots/create makes a sync root when there is none, and returns it when
// there is.
func TestPersonRootsCreate(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	ctx := context.Background()
	p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: tn.mid.ID, Username: "ned", Email: "ned@example.com", Password: fixturePassword})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/api/2/person/%d/roots/create", p.ID)
	var r1, r2, r3 rootJSON
	st, body := f.send("POST", path, toks.AccessToken, nil)
	decode(t, body, &r1)
	if st != 200 || r1.ID == 0 || r1.RootType != "sync" || r1.Type != "root" || len(r1.Permissions) != 3 {
		t.Fatalf("create: %d %s", st, body)
	}
	st, body = f.send("POST", path, tn.midAdmin.token, nil)
	decode(t, body, &r2)
	if st != 200 || r2.ID != r1.ID || len(r2.Permissions) != 0 {
		t.Fatalf("again, by an administrator: %d %s", st, body)
	}
	if err := f.fs.DeleteRoot(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	st, body = f.send("POST", path, toks.AccessToken, nil)
	decode(t, body, &r3)
	if st != 200 || r3.ID == r1.ID {
		t.Fatalf("after the root was deleted: %d %s", st, body)
	}
	_, body = f.personStatus(toks.AccessToken)
	var pb personBody
	decode(t, body, &pb)
	if pb.RootID == nil || *pb.RootID != r3.ID || len(pb.Roots) != 1 {
		t.Fatalf("person after a new root: %s", body)
	}
}

// An administrator unlocks an account that failed logins locked.
func TestPersonUnlock(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	m := tn.plain
	var st int
	var body []byte
	for range 20 {
		st, body = f.oauthPost("/oauth/token", passwordForm("username", m.p.Username, "password", "wrong wrong wrong"))
		if st == 403 {
			break
		}
	}
	wantError(t, st, body, 403, "account_locked")
	st, body = f.personStatus(m.token)
	wantError(t, st, body, 403, "account_locked")
	if st, body := f.send("POST", fmt.Sprintf("/api/2/person/%d/unlock", m.p.ID), tn.midAdmin.token, nil); st != 200 {
		t.Fatalf("unlock: %d %s", st, body)
	}
	if st, body := f.personStatus(m.token); st != 200 {
		t.Fatalf("token after unlock: %d %s", st, body)
	}
	f.grant(passwordForm("username", m.p.Username))
}

// An organization's persons come in pages, with the policy of the
// person's own organization.
func TestOrganizationPersons(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	for range 3 {
		tn.person(tn.mid.ID, false)
	}
	var pb pagedBody[personBody]
	st, body := f.send("GET", fmt.Sprintf("/api/2/organization/%d/persons?offset=1&limit=2", tn.mid.ID), tn.parentAdmin.token, nil)
	decode(t, body, &pb)
	// Mid holds its administrator, the plain person and three more.
	if st != 200 || pb.Total != 5 || pb.Offset != 1 || len(pb.Results) != 2 || pb.Results[0].ID != tn.plain.p.ID ||
		pb.Results[0].CompanyPolicy.CompanyID != tn.mid.ID {
		t.Fatalf("page: %d %s", st, body)
	}
	for _, q := range []string{"?limit=101", "?offset=-1", "?limit=x"} {
		st, body := f.send("GET", fmt.Sprintf("/api/2/organization/%d/persons%s", tn.mid.ID, q), tn.parentAdmin.token, nil)
		wantError(t, st, body, 400, "invalid_request")
	}
	st, body = f.send("GET", "/api/2/organization/x/persons", tn.parentAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")
}

// BenchmarkOrganizationPersonsPage measures a full page (100 persons,
// each with a sync root) of GET /api/2/organization/<id>/persons, as an
// administrator above the organization sees it.
func BenchmarkOrganizationPersonsPage(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
		b.Fatal(err)
	}
	for i := range MaxPageSize {
		f.addPerson(fmt.Sprintf("p%03d", i))
	}
	admin := f.personToken(account.PersonInput{OrganizationID: f.org.ID, Username: "boss", Email: "boss@example.com",
		Password: fixturePassword, Admin: true})
	path := fmt.Sprintf("/api/2/organization/%d/persons", f.org.ID)
	b.ResetTimer()
	for b.Loop() {
		if st, body := f.send("GET", path, admin, nil); st != 200 {
			b.Fatalf("%d %s", st, body)
		}
	}
}

// BenchmarkOrganizationPersonsPageShares is BenchmarkOrganizationPersonsPage
// where every person is in 50 groups and reaches 20 organization shares
// through one of them: each person object lists the shares among its
// roots, so the page reads 2,000 roots' access and usage.
func BenchmarkOrganizationPersonsPageShares(b *testing.B) {
	const groups, shares = 50, 20
	f := newFixture(b)
	ctx := context.Background()
	ids := make([]uint64, 0, MaxPageSize)
	for i := range MaxPageSize {
		p, _, _ := f.addPerson(fmt.Sprintf("p%03d", i))
		ids = append(ids, p.ID)
	}
	admin := f.personToken(account.PersonInput{OrganizationID: f.org.ID, Username: "boss", Email: "boss@example.com",
		Password: fixturePassword, Admin: true})
	var everyone uint64
	for i := range groups {
		g, err := f.accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: f.org.ID, Name: fmt.Sprint("g", i)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: ids}); err != nil {
			b.Fatal(err)
		}
		everyone = g.ID
	}
	for i := range shares {
		st, body := f.postAs(admin, fmt.Sprintf("/api/2/organization/%d/shares/create", f.org.ID), url.Values{"name": {fmt.Sprint("s", i)}})
		if st != 200 {
			b.Fatalf("shares/create: %d %s", st, body)
		}
		var r struct{ ID uint64 }
		decode(b, body, &r)
		subs := url.Values{"group_subscribers": {fmt.Sprintf(`[[%d,"web","VIEWER"]]`, everyone)}}
		if st, body := f.postAs(admin, fmt.Sprintf("/api/2/organization/%d/share/%d/subscribers/update", f.org.ID, r.ID), subs); st != 200 {
			b.Fatalf("subscribers/update: %d %s", st, body)
		}
	}
	path := fmt.Sprintf("/api/2/organization/%d/persons", f.org.ID)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if st, body := f.send("GET", path, admin, nil); st != 200 || !bytes.Contains(body, []byte(`"s19"`)) {
			b.Fatalf("%d %.200s", st, body)
		}
	}
}

// TestPersonPolicyChain: a person object's company_policy and can_share
// are the policy the person acts under (their organization's tightened by
// every ancestor's), whoever asks and by whichever route. An
// administrator above saw a child's person with the child's own policy:
// sharing allowed and no excluded extensions, where the parent withheld
// sharing and excluded .exe, while the person, asking, saw the truth.
func TestPersonPolicyChain(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error {
		p.UserCreateShares = false
		p.ExcludedExtensions = ".exe"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	one := func(body []byte) personBody {
		var p personBody
		decode(t, body, &p)
		return p
	}
	page := func(body []byte) personBody {
		var pb pagedBody[personBody]
		decode(t, body, &pb)
		for _, p := range pb.Results {
			if p.ID == tn.plain.p.ID {
				return p
			}
		}
		t.Fatalf("the person is not on the page: %s", body)
		return personBody{}
	}
	for _, tc := range []struct {
		name, path string
		asker      member
		read       func([]byte) personBody
	}{
		{"the person, of themselves", "/api/2/person", tn.plain, one},
		{"the parent's administrator, by id", fmt.Sprintf("/api/2/person/%d", tn.plain.p.ID), tn.parentAdmin, one},
		{"the organization's administrator, by id", fmt.Sprintf("/api/2/person/%d", tn.plain.p.ID), tn.midAdmin, one},
		{"the parent's administrator, the organization's persons", fmt.Sprintf("/api/2/organization/%d/persons", tn.mid.ID), tn.parentAdmin, page},
		{"the organization's administrator, its persons", fmt.Sprintf("/api/2/organization/%d/persons", tn.mid.ID), tn.midAdmin, page},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := f.send("GET", tc.path, tc.asker.token, nil)
			if st != 200 {
				t.Fatalf("%d %s", st, body)
			}
			p := tc.read(body)
			if p.CanShare || p.CompanyPolicy.UserCreateShares || !strings.Contains(p.CompanyPolicy.ExcludedExtensions, ".exe") ||
				p.CompanyPolicy.CompanyID != tn.mid.ID {
				t.Errorf("can_share %v, company_policy %+v: want the parent's limits, in Mid's policy", p.CanShare, p.CompanyPolicy)
			}
		})
	}
}
