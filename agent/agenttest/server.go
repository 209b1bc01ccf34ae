// Package agenttest runs the real berth for end-to-end tests of `berth
// agent`: one `berth serve` on 127.0.0.1 with a temporary data directory,
// and any number of `berth agent` processes, each with its own temporary
// folder and state file, standing for separate machines.
//
// It is test support: only test files import it. It builds the berth
// binary with `go build` once per test binary and drives it only through
// its command line and its HTTPS API, so it imports nothing of berth's
// (DESIGN.md: agent may import vfs/chunk at most).
//
// A test package that uses it should call Main from its TestMain, so the
// binary built for it is removed at the end:
//
//	func TestMain(m *testing.M) { agenttest.Main(m) }
//
// and then:
//
//	srv := agenttest.StartServer(t)
//	alice := srv.CreatePerson(t, "alice", false)
//	a := srv.NewAgent(t, alice)
//	a.Start(t)
//	id := a.WaitOnline(t)
//	st, body := srv.Do(t, alice.Token, "GET", fmt.Sprintf("/api/2/machine/%d/status", id), nil)
//
// Every process it starts is killed when the test that called
// StartServer or NewAgent ends (not a subtest that restarted it).
package agenttest

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Generous limits: the machine running the tests may be loaded, and a
// first start hashes a password with argon2id.
const (
	startTimeout = 120 * time.Second
	stopTimeout  = 30 * time.Second
)

// build is the binary built once per test binary (Binary).
var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// Main runs the tests of m and removes the berth binary built for them.
// Call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	os.Exit(code)
}

// moduleRoot is the directory of berth's go.mod, found from this file's
// own path: agent/agenttest/server.go.
func moduleRoot() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("agenttest: cannot find its own source to locate the module")
	}
	return filepath.Dir(filepath.Dir(filepath.Dir(self))), nil
}

// Binary returns the path of the berth binary, building it from the
// module's source on the first call of the test binary. Tests are
// skipped with -short, since they build and run the real binary.
func Binary(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("agenttest builds and runs the real berth binary (skipped with -short)")
	}
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		if build.dir, err = os.MkdirTemp("", "berth-agenttest-"); err != nil {
			build.err = err
			return
		}
		build.bin = filepath.Join(build.dir, "berth")
		cmd := exec.Command("go", "build", "-o", build.bin, ".")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		tb.Fatal(build.err)
	}
	return build.bin
}

// proc is a running berth process and what it wrote to stderr.
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{} // closed once it exited
	err  error         // its exit, valid once done is closed
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// start runs bin with args and env; each line of stderr goes to the
// buffer and to line (which may be nil).
// The process is killed when owner ends (the test that made the Server
// or Agent, so a process restarted in a subtest outlives the subtest).
func start(tb, owner testing.TB, bin string, args, env []string, line func(string)) *proc {
	tb.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if line != nil {
				line(sc.Text())
			}
		}
		io.Copy(io.Discard, pipe)
		p.err = cmd.Wait()
		close(p.done)
	}()
	owner.Cleanup(func() { p.kill() })
	return p
}

