package rest

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// fixturePassword is the password of every person the fixture creates.
const fixturePassword = "correct horse battery"

// fixture is a real berth REST server over real TLS: Badger and a disk
// chunk store in a temp directory, the account service with cheap argon2
// parameters, one organization and one person with a sync root, as the
// daemon's first run sets them up.
type fixture struct {
	t        testing.TB
	dir      string
	db       kv.Store
	chunks   *chunk.Disk
	fs       *vfs.FS
	accounts *account.Service
	logs     *berthtest.LogBuffer
	reg      *prometheus.Registry
	srv      *httptest.Server
	client   *http.Client

	stack  *berthtest.Stack
	org    account.Organization
	person account.Person // the first person, owner of root
	root   vfs.Root
	token  string // an access token of person
}

// fixtureOptions change the fixture's defaults.
type fixtureOptions struct {
	// Accounts overrides the account options (argon2 is made cheap unless set).
	Accounts account.Options
	// Policy is the organization's policy; nil means account.DefaultPolicy().
	Policy *account.Policy
	// Disk are the chunk store's options (a reserve and a disk that fills).
	Disk chunk.DiskOptions
	// Now is vfs's clock; nil is the wall clock.
	Now func() time.Time
	// ZipBudget is vfs's budget of zip layouts; 0 is vfs.ZipBudget.
	ZipBudget int64
	// TusMaxUploads is Options.TusMaxUploads.
	TusMaxUploads int
	// Store is the metadata store (berthtest.Options.Store); nil opens
	// Badger.
	Store kv.Store
}

// newFixture builds and starts a fixture; t.Cleanup stops it.
func newFixture(t testing.TB) *fixture { return newFixtureWith(t, fixtureOptions{}) }

func newFixtureWith(t testing.TB, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, logs: &berthtest.LogBuffer{}, reg: prometheus.NewRegistry()}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	st := berthtest.New(t, berthtest.Options{Logger: log, Accounts: o.Accounts, Policy: o.Policy, Disk: o.Disk, Now: o.Now, ZipBudget: o.ZipBudget, Store: o.Store})
	f.dir, f.db, f.chunks, f.fs, f.accounts, f.org = st.Dir, st.KV, st.Chunks, st.FS, st.Accounts, st.Org
	f.stack = st
	f.person, f.root, f.token = f.addPerson("alice")

	f.srv = httptest.NewUnstartedServer(New(Options{Logger: log, Registerer: f.reg, FS: f.fs, Accounts: f.accounts, TusMaxUploads: o.TusMaxUploads}))
	f.srv.EnableHTTP2 = true
	f.srv.StartTLS()
	f.client = f.srv.Client()
	t.Cleanup(f.srv.Close)
	return f
}

// addPerson creates a person of the fixture's organization with a sync
// root and returns it, the root and an access token.
func (f *fixture) addPerson(username string) (account.Person, vfs.Root, string) {
	f.t.Helper()
	return f.stack.AddPerson(f.t, username, fixturePassword)
}

// url returns the server's address for path (which starts with "/").
func (f *fixture) url(path string) string { return f.srv.URL + path }

// request sends a request with the fixture person's token (none when token
// is "") and returns the response; the caller closes its body.
func (f *fixture) request(method, path, token string, body io.Reader, header http.Header) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url(path), body)
	if err != nil {
		f.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp
}

// get sends an authenticated GET and returns status and body.
func (f *fixture) get(path string) (int, []byte) {
	f.t.Helper()
	return f.readAll(f.request(http.MethodGet, path, f.token, nil, nil))
}

// postForm sends an authenticated form POST and returns status and body.
func (f *fixture) postForm(path string, form url.Values) (int, []byte) {
	f.t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	return f.readAll(f.request(http.MethodPost, path, f.token, strings.NewReader(form.Encode()), h))
}

func (f *fixture) readAll(resp *http.Response) (int, []byte) {
	f.t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("read body: %v", err)
	}
	return resp.StatusCode, b
}

// wantError checks that a response is the spec error body with code.
func wantError(t testing.TB, status int, body []byte, wantStatus int, code string) {
	t.Helper()
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("status %d, body %q is not JSON: %v", status, body, err)
	}
	if status != wantStatus || e.Error != code {
		t.Fatalf("got %d %q (%s), want %d %q", status, e.Error, e.Description, wantStatus, code)
	}
}

// decode unmarshals a JSON body into v or fails.
func decode(t testing.TB, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
}

// at returns path with its root id filled in: at("/api/2/files/%d/x").
func (f *fixture) at(format string, args ...any) string {
	return fmt.Sprintf(format, append([]any{f.root.ID}, args...)...)
}

// update rewrites the golden files under testdata instead of comparing:
// go test ./rest -run <Test> -update.
var update = flag.Bool("update", false, "rewrite golden files under testdata")

// golden compares a JSON body, indented, with testdata/<name>, or writes it
// there with -update. Callers normalise ids and dates first.
func golden(t testing.TB, name string, body []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, bytes.TrimSpace(body), "", "  "); err != nil {
		t.Fatalf("golden %s: body %q is not JSON: %v", name, body, err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run with -update to create it)", name, err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs from the golden file (run with -update after checking):\ngot:\n%s\nwant:\n%s", name, buf.Bytes(), want)
	}
}
