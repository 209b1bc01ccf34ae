package daemon

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/spf13/cobra"

	"berth/account"
	"berth/berthtest"
	"berth/rest"
)

// adminPassword is the password of the persons these tests log in as.
const adminPassword = "correct horse battery"

// adminRun is the outcome of one `berth admin` command run in-process.
type adminRun struct {
	out, err string
	code     int
}

// runAdmin runs `berth admin args...` as Main would (the exit status
// included), with env as the whole environment and no terminal.
func runAdmin(t *testing.T, env map[string]string, args ...string) adminRun {
	t.Helper()
	var out, errw bytes.Buffer
	root := &cobra.Command{Use: "berth", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newAdminCommand(adminIO{out: &out, errw: &errw, getenv: func(k string) string { return env[k] }}))
	root.SetOut(&out)
	root.SetErr(&errw)
	root.SetArgs(append([]string{"admin"}, args...))
	code := 0
	if err := root.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(&errw, "berth:", err)
		code = exitCode(err)
	}
	return adminRun{out: out.String(), err: errw.String(), code: code}
}

// adminBerth is a real berth REST handler over a real TLS listener and a
// real Badger, with an administrator who can log in.
type adminBerth struct {
	stack  *berthtest.Stack
	srv    *httptest.Server
	ca     string // PEM file of the server's certificate
	config string // a session file path in a fresh directory
	admin  account.Person
}

func newAdminBerth(t *testing.T) *adminBerth {
	t.Helper()
	st := berthtest.New(t, berthtest.Options{})
	srv := httptest.NewUnstartedServer(rest.New(rest.Options{FS: st.FS, Accounts: st.Accounts}))
	// The tests of certificates make handshakes fail on purpose.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p, err := st.Accounts.CreatePerson(context.Background(), account.PersonInput{
		OrganizationID: st.Org.ID, Username: "boss", Email: "boss@example.com", Password: adminPassword, Admin: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	writePEM(t, ca, srv.Certificate().Raw)
	return &adminBerth{stack: st, srv: srv, ca: ca, config: filepath.Join(dir, "conf", "berth", "admin.json"), admin: p}
}

