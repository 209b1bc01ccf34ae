package rest

import (
	"bytes"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"

	"berth/vfs"
)

// fsErrorCodes are the error codes the file-system routes may answer with
// for a bad request; anything else (500 unknown above all) is a bug.
var fsErrorCodes = map[string]bool{
	"invalid_request": true, "invalid_name": true, "name_too_long": true, "invalid_extension": true,
	"no_file_received": true, "forbidden": true, "not_found": true, "name_conflict": true,
	"resource_locked": true, "policy_error": true,
}

// checkFuzzAnswer fails unless w is a success or a spec error body.
func checkFuzzAnswer(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code == http.StatusOK {
		if !json.Valid(w.Body.Bytes()) {
			t.Fatalf("200 with a body that is not JSON: %q", w.Body.Bytes())
		}
		return
	}
	var e errorBody
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("%d with a body that is not JSON: %q", w.Code, w.Body.Bytes())
	}
	if w.Code >= 500 || !fsErrorCodes[e.Error] {
		t.Fatalf("%d %q (%s)", w.Code, e.Error, e.Description)
	}
}

// FuzzUpload sends arbitrary bodies and content types to the upload
// route of a real server (real stores; the handler is called without the
// TLS listener so that executions are cheap).
func FuzzUpload(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	path := fx.at("/api/2/files/%d/upload")
	const ct = "multipart/form-data; boundary=XX"
	part := func(headers, body string) string {
		return "--XX\r\n" + headers + "\r\n\r\n" + body + "\r\n"
	}
	file := `Content-Disposition: form-data; name="file"; filename="a.txt"`
	for _, s := range []struct{ body, ct string }{
		{part(file, "hello") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="name"`, "b.txt") + part(file, "x") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="file"; filename*=UTF-8''%C3%BC.txt`, "x") + "--XX--\r\n", ct},
		{part(file, "cut off"), ct},
		{"--XX--\r\n", ct},
		{"", ct},
		{"garbage", ct},
		{part(file, "x"), "multipart/form-data"},
		{part(file, "x"), "multipart/mixed; boundary=XX"},
		{"a=b", "application/x-www-form-urlencoded"},
		{part(`Content-Disposition: form-data; name="file"; filename=".."`, "x") + "--XX--\r\n", ct},
		{part(`Content-Disposition: form-data; name="file"; filename="../../x"`, "x") + "--XX--\r\n", ct},
		{part(file+"\r\nContent-Transfer-Encoding: quoted-printable", "=41=42") + "--XX--\r\n", ct},
	} {
		f.Add([]byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+fx.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkFuzzAnswer(t, w)
	})
}

// FuzzForm sends arbitrary form bodies to the routes that parse forms:
// create_folder, rename and move of files and folders, lock.
func FuzzForm(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	dir := fx.mustMkdir(fx.at("/api/2/files/%d/create_folder"), "dir")
	file := fx.mustUpload(fx.at("/api/2/files/%d/upload"), "file.txt", []byte("x"))
	routes := []string{
		fx.at("/api/2/files/%d/create_folder"),
		fx.at("/api/2/files/%d/folder/%d/create_folder", dir.ID),
		fx.at("/api/2/files/%d/%d/rename", file.ID),
		fx.at("/api/2/files/%d/%d/move", file.ID),
		fx.at("/api/2/files/%d/folder/%d/rename", dir.ID),
		fx.at("/api/2/files/%d/folder/%d/move", dir.ID),
		fx.at("/api/2/files/%d/%d/lock", file.ID),
	}
	const urlenc = "application/x-www-form-urlencoded"
	for i, s := range []struct{ body, ct string }{
		{"name=new", urlenc},
		{"name=..", urlenc},
		{"name=a%2Fb", urlenc},
		{"name=%zz", urlenc},
		{fmt.Sprintf("folder_id=%d&name=x", dir.ID), urlenc},
		{"folder_id=0&root_id=99", urlenc},
		{"duration=60", urlenc},
		{"--XX\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nm\r\n--XX--\r\n", "multipart/form-data; boundary=XX"},
		{"--XX\r\n", "multipart/form-data"},
		{"", ""},
	} {
		f.Add(uint8(i), []byte(s.body), s.ct)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, contentType string) {
		req := httptest.NewRequest(http.MethodPost, routes[int(route)%len(routes)], bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Authorization", "Bearer "+fx.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		checkFuzzAnswer(t, w)
	})
}

