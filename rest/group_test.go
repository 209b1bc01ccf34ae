package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"berth/account"
)

// groupFixture is the REST fixture with an organization tree: Acme (the
// fixture's, with alice, a plain person, and its administrator root),
// its child Sales (administrator sam, person carol), and an unrelated
// tenant Globex (administrator gil, person dave).
type groupFixture struct {
	*fixture
	sales, globex  account.Organization
	carol, dave    account.Person
	root, sam, gil string // administrators' tokens: Acme, Sales, Globex
	bob            account.Person
	bobToken       string // a plain person of Acme
}

func newGroupFixture(t *testing.T) *groupFixture {
	t.Helper()
	ctx := context.Background()
	g := &groupFixture{fixture: newFixture(t)}
	var err error
	if g.sales, err = g.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Sales", ParentID: g.org.ID}); err != nil {
		t.Fatal(err)
	}
	if g.globex, err = g.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"}); err != nil {
		t.Fatal(err)
	}
	person := func(org uint64, name string, admin bool) (account.Person, string) {
		in := account.PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: fixturePassword, Admin: admin}
		tok := g.personToken(in)
		p, err := g.accounts.PersonByLogin(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return p, tok
	}
	_, g.root = person(g.org.ID, "root", true)
	_, g.sam = person(g.sales.ID, "sam", true)
	_, g.gil = person(g.globex.ID, "gil", true)
	g.carol, _ = person(g.sales.ID, "carol", false)
	g.dave, _ = person(g.globex.ID, "dave", false)
	g.bob, g.bobToken = person(g.org.ID, "bob", false)
	return g
}

// newGroup creates a group in org through the domain.
func (g *groupFixture) newGroup(org uint64, name string) account.Group {
	g.t.Helper()
	grp, err := g.accounts.CreateGroup(context.Background(), account.GroupInput{OrganizationID: org, Name: name})
	if err != nil {
		g.t.Fatal(err)
	}
	return grp
}

func (g *groupFixture) addMembers(id uint64, ch account.MembersChange) {
	g.t.Helper()
	if _, err := g.accounts.UpdateMembers(context.Background(), id, ch); err != nil {
		g.t.Fatal(err)
	}
}

var dateTimePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$`)

// TestGroupObject pins the group object of spec 2.11 and the answers of
// every group route to the administrator.
func TestGroupObject(t *testing.T) {
	g := newGroupFixture(t)
	st, body := g.send("POST", "/api/2/group/create", g.root, url.Values{"name": {"Engineering"}})
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, body)
	}
	var obj map[string]any
	decode(t, body, &obj)
	if !dateTimePattern.MatchString(fmt.Sprint(obj["created"])) {
		t.Errorf("created = %v, want YYYY-MM-DDTHH:MM:SS", obj["created"])
	}
	if obj["company_id"] != float64(g.org.ID) {
		t.Errorf("company_id = %v, want the caller's organization %d", obj["company_id"], g.org.ID)
	}
	id := uint64(obj["id"].(float64))
	obj["id"], obj["company_id"], obj["created"] = 1, 1, "2026-01-02T03:04:05"
	norm, _ := json.Marshal(obj)
	golden(t, "group.json", norm)

	// The routes answer the same object (or the spec's shapes).
	st, got := g.send("GET", fmt.Sprintf("/api/2/group/%d", id), g.root, nil)
	if st != http.StatusOK || string(got) != string(body) {
		t.Errorf("GET group: %d %s, want %s", st, got, body)
	}
	st, got = g.send("POST", fmt.Sprintf("/api/2/group/%d/update", id), g.root, url.Values{"name": {"Eng"}, "active": {"false"}})
	var upd groupBody
	decode(t, got, &upd)
	if st != http.StatusOK || upd.Name != "Eng" || upd.Active || upd.ID != id || upd.Type != "group" {
		t.Errorf("update: %d %s", st, got)
	}
	st, got = g.send("POST", fmt.Sprintf("/api/2/group/%d/update", id), g.root, url.Values{"active": {"true"}})
	decode(t, got, &upd)
	if st != http.StatusOK || upd.Name != "Eng" || !upd.Active {
		t.Errorf("update active only: %d %s", st, got)
	}
	st, got = g.send("POST", fmt.Sprintf("/api/2/group/%d/members/update", id), g.root, url.Values{"add_members": {fmt.Sprint(g.person.ID)}})
	if st != http.StatusOK || strings.TrimSpace(string(got)) != `{"status":"ok"}` {
		t.Errorf("members/update: %d %s", st, got)
	}
	st, got = g.send("GET", fmt.Sprintf("/api/2/group/%d/members", id), g.root, nil)
	if want := fmt.Sprintf(`{"members":[%d],"members_from_group":[],"member_groups":[],"member_groups_from_group":[]}`, g.person.ID); st != http.StatusOK || strings.TrimSpace(string(got)) != want {
		t.Errorf("members: %d %s, want %s", st, got, want)
	}
	st, got = g.send("POST", fmt.Sprintf("/api/2/group/%d/create", id), g.root, nil)
	wantError(t, st, got, http.StatusNotFound, "not_found")
	st, got = g.send("POST", fmt.Sprintf("/api/2/group/%d/delete", id), g.root, nil)
	if st != http.StatusOK || strings.TrimSpace(string(got)) != `{"status":"ok"}` {
		t.Errorf("delete: %d %s", st, got)
	}
	st, got = g.send("GET", fmt.Sprintf("/api/2/group/%d", id), g.root, nil)
	wantError(t, st, got, http.StatusNotFound, "not_found")
	st, got = g.send("GET", fmt.Sprintf("/api/2/group/%d", id), g.root, nil)
	wantError(t, st, got, http.StatusNotFound, "not_found")
	// A wrong method on a group path is 405.
	st, got = g.send("GET", fmt.Sprintf("/api/2/group/%d/delete", id), g.root, nil)
	wantError(t, st, got, http.StatusMethodNotAllowed, "invalid_request")
}

// TestGroupBadInputs: every client input of the group routes, wrong, as
// the administrator of Acme.
func TestGroupBadInputs(t *testing.T) {
	g := newGroupFixture(t)
	a := g.newGroup(g.org.ID, "A")
	b := g.newGroup(g.org.ID, "B")
	c := g.newGroup(g.org.ID, "C")
	inSales := g.newGroup(g.sales.ID, "Sales team")
	other := g.newGroup(g.globex.ID, "Globex team")
	g.addMembers(a.ID, account.MembersChange{AddGroups: []uint64{b.ID}})
	g.addMembers(b.ID, account.MembersChange{AddGroups: []uint64{c.ID}})
	members := func(id uint64) string { return fmt.Sprintf("/api/2/group/%d/members/update", id) }
	ids := func(ids ...uint64) []string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		return []string{strings.Join(s, ",")}
	}
	tests := []struct {
		name         string
		method, path string
		form         url.Values
		status       int
		code         string
		description  string // a part of the error_description
	}{
		{"create without a name", "POST", "/api/2/group/create", url.Values{}, 400, "invalid_request", "name"},
		{"create with an empty name", "POST", "/api/2/group/create", url.Values{"name": {" "}}, 400, "invalid_request", "name"},
		{"create with a long name", "POST", "/api/2/group/create", url.Values{"name": {strings.Repeat("n", 256)}}, 400, "invalid_request", "name"},
		{"create with a bad company_id", "POST", "/api/2/group/create", url.Values{"name": {"x"}, "company_id": {"acme"}}, 400, "invalid_request", "company_id"},
		{"create with an empty company_id", "POST", "/api/2/group/create", url.Values{"name": {"x"}, "company_id": {""}}, 400, "invalid_request", "company_id"},
		{"create in an unknown organization", "POST", "/api/2/group/create", url.Values{"name": {"x"}, "company_id": {"9999"}}, 404, "not_found", ""},
		{"create in another tenant", "POST", "/api/2/group/create", url.Values{"name": {"x"}, "company_id": {fmt.Sprint(g.globex.ID)}}, 404, "not_found", ""},
		{"a group id that is not a number", "GET", "/api/2/group/abc", nil, 404, "not_found", ""},
		{"group id 0", "GET", "/api/2/group/0", nil, 404, "not_found", ""},
		{"an unknown group", "GET", "/api/2/group/9999", nil, 404, "not_found", ""},
		{"members of an unknown group", "GET", "/api/2/group/9999/members", nil, 404, "not_found", ""},
		{"update an unknown group", "POST", "/api/2/group/9999/update", url.Values{"name": {"x"}}, 404, "not_found", ""},
		{"update to an empty name", "POST", fmt.Sprintf("/api/2/group/%d/update", a.ID), url.Values{"name": {""}}, 400, "invalid_request", "name"},
		{"update active to maybe", "POST", fmt.Sprintf("/api/2/group/%d/update", a.ID), url.Values{"active": {"maybe"}}, 400, "invalid_request", "active"},
		{"include_from_group=yes", "GET", fmt.Sprintf("/api/2/group/%d/members?include_from_group=yes", a.ID), nil, 400, "invalid_request", "include_from_group"},
		{"members/update with no field", "POST", members(a.ID), url.Values{"members": {"1"}}, 400, "invalid_request", "add_members"},
		{"a member id that is not a number", "POST", members(a.ID), url.Values{"add_members": {"1,x"}}, 400, "invalid_request", "add_members"},
		{"a negative group id", "POST", members(a.ID), url.Values{"remove_groups": {"-1"}}, 400, "invalid_request", "remove_groups"},
		{"an unknown person", "POST", members(a.ID), url.Values{"add_members": ids(9999)}, 400, "invalid_request", "add_members"},
		{"a person of another tenant", "POST", members(a.ID), url.Values{"add_members": ids(g.dave.ID)}, 400, "invalid_request", "add_members"},
		{"a person of the parent organization", "POST", members(inSales.ID), url.Values{"add_members": ids(g.person.ID)}, 400, "invalid_request", "add_members"},
		{"an unknown group member", "POST", members(a.ID), url.Values{"add_groups": ids(9999)}, 400, "invalid_request", "add_groups"},
		{"a group of another tenant", "POST", members(a.ID), url.Values{"add_groups": ids(other.ID)}, 400, "invalid_request", "add_groups"},
		{"added and removed at once", "POST", members(a.ID), url.Values{"add_members": ids(g.bob.ID), "remove_members": ids(g.bob.ID)}, 400, "invalid_request", "add_members"},
		{"a group in itself", "POST", members(a.ID), url.Values{"add_groups": ids(a.ID)}, 400, "invalid_request", fmt.Sprintf("group %d cannot contain itself", a.ID)},
		{"a direct cycle", "POST", members(b.ID), url.Values{"add_groups": ids(a.ID)}, 400, "invalid_request",
			fmt.Sprintf("group %d would contain group %d, which contains group %d", b.ID, a.ID, b.ID)},
		{"an indirect cycle", "POST", members(c.ID), url.Values{"add_groups": ids(a.ID)}, 400, "invalid_request",
			fmt.Sprintf("group %d would contain group %d, which contains group %d, which contains group %d", c.ID, a.ID, b.ID, c.ID)},
		{"the groups list of an unknown organization", "GET", "/api/2/organization/9999/groups", nil, 404, "not_found", ""},
		{"the groups list with limit 0", "GET", fmt.Sprintf("/api/2/organization/%d/groups?limit=0", g.org.ID), nil, 400, "invalid_request", "limit"},
		{"the groups list with limit 101", "GET", fmt.Sprintf("/api/2/organization/%d/groups?limit=101", g.org.ID), nil, 400, "invalid_request", "limit"},
		{"the groups list with offset -1", "GET", fmt.Sprintf("/api/2/organization/%d/groups?offset=-1", g.org.ID), nil, 400, "invalid_request", "offset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := g.send(tt.method, tt.path, g.root, tt.form)
			wantError(t, st, body, tt.status, tt.code)
			var e errorBody
			decode(t, body, &e)
			if !strings.Contains(e.Description, tt.description) {
				t.Errorf("error_description %q does not say %q", e.Description, tt.description)
			}
		})
	}
	// Nothing refused changed A.
	st, body := g.send("GET", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", a.ID), g.root, nil)
	if want := fmt.Sprintf(`{"members":[],"members_from_group":[],"member_groups":[%d],"member_groups_from_group":[%d]}`, b.ID, c.ID); st != 200 || strings.TrimSpace(string(body)) != want {
		t.Errorf("A after the refusals: %d %s, want %s", st, body, want)
	}
}

// TestGroupMembersFromGroup: include_from_group with nested groups.
func TestGroupMembersFromGroup(t *testing.T) {
	g := newGroupFixture(t)
	// A (Acme) holds alice and B; B holds bob and S; S (Sales) holds
	// carol; a person in both A and S is listed once, as a direct member.
	a := g.newGroup(g.org.ID, "A")
	b := g.newGroup(g.org.ID, "B")
	s := g.newGroup(g.sales.ID, "S")
	st, body := g.send("POST", fmt.Sprintf("/api/2/group/%d/members/update", s.ID), g.sam,
		url.Values{"add_members": {fmt.Sprint(g.carol.ID)}})
	if st != 200 {
		t.Fatalf("Sales admin adds carol to S: %d %s", st, body)
	}
	// Repeated fields and blanks are fine.
	st, body = g.send("POST", fmt.Sprintf("/api/2/group/%d/members/update", b.ID), g.root,
		url.Values{"add_members": {fmt.Sprint(g.bob.ID)}, "add_groups": {" ", fmt.Sprintf("%d, ", s.ID)}})
	if st != 200 {
		t.Fatalf("B: %d %s", st, body)
	}
	st, body = g.send("POST", fmt.Sprintf("/api/2/group/%d/members/update", a.ID), g.root,
		url.Values{"add_members": {fmt.Sprintf("%d,%d", g.person.ID, g.carol.ID)}, "add_groups": {fmt.Sprint(b.ID)}})
	if st != 200 {
		t.Fatalf("A: %d %s", st, body)
	}
	alice, bob, carol := g.person.ID, g.bob.ID, g.carol.ID
	tests := []struct {
		name  string
		path  string
		token string
		want  membersBody
	}{
		{"A without", fmt.Sprintf("/api/2/group/%d/members", a.ID), g.root,
			membersBody{[]uint64{alice, carol}, []uint64{}, []uint64{b.ID}, []uint64{}}},
		{"A with false", fmt.Sprintf("/api/2/group/%d/members?include_from_group=false", a.ID), g.root,
			membersBody{[]uint64{alice, carol}, []uint64{}, []uint64{b.ID}, []uint64{}}},
		{"A with", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", a.ID), g.root,
			membersBody{[]uint64{alice, carol}, []uint64{bob}, []uint64{b.ID}, []uint64{s.ID}}},
		{"B with", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", b.ID), g.root,
			membersBody{[]uint64{bob}, []uint64{carol}, []uint64{s.ID}, []uint64{}}},
		{"S with, as the Sales admin", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", s.ID), g.sam,
			membersBody{[]uint64{carol}, []uint64{}, []uint64{}, []uint64{}}},
		{"A with, as bob, a member through B", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", a.ID), g.bobToken,
			membersBody{[]uint64{alice, carol}, []uint64{bob}, []uint64{b.ID}, []uint64{s.ID}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, body := g.send("GET", tt.path, tt.token, nil)
			var got membersBody
			decode(t, body, &got)
			if st != 200 || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("%d %s, want %+v", st, body, tt.want)
			}
		})
	}

	// Deleting B takes it out of A: bob is no longer reached.
	if st, body := g.send("POST", fmt.Sprintf("/api/2/group/%d/delete", b.ID), g.root, nil); st != 200 {
		t.Fatalf("delete B: %d %s", st, body)
	}
	st, body = g.send("GET", fmt.Sprintf("/api/2/group/%d/members?include_from_group=true", a.ID), g.root, nil)
	want := fmt.Sprintf(`{"members":[%d,%d],"members_from_group":[],"member_groups":[],"member_groups_from_group":[]}`, alice, carol)
	if st != 200 || strings.TrimSpace(string(body)) != want {
		t.Errorf("A after B's deletion: %d %s, want %s", st, body, want)
	}
	st, body = g.send("GET", fmt.Sprintf("/api/2/group/%d", a.ID), g.bobToken, nil)
	wantError(t, st, body, http.StatusForbidden, "forbidden")
}

// TestOrganizationGroups: the paged list of an organization's groups.
func TestOrganizationGroups(t *testing.T) {
	g := newGroupFixture(t)
	var ids []uint64
	for i := range 5 {
		ids = append(ids, g.newGroup(g.org.ID, fmt.Sprint("G", i)).ID)
	}
	g.newGroup(g.sales.ID, "a child's group, not listed")
	tests := []struct {
		query string
		want  []uint64
	}{
		{"", ids},
		{"?limit=2", ids[:2]},
		{"?offset=2&limit=2", ids[2:4]},
		{"?offset=4", ids[4:]},
		{"?offset=5", nil},
		{"?offset=500&limit=1", nil},
	}
	for _, tt := range tests {
		st, body := g.send("GET", fmt.Sprintf("/api/2/organization/%d/groups%s", g.org.ID, tt.query), g.root, nil)
		var page pagedBody[groupBody]
		decode(t, body, &page)
		var got []uint64
		for _, r := range page.Results {
			got = append(got, r.ID)
			if r.Type != "group" || r.CompanyID != g.org.ID {
				t.Errorf("%s: result %+v", tt.query, r)
			}
		}
		if st != 200 || page.Total != 5 || !reflect.DeepEqual(got, tt.want) || page.Results == nil {
			t.Errorf("%q: %d %s, want ids %v of 5", tt.query, st, body, tt.want)
		}
	}
}

// TestGroupAccess walks every group route as each kind of caller: no
// token; a person of another organization; a plain person of the same
// organization; a member of the group; the administrator of a child
// organization (on the parent's group); the administrator of the parent
// (on the child's group and its own).
func TestGroupAccess(t *testing.T) {
	g := newGroupFixture(t)
	type route struct {
		method string
		path   string // %d: the group, or the organization for create and the list
		form   url.Values
		read   bool // members read it too
	}
	routes := []route{
		{"POST", "/api/2/group/create?company_id=%d", url.Values{"name": {"new"}}, false},
		{"GET", "/api/2/organization/%d/groups", nil, false},
		{"GET", "/api/2/group/%d", nil, true},
		{"GET", "/api/2/group/%d/members?include_from_group=true", nil, true},
		{"POST", "/api/2/group/%d/update", url.Values{"name": {"renamed"}}, false},
		{"POST", "/api/2/group/%d/members/update", url.Values{"add_members": {"%p"}}, false},
		{"POST", "/api/2/group/%d/delete", nil, false},
	}
	callers := []struct {
		name   string
		token  string
		org    func() uint64 // the organization of the group the caller is tried on
		member bool          // make the caller's person a member of it
		status int
		code   string
	}{
		{"no token", "", func() uint64 { return g.org.ID }, false, 401, "access_denied"},
		{"a bad token", "nope", func() uint64 { return g.org.ID }, false, 401, "access_denied"},
		{"another organization's administrator", g.gil, func() uint64 { return g.org.ID }, false, 404, "not_found"},
		{"a plain person of the organization", g.token, func() uint64 { return g.org.ID }, false, 403, "forbidden"},
		{"a child's administrator on the parent's group", g.sam, func() uint64 { return g.org.ID }, false, 404, "not_found"},
		{"the parent's administrator on a child's group", g.root, func() uint64 { return g.sales.ID }, false, 200, ""},
		{"the administrator on the organization's own group", g.root, func() uint64 { return g.org.ID }, false, 200, ""},
		{"the child's administrator on its own group", g.sam, func() uint64 { return g.sales.ID }, false, 200, ""},
		{"a member of the group", g.bobToken, func() uint64 { return g.org.ID }, true, 403, "forbidden"},
	}
	for _, rt := range routes {
		for _, c := range callers {
			org := c.org()
			grp := g.newGroup(org, "target")
			if c.member {
				g.addMembers(grp.ID, account.MembersChange{AddPersons: []uint64{g.bob.ID}})
			}
			id := grp.ID
			if strings.Contains(rt.path, "company_id") || strings.Contains(rt.path, "organization") {
				id = org
			}
			form := url.Values{}
			for k, v := range rt.form {
				form[k] = []string{strings.ReplaceAll(v[0], "%p", fmt.Sprint(g.carol.ID))}
			}
			if org == g.org.ID && rt.form.Get("add_members") != "" {
				form.Set("add_members", fmt.Sprint(g.bob.ID))
			}
			st, body := g.send(rt.method, fmt.Sprintf(rt.path, id), c.token, form)
			status, code := c.status, c.code
			if c.member && rt.read {
				status, code = 200, ""
			}
			if status == 200 {
				if st != 200 {
					t.Errorf("%s %s as %s: %d %s, want 200", rt.method, rt.path, c.name, st, body)
				}
				continue
			}
			if st != status || !strings.Contains(string(body), `"error":"`+code+`"`) {
				t.Errorf("%s %s as %s: %d %s, want %d %s", rt.method, rt.path, c.name, st, body, status, code)
			}
		}
	}
}
