package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/share"
	"berth/vfs"
)

// orgWorld is the fixture's organization Acme (top-level, with its plain
// person alice, the fixture's), a child Labs under it, and a top-level
// Other, with an administrator in each and a plain person in Labs with a
// sync root.
type orgWorld struct {
	*fixture
	child, other   account.Organization
	parentAdmin    string // administrator of Acme
	childAdmin     string // administrator of Labs
	otherAdmin     string // administrator of Other
	carol          account.Person
	carolToken     string // plain person of Labs
	carolRoot      vfs.Root
	childAdminUser account.Person
}

func newOrgWorld(t *testing.T) *orgWorld {
	t.Helper()
	ctx := context.Background()
	w := &orgWorld{fixture: newFixture(t)}
	var err error
	w.child, err = w.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Labs", ParentID: w.org.ID})
	if err != nil {
		t.Fatal(err)
	}
	w.other, err = w.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	_, w.parentAdmin, _ = w.member(w.org.ID, "padmin", true)
	w.childAdminUser, w.childAdmin, _ = w.member(w.child.ID, "cadmin", true)
	_, w.otherAdmin, _ = w.member(w.other.ID, "oadmin", true)
	w.carol, w.carolToken, w.carolRoot = w.member(w.child.ID, "carol", false)
	return w
}

// member creates a person of organization org with a sync root (its
// owner recorded, as the API's create does) and returns them, a token
// and the root.
func (f *fixture) member(org uint64, username string, admin bool) (account.Person, string, vfs.Root) {
	f.t.Helper()
	ctx := context.Background()
	p, err := f.accounts.CreatePerson(ctx, account.PersonInput{
		OrganizationID: org, Username: username, Email: username + "@example.com", Password: fixturePassword, Admin: admin,
	})
	if err != nil {
		f.t.Fatal(err)
	}
	root, err := share.New(share.Options{FS: f.fs, Accounts: f.accounts}).NewRoot(ctx, p, username, vfs.RootSync)
	if err != nil {
		f.t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, p.ID, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	p, _ = f.accounts.Person(ctx, p.ID)
	return p, toks.AccessToken, root
}

func orgPath(id uint64, rest string) string {
	return fmt.Sprintf("/api/2/organization/%d%s", id, rest)
}

// TestOrganizationAccess walks the organization routes as the permission
// model's callers (docs/api.md "Who may do what"): no token; an
// administrator of another top-level organization; a plain person of
// the parent; a plain person of the child; the child's administrator;
// the parent's administrator. Routes that change state for good
// (disable, enable, delete) are walked here by those refused;
// TestOrganizationLifecycle walks the rest.
func TestOrganizationAccess(t *testing.T) {
	w := newOrgWorld(t)
	callers := []struct{ name, token string }{
		{"no token", ""},
		{"admin of another organization", w.otherAdmin},
		{"plain person of the parent", w.token},
		{"plain person of the child", w.carolToken},
		{"admin of the child", w.childAdmin},
		{"admin of the parent", w.parentAdmin},
	}
	// want holds the status per caller, in callers' order.
	rows := []struct {
		method, path string
		form         url.Values
		want         [6]int
	}{
		{"GET", orgPath(w.child.ID, ""), nil, [6]int{401, 404, 404, 200, 200, 200}},
		{"GET", orgPath(w.org.ID, ""), nil, [6]int{401, 404, 200, 404, 404, 200}},
		{"GET", orgPath(w.child.ID, "/license_key"), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.org.ID, "/license_key"), nil, [6]int{401, 404, 403, 404, 404, 200}},
		{"POST", orgPath(w.child.ID, "/update"), url.Values{"description": {"d"}}, [6]int{401, 404, 404, 403, 200, 200}},
		{"POST", orgPath(w.org.ID, "/update"), url.Values{"description": {"d"}}, [6]int{401, 404, 403, 404, 404, 200}},
		{"POST", orgPath(w.child.ID, "/policy/update"), url.Values{"backups_enabled": {"true"}}, [6]int{401, 404, 404, 403, 403, 200}},
		// The administrators of a top-level organization set its policy.
		{"POST", orgPath(w.org.ID, "/policy/update"), url.Values{"backups_enabled": {"true"}}, [6]int{401, 404, 403, 404, 404, 200}},
		{"POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"Sub"}}, [6]int{401, 404, 404, 403, 200, 200}},
		{"POST", orgPath(w.org.ID, "/organizations/create"), url.Values{"name": {"Sub"}}, [6]int{401, 404, 403, 404, 404, 200}},
		{"GET", orgPath(w.child.ID, "/organizations"), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.child.ID, "/roots"), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.child.ID, fmt.Sprintf("/root/%d", w.carolRoot.ID)), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.child.ID, "/machines"), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.child.ID, "/auth_sources"), nil, [6]int{401, 404, 404, 403, 200, 200}},
		{"GET", orgPath(w.org.ID, "/organizations"), nil, [6]int{401, 404, 403, 404, 404, 200}},
		{"GET", orgPath(w.org.ID, "/roots"), nil, [6]int{401, 404, 403, 404, 404, 200}},
		{"GET", orgPath(w.org.ID, "/machines"), nil, [6]int{401, 404, 403, 404, 404, 200}},
		{"GET", orgPath(w.org.ID, "/auth_sources"), nil, [6]int{401, 404, 403, 404, 404, 200}},
		// Refused state changes: the child's own administrators, and
		// anyone on a top-level organization.
		{"POST", orgPath(w.child.ID, "/disable"), nil, [6]int{401, 404, 404, 403, 403, 0}},
		{"POST", orgPath(w.child.ID, "/enable"), nil, [6]int{401, 404, 404, 403, 403, 0}},
		{"POST", orgPath(w.child.ID, "/delete"), nil, [6]int{401, 404, 404, 403, 403, 0}},
		{"POST", orgPath(w.org.ID, "/disable"), nil, [6]int{401, 404, 403, 404, 404, 403}},
		{"POST", orgPath(w.org.ID, "/delete"), nil, [6]int{401, 404, 403, 404, 404, 403}},
		{"POST", orgPath(w.other.ID, "/delete"), nil, [6]int{401, 403, 404, 404, 404, 404}},
		// Ids that do not exist or are not ids look like ids out of sight.
		{"GET", orgPath(999999, ""), nil, [6]int{401, 404, 404, 404, 404, 404}},
		{"GET", "/api/2/organization/0", nil, [6]int{401, 404, 404, 404, 404, 404}},
		{"GET", "/api/2/organization/01/roots", nil, [6]int{401, 404, 404, 404, 404, 404}},
	}
	for _, row := range rows {
		for i, c := range callers {
			want := row.want[i]
			if want == 0 {
				continue
			}
			st, body := w.send(row.method, row.path, c.token, row.form)
			if st != want {
				t.Errorf("%s %s as %s: %d %s, want %d", row.method, row.path, c.name, st, body, want)
			}
		}
	}
}

