package rest

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// rawRequest writes raw, one HTTP/1.1 request, to the fixture's TLS
// listener and returns the answer's status, header and body, for requests
// net/http's client does not send (CONNECT, unclean paths as written).
func (f *fixture) rawRequest(raw string) (int, http.Header, []byte) {
	f.t.Helper()
	c, err := tls.Dial("tcp", f.srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		f.t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		f.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		f.t.Fatalf("%q: %v", raw, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// TestNonCanonicalPaths: ServeMux answers a path with dot segments or
// repeated slashes with a 307 and an HTML body, and a POST re-sent to the
// cleaned path acts on what that names. berth answers JSON 404 instead,
// and a CONNECT, which ServeMux answers in plain text, likewise.
func TestNonCanonicalPaths(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	auth := "Authorization: Bearer " + f.token + "\r\n"
	for _, c := range []struct{ name, raw string }{
		{"dot dot", "GET " + f.at("/api/2/files/%d/x/../%d", fj.ID) + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"},
		{"dot", "GET " + f.at("/api/2/files/%d/./%d", fj.ID) + " HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n"},
		{"double slash", "GET //api/2/version HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"only slashes", "GET // HTTP/1.1\r\nHost: x\r\n\r\n"},
		{"post re-sent", "POST " + f.at("/api/2/files/%d/x/../%d/rename", fj.ID) + " HTTP/1.1\r\nHost: x\r\n" + auth +
			"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\nname=zz"},
		{"connect", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, h, body := f.rawRequest(c.raw)
			wantError(t, st, body, http.StatusNotFound, "not_found")
			if ct := h.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	// The re-sent rename never happened.
	if _, body := f.get(f.at("/api/2/files/%d/%d", fj.ID)); !strings.Contains(string(body), `"path":"/f.txt"`) {
		t.Fatalf("file renamed through an unclean path: %s", body)
	}
	// A canonical path with a trailing slash is routed as before (no route
	// has one, so it is a plain 404 behind a valid token, as every unknown
	// /api/2 path is since issue 12), and canonical paths work.
	st, _, body := f.rawRequest("GET /api/2/version/ HTTP/1.1\r\nHost: x\r\n" + auth + "\r\n")
	wantError(t, st, body, http.StatusNotFound, "not_found")
	st, _, body = f.rawRequest("GET /api/2/version HTTP/1.1\r\nHost: x\r\n\r\n")
	if st != http.StatusOK || !strings.Contains(string(body), `"version"`) {
		t.Fatalf("version: %d %s", st, body)
	}
}

// TestDownloadPreconditionFailed: If-Match and If-Unmodified-Since that
// the file fails answer 412 (RFC 9110 13.1.1, 13.1.4) with a JSON body,
// not http.ServeContent's empty one labelled as the file's type; a
// matching one serves the file.
func TestDownloadPreconditionFailed(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.bin", []byte("hello"))
	resp, _ := f.download(fj.ID, nil)
	etag := resp.Header.Get("ETag")
	for _, h := range []http.Header{
		{"If-Match": {`"r999999"`}},
		{"If-Unmodified-Since": {"Sat, 01 Jan 2000 00:00:00 GMT"}},
	} {
		resp, body := f.download(fj.ID, h)
		wantError(t, resp.StatusCode, body, http.StatusPreconditionFailed, "invalid_request")
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%v: Content-Type %q", h, ct)
		}
		if cd := resp.Header.Get("Content-Disposition"); cd != "" {
			t.Errorf("%v: Content-Disposition %q on an error", h, cd)
		}
	}
	resp, body := f.download(fj.ID, http.Header{"If-Match": {etag}})
	if resp.StatusCode != http.StatusOK || string(body) != "hello" {
		t.Fatalf("If-Match with the current ETag: %d %q", resp.StatusCode, body)
	}
}

// TestMalformedQuery: a query string url.Values cannot parse, and an
// include_children other than true, false, 1 or 0, are 400
// invalid_request. They were dropped without a word, so
// include_children=true;x listed nothing and limit=5;x gave 1000 results.
func TestMalformedQuery(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, p := range []string{
		f.at("/api/2/files/%d?include_children=true;x"),
		f.at("/api/2/files/%d?include_children=%%zz"),
		f.at("/api/2/files/%d?include_children=t"),
		f.at("/api/2/files/%d?include_children=TRUE"),
		f.at("/api/2/files/%d?include_children="),
		f.at("/api/2/files/%d?hash=%%zz&include_children=true"),
		f.at("/api/2/files/%d/folder/%d?include_children=yes", d.ID),
		f.at("/api/2/files/%d/folder/%d?include_children=1;", d.ID),
		f.at("/api/2/files/%d/search?query=f&limit=5;x"),
		f.at("/api/2/files/%d/search?query=%%zz"),
		f.at("/api/2/files/%d/modified_since?since=2000-01-01T00:00:00&x=%%"),
	} {
		st, body := f.get(p)
		wantError(t, st, body, http.StatusBadRequest, "invalid_request")
	}
	st, body := f.postForm(f.at("/api/2/files/%d/%d/lock?duration=%%zz", fj.ID), nil)
	wantError(t, st, body, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(string(body), "query string") {
		t.Errorf("description does not name the query string: %s", body)
	}
	// The documented values still work.
	for v, kids := range map[string]bool{"true": true, "1": true, "false": false, "0": false} {
		st, body := f.get(f.at("/api/2/files/%d?include_children=" + v))
		if st != http.StatusOK || strings.Contains(string(body), `"children"`) != kids {
			t.Errorf("include_children=%s: %d %s", v, st, body)
		}
	}
}

// TestOAuthBodyType: the token and revoke endpoints read an
// application/x-www-form-urlencoded body (RFC 6749 4.3.2, RFC 7009 2.1). A
// body of another type is 400 invalid_request, not 401 invalid_client for a
// client_id it does hold; the URL query is ignored, a malformed one too.
func TestOAuthBodyType(t *testing.T) {
	f := newFixture(t)
	post := func(path, ct, body string) (int, []byte) {
		return f.readAll(f.request(http.MethodPost, path, "", strings.NewReader(body), http.Header{"Content-Type": {ct}}))
	}
	pw := passwordForm()
	mp, mpType := multipartFields(pw)
	for _, c := range []struct{ name, path, ct, body string }{
		{"json token", "/oauth/token", "application/json", `{"grant_type":"password","client_id":"anchor","username":"alice","password":"x"}`},
		{"multipart token", "/oauth/token", mpType, mp},
		{"text token", "/oauth/token", "text/plain", pw.Encode()},
		{"bad media type", "/oauth/token", "application/x-www-form-urlencoded; charset", pw.Encode()},
		{"json revoke", "/oauth/revoke", "application/json", `{"client_id":"anchor","token":"x"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, body := post(c.path, c.ct, c.body)
			wantError(t, st, body, http.StatusBadRequest, "invalid_request")
		})
	}
	st, body := post("/oauth/token?x=%zz;", "application/x-www-form-urlencoded; charset=utf-8", pw.Encode())
	if st != http.StatusOK {
		t.Fatalf("token with a malformed query: %d %s", st, body)
	}
	st, body = post("/oauth/token", "application/x-www-form-urlencoded", "grant_type=password&client_id=anchor&username=%zz")
	wantError(t, st, body, http.StatusBadRequest, "invalid_request")
}

// multipartFields encodes v as a multipart/form-data body.
func multipartFields(v url.Values) (string, string) {
	var b strings.Builder
	mw := multipart.NewWriter(&b)
	for k, vs := range v {
		for _, s := range vs {
			_ = mw.WriteField(k, s)
		}
	}
	_ = mw.Close()
	return b.String(), mw.FormDataContentType()
}

// TestFormBodyBeforeQuery: a field sent in both the body and the query is
// the body's, whichever of the two form encodings the body uses; a
// multipart body used to lose to the query.
func TestFormBodyBeforeQuery(t *testing.T) {
	f := newFixture(t)
	mk := f.at("/api/2/files/%d/create_folder") + "?name=FromQuery"
	mp, mpType := multipartFields(url.Values{"name": {"FromMultipart"}})
	for _, c := range []struct{ ct, body, want string }{
		{"application/x-www-form-urlencoded", "name=FromForm", "/FromForm"},
		{mpType, mp, "/FromMultipart"},
	} {
		st, body := f.readAll(f.request(http.MethodPost, mk, f.token, strings.NewReader(c.body), http.Header{"Content-Type": {c.ct}}))
		if st != http.StatusOK {
			t.Fatalf("%s: %d %s", c.ct, st, body)
		}
		var fj folderJSON
		decode(t, body, &fj)
		if fj.Path != c.want {
			t.Errorf("%s: created %s, want %s", c.ct, fj.Path, c.want)
		}
	}
	// Without the field in the body, the query's is read.
	st, body := f.postForm(mk, nil)
	if st != http.StatusOK || !strings.Contains(string(body), `"path":"/FromQuery"`) {
		t.Fatalf("query only: %d %s", st, body)
	}
}

// TestRequestContentEncoding: berth does not decode compressed request
// bodies, so a body with a content coding (RFC 9110 8.4) is 400
// invalid_request instead of being stored or parsed as it came: an upload
// sent gzipped was stored as the gzip bytes.
func TestRequestContentEncoding(t *testing.T) {
	f := newFixture(t)
	body, ct := multipartBody("a.txt", strings.NewReader("hello"))
	h := http.Header{"Content-Type": {ct}, "Content-Encoding": {"gzip"}}
	st, b := f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/upload"), f.token, body, h))
	wantError(t, st, b, http.StatusBadRequest, "invalid_request")
	h = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Content-Encoding": {"br"}}
	st, b = f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/create_folder"), f.token, strings.NewReader("name=x"), h))
	wantError(t, st, b, http.StatusBadRequest, "invalid_request")
	h = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Content-Encoding": {"deflate"}}
	st, b = f.readAll(f.request(http.MethodPost, "/oauth/token", "", strings.NewReader(passwordForm().Encode()), h))
	wantError(t, st, b, http.StatusBadRequest, "invalid_request")
	// identity is no coding at all, and a GET without a body is not judged.
	body, ct = multipartBody("b.txt", strings.NewReader("hello"))
	h = http.Header{"Content-Type": {ct}, "Content-Encoding": {"identity"}}
	st, b = f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/upload"), f.token, body, h))
	if st != http.StatusOK {
		t.Fatalf("identity upload: %d %s", st, b)
	}
	st, b = f.readAll(f.request(http.MethodGet, "/api/2/version", "", nil, http.Header{"Content-Encoding": {"gzip"}}))
	if st != http.StatusOK {
		t.Fatalf("version: %d %s", st, b)
	}
	if kids, _, _ := f.fs.List(context.Background(), f.root.ID, f.root.FolderID); len(kids) != 1 {
		t.Fatalf("root holds %d items, want b.txt only", len(kids))
	}
}
