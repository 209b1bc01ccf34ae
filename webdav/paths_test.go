package webdav_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"berth/webdav"
)

// TestPaths: how a URL names an item. Escaped and non-ASCII names,
// trailing slashes (a URL ending in "/" names a collection), paths that
// are not clean, and the mount's top above the roots. A row per case,
// each on a fresh server.
func TestPaths(t *testing.T) {
	runCases(t, []davCase{
		// Percent-escaped spaces and UTF-8 names reach vfs unescaped, come
		// back escaped in hrefs and plain in displayname, and survive GET and
		// MOVE. Formerly TestNonASCIIAndSpaceNames (webdav_test.go).
		{"escaped spaces and non-ASCII names", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/dir%20with%20space", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			name := "/dir%20with%20space/na%C3%AFve%20%E2%82%AC%20%F0%9F%98%80.txt"
			st, _, body = f.do("PUT", name, strings.NewReader("unicode"))
			want(t, "PUT", st, http.StatusCreated, body)
			if b, err := f.read("/dir with space/naïve € 😀.txt"); err != nil || string(b) != "unicode" {
				t.Fatalf("vfs read: %q, %v", b, err)
			}
			st, _, body = f.do("PROPFIND", "/dir%20with%20space/", nil, "Depth", "1")
			want(t, "PROPFIND", st, http.StatusMultiStatus, body)
			contains(t, body, "<D:href>/webdav/alice"+name+"</D:href>", "<D:displayname>naïve € 😀.txt</D:displayname>")
			st, _, body = f.do("GET", name, nil)
			want(t, "GET", st, http.StatusOK, body)
			st, _, body = f.do("MOVE", name, nil, "Destination", f.url("/%C3%A9t%C3%A9.txt"))
			want(t, "MOVE", st, http.StatusCreated, body)
			if b, err := f.read("/été.txt"); err != nil || string(b) != "unicode" {
				t.Fatalf("after MOVE: %q, %v", b, err)
			}
		}},

		// macOS's client sends every path decomposed (NFD), whatever the
		// listing said: a name stored precomposed (NFC) by anyone else is
		// found under its NFD form too, and written, moved and deleted as
		// the same item. The exact bytes always win, and a new name is
		// kept as sent. Before, GET of the NFD form was 404 and a PUT
		// made a second "café.txt" beside the first.
		{"a name in NFD finds the item stored in NFC", func(t *testing.T) {
			f := newFixture(t)
			const nfcDir, nfdDir = "/R%C3%A9sum%C3%A9s", "/Re%CC%81sume%CC%81s" // Résumés
			const nfc, nfd = "/caf%C3%A9.txt", "/cafe%CC%81.txt"                // café.txt
			st, _, body := f.do("MKCOL", nfcDir, nil)
			want(t, "MKCOL NFC", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", nfcDir+nfc, strings.NewReader("precomposed"))
			want(t, "PUT NFC", st, http.StatusCreated, body)
			st, _, body = f.do("GET", nfdDir+nfd, nil)
			want(t, "GET NFD", st, http.StatusOK, body)
			if string(body) != "precomposed" {
				t.Fatalf("GET NFD: %q", body)
			}
			st, _, body = f.do("PROPFIND", nfdDir+nfd, nil, "Depth", "0")
			want(t, "PROPFIND NFD", st, http.StatusMultiStatus, body)
			st, _, body = f.do("MKCOL", nfdDir, nil)
			want(t, "MKCOL NFD over NFC", st, http.StatusMethodNotAllowed, body)
			st, _, body = f.do("PUT", nfdDir+nfd, strings.NewReader("saved by Finder"))
			want(t, "PUT NFD over NFC", st, http.StatusNoContent, body)
			if b, err := f.read("/Résumés/café.txt"); err != nil || string(b) != "saved by Finder" {
				t.Fatalf("NFC file after the NFD PUT: %q, %v", b, err)
			}
			st, _, body = f.do("PROPFIND", nfcDir+"/", nil, "Depth", "1")
			want(t, "PROPFIND", st, http.StatusMultiStatus, body)
			if n := strings.Count(string(body), "<D:response>"); n != 2 {
				t.Fatalf("PROPFIND: %d responses, want the folder and one file:\n%s", n, body)
			}
			st, _, body = f.do("MOVE", nfdDir+nfd, nil, "Destination", f.url(nfdDir+"/tart%C3%AE.txt"))
			want(t, "MOVE NFD", st, http.StatusCreated, body)
			// A new name is kept as sent, and where both forms are
			// stored (the NFC one written over the API), each request
			// finds its own.
			st, _, body = f.do("PUT", nfdDir+nfd, strings.NewReader("a new NFD name"))
			want(t, "PUT new NFD", st, http.StatusCreated, body)
			dir, err := f.lookup("/Résumés")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.fs.WriteFile(context.Background(), f.root.ID, dir.ID, "café.txt", strings.NewReader("NFC over the API"), f.opts()); err != nil {
				t.Fatal(err)
			}
			for p, w := range map[string]string{nfdDir + nfd: "a new NFD name", nfcDir + nfc: "NFC over the API", nfcDir + "/tart%C3%AE.txt": "saved by Finder"} {
				st, _, body := f.do("GET", p, nil)
				if st != http.StatusOK || body != w {
					t.Fatalf("GET %s: %d %q, want %q", p, st, body, w)
				}
			}
			st, _, body = f.do("DELETE", nfdDir+"/tarti%CC%82.txt", nil)
			want(t, "DELETE NFD", st, http.StatusNoContent, body)
		}},

		// A URL ending in "/" names a collection. Where the name is a file,
		// writes to it are refused and the file stays: the slash used to be
		// dropped, so "PUT a.txt/" replaced a.txt and "DELETE a.txt/" deleted
		// it. Formerly TestTrailingSlashOnAFile (slash_test.go).
		{"a trailing slash on a file refuses writes", func(t *testing.T) {
			f := newFixture(t)
			for _, p := range []string{"/a.txt", "/b.txt"} {
				st, _, body := f.do("PUT", p, strings.NewReader("contents of "+p))
				want(t, "PUT "+p, st, http.StatusCreated, body)
			}
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			for _, c := range []struct {
				method, path, body string
				status             int
				hdr                []string
			}{
				{"PUT", "/a.txt/", "replaced", http.StatusConflict, nil},
				{"DELETE", "/a.txt/", "", http.StatusNotFound, nil},
				{"DELETE", "/a.txt/", "", http.StatusNotFound, []string{"If-Match", "*"}},
				{"DELETE", "/nothing/", "", http.StatusNotFound, nil},
				{"DELETE", "/d/nothing", "", http.StatusNotFound, nil},
				{"MOVE", "/a.txt/", "", http.StatusNotFound, []string{"Destination", f.url("/moved.txt")}},
				{"COPY", "/b.txt", "", http.StatusConflict, []string{"Destination", f.url("/a.txt/")}},
				{"MOVE", "/d/", "", http.StatusConflict, []string{"Destination", f.url("/a.txt/")}},
				{"LOCK", "/a.txt/", lockExclusive, http.StatusNotFound, nil},
			} {
				st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
				want(t, c.method+" "+c.path, st, c.status, body)
				if got, err := f.read("/a.txt"); err != nil || string(got) != "contents of /a.txt" {
					t.Fatalf("after %s %s: a.txt is %q, %v", c.method, c.path, got, err)
				}
			}
			// A collection's URL with or without the slash is the collection.
			st, _, body = f.do("MOVE", "/d/", nil, "Destination", f.url("/e/"))
			want(t, "MOVE d/ to e/", st, http.StatusCreated, body)
			st, _, body = f.do("DELETE", "/e/", nil)
			want(t, "DELETE e/", st, http.StatusNoContent, body)
		}},

		// "a.txt/" names a collection, and there is none; a GET or HEAD of it
		// is 404 as the writes to it are, rather than the file's bytes under a
		// URL that is not the file's. Formerly TestGetTrailingSlashOnAFile
		// (slashget_test.go).
		{"a trailing slash on a file is 404 for GET and HEAD", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("contents"))
			want(t, "PUT", st, http.StatusCreated, body)
			for _, m := range []string{"GET", "HEAD"} {
				st, h, body := f.do(m, "/a.txt/", nil)
				want(t, m+" a.txt/", st, http.StatusNotFound, body)
				if h.Get("ETag") != "" {
					t.Errorf("%s a.txt/: ETag %q", m, h.Get("ETag"))
				}
				st, _, body = f.do(m, "/a.txt", nil)
				want(t, m+" a.txt", st, http.StatusOK, body)
			}
		}},

		// A URL ending in "/" names a collection, so nothing makes a file
		// there: PUT, LOCK of a missing name (which creates an empty file),
		// and COPY or MOVE of a file to such a Destination are 409 and create
		// nothing. The slash used to be dropped, and the file then answered
		// 404 at the URL that made it. MKCOL and a collection's COPY take the
		// slash. Formerly TestTrailingSlashOnANewName (slashnew_test.go).
		{"a trailing slash on a new name makes no file", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			st, _, body = f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			for _, c := range []struct {
				method, path, body, made string
				hdr                      []string
			}{
				{"PUT", "/n1/", "x", "/n1", nil},
				{"LOCK", "/n2/", lockExclusive, "/n2", nil},
				{"COPY", "/a.txt", "", "/n3", []string{"Destination", f.url("/n3/")}},
				{"MOVE", "/a.txt", "", "/n4", []string{"Destination", f.url("/n4/")}},
			} {
				st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
				want(t, c.method+" "+c.path, st, http.StatusConflict, body)
				if _, err := f.lookup(c.made); err == nil {
					t.Fatalf("%s %s made %s", c.method, c.path, c.made)
				}
			}
			if got, err := f.read("/a.txt"); err != nil || string(got) != "a" {
				t.Fatalf("a.txt after the refused MOVE: %q %v", got, err)
			}
			st, _, body = f.do("COPY", "/d", nil, "Destination", f.url("/d2/"))
			want(t, "COPY of a collection to a/", st, http.StatusCreated, body)
			st, _, body = f.do("MKCOL", "/m/", nil)
			want(t, "MKCOL m/", st, http.StatusCreated, body)
		}},

		// /webdav/ lists the roots, and roots are not made over WebDAV, so
		// creating something directly below it is refused with 403, not the
		// 404 of a resource that could exist; below a name that is no root,
		// the parent collection is missing (409, RFC 4918 9.3.1 and 9.7.1).
		// Formerly TestWritesAtTheMountTop (mounttop_test.go).
		{"writes at the top of the mount are 403", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			top := func(method, p, body string, hdr ...string) (int, string) {
				req, _ := http.NewRequest(method, f.srv.URL+p, strings.NewReader(body))
				req.SetBasicAuth("alice", password)
				for i := 0; i+1 < len(hdr); i += 2 {
					req.Header.Set(hdr[i], hdr[i+1])
				}
				st, _, b := f.send(req)
				return st, b
			}
			for _, c := range []struct {
				method, path, body string
				want               int
			}{
				{"PUT", "/webdav/new.txt", "x", http.StatusForbidden},
				{"MKCOL", "/webdav/newroot", "", http.StatusForbidden},
				{"MKCOL", "/webdav/newroot/", "", http.StatusForbidden},
				{"LOCK", "/webdav/new.txt", lockExclusive, http.StatusForbidden},
				{"PUT", "/webdav/noroot/x.txt", "x", http.StatusConflict},
				{"MKCOL", "/webdav/noroot/x", "", http.StatusConflict},
				{"LOCK", "/webdav/noroot/x.txt", lockExclusive, http.StatusConflict},
				{"DELETE", "/webdav/noroot", "", http.StatusNotFound},
				{"PROPFIND", "/webdav/noroot", "", http.StatusNotFound},
			} {
				st, b := top(c.method, c.path, c.body, "Depth", "0")
				want(t, c.method+" "+c.path, st, c.want, b)
			}
			st, _, body = f.do("COPY", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/a.txt")
			want(t, "COPY to the mount's top", st, http.StatusForbidden, body)
			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/a.txt")
			want(t, "MOVE to the mount's top", st, http.StatusForbidden, body)
			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/noroot/a.txt")
			want(t, "MOVE below a name that is no root", st, http.StatusConflict, body)
			if b, err := f.read("/a.txt"); err != nil || string(b) != "a" {
				t.Fatalf("a.txt after refused moves: %q %v", b, err)
			}
		}},

		// A Destination is another server's unless it is an http or https
		// URI (of this host) or a path: "file:///webdav/alice/c.txt" and
		// "javascript:/webdav/alice/c.txt" were taken for their paths and
		// copied to, though no client of this server means them. 502 (RFC
		// 4918 9.8.5, 10.3), and nothing is made; a scheme in capitals and
		// a path alone stay this server's.
		{"a Destination of another scheme is another server", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/p.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			host := strings.TrimPrefix(f.srv.URL, "https://")
			for _, d := range []string{"file:///webdav/alice/c.txt", "javascript:/webdav/alice/c.txt", "ftp://" + host + "/webdav/alice/c.txt", "webdav:/webdav/alice/c.txt"} {
				for _, m := range []string{"COPY", "MOVE"} {
					st, _, body := f.do(m, "/p.txt", nil, "Destination", d)
					want(t, m+" to "+d, st, http.StatusBadGateway, body)
				}
			}
			if _, err := f.lookup("/c.txt"); err == nil {
				t.Fatal("a Destination of another scheme made c.txt")
			}
			for i, d := range []string{"HTTPS://" + host + "/webdav/alice/c1.txt", "/webdav/alice/c2.txt"} {
				st, _, body := f.do("COPY", "/p.txt", nil, "Destination", d)
				want(t, "COPY to "+d, st, http.StatusCreated, body)
				if _, err := f.lookup(fmt.Sprintf("/c%d.txt", i+1)); err != nil {
					t.Fatal(err)
				}
			}
		}},

		// A path or Destination holding an escaped slash, "." or ".." is
		// 400: it is not the clean path of any item. Formerly the second
		// half of TestMalformedRequestsChangeNothing (webdav_test.go); its
		// malformed bodies are a row of TestXML.
		{"unclean paths are 400", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/p.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			for _, p := range []string{"/a%2Fb", "/x/../p.txt", "/./p.txt"} {
				st, _, body = f.do("GET", p, nil)
				want(t, "path "+p, st, http.StatusBadRequest, body)
			}
			st, _, body = f.do("COPY", "/p.txt", nil, "Destination", f.srv.URL+"/webdav/alice/d%2Fq.txt")
			want(t, "Destination with %2F", st, http.StatusBadRequest, body)
			st, _, body = f.do("MOVE", "/p.txt", nil, "Destination", f.srv.URL+"/webdav/alice/x/../q.txt")
			want(t, "Destination with ..", st, http.StatusBadRequest, body)
		}},
	})
}