// selfSigned is the DER of a new self-signed certificate for 127.0.0.1.
func selfSigned(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "other"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func writePEM(t *testing.T, path string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
}

// login logs b's administrator in and fails the test if that fails.
func (b *adminBerth) login(t *testing.T) {
	t.Helper()
	r := runAdmin(t, map[string]string{adminPasswordEnv: adminPassword},
		"login", "--url", b.srv.URL, "--user", "boss", "--ca", b.ca, "--config", b.config)
	if r.code != 0 {
		t.Fatalf("login: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func (b *adminBerth) run(t *testing.T, args ...string) adminRun {
	t.Helper()
	return runAdmin(t, nil, append(args, "--config", b.config)...)
}

func (b *adminBerth) session(t *testing.T) *adminConfig {
	t.Helper()
	c, err := loadAdminConfig(b.config)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAdminLogin(t *testing.T) {
	b := newAdminBerth(t)
	r := runAdmin(t, map[string]string{adminPasswordEnv: adminPassword},
		"login", "--url", b.srv.URL+"/", "--user", "boss", "--ca", b.ca, "--config", b.config)
	if r.code != 0 || !strings.Contains(r.out, "as boss (person "+strconv.FormatUint(b.admin.ID, 10)) {
		t.Fatalf("login: exit %d\n%s%s", r.code, r.out, r.err)
	}
	for path, want := range map[string]os.FileMode{b.config: 0o600, filepath.Dir(b.config): 0o700} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	c := b.session(t)
	if c.URL != b.srv.URL || c.Username != "boss" || c.CAFile != b.ca || c.InsecureSkipVerify || c.RefreshToken == "" || c.GUID == "" {
		t.Errorf("session file holds %+v", c)
	}

	// A second login replaces the session and revokes the one it replaces.
	b.login(t)
	if _, _, err := b.stack.Accounts.Refresh(context.Background(), c.RefreshToken); !errors.Is(err, account.ErrInvalidToken) {
		t.Errorf("the replaced session's refresh token: %v, want revoked", err)
	}
	if r := b.run(t, "person", "show"); r.code != 0 || !strings.Contains(r.out, "boss@example.com") {
		t.Errorf("person show after the second login: exit %d\n%s%s", r.code, r.out, r.err)
	}

	insecure := filepath.Join(t.TempDir(), "admin.json")
	r = runAdmin(t, map[string]string{adminPasswordEnv: adminPassword},
		"login", "--url", b.srv.URL, "--user", "boss@example.com", "--insecure-skip-verify", "--config", insecure)
	if r.code != 0 {
		t.Errorf("login --insecure-skip-verify: exit %d\n%s", r.code, r.err)
	}
}

// TestAdminLoginTwoStep: a person with two-step verification logs in
// with a code (BERTH_AUTH_CODE, or typed), where berth admin could not
// log them in at all and so could not make the device password their
// WebDAV drive needs.
func TestAdminLoginTwoStep(t *testing.T) {
	b := newAdminBerth(t)
	ctx := context.Background()
	en, err := b.stack.Accounts.EnrollTwoStep(ctx, b.admin.ID, "authenticator", "")
	if err != nil {
		t.Fatal(err)
	}
	code, err := totp.GenerateCode(en.Secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.stack.Accounts.ConfirmTwoStep(ctx, b.admin.ID, code); err != nil {
		t.Fatal(err)
	}
	next, _ := totp.GenerateCode(en.Secret, time.Now().Add(30*time.Second))
	login := func(env map[string]string) adminRun {
		return runAdmin(t, env, "login", "--url", b.srv.URL, "--user", "boss", "--ca", b.ca, "--config", b.config)
	}
	for _, c := range []struct {
		name string
		env  map[string]string
		code int
		want string
	}{
		{"no code, no terminal", map[string]string{adminPasswordEnv: adminPassword}, exitUsage, adminAuthCodeEnv},
		{"a wrong code", map[string]string{adminPasswordEnv: adminPassword, adminAuthCodeEnv: "000000"}, exitNoAccess, "invalid_totp"},
		{"a wrong password with a code", map[string]string{adminPasswordEnv: "not the password", adminAuthCodeEnv: next}, exitNoAccess, "invalid_grant"},
		{"the code", map[string]string{adminPasswordEnv: adminPassword, adminAuthCodeEnv: next}, 0, "as boss"},
	} {
		r := login(c.env)
		if r.code != c.code || !strings.Contains(r.out+r.err, c.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", c.name, r.code, c.code, c.want, r.out, r.err)
		}
	}
	if r := b.run(t, "person", "show"); r.code != 0 || !strings.Contains(r.out, "boss@example.com") {
		t.Errorf("person show after a two-step login: exit %d\n%s%s", r.code, r.out, r.err)
	}
}

func TestAdminLoginFails(t *testing.T) {
	b := newAdminBerth(t)
	// httptest's servers share one certificate: another CA is made here.
	otherCA := filepath.Join(t.TempDir(), "other.pem")
	writePEM(t, otherCA, selfSigned(t))
	dead := httptest.NewTLSServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()

	for _, tc := range []struct {
		name     string
		password string
		args     []string
		code     int
		stderr   string
	}{
		{"wrong password", "wrong", []string{"--url", b.srv.URL, "--user", "boss", "--ca", b.ca}, exitNoAccess, "(HTTP 4"},
		{"unknown user", adminPassword, []string{"--url", b.srv.URL, "--user", "nobody", "--ca", b.ca}, exitNoAccess, "(HTTP 4"},
		// The refusal and the fix: the flag that trusts berth's certificate.
		{"certificate of another CA", adminPassword, []string{"--url", b.srv.URL, "--user", "boss", "--ca", otherCA}, exitNoAccess, "certificate is not trusted: log in with --ca"},
		{"system roots", adminPassword, []string{"--url", b.srv.URL, "--user", "boss"}, exitNoAccess, "certificate is not trusted: log in with --ca"},
		{"nothing listening", adminPassword, []string{"--url", deadURL, "--user", "boss", "--ca", b.ca}, exitNoAccess, "refused"},
		{"CA file missing", adminPassword, []string{"--url", b.srv.URL, "--user", "boss", "--ca", "/nonexistent.pem"}, exitNoAccess, "CA file"},
		{"no password", "", []string{"--url", b.srv.URL, "--user", "boss", "--ca", b.ca}, exitUsage, adminPasswordEnv},
		{"no url", adminPassword, []string{"--user", "boss"}, exitUsage, "--url is required"},
		{"no user", adminPassword, []string{"--url", b.srv.URL}, exitUsage, "--user is required"},
		{"plain http", adminPassword, []string{"--url", "http://127.0.0.1:1", "--user", "boss"}, exitUsage, "HTTPS only"},
		{"url with a path", adminPassword, []string{"--url", b.srv.URL + "/api/2", "--user", "boss"}, exitUsage, "HTTPS only"},
		{"ca and insecure", adminPassword, []string{"--url", b.srv.URL, "--user", "boss", "--ca", b.ca, "--insecure-skip-verify"}, exitUsage, "exclude"},
		{"an argument", adminPassword, []string{"--url", b.srv.URL, "--user", "boss", "extra"}, exitUsage, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			config := filepath.Join(t.TempDir(), "admin.json")
			r := runAdmin(t, map[string]string{adminPasswordEnv: tc.password}, append([]string{"login", "--config", config}, tc.args...)...)
			if r.code != tc.code || !strings.Contains(r.err, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.err, tc.code, tc.stderr)
			}
			if _, err := os.Stat(config); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a failed login left a session file (%v)", err)
			}
		})
	}
}

// TestAdminLocked: a login locked by failed attempts is exit 3 with
// berth's account_locked and its description, at login and for a session
// opened before the lock.
func TestAdminLocked(t *testing.T) {
	b := newAdminBerth(t)
	b.login(t)
	for range 5 {
		runAdmin(t, map[string]string{adminPasswordEnv: "wrong"}, "login", "--url", b.srv.URL, "--user", "boss", "--ca", b.ca,
			"--config", filepath.Join(t.TempDir(), "admin.json"))
	}
	r := runAdmin(t, map[string]string{adminPasswordEnv: adminPassword}, "login", "--url", b.srv.URL, "--user", "boss", "--ca", b.ca,
		"--config", filepath.Join(t.TempDir(), "admin.json"))
	if r.code != exitNoAccess || !strings.Contains(r.err, "account_locked (HTTP 403): ") {
		t.Errorf("login while locked: exit %d, %q", r.code, r.err)
	}
	if r := b.run(t, "person", "show"); r.code != exitNoAccess || !strings.Contains(r.err, "account_locked (HTTP 403): ") {
		t.Errorf("a session of a locked login: exit %d, %q", r.code, r.err)
	}
}

// TestAdminRefreshRotates: an expired access token is refreshed, the
// rotated refresh token stored (the old one is spent), and a token berth
// refuses with 401 is refreshed once and the request sent again.
func TestAdminRefreshRotates(t *testing.T) {
	b := newAdminBerth(t)
	b.login(t)
	before := b.session(t)

	expired := *before
	expired.Expiry = time.Now().Add(-time.Minute)
	if err := saveAdminConfig(b.config, &expired); err != nil {
		t.Fatal(err)
	}
	if r := b.run(t, "person", "show"); r.code != 0 {
		t.Fatalf("person show with an expired access token: exit %d\n%s", r.code, r.err)
	}
	after := b.session(t)
	if after.RefreshToken == before.RefreshToken || after.AccessToken == before.AccessToken || !after.Expiry.After(time.Now()) {
		t.Fatalf("the session was not rotated: before %+v, after %+v", before, after)
	}
	if fi, err := os.Stat(b.config); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("after a refresh the session file is %v, %v", fi.Mode().Perm(), err)
	}

	// The access token ends (a revocation, a restart with another key);
	// the refresh token still serves: the command refreshes and retries.
	if err := b.stack.Accounts.Revoke(context.Background(), after.AccessToken); err != nil {
		t.Fatal(err)
	}
	if r := b.run(t, "person", "show", "--json"); r.code != 0 || !json.Valid([]byte(r.out)) {
		t.Fatalf("person show after the access token was revoked: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if again := b.session(t); again.RefreshToken == after.RefreshToken {
		t.Error("the retry did not store the rotated refresh token")
	}

	// The whole session ends at berth: the command says to log in again.
	if err := b.stack.Accounts.RevokeAll(context.Background(), b.admin.ID); err != nil {
		t.Fatal(err)
	}
	if r := b.run(t, "person", "show"); r.code != exitNoAccess || !strings.Contains(r.err, "berth admin login again") {
		t.Errorf("person show after every session ended: exit %d, %q", r.code, r.err)
	}
}

// TestAdminConcurrentRefresh: commands that find the access token expired
// together refresh once; berth's reuse detection would end the session
// if two spent the same refresh token.
func TestAdminConcurrentRefresh(t *testing.T) {
	b := newAdminBerth(t)
	b.login(t)
	c := b.session(t)
	c.Expiry = time.Now().Add(-time.Minute)
	if err := saveAdminConfig(b.config, c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Go(func() { codes[i] = b.run(t, "person", "show").code })
	}
	wg.Wait()
	if slices.ContainsFunc(codes, func(c int) bool { return c != 0 }) {
		t.Fatalf("exit statuses %v", codes)
	}
	if r := b.run(t, "person", "show"); r.code != 0 {
		t.Errorf("the session did not survive concurrent refreshes: %s", r.err)
	}
}

func TestAdminLogout(t *testing.T) {
	b := newAdminBerth(t)
	b.login(t)
	c := b.session(t)
	if r := b.run(t, "logout"); r.code != 0 {
		t.Fatalf("logout: exit %d\n%s", r.code, r.err)
	}
	if _, err := os.Stat(b.config); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the session file is still there (%v)", err)
	}
	if _, _, err := b.stack.Accounts.Refresh(context.Background(), c.RefreshToken); !errors.Is(err, account.ErrInvalidToken) {
		t.Errorf("the refresh token after logout: %v, want revoked", err)
	}
	if _, err := b.stack.Accounts.ValidateAccess(context.Background(), c.AccessToken); err == nil {
		t.Error("the access token serves after logout")
	}
	if r := b.run(t, "person", "show"); r.code != exitNoAccess || !strings.Contains(r.err, "not logged in") {
		t.Errorf("person show after logout: exit %d, %q", r.code, r.err)
	}
	if r := b.run(t, "logout"); r.code != exitNoAccess {
		t.Errorf("a second logout: exit %d", r.code)
	}

	// berth gone: the file stays (the session still lives) unless --force.
	b.login(t)
	b.srv.Close()
	if r := b.run(t, "logout"); r.code != exitNoAccess || !strings.Contains(r.err, "--force") {
		t.Errorf("logout with berth gone: exit %d, %q", r.code, r.err)
	}
	if _, err := os.Stat(b.config); err != nil {
		t.Errorf("logout that could not revoke removed the session file: %v", err)
	}
	if r := b.run(t, "logout", "--force"); r.code != 0 {
		t.Errorf("logout --force: exit %d, %q", r.code, r.err)
	}
	if _, err := os.Stat(b.config); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("logout --force left the session file (%v)", err)
	}
}

