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
)

// TestDevicePasswordRoutes: create shows the password once, the list
// never; the fields, the machine, paging, revocation and bad inputs.
// Who may do what is the isolation walk's (isolation_test.go).
func TestDevicePasswordRoutes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	me := f.person.ID
	base := fmt.Sprintf("/api/2/person/%d/", me)

	st, b := f.postForm(base+"device_passwords/create", url.Values{"name": {"laptop"}, "dns_name": {"laptop.local"}, "os_type": {"linux"}, "current_password": {fixturePassword}})
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, b)
	}
	var raw map[string]any
	decode(t, b, &raw)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range raw {
			if !yield(k) {
				return
			}
		}
	})
	if strings.Join(keys, " ") != "created id machine_id name password person_id type" {
		t.Fatalf("create's fields: %v", keys)
	}
	var made devicePasswordBody
	decode(t, b, &made)
	if len(made.Password) != 32 || made.Name != "laptop" || made.PersonID != me || made.Type != "device_password" || made.Created == "" {
		t.Fatalf("create: %+v", made)
	}
	m, err := f.accounts.Machine(ctx, made.MachineID)
	if err != nil || m.PersonID != me || m.DNSName != "laptop.local" || m.OSType != "linux" {
		t.Fatalf("its machine: %+v %v", m, err)
	}
	if c, ok, err := f.accounts.DeviceCallerRef(ctx, f.person.Username, made.Password); !ok || err != nil || c.MachineID != made.MachineID {
		t.Fatalf("the password does not sign in: %v %v", ok, err)
	}
	// It serves WebDAV alone: the password grant, where a two-step
	// code would follow the account's password, refuses it.
	st, b = f.oauthPost("/oauth/token", passwordForm("password", made.Password))
	wantError(t, st, b, http.StatusBadRequest, "invalid_grant")

	// On an existing machine of the person's, and two more for paging.
	st, b = f.postForm(base+"device_passwords/create", url.Values{"name": {"phone"}, "machine_id": {fmt.Sprint(made.MachineID)}, "current_password": {fixturePassword}})
	var second devicePasswordBody
	decode(t, b, &second)
	if st != http.StatusOK || second.MachineID != made.MachineID {
		t.Fatalf("on the same machine: %d %s", st, b)
	}
	f.postForm(base+"device_passwords/create", url.Values{"name": {"tablet"}, "current_password": {fixturePassword}})

	for _, tc := range []struct {
		query      string
		offset     int
		names      string
		total      int
		wantStatus int
	}{
		{"", 0, "laptop phone tablet", 3, http.StatusOK},
		{"?limit=2", 0, "laptop phone", 3, http.StatusOK},
		{"?offset=2", 2, "tablet", 3, http.StatusOK},
		{"?offset=5", 5, "", 3, http.StatusOK},
		{"?limit=0", 0, "", 0, http.StatusBadRequest},
		{"?offset=-1", 0, "", 0, http.StatusBadRequest},
	} {
		t.Run("list"+tc.query, func(t *testing.T) {
			st, b := f.get(base + "device_passwords" + tc.query)
			if tc.wantStatus != http.StatusOK {
				wantError(t, st, b, tc.wantStatus, "invalid_request")
				return
			}
			if st != http.StatusOK || strings.Contains(string(b), `"password"`) {
				t.Fatalf("%d %s", st, b)
			}
			var page pagedBody[devicePasswordBody]
			decode(t, b, &page)
			var names []string
			for _, d := range page.Results {
				names = append(names, d.Name)
			}
			if strings.Join(names, " ") != tc.names || page.Total != tc.total || page.Offset != tc.offset {
				t.Fatalf("%+v", page)
			}
		})
	}

	other, _, _ := f.addPerson("bob")
	bobs, err := f.accounts.UpsertMachine(ctx, other.ID, account.MachineInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		form       url.Values
		wantStatus int
		code       string
		mentions   string
		query      string // the URL's
	}{
		// A device password outlives the token it is made with: the
		// current password again, so a stolen token is not made into one.
		{"no current_password", url.Values{"name": {"x"}}, http.StatusBadRequest, "invalid_request", "current_password is required to make a device password", ""},
		{"a wrong current_password", url.Values{"name": {"x"}, "current_password": {"not the password"}}, http.StatusForbidden, "forbidden", "current_password is wrong", ""},
		{"no name", url.Values{"current_password": {fixturePassword}}, http.StatusBadRequest, "invalid_request", "name", ""},
		{"a long name", url.Values{"name": {strings.Repeat("x", 101)}, "current_password": {fixturePassword}}, http.StatusBadRequest, "invalid_request", "name", ""},
		{"a long dns_name", url.Values{"name": {"x"}, "dns_name": {strings.Repeat("x", 256)}, "current_password": {fixturePassword}}, http.StatusBadRequest, "invalid_request", "dns_name", ""},
		{"machine_id not an id", url.Values{"name": {"x"}, "machine_id": {"abc"}, "current_password": {fixturePassword}}, http.StatusBadRequest, "invalid_request", "machine_id", ""},
		{"another person's machine", url.Values{"name": {"x"}, "machine_id": {fmt.Sprint(bobs.ID)}, "current_password": {fixturePassword}}, http.StatusNotFound, "not_found", "", ""},
		// Passwords end up in logs and histories from a URL: the body only.
		{"current_password in the URL", url.Values{"name": {"x"}}, http.StatusBadRequest, "invalid_request", "current_password is taken from the request body only", "?current_password=" + url.QueryEscape(fixturePassword)},
	} {
		t.Run("create, "+tc.name, func(t *testing.T) {
			st, b := f.postForm(base+"device_passwords/create"+tc.query, tc.form)
			wantError(t, st, b, tc.wantStatus, tc.code)
			if !strings.Contains(string(b), tc.mentions) {
				t.Fatalf("the description does not name %s: %s", tc.mentions, b)
			}
		})
	}

	for _, tc := range []struct {
		name, path string
		wantStatus int
	}{
		{"revoke", fmt.Sprintf("device_password/%d/delete", made.ID), http.StatusOK},
		{"revoke again", fmt.Sprintf("device_password/%d/delete", made.ID), http.StatusNotFound},
		{"not an id", "device_password/x/delete", http.StatusNotFound},
		{"unknown", "device_password/99999/delete", http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := f.postForm(base+tc.path, nil)
			if tc.wantStatus == http.StatusOK {
				if st != http.StatusOK {
					t.Fatalf("%d %s", st, b)
				}
				return
			}
			wantError(t, st, b, tc.wantStatus, "not_found")
		})
	}
	if _, ok, err := f.accounts.DeviceCallerRef(ctx, f.person.Username, made.Password); ok || err == nil {
		t.Fatalf("a revoked password signs in: %v %v", ok, err)
	}
	st, b = f.get(base + "device_passwords")
	var page pagedBody[devicePasswordBody]
	decode(t, b, &page)
	if st != http.StatusOK || page.Total != 2 {
		t.Fatalf("after revoking: %d %s", st, b)
	}
}