// jsonKeys returns the keys of a JSON object, sorted.
func jsonKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	decode(t, raw, &m)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func sortedFields(s string) []string {
	f := strings.Fields(s)
	slices.Sort(f)
	return f
}

var (
	organizationKeys = sortedFields(`id parent_id name slug description email hostname created active trial_until
		privacy_mode throttled bandwidth_throttle default_encryption email_server_id email_templates plan_id policy
		share_disclaimer subscription_uuid throttle_exception_days throttle_exception_dow throttle_exception_end
		throttle_exception_start throttle_exception_throttle type`)
	policyKeys = sortedFields(`company_id ad_enabled admin_browse_files admin_browse_remote admin_create_users
		backups_enabled branding_enabled change_password_frequency deactivate_token_frequency excluded_extensions
		locked_extensions file_server_enabled max_file_size monthly_cost_cents monthly_cost_currency num_orgs_maximum
		num_users_maximum num_users_minimum psa_enabled purge_deleted purge_deleted_frequency require_mobile_lock
		require_two_step_auth secure_shares service_plans_enabled space_quota space_quota_formatted trial_length_days
		trim_revisions trim_revisions_x user_create_backups user_create_shares user_lock_files user_purge_deleted
		user_trim_revisions webdav_enabled type`)
	machineKeys = sortedFields(`id dns_name guid created last_login last_disconnect os_type os_version agent_version
		bandwidth_throttle throttled throttle_exception_days throttle_exception_dow throttle_exception_end
		throttle_exception_start throttle_exception_throttle machine_type health_report_period_minutes locked
		manual_collisions nickname type`)
	rootKeys  = sortedFields(`id name path is_locked root_type space_used space_used_formatted permissions type`)
	pageKeys  = sortedFields(`offset results total`)
	okBody    = `{"status":"ok"}`
	nullables = []string{"bandwidth_throttle", "email_server_id", "plan_id", "share_disclaimer", "subscription_uuid",
		"throttle_exception_days", "throttle_exception_dow", "throttle_exception_end", "throttle_exception_start",
		"throttle_exception_throttle"}
)