// TestAdminPersonShow runs against the real handler: the table, --json,
// and the API's errors with their exit statuses.
func TestAdminPersonShow(t *testing.T) {
	b := newAdminBerth(t)
	plain, _, _ := b.stack.AddPerson(t, "carol", adminPassword)
	b.login(t)
	id := strconv.FormatUint(plain.ID, 10)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr string
	}{
		{"self", []string{"person", "show"}, 0, []string{"username  ", "boss", "company_policy", "--json shows it"}, ""},
		{"by id", []string{"person", "show", id}, 0, []string{"carol@example.com"}, ""},
		{"by e-mail", []string{"person", "show", "carol@example.com"}, 0, []string{"carol"}, ""},
		{"json", []string{"person", "show", id, "--json"}, 0, []string{`"username": "carol"`, `"type": "person"`}, ""},
		{"no such id", []string{"person", "show", "999999"}, exitAPIError, nil, "berth: not_found (HTTP 404)"},
		{"no such address", []string{"person", "show", "nobody@example.com"}, exitAPIError, nil, "not_found (HTTP 404)"},
		{"two arguments", []string{"person", "show", "1", "2"}, exitUsage, nil, "accepts at most 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := b.run(t, tc.args...)
			if r.code != tc.code || !strings.Contains(r.err, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.err, tc.code, tc.stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(r.out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, r.out)
				}
			}
		})
	}
}