// FuzzListingNames creates folders of arbitrary names (the fuzzed string
// split at "/", which no name holds) in a fresh folder through
// create_folder, then lists it whole and in pages of a fuzzed size,
// following next_cursor. It checks that a name vfs.ValidateName accepts
// is stored (200, its path the name) unless it was created already, and
// one it refuses is invalid_name or name_too_long; that the whole
// listing is every name stored, once, in byte order, each as given; and
// that the pages, read through their cursors, are the whole listing:
// no child skipped or repeated.
func FuzzListingNames(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	for _, s := range []struct {
		names string
		limit uint8
	}{
		{"a/b/c", 0},
		{"b/a/B/A/a", 1},
		{"é/é/e\u0301/E\u0301", 1},
		{"./../.../ /  /\t/x\x7f/\uffff/\ufffe/\u2028", 2},
		{"\xff\xfe/ok", 0},
		{strings.Repeat("x", 255) + "/" + strings.Repeat("y", 256) + "/" + strings.Repeat("é", 128), 1},
		{"a\\b/CON/nul/setup.exe./x::$DATA/<>&\"'", 3},
		{"z/y/x/w/v/u/t/s/r/q/p/o/n/m/l/k/j/i/h/g/f", 4},
		{"\U0001F600/\u00a0/\u200b/\ufeff", 1},
	} {
		f.Add(s.names, s.limit)
	}
	do := func(t *testing.T, method, path string, form url.Values) (int, []byte) {
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req := httptest.NewRequest(method, path, body)
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		req.Header.Set("Authorization", "Bearer "+fx.token)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code, w.Body.Bytes()
	}
	var n int
	f.Fuzz(func(t *testing.T, names string, limit uint8) {
		if strings.Count(names, "/") >= 64 {
			return // each name is a write: keep an execution short
		}
		n++
		dir := fmt.Sprintf("f%d", n)
		st, body := do(t, http.MethodPost, fx.at("/api/2/files/%d/create_folder"), url.Values{"name": {dir}})
		if st != http.StatusOK {
			t.Fatalf("create_folder %s: %d %s", dir, st, body)
		}
		var d folderJSON
		decode(t, body, &d)
		stored := map[string]bool{}
		for _, name := range strings.Split(names, "/") {
			st, body := do(t, http.MethodPost, fx.at("/api/2/files/%d/folder/%d/create_folder", d.ID), url.Values{"name": {name}})
			err := vfs.ValidateName(name)
			switch {
			case err != nil:
				var e errorBody
				decode(t, body, &e)
				if st != http.StatusBadRequest || (e.Error != "invalid_name" && e.Error != "name_too_long") {
					t.Fatalf("create_folder %q (%v): %d %s", name, err, st, body)
				}
			case stored[name]:
				var e errorBody
				decode(t, body, &e)
				if e.Error != "name_conflict" {
					t.Fatalf("create_folder %q again: %d %s", name, st, body)
				}
			default:
				if st != http.StatusOK {
					t.Fatalf("create_folder %q, which ValidateName accepts: %d %s", name, st, body)
				}
				var c folderJSON
				decode(t, body, &c)
				if c.Path != "/"+dir+"/"+name {
					t.Fatalf("create_folder %q: path %q", name, c.Path)
				}
				stored[name] = true
			}
		}
		want := slices.Sorted(maps.Keys(stored))
		for i, w := range want {
			want[i] = "/" + dir + "/" + w
		}
		list := func(q string) listingPage {
			st, body := do(t, http.MethodGet, fx.at("/api/2/files/%d/folder/%d?include_children=true", d.ID)+q, nil)
			if st != http.StatusOK {
				t.Fatalf("listing%s: %d %s", q, st, body)
			}
			var p listingPage
			decode(t, body, &p)
			return p
		}
		var whole []string
		for _, c := range list("").Children {
			whole = append(whole, c.Path)
		}
		if !slices.Equal(whole, want) {
			t.Fatalf("listing %q, stored %q", whole, want)
		}
		size := int(limit%8) + 1
		var paged []string
		q := fmt.Sprintf("&limit=%d", size)
		for range len(want) + 2 {
			p := list(q)
			if len(p.Children) > size || p.Hash != nil {
				t.Fatalf("a page of %d: %d children, hash %v", size, len(p.Children), p.Hash)
			}
			for _, c := range p.Children {
				paged = append(paged, c.Path)
			}
			if p.NextCursor == nil {
				break
			}
			q = fmt.Sprintf("&limit=%d&cursor=%s", size, url.QueryEscape(*p.NextCursor))
		}
		if !slices.Equal(paged, want) {
			t.Fatalf("pages of %d: %q, whole %q", size, paged, want)
		}
	})
}

