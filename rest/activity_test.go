package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/activity"
)

// activityFixture is the fixture served with an activity log, the tenants
// of the access walk, and a record about each of two persons.
type activityFixture struct {
	*fixture
	log                       *activity.Log
	child                     account.Organization
	childPlain                account.Person
	plain, parentAdmin        string // tokens: bob, a plain person of the organization; its administrator
	childAdmin, childPlainTok string
	tenant                    string // the administrator of another organization
}

func newActivityFixture(t *testing.T) *activityFixture {
	t.Helper()
	f := newFixture(t)
	ctx := context.Background()
	a := &activityFixture{fixture: f, log: activity.New(f.db, activity.Options{})}
	srv := httptest.NewUnstartedServer(New(Options{FS: f.fs, Accounts: f.accounts, Activity: a.log, ActivityNotesPerHour: activityNotesPerHour}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.srv, f.client = srv, srv.Client()

	var err error
	a.child, err = f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: "Child"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	person := func(org uint64, name string, admin bool) string {
		return f.personToken(account.PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com",
			Password: fixturePassword, Admin: admin})
	}
	a.plain = person(f.org.ID, "bob", false)
	a.parentAdmin = person(f.org.ID, "carol", true)
	a.childAdmin = person(a.child.ID, "erin", true)
	a.childPlainTok = person(a.child.ID, "frank", false)
	a.tenant = person(other.ID, "dave", true)
	if a.childPlain, err = f.accounts.PersonByLogin(ctx, "frank"); err != nil {
		t.Fatal(err)
	}
	return a
}

// activityNotesPerHour is the activity fixture's bound on one person's
// notes over REST (TestActivityAccess spends alice's).
const activityNotesPerHour = 4

// about creates a note by and about p.
func (a *activityFixture) about(t *testing.T, p account.Person) activity.Record {
	t.Helper()
	note, _ := activity.TypeNamed(activity.Note)
	r, err := a.log.Create(context.Background(), activity.Record{ActorType: "person", ActorText: p.Username,
		ActorCompanyID: p.OrganizationID, ActorPersonID: p.ID, ActedOnType: "person", ActedOnText: p.Username,
		ActedOnCompanyID: p.OrganizationID, ActedOnPersonID: p.ID, ActivityTypeID: note.ID, Processed: true})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestActivityAccess walks the activity routes as every kind of caller.
func TestActivityAccess(t *testing.T) {
	a := newActivityFixture(t)
	alice, frank := a.person, a.childPlain
	recA, recC := a.about(t, alice), a.about(t, frank)
	org, child := a.org.ID, a.child.ID
	cases := []struct {
		name, method, path string
		form               url.Values
		token              string
		status             int
	}{
		{"types without a token", "GET", "/api/2/activity/types", nil, "", 401},
		{"types", "GET", "/api/2/activity/types", nil, a.token, 200},

		{"record without a token", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, "", 401},
		{"record, another organization", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, a.tenant, 404},
		{"own record", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, a.token, 200},
		{"a colleague's record", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, a.plain, 404},
		{"record of the parent, child administrator", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, a.childAdmin, 404},
		{"record, own administrator", "GET", fmt.Sprintf("/api/2/activity/%d", recA.ID), nil, a.parentAdmin, 200},
		{"child record, child administrator", "GET", fmt.Sprintf("/api/2/activity/%d", recC.ID), nil, a.childAdmin, 200},
		{"child record, parent administrator", "GET", fmt.Sprintf("/api/2/activity/%d", recC.ID), nil, a.parentAdmin, 200},
		{"child record, its person", "GET", fmt.Sprintf("/api/2/activity/%d", recC.ID), nil, a.childPlainTok, 200},
		{"child record, a plain person of the parent", "GET", fmt.Sprintf("/api/2/activity/%d", recC.ID), nil, a.token, 404},
		{"no such record", "GET", "/api/2/activity/999999", nil, a.parentAdmin, 404},
		{"not an id", "GET", "/api/2/activity/x", nil, a.parentAdmin, 404},

		{"organization without a token", "GET", fmt.Sprintf("/api/2/organization/%d/activity", org), nil, "", 401},
		{"organization, another organization", "GET", fmt.Sprintf("/api/2/organization/%d/activity", org), nil, a.tenant, 404},
		{"organization, a plain person of it", "GET", fmt.Sprintf("/api/2/organization/%d/activity", org), nil, a.token, 403},
		{"parent organization, child administrator", "GET", fmt.Sprintf("/api/2/organization/%d/activity", org), nil, a.childAdmin, 404},
		{"organization, its administrator", "GET", fmt.Sprintf("/api/2/organization/%d/activity", org), nil, a.parentAdmin, 200},
		{"child organization, parent administrator", "GET", fmt.Sprintf("/api/2/organization/%d/activity", child), nil, a.parentAdmin, 200},
		{"child organization, its administrator", "GET", fmt.Sprintf("/api/2/organization/%d/activity", child), nil, a.childAdmin, 200},
		{"organization, bad paging", "GET", fmt.Sprintf("/api/2/organization/%d/activity?limit=500", org), nil, a.parentAdmin, 400},

		{"person without a token", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, "", 401},
		{"person, another organization", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, a.tenant, 404},
		{"own activity", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, a.token, 200},
		{"a colleague's activity", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, a.plain, 404},
		{"parent person, child administrator", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, a.childAdmin, 404},
		{"person, parent administrator", "GET", fmt.Sprintf("/api/2/person/%d/activity", alice.ID), nil, a.parentAdmin, 200},
		{"child person, parent administrator", "GET", fmt.Sprintf("/api/2/person/%d/activity", frank.ID), nil, a.parentAdmin, 200},

		{"create without a token", "POST", "/api/2/activity/create", url.Values{"data_text": {"x"}}, "", 401},
		{"create about oneself", "POST", "/api/2/activity/create", url.Values{"data_text": {"x"}}, a.token, 200},
		{"create about one's organization", "POST", "/api/2/activity/create", url.Values{"acted_on_company_id": {fmt.Sprint(org)}}, a.token, 200},
		{"create about one's root", "POST", "/api/2/activity/create", url.Values{"acted_on_root_id": {fmt.Sprint(a.root.ID)}}, a.token, 200},
		{"create about another organization", "POST", "/api/2/activity/create", url.Values{"acted_on_company_id": {fmt.Sprint(child)}}, a.token, 404},
		{"create about a colleague", "POST", "/api/2/activity/create", url.Values{"acted_on_person_id": {fmt.Sprint(frank.ID)}}, a.token, 404},
		{"create about a child person, parent administrator", "POST", "/api/2/activity/create", url.Values{"acted_on_person_id": {fmt.Sprint(frank.ID)}}, a.parentAdmin, 200},
		{"create with a type of berth's", "POST", "/api/2/activity/create", url.Values{"activity_type_id": {"60"}}, a.token, 400},
		{"create with a bad type", "POST", "/api/2/activity/create", url.Values{"activity_type_id": {"x"}}, a.token, 400},
		{"create about two things", "POST", "/api/2/activity/create", url.Values{"acted_on_person_id": {"1"}, "acted_on_company_id": {"1"}}, a.token, 400},
		{"create about a bad id", "POST", "/api/2/activity/create", url.Values{"acted_on_root_id": {"-1"}}, a.token, 400},
		{"create with a long text", "POST", "/api/2/activity/create", url.Values{"data_text": {strings.Repeat("x", 4097)}}, a.token, 400},
		// alice's fourth note is her last of the hour: each is kept a
		// year, with 8 KiB of text no quota counts, and one client
		// added them without end.
		{"create, the last note of the hour", "POST", "/api/2/activity/create", url.Values{"data_text": {strings.Repeat("x", 4096)}}, a.token, 200},
		{"create past the notes of an hour", "POST", "/api/2/activity/create", url.Values{"data_text": {"x"}}, a.token, 429},
		{"create, another person's notes", "POST", "/api/2/activity/create", url.Values{"data_text": {"x"}}, a.plain, 200},
	}
	for _, c := range cases {
		st, body := a.send(c.method, c.path, c.token, c.form)
		if st != c.status {
			t.Errorf("%s: %s %s: %d %s, want %d", c.name, c.method, c.path, st, body, c.status)
			continue
		}
		if st >= 400 {
			var e struct{ Error, ErrorDescription string }
			if json.Unmarshal(body, &e) != nil || e.Error == "" {
				t.Errorf("%s: error body %s", c.name, body)
			}
		}
	}
}

// TestActivityObject pins the activity object (2.15): every field, null
// ids and texts, the date-time format; and the types (2.16).
func TestActivityObject(t *testing.T) {
	a := newActivityFixture(t)
	st, body := a.send("POST", "/api/2/activity/create", a.token, url.Values{"action_text": {"hello"}})
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"actor_type": "person", "actor_text": "alice", "actor_company_id": float64(a.org.ID), "actor_guest_id": nil,
		"actor_machine_id": nil, "actor_person_id": float64(a.person.ID), "acted_on_type": "person", "acted_on_text": "alice",
		"acted_on_company_id": float64(a.org.ID), "acted_on_group_id": nil, "acted_on_guest_id": nil,
		"acted_on_machine_id": nil, "acted_on_person_id": float64(a.person.ID), "acted_on_root_id": nil,
		"action_text": "hello", "data_text": nil, "activity_type_id": float64(100), "processed": true, "type": "activity",
	}
	for k, v := range want {
		if got, ok := obj[k]; !ok || got != v {
			t.Errorf("%s = %#v, want %#v", k, got, v)
		}
	}
	if len(obj) != len(want)+2 {
		t.Errorf("%d fields, want %d: %s", len(obj), len(want)+2, body)
	}
	if c, _ := obj["created"].(string); len(c) != len("2006-01-02T15:04:05") || c[10] != 'T' {
		t.Errorf("created = %q", obj["created"])
	}
	id := uint64(obj["id"].(float64))
	if st, again := a.send("GET", fmt.Sprintf("/api/2/activity/%d", id), "", nil); st != 401 {
		t.Errorf("anonymous get: %d %s", st, again)
	}
	if st, again := a.send("GET", fmt.Sprintf("/api/2/activity/%d", id), a.token, nil); st != 200 || string(again) != string(body) {
		t.Errorf("get: %d %s, want %s", st, again, body)
	}

	st, body = a.send("GET", "/api/2/activity/types", a.token, nil)
	var types struct {
		Results []map[string]any `json:"results"`
	}
	if err := json.Unmarshal(body, &types); st != 200 || err != nil || len(types.Results) != len(activity.Types()) {
		t.Fatalf("types: %d %s", st, body)
	}
	for _, ty := range types.Results {
		var keys []string
		for k := range ty {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if strings.Join(keys, ",") != "activity,id,machine_scope,system_scope,type,user_scope" || ty["type"] != "activity_type" {
			t.Errorf("type object %v", ty)
		}
	}
}

// TestActivityPaging: lists are newest first, in the paged envelope.
func TestActivityPaging(t *testing.T) {
	a := newActivityFixture(t)
	var ids []uint64
	for range 5 {
		ids = append(ids, a.about(t, a.person).ID)
	}
	type pageBody struct {
		Offset  int `json:"offset"`
		Total   int `json:"total"`
		Results []struct {
			ID uint64 `json:"id"`
		} `json:"results"`
	}
	// The second page asked for after a record was added at the head:
	// by offset it repeats ids[3]; by before_id it goes on where the
	// first page (ids[4], ids[3]) ended.
	added := false
	tests := []struct {
		name  string
		query string
		add   bool // add a record before asking
		want  []int
		total int
		code  string
	}{
		{"offset", "?offset=1&limit=2", false, []int{3, 2}, 5, ""},
		{"before_id, then records arrive", fmt.Sprintf("?before_id=%d&limit=2", ids[3]), true, []int{2, 1}, 3, ""},
		{"before_id and offset", fmt.Sprintf("?before_id=%d&offset=1&limit=2", ids[3]), false, []int{1, 0}, 3, ""},
		{"before_id of the oldest", fmt.Sprintf("?before_id=%d", ids[0]), false, nil, 0, ""},
		{"before_id 0 is all", "?before_id=0&limit=1", false, []int{-1}, 6, ""},
		{"before_id not a number", "?before_id=abc", false, nil, 0, "invalid_request"},
		{"before_id negative", "?before_id=-1", false, nil, 0, "invalid_request"},
		{"before_id empty", "?before_id=", false, nil, 0, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.add && !added {
				ids = append(ids, a.about(t, a.person).ID)
				added = true
			}
			for _, path := range []string{fmt.Sprintf("/api/2/organization/%d/activity", a.org.ID), fmt.Sprintf("/api/2/person/%d/activity", a.person.ID)} {
				st, body := a.send("GET", path+tt.query, a.parentAdmin, nil)
				if tt.code != "" {
					wantError(t, st, body, http.StatusBadRequest, tt.code)
					continue
				}
				var page pageBody
				if err := json.Unmarshal(body, &page); st != http.StatusOK || err != nil {
					t.Fatalf("%s: %d %s", path, st, body)
				}
				var got, want []uint64
				for _, r := range page.Results {
					got = append(got, r.ID)
				}
				for _, k := range tt.want {
					if k < 0 {
						k = len(ids) + k
					}
					want = append(want, ids[k])
				}
				if !slices.Equal(got, want) || page.Total != tt.total {
					t.Errorf("%s%s: ids %v of %d, want %v of %d", path, tt.query, got, page.Total, want, tt.total)
				}
			}
		})
	}
}

// TestActivityHiddenActor: an actor of an organization the reader does
// not see is hidden, and named for what it is. A parent's administrator
// is "an administrator of an organization above"; a person of an
// organization with no part in the reader's (a share-link subscriber of
// another tenant who wrote into the reader's root) read as one too,
// which they are not.
func TestActivityHiddenActor(t *testing.T) {
	a := newActivityFixture(t)
	ctx := context.Background()
	carol, err := a.accounts.PersonByLogin(ctx, "carol")
	if err != nil {
		t.Fatal(err)
	}
	dave, err := a.accounts.PersonByLogin(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	by := func(actor, on account.Person) activity.Record {
		note, _ := activity.TypeNamed(activity.Note)
		r, err := a.log.Create(ctx, activity.Record{ActorType: "person", ActorText: actor.Username,
			ActorCompanyID: actor.OrganizationID, ActorPersonID: actor.ID, ActedOnType: "person", ActedOnText: on.Username,
			ActedOnCompanyID: on.OrganizationID, ActedOnPersonID: on.ID, ActivityTypeID: note.ID, Processed: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tc := range []struct {
		name  string
		rec   activity.Record
		token string
		want  string
	}{
		{"the parent's administrator, read in the child", by(carol, a.childPlain), a.childPlainTok, "an administrator of an organization above"},
		{"a person of another tenant, read by the one acted on", by(dave, a.person), a.token, "a person of another organization"},
		{"a person of another tenant, read by the administrator", by(dave, a.person), a.parentAdmin, "a person of another organization"},
		{"a colleague, read by the one acted on", by(carol, a.person), a.token, "carol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := a.send("GET", fmt.Sprintf("/api/2/activity/%d", tc.rec.ID), tc.token, nil)
			var got struct {
				ActorText      string  `json:"actor_text"`
				ActorCompanyID *uint64 `json:"actor_company_id"`
				ActorPersonID  *uint64 `json:"actor_person_id"`
			}
			if err := json.Unmarshal(body, &got); st != 200 || err != nil {
				t.Fatalf("%d %s", st, body)
			}
			hidden := tc.want != tc.rec.ActorText
			if got.ActorText != tc.want || hidden != (got.ActorCompanyID == nil && got.ActorPersonID == nil) {
				t.Errorf("actor %q, company %v, person %v; want %q (hidden: %v)", got.ActorText, got.ActorCompanyID, got.ActorPersonID, tc.want, hidden)
			}
		})
	}
}

// TestActivityHiddenOwner: the owner of a file or folder acted on
// (acted_on_company_id and acted_on_person_id) is left out for a reader
// who does not see the owner's organization and did not act: a
// share-link subscriber of another organization who writes into a root
// is in their own organization's lists, whose administrators read the
// ids of the root's owner and of its organization, which do not exist
// for them.
func TestActivityHiddenOwner(t *testing.T) {
	a := newActivityFixture(t)
	ctx := context.Background()
	dave, err := a.accounts.PersonByLogin(ctx, "dave")
	if err != nil {
		t.Fatal(err)
	}
	otherAdmin := a.personToken(account.PersonInput{OrganizationID: dave.OrganizationID, Username: "gus", Email: "gus@example.com",
		Password: fixturePassword, Admin: true})
	write, _ := activity.TypeNamed("write")
	rec, err := a.log.Create(ctx, activity.Record{ActorType: "person", ActorText: "dave", ActorCompanyID: dave.OrganizationID,
		ActorPersonID: dave.ID, ActedOnType: "file", ActedOnText: "up.txt", ActedOnCompanyID: a.org.ID,
		ActedOnPersonID: a.person.ID, ActedOnRootID: a.root.ID, ActivityTypeID: write.ID, DataText: "1 bytes", Processed: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		token  string
		hidden bool
	}{
		{"the owner", a.token, false},
		{"the owner's administrator", a.parentAdmin, false},
		{"the writer", a.tenant, false},
		{"an administrator of the writer's organization", otherAdmin, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := a.send("GET", fmt.Sprintf("/api/2/activity/%d", rec.ID), tc.token, nil)
			var got struct {
				Company *uint64 `json:"acted_on_company_id"`
				Person  *uint64 `json:"acted_on_person_id"`
			}
			if err := json.Unmarshal(body, &got); st != 200 || err != nil {
				t.Fatalf("%d %s", st, body)
			}
			if hidden := got.Company == nil && got.Person == nil; hidden != tc.hidden || (!hidden && (*got.Company != a.org.ID || *got.Person != a.person.ID)) {
				t.Errorf("acted on company %v, person %v; want hidden: %v", got.Company, got.Person, tc.hidden)
			}
		})
	}
}
