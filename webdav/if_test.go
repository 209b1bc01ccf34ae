package webdav_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
	"berth/webdav"
)

// TestIf: preconditions. The If header (RFC 4918 10.4) on writes and
// reads, If-Match and If-None-Match, If-Unmodified-Since, and the bounds
// on what an If header may name. A row per case, each on a fresh server.
func TestIf(t *testing.T) {
	runCases(t, []davCase{
		// A PUT's ETag is vfs's (REST's); a stale If-Match or If-None-Match: *
		// on an existing name refuses PUT, DELETE, MOVE and COPY with 412 and
		// changes nothing; the current ETag and a new name pass. Formerly
		// TestIfMatchAndIfNoneMatch (webdav_test.go).
		// Only conditions that compare entity tags read a collection's
		// listing for its tag: a tagged list's IPv6 host ("[") is not one.
		{"which conditions judge entity tags", func(t *testing.T) {
			for _, c := range []struct {
				hdr  []string
				want bool
			}{
				{nil, false},
				{[]string{"If-Match", `"d1-ab"`}, true},
				{[]string{"If-None-Match", "*"}, true},
				{[]string{"If", `(<urn:uuid:x>)`}, false},
				{[]string{"If", `(["d1-ab"])`}, true},
				{[]string{"If", `(Not ["d1-ab"])`}, true},
				{[]string{"If", `<https://[::1]:8443/webdav/alice/d/> (<urn:uuid:x>)`}, false},
				{[]string{"If", `<https://[::1]:8443/webdav/alice/d/> (["d1-ab"])`}, true},
				{[]string{"If", `(["unterminated`}, false},
			} {
				r := httptest.NewRequest("DELETE", "https://example.com/webdav/alice/d/", nil)
				for i := 0; i < len(c.hdr); i += 2 {
					r.Header.Set(c.hdr[i], c.hdr[i+1])
				}
				if got := webdav.JudgesTags(r); got != c.want {
					t.Errorf("%q: judges tags %v, want %v", c.hdr, got, c.want)
				}
			}
		}},
		{"If-Match and If-None-Match on every write", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
			want(t, "create", st, http.StatusCreated, body)
			etag := h.Get("ETag")
			n, _ := f.lookup("/a.txt")
			if etag != n.ETag() {
				t.Fatalf("PUT ETag %q, vfs (REST) ETag %q", etag, n.ETag())
			}
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Match", `"r999"`)
			want(t, "PUT If-Match stale", st, http.StatusPreconditionFailed, body)
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-None-Match", "*")
			want(t, "PUT If-None-Match *", st, http.StatusPreconditionFailed, body)
			st, _, body = f.do("DELETE", "/a.txt", nil, "If-Match", `"r999"`)
			want(t, "DELETE If-Match stale", st, http.StatusPreconditionFailed, body)
			st, _, body = f.do("MOVE", "/a.txt", nil, "If-Match", `"r999"`, "Destination", f.url("/b.txt"))
			want(t, "MOVE If-Match stale", st, http.StatusPreconditionFailed, body)
			st, _, body = f.do("COPY", "/a.txt", nil, "If-Match", `"r999"`, "Destination", f.url("/b.txt"))
			want(t, "COPY If-Match stale", st, http.StatusPreconditionFailed, body)
			if b, _ := f.read("/a.txt"); string(b) != "one" {
				t.Fatalf("contents changed to %q", b)
			}
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Match", etag)
			want(t, "PUT If-Match current (overwrite)", st, http.StatusNoContent, body)
			st, _, body = f.do("PUT", "/new.txt", strings.NewReader("x"), "If-None-Match", "*")
			want(t, "PUT If-None-Match * on a new name", st, http.StatusCreated, body)
		}},

		// An If-Match or If-None-Match that is neither * nor a list of
		// entity tags (an unquoted tag, a tag after something that is
		// none, * among tags) refuses a write with 400, as REST does, and
		// nothing changes: WebDAV split such a list at commas by a parser
		// of its own, so "x, <etag>" held where a GET (net/http) reads it
		// as failing, and an unquoted If-None-Match never matched and let
		// the write through.
		{"a malformed If-Match or If-None-Match refuses a write", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
			want(t, "create", st, http.StatusCreated, body)
			etag := h.Get("ETag")
			lock := `<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
			patch := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">r</Z:c></D:prop></D:set></D:propertyupdate>`
			for _, c := range []struct {
				method, path, body string
				hdr                []string
			}{
				{"PUT", "/a.txt", "two", []string{"If-None-Match", strings.Trim(etag, `"`)}},
				{"PUT", "/a.txt", "two", []string{"If-Match", "x, " + etag}},
				{"DELETE", "/a.txt", "", []string{"If-Match", "x, " + etag}},
				{"MOVE", "/a.txt", "", []string{"If-Match", "*, " + etag, "Destination", f.url("/b.txt")}},
				{"COPY", "/a.txt", "", []string{"If-None-Match", `"r1" "r2"`, "Destination", f.url("/b.txt")}},
				{"PROPPATCH", "/a.txt", patch, []string{"If-Match", etag + " x"}},
				{"LOCK", "/a.txt", lock, []string{"If-Match", "x, " + etag}},
				{"MKCOL", "/d", "", []string{"If-None-Match", "nope"}},
			} {
				st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
				want(t, c.method+" "+strings.Join(c.hdr[:2], ": "), st, http.StatusBadRequest, body)
			}
			if got, err := f.read("/a.txt"); err != nil || string(got) != "one" {
				t.Fatalf("a.txt after refused writes: %q %v", got, err)
			}
			for _, p := range []string{"/b.txt", "/d"} {
				if _, err := f.lookup(p); err == nil {
					t.Errorf("a refused write made %s", p)
				}
			}
			if n, _ := f.lookup("/a.txt"); n.Locked() || n.ETag() != etag {
				t.Fatalf("a.txt after refused writes: ETag %s, locks %+v", n.ETag(), n.Locks)
			}
		}},

		// RFC 9110 13.1: a failed If-Match is 412 on any method, and so
		// is an If-None-Match that matches on one other than GET and HEAD;
		// Apache's mod_dav answers a PROPFIND so. PROPFIND ignored both
		// (and If-Unmodified-Since) and listed the resource, 207. A list
		// that does not parse is read as a GET reads it. PROPPATCH judged
		// them already; UNLOCK ignored them as well.
		{"If-Match and If-None-Match on PROPFIND, PROPPATCH and UNLOCK", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
			want(t, "PUT", st, http.StatusCreated, body)
			etag := h.Get("ETag")
			st, _, body = f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, h, body = f.do("LOCK", "/d", strings.NewReader(lockExclusive))
			want(t, "LOCK /d", st, http.StatusOK, body)
			dtag := f.etag(t, "/d/")
			tok := h.Get("Lock-Token")
			past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
			future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
			patch := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">r</Z:c></D:prop></D:set></D:propertyupdate>`
			for _, c := range []struct {
				method, path string
				hdr          []string
				status       int
			}{
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Match", `"r999"`}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Match", `"r999", ` + etag}, http.StatusMultiStatus},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Match", "W/" + etag}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Match", "x, " + etag}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-None-Match", etag}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-None-Match", "W/" + etag}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-None-Match", "*"}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-None-Match", `"r999"`}, http.StatusMultiStatus},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Unmodified-Since", past}, http.StatusPreconditionFailed},
				{"PROPFIND", "/a.txt", []string{"Depth", "0", "If-Unmodified-Since", future}, http.StatusMultiStatus},
				{"PROPFIND", "/d/", []string{"Depth", "1", "If-Match", `"x"`}, http.StatusPreconditionFailed},
				{"PROPFIND", "/d/", []string{"Depth", "1", "If-Match", dtag}, http.StatusMultiStatus},
				{"PROPFIND", "/d/", []string{"Depth", "1", "If-None-Match", dtag}, http.StatusPreconditionFailed},
				{"PROPFIND", "/", []string{"Depth", "0", "If-None-Match", "*"}, http.StatusPreconditionFailed},
				{"PROPPATCH", "/a.txt", []string{"If-Match", `"r999"`}, http.StatusPreconditionFailed},
				{"PROPPATCH", "/a.txt", []string{"If-None-Match", etag}, http.StatusPreconditionFailed},
				{"PROPPATCH", "/d/", []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
				// UNLOCK too, of a lock it would otherwise remove.
				{"UNLOCK", "/d/", []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
				{"UNLOCK", "/d/", []string{"If-None-Match", dtag}, http.StatusPreconditionFailed},
				{"UNLOCK", "/d/", []string{"If-Match", "x"}, http.StatusBadRequest},
				{"UNLOCK", "/d/", []string{"If-Match", dtag}, http.StatusNoContent},
			} {
				b := propfindAll
				switch c.method {
				case "PROPPATCH":
					b = patch
				case "UNLOCK":
					b = ""
					c.hdr = append(c.hdr, "Lock-Token", tok)
				}
				st, _, body := f.do(c.method, c.path, strings.NewReader(b), c.hdr...)
				want(t, c.method+" "+c.path+" "+strings.Join(c.hdr, " "), st, c.status, body)
				if st == http.StatusPreconditionFailed && strings.Contains(body, "multistatus") {
					t.Errorf("%s %s %v: a 412 with a listing", c.method, c.path, c.hdr)
				}
			}
			if p := f.props("/a.txt"); len(p) != 0 {
				t.Errorf("refused PROPPATCHes set %v", p)
			}
		}},

		// A DELETE or MOVE of a folder, as of a file, judges If-Match,
		// If-None-Match and If-Unmodified-Since in its commit (vfs.DeleteAt,
		// MoveAt), on the item it finds at the path there: a folder has no
		// revision to hold them at, and a DELETE or MOVE by the id looked up
		// before acted on that item wherever it had gone since. A folder
		// that comes to the path has an ETag of its own.
		{"conditions on a folder's DELETE and MOVE", func(t *testing.T) {
			f := newFixture(t)
			for _, p := range []string{"/d", "/d/in"} {
				st, _, body := f.do("MKCOL", p, nil)
				want(t, "MKCOL "+p, st, http.StatusCreated, body)
			}
			d, _ := f.lookup("/d")
			dtag := f.etag(t, "/d/")
			past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
			for _, c := range []struct {
				method, path string
				hdr          []string
				status       int
			}{
				{"DELETE", "/d/", []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
				{"DELETE", "/d/", []string{"If-Match", `"x", *`}, http.StatusBadRequest},
				{"DELETE", "/d/", []string{"If-None-Match", dtag}, http.StatusPreconditionFailed},
				{"DELETE", "/d/", []string{"If-Unmodified-Since", past}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", []string{"If-Match", `"x"`, "Destination", f.url("/e/")}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", []string{"If-None-Match", "*", "Destination", f.url("/e/")}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", []string{"If-Match", dtag, "Destination", f.url("/e/")}, http.StatusCreated},
				// Another folder at the old path: the ETag names the one moved.
				{"MKCOL", "/d/", nil, http.StatusCreated},
				{"DELETE", "/d/", []string{"If-Match", dtag}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", []string{"If-Match", dtag, "Destination", f.url("/f/")}, http.StatusPreconditionFailed},
				{"DELETE", "/e/", []string{"If-Match", dtag}, http.StatusNoContent},
			} {
				st, _, body := f.do(c.method, c.path, nil, c.hdr...)
				want(t, c.method+" "+c.path+" "+strings.Join(c.hdr, " "), st, c.status, body)
			}
			if n, err := f.lookup("/d"); err != nil || n.ID == d.ID {
				t.Errorf("/d: %+v %v; want the new folder", n, err)
			}
			for _, p := range []string{"/e", "/e/in", "/f"} {
				if _, err := f.lookup(p); err == nil {
					t.Errorf("%s is there", p)
				}
			}
		}},

		// A collection's If-Match and If-None-Match, and an If header's
		// entity tag, are judged against the getetag a PROPFIND sends,
		// which follows the folder's children: a change of one makes the
		// tag a client read stale, for every method, and a DELETE or MOVE
		// with an If header (judged before its commit) holds it there.
		{"a collection's tag in conditions follows its children", func(t *testing.T) {
			f := newFixture(t)
			for _, w := range []struct{ method, path, body string }{{"MKCOL", "/d", ""}, {"PUT", "/d/a.txt", "a"}} {
				st, _, body := f.do(w.method, w.path, strings.NewReader(w.body))
				want(t, w.method+" "+w.path, st, http.StatusCreated, body)
			}
			old := f.etag(t, "/d/")
			st, _, body := f.do("PUT", "/d/b.txt", strings.NewReader("b"))
			want(t, "PUT /d/b.txt", st, http.StatusCreated, body)
			cur := f.etag(t, "/d/")
			lock := `<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
			for _, c := range []struct {
				method, path, body string
				hdr                []string
				status             int
			}{
				{"PROPFIND", "/d/", "", []string{"Depth", "0", "If-Match", old}, http.StatusPreconditionFailed},
				{"PROPFIND", "/d/", "", []string{"Depth", "0", "If-None-Match", old}, http.StatusMultiStatus},
				{"PROPFIND", "/d/", "", []string{"Depth", "0", "If-None-Match", cur}, http.StatusPreconditionFailed},
				{"PROPFIND", "/d/", "", []string{"Depth", "0", "If", "([" + old + "])"}, http.StatusPreconditionFailed},
				{"PROPFIND", "/d/", "", []string{"Depth", "0", "If", "([" + cur + "])"}, http.StatusMultiStatus},
				{"LOCK", "/d/", lock, []string{"If-Match", old}, http.StatusPreconditionFailed},
				{"DELETE", "/d/", "", []string{"If-Match", old}, http.StatusPreconditionFailed},
				{"DELETE", "/d/", "", []string{"If", "([" + old + "])"}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", "", []string{"If-Match", old, "Destination", f.url("/e/")}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", "", []string{"If", "([" + old + "])", "Destination", f.url("/e/")}, http.StatusPreconditionFailed},
				{"MOVE", "/d/", "", []string{"If", "([" + cur + "])", "Destination", f.url("/e/")}, http.StatusCreated},
				{"DELETE", "/e/", "", []string{"If-Match", cur}, http.StatusNoContent},
			} {
				st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
				want(t, c.method+" "+c.path+" "+strings.Join(c.hdr, " "), st, c.status, body)
			}
		}},

		// The same, racing: a conditional DELETE or MOVE of /d and a MOVE
		// of /d elsewhere, sent together, are one after the other in the
		// store, so never do both succeed. Judged before the commit, the
		// DELETE or MOVE then acted on the folder by its id, wherever the
		// other MOVE had taken it, and both succeeded. Bounded in rounds
		// and time; on the old code some rounds in ten hit the window.
		{"a conditional DELETE or MOVE of a folder races no MOVE", func(t *testing.T) {
			raceFolderMove(t, "conditional", func(etag string) []string { return []string{"If-Match", etag} })
		}},

		// The same with an If header, which reads the store before the
		// commit (lock tokens, other resources): the DELETE or MOVE still
		// acts only on the item it judged at the path, never on it where
		// the other MOVE took it since (a 412 then).
		{"a DELETE or MOVE of a folder with an If header races no MOVE", func(t *testing.T) {
			raceFolderMove(t, "If-header", func(etag string) []string { return []string{"If", "([" + etag + "])"} })
		}},

		// If-Match and If-None-Match are checked when a PUT starts; a write
		// that lands while its body is still arriving makes them false, so the
		// PUT is refused with 412 at its commit instead of replacing that
		// write. Formerly TestConditionalPutHoldsAtCommit
		// (ifmatchrace_test.go).
		{"a conditional PUT holds at its commit", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("v1"))
			want(t, "PUT v1", st, http.StatusCreated, body)
			etag := h.Get("ETag")

			for _, c := range []struct {
				what, path string
				hdr        []string
			}{
				{"If-Match", "/a.txt", []string{"If-Match", etag}},
				{"If-None-Match: *", "/new.txt", []string{"If-None-Match", "*"}},
			} {
				pr, pw := io.Pipe()
				done := make(chan int)
				go func() {
					st, _, _ := f.do("PUT", c.path, pr, c.hdr...)
					done <- st
				}()
				if _, err := pw.Write([]byte("slow ")); err != nil { // the handler is reading the body
					t.Fatal(err)
				}
				st, _, body := f.do("PUT", c.path, strings.NewReader("meanwhile"))
				if st != http.StatusCreated && st != http.StatusNoContent {
					t.Fatalf("%s: PUT meanwhile: %d %q", c.what, st, body)
				}
				pw.Write([]byte("upload"))
				pw.Close()
				if st := <-done; st != http.StatusPreconditionFailed {
					t.Errorf("%s: the slow PUT got %d, want 412", c.what, st)
				}
				if got, err := f.read(c.path); err != nil || string(got) != "meanwhile" {
					t.Errorf("%s: %s is %q, %v; want the write that landed meanwhile", c.what, c.path, got, err)
				}
			}
		}},

		// RFC 4918 10.4.1, a request whose If header does not match the
		// resource's state "MUST fail with a 412", whatever the method; GET,
		// HEAD, PROPFIND and UNLOCK went ahead as if it were absent. Formerly
		// TestIfHeaderOnReads (ifread_test.go).
		{"an If header that fails refuses reads too", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
			want(t, "PUT", st, http.StatusCreated, body)
			etag := h.Get("ETag")
			for _, m := range []string{"GET", "HEAD", "PROPFIND"} {
				st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(<urn:uuid:00000000-0000-0000-0000-000000000000>)")
				want(t, m+" with an If header that fails", st, http.StatusPreconditionFailed, body)
				st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", `(["r999"])`)
				want(t, m+" with an If entity tag that fails", st, http.StatusPreconditionFailed, body)
				ok := http.StatusOK
				if m == "PROPFIND" {
					ok = http.StatusMultiStatus
				}
				st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(Not <urn:uuid:00000000-0000-0000-0000-000000000000>)")
				want(t, m+" with an If header that holds", st, ok, body)
				st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(["+etag+"])")
				want(t, m+" with an If entity tag that holds", st, ok, body)
				st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(broken")
				want(t, m+" with a malformed If header", st, http.StatusBadRequest, body)
			}
			// UNLOCK too: the lock stays when the If header fails.
			st, h, body = f.do("LOCK", "/a.txt", strings.NewReader(lockExclusive))
			want(t, "LOCK", st, http.StatusOK, body)
			tok := h.Get("Lock-Token")
			st, _, body = f.do("UNLOCK", "/a.txt", nil, "Lock-Token", tok, "If", `(["r999"])`)
			want(t, "UNLOCK with an If header that fails", st, http.StatusPreconditionFailed, body)
			if n, err := f.lookup("/a.txt"); err != nil || !n.Locked() {
				t.Fatalf("a.txt after a refused UNLOCK: %+v %v", n.Locks, err)
			}
			st, _, body = f.do("UNLOCK", "/a.txt", nil, "Lock-Token", tok, "If", "("+tok+")")
			want(t, "UNLOCK with an If header that holds", st, http.StatusNoContent, body)
		}},

		// RFC 9110 13.1.4 and 13.2.2 have an origin server evaluate
		// If-Unmodified-Since (when If-Match is absent) before it changes a
		// resource: a resource modified after the date is 412 and stays as it
		// was. berth ignored it on every write. Formerly TestIfUnmodifiedSince
		// (ifunmodified_test.go).
		{"If-Unmodified-Since on every write", func(t *testing.T) {
			f := newFixture(t)
			st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
			want(t, "PUT", st, http.StatusCreated, body)
			etag := h.Get("ETag")
			past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
			future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)

			for _, c := range []struct {
				method string
				hdr    []string
			}{
				{"PUT", nil},
				{"DELETE", nil},
				{"MOVE", []string{"Destination", f.url("/b.txt")}},
				{"COPY", []string{"Destination", f.url("/b.txt")}},
				{"PROPPATCH", nil},
			} {
				var b *strings.Reader
				switch c.method {
				case "PUT":
					b = strings.NewReader("two")
				case "PROPPATCH":
					b = strings.NewReader(`<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">r</Z:c></D:prop></D:set></D:propertyupdate>`)
				default:
					b = strings.NewReader("")
				}
				st, _, body := f.do(c.method, "/a.txt", b, append([]string{"If-Unmodified-Since", past}, c.hdr...)...)
				want(t, c.method+" If-Unmodified-Since before the last change", st, http.StatusPreconditionFailed, body)
			}
			if got, err := f.read("/a.txt"); err != nil || string(got) != "one" {
				t.Fatalf("a.txt after refused writes: %q %v", got, err)
			}
			if _, err := f.lookup("/b.txt"); err == nil {
				t.Fatal("a refused COPY or MOVE made b.txt")
			}
			// If-Match, when present, is evaluated instead.
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Unmodified-Since", past, "If-Match", etag)
			want(t, "PUT with If-Match and an old If-Unmodified-Since", st, http.StatusNoContent, body)
			st, _, body = f.do("PUT", "/a.txt", strings.NewReader("three"), "If-Unmodified-Since", future)
			want(t, "PUT If-Unmodified-Since after the last change", st, http.StatusNoContent, body)
			// A new resource has no modification date: the header is ignored.
			st, _, body = f.do("PUT", "/new.txt", strings.NewReader("n"), "If-Unmodified-Since", past)
			want(t, "PUT of a new name", st, http.StatusCreated, body)
			// So is a date that is not one.
			st, _, body = f.do("DELETE", "/new.txt", nil, "If-Unmodified-Since", "yesterday")
			want(t, "DELETE with an invalid date", st, http.StatusNoContent, body)
		}},

		// Two revisions written within one second share Last-Modified: a
		// date proves the client's copy current only when the revision
		// was written before the second it names. GET with the old
		// revision's date was 304 (the client kept the old bytes), and a
		// write with If-Unmodified-Since of it replaced the revision its
		// client never saw. The ETag decides as before; a later second
		// still proves, for reads and writes alike.
		{"dates prove nothing of their own second", func(t *testing.T) {
			f := newFixture(t)
			t0, old, cur := berthtest.SameSecond(t, f.fs, f.root.ID, f.root.FolderID, "a.txt", "old", "new", vfs.WriteOptions{})
			lm := t0.UTC().Format(http.TimeFormat)
			next := t0.Add(time.Second).UTC().Format(http.TimeFormat)
			for _, c := range []struct {
				what, method string
				hdr          []string
				status       int
				body         string
			}{
				{"GET If-Modified-Since the old revision's date", "GET", []string{"If-Modified-Since", lm}, 200, "new"},
				{"HEAD If-Modified-Since the old revision's date", "HEAD", []string{"If-Modified-Since", lm}, 200, ""},
				{"GET If-Modified-Since the next second", "GET", []string{"If-Modified-Since", next}, 304, ""},
				{"GET If-Modified-Since in the future", "GET", []string{"If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, 200, "new"},
				{"GET If-None-Match of the old ETag", "GET", []string{"If-None-Match", old.ETag()}, 200, "new"},
				{"GET If-None-Match of the ETag, the old date", "GET", []string{"If-None-Match", cur.ETag(), "If-Modified-Since", lm}, 304, ""},
				{"GET If-Unmodified-Since the old revision's date", "GET", []string{"If-Unmodified-Since", lm}, 412, ""},
				{"GET If-Unmodified-Since the next second", "GET", []string{"If-Unmodified-Since", next}, 200, "new"},
				{"PUT If-Unmodified-Since the old revision's date", "PUT", []string{"If-Unmodified-Since", lm}, 412, ""},
				{"DELETE If-Unmodified-Since the old revision's date", "DELETE", []string{"If-Unmodified-Since", lm}, 412, ""},
				{"MOVE If-Unmodified-Since the old revision's date", "MOVE", []string{"If-Unmodified-Since", lm, "Destination", f.url("/b.txt")}, 412, ""},
				{"PUT If-Match of the old ETag", "PUT", []string{"If-Match", old.ETag()}, 412, ""},
			} {
				var body io.Reader
				if c.method == "PUT" {
					body = strings.NewReader("lost")
				}
				st, h, got := f.do(c.method, "/a.txt", body, c.hdr...)
				want(t, c.what, st, c.status, got)
				if c.status != 412 && got != c.body {
					t.Errorf("%s: body %q, want %q", c.what, got, c.body)
				}
				if c.status == 304 && (h.Get("ETag") != cur.ETag() || h.Get("Cache-Control") != "private, no-cache") {
					t.Errorf("%s: ETag %q, Cache-Control %q; want %q and revalidation", c.what, h.Get("ETag"), h.Get("Cache-Control"), cur.ETag())
				}
			}
			if b, err := f.read("/a.txt"); err != nil || string(b) != "new" {
				t.Fatalf("a.txt after refused writes: %q %v", b, err)
			}
			st, _, body := f.do("PUT", "/a.txt", strings.NewReader("newer"), "If-Unmodified-Since", next)
			want(t, "PUT If-Unmodified-Since the next second", st, http.StatusNoContent, body)
		}},

		// An If header of 1,000 conditions is 400, a path 5,000 segments deep
		// is 414 as the Request-URI, 400 as a Destination or an If tag, and
		// nothing changes. Formerly TestIfHeaderAndPathLimits
		// (iflimits_test.go).
		{"If headers and paths are bounded", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("PUT", "/i.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)

			conds := strings.Repeat("(<urn:uuid:00000000-0000-0000-0000-000000000000>) ", 1000)
			st, _, body = f.do("PUT", "/i.txt", strings.NewReader("y"), "If", conds)
			want(t, "PUT with 1,000 If conditions", st, http.StatusBadRequest, body)
			contains(t, body, "conditions")

			deep := strings.Repeat("/a", 5000)
			st, _, body = f.do("UNLOCK", deep, nil, "Lock-Token", "<urn:uuid:00000000-0000-0000-0000-000000000000>")
			want(t, "UNLOCK of a path 5,000 deep", st, http.StatusRequestURITooLong, body)
			st, _, body = f.do("COPY", "/i.txt", nil, "Destination", f.url(deep))
			want(t, "COPY to a path 5,000 deep", st, http.StatusBadRequest, body)
			contains(t, body, "Destination")
			st, _, body = f.do("PUT", "/i.txt", strings.NewReader("y"), "If", "<"+f.url(deep)+"> (<urn:uuid:00000000-0000-0000-0000-000000000000>)")
			want(t, "PUT with an If tag 5,000 deep", st, http.StatusBadRequest, body)

			// Distinct resources of more than 4,096 segments in all are
			// 400: each list reads its resource's path from the top, and
			// 256 tags 1,000 folders deep took one GET seconds of work.
			var tags strings.Builder
			for i := range 5 {
				fmt.Fprintf(&tags, "<%s/x%d> (<urn:uuid:00000000-0000-0000-0000-000000000000>) ", f.url(strings.Repeat("/a", 1000)), i)
			}
			st, _, body = f.do("GET", "/i.txt", nil, "If", tags.String())
			want(t, "GET with If tags of 5,000 segments in all", st, http.StatusBadRequest, body)
			contains(t, body, "segments")
			// The same resource in many lists counts once, and a list
			// that holds still lets the write through.
			lk := strings.Repeat("/a", 500)
			st, _, body = f.do("MKCOL", "/a", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, h, body := f.do("LOCK", "/a", strings.NewReader(lockExclusive), "Depth", "infinity")
			want(t, "LOCK /a", st, http.StatusOK, body)
			token := h.Get("Lock-Token")
			var same strings.Builder
			for range 200 {
				fmt.Fprintf(&same, "<%s> (<urn:uuid:00000000-0000-0000-0000-000000000000>) ", f.url(lk))
			}
			fmt.Fprintf(&same, "<%s> (%s)", f.url(lk), token)
			st, _, body = f.do("PUT", "/a/b.txt", strings.NewReader("b"), "If", same.String())
			want(t, "PUT below a lock, its token in the 201st list of one deep tag", st, http.StatusCreated, body)
			if b, err := f.read("/i.txt"); err != nil || string(b) != "x" {
				t.Fatalf("i.txt = %q, %v; want it unchanged", b, err)
			}
		}},
	})
}

// raceFolderMove sends, for at most 40 rounds or 10 s, a DELETE or MOVE
// of /d carrying the headers cond gives for the folder's getetag together with a
// plain MOVE of /d elsewhere, and fails when both succeed: one of them
// must find /d gone.
func raceFolderMove(t *testing.T, what string, cond func(etag string) []string) {
	f := newFixture(t)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 40 && time.Now().Before(deadline); i++ {
		st, _, body := f.do("MKCOL", "/d", nil)
		want(t, "MKCOL", st, http.StatusCreated, body)
		etag := f.etag(t, "/d/")
		other := make(chan int)
		go func() {
			st, _, _ := f.do("MOVE", "/d/", nil, "Destination", f.url(fmt.Sprintf("/x%d/", i)))
			other <- st
		}()
		method, hdr := "DELETE", cond(etag)
		if i%2 == 1 {
			method, hdr = "MOVE", append(hdr, "Destination", f.url(fmt.Sprintf("/y%d/", i)))
		}
		st, _, _ = f.do(method, "/d/", nil, hdr...)
		if o := <-other; st < 300 && o < 300 {
			t.Fatalf("round %d: the %s %s (%d) and the MOVE (%d) of /d both succeeded", i, what, method, st, o)
		}
	}
}