// FuzzTus sends arbitrary tus headers and bodies to a real server: a
// creation (Upload-Length, Upload-Metadata, whose "$R" is the base64 of
// the root's id, Upload-Checksum, and a first piece), then a PATCH of the
// upload it made (Upload-Offset, Upload-Checksum, a piece) and a HEAD.
// It checks that none is answered 5xx or with an error body that is not
// the spec's, and that an upload's offset never passes its length nor
// moves but by the bytes of a piece taken; the upload is ended after.
func FuzzTus(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	rootB64 := base64.StdEncoding.EncodeToString(fmt.Appendf(nil, "%d", fx.root.ID))
	sha := func(b string) string {
		s := sha1.Sum([]byte(b))
		return "sha1 " + base64.StdEncoding.EncodeToString(s[:])
	}
	name := func(n string) string { return "root_id $R,filename " + base64.StdEncoding.EncodeToString([]byte(n)) }
	for _, s := range []struct {
		length, meta, createSum, createBody, offset, patchSum, patchBody string
	}{
		{"5", name("a.txt"), "", "", "0", "", "hello"},
		{"5", name("b.txt"), sha("he"), "he", "2", sha("llo"), "llo"},
		{"5", name("c.txt"), sha("x"), "he", "2", "", "llo"},
		{"3", name("d.txt"), "", "", "0", "", "toolong"},
		{"3", name("e.txt"), "", "", "1", "", "x"},
		{"0", name("f.txt"), "", "", "0", "", ""},
		{"-1", name("g.txt"), "", "", "0", "", ""},
		{"99999999999999999999", name("h.txt"), "", "", "0", "", ""},
		{"5", name(".."), "", "", "0", "", "hello"},
		{"5", name("a/b"), "", "", "0", "", "hello"},
		{"5", "root_id $R,filename", "", "", "0", "", "hello"},
		{"5", "root_id $R,filename !!!,name " + base64.StdEncoding.EncodeToString([]byte("n.txt")), "", "", "0", "", "hello"},
		{"5", "root_id $R,folder_id " + base64.StdEncoding.EncodeToString([]byte("999")) + ",filename " + base64.StdEncoding.EncodeToString([]byte("i.txt")), "", "", "0", "", "hello"},
		{"5", "root_id " + base64.StdEncoding.EncodeToString([]byte("-1")) + ",filename x", "", "", "0", "", ""},
		{"5", name("j.txt"), "md5 " + base64.StdEncoding.EncodeToString(make([]byte, 16)), "", "+0", "crc32 AAAA", "hello"},
		{"5", name("k.txt"), "", "", "0", "sha256 ====", "hello"},
	} {
		f.Add(s.length, s.meta, s.createSum, []byte(s.createBody), s.offset, s.patchSum, []byte(s.patchBody))
	}
	do := func(t *testing.T, method, path string, hdr map[string]string, body []byte) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Authorization", "Bearer "+fx.token)
		for k, v := range hdr {
			if v != "" {
				req.Header.Set(k, v)
			}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code >= 500 {
			t.Fatalf("%s %v: %d %s", method, hdr, w.Code, w.Body.Bytes())
		}
		if w.Code >= 400 && method != http.MethodHead {
			var e errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || e.Error == "unknown" {
				t.Fatalf("%s %v: %d with %q", method, hdr, w.Code, w.Body.Bytes())
			}
		}
		return w
	}
	offsetOf := func(t *testing.T, w *httptest.ResponseRecorder) int64 {
		t.Helper()
		n, err := strconv.ParseInt(w.Header().Get("Upload-Offset"), 10, 64)
		if err != nil {
			t.Fatalf("%d: Upload-Offset %q", w.Code, w.Header().Get("Upload-Offset"))
		}
		return n
	}
	f.Fuzz(func(t *testing.T, length, meta, createSum string, createBody []byte, offset, patchSum string, patchBody []byte) {
		for _, v := range []string{length, meta, createSum, offset, patchSum} {
			if !httpguts.ValidHeaderFieldValue(v) {
				return // net/http refuses such a request
			}
		}
		meta = strings.ReplaceAll(meta, "$R", rootB64)
		hdr := map[string]string{"Upload-Length": length, "Upload-Metadata": meta, "Upload-Checksum": createSum}
		if len(createBody) > 0 {
			hdr["Content-Type"] = "application/offset+octet-stream"
		}
		w := do(t, http.MethodPost, tusBase, hdr, createBody)
		if w.Code != http.StatusCreated {
			return
		}
		loc := w.Header().Get("Location")
		i := strings.Index(loc, tusBase)
		if i < 0 {
			t.Fatalf("201 with Location %q", loc)
		}
		loc = loc[i:]
		size, _ := strconv.ParseInt(length, 10, 64)
		at := int64(0)
		if len(createBody) > 0 {
			at = offsetOf(t, w)
		}
		if at < 0 || at > size || at > int64(len(createBody)) {
			t.Fatalf("created at offset %d of %d with a piece of %d", at, size, len(createBody))
		}
		w = do(t, http.MethodPatch, loc, map[string]string{"Upload-Offset": offset, "Upload-Checksum": patchSum,
			"Content-Type": "application/offset+octet-stream"}, patchBody)
		if w.Code == http.StatusNoContent {
			next := offsetOf(t, w)
			if next < at || next > size || next-at > int64(len(patchBody)) {
				t.Fatalf("PATCH from %d with %d bytes: offset %d of %d", at, len(patchBody), next, size)
			}
		}
		w = do(t, http.MethodHead, loc, nil, nil)
		if w.Code == http.StatusOK {
			if n := offsetOf(t, w); n < at || n > size {
				t.Fatalf("HEAD: offset %d of %d", n, size)
			}
		}
		do(t, http.MethodDelete, loc, nil, nil)
	})
}

