package rest

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"testing"

	"berth/account"
)

// TestGuestRouteAccess walks every guest route as each kind of caller. A
// plain person of the organization creates guests there while its policy
// lets persons share (user_create_shares, on by default), and manages
// none.
func TestGuestRouteAccess(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	seeNothing := [5]int{401, 404, 404, 404, 200}
	create := func(tn *tenants) url.Values {
		return url.Values{"company_id": {strconv.FormatUint(tn.mid.ID, 10)}, "email": {tn.name() + "@guest.example"}, "password": {fixturePassword}}
	}
	tn.walk(t, []accessRoute{
		{method: "GET", path: idPath("/api/2/guest/%d"), guest: true, want: seeNothing},
		{method: "GET", path: func(m member) string { return "/api/2/guest/" + m.p.Email }, guest: true, want: seeNothing},
		{method: "POST", path: func(member) string { return "/api/2/guest/create" }, form: create, want: [5]int{401, 404, 200, 404, 200}},
		{method: "POST", path: idPath("/api/2/guest/%d/update"), guest: true, form: func(*tenants) url.Values { return url.Values{"first_name": {"X"}} }, want: seeNothing},
		{method: "POST", path: idPath("/api/2/guest/%d/delete"), guest: true, want: seeNothing},
		{method: "POST", path: idPath("/api/2/guest/%d/convert"), guest: true, want: seeNothing},
		{method: "GET", path: func(member) string { return fmt.Sprintf("/api/2/organization/%d/guests", tn.mid.ID) }, want: [5]int{401, 404, 403, 404, 200}},
	})
}

var guestCreated = regexp.MustCompile(`"created":"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"`)