// running reports whether p has not exited yet.
func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits for the exit; it returns the exit error
// (nil for a clean exit) or a timeout error.
func (p *proc) stop() error {
	if !p.running() {
		return p.err
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return p.err
	case <-time.After(stopTimeout):
		p.kill()
		return fmt.Errorf("did not exit within %v of SIGTERM", stopTimeout)
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Server is a running `berth serve` and how to reach it.
type Server struct {
	// URL is https://127.0.0.1:port, without a trailing slash.
	URL string
	// CAFile is the server's self-signed certificate (PEM): the
	// agent's --ca-file.
	CAFile string
	// DataDir is the server's data directory.
	DataDir string
	// AdminLogin and AdminPassword are the first administrator's.
	AdminLogin, AdminPassword string
	// Client trusts CAFile.
	Client *http.Client

	owner testing.TB // the test that started it
	bin   string
	args  []string // beyond serve and its listeners
	addr  string   // the HTTPS address, kept across restarts
	p     *proc
	mu    sync.Mutex
	admin string // the administrator's access token, once asked
	org   uint64 // the administrator's organization
}

// StartServer starts `berth serve` on a new temporary data directory,
// with every listener on a free port of 127.0.0.1 and the extra
// command-line flags, and waits until it listens. The first start
// creates the data directory, the TLS certificate and the first
// administrator (login admin), whose generated password it reads from
// the data directory.
func StartServer(tb testing.TB, extra ...string) *Server {
	tb.Helper()
	s := &Server{
		DataDir:    filepath.Join(tb.TempDir(), "data"),
		AdminLogin: "admin",
		owner:      tb,
		bin:        Binary(tb),
		args:       extra,
		addr:       "127.0.0.1:0",
	}
	s.start(tb)
	s.CAFile = filepath.Join(s.DataDir, "tls", "cert.pem")
	pw, err := os.ReadFile(filepath.Join(s.DataDir, "initial-admin-password"))
	if err != nil {
		tb.Fatalf("agenttest: the first administrator's password: %v", err)
	}
	s.AdminPassword = strings.TrimSpace(string(pw))
	s.Client = trusting(tb, s.CAFile)
	return s
}

// Connect returns a Server for a berth that agenttest did not start,
// such as a node of a cluster test or a balancer in front of its nodes:
// at url (https://host:port), its certificate signed by caFile, run from
// the binary bin. The agents its NewAgent makes connect to url, and Do
// and JSON reach it; it owns no process, so Output, Stop, Kill and
// Restart are for servers StartServer started, and the administrator's
// helpers need AdminLogin and AdminPassword set.
func Connect(tb testing.TB, url, caFile, bin string) *Server {
	tb.Helper()
	return &Server{URL: url, CAFile: caFile, Client: trusting(tb, caFile), owner: tb, bin: bin}
}

// trusting is a client that trusts the certificates in caFile (PEM).
func trusting(tb testing.TB, caFile string) *http.Client {
	tb.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		tb.Fatalf("agenttest: no certificate in %s", caFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	return &http.Client{Timeout: 60 * time.Second, Transport: tr}
}

// start runs the server on s.addr and waits for its listening line.
func (s *Server) start(tb testing.TB) {
	tb.Helper()
	args := append([]string{"serve", "--data", s.DataDir,
		"--listen", s.addr, "--http-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--log-format", "json", "--shutdown-grace", "5s", "--gc-interval", "0s"}, s.args...)
	// The parent's environment stays out: BERTH_* there must not leak in.
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Dir(s.DataDir)}
	listening := make(chan string, 1)
	s.p = start(tb, s.owner, s.bin, args, env, func(line string) {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "listening" {
			return
		}
		addr, _ := rec["https"].(string)
		select {
		case listening <- addr:
		default:
		}
	})
	select {
	case addr := <-listening:
		s.addr = addr
		s.URL = "https://" + addr
	case <-s.p.done:
		tb.Fatalf("agenttest: berth serve exited before listening (%v):\n%s", s.p.err, s.p.output())
	case <-time.After(startTimeout):
		tb.Fatalf("agenttest: berth serve did not listen within %v:\n%s", startTimeout, s.p.output())
	}
}

// Output is what the server wrote to stderr (JSON log lines) in its
// latest run.
func (s *Server) Output() string { return s.p.output() }

// Stop stops the server with SIGTERM and waits for a clean exit.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	if err := s.p.stop(); err != nil {
		tb.Fatalf("agenttest: berth serve: %v:\n%s", err, s.p.output())
	}
}

// Kill stops the server with SIGKILL.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.p.kill()
}

// Restart starts the stopped (or killed) server again on the same data
// directory and the same address, so agents reconnect to the URL they
// know. Tokens issued before stay valid (they are in the data
// directory).
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	if s.p.running() {
		s.Stop(tb)
	}
	s.start(tb)
}