// recorded is one request as the recording server saw it.
type recorded struct {
	Method, Path, Query string
	Form                url.Values
}

func (r recorded) String() string {
	s := r.Method + " " + r.Path
	if r.Query != "" {
		s += "?" + r.Query
	}
	if r.Form != nil {
		s += " " + r.Form.Encode()
	}
	return s
}

// recorder is a stand-in for the network, not for berth's storage: it
// records the requests a command sends and answers with the smallest
// objects the command reads (the caller is person 7 of organization 3, an
// e-mail address or license key names object 42, lists hold 250 items).
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

const recordedListTotal = 250

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer recorded-token" {
		http.Error(w, `{"error":"access_denied"}`, http.StatusUnauthorized)
		return
	}
	got := recorded{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery}
	if r.Method == http.MethodPost {
		if ct := r.Header.Get("Content-Type"); ct != "application/x-www-form-urlencoded" {
			http.Error(w, `{"error":"invalid_request","error_description":"content type `+ct+`"}`, http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(r.Body)
		got.Form, _ = url.ParseQuery(string(body))
	}
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, got)
	rec.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch p := got.Path; {
	case p == "/api/2/person":
		fmt.Fprint(w, `{"id":7,"username":"me","company_id":3,"type":"person"}`)
	case strings.HasSuffix(p, "/members"):
		fmt.Fprint(w, `{"members":[1,2],"members_from_group":[],"member_groups":[5],"member_groups_from_group":[]}`)
	case strings.HasSuffix(p, "s") && r.Method == http.MethodGet: // a list
		offset, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		var items []string
		for i := offset; i < min(offset+limit, recordedListTotal); i++ {
			items = append(items, fmt.Sprintf(`{"id":%d,"username":"u%d","name":"n%d","email":null}`, i, i, i))
		}
		fmt.Fprintf(w, `{"offset":%d,"results":[%s],"total":%d}`, offset, strings.Join(items, ","), recordedListTotal)
	case r.Method == http.MethodGet:
		fmt.Fprint(w, `{"id":42,"name":"x","policy":{"company_id":42,"max_file_size":0,"webdav_enabled":true,"type":"policy"},"type":"organization"}`)
	default:
		fmt.Fprint(w, `{"id":42,"policy":{"company_id":42,"type":"policy"}}`)
	}
}