// TestGuestObject pins the guest object of spec 2.10 and the bad inputs
// of create.
func TestGuestObject(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	st, body := f.send("POST", "/api/2/guest/create", tn.plain.token, url.Values{"email": {"Gail@Partner.example"},
		"first_name": {"Gail"}, "last_name": {"Gee"}, "password": {fixturePassword}})
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var g guestBody
	decode(t, body, &g)
	want := fmt.Sprintf(`{"id":%d,"company_id":%d,"creator_id":%d,"email":"Gail@Partner.example","first_name":"Gail","last_name":"Gee","active":true,"created":"X","type":"guest"}`,
		g.ID, tn.mid.ID, tn.plain.p.ID)
	if got := guestCreated.ReplaceAllString(string(body), `"created":"X"`); got != want+"\n" && got != want {
		t.Fatalf("guest object\ngot  %s\nwant %s", got, want)
	}
	// Read back by id and by e-mail (any case).
	for _, ref := range []string{strconv.FormatUint(g.ID, 10), "gail@partner.example"} {
		if st, body := f.send("GET", "/api/2/guest/"+ref, tn.midAdmin.token, nil); st != 200 {
			t.Fatalf("get %s: %d %s", ref, st, body)
		}
	}
	valid := func(k, v string) url.Values {
		f := url.Values{"email": {"hugo@partner.example"}, "password": {fixturePassword}}
		if v == "-" {
			f.Del(k)
		} else {
			f.Set(k, v)
		}
		return f
	}
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no e-mail", valid("email", "-"), 400, "invalid_request"},
		{"bad e-mail", valid("email", "hugo"), 400, "invalid_request"},
		{"short password", valid("password", "short"), 400, "invalid_request"},
		{"e-mail taken by a guest", valid("email", "GAIL@partner.example"), 409, "name_conflict"},
		{"e-mail taken by a person", valid("email", tn.plain.p.Email), 409, "name_conflict"},
		{"company_id not a number", valid("company_id", "one"), 400, "invalid_request"},
		{"company_id of nobody", valid("company_id", "99999"), 404, "not_found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, body := f.send("POST", "/api/2/guest/create", tn.midAdmin.token, c.form)
			wantError(t, st, body, c.status, c.code)
		})
	}
	// A person's id is not a guest's, nor a guest's a person's.
	st, body = f.send("GET", fmt.Sprintf("/api/2/guest/%d", tn.plain.p.ID), tn.parentAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")
	st, body = f.send("GET", fmt.Sprintf("/api/2/person/%d", g.ID), tn.parentAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")
	st, body = f.send("POST", fmt.Sprintf("/api/2/person/%d/delete", g.ID), tn.parentAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")

	// With user_create_shares off above Mid (Acme's), Mid's persons
	// create no guests either: they act under Mid's policy tightened by
	// Acme's, where Mid's own alone let them.
	setShares := func(org uint64, on bool) {
		t.Helper()
		if _, err := f.accounts.UpdatePolicy(context.Background(), org, func(p *account.Policy) error { p.UserCreateShares = on; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	setShares(f.org.ID, false)
	st, body = f.send("POST", "/api/2/guest/create", tn.plain.token, valid("email", "jo@partner.example"))
	wantError(t, st, body, 403, "forbidden")
	setShares(f.org.ID, true)

	// With user_create_shares off, persons create no guests; administrators do.
	if _, err := f.accounts.UpdatePolicy(context.Background(), tn.mid.ID, func(p *account.Policy) error { p.UserCreateShares = false; return nil }); err != nil {
		t.Fatal(err)
	}
	st, body = f.send("POST", "/api/2/guest/create", tn.plain.token, valid("email", "ines@partner.example"))
	wantError(t, st, body, 403, "forbidden")
	if st, body := f.send("POST", "/api/2/guest/create", tn.midAdmin.token, valid("email", "ines@partner.example")); st != 200 {
		t.Fatalf("administrator: %d %s", st, body)
	}
}

// A guest logs in with the password grant, is itself at GET /api/2/person,
// reaches no root and uses no route meant for persons.
func TestGuestSession(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	g := tn.guest(tn.mid.ID)
	tr := f.grant(passwordForm("username", g.p.Email))
	st, body := f.personStatus(tr.AccessToken)
	var gb guestBody
	decode(t, body, &gb)
	if st != 200 || gb.ID != g.p.ID || gb.Type != "guest" {
		t.Fatalf("GET /api/2/person as a guest: %d %s", st, body)
	}
	for _, c := range []struct {
		method, path string
		form         url.Values
		status       int
		code         string
	}{
		{"GET", fmt.Sprintf("/api/2/files/%d", tn.plain.p.RootID), nil, 404, "not_found"},
		{"GET", fmt.Sprintf("/api/2/files/%d", f.root.ID), nil, 404, "not_found"},
		{"GET", "/api/2/files/0", nil, 404, "not_found"},
		{"GET", fmt.Sprintf("/api/2/person/%d", g.p.ID), nil, 404, "not_found"},
		{"GET", fmt.Sprintf("/api/2/person/%d", tn.plain.p.ID), nil, 404, "not_found"},
		{"POST", fmt.Sprintf("/api/2/person/%d/roots/create", g.p.ID), nil, 404, "not_found"},
		{"POST", "/api/2/person/create", url.Values{"username": {"x"}, "email": {"x@example.com"}}, 403, "forbidden"},
		{"POST", "/api/2/guest/create", url.Values{"email": {"y@example.com"}}, 403, "forbidden"},
		{"GET", fmt.Sprintf("/api/2/organization/%d/persons", tn.mid.ID), nil, 403, "forbidden"},
		{"GET", fmt.Sprintf("/api/2/organization/%d/guests", tn.mid.ID), nil, 403, "forbidden"},
		{"POST", fmt.Sprintf("/api/2/guest/%d/convert", g.p.ID), nil, 403, "forbidden"},
		{"POST", fmt.Sprintf("/api/2/guest/%d/update", g.p.ID), url.Values{"active": {"false"}}, 403, "forbidden"},
	} {
		st, body := f.send(c.method, c.path, tr.AccessToken, c.form)
		if st != c.status {
			t.Errorf("%s %s as a guest: %d %s, want %d", c.method, c.path, st, body, c.status)
			continue
		}
		wantError(t, st, body, c.status, c.code)
	}
	// The guest reads and renames itself, and changes its password with the current one.
	if st, body := f.send("GET", fmt.Sprintf("/api/2/guest/%d", g.p.ID), tr.AccessToken, nil); st != 200 {
		t.Fatalf("guest reads itself: %d %s", st, body)
	}
	st, body = f.send("POST", fmt.Sprintf("/api/2/guest/%d/update", g.p.ID), tr.AccessToken, url.Values{"first_name": {"Gus"}, "username": {"gus"}})
	wantError(t, st, body, 400, "invalid_request")
	st, body = f.send("POST", fmt.Sprintf("/api/2/guest/%d/update", g.p.ID), tr.AccessToken, url.Values{"first_name": {"Gus"},
		"email": {"gus@new.example"}, "password": {"a new guest password"}, "current_password": {fixturePassword}})
	decode(t, body, &gb)
	if st != 200 || gb.FirstName != "Gus" || gb.Email != "gus@new.example" {
		t.Fatalf("guest updates itself: %d %s", st, body)
	}
	f.grant(passwordForm("username", "gus@new.example", "password", "a new guest password"))

	// Deleted, its sessions end.
	tr = f.grant(passwordForm("username", "gus@new.example", "password", "a new guest password"))
	if st, body := f.send("POST", fmt.Sprintf("/api/2/guest/%d/delete", g.p.ID), tn.midAdmin.token, nil); st != 200 {
		t.Fatalf("delete: %d %s", st, body)
	}
	if st, _ := f.personStatus(tr.AccessToken); st != 401 {
		t.Fatalf("guest token after delete: %d", st)
	}
}

// Converting a guest keeps its id and session, gives it a sync root, and
// is refused at the user limit.
func TestGuestConvert(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	ctx := context.Background()
	g := tn.guest(tn.mid.ID)
	st, body := f.send("POST", fmt.Sprintf("/api/2/guest/%d/convert", g.p.ID), tn.midAdmin.token, nil)
	var p personBody
	decode(t, body, &p)
	if st != 200 || p.ID != g.p.ID || p.Type != "person" || p.Username != g.p.Email || p.RootID == nil || len(p.Roots) != 1 {
		t.Fatalf("convert: %d %s", st, body)
	}
	// The guest's session goes on as the person's, and reaches the new root.
	if st, body := f.send("GET", fmt.Sprintf("/api/2/files/%d", *p.RootID), g.token, nil); st != 200 {
		t.Fatalf("new root with the guest's token: %d %s", st, body)
	}
	st, body = f.send("GET", fmt.Sprintf("/api/2/guest/%d", g.p.ID), tn.midAdmin.token, nil)
	wantError(t, st, body, 404, "not_found")

	// At the parent's limit a conversion is refused and the guest stays one.
	_, sub, err := f.accounts.Counts(ctx, f.org.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.NumUsersMaximum = sub.Accounts; return nil }); err != nil {
		t.Fatal(err)
	}
	g2 := tn.guest(tn.kid.ID)
	st, body = f.send("POST", fmt.Sprintf("/api/2/guest/%d/convert", g2.p.ID), tn.kidAdmin.token, nil)
	wantError(t, st, body, 409, "user_limit_exceeded")
	if st, body := f.send("GET", fmt.Sprintf("/api/2/guest/%d", g2.p.ID), tn.kidAdmin.token, nil); st != 200 {
		t.Fatalf("guest after a refused conversion: %d %s", st, body)
	}
}

// An organization's guests come in pages, apart from its persons.
func TestOrganizationGuests(t *testing.T) {
	f := newFixture(t)
	tn := newTenants(t, f)
	var ids []uint64
	for range 3 {
		ids = append(ids, tn.guest(tn.mid.ID).p.ID)
	}
	var pb pagedBody[guestBody]
	st, body := f.send("GET", fmt.Sprintf("/api/2/organization/%d/guests?offset=2", tn.mid.ID), tn.midAdmin.token, nil)
	decode(t, body, &pb)
	if st != 200 || pb.Total != 3 || pb.Offset != 2 || len(pb.Results) != 1 || pb.Results[0].ID != ids[2] || pb.Results[0].Type != "guest" {
		t.Fatalf("page: %d %s", st, body)
	}
	st, body = f.send("GET", fmt.Sprintf("/api/2/organization/%d/guests", tn.kid.ID), tn.midAdmin.token, nil)
	decode(t, body, &pb)
	if st != 200 || pb.Total != 0 || pb.Results == nil {
		t.Fatalf("empty page: %d %s", st, body)
	}
}