// page is one paged answer with raw results.
type rawPage struct {
	Offset  int               `json:"offset"`
	Results []json.RawMessage `json:"results"`
	Total   int               `json:"total"`
}

// TestOrganizationObjects pins the exact objects of every route: the
// organization of 2.6 with its full policy, create and update, the
// license key, and the paged lists with their objects.
func TestOrganizationObjects(t *testing.T) {
	w := newOrgWorld(t)
	ctx := context.Background()
	pa := w.parentAdmin

	st, body := w.send("GET", orgPath(w.child.ID, ""), pa, nil)
	if st != 200 {
		t.Fatalf("GET: %d %s", st, body)
	}
	if got := jsonKeys(t, body); !slices.Equal(got, organizationKeys) {
		t.Fatalf("organization keys %v, want %v", got, organizationKeys)
	}
	var raw map[string]json.RawMessage
	decode(t, body, &raw)
	if got := jsonKeys(t, raw["policy"]); !slices.Equal(got, policyKeys) {
		t.Fatalf("policy keys %v, want %v", got, policyKeys)
	}
	for _, k := range append(nullables, "trial_until") {
		if string(raw[k]) != "null" {
			t.Errorf("%s = %s, want null", k, raw[k])
		}
	}
	var o organizationBody
	decode(t, body, &o)
	if o.ID != w.child.ID || o.ParentID != w.org.ID || o.Name != "Labs" || o.Slug != "labs" || !o.Active ||
		o.Type != "organization" || o.Policy.CompanyID != w.child.ID || o.Policy.Type != "policy" || len(o.Created) != 19 {
		t.Fatalf("organization %+v", o)
	}
	var top organizationBody
	_, body = w.send("GET", orgPath(w.org.ID, ""), pa, nil)
	decode(t, body, &top)
	if top.ParentID != 0 {
		t.Fatalf("a top-level organization's parent_id %d, want 0", top.ParentID)
	}

	// Create with every field, then update some.
	st, body = w.send("POST", orgPath(w.child.ID, "/organizations/create"), pa, url.Values{
		"name": {"Lab 9"}, "slug": {"lab-nine"}, "description": {"nine"}, "email": {"lab9@example.com"},
		"hostname": {"lab9.example.com"}, "trial_until": {"2031-02-03T04:05:06"},
	})
	if st != 200 {
		t.Fatalf("create: %d %s", st, body)
	}
	var made organizationBody
	decode(t, body, &made)
	if got := jsonKeys(t, body); !slices.Equal(got, organizationKeys) {
		t.Fatalf("created keys %v", got)
	}
	if made.ParentID != w.child.ID || made.Name != "Lab 9" || made.Slug != "lab-nine" || made.Description != "nine" ||
		made.Email != "lab9@example.com" || made.Hostname != "lab9.example.com" || made.TrialUntil == nil ||
		*made.TrialUntil != "2031-02-03T04:05:06" || !made.Active {
		t.Fatalf("created %+v", made)
	}
	st, body = w.send("POST", orgPath(made.ID, "/update"), pa, url.Values{
		"name": {" Lab Nine "}, "trial_until": {""}, "parent_id": {fmt.Sprint(w.child.ID)},
	})
	var upd organizationBody
	decode(t, body, &upd)
	if st != 200 || upd.Name != "Lab Nine" || upd.Slug != "lab-nine" || upd.TrialUntil != nil || upd.Description != "nine" {
		t.Fatalf("update: %d %s", st, body)
	}

	// Policy: every field by its name.
	pol := url.Values{
		"ad_enabled": {"true"}, "admin_browse_files": {"1"}, "admin_browse_remote": {"true"}, "admin_create_users": {"false"},
		"backups_enabled": {"0"}, "branding_enabled": {"true"}, "change_password_frequency": {"720h"},
		"deactivate_token_frequency": {"24h"}, "excluded_extensions": {".exe,.bat"}, "locked_extensions": {".psd"},
		"file_server_enabled": {"true"}, "max_file_size": {"1048576"}, "monthly_cost_cents": {"999"},
		"monthly_cost_currency": {"EUR"}, "num_orgs_maximum": {"5"}, "num_users_maximum": {"50"}, "num_users_minimum": {"2"},
		"psa_enabled": {"true"}, "purge_deleted": {"true"}, "purge_deleted_frequency": {"168h"},
		"require_mobile_lock": {"true"}, "require_two_step_auth": {"true"}, "secure_shares": {"true"},
		"service_plans_enabled": {"true"}, "space_quota": {"1000000000"}, "trial_length_days": {"30"},
		"trim_revisions": {"true"}, "trim_revisions_x": {"10"}, "user_create_backups": {"false"},
		"user_create_shares": {"false"}, "user_lock_files": {"false"}, "user_purge_deleted": {"false"},
		"user_trim_revisions": {"false"}, "webdav_enabled": {"false"},
	}
	st, body = w.send("POST", orgPath(made.ID, "/policy/update"), pa, pol)
	if st != 200 {
		t.Fatalf("policy/update: %d %s", st, body)
	}
	var withPol organizationBody
	decode(t, body, &withPol)
	cpf := "720h"
	want := policyBody{
		CompanyID: made.ID, ADEnabled: true, AdminBrowseFiles: true, AdminBrowseRemote: true, BrandingEnabled: true,
		ChangePasswordFrequency: &cpf, DeactivateTokenFrequency: "24h", ExcludedExtensions: ".exe,.bat",
		LockedExtensions: ".psd", FileServerEnabled: true, MaxFileSize: 1048576, MonthlyCostCents: 999,
		MonthlyCostCurrency: "EUR", NumOrgsMaximum: 5, NumUsersMaximum: 50, NumUsersMinimum: 2, PSAEnabled: true,
		PurgeDeleted: true, PurgeDeletedFrequency: "168h", RequireMobileLock: true, RequireTwoStepAuth: true,
		SecureShares: true, ServicePlansEnabled: true, SpaceQuota: "1000000000", SpaceQuotaFormatted: "1.0 GB",
		TrialLengthDays: 30, TrimRevisions: true, TrimRevisionsX: "10", Type: "policy",
	}
	got := withPol.Policy
	if got.ChangePasswordFrequency == nil || *got.ChangePasswordFrequency != cpf {
		t.Fatalf("change_password_frequency %v", got.ChangePasswordFrequency)
	}
	got.ChangePasswordFrequency = &cpf
	if got != want {
		t.Fatalf("policy\n got %+v\nwant %+v", got, want)
	}
	// A field left out is kept; "" clears change_password_frequency;
	// derived fields and fields the policy does not have are ignored.
	_, body = w.send("POST", orgPath(made.ID, "/policy/update"), pa, url.Values{
		"change_password_frequency": {""}, "company_id": {"1"}, "space_quota_formatted": {"x"}, "bogus": {"x"}})
	decode(t, body, &withPol)
	if withPol.Policy.ChangePasswordFrequency != nil || withPol.Policy.NumUsersMaximum != 50 || withPol.Policy.CompanyID != made.ID {
		t.Fatalf("second policy/update: %+v", withPol.Policy)
	}

	// License key: berth's route, and GET by the key.
	st, body = w.send("GET", orgPath(w.child.ID, "/license_key"), w.childAdmin, nil)
	var lk licenseKeyBody
	decode(t, body, &lk)
	if st != 200 || lk.Type != "license_key" || len(lk.LicenseKey) != 39 || !slices.Equal(jsonKeys(t, body), []string{"license_key", "type"}) {
		t.Fatalf("license_key: %d %s", st, body)
	}
	for _, c := range []struct {
		name, token, key string
		want             int
	}{
		{"admin of the parent", pa, lk.LicenseKey, 200},
		{"admin of the parent, lower case without dashes", pa, strings.ToLower(strings.ReplaceAll(lk.LicenseKey, "-", "")), 200},
		{"plain person of the organization", w.carolToken, lk.LicenseKey, 200},
		{"admin of another organization", w.otherAdmin, lk.LicenseKey, 404},
		{"plain person of the parent", w.token, lk.LicenseKey, 404},
		{"no token", "", lk.LicenseKey, 401},
		{"a key that is no key", pa, "AAAA-BBBB", 404},
		{"a key nobody has", pa, strings.Repeat("A", 32), 404},
	} {
		st, body := w.send("GET", "/api/2/organization/"+c.key, c.token, nil)
		if st != c.want {
			t.Errorf("by license key as %s: %d %s, want %d", c.name, st, body, c.want)
			continue
		}
		if st == 200 {
			var byKey organizationBody
			decode(t, body, &byKey)
			if byKey.ID != w.child.ID {
				t.Errorf("by license key as %s: organization %d", c.name, byKey.ID)
			}
		}
	}

	// The lists.
	if _, err := w.accounts.UpsertMachine(ctx, w.carol.ID, account.MachineInput{DNSName: "carol-laptop", OSType: "win", OSVersion: "11"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  string
		total int
		keys  []string
		check func(t *testing.T, first []byte)
	}{
		{orgPath(w.child.ID, "/organizations"), 1, organizationKeys, func(t *testing.T, first []byte) {
			var o organizationBody
			decode(t, first, &o)
			if o.ID != made.ID {
				t.Errorf("child %d, want %d", o.ID, made.ID)
			}
		}},
		// The child's roots: its two persons' sync roots.
		{orgPath(w.child.ID, "/roots"), 2, rootKeys, func(t *testing.T, first []byte) {
			var r rootJSON
			decode(t, first, &r)
			if r.ID != w.childAdminUser.RootID || r.RootType != "sync" || r.Permissions == nil || len(r.Permissions) != 0 {
				t.Errorf("root %+v (the parent's administrator may not browse it: no permissions)", r)
			}
		}},
		{orgPath(w.child.ID, "/machines"), 1, machineKeys, func(t *testing.T, first []byte) {
			var m machineBody
			decode(t, first, &m)
			if m.DNSName != "carol-laptop" || m.OSType != "win" || m.Type != "machine" || m.GUID == "" || m.LastLogin == nil || m.LastDisconnect != nil || m.AgentVersion != nil {
				t.Errorf("machine %+v", m)
			}
		}},
		{orgPath(w.child.ID, "/auth_sources"), 0, nil, nil},
	} {
		st, body := w.send("GET", c.path, pa, nil)
		if st != 200 || !slices.Equal(jsonKeys(t, body), pageKeys) {
			t.Fatalf("%s: %d %s", c.path, st, body)
		}
		var p rawPage
		decode(t, body, &p)
		if p.Total != c.total || len(p.Results) != c.total || p.Offset != 0 {
			t.Fatalf("%s: %s, want %d results", c.path, body, c.total)
		}
		if c.total > 0 {
			if got := jsonKeys(t, p.Results[0]); !slices.Equal(got, c.keys) {
				t.Errorf("%s: keys %v, want %v", c.path, got, c.keys)
			}
			c.check(t, p.Results[0])
		}
	}

	// root/<root_id>: a root of that organization only.
	st, body = w.send("GET", orgPath(w.child.ID, fmt.Sprintf("/root/%d", w.carolRoot.ID)), pa, nil)
	if st != 200 || !slices.Equal(jsonKeys(t, body), rootKeys) {
		t.Fatalf("root: %d %s", st, body)
	}
	for _, path := range []string{
		orgPath(w.org.ID, fmt.Sprintf("/root/%d", w.carolRoot.ID)), // a root of its child, not its own
		orgPath(w.child.ID, fmt.Sprintf("/root/%d", w.root.ID)),    // alice's, of the parent
		orgPath(w.child.ID, "/root/999999"), orgPath(w.child.ID, "/root/x"),
	} {
		st, body := w.send("GET", path, pa, nil)
		wantError(t, st, body, http.StatusNotFound, "not_found")
	}
	// The owner sees their own permissions on it.
	w.send("POST", orgPath(w.child.ID, "/policy/update"), pa, url.Values{"admin_browse_files": {"true"}})
	st, body = w.send("GET", orgPath(w.child.ID, fmt.Sprintf("/root/%d", w.carolRoot.ID)), pa, nil)
	var r rootJSON
	decode(t, body, &r)
	if st != 200 || !slices.Equal(r.Permissions, []string{"FILE_VIEW", "FILE_READ"}) {
		t.Fatalf("root with admin_browse_files: %d %s", st, body)
	}
}

// TestOrganizationBadInputs: every client input gets a clear error.
func TestOrganizationBadInputs(t *testing.T) {
	w := newOrgWorld(t)
	pa := w.parentAdmin
	cases := []struct {
		name, method, path string
		form               url.Values
		status             int
		code, desc         string
	}{
		{"create without name", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"slug": {"x"}}, 400, "invalid_request", "name"},
		{"create with an empty name", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {" "}}, 400, "invalid_request", "name"},
		{"create with a bad trial_until", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"x"}, "trial_until": {"2031-02-03"}}, 400, "invalid_datetime_format", "trial_until"},
		{"create with a bad e-mail", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"x"}, "email": {"nope"}}, 400, "invalid_request", "email"},
		{"create with a bad slug", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"x"}, "slug": {"Not A Slug"}}, 400, "invalid_request", "slug"},
		{"create under another parent", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"x"}, "parent_id": {fmt.Sprint(w.org.ID)}}, 400, "invalid_request", "parent_id"},
		{"update moving the organization", "POST", orgPath(w.child.ID, "/update"), url.Values{"parent_id": {fmt.Sprint(w.other.ID)}}, 400, "invalid_request", "parent_id"},
		{"update with a parent_id that is no id", "POST", orgPath(w.child.ID, "/update"), url.Values{"parent_id": {"x"}}, 400, "invalid_request", "parent_id"},
		{"update with a bad trial_until", "POST", orgPath(w.child.ID, "/update"), url.Values{"trial_until": {"2031-02-03 04:05:06"}}, 400, "invalid_datetime_format", "trial_until"},
		// The store cannot read invalid UTF-8 back: such a description
		// was stored, and every request that read the organization failed.
		{"create with a description of invalid UTF-8", "POST", orgPath(w.child.ID, "/organizations/create"), url.Values{"name": {"x"}, "description": {"D\xffx"}}, 400, "invalid_request", "description"},
		{"update with a description of invalid UTF-8", "POST", orgPath(w.child.ID, "/update"), url.Values{"description": {"D\xffx"}}, 400, "invalid_request", "description"},
		{"policy with a bad boolean", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"webdav_enabled": {"yes"}}, 400, "invalid_request", "webdav_enabled"},
		// One reading of booleans everywhere (parseBool): TRUE is refused,
		// as include_children=TRUE is, not guessed at.
		{"policy with an upper-case boolean", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"webdav_enabled": {"TRUE"}}, 400, "invalid_request", "webdav_enabled"},
		{"policy with a bad number", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"max_file_size": {"1 MB"}}, 400, "invalid_request", "max_file_size"},
		{"policy with a negative number", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"num_users_maximum": {"-1"}}, 400, "invalid_request", "num_users_maximum"},
		{"policy with a bad quota", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"space_quota": {"10 GB"}}, 400, "invalid_request", "space_quota"},
		{"policy with a bad duration", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"purge_deleted_frequency": {"weekly"}}, 400, "invalid_request", "purge_deleted_frequency"},
		{"policy with a bad extension list", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"excluded_extensions": {"exe"}}, 400, "invalid_request", "excluded_extensions"},
		{"policy with a bad currency", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"monthly_cost_currency": {"euro"}}, 400, "invalid_request", "monthly_cost_currency"},
		{"policy with a bad trim_revisions_x", "POST", orgPath(w.child.ID, "/policy/update"), url.Values{"trim_revisions_x": {"0"}}, 400, "invalid_request", "trim_revisions_x"},
		{"page with limit 0", "GET", orgPath(w.child.ID, "/organizations?limit=0"), nil, 400, "invalid_request", "limit"},
		{"page with limit 101", "GET", orgPath(w.child.ID, "/roots?limit=101"), nil, 400, "invalid_request", "limit"},
		{"page with a negative offset", "GET", orgPath(w.child.ID, "/machines?offset=-1"), nil, 400, "invalid_request", "offset"},
		{"page with an offset that is no number", "GET", orgPath(w.child.ID, "/auth_sources?offset=x"), nil, 400, "invalid_request", "offset"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body := w.send(c.method, c.path, pa, c.form)
			wantError(t, st, body, c.status, c.code)
			var e errorBody
			decode(t, body, &e)
			if !strings.Contains(e.Description, c.desc) {
				t.Errorf("description %q does not name %q", e.Description, c.desc)
			}
		})
	}
	// Nothing was stored by the refused ones.
	var o organizationBody
	_, body := w.send("GET", orgPath(w.child.ID, ""), pa, nil)
	decode(t, body, &o)
	if o.ParentID != w.org.ID || !o.Policy.WebDAVEnabled || o.Policy.SpaceQuota != "0" {
		t.Fatalf("after the refusals: %+v", o)
	}
	if _, body := w.send("GET", orgPath(w.child.ID, "/organizations"), pa, nil); !strings.Contains(string(body), `"total":0`) {
		t.Fatalf("a refused create made an organization: %s", body)
	}
}