// Do sends a request with token (empty: none) and returns the status
// and body. form, when not nil, is sent as form fields (POST bodies);
// for GET it is the query.
func (s *Server) Do(tb testing.TB, token, method, path string, form url.Values) (int, []byte) {
	tb.Helper()
	var body io.Reader
	if form != nil && method == http.MethodGet {
		path += "?" + form.Encode()
	} else if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, s.URL+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		tb.Fatalf("agenttest: %s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("agenttest: %s %s: reading the answer: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// JSON sends a request like Do, fails the test unless it answers 200,
// and decodes the answer into out (nil: discarded).
func (s *Server) JSON(tb testing.TB, token, method, path string, form url.Values, out any) {
	tb.Helper()
	status, body := s.Do(tb, token, method, path, form)
	if status != http.StatusOK {
		tb.Fatalf("agenttest: %s %s: %d %s", method, path, status, body)
	}
	if out != nil {
		if err := json.Unmarshal(body, out); err != nil {
			tb.Fatalf("agenttest: %s %s: %v in %s", method, path, err, body)
		}
	}
}

// Token signs login in with the password grant (form holds extra
// fields, such as auth_code or guid; may be nil) and returns the access
// token; it fails the test on a refusal.
func (s *Server) Token(tb testing.TB, login, password string, form url.Values) string {
	tb.Helper()
	v := url.Values{"grant_type": {"password"}, "client_id": {ClientID}, "username": {login}, "password": {password}}
	for k, vs := range form {
		v[k] = vs
	}
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	s.JSON(tb, "", http.MethodPost, "/oauth/token", v, &tok)
	if tok.AccessToken == "" {
		tb.Fatalf("agenttest: the token answer for %s has no access_token", login)
	}
	return tok.AccessToken
}

// ClientID is the OAuth client_id berth accepts.
const ClientID = "anchor"

// AdminToken returns an access token of the first administrator (asked
// once per server).
func (s *Server) AdminToken(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	tok := s.admin
	s.mu.Unlock()
	if tok != "" {
		return tok
	}
	tok = s.Token(tb, s.AdminLogin, s.AdminPassword, nil)
	var me struct {
		OrganizationID uint64 `json:"company_id"`
	}
	s.JSON(tb, tok, http.MethodGet, "/api/2/person", nil, &me)
	s.mu.Lock()
	s.admin, s.org = tok, me.OrganizationID
	s.mu.Unlock()
	return tok
}

// OrganizationID is the first administrator's organization, where
// CreatePerson creates persons.
func (s *Server) OrganizationID(tb testing.TB) uint64 {
	tb.Helper()
	s.AdminToken(tb)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.org
}

// Person is a person created by CreatePerson, signed in (Token is not
// issued to a machine: the agent signs in on its own).
type Person struct {
	ID             uint64
	OrganizationID uint64
	RootID         uint64 // their sync root
	Login          string
	Password       string
	Token          string
}

// CreatePerson creates a person (an administrator when admin) in the
// first administrator's organization, through the REST API with the
// administrator's token, and signs them in.
func (s *Server) CreatePerson(tb testing.TB, login string, admin bool) Person {
	tb.Helper()
	return s.CreatePersonIn(tb, 0, login, admin)
}

// CreateOrganization creates an organization below the first
// administrator's (another tenant, whose administrators and persons see
// nothing of the first's) and returns its id.
func (s *Server) CreateOrganization(tb testing.TB, name string) uint64 {
	tb.Helper()
	var o struct {
		ID uint64 `json:"id"`
	}
	s.JSON(tb, s.AdminToken(tb), http.MethodPost, fmt.Sprintf("/api/2/organization/%d/organizations/create", s.OrganizationID(tb)), url.Values{"name": {name}}, &o)
	if o.ID == 0 {
		tb.Fatalf("agenttest: organizations/create answered no id for %s", name)
	}
	return o.ID
}

// CreatePersonIn is CreatePerson in organization org (0: the first
// administrator's), such as one made by CreateOrganization.
func (s *Server) CreatePersonIn(tb testing.TB, org uint64, login string, admin bool) Person {
	tb.Helper()
	p := Person{Login: login, Password: "pw-" + login + "-Correct-Horse-7"}
	v := url.Values{"username": {login}, "email": {login + "@example.com"}, "first_name": {login}, "password": {p.Password}}
	if org != 0 {
		v.Set("company_id", fmt.Sprint(org))
	}
	if admin {
		v.Set("admin", "true")
	}
	var out struct {
		ID             uint64 `json:"id"`
		OrganizationID uint64 `json:"company_id"`
		RootID         uint64 `json:"root_id"`
	}
	s.JSON(tb, s.AdminToken(tb), http.MethodPost, "/api/2/person/create", v, &out)
	p.ID, p.OrganizationID, p.RootID = out.ID, out.OrganizationID, out.RootID
	if p.ID == 0 || p.OrganizationID == 0 {
		tb.Fatalf("agenttest: person/create answered no id or company_id for %s", login)
	}
	p.Token = s.Token(tb, login, p.Password, nil)
	return p
}

// SetPolicy sets fields of organization org's policy (POST
// /api/2/organization/<org>/policy/update as the first administrator),
// such as {"file_server_enabled": {"true"}}; org 0 is the first
// administrator's organization. Policy defaults leave
// file_server_enabled off.
func (s *Server) SetPolicy(tb testing.TB, org uint64, fields url.Values) {
	tb.Helper()
	if org == 0 {
		org = s.OrganizationID(tb)
	}
	s.JSON(tb, s.AdminToken(tb), http.MethodPost, fmt.Sprintf("/api/2/organization/%d/policy/update", org), fields, nil)
}

// EnableFileServer turns file_server_enabled on in p's organization's
// policy and the file server of p's machine id on (server/enable as p),
// which mappings need.
func (s *Server) EnableFileServer(tb testing.TB, p Person, machineID uint64) {
	tb.Helper()
	s.SetPolicy(tb, p.OrganizationID, url.Values{"file_server_enabled": {"true"}})
	s.JSON(tb, p.Token, http.MethodPost, fmt.Sprintf("/api/2/machine/%d/server/enable", machineID), url.Values{}, nil)
}
