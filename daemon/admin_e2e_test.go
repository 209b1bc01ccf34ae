package daemon

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// apiErrorLine is how `berth admin` prints an error of the API on
// standard error: the spec's error code, the status, and the
// error_description when berth gives one (spec 7: "when available"; a
// bare not_found says nothing of what exists).
var apiErrorLine = regexp.MustCompile(`(?m)^berth: [a-z_]+ \(HTTP [1-5][0-9][0-9]\)(: \S.*)?$`)

// adminDayStep is one command of an administrator's day, run as the real
// binary. Arguments and expectations may name values an earlier step
// captured, as {name}.
type adminDayStep struct {
	name   string
	args   []string
	env    []string // NAME=VALUE added to the environment
	code   int
	out    []string // on standard output
	errOut string   // on standard error; with code exitAPIError, the line is also checked for {error, error_description}
	// capture names values of the --json answer on standard output:
	// var name -> top-level field.
	capture map[string]string
	// as names another session file than the administrator's.
	as string
	// after checks what the command did through the API itself.
	after func(t *testing.T, v map[string]string)
}

// TestAdminDay plays an administrator's day with the real binary against
// a real berth: every `berth admin` subcommand, its exit status, its
// output, and what it did as seen through the API.
func TestAdminDay(t *testing.T) {
	bin, data, _, lc := runningDaemon(t, "--lockout-max-failures", "3")
	config := filepath.Join(t.TempDir(), "conf", "admin.json")
	v := map[string]string{}
	subst := func(s string) string {
		for k, val := range v {
			s = strings.ReplaceAll(s, "{"+k+"}", val)
		}
		return s
	}

	// grant is the password grant as any client does it: the status and
	// the error code or access token.
	grant := func(t *testing.T, user, password string) (int, string) {
		t.Helper()
		resp, err := lc.c.PostForm(lc.base+"/oauth/token", url.Values{
			"grant_type": {"password"}, "client_id": {"anchor"}, "username": {user}, "password": {password},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			AccessToken string `json:"access_token"`
			Error       string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&body)
		if resp.StatusCode == http.StatusOK {
			return resp.StatusCode, body.AccessToken
		}
		return resp.StatusCode, body.Error
	}
	wantGrant := func(user, password string, status int, what string) func(t *testing.T, v map[string]string) {
		return func(t *testing.T, v map[string]string) {
			t.Helper()
			if got, s := grant(t, user, password); got != status {
				t.Errorf("password grant of %s: %d %s, want %d (%s)", user, got, s, status, what)
			}
		}
	}
	// asPerson is a GET with a token v holds.
	asPerson := func(t *testing.T, token, path string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, lc.base+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := lc.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	const pw = "bob's long password"
	steps := []adminDayStep{
		{name: "not logged in", args: []string{"person", "show"}, code: exitNoAccess, errOut: "not logged in"},
		{name: "login", args: []string{"login", "--url", lc.base, "--user", "admin", "--ca", filepath.Join(data, "tls", "cert.pem")},
			env: []string{adminPasswordEnv + "=" + lc.password}, out: []string{"logged in to " + lc.base + " as admin"}},
		{name: "me", args: []string{"person", "show", "--json"}, out: []string{`"username": "admin"`}, capture: map[string]string{"top": "company_id", "admin": "id"}},

		// A child organization and its policy.
		{name: "org create", args: []string{"org", "create", "Sales", "email=sales@example.com", "description=the sales team", "--json"},
			out: []string{`"name": "Sales"`, `"parent_id": {top}`}, capture: map[string]string{"child": "id"}},
		{name: "org create, bad field", args: []string{"org", "create", "Other", "trial_until=tomorrow"}, code: exitAPIError, errOut: "invalid_datetime_format (HTTP 400)"},
		{name: "org show", args: []string{"org", "show", "{child}"}, out: []string{"name", "Sales", "sales@example.com", "policy"}},
		{name: "org update", args: []string{"org", "update", "{child}", "description=sales and marketing"}, out: []string{"sales and marketing"}},
		{name: "org list", args: []string{"org", "list"}, out: []string{"ID", "PARENT", "{child}", "Sales"}},
		{name: "org list --json", args: []string{"org", "list", "--json"}, out: []string{`"total": 1`, `"name": "Sales"`}},
		{name: "license key", args: []string{"org", "license-key", "{child}", "--json"}, out: []string{`"type": "license_key"`}, capture: map[string]string{"key": "license_key"}},
		{name: "org show by license key", args: []string{"org", "show", "{key}", "--json"}, out: []string{`"id": {child}`}},
		{name: "org update by license key", args: []string{"org", "update", "{key}", "email=team@example.com"}, out: []string{"team@example.com"}},
		{name: "policy set", args: []string{"org", "policy", "set", "{child}", "space_quota=2GiB", "max_file_size=100 MiB", "webdav_enabled=false", "excluded_extensions=.exe,.bat"},
			out: []string{"space_quota ", "2147483648", "max_file_size", "104857600", "webdav_enabled", "false", ".exe,.bat"}},
		{name: "policy get", args: []string{"org", "policy", "get", "{child}", "--json"},
			out: []string{`"space_quota": "2147483648"`, `"max_file_size": 104857600`, `"webdav_enabled": false`}},
		{name: "policy set, bad value", args: []string{"org", "policy", "set", "{child}", "webdav_enabled=maybe"}, code: exitAPIError, errOut: "invalid_request (HTTP 400): "},
		{name: "policy set, bad size", args: []string{"org", "policy", "set", "{child}", "space_quota=lots"}, code: exitUsage, errOut: "not a size"},

		// Persons of the child organization.
		{name: "person create with password", args: []string{"person", "create", "bob", "bob@example.com", "first_name=Bob", "space_quota=1GiB", "--org", "{child}", "--password", "--json"},
			env: []string{adminNewPasswordEnv + "=" + pw}, out: []string{`"username": "bob"`, `"company_id": {child}`, `"space_quota": 1073741824`}, capture: map[string]string{"bob": "id"},
			after: wantGrant("bob", pw, http.StatusOK, "created with a password")},
		{name: "person create without password", args: []string{"person", "create", "carol", "carol@example.com", "--org", "{child}", "--json"},
			out: []string{`"username": "carol"`}, capture: map[string]string{"carol": "id"}},
		{name: "person create admin", args: []string{"person", "create", "dave", "dave@example.com", "last_name=Admin", "--admin", "--org", "{child}", "--password", "--json"},
			env: []string{adminNewPasswordEnv + "=dave's long password"}, out: []string{`"last_name": "Admin"`}, capture: map[string]string{"dave": "id"},
			after: func(t *testing.T, v map[string]string) {
				// The person object does not show the flag: dave administers.
				if s, tok := grant(t, "dave", "dave's long password"); s != http.StatusOK {
					t.Errorf("dave's password grant: %d %s", s, tok)
				} else if s := asPerson(t, tok, "/api/2/organization/"+v["child"]+"/persons"); s != http.StatusOK {
					t.Errorf("dave lists the persons of the organization he administers: %d", s)
				}
			}},
		{name: "person create, taken", args: []string{"person", "create", "bob", "bob2@example.com", "--org", "{child}"}, code: exitAPIError, errOut: "(HTTP 409): "},
		{name: "user limit", args: []string{"org", "policy", "set", "{child}", "num_users_maximum=3"}, out: []string{"num_users_maximum", "3"}},
		{name: "person create past the limit", args: []string{"person", "create", "erin", "erin@example.com", "--org", "{child}"},
			code: exitAPIError, errOut: "user_limit_exceeded (HTTP 409): "},
		{name: "no user limit", args: []string{"org", "policy", "set", "{child}", "num_users_maximum=0", "--json"}, out: []string{`"num_users_maximum": 0`}},
		{name: "person list", args: []string{"person", "list", "--org", "{child}"}, out: []string{"USERNAME", "bob", "carol", "dave", "1.1 GB"}},
		{name: "person list, one page", args: []string{"person", "list", "--org", "{child}", "--limit", "1", "--offset", "1"}, out: []string{"carol"}, errOut: "2 to 2 of 3"},
		{name: "person list by license key", args: []string{"person", "list", "--org", "{key}", "--json"}, out: []string{`"total": 3`}},
		{name: "person list --all", args: []string{"person", "list", "--org", "{child}", "--limit", "1", "--all"}, out: []string{"bob", "carol", "dave"}},
		{name: "person list --json", args: []string{"person", "list", "--org", "{child}", "--limit", "2", "--json"}, out: []string{`"offset": 0`, `"total": 3`, `"username": "carol"`}},
		{name: "person show by id", args: []string{"person", "show", "{carol}"}, out: []string{"carol@example.com", "roots  ", "1 item (--json shows it)"}},
		{name: "person show by e-mail", args: []string{"person", "show", "bob@example.com"}, out: []string{"username", "bob", "first_name", "Bob"}},
		{name: "person show, none", args: []string{"person", "show", "nobody@example.com"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},
		{name: "person update", args: []string{"person", "update", "carol@example.com", "first_name=Carol", "last_name=Jones", "space_quota=500MB"},
			out: []string{"Carol", "Jones", "500000000"}},
		{name: "person update, bad field", args: []string{"person", "update", "{carol}", "active=perhaps"}, code: exitAPIError, errOut: "invalid_request (HTTP 400): "},
		{name: "passwd", args: []string{"person", "passwd", "carol@example.com"}, env: []string{adminNewPasswordEnv + "=carol's new password"},
			out: []string{"password of person {carol} set"}, after: wantGrant("carol", "carol's new password", http.StatusOK, "after passwd")},
		{name: "passwd, too short", args: []string{"person", "passwd", "{carol}"}, env: []string{adminNewPasswordEnv + "=short"}, code: exitAPIError, errOut: "(HTTP 400): "},

		// bob is no administrator: berth refuses him what it allows the administrator.
		{name: "bob logs in", as: ".bob", args: []string{"login", "--url", lc.base, "--user", "bob@example.com", "--ca", filepath.Join(data, "tls", "cert.pem")},
			env: []string{adminPasswordEnv + "=" + pw}, out: []string{"as bob"}},
		{name: "bob shows himself", as: ".bob", args: []string{"person", "show"}, out: []string{"bob@example.com"}},
		{name: "bob creates an organization", as: ".bob", args: []string{"org", "create", "Mine"}, code: exitAPIError, errOut: "forbidden (HTTP 403)"},
		{name: "bob creates a person", as: ".bob", args: []string{"person", "create", "eve", "eve@example.com", "--json"}, code: exitAPIError, errOut: "forbidden (HTTP 403)"},
		{name: "bob unlocks himself", as: ".bob", args: []string{"person", "unlock", "{bob}"}, code: exitAPIError, errOut: "forbidden (HTTP 403)"},
		{name: "bob logs out", as: ".bob", args: []string{"logout"}, out: []string{"logged out"}},

		// A person disabled and enabled again.
		{name: "person disable", args: []string{"person", "update", "bob@example.com", "active=false", "--json"}, out: []string{`"username": "bob"`},
			after: func(t *testing.T, v map[string]string) {
				if s, code := grant(t, "bob", pw); s == http.StatusOK {
					t.Errorf("a disabled bob logs in: %d %s", s, code)
				}
			}},
		{name: "person enable", args: []string{"person", "update", "{bob}", "active=true"}, out: []string{"bob@example.com"},
			after: wantGrant("bob", pw, http.StatusOK, "enabled again")},

		// A lockout and its end.
		{name: "lock bob", args: []string{"person", "show", "{bob}"}, out: []string{"bob"}, after: func(t *testing.T, v map[string]string) {
			for range 3 {
				grant(t, "bob", "wrong password")
			}
			if status, code := grant(t, "bob", pw); status != http.StatusForbidden || code != "account_locked" {
				t.Errorf("bob after 3 wrong passwords: %d %s, want 403 account_locked", status, code)
			}
		}},
		{name: "unlock", args: []string{"person", "unlock", "bob@example.com"}, out: []string{"person {bob} unlocked"},
			after: wantGrant("bob", pw, http.StatusOK, "after unlock")},
		{name: "unlock, none", args: []string{"person", "unlock", "999999"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},

		// A guest.
		{name: "guest create", args: []string{"guest", "create", "gina@example.com", "first_name=Gina", "--org", "{child}", "--password", "--json"},
			env: []string{adminNewPasswordEnv + "=gina's long password"}, out: []string{`"email": "gina@example.com"`, `"company_id": {child}`}, capture: map[string]string{"gina": "id"},
			after: wantGrant("gina@example.com", "gina's long password", http.StatusOK, "a guest with a password")},
		{name: "guest show by id", args: []string{"guest", "show", "{gina}"}, out: []string{"gina@example.com", "Gina"}},
		{name: "guest show by e-mail", args: []string{"guest", "show", "gina@example.com"}, out: []string{"Gina"}},
		{name: "guest update", args: []string{"guest", "update", "gina@example.com", "last_name=Guest"}, out: []string{"Guest"}},
		{name: "guest list", args: []string{"guest", "list", "--org", "{child}"}, out: []string{"EMAIL", "gina@example.com"}},
		{name: "guest show a person", args: []string{"guest", "show", "{bob}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},
		{name: "guest convert", args: []string{"guest", "convert", "gina@example.com", "--json"}, out: []string{`"id": {gina}`, `"type": "person"`}},
		{name: "guest show converted", args: []string{"guest", "show", "{gina}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},
		{name: "guest create 2", args: []string{"guest", "create", "gus@example.com", "--org", "{child}", "--json"}, capture: map[string]string{"gus": "id"}},
		{name: "guest delete, no --yes", args: []string{"guest", "delete", "{gus}"}, code: exitUsage, errOut: "add --yes"},
		{name: "guest delete", args: []string{"guest", "delete", "gus@example.com", "--yes"}, out: []string{"guest {gus} deleted"}},
		{name: "guest show deleted", args: []string{"guest", "show", "{gus}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},

		// A group.
		{name: "group create", args: []string{"group", "create", "Closers", "--org", "{child}", "--json"}, out: []string{`"name": "Closers"`}, capture: map[string]string{"closers": "id"}},
		{name: "group create 2", args: []string{"group", "create", "Team", "--org", "{child}", "--json"}, capture: map[string]string{"team": "id"}},
		{name: "group add members", args: []string{"group", "add", "{closers}", "bob@example.com", "{carol}"}, out: []string{"group {closers}: members updated"}},
		{name: "group add a group", args: []string{"group", "add", "{team}", "{dave}", "--group", "{closers}"}, out: []string{"group {team}: members updated"}},
		{name: "guest for a group", args: []string{"guest", "create", "gail@example.com", "--org", "{child}", "--json"}, capture: map[string]string{"gail": "id"}},
		{name: "group add a guest", args: []string{"group", "add", "{closers}", "{gail}"}, code: exitAPIError, errOut: "invalid_request (HTTP 400): "},
		{name: "group add an unknown person", args: []string{"group", "add", "{closers}", "999999"}, code: exitAPIError, errOut: "invalid_request (HTTP 400): "},
		{name: "group add a cycle", args: []string{"group", "add", "{closers}", "--group", "{team}"}, code: exitAPIError, errOut: "invalid_request (HTTP 400): a group cannot contain itself"},
		{name: "group members", args: []string{"group", "members", "{team}", "--json"}, out: []string{`"members": [
    {dave}
  ]`, `"member_groups": [
    {closers}
  ]`}},
		{name: "group members --include-from-group", args: []string{"group", "members", "{team}", "--include-from-group"},
			out: []string{"members_from_group", "{bob}, {carol}"}},
		{name: "group remove", args: []string{"group", "remove", "{closers}", "{carol}"}, out: []string{"members updated"}},
		{name: "group members after remove", args: []string{"group", "members", "{closers}"}, out: []string{"members ", "{bob}\n"}},
		{name: "group show", args: []string{"group", "show", "{closers}"}, out: []string{"Closers"}},
		{name: "group update", args: []string{"group", "update", "{closers}", "name=Deal closers"}, out: []string{"Deal closers"}},
		{name: "group list", args: []string{"group", "list", "--org", "{child}"}, out: []string{"NAME", "Deal closers", "Team"}},
		{name: "group delete", args: []string{"group", "delete", "{team}", "--yes"}, out: []string{"group {team} deleted"}},
		{name: "group show deleted", args: []string{"group", "show", "{team}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},

		// Disable the organization: its persons are refused; enable it.
		{name: "bob's token", args: []string{"org", "show", "{child}"}, after: func(t *testing.T, v map[string]string) {
			status, tok := grant(t, "bob", pw)
			if status != http.StatusOK {
				t.Fatalf("bob's password grant: %d %s", status, tok)
			}
			v["bobtoken"] = tok
		}},
		{name: "org disable", args: []string{"org", "disable", "{child}"}, out: []string{"organization {child} disabled"}, after: func(t *testing.T, v map[string]string) {
			if s := asPerson(t, v["bobtoken"], "/api/2/person"); s != http.StatusUnauthorized && s != http.StatusForbidden {
				t.Errorf("bob's token in a disabled organization: %d", s)
			}
			if s, code := grant(t, "bob", pw); s == http.StatusOK {
				t.Errorf("bob logs in to a disabled organization: %d %s", s, code)
			}
		}},
		{name: "org show disabled", args: []string{"org", "show", "{child}", "--json"}, out: []string{`"active": false`}},
		{name: "org enable", args: []string{"org", "enable", "{child}"}, out: []string{"organization {child} enabled"},
			after: wantGrant("bob", pw, http.StatusOK, "after enable")},
		{name: "disable own organization", args: []string{"org", "disable", "{top}"}, code: exitAPIError, errOut: "forbidden (HTTP 403): "},

		// Deletes.
		{name: "person delete, no --yes", args: []string{"person", "delete", "{carol}"}, code: exitUsage, errOut: "add --yes"},
		{name: "person delete", args: []string{"person", "delete", "carol@example.com", "--yes"}, out: []string{"person {carol} deleted"},
			after: wantGrant("carol", "carol's new password", http.StatusBadRequest, "deleted")},
		{name: "person show deleted", args: []string{"person", "show", "{carol}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},
		{name: "org delete, no --yes", args: []string{"org", "delete", "{child}"}, code: exitUsage, errOut: "add --yes"},
		{name: "org delete", args: []string{"org", "delete", "{child}", "--yes"}, out: []string{"organization {child} deleted"},
			after: wantGrant("bob", pw, http.StatusBadRequest, "organization deleted")},
		{name: "org show deleted", args: []string{"org", "show", "{child}"}, code: exitAPIError, errOut: "not_found (HTTP 404)"},
		{name: "org list empty", args: []string{"org", "list", "--json"}, out: []string{`"total": 0`}},

		// The administrator's own password: berth wants the current one,
		// and the change ends every session, this one too.
		{name: "own passwd, no current password", args: []string{"person", "passwd", "{admin}"}, env: []string{adminNewPasswordEnv + "=the admin's new password"},
			code: exitUsage, errOut: adminPasswordEnv},
		{name: "own passwd, wrong current password", args: []string{"person", "passwd", "{admin}"},
			env: []string{adminNewPasswordEnv + "=the admin's new password", adminPasswordEnv + "=not it at all"}, code: exitAPIError, errOut: "forbidden (HTTP 403): current_password is wrong"},
		{name: "own passwd", args: []string{"person", "passwd", "{admin}"},
			env: []string{adminNewPasswordEnv + "=the admin's new password", adminPasswordEnv + "=" + lc.password}, out: []string{"run berth admin login again"},
			after: wantGrant("admin", "the admin's new password", http.StatusOK, "after changing their own password")},
		{name: "session ended", args: []string{"person", "show"}, code: exitNoAccess, errOut: "berth admin login again"},
		{name: "logout of an ended session", args: []string{"logout"}, out: []string{"logged out of " + lc.base}},
		{name: "login again", args: []string{"login", "--url", lc.base, "--user", "admin@localhost", "--ca", filepath.Join(data, "tls", "cert.pem")},
			env: []string{adminPasswordEnv + "=the admin's new password"}, out: []string{"as admin"}},
		// A device password of one's own: what a two-step account's
		// WebDAV drive mounts with. The password again, as the route asks.
		{name: "device password, wrong current password", args: []string{"person", "device-password", "laptop"},
			env: []string{adminPasswordEnv + "=not it at all"}, code: exitAPIError, errOut: "(HTTP 403)"},
		{name: "device password", args: []string{"person", "device-password", "laptop", "--json"},
			env: []string{adminPasswordEnv + "=the admin's new password"}, out: []string{`"name": "laptop"`, `"type": "device_password"`}, capture: map[string]string{"devpw": "password"},
			after: func(t *testing.T, v map[string]string) {
				// It mounts the drive: Basic over WebDAV.
				req, _ := http.NewRequest("PROPFIND", lc.base+"/webdav/", nil)
				req.Header.Set("Depth", "0")
				req.SetBasicAuth("admin", v["devpw"])
				resp, err := lc.c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusMultiStatus {
					t.Errorf("PROPFIND /webdav/ with the device password: %d", resp.StatusCode)
				}
			}},

		{name: "help", args: []string{"--help"}, out: []string{"login ", "logout ", "org ", "person ", "guest ", "group ", "--json"}},
		{name: "no subcommand", args: []string{}, out: []string{"Available Commands:"}},
		{name: "logout", args: []string{"logout"}, out: []string{"logged out of " + lc.base}},
		{name: "after logout", args: []string{"person", "show"}, code: exitNoAccess, errOut: "not logged in"},
	}

	for _, st := range steps {
		args := make([]string, len(st.args))
		for i, a := range st.args {
			args[i] = subst(a)
		}
		cmd := exec.Command(bin, append(append([]string{"admin"}, args...), "--config", config+st.as)...)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
		for _, e := range st.env {
			cmd.Env = append(cmd.Env, subst(e))
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := 0
		if err := cmd.Run(); err != nil {
			var xe *exec.ExitError
			if !errors.As(err, &xe) {
				t.Fatalf("%s: %v", st.name, err)
			}
			code = xe.ExitCode()
		}
		out, errOut := stdout.String(), stderr.String()
		fail := func(format string, a ...any) {
			t.Fatalf("%s: berth admin %s: "+format+"\nstdout:\n%s\nstderr:\n%s", append(append([]any{st.name, strings.Join(args, " ")}, a...), out, errOut)...)
		}
		if code != st.code {
			fail("exit %d, want %d", code, st.code)
		}
		for _, s := range st.out {
			if !strings.Contains(out, subst(s)) {
				fail("stdout lacks %q", subst(s))
			}
		}
		if !strings.Contains(errOut, subst(st.errOut)) {
			fail("stderr lacks %q", subst(st.errOut))
		}
		if code == exitAPIError && !apiErrorLine.MatchString(errOut) {
			fail("stderr does not show the API's error and error_description")
		}
		if code != 0 && out != "" {
			fail("a failed command printed on standard output")
		}
		if len(st.capture) > 0 {
			var obj map[string]any
			d := json.NewDecoder(strings.NewReader(out))
			d.UseNumber()
			if err := d.Decode(&obj); err != nil {
				fail("not JSON: %v", err)
			}
			for name, field := range st.capture {
				switch val := obj[field].(type) {
				case json.Number:
					v[name] = val.String()
				case string:
					v[name] = val
				default:
					fail("no number or string %s", field)
				}
			}
		}
		if st.after != nil {
			st.after(t, v)
			if t.Failed() {
				t.FailNow()
			}
		}
	}
}
