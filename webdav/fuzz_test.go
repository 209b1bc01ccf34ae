package webdav_test

import (
	"bytes"
	"encoding/base64"
	"encoding/xml"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"berth/vfs"

	"golang.org/x/net/http/httpguts"
)

// fuzzMethods are the methods FuzzRequest sends; the fuzzer picks one by
// index.
var fuzzMethods = []string{"PROPFIND", "PROPPATCH", "LOCK", "UNLOCK", "COPY", "MOVE", "DELETE", "PUT", "MKCOL", "GET", "HEAD", "OPTIONS"}

// fuzzStatusOK are the server errors a WebDAV answer may carry for a
// client's request: a Destination on another server (502) and a store
// that is full (507). Anything else of 500 or more is a bug.
var fuzzStatusOK = map[int]bool{http.StatusBadGateway: true, http.StatusInsufficientStorage: true}

// FuzzRequest sends arbitrary client-controlled parts of a WebDAV request
// to a real handler (real stores; the handler is called without the TLS
// listener so that executions are cheap): the path, the If, Depth,
// Destination, Overwrite and Timeout headers and an XML (or any) body,
// over a tree with a file, a folder and a file in it (locked at first). It checks that no
// request panics or is answered 5xx but for 502 and 507, and that every
// 207 is well-formed XML. Requests change the tree; what they move or
// delete is put back before the next.
func FuzzRequest(f *testing.F) {
	fx := newFixture(f)
	st, _, body := fx.do("PUT", "/a.txt", strings.NewReader("one"))
	want(f, "PUT a", st, http.StatusCreated, body)
	st, _, body = fx.do("MKCOL", "/d", nil)
	want(f, "MKCOL d", st, http.StatusCreated, body)
	st, _, body = fx.do("PUT", "/d/b.txt", strings.NewReader("two"))
	want(f, "PUT b", st, http.StatusCreated, body)
	lockinfo := `<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`
	st, h, body := fx.do("LOCK", "/d/b.txt", strings.NewReader(lockinfo), "Timeout", "Second-3600")
	want(f, "LOCK b", st, http.StatusOK, body)
	token := strings.Trim(h.Get("Lock-Token"), "<>")

	const host = "http://example.com/webdav/alice"
	type seed struct {
		method                                 uint8
		path, ifh, depth, dest, overwrite, tmo string
		body                                   string
	}
	propfind := `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:getetag/><D:resourcetype/><Z:x xmlns:Z="urn:z"/></D:prop></D:propfind>`
	patch := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z" xml:lang="en">r<Z:i/></Z:c></D:prop></D:set><D:remove><D:prop><Z:d xmlns:Z="urn:z"/></D:prop></D:remove></D:propertyupdate>`
	for _, s := range []seed{
		{0, "/", "", "1", "", "", "", propfind},
		{0, "/d", "", "infinity", "", "", "", `<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`},
		{0, "/a.txt", "", "0", "", "", "", `<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`},
		{0, "/", "", "", "", "", "", `<propfind xmlns="DAV:"><prop><x xmlns=""/></prop></propfind>`},
		{0, "/", "", "1", "", "", "", `<D:propfind xmlns:D="DAV:"><D:prop>`},
		{0, "/", "", "1", "", "", "", `<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>`},
		{1, "/a.txt", "", "", "", "", "", patch},
		{1, "/a.txt", "", "", "", "", "", `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><D:getetag>x</D:getetag></D:prop></D:set></D:propertyupdate>`},
		{2, "/a.txt", "", "0", "", "", "Second-60, Infinite", lockinfo},
		{2, "/d", "", "infinity", "", "", "Second-99999999999999999999", lockinfo},
		{2, "/d/b.txt", "(<" + token + ">)", "", "", "", "Second-10", ""},
		{3, "/d/b.txt", "", "", "", "", "", ""},
		{4, "/a.txt", "", "0", host + "/c.txt", "F", "", ""},
		{4, "/d", "", "infinity", "/webdav/alice/e", "T", "", ""},
		{5, "/d/b.txt", "(<" + token + ">)", "", host + "/d/c.txt", "", "", ""},
		{5, "/d", `<` + host + `/d/b.txt> (<` + token + `>) (Not <urn:x> ["r1"])`, "", host + "/f", "T", "", ""},
		{5, "/a.txt", "", "", "http://other.example/x", "", "", ""},
		{5, "/a.txt", "", "", host + "/%2e%2e/x", "", "", ""},
		{6, "/d", `(["x"]) (Not <DAV:no-lock>)`, "infinity", "", "", "", ""},
		{7, "/g.txt", "(<" + token + ">) <x> ([", "", "", "", "", "data"},
		{7, "/d/b.txt", "(<" + token + ">)", "", "", "", "", "three"},
		{8, "/h", "", "", "", "", "", "<x/>"},
		{9, "/a.txt", "(Not)", "", "", "", "", ""},
		{0, "/%00/..", "", "1 ", "", "", "", ""},
	} {
		f.Add(s.method, s.path, s.ifh, s.depth, s.dest, s.overwrite, s.tmo, []byte(s.body))
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+password))
	f.Fuzz(func(t *testing.T, method uint8, path, ifh, depth, dest, overwrite, tmo string, body []byte) {
		m := fuzzMethods[int(method)%len(fuzzMethods)]
		// Put back what an earlier execution moved or deleted, so that
		// each one finds a file, a folder and a file in it to work on.
		for _, p := range []string{"/a.txt", "/d", "/d/b.txt"} {
			if _, err := fx.lookup(p); err != nil {
				m, body := "PUT", "x"
				if p == "/d" {
					m, body = "MKCOL", ""
				}
				r := httptest.NewRequest(m, "/webdav/alice"+p, strings.NewReader(body))
				r.Header.Set("Authorization", auth)
				fx.h.ServeHTTP(httptest.NewRecorder(), r)
			}
		}
		req := httptest.NewRequest(m, "/webdav/alice/", bytes.NewReader(body))
		req.URL.Path = "/webdav/alice" + path
		req.URL.RawPath = ""
		req.RequestURI = req.URL.RequestURI()
		req.Header.Set("Authorization", auth)
		for _, kv := range [][2]string{{"If", ifh}, {"Depth", depth}, {"Destination", dest}, {"Overwrite", overwrite}, {"Timeout", tmo}} {
			// net/http refuses a request with such a value, and trims
			// what is around one.
			if !httpguts.ValidHeaderFieldValue(kv[1]) {
				return
			}
			if v := strings.Trim(kv[1], " \t"); v != "" {
				req.Header.Set(kv[0], v)
			}
		}
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, req)
		if w.Code >= 500 && !fuzzStatusOK[w.Code] {
			t.Fatalf("%s %q: %d %s", m, path, w.Code, w.Body.String())
		}
		if w.Code == http.StatusMultiStatus {
			d := xml.NewDecoder(bytes.NewReader(w.Body.Bytes()))
			for {
				if _, err := d.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("%s %q: 207 that is not XML (%v): %s", m, path, err, w.Body.String())
				}
			}
		}
	})
}