// recordingSession starts a recorder and a session file that trusts it
// with a live access token.
func recordingSession(t *testing.T) (*recorder, string) {
	t.Helper()
	rec := &recorder{}
	srv := httptest.NewTLSServer(rec)
	t.Cleanup(srv.Close)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	writePEM(t, ca, srv.Certificate().Raw)
	config := filepath.Join(t.TempDir(), "admin.json")
	err := saveAdminConfig(config, &adminConfig{URL: srv.URL, Username: "me", CAFile: ca,
		AccessToken: "recorded-token", RefreshToken: "r", Expiry: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	return rec, config
}

// TestAdminRequests: the request(s) each subcommand sends, from its
// arguments; resolving an e-mail address, a license key or the caller's
// own organization is a GET before the call.
func TestAdminRequests(t *testing.T) {
	me := "GET /api/2/person"
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"org", "show"}, []string{me, "GET /api/2/organization/3"}},
		{[]string{"org", "show", "5"}, []string{"GET /api/2/organization/5"}},
		{[]string{"org", "show", "LICENSE-key"}, []string{"GET /api/2/organization/LICENSE-key"}},
		{[]string{"org", "create", "Sales", "description=the sales team", "email=s@example.com"},
			[]string{me, "POST /api/2/organization/3/organizations/create description=the+sales+team&email=s%40example.com&name=Sales"}},
		{[]string{"org", "create", "Sales", "--parent", "5"}, []string{"POST /api/2/organization/5/organizations/create name=Sales"}},
		{[]string{"org", "update", "5", "name=New", "hostname=files.example.com"}, []string{"POST /api/2/organization/5/update hostname=files.example.com&name=New"}},
		{[]string{"org", "update", "KEY", "name=New"}, []string{"GET /api/2/organization/KEY", "POST /api/2/organization/42/update name=New"}},
		{[]string{"org", "license-key"}, []string{me, "GET /api/2/organization/3/license_key"}},
		{[]string{"org", "license-key", "5"}, []string{"GET /api/2/organization/5/license_key"}},
		{[]string{"org", "disable", "5"}, []string{"POST /api/2/organization/5/disable "}},
		{[]string{"org", "enable", "5"}, []string{"POST /api/2/organization/5/enable "}},
		{[]string{"org", "delete", "5", "--yes"}, []string{"POST /api/2/organization/5/delete "}},
		{[]string{"org", "list"}, []string{me, "GET /api/2/organization/3/organizations?limit=100&offset=0"}},
		{[]string{"org", "list", "--org", "5", "--offset", "10", "--limit", "20"}, []string{"GET /api/2/organization/5/organizations?limit=20&offset=10"}},
		{[]string{"org", "policy", "get"}, []string{me, "GET /api/2/organization/3"}},
		{[]string{"org", "policy", "get", "5"}, []string{"GET /api/2/organization/5"}},
		{[]string{"org", "policy", "set", "max_file_size=10MiB", "webdav_enabled=false", "excluded_extensions=.exe,.bat"},
			[]string{me, "POST /api/2/organization/3/policy/update excluded_extensions=.exe%2C.bat&max_file_size=10485760&webdav_enabled=false"}},
		{[]string{"org", "policy", "set", "5", "space_quota=1 GB", "trim_revisions=true"},
			[]string{"POST /api/2/organization/5/policy/update space_quota=1000000000&trim_revisions=true"}},
		{[]string{"person", "show"}, []string{me}},
		{[]string{"person", "show", "12"}, []string{"GET /api/2/person/12"}},
		{[]string{"person", "show", "bob@example.com"}, []string{"GET /api/2/person/bob@example.com"}},
		{[]string{"person", "create", "bob", "bob@example.com", "first_name=Bob", "space_quota=2GiB", "--admin", "--password"},
			[]string{me, "POST /api/2/person/create admin=true&company_id=3&email=bob%40example.com&first_name=Bob&password=new+secret+pass&space_quota=2147483648&username=bob"}},
		{[]string{"person", "create", "bob", "bob@example.com", "--org", "5", "last_name=Builder"},
			[]string{"POST /api/2/person/create company_id=5&email=bob%40example.com&last_name=Builder&username=bob"}},
		{[]string{"person", "update", "12", "last_name=X", "active=false", "space_quota=0"}, []string{"POST /api/2/person/12/update active=false&last_name=X&space_quota=0"}},
		{[]string{"person", "update", "bob@example.com", "admin=true"}, []string{"GET /api/2/person/bob@example.com", "POST /api/2/person/42/update admin=true"}},
		{[]string{"person", "delete", "12", "--yes"}, []string{"POST /api/2/person/12/delete "}},
		{[]string{"person", "passwd", "12"}, []string{me, "POST /api/2/person/12/update password=new+secret+pass"}},
		{[]string{"person", "passwd", "7"}, []string{me, "POST /api/2/person/7/update current_password=current+pass&password=new+secret+pass"}},
		{[]string{"person", "unlock", "bob@example.com"}, []string{"GET /api/2/person/bob@example.com", "POST /api/2/person/42/unlock "}},
		{[]string{"person", "list", "--org", "5", "--limit", "10"}, []string{"GET /api/2/organization/5/persons?limit=10&offset=0"}},
		{[]string{"person", "list", "--org", "LICENSE"}, []string{"GET /api/2/organization/LICENSE", "GET /api/2/organization/42/persons?limit=100&offset=0"}},
		{[]string{"guest", "show", "4"}, []string{"GET /api/2/guest/4"}},
		{[]string{"guest", "show", "g@example.com"}, []string{"GET /api/2/guest/g@example.com"}},
		{[]string{"guest", "create", "g@example.com", "first_name=G"}, []string{me, "POST /api/2/guest/create company_id=3&email=g%40example.com&first_name=G"}},
		{[]string{"guest", "create", "g@example.com", "--password", "--org", "5"}, []string{"POST /api/2/guest/create company_id=5&email=g%40example.com&password=new+secret+pass"}},
		{[]string{"guest", "update", "g@example.com", "last_name=H"}, []string{"GET /api/2/guest/g@example.com", "POST /api/2/guest/42/update last_name=H"}},
		{[]string{"guest", "delete", "4", "--yes"}, []string{"POST /api/2/guest/4/delete "}},
		{[]string{"guest", "convert", "g@example.com"}, []string{"GET /api/2/guest/g@example.com", "POST /api/2/guest/42/convert "}},
		{[]string{"guest", "list"}, []string{me, "GET /api/2/organization/3/guests?limit=100&offset=0"}},
		{[]string{"group", "show", "6"}, []string{"GET /api/2/group/6"}},
		{[]string{"group", "create", "Engineering"}, []string{me, "POST /api/2/group/create company_id=3&name=Engineering"}},
		{[]string{"group", "members", "6"}, []string{"GET /api/2/group/6/members"}},
		{[]string{"group", "members", "6", "--include-from-group"}, []string{"GET /api/2/group/6/members?include_from_group=true"}},
		{[]string{"group", "list", "--org", "5"}, []string{"GET /api/2/organization/5/groups?limit=100&offset=0"}},
		{[]string{"group", "update", "6", "name=Eng", "active=false"}, []string{"POST /api/2/group/6/update active=false&name=Eng"}},
		{[]string{"group", "delete", "6", "--yes"}, []string{"POST /api/2/group/6/delete "}},
		{[]string{"group", "add", "6", "12", "b@example.com", "--group", "8,9"},
			[]string{"GET /api/2/person/b@example.com", "POST /api/2/group/6/members/update add_groups=8%2C9&add_members=12%2C42"}},
		{[]string{"group", "remove", "6", "--group", "8"}, []string{"POST /api/2/group/6/members/update remove_groups=8"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			rec, config := recordingSession(t)
			r := runAdmin(t, map[string]string{adminNewPasswordEnv: "new secret pass", adminPasswordEnv: "current pass"}, append(tc.args, "--config", config)...)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.err)
			}
			var got []string
			for _, q := range rec.reqs {
				got = append(got, q.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("sent\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

// TestAdminUsage: every mistake on the command line is exit status 2,
// said plainly, and sends nothing.
func TestAdminUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		env    map[string]string
		stderr string
	}{
		{[]string{"frob"}, nil, `unknown command "frob"`},
		{[]string{"org", "frob"}, nil, `unknown command "frob"`},
		{[]string{"person", "show", "--bogus"}, nil, "unknown flag: --bogus"},
		{[]string{"org", "show", "1", "2"}, nil, "accepts at most 1 arg"},
		{[]string{"org", "create"}, nil, "requires at least 1 arg"},
		{[]string{"org", "create", "Sales", "name=Other"}, nil, "field name is not a KEY=VALUE here"},
		{[]string{"org", "update", "5"}, nil, "requires at least 2 arg"},
		{[]string{"org", "update", "5", "name"}, nil, `"name" is not KEY=VALUE`},
		{[]string{"org", "update", "5", "Name=x"}, nil, "not a field name"},
		{[]string{"org", "update", "5", "name=a", "name=b"}, nil, "given twice"},
		{[]string{"org", "disable"}, nil, "accepts 1 arg"},
		{[]string{"org", "delete", "5"}, nil, "add --yes"},
		{[]string{"org", "list", "--limit", "500"}, nil, "--limit must be from 1 to 100"},
		{[]string{"org", "list", "--offset", "-1"}, nil, "--offset must be 0 or more"},
		{[]string{"org", "list", "--limit", "x"}, nil, "invalid argument"},
		{[]string{"org", "policy", "set", "5"}, nil, "no KEY=VALUE"},
		{[]string{"org", "policy", "set", "max_file_size=lots"}, nil, "not a size"},
		{[]string{"person", "create", "bob"}, nil, "requires at least 2 arg"},
		{[]string{"person", "create", "bob", "b@example.com", "password=x"}, nil, "field password is not a KEY=VALUE here"},
		{[]string{"person", "create", "bob", "b@example.com", "--admin", "admin=false"}, nil, "--admin and admin= both"},
		{[]string{"person", "create", "bob", "b@example.com", "--password"}, nil, adminNewPasswordEnv},
		{[]string{"person", "update", "12", "password=x"}, nil, "field password is not a KEY=VALUE here"},
		{[]string{"person", "update", "bob", "admin=true"}, nil, "neither a person id nor an e-mail address"},
		{[]string{"person", "passwd", "12"}, nil, adminNewPasswordEnv},
		{[]string{"person", "delete", "12"}, nil, "add --yes"},
		{[]string{"guest", "delete", "4"}, nil, "add --yes"},
		{[]string{"guest", "create", "g@example.com", "password=x"}, nil, "field password is not a KEY=VALUE here"},
		{[]string{"guest", "create", "g@example.com", "--password"}, nil, adminNewPasswordEnv},
		{[]string{"guest", "convert", "someone"}, nil, "neither a guest id nor an e-mail address"},
		{[]string{"group", "show", "eng"}, nil, `"eng" is not a group id`},
		{[]string{"group", "members"}, nil, "accepts 1 arg"},
		{[]string{"group", "delete", "6"}, nil, "add --yes"},
		{[]string{"group", "update", "6"}, nil, "requires at least 2 arg"},
		{[]string{"group", "add", "6"}, nil, "no person or --group to add"},
		{[]string{"group", "add", "6", "bob"}, nil, "neither a person id nor an e-mail address"},
		{[]string{"group", "remove", "6", "--group", "eng"}, nil, `"eng" is not a group id`},
		{[]string{"guest", "update", "g@example.com", "password=x"}, nil, "field password is not a KEY=VALUE here"},
		{[]string{"person", "passwd", "7"}, map[string]string{adminNewPasswordEnv: "new secret pass"}, adminPasswordEnv},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			rec, config := recordingSession(t)
			r := runAdmin(t, tc.env, append(tc.args, "--config", config)...)
			if r.code != exitUsage || !strings.Contains(r.err, tc.stderr) {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.err, exitUsage, tc.stderr)
			}
			for _, q := range rec.reqs {
				if q.Method != http.MethodGet {
					t.Errorf("a usage error sent %s", q)
				}
			}
		})
	}
}