// TestPlainPath: davPath's shortcut for paths with nothing to unescape or
// refuse gives what the full cleaning gives, and leaves every other path
// to it.
func TestPlainPath(t *testing.T) {
	deep := strings.Repeat("/a", webdav.MaxPathDepth)
	for _, c := range []struct {
		rest  string
		plain bool // the shortcut answers
	}{
		{"", true},
		{"/", true},
		{"/alice", true},
		{"/alice/", true},
		{"/alice/docs/report.pdf", true},
		{"/alice/docs/", true},
		{"/alice/ünïcode name.txt", true},
		{deep, true},
		{deep + "/", true},
		{deep + "/a", false}, // too deep
		{"//", false},
		{"/alice//docs", false},
		{"/alice/docs//", false},
		{"/alice/./docs", false},
		{"/alice/../bob", false},
		{"/alice/..", false},
		{"/alice/.", false},
		{"/alice/a%20b", false},
		{"/alice/a%2Fb", false},
		{"/alice/a%2fb", false},
		{"/alice/a%5Cb", false},
		{"/alice/%2E%2E", false},
		{"/alice/bad%zz", false},
		{"/alice/...", true}, // a name, not a step
		{"/alice/.hidden", true},
	} {
		got, ok := webdav.PlainPath(c.rest)
		if ok != c.plain {
			t.Errorf("%q: shortcut %v, want %v", c.rest, ok, c.plain)
			continue
		}
		want, err := webdav.CleanPath(c.rest)
		if ok && (err != nil || got != want) {
			t.Errorf("%q: shortcut %q, full cleaning %q %v", c.rest, got, want, err)
		}
	}
}