// FuzzDeadProperty sets a dead property of arbitrary XML content with
// PROPPATCH and reads every property back with PROPFIND. It checks that
// the PROPPATCH is answered as FuzzRequest's are, and that the 207 of the
// PROPFIND is XML a namespace-aware parser (expat, which davfs2, neon
// and Windows' redirector use) reads: well-formed, and no element with
// two attributes of one name, raw or expanded. Each execution removes
// the property after.
func FuzzDeadProperty(f *testing.F) {
	fx := newFixture(f)
	st, _, body := fx.do("PUT", "/a.txt", strings.NewReader("one"))
	want(f, "PUT a", st, http.StatusCreated, body)
	for _, v := range []string{
		"plain",
		`<Z:i xmlns:Z="urn:z" a="1"/>`,
		`<i x="1" x="2"/>`,
		`<i a="1" b="1" c="1" d="1" e="1" f="1" g="1" h="1" i="1" a="2"/>`,
		`<i xmlns:a="urn:u" xmlns:b="urn:u" a:x="1" b:x="2"/>`,
		`<i xmlns:a="urn:u" a:x="1" x="2"/>`,
		`<i xml:lang="en" xml:space="preserve">t</i>`,
		`a &amp; b &lt; c]]&gt;<![CDATA[<x>]]>`,
		"\r\n\t",
		`<i xmlns="urn:d"><j/></i>`,
	} {
		f.Add(v)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+password))
	send := func(method, depth, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/webdav/alice/a.txt", strings.NewReader(body))
		req.Header.Set("Authorization", auth)
		if depth != "" {
			req.Header.Set("Depth", depth)
		}
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, req)
		return w
	}
	f.Fuzz(func(t *testing.T, value string) {
		w := send("PROPPATCH", "", `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">`+value+`</Z:c></D:prop></D:set></D:propertyupdate>`)
		if w.Code >= 500 && !fuzzStatusOK[w.Code] {
			t.Fatalf("PROPPATCH: %d %s", w.Code, w.Body.String())
		}
		defer send("PROPPATCH", "", `<D:propertyupdate xmlns:D="DAV:"><D:remove><D:prop><Z:c xmlns:Z="urn:z"/></D:prop></D:remove></D:propertyupdate>`)
		w = send("PROPFIND", "0", `<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`)
		if w.Code != http.StatusMultiStatus {
			t.Fatalf("PROPFIND: %d %s", w.Code, w.Body.String())
		}
		checkNamespaceXML(t, w.Body.Bytes())
	})
}