// TestClientHelp: the help of the commands that run away from the
// server's data (admin, agent) lists their own flags, not the server's,
// which are persistent on the root and mean nothing to a client.
func TestClientHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{args: []string{"admin", "person", "create", "--help"}, want: []string{"USERNAME EMAIL", "--password", "--config", "--json"}},
		{args: []string{"agent", "--help"}, want: []string{"--server", "--login", "--ca-file", "--password-file", "--state-file", "--backup-interval", "--log-level"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			root := newRootCommand(io.Discard, io.Discard)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(tc.args)
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.want {
				if !strings.Contains(out.String(), s) {
					t.Errorf("help lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range []string{"--data", "--listen", "--smtp-host", "Global Flags"} {
				if strings.Contains(out.String(), s) {
					t.Errorf("help lists the server's flags (%s):\n%s", s, out.String())
				}
			}
		})
	}
}

// TestAgentRefusesServerFlags: the server's flags, which cobra lets
// through to every subcommand, stop the agent with their names, where
// `berth agent --data DIR` ran as if the flag were not there.
func TestAgentRefusesServerFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--data", "/tmp/x", "--server", "https://127.0.0.1:1", "--login", "a"}, "(--data)"},
		{[]string{"agent", "--server", "https://127.0.0.1:1", "--login", "a", "--listen", "127.0.0.1:1", "--config", "/x.yaml"}, "(--config, --listen)"},
	} {
		root := newRootCommand(io.Discard, io.Discard)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		root.SetArgs(tc.args)
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "does not read the server's flags "+tc.want) {
			t.Errorf("%q: %v", tc.args, err)
		}
	}
}

