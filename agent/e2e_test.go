package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"berth/agent"
	"berth/agent/agenttest"
)

func TestMain(m *testing.M) { agenttest.Main(m) }

// machineFields are spec 2.12's fields, every one of which a machine
// object carries.
var machineFields = []string{"id", "dns_name", "guid", "created", "last_login", "last_disconnect", "os_type", "os_version",
	"agent_version", "bandwidth_throttle", "throttled", "throttle_exception_days", "throttle_exception_dow",
	"throttle_exception_end", "throttle_exception_start", "throttle_exception_throttle", "machine_type",
	"health_report_period_minutes", "locked", "manual_collisions", "nickname", "type"}

func getMachine(t *testing.T, srv *agenttest.Server, token string, id uint64) map[string]any {
	t.Helper()
	var m map[string]any
	srv.JSON(t, token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d", id), nil, &m)
	for _, f := range machineFields {
		if _, ok := m[f]; !ok {
			t.Errorf("machine %d has no field %s: %v", id, f, m)
		}
	}
	if len(m) != len(machineFields) {
		t.Errorf("machine %d has %d fields, want the %d of spec 2.12: %v", id, len(m), len(machineFields), m)
	}
	return m
}

// wantError checks an error answer's status and code, and that it
// says why (a 404 may say nothing: it hides what exists).
func wantError(t *testing.T, what string, status int, body []byte, wantStatus int, wantCode string) {
	t.Helper()
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if status != wantStatus || json.Unmarshal(body, &e) != nil || e.Error != wantCode || (e.Description == "" && wantStatus != 404) {
		t.Errorf("%s: %d %s, want %d %s", what, status, body, wantStatus, wantCode)
	}
}

// orgMachines is the organization's machines list, as the administrator
// sees it.
func orgMachines(t *testing.T, srv *agenttest.Server) []map[string]any {
	t.Helper()
	var page struct {
		Results []map[string]any `json:"results"`
	}
	srv.JSON(t, srv.AdminToken(t), http.MethodGet, fmt.Sprintf("/api/2/organization/%d/machines", srv.OrganizationID(t)), nil, &page)
	return page.Results
}

// TestAgentMachine runs one server and one agent through a machine's
// life: sign-in, its record, status, ls, the file server's policy
// gate, a restart of the agent (the same machine), the agent offline
// (503 at once, last_disconnect), and a restart of the server (the agent
// reconnects by itself).
func TestAgentMachine(t *testing.T) {
	srv := agenttest.StartServer(t)
	alice := srv.CreatePerson(t, "alice", false)
	bob := srv.CreatePerson(t, "bob", false)
	// Another tenant's administrator.
	olga := srv.CreatePersonIn(t, srv.CreateOrganization(t, "other"), "olga", true)
	a := srv.NewAgent(t, alice)
	a.Start(t)
	id := a.WaitOnline(t)
	mpath := func(suffix string) string { return fmt.Sprintf("/api/2/machine/%d%s", id, suffix) }

	var machines int // the organization's, after the agent's first sign-in
	t.Run("sign-in", func(t *testing.T) {
		st, ok := a.State(t)
		if !ok || st.GUID == "" || st.MachineID != id || st.RefreshToken == "" || st.Login != "alice" || st.Server != srv.URL {
			t.Fatalf("state file %+v", st)
		}
		fi, err := os.Stat(a.StateFile)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("state file mode %v (%v), want 0600", fi.Mode(), err)
		}
		m := getMachine(t, srv, alice.Token, id)
		host, _ := os.Hostname()
		if m["guid"] != st.GUID || m["agent_version"] != agent.Version || m["last_login"] == nil || m["last_disconnect"] != nil ||
			m["os_type"] != "linux" || m["os_version"] == "" || m["dns_name"] != host || m["type"] != "machine" || m["id"] != float64(id) {
			t.Errorf("machine %v", m)
		}
		// Every sign-in that names no GUID (the test's own, of each
		// person) is a machine too; the agent's is the one with its GUID.
		ms := orgMachines(t, srv)
		if n := countGUID(ms, st.GUID); n != 1 || !slices.ContainsFunc(ms, func(m map[string]any) bool { return m["id"] == float64(id) && m["guid"] == st.GUID }) {
			t.Errorf("the organization's machines: %v, want machine %d once", ms, id)
		}
		machines = len(ms)
		// Another person of the organization does not see it, nor does
		// another tenant's administrator.
		status, body := srv.Do(t, bob.Token, http.MethodGet, mpath(""), nil)
		wantError(t, "bob's GET", status, body, 404, "not_found")
		status, body = srv.Do(t, olga.Token, http.MethodGet, mpath("/status"), nil)
		wantError(t, "another tenant's administrator's status", status, body, 404, "not_found")
	})

	t.Run("a second machine", func(t *testing.T) {
		b := srv.NewAgent(t, bob)
		b.Start(t)
		bid := b.WaitOnline(t)
		defer b.Stop(t)
		bst, _ := b.State(t)
		ast, _ := a.State(t)
		if bid == id || bst.GUID == ast.GUID {
			t.Fatalf("bob's machine %d (%s) is alice's %d (%s)", bid, bst.GUID, id, ast.GUID)
		}
		// Each person reaches their own machine only, online or not.
		for _, tc := range []struct {
			token  string
			method string
			path   string
			status int
		}{
			{bob.Token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d/status", bid), 200},
			{alice.Token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d/status", bid), 404},
			{alice.Token, http.MethodGet, fmt.Sprintf("/api/2/machine/%d", bid), 404},
			{bob.Token, http.MethodGet, mpath("/status"), 404},
			{alice.Token, http.MethodGet, mpath("/status"), 200},
			{bob.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/ls", bid), 403}, // nothing mapped or backed up
		} {
			status, body := srv.Do(t, tc.token, tc.method, tc.path, url.Values{"path": {b.Path()}})
			if status != tc.status {
				t.Errorf("%s %s: %d %s, want %d", tc.method, tc.path, status, body, tc.status)
			}
		}
		ms := orgMachines(t, srv)
		if countGUID(ms, bst.GUID) != 1 || len(ms) != machines+1 {
			t.Errorf("the organization's machines after bob's agent: %d, want %d and bob's once", len(ms), machines+1)
		}
		machines = len(ms)
	})

	t.Run("status", func(t *testing.T) {
		status, body := srv.Do(t, alice.Token, http.MethodGet, mpath("/status"), nil)
		var st struct {
			Results map[string]json.RawMessage `json:"results"`
		}
		if status != 200 || json.Unmarshal(body, &st) != nil {
			t.Fatalf("status: %d %s", status, body)
		}
		if got := slices.Sorted(mapKeys(st.Results)); !slices.Equal(got, []string{"subscriptions", "synced", "transfers"}) {
			t.Errorf("status results have %v: %s", got, body)
		}
		if string(st.Results["subscriptions"]) != "[]" || string(st.Results["transfers"]) != "[]" || string(st.Results["synced"]) != "true" {
			t.Errorf("status of an idle machine: %s", body)
		}
	})

	var backupID uint64
	t.Run("ls", func(t *testing.T) {
		docs := a.Path("docs")
		for _, d := range []string{"docs/sub", "other"} {
			if err := os.MkdirAll(a.Path(d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"docs/a.txt", "docs/sub/f", "other/secret"} {
			if err := os.WriteFile(a.Path(f), []byte(f), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.Symlink(a.Path("other"), a.Path("docs/escape")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(a.Path("docs/sub"), a.Path("docs/inner")); err != nil {
			t.Fatal(err)
		}
		var b struct {
			ID uint64 `json:"id"`
		}
		srv.JSON(t, alice.Token, http.MethodPost, mpath("/backups/create"), url.Values{"path": {docs}}, &b)
		backupID = b.ID
		ls := func(p string) (int, []byte) {
			return srv.Do(t, alice.Token, http.MethodPost, mpath("/ls"), url.Values{"path": {p}})
		}
		// The agent reads its new set-up on the reconfigure notice; until
		// then it refuses the folder itself.
		deadline := time.Now().Add(30 * time.Second)
		for status, _ := ls(docs); status != 200 && time.Now().Before(deadline); status, _ = ls(docs) {
			time.Sleep(100 * time.Millisecond)
		}
		for _, tc := range []struct {
			name, path string
			status     int
			code       string
			names      []string
		}{
			{"the backed-up folder", docs, 200, "", []string{"a.txt", "escape", "inner", "sub/"}},
			{"below it", filepath.Join(docs, "sub"), 200, "", []string{"f"}},
			{"a trailing slash", docs + "/sub/", 200, "", []string{"f"}},
			{"a link that stays inside", filepath.Join(docs, "inner"), 200, "", []string{"f"}},
			{"a link that escapes", filepath.Join(docs, "escape"), 403, "forbidden", nil},
			{"a folder outside", a.Path("other"), 403, "forbidden", nil},
			{"the parent", a.Path(), 403, "forbidden", nil},
			{"the whole disk", "/", 403, "forbidden", nil},
			{"dot-dot out", docs + "/../other", 400, "invalid_request", nil},
			{"relative", "docs", 400, "invalid_request", nil},
			{"missing", filepath.Join(docs, "missing"), 404, "not_found", nil},
			{"a file", filepath.Join(docs, "a.txt"), 400, "invalid_request", nil},
			{"empty", "", 400, "invalid_request", nil},
			{"control character", docs + "/a\x01", 400, "invalid_request", nil},
		} {
			status, body := ls(tc.path)
			if tc.code != "" {
				wantError(t, tc.name, status, body, tc.status, tc.code)
				continue
			}
			var out struct {
				Results []string `json:"results"`
			}
			if status != 200 || json.Unmarshal(body, &out) != nil || !slices.Equal(out.Results, tc.names) {
				t.Errorf("%s: %d %s, want %q", tc.name, status, body, tc.names)
			}
		}
		// Another person cannot list alice's machine at all.
		status, body := srv.Do(t, bob.Token, http.MethodPost, mpath("/ls"), url.Values{"path": {docs}})
		wantError(t, "bob's ls", status, body, 404, "not_found")
		// The administrator of alice's organization may only where the
		// policy lets administrators browse machines.
		status, body = srv.Do(t, srv.AdminToken(t), http.MethodPost, mpath("/ls"), url.Values{"path": {docs}})
		wantError(t, "the administrator's ls, admin_browse_remote off", status, body, 403, "forbidden")
		srv.SetPolicy(t, srv.OrganizationID(t), url.Values{"admin_browse_remote": {"true"}})
		status, body = srv.Do(t, srv.AdminToken(t), http.MethodPost, mpath("/ls"), url.Values{"path": {docs}})
		if status != 200 {
			t.Errorf("the administrator's ls, admin_browse_remote on: %d %s", status, body)
		}
	})

	t.Run("file server policy", func(t *testing.T) {
		status, body := srv.Do(t, alice.Token, http.MethodPost, mpath("/server/enable"), nil)
		wantError(t, "enable while file_server_enabled is off", status, body, 403, "forbidden")
		srv.EnableFileServer(t, alice, id)
		srv.JSON(t, alice.Token, http.MethodPost, mpath("/server/disable"), nil, nil)
		srv.SetPolicy(t, 0, url.Values{"file_server_enabled": {"false"}})
		// Disabling never needs the policy.
		srv.JSON(t, alice.Token, http.MethodPost, mpath("/server/disable"), nil, nil)
	})

	t.Run("agent restart keeps the machine", func(t *testing.T) {
		before, _ := a.State(t)
		a.Restart(t)
		if got := a.WaitOnline(t); got != id {
			t.Fatalf("after a restart the machine is %d, was %d", got, id)
		}
		after, _ := a.State(t)
		if after.GUID != before.GUID {
			t.Errorf("GUID %s became %s", before.GUID, after.GUID)
		}
		if ms := orgMachines(t, srv); len(ms) != machines || countGUID(ms, after.GUID) != 1 {
			t.Errorf("%d machines after a restart, want %d: %v", len(ms), machines, ms)
		}
	})

	t.Run("offline", func(t *testing.T) {
		a.Stop(t)
		a.WaitOffline(t, id)
		m := getMachine(t, srv, alice.Token, id)
		if m["last_disconnect"] == nil || m["last_login"] == nil {
			t.Errorf("an offline machine: %v", m)
		}
		// An offline machine's answer comes at once; a client that would
		// wait for the agent's 30 s call timeout gives up first.
		for _, tc := range []struct {
			name, method, path string
			form               url.Values
		}{
			{"status", http.MethodGet, mpath("/status"), nil},
			{"ls", http.MethodPost, mpath("/ls"), url.Values{"path": {a.Path("docs")}}},
			{"restore", http.MethodPost, mpath(fmt.Sprintf("/backup/%d/restore", backupID)), url.Values{}},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			req, _ := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.path, strings.NewReader(tc.form.Encode()))
			req.Header.Set("Authorization", "Bearer "+alice.Token)
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp, err := srv.Client.Do(req)
			if err != nil {
				cancel()
				t.Fatalf("%s of an offline machine: %v", tc.name, err)
			}
			var e struct {
				Error string `json:"error"`
			}
			json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			cancel()
			if resp.StatusCode != 503 || e.Error != "temporarily_unavailable" {
				t.Errorf("%s of an offline machine: %d %s, want 503 temporarily_unavailable", tc.name, resp.StatusCode, e.Error)
			}
		}
		// GET of the record and of its set-up need no agent.
		srv.JSON(t, alice.Token, http.MethodGet, mpath("/backups"), nil, nil)
	})

	t.Run("server restart", func(t *testing.T) {
		a.Start(t)
		a.WaitOnline(t)
		srv.Restart(t)
		// The agent backs off and reconnects by itself.
		if got := a.WaitOnline(t); got != id {
			t.Fatalf("after the server's restart the machine is %d, was %d", got, id)
		}
		if ms := orgMachines(t, srv); len(ms) != machines {
			t.Errorf("%d machines after the server's restart, want %d", len(ms), machines)
		}
	})

	t.Run("two-step", func(t *testing.T) {
		carol := srv.CreatePerson(t, "carol", false)
		var en struct {
			Secret string `json:"secret"`
		}
		srv.JSON(t, carol.Token, http.MethodPost, fmt.Sprintf("/api/2/person/%d/two_step/enroll", carol.ID), url.Values{"mode": {"authenticator"}, "current_password": {carol.Password}}, &en)
		code, err := totp.GenerateCode(en.Secret, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		srv.JSON(t, carol.Token, http.MethodPost, fmt.Sprintf("/api/2/person/%d/two_step/confirm", carol.ID), url.Values{"auth_code": {code}}, nil)

		// Without a code the agent stops with a clear error instead of
		// retrying a sign-in that cannot succeed.
		c := srv.NewAgent(t, carol)
		c.Start(t)
		// It exits 3, which the unit files keep from restarting.
		err = c.Wait(t, 60*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(c.Output(), "BERTH_AGENT_AUTH_CODE") {
			t.Fatalf("an agent of an enrolled person without a code: exit %v, want status 3:\n%s", err, c.Output())
		}
		// With the next step's code (the one just used cannot be used
		// again; the server accepts one step of clock skew).
		next, _ := totp.GenerateCode(en.Secret, time.Now().Add(30*time.Second))
		c.Env = []string{"BERTH_AGENT_AUTH_CODE=" + next}
		c.Start(t)
		cid := c.WaitOnline(t)
		if cid == id {
			t.Fatalf("carol's agent is alice's machine %d", id)
		}
		// The code is needed once: the agent's session is in its state file.
		c.Env = nil
		c.Restart(t)
		if got := c.WaitOnline(t); got != cid {
			t.Errorf("carol's machine became %d, was %d", got, cid)
		}
	})
}

func countGUID(ms []map[string]any, guid string) int {
	n := 0
	for _, m := range ms {
		if m["guid"] == guid {
			n++
		}
	}
	return n
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