// checkNamespaceXML fails unless b is well-formed XML in which no element
// has two attributes of one name, raw or expanded: both are fatal to
// expat, which encoding/xml does not check.
func checkNamespaceXML(t *testing.T, b []byte) {
	t.Helper()
	// Raw names first (a declaration twice counts too), then expanded
	// ones, where the declarations are not the element's attributes.
	for _, pass := range []struct {
		next     func(*xml.Decoder) (xml.Token, error)
		expanded bool
	}{{(*xml.Decoder).RawToken, false}, {(*xml.Decoder).Token, true}} {
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := pass.next(d)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("not XML (%v): %s", err, b)
			}
			se, ok := tok.(xml.StartElement)
			if !ok {
				continue
			}
			seen := map[xml.Name]bool{}
			for _, a := range se.Attr {
				if pass.expanded && (a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns")) {
					continue
				}
				if seen[a.Name] {
					t.Fatalf("element %s has two attributes {%s}%s: %s", se.Name.Local, a.Name.Space, a.Name.Local, b)
				}
				seen[a.Name] = true
			}
		}
	}
}

// FuzzDavName stores a file of an arbitrary name with PUT and lists its
// folder with PROPFIND. A name vfs.ValidateName accepts must be stored
// under that name (the store's node is named so) and listed with an href
// that reads back as it and a displayname that is it; one it refuses is
// refused. The file is deleted after.
func FuzzDavName(f *testing.F) {
	fx := newFixture(f)
	st, _, body := fx.do("MKCOL", "/n", nil)
	want(f, "MKCOL n", st, http.StatusCreated, body)
	for _, s := range []string{"a.txt", "a b", "a%20b", "a+b", "é", "e\u0301", "?", "#", ";x", "a:b", "<&>", "'\"", "\u2028", "\U0001F600",
		"..", ".", "a/b", "a\\b", "\x00", "\xff", "\ufffe", strings.Repeat("x", 255), strings.Repeat("x", 256), " ", "~", "%", "%zz"} {
		f.Add(s)
	}
	auth := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:"+password))
	send := func(method, p, depth, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "/webdav/alice/", strings.NewReader(body))
		req.URL.Path, req.URL.RawPath = "/webdav/alice"+p, ""
		req.RequestURI = req.URL.RequestURI()
		req.Header.Set("Authorization", auth)
		if depth != "" {
			req.Header.Set("Depth", depth)
		}
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, req)
		return w
	}
	f.Fuzz(func(t *testing.T, name string) {
		if strings.Contains(name, "/") {
			return // a path, not a name
		}
		w := send("PUT", "/n/"+name, "", "x")
		if vfs.ValidateName(name) != nil {
			if w.Code < 400 || w.Code >= 500 {
				t.Fatalf("PUT %q, which ValidateName refuses: %d %s", name, w.Code, w.Body.String())
			}
			return
		}
		if w.Code != http.StatusCreated {
			t.Fatalf("PUT %q: %d %s", name, w.Code, w.Body.String())
		}
		defer send("DELETE", "/n/"+name, "", "")
		if _, err := fx.lookup("/n/" + name); err != nil {
			t.Fatalf("PUT %q stored no node of that name: %v", name, err)
		}
		w = send("PROPFIND", "/n", "1", `<D:propfind xmlns:D="DAV:"><D:prop><D:displayname/></D:prop></D:propfind>`)
		if w.Code != http.StatusMultiStatus {
			t.Fatalf("PROPFIND: %d %s", w.Code, w.Body.String())
		}
		var ms struct {
			Responses []struct {
				Href string `xml:"href"`
				Name string `xml:"propstat>prop>displayname"`
			} `xml:"response"`
		}
		if err := xml.Unmarshal(w.Body.Bytes(), &ms); err != nil {
			t.Fatalf("PROPFIND: %v %s", err, w.Body.String())
		}
		found := false
		for _, r := range ms.Responses {
			u, err := url.Parse(r.Href)
			if err != nil {
				t.Fatalf("href %q: %v", r.Href, err)
			}
			if u.Path == "/webdav/alice/n/"+name {
				if r.Name != name {
					t.Fatalf("%q listed with displayname %q", name, r.Name)
				}
				found = true
			}
		}
		if !found {
			t.Fatalf("%q not listed: %s", name, w.Body.String())
		}
	})
}