// TestOrganizationLimitAndPaging: num_orgs_maximum bounds the children,
// and the organizations list pages through them in id order.
func TestOrganizationLimitAndPaging(t *testing.T) {
	w := newOrgWorld(t)
	pa := w.parentAdmin
	if st, body := w.send("POST", orgPath(w.child.ID, "/policy/update"), pa, url.Values{"num_orgs_maximum": {"5"}}); st != 200 {
		t.Fatalf("policy: %d %s", st, body)
	}
	var ids []uint64
	for i := range 5 {
		st, body := w.send("POST", orgPath(w.child.ID, "/organizations/create"), w.childAdmin, url.Values{"name": {fmt.Sprint("Team ", i)}})
		if st != 200 {
			t.Fatalf("create %d: %d %s", i, st, body)
		}
		var o organizationBody
		decode(t, body, &o)
		ids = append(ids, o.ID)
	}
	st, body := w.send("POST", orgPath(w.child.ID, "/organizations/create"), w.childAdmin, url.Values{"name": {"Team 5"}})
	wantError(t, st, body, http.StatusConflict, "policy_error")

	for _, c := range []struct {
		query string
		want  []uint64
	}{
		{"", ids},
		{"?limit=2", ids[:2]},
		{"?offset=1&limit=2", ids[1:3]},
		{"?offset=4", ids[4:]},
		{"?offset=5", nil},
		{"?offset=500&limit=100", nil},
	} {
		st, body := w.send("GET", orgPath(w.child.ID, "/organizations"+c.query), pa, nil)
		var p pagedBody[organizationBody]
		decode(t, body, &p)
		if st != 200 || p.Total != 5 || len(p.Results) != len(c.want) || p.Results == nil {
			t.Fatalf("%s: %d %s", c.query, st, body)
		}
		for i, o := range p.Results {
			if o.ID != c.want[i] {
				t.Fatalf("%s: result %d is %d, want %d", c.query, i, o.ID, c.want[i])
			}
		}
	}
}