// FuzzOAuth sends arbitrary bodies, content types and Authorization
// headers to the OAuth2 token and revoke endpoints, and checks that no
// request is answered 5xx and that every refusal is a JSON error body
// with a code (never unknown).
func FuzzOAuth(f *testing.F) {
	fx := newFixture(f)
	h := fx.srv.Config.Handler
	routes := []string{"/oauth/token", "/oauth/revoke"}
	const urlenc = "application/x-www-form-urlencoded"
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("anchor:"))
	for _, s := range []struct {
		route           uint8
		body, ct, authz string
	}{
		{0, passwordForm().Encode(), urlenc, ""},
		{0, passwordForm("password", "wrong").Encode(), urlenc, ""},
		{0, passwordForm("client_id", "").Encode(), urlenc, basic},
		{0, passwordForm().Encode(), urlenc, "Basic !!!"},
		{0, passwordForm().Encode(), urlenc, "Basic " + base64.StdEncoding.EncodeToString([]byte("other:x"))},
		{0, "grant_type=refresh_token&client_id=anchor&refresh_token=x", urlenc, ""},
		{0, "grant_type=authorization_code&client_id=anchor&code=x&redirect_uri=http://x", urlenc, ""},
		{0, "grant_type=client_credentials&client_id=anchor", urlenc, ""},
		{0, "grant_type=password&grant_type=refresh_token&client_id=anchor", urlenc, ""},
		{0, "grant_type=%zz", urlenc, ""},
		{0, `{"grant_type":"password"}`, "application/json", ""},
		{0, "--XX\r\nContent-Disposition: form-data; name=\"grant_type\"\r\n\r\npassword\r\n--XX--\r\n", "multipart/form-data; boundary=XX", ""},
		{0, "", "", ""},
		{1, "client_id=anchor&token=x&token_type_hint=access_token", urlenc, ""},
		{1, "client_id=anchor&token=x&token_type_hint=nonsense", urlenc, ""},
		{1, "token=", urlenc, basic},
	} {
		f.Add(s.route, []byte(s.body), s.ct, s.authz)
	}
	f.Fuzz(func(t *testing.T, route uint8, body []byte, contentType, authz string) {
		if !httpguts.ValidHeaderFieldValue(contentType) || !httpguts.ValidHeaderFieldValue(authz) {
			return // net/http refuses such a request
		}
		req := httptest.NewRequest(http.MethodPost, routes[int(route)%len(routes)], bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		if authz != "" {
			req.Header.Set("Authorization", authz)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code == http.StatusOK {
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("200 with a body that is not JSON: %q", w.Body.Bytes())
			}
			return
		}
		var e errorBody
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code >= 500 || e.Error == "" || e.Error == "unknown" {
			t.Fatalf("%d %q", w.Code, w.Body.Bytes())
		}
	})
}