// TestAdminOutput: tables and --json over the recorder's answers, and
// --all following the pages of a list.
func TestAdminOutput(t *testing.T) {
	rec, config := recordingSession(t)
	r := runAdmin(t, nil, "person", "list", "--org", "5", "--all", "--config", config)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.err)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 1+recordedListTotal || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "USERNAME") ||
		!strings.HasPrefix(lines[250], "249 ") || !strings.Contains(lines[250], "u249") {
		t.Errorf("person list --all printed %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if len(rec.reqs) != 3 || rec.reqs[2].Query != "limit=100&offset=200" {
		t.Errorf("person list --all sent %v", rec.reqs)
	}

	r = runAdmin(t, nil, "person", "list", "--org", "5", "--offset", "100", "--limit", "10", "--json", "--config", config)
	var env struct {
		Offset  int               `json:"offset"`
		Results []json.RawMessage `json:"results"`
		Total   int               `json:"total"`
	}
	if err := json.Unmarshal([]byte(r.out), &env); err != nil || env.Offset != 100 || len(env.Results) != 10 || env.Total != 250 {
		t.Errorf("person list --json: %v %+v\n%s", err, env, r.out)
	}

	r = runAdmin(t, nil, "person", "list", "--org", "5", "--limit", "10", "--config", config)
	if !strings.Contains(r.err, "1 to 10 of 250") {
		t.Errorf("a partial page says nothing of the rest: %q", r.err)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"org", "policy", "get", "5"}, []string{"company_id  ", "42", "webdav_enabled", "true"}},
		{[]string{"org", "disable", "5"}, []string{"organization 5 disabled"}},
		{[]string{"person", "passwd", "12"}, []string{"password of person 12 set"}},
		{[]string{"group", "members", "6"}, []string{"members ", "1, 2", "member_groups ", "5", "none"}},
		{[]string{"org", "show", "5", "--json"}, []string{"{\n  \"id\": 42,"}},
	} {
		r := runAdmin(t, map[string]string{adminNewPasswordEnv: "pw"}, append(tc.args, "--config", config)...)
		for _, s := range tc.want {
			if !strings.Contains(r.out, s) {
				t.Errorf("%v: stdout lacks %q:\n%s%s", tc.args, s, r.out, r.err)
			}
		}
	}
}