// TestOrganizationLifecycle: disable refuses the persons of the
// organization and of those below it on their next request, enable
// ends their sessions from before and serves them once signed in again, delete answers 410 root_deleted on their roots and
// takes the organization out of its parent's list.
func TestOrganizationLifecycle(t *testing.T) {
	w := newOrgWorld(t)
	ctx := context.Background()
	pa := w.parentAdmin
	// A grandchild with a person and a root, below the child.
	grand, err := w.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Grand", ParentID: w.child.ID})
	if err != nil {
		t.Fatal(err)
	}
	_, daveToken, daveRoot := w.member(grand.ID, "dave", false)
	if st, body := w.send("POST", orgPath(w.child.ID, "/policy/update"), pa, url.Values{"admin_browse_files": {"true"}}); st != 200 {
		t.Fatalf("policy: %d %s", st, body)
	}
	served := func(token string) int {
		st, _ := w.send("GET", "/api/2/person", token, nil)
		return st
	}
	for _, tok := range []string{w.carolToken, daveToken, w.childAdmin} {
		if st := served(tok); st != 200 {
			t.Fatalf("before: %d", st)
		}
	}

	if st, body := w.send("POST", orgPath(w.child.ID, "/disable"), pa, nil); st != 200 || strings.TrimSpace(string(body)) != okBody {
		t.Fatalf("disable: %d %s", st, body)
	}
	for _, tok := range []string{w.carolToken, daveToken, w.childAdmin} {
		if st := served(tok); st != http.StatusUnauthorized {
			t.Fatalf("after disable: %d, want 401", st)
		}
	}
	var o organizationBody
	_, body := w.send("GET", orgPath(w.child.ID, ""), pa, nil)
	decode(t, body, &o)
	if o.Active {
		t.Fatal("disabled organization reads active")
	}
	// Disabling twice is fine; a disabled organization takes no children.
	if st, _ := w.send("POST", orgPath(w.child.ID, "/disable"), pa, nil); st != 200 {
		t.Fatalf("second disable: %d", st)
	}
	st, body := w.send("POST", orgPath(w.child.ID, "/organizations/create"), pa, url.Values{"name": {"x"}})
	wantError(t, st, body, http.StatusBadRequest, "invalid_request")

	if st, body := w.send("POST", orgPath(w.child.ID, "/enable"), pa, nil); st != 200 || strings.TrimSpace(string(body)) != okBody {
		t.Fatalf("enable: %d %s", st, body)
	}
	// Enabled again, the sessions from before are ended; each person
	// signs in again and is served.
	for _, tok := range []string{w.carolToken, daveToken, w.childAdmin} {
		if st := served(tok); st != http.StatusUnauthorized {
			t.Fatalf("after enable, a session from before: %d, want 401", st)
		}
	}
	for _, p := range []struct {
		name string
		tok  *string
	}{{"carol", &w.carolToken}, {"dave", &daveToken}, {"cadmin", &w.childAdmin}} {
		tr := w.grant(url.Values{"grant_type": {"password"}, "client_id": {"anchor"}, "username": {p.name}, "password": {fixturePassword}})
		if st := served(tr.AccessToken); st != 200 {
			t.Fatalf("after enable, %s signed in again: %d", p.name, st)
		}
		*p.tok = tr.AccessToken
	}

	// The parent's administrator browses carol's root until the delete.
	rootPath := fmt.Sprintf("/api/2/files/%d", w.carolRoot.ID)
	if st, body := w.send("GET", rootPath, pa, nil); st != 200 {
		t.Fatalf("browse before delete: %d %s", st, body)
	}
	if st, body := w.send("POST", orgPath(w.child.ID, "/delete"), pa, nil); st != 200 || strings.TrimSpace(string(body)) != okBody {
		t.Fatalf("delete: %d %s", st, body)
	}
	st, body = w.send("GET", rootPath, pa, nil)
	wantError(t, st, body, http.StatusGone, "root_deleted")
	for _, id := range []uint64{w.carolRoot.ID, daveRoot.ID, w.childAdminUser.RootID} {
		if _, err := w.fs.Root(ctx, id); err == nil || !strings.Contains(err.Error(), "deleted") {
			t.Errorf("root %d after the delete: %v, want root_deleted", id, err)
		}
		if _, err := share.New(share.Options{FS: w.fs, Accounts: w.accounts}).Root(ctx, callerOf0(t, w, pa), id); err == nil {
			t.Errorf("share.Root(%d) after the delete: no error", id)
		}
	}
	for _, tok := range []string{w.carolToken, daveToken, w.childAdmin} {
		if st := served(tok); st != http.StatusUnauthorized {
			t.Fatalf("after delete: %d, want 401", st)
		}
	}
	for _, path := range []string{orgPath(w.child.ID, ""), orgPath(grand.ID, ""), orgPath(w.child.ID, "/roots"), orgPath(w.child.ID, "/enable"), orgPath(w.child.ID, "/delete")} {
		method := "GET"
		if strings.HasSuffix(path, "able") || strings.HasSuffix(path, "delete") {
			method = "POST"
		}
		st, body := w.send(method, path, pa, nil)
		wantError(t, st, body, http.StatusNotFound, "not_found")
	}
	var p pagedBody[organizationBody]
	_, body = w.send("GET", orgPath(w.org.ID, "/organizations"), pa, nil)
	decode(t, body, &p)
	if p.Total != 0 || len(p.Results) != 0 {
		t.Fatalf("the parent's list after the delete: %s", body)
	}
}

// callerOf0 is the caller a token stands for, as rest sees it.
func callerOf0(t *testing.T, w *orgWorld, token string) account.Caller {
	t.Helper()
	c, err := w.accounts.AccessCaller(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// BenchmarkDeleteOrganization times the delete of an organization whose
// subtree holds 10 organizations of 100 roots each: one vfs delete per
// root, paged through account's indexes.
func BenchmarkDeleteOrganization(b *testing.B) {
	f := newFixture(b)
	ctx := context.Background()
	_, admin, _ := f.member(f.org.ID, "padmin", true)
	for b.Loop() {
		b.StopTimer()
		top, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Doomed", ParentID: f.org.ID})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 10 {
			o, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: fmt.Sprint("Team ", i), ParentID: top.ID})
			if err != nil {
				b.Fatal(err)
			}
			for j := range 100 {
				r, err := f.fs.CreateRoot(ctx, fmt.Sprint("share ", j), vfs.RootShare)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := f.accounts.AddRoot(ctx, account.RootOwner{RootID: r.ID, OrganizationID: o.ID, Type: "share"}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		if st, body := f.send("POST", orgPath(top.ID, "/delete"), admin, nil); st != 200 {
			b.Fatalf("delete: %d %s", st, body)
		}
	}
}
