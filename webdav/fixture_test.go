package webdav_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
	"berth/webdav"
)

// password is the password of every person the fixture creates.
const password = "correct horse battery"

// fixture is a real berth WebDAV server over real TLS: Badger and a disk
// chunk store in a temp directory, the account service with cheap argon2
// parameters, one organization and one person with a sync root.
type fixture struct {
	t        testing.TB
	dir      string
	db       kv.Store
	fs       *vfs.FS
	accounts *account.Service
	h        *webdav.Handler
	srv      *httptest.Server
	client   *http.Client
	logs     *berthtest.LogBuffer

	stack  *berthtest.Stack
	org    account.Organization
	person account.Person
	root   vfs.Root
	token  string
}

type fixtureOptions struct {
	Policy        *account.Policy
	Lockout       account.LockoutOptions
	InfiniteDepth bool
	PlainHTTP     bool // for clients that refuse a self-signed certificate
	// Disk are the chunk store's options (a reserve and a disk that fills).
	Disk chunk.DiskOptions
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, fixtureOptions{}) }

func newFixtureWith(t testing.TB, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, logs: &berthtest.LogBuffer{}}
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f.stack = berthtest.New(t, berthtest.Options{Logger: log, Accounts: account.Options{Lockout: o.Lockout, Logger: log}, Policy: o.Policy, Disk: o.Disk})
	f.dir, f.db, f.fs, f.accounts, f.org = f.stack.Dir, f.stack.DB, f.stack.FS, f.stack.Accounts, f.stack.Org
	f.person, f.root, f.token = f.addPerson("alice")

	f.h = webdav.New(webdav.Options{Logger: log, FS: f.fs, Accounts: f.accounts, InfiniteDepth: o.InfiniteDepth})
	f.srv = httptest.NewUnstartedServer(f.h)
	if o.PlainHTTP {
		f.srv.Start()
	} else {
		f.srv.EnableHTTP2 = true
		f.srv.StartTLS()
	}
	f.client = f.srv.Client()
	t.Cleanup(func() {
		f.srv.Close()
		if t.Failed() {
			t.Logf("server log:\n%s", f.logs.String())
		}
	})
	return f
}

// addPerson creates a person with a sync root named after them.
func (f *fixture) addPerson(username string) (account.Person, vfs.Root, string) {
	f.t.Helper()
	return f.stack.AddPerson(f.t, username, password)
}

// url is the server's address of a dav path below /webdav/alice.
func (f *fixture) url(p string) string { return f.srv.URL + "/webdav/alice" + p }

// do sends a request as alice (Basic auth) and returns status, headers and body.
func (f *fixture) do(method, p string, body io.Reader, hdr ...string) (int, http.Header, string) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.url(p), body)
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth("alice", password)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return f.send(req)
}

func (f *fixture) send(req *http.Request) (int, http.Header, string) {
	f.t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// want fails unless got is the wanted status.
func want(t testing.TB, what string, got, wantStatus int, body string) {
	t.Helper()
	if got != wantStatus {
		t.Fatalf("%s: status %d, want %d; body %q", what, got, wantStatus, body)
	}
}

// read returns the contents of the file at root-relative path p via vfs.
func (f *fixture) read(p string) ([]byte, error) {
	ctx := context.Background()
	n, err := f.lookup(p)
	if err != nil {
		return nil, err
	}
	r, err := f.fs.Open(ctx, f.root.ID, n.ID)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// contains fails unless body holds every wanted substring.
func contains(t testing.TB, body string, wanted ...string) {
	t.Helper()
	for _, w := range wanted {
		if !strings.Contains(body, w) {
			t.Fatalf("body lacks %q:\n%s", w, body)
		}
	}
}

// lookup resolves a root-relative path to its node.
func (f *fixture) lookup(p string) (vfs.Node, error) {
	return f.fs.Lookup(context.Background(), f.root.ID, p)
}

// opts are write options with no limits.
func (f *fixture) opts() vfs.WriteOptions { return vfs.WriteOptions{} }

// refusalWorld is a server where several refusals can apply to one write,
// for the rows that pin which one answers: alice's root holds f.txt, d/
// (with x.txt), r.lck (a locked extension, with contents), locked.txt,
// lr.lck and ld/ (locked, ld/ to infinity, by tokens no row presents),
// and she is a VIEWER of the organization share Team, which holds a.txt
// and dir/.
func newRefusalWorld(t *testing.T) *fixture {
	t.Helper()
	pol := account.DefaultPolicy()
	pol.LockedExtensions = ".lck"
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	for _, w := range []struct{ method, path, body string }{
		{"PUT", "/f.txt", "f"}, {"MKCOL", "/d", ""}, {"PUT", "/d/x.txt", "x"}, {"PUT", "/r.lck", "r"},
		{"PUT", "/locked.txt", "l"}, {"PUT", "/lr.lck", "l"}, {"MKCOL", "/ld", ""}, {"PUT", "/ld/y.txt", "y"},
	} {
		st, _, body := f.do(w.method, w.path, strings.NewReader(w.body))
		want(t, w.method+" "+w.path, st, http.StatusCreated, body)
	}
	for _, p := range []string{"/locked.txt", "/lr.lck", "/ld"} {
		st, _, body := f.do("LOCK", p, strings.NewReader(lockExclusiveOwned), "Depth", "infinity")
		want(t, "LOCK "+p, st, http.StatusOK, body)
	}
	ctx := context.Background()
	svc, admin, team := f.orgShare("Team")
	if _, err := svc.SetSubscribers(ctx, admin, f.org.ID, team.ID, share.Subscribers{Persons: []share.Entry{
		{ID: f.person.ID, Channel: share.ChannelWebDAV, Role: share.RoleViewer},
	}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.WriteFile(ctx, team.ID, team.FolderID, "a.txt", strings.NewReader("a"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.fs.Mkdir(ctx, team.ID, team.FolderID, "dir", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return f
}

// refusal is a write of a refusalWorld and the status it gets; path is
// below /webdav/.
type refusal struct {
	method, path string
	hdr          []string
	status       int
}

// checkRefusals sends each row as alice, and checks its status and that
// it changed nothing in her root.
func (f *fixture) checkRefusals(t *testing.T, rows []refusal) {
	t.Helper()
	before := f.tree()
	for _, r := range rows {
		req, err := http.NewRequest(r.method, f.srv.URL+"/webdav"+r.path, strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		if r.method == "MKCOL" {
			req.Body, req.ContentLength = http.NoBody, 0
		}
		req.SetBasicAuth("alice", password)
		for i := 0; i+1 < len(r.hdr); i += 2 {
			req.Header.Set(r.hdr[i], r.hdr[i+1])
		}
		st, _, body := f.send(req)
		want(t, r.method+" "+r.path+" "+strings.Join(r.hdr, " "), st, r.status, body)
		if after := f.tree(); after != before {
			t.Fatalf("%s %s changed alice's root:\n%s\nwas:\n%s", r.method, r.path, after, before)
		}
	}
}

// etag is the getetag of the dav path p (below /webdav/alice) that a
// PROPFIND Depth 0 answers.
func (f *fixture) etag(t testing.TB, p string) string {
	t.Helper()
	st, _, body := f.do("PROPFIND", p, strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:prop><D:getetag/></D:prop></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND "+p, st, http.StatusMultiStatus, body)
	m := getetagRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("PROPFIND %s: no getetag:\n%s", p, body)
	}
	return m[1]
}

var getetagRe = regexp.MustCompile(`<D:getetag>([^<]*)</D:getetag>`)