// TestDeleteMachineRoute: deleting a machine ends its sessions and its
// device passwords at the next request; others' machines are 404.
func TestDeleteMachineRoute(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st, b := f.postForm(fmt.Sprintf("/api/2/person/%d/device_passwords/create", f.person.ID), url.Values{"name": {"laptop"}, "current_password": {fixturePassword}})
	var dp devicePasswordBody
	decode(t, b, &dp)
	if st != http.StatusOK {
		t.Fatalf("create: %d %s", st, b)
	}
	toks, err := f.accounts.IssueTokens(ctx, f.person.ID, dp.MachineID)
	if err != nil {
		t.Fatal(err)
	}
	if st, b := f.readAll(f.request(http.MethodGet, "/api/2/person", toks.AccessToken, nil, nil)); st != http.StatusOK {
		t.Fatalf("the machine's token before: %d %s", st, b)
	}
	other, _, _ := f.addPerson("bob")
	bobs, err := f.accounts.UpsertMachine(ctx, other.ID, account.MachineInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		id         string
		wantStatus int
	}{
		{"another person's", fmt.Sprint(bobs.ID), http.StatusNotFound},
		{"not an id", "x", http.StatusNotFound},
		{"one's own", fmt.Sprint(dp.MachineID), http.StatusOK},
		{"again", fmt.Sprint(dp.MachineID), http.StatusNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, b := f.postForm("/api/2/machine/"+tc.id+"/delete", nil)
			if tc.wantStatus == http.StatusOK {
				if st != http.StatusOK {
					t.Fatalf("%d %s", st, b)
				}
				return
			}
			wantError(t, st, b, tc.wantStatus, "not_found")
		})
	}
	st, b = f.readAll(f.request(http.MethodGet, "/api/2/person", toks.AccessToken, nil, nil))
	wantError(t, st, b, http.StatusUnauthorized, "access_denied")
	if _, ok, err := f.accounts.DeviceCallerRef(ctx, f.person.Username, dp.Password); ok || err == nil {
		t.Fatalf("the machine's device password after it went: %v %v", ok, err)
	}
	if _, err := f.accounts.Machine(ctx, bobs.ID); err != nil {
		t.Fatalf("bob's machine: %v", err)
	}
}