// TestNewTargetBelowFolders: a PUT, MKCOL, COPY or MOVE into a folder
// below a root's top reads its target and that folder in one transaction
// (lookupNew), a MKCOL or small PUT without conditions in its commit;
// the answers are those of a lookup of each, for every state of the
// folder and the target.
func TestNewTargetBelowFolders(t *testing.T) {
	f := newFixture(t)
	for _, s := range []struct{ method, path string }{{"MKCOL", "/d"}, {"MKCOL", "/d/sub"}, {"PUT", "/d/f.txt"}, {"PUT", "/d/g.txt"}} {
		st, _, body := f.do(s.method, s.path, strings.NewReader(""))
		want(t, s.method+" "+s.path, st, http.StatusCreated, body)
	}
	for _, c := range []struct {
		method, path, body string
		hdr                []string
		status             int
	}{
		{"PUT", "/d/new.txt", "x", nil, http.StatusCreated},
		{"PUT", "/d/new.txt", "y", nil, http.StatusNoContent},
		{"PUT", "/d/sub/deep.txt", "x", nil, http.StatusCreated},
		{"PUT", "/d/sub", "x", nil, http.StatusMethodNotAllowed},
		{"PUT", "/d/missing/x.txt", "x", nil, http.StatusConflict},
		{"PUT", "/d/f.txt/x.txt", "x", nil, http.StatusConflict},
		{"PUT", "/top.txt", "x", nil, http.StatusCreated},
		{"PUT", "/top.txt", "y", nil, http.StatusNoContent},
		{"PUT", "/d", "x", nil, http.StatusMethodNotAllowed},
		{"PUT", "/d/sub", "", nil, http.StatusMethodNotAllowed},
		{"PUT", "/d/new.txt", "z", []string{"If-None-Match", "*"}, http.StatusPreconditionFailed},
		{"PUT", "/d/other.txt", "z", []string{"If-None-Match", "*"}, http.StatusCreated},
		{"MKCOL", "/d/sub2", "", nil, http.StatusCreated},
		{"MKCOL", "/d/sub", "", nil, http.StatusMethodNotAllowed},
		{"MKCOL", "/d/f.txt", "", nil, http.StatusMethodNotAllowed},
		{"MKCOL", "/d/missing/x", "", nil, http.StatusConflict},
		{"MKCOL", "/d/f.txt/x", "", nil, http.StatusConflict},
		{"MKCOL", "/topdir", "", nil, http.StatusCreated},
		{"MKCOL", "/topdir/", "", nil, http.StatusMethodNotAllowed},
		{"MKCOL", "/d/cond", "", []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
		{"MKCOL", "/d/cond", "", []string{"If-None-Match", "*"}, http.StatusCreated},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt")}, http.StatusCreated},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt")}, http.StatusNoContent},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/missing/f.txt")}, http.StatusConflict},
		{"MOVE", "/d/g.txt", "", []string{"Destination", f.url("/d/f.txt/g.txt")}, http.StatusConflict},
		{"MOVE", "/d/g.txt", "", []string{"Destination", f.url("/d/sub2/g.txt")}, http.StatusCreated},
		{"MOVE", "/d/sub2", "", []string{"Destination", f.url("/d/sub/sub2")}, http.StatusCreated},
		// Source and Destination in one read (lookupPair), with and
		// without the slash that has the source looked up first.
		{"MOVE", "/d/nothing", "", []string{"Destination", f.url("/d/x")}, http.StatusNotFound},
		{"MOVE", "/d/nothing/", "", []string{"Destination", f.url("/d/x/")}, http.StatusNotFound},
		{"MOVE", "/d/sub/", "", []string{"Destination", f.url("/d/missing/sub/")}, http.StatusConflict},
		{"MOVE", "/d/sub/", "", []string{"Destination", f.url("/d/f.txt/sub/")}, http.StatusConflict},
		{"MOVE", "/d/sub/", "", []string{"Destination", f.url("/d/new.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/copied.txt")}, http.StatusCreated},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/copied.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
		{"MOVE", "/d/sub/", "", []string{"Destination", f.url("/moved/")}, http.StatusCreated},
	} {
		st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
		want(t, c.method+" "+c.path+" "+strings.Join(c.hdr, " "), st, c.status, body)
	}
	for p, contents := range map[string]string{"/top.txt": "y", "/d/new.txt": "y", "/moved/deep.txt": "x", "/moved/f.txt": "", "/moved/sub2/g.txt": "", "/copied.txt": ""} {
		if got, err := f.read(p); err != nil || string(got) != contents {
			t.Errorf("%s: %q, %v; want %q", p, got, err, contents)
		}
	}
	for _, p := range []string{"/d/missing", "/d/g.txt", "/d/sub2", "/d/sub", "/d/x"} {
		if _, err := f.lookup(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
}