// TestAdminBinary drives the real binary against a real berth: Main's
// exit statuses and the session across processes.
func TestAdminBinary(t *testing.T) {
	bin, data, p, lc := runningDaemon(t)
	config := filepath.Join(t.TempDir(), "admin.json")
	admin := func(env string, args ...string) (string, int) {
		cmd := exec.Command(bin, append(append([]string{"admin"}, args...), "--config", config)...)
		cmd.Env = append(os.Environ(), env)
		out, err := cmd.CombinedOutput()
		var xe *exec.ExitError
		if errors.As(err, &xe) {
			return string(out), xe.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := admin(adminPasswordEnv+"="+lc.password, "login", "--url", lc.base, "--user", "admin", "--ca", filepath.Join(data, "tls", "cert.pem"))
	if code != 0 {
		t.Fatalf("login: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"person", "show"}, 0, "admin"},
		{[]string{"person", "show", "999999"}, exitAPIError, "not_found (HTTP 404)"},
		{[]string{"org", "delete", "1"}, exitUsage, "--yes"},
	} {
		if out, code := admin("", tc.args...); code != tc.code || !strings.Contains(out, tc.out) {
			t.Errorf("%v: exit %d, want %d\n%s", tc.args, code, tc.code, out)
		}
	}
	p.stop(t)
	if out, code := admin("", "person", "show"); code != exitNoAccess {
		t.Errorf("person show with berth stopped: exit %d\n%s", code, out)
	}
}
