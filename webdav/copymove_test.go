package webdav_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/account"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
	"berth/webdav"
)

// TestCopyMove: COPY and MOVE, their Destination, Depth and Overwrite.
// A row per case, each on a fresh server. How locks meet COPY and MOVE is
// in lock_test.go, trailing slashes and the mount top in paths_test.go.
func TestCopyMove(t *testing.T) {
	runCases(t, []davCase{
		// Hosts compare without case and a scheme's default port is the same
		// authority as none (RFC 3986 6.2.2.1, 6.2.3), so such a Destination
		// names this server; it got 502 Bad Gateway as if it named another.
		// Another host or port is still 502. Formerly
		// TestDestinationHostEquivalence (desthost_test.go).
		{"a Destination host compares as RFC 3986 says", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			u, _ := url.Parse(f.srv.URL)
			hostname, port := u.Hostname(), u.Port()
			send := func(hostHeader, dest string) (int, string) {
				req, _ := http.NewRequest("COPY", f.url("/a.txt"), nil)
				req.SetBasicAuth("alice", password)
				req.Host = hostHeader
				req.Header.Set("Destination", dest)
				req.Header.Set("Overwrite", "T")
				st, _, b := f.send(req)
				return st, b
			}
			st, body = send("LocalHost:"+port, "https://localhost:"+port+"/webdav/alice/b.txt")
			want(t, "host in another case", st, http.StatusCreated, body)
			st, body = send("localhost", "https://localhost:443/webdav/alice/c.txt")
			want(t, "default port spelled out", st, http.StatusCreated, body)
			st, body = send("localhost:443", "https://localhost/webdav/alice/d.txt")
			want(t, "default port in Host", st, http.StatusCreated, body)
			st, body = send(hostname+":"+port, "https://elsewhere.example:"+port+"/webdav/alice/e.txt")
			want(t, "another host", st, http.StatusBadGateway, body)
			st, body = send("localhost", "https://localhost:8443/webdav/alice/e.txt")
			want(t, "another port", st, http.StatusBadGateway, body)
		}},

		// RFC 4918 9.9.2 asks for Depth infinity on a MOVE of a collection
		// only; a Depth header on the MOVE of a file has nothing to apply to,
		// and clients that send "Depth: 0" with every MOVE got 400. A
		// collection's MOVE with another Depth is still 400 and moves nothing.
		// Formerly TestMoveDepthOnAFile (movedepth_test.go).
		{"Depth on a MOVE applies to collections only", func(t *testing.T) {
			f := newFixture(t)
			for _, c := range [][3]string{{"PUT", "/a.txt", "a"}, {"PUT", "/b.txt", "b"}, {"MKCOL", "/d", ""}} {
				st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
				want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
			}
			st, _, body := f.do("MOVE", "/a.txt", nil, "Destination", f.url("/a2.txt"), "Depth", "0")
			want(t, "MOVE of a file with Depth 0", st, http.StatusCreated, body)
			st, _, body = f.do("MOVE", "/b.txt", nil, "Destination", f.url("/b2.txt"), "Depth", "1")
			want(t, "MOVE of a file with Depth 1", st, http.StatusCreated, body)
			st, _, body = f.do("MOVE", "/b2.txt", nil, "Destination", f.url("/b3.txt"), "Depth", "2")
			want(t, "MOVE with a Depth that is none", st, http.StatusBadRequest, body)
			for _, d := range []string{"0", "1"} {
				st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "Depth", d)
				want(t, "MOVE of a collection with Depth "+d, st, http.StatusBadRequest, body)
			}
			if _, err := f.lookup("/d"); err != nil {
				t.Fatalf("d after refused MOVEs: %v", err)
			}
		}},

		// A COPY or MOVE with Overwrite: T onto an existing destination that
		// is then refused (the source locked by someone else, the quota, an
		// excluded extension, a destination that holds the source) leaves the
		// destination as it was. Formerly
		// TestCopyMoveOverwriteRefusedKeepsDestination (overwrite_test.go).
		{"a refused overwrite keeps the destination", func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.SpaceQuota = "1000"
			pol.ExcludedExtensions = ".exe"
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			ctx := context.Background()
			put := func(p, body string) {
				t.Helper()
				st, _, b := f.do("PUT", p, strings.NewReader(body))
				if st != http.StatusCreated && st != http.StatusNoContent {
					t.Fatalf("PUT %s: %d %q", p, st, b)
				}
			}
			kept := func(what, p, wantBody string) {
				t.Helper()
				if got, err := f.read(p); err != nil || string(got) != wantBody {
					t.Fatalf("%s: %s is %q, %v; want %q", what, p, got, err, wantBody)
				}
			}
			big := strings.Repeat("a", 600)
			put("/a.txt", big)
			put("/b.txt", "b")

			// Over the quota: a copy of 600 bytes onto b.txt.
			st, _, body := f.do("COPY", "/a.txt", nil, "Destination", f.url("/b.txt"))
			want(t, "COPY over the quota", st, http.StatusInsufficientStorage, body)
			kept("COPY over the quota", "/b.txt", "b")

			// An excluded extension: b.exe was stored before the policy said so.
			if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "b.exe", strings.NewReader("old exe"), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, m := range []string{"COPY", "MOVE"} {
				st, _, body = f.do(m, "/b.txt", nil, "Destination", f.url("/b.exe"))
				want(t, m+" to an excluded name", st, http.StatusForbidden, body)
				kept(m+" to an excluded name", "/b.exe", "old exe")
			}

			// The source locked by someone else (a REST lock).
			n, err := f.lookup("/a.txt")
			if err != nil {
				t.Fatal(err)
			}
			lk, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "person:999", Holder: "person:999", Duration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"))
			want(t, "MOVE of a locked file", st, http.StatusLocked, body)
			kept("MOVE of a locked file", "/b.txt", "b")
			if err := f.fs.Unlock(ctx, f.root.ID, n.ID, lk.Token); err != nil {
				t.Fatal(err)
			}

			// The destination is a collection above the source.
			st, _, body = f.do("MKCOL", "/p", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			put("/p/c.txt", "c")
			for _, m := range []string{"COPY", "MOVE"} {
				st, _, body = f.do(m, "/p/c.txt", nil, "Destination", f.url("/p"))
				want(t, m+" onto the collection above", st, http.StatusForbidden, body)
				kept(m+" onto the collection above", "/p/c.txt", "c")
			}

			// What is allowed replaces the destination.
			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"))
			want(t, "MOVE over b.txt", st, http.StatusNoContent, body)
			kept("MOVE over b.txt", "/b.txt", big)
			st, _, body = f.do("COPY", "/p", nil, "Destination", f.url("/b.exe"), "Depth", "0")
			want(t, "COPY Depth 0 over b.exe", st, http.StatusNoContent, body)
			if n, err := f.lookup("/b.exe"); err != nil || !n.Dir {
				t.Fatalf("b.exe after COPY Depth 0 of a collection over it: %+v %v", n, err)
			}
		}},

		// A MOVE refused for more than one reason answers the first in
		// copyMove's order (Destination, Depth, Overwrite, the source, the
		// same resource, inside itself, the Destination's slash, the
		// conditions, locked extensions, the Destination's folder,
		// Overwrite: F, then vfs's refusals); an unconditional MOVE in one
		// root is looked up in its commit (vfs.MoveAt) and must answer as
		// the lookups before it did. Refused, each leaves the tree as it
		// was. Statuses as on 68fcef8, where every MOVE was looked up in a
		// read of its own.
		{"a MOVE answers the first of its refusals", func(t *testing.T) {
			pol := account.DefaultPolicy()
			pol.LockedExtensions = ".lck"
			pol.ExcludedExtensions = ".exe"
			f := newFixtureWith(t, fixtureOptions{Policy: &pol})
			for _, c := range [][3]string{{"MKCOL", "/d", ""}, {"MKCOL", "/d/sub", ""}, {"MKCOL", "/e", ""},
				{"PUT", "/d/f.txt", "f"}, {"PUT", "/x.txt", "x"}, {"PUT", "/r.lck", "r"}, {"PUT", "/e/r2.lck", "r2"}, {"PUT", "/d/sub/in.txt", "in"}} {
				st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
				want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
			}
			n, err := f.lookup("/x.txt")
			if err != nil {
				t.Fatal(err)
			}
			lk, err := f.fs.Lock(context.Background(), f.root.ID, n.ID, vfs.LockRequest{Owner: "person:999", Holder: "person:999", Duration: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			long := strings.Repeat("n", 300)
			for _, c := range []struct {
				src    string
				hdr    []string
				status int
			}{
				{"/d/f.txt/", nil, http.StatusNotFound},
				{"/d/f.txt/", []string{"Destination", "https://elsewhere.example/webdav/alice/y"}, http.StatusNotFound},
				{"/d/f.txt/", []string{"Destination", f.url("/missing/y")}, http.StatusNotFound},
				{"/d/f.txt", []string{"Destination", "https://elsewhere.example/webdav/alice/y"}, http.StatusBadGateway},
				{"/nothing", []string{"Destination", f.url("/d"), "Overwrite", "X"}, http.StatusBadRequest},
				{"/nothing", []string{"Destination", f.url("/d"), "Depth", "2"}, http.StatusBadRequest},
				{"/nothing", []string{"Destination", f.url("/nothing")}, http.StatusNotFound},
				{"/nothing", []string{"Destination", f.url("/missing/y")}, http.StatusNotFound},
				{"/nothing", []string{"Destination", f.url("/" + long)}, http.StatusNotFound},
				{"/d/f.txt", []string{"Destination", f.url("/" + long)}, http.StatusBadRequest},
				{"/d/f.txt", []string{"Destination", f.url("/missing/" + long)}, http.StatusBadRequest},
				{"/d/sub", []string{"Destination", f.url("/d/sub")}, http.StatusForbidden},
				{"/d/sub/", []string{"Destination", f.url("/d/sub")}, http.StatusForbidden},
				{"/d", []string{"Destination", f.url("/d/sub/x")}, http.StatusForbidden},
				{"/d", []string{"Destination", f.url("/missing/x"), "Depth", "0"}, http.StatusBadRequest},
				{"/d", []string{"Destination", f.url("/d"), "Depth", "1"}, http.StatusBadRequest},
				{"/d/f.txt", []string{"Destination", f.url("/missing/y"), "Depth", "1"}, http.StatusConflict},
				{"/d/f.txt", []string{"Destination", f.url("/x.txt/")}, http.StatusConflict},
				{"/d/f.txt", []string{"Destination", f.url("/missing/y.txt/")}, http.StatusConflict},
				{"/d/sub", []string{"Destination", f.url("/missing/y/")}, http.StatusConflict},
				{"/r.lck", []string{"Destination", f.url("/missing/r.lck")}, http.StatusForbidden},
				{"/r.lck", []string{"Destination", f.url("/x.txt/")}, http.StatusConflict},
				{"/d/f.txt", []string{"Destination", f.url("/e/r2.lck"), "Overwrite", "F"}, http.StatusForbidden},
				{"/d/f.txt", []string{"Destination", f.url("/x.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
				{"/d/f.txt", []string{"Destination", f.url("/d/f.txt/y")}, http.StatusConflict},
				{"/d/sub/in.txt", []string{"Destination", f.url("/d"), "Overwrite", "F"}, http.StatusPreconditionFailed},
				{"/d/sub/in.txt", []string{"Destination", f.url("/d")}, http.StatusForbidden},
				{"/d/sub/", []string{"Destination", f.url("/d/")}, http.StatusForbidden},
				{"/d/f.txt", []string{"Destination", f.url("/e/f.exe")}, http.StatusForbidden},
				{"/x.txt", []string{"Destination", f.url("/missing/x.txt")}, http.StatusConflict},
				{"/x.txt", []string{"Destination", f.url("/e/x.txt")}, http.StatusLocked},
				{"/d/f.txt", []string{"Destination", f.url("/x.txt")}, http.StatusLocked},
				{"/e", []string{"Destination", f.url("/d/f.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
			} {
				if st, _, body := f.do("MOVE", c.src, nil, c.hdr...); st != c.status {
					t.Errorf("MOVE %s %q: %d %q, want %d", c.src, c.hdr, st, body, c.status)
				}
			}
			for p, contents := range map[string]string{"/d/f.txt": "f", "/x.txt": "x", "/r.lck": "r", "/e/r2.lck": "r2", "/d/sub/in.txt": "in"} {
				if got, err := f.read(p); err != nil || string(got) != contents {
					t.Errorf("%s after the refused MOVEs: %q, %v; want %q", p, got, err, contents)
				}
			}
			// What is allowed: a file over a file, a folder over a file,
			// into the top folder and a folder into another.
			if err := f.fs.Unlock(context.Background(), f.root.ID, n.ID, lk.Token); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				src    string
				hdr    []string
				status int
			}{
				{"/d/f.txt", []string{"Destination", f.url("/x.txt")}, http.StatusNoContent},
				{"/x.txt", []string{"Destination", f.url("/e/x.txt"), "Overwrite", "F"}, http.StatusCreated},
				{"/d/sub/", []string{"Destination", f.url("/e/x.txt"), "Overwrite", "T"}, http.StatusNoContent},
				{"/e/x.txt/", []string{"Destination", f.url("/top/")}, http.StatusCreated},
				{"/top", []string{"Destination", f.url("/d/top"), "Depth", "infinity"}, http.StatusCreated},
			} {
				st, _, body := f.do("MOVE", c.src, nil, c.hdr...)
				want(t, "MOVE "+c.src+" "+strings.Join(c.hdr, " "), st, c.status, body)
			}
			if got, err := f.read("/d/top/in.txt"); err != nil || string(got) != "in" {
				t.Errorf("d/top/in.txt after the MOVEs: %q, %v", got, err)
			}
		}},

		// A COPY with Depth 0 of a collection over an existing one is a new
		// empty collection with the source's dead properties. It used to be a
		// folder made, then its properties set: a second step refused (here
		// the disk reaching its reserve between the two) answered 507 after
		// the destination had been replaced by an empty collection without
		// them. Now it happens whole or not at all. Formerly
		// TestCopyDepth0OverwriteIsOneStep (copyempty_test.go).
		{"a Depth 0 COPY over a collection is one step", func(t *testing.T) {
			var room atomic.Int64 // space checks left before the disk is full
			room.Store(1 << 40)
			f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
				Reserve: 1 << 30,
				Free: func() (int64, error) {
					if room.Add(-1) < 0 {
						return 0, nil
					}
					return 1 << 40, nil
				},
			}})
			for _, p := range []string{"/src", "/dst"} {
				st, _, body := f.do("MKCOL", p, nil)
				want(t, "MKCOL "+p, st, http.StatusCreated, body)
			}
			st, _, body := f.do("PUT", "/dst/keep.txt", strings.NewReader("keep"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, _, body = f.do("PROPPATCH", "/src", strings.NewReader(`<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:a>1</Z:a></D:prop></D:set></D:propertyupdate>`))
			want(t, "PROPPATCH", st, http.StatusMultiStatus, body)

			room.Store(1) // one more check finds room, the next does not
			st, _, body = f.do("COPY", "/src", nil, "Destination", f.url("/dst"), "Depth", "0")
			switch st {
			case http.StatusNoContent:
				if _, err := f.lookup("/dst/keep.txt"); err == nil {
					t.Fatal("COPY Depth 0 answered 204 but dst still holds keep.txt")
				}
				st, _, body = f.do("PROPFIND", "/dst", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop><Z:a/></D:prop></D:propfind>`), "Depth", "0")
				want(t, "PROPFIND", st, http.StatusMultiStatus, body)
				contains(t, body, ">1<")
			default:
				if got, err := f.read("/dst/keep.txt"); err != nil || string(got) != "keep" {
					t.Fatalf("COPY Depth 0 refused (%d %q), and dst/keep.txt is %q, %v", st, body, got, err)
				}
			}
		}},

		// Where several refusals apply to a COPY or MOVE, the one that
		// answers, on the one-transaction way (vfs.MoveAt) and the
		// looked-up one alike: a file named as a collection (404)
		// before the share's role (403, a VIEWER of Team, as source
		// or Destination), then Depth (400), locked_extensions (403)
		// and a lock (423).
		{"which refusal comes first", func(t *testing.T) {
			f := newRefusalWorld(t)
			d := func(p string) []string { return []string{"Destination", f.srv.URL + "/webdav" + p} }
			f.checkRefusals(t, []refusal{
				{"MOVE", "/Team/a.txt", d("/alice/m.txt"), http.StatusForbidden},
				{"MOVE", "/Team/a.txt/", d("/alice/m.txt"), http.StatusNotFound},
				{"MOVE", "/Team/a.txt", d("/Team/b.txt"), http.StatusForbidden},
				{"MOVE", "/Team/dir", append(d("/Team/dir2"), "If-Match", `"nope"`), http.StatusForbidden},
				{"MOVE", "/Team/dir/", d("/Team/dir2"), http.StatusForbidden},
				{"COPY", "/Team/a.txt", d("/Team/c.txt"), http.StatusForbidden},
				{"COPY", "/alice/f.txt", d("/Team/f.txt"), http.StatusForbidden},
				{"MOVE", "/alice/f.txt", d("/Team/f.txt"), http.StatusForbidden},
				{"MOVE", "/alice/f.txt", d("/Team/"), http.StatusForbidden},
				{"MOVE", "/alice/f.txt/", d("/alice/g.txt"), http.StatusNotFound},
				{"MOVE", "/alice/", d("/alice/x"), http.StatusForbidden},
				{"MOVE", "/alice/d", append(d("/alice/e"), "Depth", "0"), http.StatusBadRequest},
				{"MOVE", "/alice/r.lck", d("/alice/m.lck"), http.StatusForbidden},
				{"MOVE", "/alice/f.txt", d("/alice/r.lck"), http.StatusForbidden},
				{"MOVE", "/alice/locked.txt", d("/alice/m.txt"), http.StatusLocked},
				{"MOVE", "/alice/f.txt", d("/alice/ld/m.txt"), http.StatusLocked},
				{"MOVE", "/alice/f.txt", d("/alice/locked.txt"), http.StatusLocked},
			})
		}},

		// A MOVE works out once whether it is one transaction (plainMove):
		// fileAsCollection asks first where the path ends in "/", and
		// copyMove asked again, so a MOVE of "d/" did it twice.
		{"a MOVE decides once whether it is one transaction", func(t *testing.T) {
			f := newFixture(t)
			var decided atomic.Int64
			webdav.PlainMoveDecided(f.h, func() { decided.Add(1) })
			for _, c := range [][3]string{{"MKCOL", "/d", ""}, {"PUT", "/a.txt", "a"}} {
				st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
				want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
			}
			for _, c := range []struct {
				method, path string
				hdr          []string
				status       int
			}{
				{"MOVE", "/d/", []string{"Destination", f.url("/e/")}, http.StatusCreated},
				{"MOVE", "/e", []string{"Destination", f.url("/d")}, http.StatusCreated},
				{"MOVE", "/a.txt/", []string{"Destination", f.url("/b.txt")}, http.StatusNotFound},
				{"MOVE", "/d/", []string{"Destination", f.url("/e/"), "If-Match", `"x"`}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", []string{"Destination", f.url("/e/"), "Overwrite", "X"}, http.StatusBadRequest},
				{"COPY", "/d/", []string{"Destination", f.url("/e/")}, http.StatusCreated},
			} {
				decided.Store(0)
				st, _, body := f.do(c.method, c.path, nil, c.hdr...)
				want(t, c.method+" "+c.path, st, c.status, body)
				if n := decided.Load(); n != 1 {
					t.Errorf("%s %s %q: decided %d times whether it is one transaction, want once", c.method, c.path, c.hdr, n)
				}
			}
		}},
	})
}

// TestMoveAcrossRoots: a MOVE into another root is a copy and then a
// delete of the source, and what happens between the two decides what is
// left. A client that gives up once the copy is in place (a large tree's
// copy takes minutes, and clients time out) must not leave the tree in
// both roots: the delete finishes what the copy began. The delete can
// still be refused on its own, by a lock another client took on a file of
// the source while the copy ran: the MOVE answers 423 and the item is in
// both roots, nothing lost (docs/api.md, the MOVE between two roots).
func TestMoveAcrossRoots(t *testing.T) {
	for _, c := range []struct {
		name string
		// between runs once the copy is in place; gone ends the request.
		between    func(t *testing.T, f *fixture, a vfs.Node, gone func())
		wantStatus int // 0: the client is gone, no answer read
		bothRoots  bool
	}{
		{"the client gone after the copy", func(t *testing.T, f *fixture, a vfs.Node, gone func()) { gone() }, 0, false},
		{"the source locked meanwhile", func(t *testing.T, f *fixture, a vfs.Node, gone func()) {
			if _, err := f.fs.Lock(context.Background(), f.root.ID, a.ID, vfs.LockRequest{Owner: "another client", TokenRequired: true}); err != nil {
				t.Error(err)
			}
		}, http.StatusLocked, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			svc, ac, team := f.orgShare("Team")
			if _, err := svc.SetSubscribers(ctx, ac, f.org.ID, team.ID, share.Subscribers{Persons: []share.Entry{
				{ID: f.person.ID, Channel: "webdav", Role: "COLLABORATOR"},
			}}); err != nil {
				t.Fatal(err)
			}
			st, _, b := f.do("MKCOL", "/tree", nil)
			want(t, "MKCOL", st, http.StatusCreated, b)
			st, _, b = f.do("PUT", "/tree/a.txt", strings.NewReader("hello"))
			want(t, "PUT", st, http.StatusCreated, b)
			a, err := f.lookup("/tree/a.txt")
			if err != nil {
				t.Fatal(err)
			}
			rctx, gone := context.WithCancel(ctx)
			defer gone()
			webdav.CopiedForMove(f.h, func() { c.between(t, f, a, gone) })
			req := httptest.NewRequestWithContext(rctx, "MOVE", f.url("/tree/"), nil)
			req.SetBasicAuth("alice", password)
			req.Header.Set("Destination", f.srv.URL+"/webdav/Team/tree/")
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, req)
			if c.wantStatus != 0 {
				want(t, "MOVE", rec.Code, c.wantStatus, rec.Body.String())
			}

			if _, err := f.fs.Lookup(ctx, team.ID, "/tree/a.txt"); err != nil {
				t.Fatalf("the copy is not in the share: %v", err)
			}
			_, err = f.lookup("/tree/a.txt")
			switch {
			case c.bothRoots && err != nil:
				t.Errorf("the source is gone: %v", err)
			case !c.bothRoots && !errors.Is(err, vfs.ErrNotExist):
				t.Errorf("the moved tree is in both roots: %v", err)
			}
		})
	}
}
