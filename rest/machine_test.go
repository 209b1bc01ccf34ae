package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"berth/account"
	"berth/agentlink"
	"berth/share"
	"berth/vfs"
)

// TestMachineBadInputs: every client input of the machine routes (spec
// 4.11) that berth refuses, with the status and code it gets
// (docs/api.md "Machines"). The rows run in order on one machine that
// maps /home/a/docs to the person's root and backs up /home/a/backup.
func TestMachineBadInputs(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shares := share.New(share.Options{FS: f.fs, Accounts: f.accounts, Store: f.db})
	m, err := f.accounts.UpsertMachine(ctx, f.person.ID, account.MachineInput{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.SetFileServer(ctx, m.ID, true); err != nil {
		t.Fatal(err)
	}
	filePolicy := func(on bool) {
		t.Helper()
		if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.FileServerEnabled = on; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	filePolicy(true)
	off, err := f.accounts.UpsertMachine(ctx, f.person.ID, account.MachineInput{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := shares.NewRoot(ctx, f.person, "second", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	_, bobRoot, _ := f.addPerson("bob")
	// A share alice may read but not write: an organization share with
	// her as a viewer.
	admin, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "boss", Email: "boss@example.com", Password: fixturePassword, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	ac, err := f.accounts.Caller(ctx, admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	viewed, err := shares.CreateOrgShare(ctx, ac, f.org.ID, "viewed")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shares.SetSubscribers(ctx, ac, f.org.ID, viewed.ID, share.Subscribers{Persons: []share.Entry{{ID: f.person.ID, Channel: share.ChannelWeb, Role: share.RoleViewer}}}); err != nil {
		t.Fatal(err)
	}
	mp := func(format string, args ...any) string {
		return fmt.Sprintf("/api/2/machine/%d", m.ID) + fmt.Sprintf(format, args...)
	}
	var mapping struct {
		ID uint64 `json:"id"`
	}
	st, body := f.send(http.MethodPost, mp("/mappings/create"), f.token, url.Values{"path": {"/home/a/docs"}, "root_id": {fmt.Sprint(f.root.ID)}})
	if st != 200 {
		t.Fatalf("mapping: %d %s", st, body)
	}
	decode(t, body, &mapping)
	var backup struct {
		ID uint64 `json:"id"`
	}
	st, body = f.send(http.MethodPost, mp("/backups/create"), f.token, url.Values{"path": {"/home/a/backup"}})
	if st != 200 {
		t.Fatalf("backup: %d %s", st, body)
	}
	decode(t, body, &backup)

	long := "/" + strings.Repeat("a", account.MaxMachinePath)
	mapForm := func(path string, root any) url.Values {
		return url.Values{"path": {path}, "root_id": {fmt.Sprint(root)}}
	}
	for _, tc := range []struct {
		name, method, path string
		form               url.Values
		status             int
		code               string
	}{
		// Paths on the machine: absolute, clean, no "..", no control
		// characters, valid UTF-8, at most 4096 bytes.
		{"mapping: relative path", "POST", mp("/mappings/create"), mapForm("home/x", second.ID), 400, "invalid_request"},
		{"mapping: dot-dot", "POST", mp("/mappings/create"), mapForm("/home/a/../x", second.ID), 400, "invalid_request"},
		{"mapping: control character", "POST", mp("/mappings/create"), mapForm("/home/\x01x", second.ID), 400, "invalid_request"},
		{"mapping: overlong path", "POST", mp("/mappings/create"), mapForm(long, second.ID), 400, "invalid_request"},
		{"mapping: path not UTF-8", "POST", mp("/mappings/create"), mapForm("/home/\xff", second.ID), 400, "invalid_request"},
		{"mapping: name not UTF-8", "POST", mp("/mappings/create"), url.Values{"path": {"/home/x"}, "root_id": {fmt.Sprint(second.ID)}, "name": {"a\xed\xa0\x80"}}, 400, "invalid_request"},
		{"mapping: no path", "POST", mp("/mappings/create"), url.Values{"root_id": {fmt.Sprint(second.ID)}}, 400, "invalid_request"},
		{"mapping: no root_id", "POST", mp("/mappings/create"), url.Values{"path": {"/home/x"}}, 400, "invalid_request"},
		{"mapping: root_id not a number", "POST", mp("/mappings/create"), mapForm("/home/x", "abc"), 400, "invalid_request"},
		{"mapping: root_id negative", "POST", mp("/mappings/create"), mapForm("/home/x", "-1"), 400, "invalid_request"},
		{"mapping: a root the caller cannot reach", "POST", mp("/mappings/create"), mapForm("/home/x", bobRoot.ID), 404, "not_found"},
		{"mapping: a share the caller may only read", "POST", mp("/mappings/create"), mapForm("/home/x", viewed.ID), 403, "forbidden"},
		{"mapping: a root that does not exist", "POST", mp("/mappings/create"), mapForm("/home/x", 999999), 404, "not_found"},
		{"mapping: a backup root", "POST", mp("/mappings/create"), mapForm("/home/x", backup.ID), 400, "invalid_request"},
		{"mapping: name with a control character", "POST", mp("/mappings/create"), url.Values{"path": {"/home/x"}, "root_id": {fmt.Sprint(second.ID)}, "name": {"a\x01"}}, 400, "invalid_request"},
		{"mapping: name over 255 bytes", "POST", mp("/mappings/create"), url.Values{"path": {"/home/x"}, "root_id": {fmt.Sprint(second.ID)}, "name": {strings.Repeat("n", 256)}}, 400, "invalid_request"},
		// Overlaps: one tree is kept in step once.
		{"mapping: the same root again", "POST", mp("/mappings/create"), mapForm("/home/y", f.root.ID), 409, "name_conflict"},
		{"mapping: inside a mapped folder", "POST", mp("/mappings/create"), mapForm("/home/a/docs/sub", second.ID), 409, "name_conflict"},
		{"mapping: above a mapped folder", "POST", mp("/mappings/create"), mapForm("/home", second.ID), 409, "name_conflict"},
		{"mapping: the file server off", "POST", fmt.Sprintf("/api/2/machine/%d/mappings/create", off.ID), mapForm("/home/x", second.ID), 403, "forbidden"},
		{"mapping: id not a number", "GET", mp("/mapping/abc"), nil, 404, "not_found"},
		{"mapping: another machine's id", "GET", fmt.Sprintf("/api/2/machine/%d/mapping/%d", off.ID, mapping.ID), nil, 404, "not_found"},
		{"mapping delete: another machine's id", "POST", fmt.Sprintf("/api/2/machine/%d/mapping/%d/delete", off.ID, mapping.ID), url.Values{}, 404, "not_found"},

		{"backup: relative path", "POST", mp("/backups/create"), url.Values{"path": {"home/b"}}, 400, "invalid_request"},
		{"backup: dot-dot", "POST", mp("/backups/create"), url.Values{"path": {"/home/../b"}}, 400, "invalid_request"},
		{"backup: control character", "POST", mp("/backups/create"), url.Values{"path": {"/home/\nb"}}, 400, "invalid_request"},
		{"backup: overlong path", "POST", mp("/backups/create"), url.Values{"path": {long}}, 400, "invalid_request"},
		{"backup: path not UTF-8", "POST", mp("/backups/create"), url.Values{"path": {"/home/\xff"}}, 400, "invalid_request"},
		{"backup: no path", "POST", mp("/backups/create"), url.Values{}, 400, "invalid_request"},
		{"backup: inside a backed-up folder", "POST", mp("/backups/create"), url.Values{"path": {"/home/a/backup/sub"}}, 409, "name_conflict"},
		{"backup: above a backed-up folder", "POST", mp("/backups/create"), url.Values{"path": {"/home/a"}}, 409, "name_conflict"},
		{"backup: id not a number", "GET", mp("/backup/abc"), nil, 404, "not_found"},
		{"backup: a root that is no backup", "GET", mp("/backup/%d", f.root.ID), nil, 404, "not_found"},
		{"backup: another machine's", "GET", fmt.Sprintf("/api/2/machine/%d/backup/%d", off.ID, backup.ID), nil, 404, "not_found"},
		{"restore: relative target", "POST", mp("/backup/%d/restore", backup.ID), url.Values{"target": {"x"}}, 400, "invalid_request"},
		{"restore: dot-dot target", "POST", mp("/backup/%d/restore", backup.ID), url.Values{"target": {"/home/../x"}}, 400, "invalid_request"},
		{"restore: another machine's backup", "POST", fmt.Sprintf("/api/2/machine/%d/backup/%d/restore", off.ID, backup.ID), url.Values{}, 404, "not_found"},

		{"ls: relative path", "POST", mp("/ls"), url.Values{"path": {"home/a/docs"}}, 400, "invalid_request"},
		{"ls: dot-dot", "POST", mp("/ls"), url.Values{"path": {"/home/a/docs/../../../etc"}}, 400, "invalid_request"},
		{"ls: control character", "POST", mp("/ls"), url.Values{"path": {"/home/a/docs/\x7f"}}, 400, "invalid_request"},
		{"ls: overlong", "POST", mp("/ls"), url.Values{"path": {"/home/a/docs" + long}}, 400, "invalid_request"},
		{"ls: outside the folders", "POST", mp("/ls"), url.Values{"path": {"/home/a"}}, 403, "forbidden"},
		{"ls: a prefix that is no parent", "POST", mp("/ls"), url.Values{"path": {"/home/a/docs2"}}, 403, "forbidden"},
		{"ls: inside, the agent offline", "POST", mp("/ls"), url.Values{"path": {"/home/a/docs/sub"}}, 503, "temporarily_unavailable"},
		{"machine: id not a number", "GET", "/api/2/machine/abc", nil, 404, "not_found"},
		{"machine: id zero", "GET", "/api/2/machine/0", nil, 404, "not_found"},
		{"machine: no such machine", "GET", "/api/2/machine/999999", nil, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := f.send(tc.method, tc.path, f.token, tc.form)
			wantError(t, st, body, tc.status, tc.code)
			if tc.status != 404 && !strings.Contains(string(body), "error_description") {
				t.Errorf("%d %s says not why", st, body)
			}
			if tc.status == 409 && strings.Contains(string(body), "username") {
				t.Errorf("an overlap described as a taken username: %s", body)
			}
		})
	}
	// file_server_enabled turned off after the file server was enabled:
	// no new mapping.
	filePolicy(false)
	st, body = f.send(http.MethodPost, mp("/mappings/create"), f.token, mapForm("/home/z", second.ID))
	wantError(t, st, body, 403, "forbidden")
	// Nothing refused was made.
	for _, p := range []string{mp("/mappings"), mp("/backups")} {
		st, body := f.send(http.MethodGet, p, f.token, nil)
		if st != 200 || strings.Count(string(body), `"id"`) != 1 {
			t.Errorf("GET %s after the refusals: %d %s, want the one made first", p, st, body)
		}
	}
}

// TestMachineStatusShaped: GET /api/2/machine/<id>/status answers spec
// 4.11's fields and berth's transfer fields, whatever the machine's agent
// answered. The agent's answer is the machine's word: a compromised one
// sent any keys and values (markup, nested objects, megabytes of them)
// through to the administrators who read its status; an answer of the
// wrong shape is 503, as for an agent that does not answer.
func TestMachineStatusShaped(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	hub, srv, m := f.agentServer(t, "status-guid")
	conn, err := hub.Attach(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Detach(conn)
	answer := make(chan string, 1)
	go func() {
		for {
			select {
			case <-conn.Gone():
				return
			case cmd := <-conn.Commands():
				var rep agentlink.Reply
				if a := <-answer; strings.HasPrefix(a, `{"error"`) {
					json.Unmarshal([]byte(a), &rep)
				} else {
					rep.Result = json.RawMessage(a)
				}
				hub.Reply(m.ID, cmd.ID, rep)
			}
		}
	}()
	for _, tc := range []struct {
		name, answer string
		status       int
		want         string // the body, or the error code
	}{
		{"the agent's own", `{"subscriptions":[{"excl_files":0,"rsub_id":7,"synced":true,"synced_folder":"/home/a"}],"synced":true,"transfers":[{"kind":"backup","root_id":7,"path":"/x","bytes":1,"total":2}]}`, 200,
			`{"results":{"subscriptions":[{"excl_files":0,"rsub_id":7,"synced":true,"synced_folder":"/home/a"}],"synced":true,"transfers":[{"kind":"backup","root_id":7,"path":"/x","bytes":1,"total":2}]}}`},
		{"nothing", `{}`, 200, `{"results":{"subscriptions":[],"synced":false,"transfers":[]}}`},
		{"fields of its own are dropped", `{"admin_note":"<b>x</b>","subscriptions":[{"rsub_id":7,"html":"<script>alert(1)</script>","deep":{"a":[1,2,3]}}],"transfers":[{"kind":"backup","link":"javascript:x"}]}`, 200,
			`{"results":{"subscriptions":[{"excl_files":0,"rsub_id":7,"synced":false,"synced_folder":""}],"synced":false,"transfers":[{"kind":"backup","root_id":0,"path":"","bytes":0,"total":0}]}}`},
		{"a field of the wrong type", `{"subscriptions":[{"rsub_id":"7"}]}`, 503, "temporarily_unavailable"},
		{"not an object", `[1,2]`, 503, "temporarily_unavailable"},
		// An error's description is shown and logged (a 503 is): a
		// megabyte of it, control characters and all, went into both.
		{"a huge error description", `{"error":{"error":"x","error_description":"` + strings.Repeat(`\u001b[31m<b>`, 1<<16) + `"}}`, 503, "temporarily_unavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer <- tc.answer
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/2/machine/"+strconv.FormatUint(m.ID, 10)+"/status", nil)
			req.Header.Set("Authorization", "Bearer "+f.token)
			st, body := f.readAll(mustDo(t, srv.Client(), req))
			if tc.status != 200 {
				wantError(t, st, body, tc.status, tc.want)
				if len(body) > 2048 || strings.Contains(string(body), `\u001b`) {
					t.Fatalf("the agent's description came through as it was: %d bytes %.200s", len(body), body)
				}
				return
			}
			if st != 200 || strings.TrimSpace(string(body)) != tc.want {
				t.Fatalf("got %d %s\nwant %s", st, body, tc.want)
			}
		})
	}
}
