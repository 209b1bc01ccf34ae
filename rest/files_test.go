package rest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/vfs"
)

// uploadField is a form field sent before the file part of an upload.
type uploadField struct{ name, value string }

// multipartBody streams a multipart body with the fields and then the file
// part `file` named filename holding content; it returns the body and its
// content type.
func multipartBody(filename string, content io.Reader, fields ...uploadField) (io.Reader, string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, fl := range fields {
			if err := mw.WriteField(fl.name, fl.value); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
		part, err := mw.CreateFormFile("file", filename)
		if err == nil {
			_, err = io.Copy(part, content)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}

// upload sends a file to an upload route and returns status and body.
func (f *fixture) upload(path, filename string, content io.Reader, fields ...uploadField) (int, []byte) {
	f.t.Helper()
	body, ct := multipartBody(filename, content, fields...)
	return f.readAll(f.request(http.MethodPost, path, f.token, body, http.Header{"Content-Type": {ct}}))
}

// mustUpload uploads and decodes the file object.
func (f *fixture) mustUpload(path, filename string, content []byte) fileJSON {
	f.t.Helper()
	status, body := f.upload(path, filename, bytes.NewReader(content))
	if status != http.StatusOK {
		f.t.Fatalf("upload %s: %d %s", filename, status, body)
	}
	var fj fileJSON
	decode(f.t, body, &fj)
	return fj
}

// mustMkdir creates a folder through the API.
func (f *fixture) mustMkdir(path, name string) folderJSON {
	f.t.Helper()
	status, body := f.postForm(path, url.Values{"name": {name}})
	if status != http.StatusOK {
		f.t.Fatalf("create_folder %s: %d %s", name, status, body)
	}
	var fj folderJSON
	decode(f.t, body, &fj)
	return fj
}

// download fetches a file's contents with extra headers.
func (f *fixture) download(fileID uint64, header http.Header) (*http.Response, []byte) {
	f.t.Helper()
	resp := f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", fileID), f.token, nil, header)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("download: %v", err)
	}
	return resp, b
}

var (
	goldenIDs   = regexp.MustCompile(`"(id|root_id|revision_id)":\d+`)
	goldenDates = regexp.MustCompile(`"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d"`)
	goldenHash  = regexp.MustCompile(`"hash":"[0-9a-f]{32}"`)
)

// normaliseFS replaces what depends on the run (ids, dates, hashes) in a
// file-system body; formats stay pinned because only well-formed values
// match.
func normaliseFS(b []byte) []byte {
	b = goldenIDs.ReplaceAll(b, []byte(`"$1":1`))
	b = goldenDates.ReplaceAll(b, []byte(`"2000-01-01T00:00:00"`))
	return goldenHash.ReplaceAll(b, []byte(`"hash":"0123456789abcdef0123456789abcdef"`))
}

func TestFSObjectsGolden(t *testing.T) {
	f := newFixture(t)
	docs := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "Docs")
	f.mustUpload(f.at("/api/2/files/%d/upload"), "a.txt", make([]byte, 1500))
	file := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", docs.ID), "b.bin", []byte("hello"))

	status, root := f.get(f.at("/api/2/files/%d"))
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, root)
	}
	golden(t, "root.json", normaliseFS(root))
	_, rootKids := f.get(f.at("/api/2/files/%d?include_children=true"))
	golden(t, "root_children.json", normaliseFS(rootKids))
	_, fileBody := f.get(f.at("/api/2/files/%d/%d", file.ID))
	golden(t, "file.json", normaliseFS(fileBody))
	_, folder := f.get(f.at("/api/2/files/%d/folder/%d", docs.ID))
	golden(t, "folder.json", normaliseFS(folder))
	_, folderKids := f.get(f.at("/api/2/files/%d/folder/%d?include_children=true", docs.ID))
	golden(t, "folder_children.json", normaliseFS(folderKids))

	// The ids the goldens hide are the real ones.
	var fj fileJSON
	decode(t, fileBody, &fj)
	if fj.ID != file.ID || fj.RootID != f.root.ID || fj.RevisionID == 0 || fj.Path != "/Docs/b.bin" {
		t.Errorf("file object %+v", fj)
	}
	var rj rootJSON
	decode(t, root, &rj)
	if rj.ID != f.root.ID || rj.SpaceUsed != 1505 {
		t.Errorf("root object %+v", rj)
	}
	// An empty folder lists an empty array, not null or nothing.
	empty := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "Empty")
	_, body := f.get(f.at("/api/2/files/%d/folder/%d?include_children=true", empty.ID))
	if !bytes.Contains(body, []byte(`"children":[]`)) {
		t.Errorf("empty folder: %s", body)
	}
}

// getHash fetches a listing and returns its status and hash.
func (f *fixture) getHash(path, hash string) (int, string) {
	f.t.Helper()
	q := "?include_children=true"
	if hash != "" {
		q += "&hash=" + hash
	}
	status, body := f.get(path + q)
	if status == http.StatusNotModified {
		return status, hash
	}
	if status != http.StatusOK {
		f.t.Fatalf("%s: %d %s", path, status, body)
	}
	var v struct {
		Hash     *string `json:"hash"`
		Children []any   `json:"children"`
	}
	decode(f.t, body, &v)
	if v.Hash == nil || v.Children == nil {
		f.t.Fatalf("include_children without hash or children: %s", body)
	}
	return status, *v.Hash
}

func TestListingHashAnd304(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		path func() string
	}{
		{"root", func() string { return f.at("/api/2/files/%d") }},
		{"folder", func() string {
			d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "F")
			return f.at("/api/2/files/%d/folder/%d", d.ID)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.path()
			_, h1 := f.getHash(p, "")
			if st, _ := f.getHash(p, h1); st != http.StatusNotModified {
				t.Fatalf("same hash: status %d, want 304", st)
			}
			if st, _ := f.getHash(p, "stale"); st != http.StatusOK {
				t.Fatalf("other hash: status %d, want 200", st)
			}
			// Without include_children there is no hash and no 304.
			st, body := f.get(p + "?hash=" + h1)
			if st != http.StatusOK || bytes.Contains(body, []byte(`"hash"`)) || bytes.Contains(body, []byte(`"children"`)) {
				t.Fatalf("without include_children: %d %s", st, body)
			}
			// A change of a child changes the hash.
			up := strings.Replace(p, "/folder/", "/folder/", 1) + "/upload"
			fj := f.mustUpload(up, "x.txt", []byte("1"))
			_, h2 := f.getHash(p, h1)
			if h2 == h1 {
				t.Fatal("hash unchanged after an upload")
			}
			// So does a lock on a child (is_locked is shown).
			if st, body := f.postForm(f.at("/api/2/files/%d/%d/lock", fj.ID), nil); st != http.StatusOK {
				t.Fatalf("lock: %d %s", st, body)
			}
			_, h3 := f.getHash(p, h2)
			if h3 == h2 {
				t.Fatal("hash unchanged after a lock")
			}
			if st, _ := f.getHash(p, h3); st != http.StatusNotModified {
				t.Fatalf("status %d, want 304", st)
			}
		})
	}
	// The hash covers permissions: the same listing with other permissions
	// signs differently.
	a := rootJSON{ID: 1, Permissions: ownerPermissions(), Type: typeRoot}
	b := a
	b.Permissions = []string{permView}
	ha, _ := listingHash("x", a)
	hb, _ := listingHash("x", b)
	if ha == hb {
		t.Fatal("hash ignores permissions")
	}
}

func TestUploadDownloadRoundTrip(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		size int
	}{{"empty.bin", 0}, {"big.bin", 64 << 20}} {
		data := berthtest.RandomBytes(uint64(tc.size), tc.size)
		fj := f.mustUpload(f.at("/api/2/files/%d/upload"), tc.name, data)
		if fj.Size != int64(tc.size) || fj.Path != "/"+tc.name || fj.Type != "file" {
			t.Fatalf("%s: %+v", tc.name, fj)
		}
		resp, got := f.download(fj.ID, nil)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
			t.Fatalf("%s: status %d, %d bytes back of %d, equal %v", tc.name, resp.StatusCode, len(got), len(data), bytes.Equal(got, data))
		}
		if cl := resp.Header.Get("Content-Length"); cl != fmt.Sprint(tc.size) && resp.ProtoMajor == 1 {
			t.Errorf("%s: Content-Length %q", tc.name, cl)
		}
	}
	// Same name again: a new revision of the same file.
	first := f.mustUpload(f.at("/api/2/files/%d/upload"), "v.txt", []byte("one"))
	second := f.mustUpload(f.at("/api/2/files/%d/upload"), "v.txt", []byte("two!"))
	if second.ID != first.ID || second.RevisionID == first.RevisionID || second.Size != 4 {
		t.Fatalf("revision: %+v then %+v", first, second)
	}
	if _, got := f.download(first.ID, nil); string(got) != "two!" {
		t.Fatalf("after a new revision: %q", got)
	}
	revs, err := f.fs.Revisions(context.Background(), f.root.ID, first.ID)
	if err != nil || len(revs) != 2 {
		t.Fatalf("revisions %v %v", revs, err)
	}
}

func TestDownloadHeaders(t *testing.T) {
	f := newFixture(t)
	data := berthtest.RandomBytes(7, 100_000)
	name := "Grüße aus Köln – résumé 2024.pdf"
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), name, data)
	if fj.Path != "/"+name {
		t.Fatalf("path %q", fj.Path)
	}
	// The listing shows the name as uploaded.
	_, list := f.get(f.at("/api/2/files/%d?include_children=true"))
	if !strings.Contains(string(list), `"path":"/`+name+`"`) {
		t.Fatalf("listing: %s", list)
	}

	resp, got := f.download(fj.ID, nil)
	if !bytes.Equal(got, data) {
		t.Fatal("contents differ")
	}
	h := resp.Header
	etag := h.Get("ETag")
	if etag != fmt.Sprintf(`"r%d"`, fj.RevisionID) {
		t.Errorf("ETag %q", etag)
	}
	if h.Get("Content-Type") != "application/pdf" {
		t.Errorf("Content-Type %q", h.Get("Content-Type"))
	}
	wantCD := `attachment; filename="Gr__e aus K_ln _ r_sum_ 2024.pdf"; filename*=UTF-8''Gr%C3%BC%C3%9Fe%20aus%20K%C3%B6ln%20%E2%80%93%20r%C3%A9sum%C3%A9%202024.pdf`
	if cd := h.Get("Content-Disposition"); cd != wantCD {
		t.Errorf("Content-Disposition\n got %s\nwant %s", cd, wantCD)
	}
	if h.Get("Last-Modified") == "" || h.Get("Accept-Ranges") != "bytes" {
		t.Errorf("Last-Modified %q, Accept-Ranges %q", h.Get("Last-Modified"), h.Get("Accept-Ranges"))
	}

	// Range: 206 with exactly those bytes.
	resp, part := f.download(fj.ID, http.Header{"Range": {"bytes=1000-1999"}})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, data[1000:2000]) {
		t.Fatalf("range: %d, %d bytes", resp.StatusCode, len(part))
	}
	if cr := resp.Header.Get("Content-Range"); cr != "bytes 1000-1999/100000" {
		t.Errorf("Content-Range %q", cr)
	}
	resp, part = f.download(fj.ID, http.Header{"Range": {"bytes=-10"}})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, data[len(data)-10:]) {
		t.Fatalf("suffix range: %d", resp.StatusCode)
	}
	// A range past the end is 416 with a JSON body, like every error.
	resp, part = f.download(fj.ID, http.Header{"Range": {"bytes=200000-"}})
	if resp.StatusCode != http.StatusRequestedRangeNotSatisfiable ||
		resp.Header.Get("Content-Type") != "application/json" ||
		resp.Header.Get("Content-Range") != "bytes */100000" ||
		!bytes.Contains(part, []byte(`"error":"invalid_request"`)) {
		t.Fatalf("unsatisfiable range: %d %q %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Range"), part)
	}
	// Conditional requests.
	resp, _ = f.download(fj.ID, http.Header{"If-None-Match": {etag}})
	if resp.StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match: %d", resp.StatusCode)
	}
	// Last-Modified names the second this revision was written in,
	// which a later one may share: it proves nothing alone
	// (TestDownloadConditions).
	resp, _ = f.download(fj.ID, http.Header{"If-Modified-Since": {h.Get("Last-Modified")}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("If-Modified-Since: %d", resp.StatusCode)
	}
	// A new revision changes the ETag; the old one no longer matches.
	f.mustUpload(f.at("/api/2/files/%d/upload"), name, []byte("new"))
	resp, got = f.download(fj.ID, http.Header{"If-None-Match": {etag}})
	if resp.StatusCode != http.StatusOK || string(got) != "new" || resp.Header.Get("ETag") == etag {
		t.Fatalf("after a new revision: %d %q %s", resp.StatusCode, got, resp.Header.Get("ETag"))
	}
	// An unknown extension is octet-stream, never sniffed.
	html := f.mustUpload(f.at("/api/2/files/%d/upload"), "page.unknownext", []byte("<html><script>x</script>"))
	resp, _ = f.download(html.ID, nil)
	if ct := resp.Header.Get("Content-Type"); ct != "application/octet-stream" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("Content-Type %q", ct)
	}
}

func TestRenameMoveDelete(t *testing.T) {
	f := newFixture(t)
	a := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "A")
	b := f.mustMkdir(f.at("/api/2/files/%d/folder/%d/create_folder", a.ID), "B")
	if b.Path != "/A/B" {
		t.Fatalf("nested folder path %q", b.Path)
	}
	fj := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", b.ID), "x.txt", []byte("x"))

	// Rename returns the updated object.
	st, body := f.postForm(f.at("/api/2/files/%d/%d/rename", fj.ID), url.Values{"name": {"y z.txt"}})
	var got fileJSON
	decode(t, body, &got)
	if st != http.StatusOK || got.Path != "/A/B/y z.txt" || got.ID != fj.ID || got.Type != "file" {
		t.Fatalf("rename file: %d %s", st, body)
	}
	st, body = f.postForm(f.at("/api/2/files/%d/folder/%d/rename", a.ID), url.Values{"name": {"Ä"}})
	var gotDir folderJSON
	decode(t, body, &gotDir)
	if st != http.StatusOK || gotDir.Path != "/Ä" || gotDir.Type != "folder" {
		t.Fatalf("rename folder: %d %s", st, body)
	}
	// Move the file to the top level (folder_id 0), renamed.
	st, body = f.postForm(f.at("/api/2/files/%d/%d/move", fj.ID), url.Values{"folder_id": {"0"}, "name": {"top.txt"}})
	decode(t, body, &got)
	if st != http.StatusOK || got.Path != "/top.txt" {
		t.Fatalf("move file: %d %s", st, body)
	}
	// Move folder B to the top level, with root_id given.
	st, body = f.postForm(f.at("/api/2/files/%d/folder/%d/move", b.ID), url.Values{"folder_id": {"0"}, "root_id": {fmt.Sprint(f.root.ID)}})
	decode(t, body, &gotDir)
	if st != http.StatusOK || gotDir.Path != "/B" {
		t.Fatalf("move folder: %d %s", st, body)
	}
	// And back into A by id; the multipart form works as well.
	var mb bytes.Buffer
	mw := multipart.NewWriter(&mb)
	mw.WriteField("folder_id", fmt.Sprint(a.ID))
	mw.Close()
	st, body = f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/folder/%d/move", b.ID), f.token, &mb, http.Header{"Content-Type": {mw.FormDataContentType()}}))
	decode(t, body, &gotDir)
	if st != http.StatusOK || gotDir.Path != "/Ä/B" {
		t.Fatalf("move folder back: %d %s", st, body)
	}

	// Search and modified_since.
	st, body = f.get(f.at("/api/2/files/%d/search?query=TOP"))
	var res struct {
		Results []map[string]any `json:"results"`
	}
	decode(t, body, &res)
	if st != http.StatusOK || len(res.Results) != 1 || res.Results[0]["path"] != "/top.txt" {
		t.Fatalf("search: %d %s", st, body)
	}
	st, body = f.get(f.at("/api/2/files/%d/search?query=b"))
	decode(t, body, &res)
	if st != http.StatusOK || len(res.Results) != 1 || res.Results[0]["type"] != "folder" {
		t.Fatalf("search folder: %d %s", st, body)
	}
	st, body = f.get(f.at("/api/2/files/%d/search?query=nothing-like-this"))
	if st != http.StatusOK || string(bytes.TrimSpace(body)) != `{"results":[]}` {
		t.Fatalf("empty search: %d %s", st, body)
	}
	past := time.Now().UTC().Add(-time.Hour)
	for _, q := range []string{"since=" + formatDateTime(past), "date=" + formatDate(past)} {
		st, body = f.get(f.at("/api/2/files/%d/modified_since?" + q))
		decode(t, body, &res)
		if st != http.StatusOK || len(res.Results) != 1 || res.Results[0]["type"] != "file" {
			t.Fatalf("modified_since %s: %d %s", q, st, body)
		}
	}
	st, body = f.get(f.at("/api/2/files/%d/modified_since?since=" + formatDateTime(time.Now().UTC().Add(time.Hour))))
	decode(t, body, &res)
	if st != http.StatusOK || len(res.Results) != 0 {
		t.Fatalf("modified_since future: %d %s", st, body)
	}

	// Delete: gone from listings, shown as deleted by id, not downloadable.
	if st, body := f.postForm(f.at("/api/2/files/%d/%d/delete", fj.ID), nil); st != http.StatusOK || string(bytes.TrimSpace(body)) != `{"status":"ok"}` {
		t.Fatalf("delete: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d/%d", fj.ID))
	decode(t, body, &got)
	if !got.IsDeleted {
		t.Fatalf("deleted file: %s", body)
	}
	st, body = f.get(f.at("/api/2/files/%d/%d/download", fj.ID))
	wantError(t, st, body, http.StatusNotFound, "not_found")
	if st, body := f.postForm(f.at("/api/2/files/%d/folder/%d/delete", a.ID), nil); st != http.StatusOK {
		t.Fatalf("delete folder: %d %s", st, body)
	}
	_, body = f.get(f.at("/api/2/files/%d?include_children=true"))
	if bytes.Contains(body, []byte(`"Ä"`)) || !bytes.Contains(body, []byte(`"children":[]`)) {
		t.Fatalf("root after deletes: %s", body)
	}
}

// multipartRaw builds a multipart body by hand for bodies a
// multipart.Writer would not write.
func multipartRaw(boundary string, parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString("--" + boundary + "\r\n" + p + "\r\n")
	}
	return b.String()
}

func TestFSErrors(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.ExcludedExtensions = ".exe,.bat"
	pol.MaxFileSize = 1000
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("1"))
	f.mustUpload(f.at("/api/2/files/%d/upload"), "other.txt", []byte("2"))
	_, otherRoot, _ := f.addPerson("bob")
	deadRoot, err := f.fs.CreateRoot(ctx, "dead", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.accounts.UpdatePerson(ctx, f.person.ID, func(p *account.Person) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("n", vfs.MaxNameBytes+1)
	form := func(kv ...string) url.Values {
		v := url.Values{}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	post := func(path string, v url.Values) func() (int, []byte) {
		return func() (int, []byte) { return f.postForm(path, v) }
	}
	get := func(path string) func() (int, []byte) {
		return func() (int, []byte) { return f.get(path) }
	}
	raw := func(path, ct, body string) func() (int, []byte) {
		return func() (int, []byte) {
			h := http.Header{}
			if ct != "" {
				h.Set("Content-Type", ct)
			}
			return f.readAll(f.request(http.MethodPost, path, f.token, strings.NewReader(body), h))
		}
	}
	upload := func(path, name string, size int, fields ...uploadField) func() (int, []byte) {
		return func() (int, []byte) { return f.upload(path, name, bytes.NewReader(make([]byte, size)), fields...) }
	}
	up := f.at("/api/2/files/%d/upload")
	mk := f.at("/api/2/files/%d/create_folder")
	for _, tc := range []struct {
		name   string
		do     func() (int, []byte)
		status int
		code   string
	}{
		{"create_folder ..", post(mk, form("name", "..")), 400, "invalid_name"},
		{"create_folder slash", post(mk, form("name", "a/b")), 400, "invalid_name"},
		{"create_folder empty", post(mk, form("name", "")), 400, "invalid_name"},
		{"create_folder control", post(mk, form("name", "a\x01")), 400, "invalid_name"},
		{"create_folder no name", post(mk, nil), 400, "invalid_request"},
		{"create_folder long", post(mk, form("name", long)), 400, "name_too_long"},
		{"create_folder exists", post(mk, form("name", "D")), 409, "name_conflict"},
		{"create_folder over file", post(mk, form("name", "f.txt")), 409, "name_conflict"},
		{"rename file ..", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", "..")), 400, "invalid_name"},
		{"rename file empty", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", "")), 400, "invalid_name"},
		{"rename file exe", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", "x.EXE")), 400, "invalid_extension"},
		{"rename file bat", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", "x.bat")), 400, "invalid_extension"},
		{"rename file conflict", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", "other.txt")), 409, "name_conflict"},
		// Spec 7.3 lists name_too_long for folders only; file routes say invalid_name.
		{"rename file long", post(f.at("/api/2/files/%d/%d/rename", fj.ID), form("name", long)), 400, "invalid_name"},
		{"move file long", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "0", "name", long)), 400, "invalid_name"},
		{"move folder long", post(f.at("/api/2/files/%d/folder/%d/move", d.ID), form("folder_id", "0", "name", long)), 400, "name_too_long"},
		{"rename folder long", post(f.at("/api/2/files/%d/folder/%d/rename", d.ID), form("name", long)), 400, "name_too_long"},
		{"rename folder conflict", post(f.at("/api/2/files/%d/folder/%d/rename", d.ID), form("name", "f.txt")), 409, "name_conflict"},
		{"rename no name", post(f.at("/api/2/files/%d/%d/rename", fj.ID), nil), 400, "invalid_request"},
		{"move conflict", post(f.at("/api/2/files/%d/folder/%d/move", d.ID), form("folder_id", "0", "name", "f.txt")), 409, "name_conflict"},
		{"move into itself", post(f.at("/api/2/files/%d/folder/%d/move", d.ID), form("folder_id", fmt.Sprint(d.ID))), 409, "name_conflict"},
		{"move no folder_id", post(f.at("/api/2/files/%d/%d/move", fj.ID), nil), 400, "invalid_request"},
		{"move bad folder_id", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "x")), 400, "invalid_request"},
		{"move folder_id past int64", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "9223372036854775808")), 400, "invalid_request"},
		{"move folder_id past uint64", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "18446744073709551616")), 400, "invalid_request"},
		{"move root_id past int64", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "0", "root_id", "18446744073709551615")), 400, "invalid_request"},
		{"file id past int64", get(f.at("/api/2/files/%d/9223372036854775808")), 404, "not_found"},
		{"folder id max uint64", get(f.at("/api/2/files/%d/folder/18446744073709551615")), 404, "not_found"},
		{"move to a file", post(f.at("/api/2/files/%d/folder/%d/move", d.ID), form("folder_id", fmt.Sprint(fj.ID))), 404, "not_found"},
		{"move other root", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "0", "root_id", fmt.Sprint(otherRoot.ID))), 400, "invalid_request"},
		{"move exe", post(f.at("/api/2/files/%d/%d/move", fj.ID), form("folder_id", "0", "name", "a.exe")), 400, "invalid_extension"},
		{"upload no file", raw(up, "multipart/form-data; boundary=XX", multipartRaw("XX", "Content-Disposition: form-data; name=\"other\"\r\n\r\nv")+"--XX--\r\n"), 400, "no_file_received"},
		{"upload empty multipart", raw(up, "multipart/form-data; boundary=XX", "--XX--\r\n"), 400, "no_file_received"},
		// Spec 4.3, 7.3: a body that is not multipart has no field
		// `file`, which is no_file_received; a broken multipart one is
		// invalid_request (below).
		{"upload not multipart", raw(up, "application/octet-stream", "data"), 400, "no_file_received"},
		{"upload no content type", raw(up, "", "data"), 400, "no_file_received"},
		{"upload no body", raw(up, "", ""), 400, "no_file_received"},
		{"upload url-encoded form", raw(up, "application/x-www-form-urlencoded", "file=data"), 400, "no_file_received"},
		{"upload bad content type", raw(up, "multipart/form-data; boundary", "data"), 400, "invalid_request"},
		{"upload missing boundary", raw(up, "multipart/form-data", "--XX\r\n"), 400, "invalid_request"},
		{"upload garbage", raw(up, "multipart/form-data; boundary=XX", "this is not multipart"), 400, "invalid_request"},
		{"upload cut off", raw(up, "multipart/form-data; boundary=XX", multipartRaw("XX", "Content-Disposition: form-data; name=\"file\"; filename=\"f.txt\"\r\n\r\nhalf a bo")), 400, "invalid_request"},
		{"upload no filename", raw(up, "multipart/form-data; boundary=XX", multipartRaw("XX", "Content-Disposition: form-data; name=\"file\"\r\n\r\nx")+"--XX--\r\n"), 400, "invalid_name"},
		{"upload ..", upload(up, "..", 1), 400, "invalid_name"},
		{"upload name field slash", upload(up, "ok.txt", 1, uploadField{"name", "../x.txt"}), 400, "invalid_name"},
		{"upload long", upload(up, long, 1), 400, "invalid_name"},
		{"upload long name field", upload(up, "ok.txt", 1, uploadField{"name", long}), 400, "invalid_name"},
		{"upload exe", upload(up, "setup.exe", 1), 409, "policy_error"},
		{"upload over folder", upload(up, "D", 1), 409, "name_conflict"},
		{"upload too large", upload(up, "big.txt", 1001), 409, "policy_error"},
		{"upload fields too large", upload(up, "x.txt", 1, uploadField{"pad", strings.Repeat("p", maxFormBytes+1)}), 400, "invalid_request"},
		{"form too large", post(mk, form("name", strings.Repeat("p", maxFormBytes))), 400, "invalid_request"},
		{"form malformed", raw(mk, "application/x-www-form-urlencoded", "name=%zz"), 400, "invalid_request"},
		{"since malformed", get(f.at("/api/2/files/%d/modified_since?since=2024-01-02%%2012:00:00")), 400, "invalid_datetime_format"},
		{"since date only", get(f.at("/api/2/files/%d/modified_since?since=2024-01-02")), 400, "invalid_datetime_format"},
		{"date malformed", get(f.at("/api/2/files/%d/modified_since?date=2024/01/02")), 400, "invalid_date_format"},
		{"modified_since nothing", get(f.at("/api/2/files/%d/modified_since")), 400, "invalid_request"},
		{"search no query", get(f.at("/api/2/files/%d/search")), 400, "invalid_request"},
		{"search bad limit", get(f.at("/api/2/files/%d/search?query=a&limit=0")), 400, "invalid_request"},
		{"include_children bad", get(f.at("/api/2/files/%d?include_children=maybe")), 400, "invalid_request"},
		{"rename top folder", post(f.at("/api/2/files/%d/folder/%d/rename", f.root.FolderID), form("name", "x")), 403, "forbidden"},
		{"delete top folder", post(f.at("/api/2/files/%d/folder/%d/delete", f.root.FolderID), nil), 403, "forbidden"},
		{"other root", get(fmt.Sprintf("/api/2/files/%d", otherRoot.ID)), 404, "not_found"},
		{"other root upload", upload(fmt.Sprintf("/api/2/files/%d/upload", otherRoot.ID), "x.txt", 1), 404, "not_found"},
		{"unowned root", get(fmt.Sprintf("/api/2/files/%d", deadRoot.ID)), 404, "not_found"},
		{"missing root", get("/api/2/files/999999"), 404, "not_found"},
		{"root id word", get("/api/2/files/abc"), 404, "not_found"},
		{"root id negative", get("/api/2/files/-1"), 404, "not_found"},
		{"root id plus", get(fmt.Sprintf("/api/2/files/+%d", f.root.ID)), 404, "not_found"},
		{"root id huge", get("/api/2/files/99999999999999999999999"), 404, "not_found"},
		{"file id word", get(f.at("/api/2/files/%d/abc")), 404, "not_found"},
		{"file id missing", get(f.at("/api/2/files/%d/999999")), 404, "not_found"},
		{"folder id on file route", get(f.at("/api/2/files/%d/%d", d.ID)), 404, "not_found"},
		{"folder id on download", get(f.at("/api/2/files/%d/%d/download", d.ID)), 404, "not_found"},
		{"file id on folder route", get(f.at("/api/2/files/%d/folder/%d", fj.ID)), 404, "not_found"},
		{"file id on folder upload", upload(f.at("/api/2/files/%d/folder/%d/upload", fj.ID), "x.txt", 1), 404, "not_found"},
		{"folder id word", get(f.at("/api/2/files/%d/folder/abc")), 404, "not_found"},
		{"folder download word", get(f.at("/api/2/files/%d/folder/download")), 404, "not_found"},
		{"other sub-route", get(f.at("/api/2/files/%d/%d/nothing", fj.ID)), 404, "not_found"},
		{"encoded slash", get(f.at("/api/2/files/%d/folder%%2F%d", d.ID)), 404, "not_found"},
		{"encoded dots", get(f.at("/api/2/files/%d/%%2E%%2E%%2F%%2E%%2E%%2Fetc%%2Fpasswd")), 404, "not_found"},
		{"no token", func() (int, []byte) {
			return f.readAll(f.request(http.MethodGet, f.at("/api/2/files/%d"), "", nil, nil))
		}, 401, "access_denied"},
		{"bad token", func() (int, []byte) {
			return f.readAll(f.request(http.MethodGet, f.at("/api/2/files/%d/%d/download", fj.ID), "nope", nil, nil))
		}, 401, "access_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, body := tc.do()
			wantError(t, st, body, tc.status, tc.code)
		})
	}
	// Nothing of the refused uploads was stored.
	kids, _, err := f.fs.List(ctx, f.root.ID, f.root.FolderID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range kids {
		names = append(names, k.Name)
	}
	if strings.Join(names, ",") != "D,f.txt,other.txt" {
		t.Fatalf("root holds %v", names)
	}
	if _, got := f.download(fj.ID, nil); string(got) != "1" {
		t.Fatalf("f.txt changed: %q", got)
	}
}

func TestPolicyErrors(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.SpaceQuota = "100"
	pol.UserLockFiles = false
	f := newFixtureWith(t, fixtureOptions{Policy: &pol})
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "a", make([]byte, 60))
	st, body := f.upload(f.at("/api/2/files/%d/upload"), "b", bytes.NewReader(make([]byte, 60)))
	wantError(t, st, body, http.StatusConflict, "policy_error")
	if !strings.Contains(string(body), "quota") {
		t.Errorf("description does not name the quota: %s", body)
	}
	st, body = f.postForm(f.at("/api/2/files/%d/%d/lock", fj.ID), nil)
	wantError(t, st, body, http.StatusForbidden, "forbidden")
	st, body = f.postForm(f.at("/api/2/files/%d/lock"), nil)
	wantError(t, st, body, http.StatusForbidden, "forbidden")

	// A deleted root: 410 on every route.
	if err := f.fs.DeleteRoot(context.Background(), f.root.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/api/2/files/%d", "/api/2/files/%d/search?query=a"} {
		st, body = f.get(f.at(p))
		wantError(t, st, body, http.StatusGone, "root_deleted")
	}
	st, body = f.upload(f.at("/api/2/files/%d/upload"), "c", strings.NewReader("x"))
	wantError(t, st, body, http.StatusGone, "root_deleted")
}

func TestPathTraversal(t *testing.T) {
	f := newFixture(t)
	// A filename with directories keeps only its last element.
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "../../etc/passwd", []byte("x"))
	if fj.Path != "/passwd" {
		t.Fatalf("path %q", fj.Path)
	}
	// Dot segments in the URL are not cleaned and followed: a JSON 404
	// (TestNonCanonicalPaths), never a file outside.
	for _, p := range []string{
		f.at("/api/2/files/%d/../../../etc/passwd"),
		f.at("/api/2/files/%d/folder/../%d", fj.ID),
		"/api/2/files/../../../../etc/passwd",
	} {
		resp := f.request(http.MethodGet, p, f.token, nil, nil)
		st, body := f.readAll(resp)
		if resp.Request.URL.Path != p {
			t.Fatalf("%s redirected to %s", p, resp.Request.URL.Path)
		}
		wantError(t, st, body, http.StatusNotFound, "not_found")
	}
}

// cutUpload starts an upload that announces a body of size bytes, sends
// about half of it, drops the connection, and waits until the server has
// finished with the request.
func (f *fixture) cutUpload(name string, size int) {
	f.t.Helper()
	done := f.requestsDone()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if part, err := mw.CreateFormFile("file", name); err == nil {
			part.Write(berthtest.RandomBytes(2, size/2))
		}
		// Give up midway: the client's transport aborts the request.
		cancel()
		pw.CloseWithError(io.ErrUnexpectedEOF)
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url(f.at("/api/2/files/%d/upload")), pr)
	req.ContentLength = int64(size)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := f.client.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	// Wait for the server to have logged the request; it is done with it then.
	deadline := time.Now().Add(30 * time.Second)
	for f.requestsDone() == done {
		if time.Now().After(deadline) {
			f.t.Fatal("the server never finished the cut-off upload")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// requestsDone counts requests the server has finished, from its metrics.
func (f *fixture) requestsDone() float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "berth_http_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			n += m.GetCounter().GetValue()
		}
	}
	return n
}

func TestDownloadFailsLoudly(t *testing.T) {
	f := newFixture(t)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "lost.bin", berthtest.RandomBytes(3, 1<<20))
	// Lose the contents underneath the metadata.
	berthtest.LoseChunks(t, f.dir)
	req, _ := http.NewRequest(http.MethodGet, f.url(f.at("/api/2/files/%d/%d/download", fj.ID)), nil)
	req.Header.Set("Authorization", "Bearer "+f.token)
	resp, err := f.client.Do(req)
	if err == nil {
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
	}
	if err == nil {
		t.Fatal("a download whose contents are lost looked complete")
	}
	t.Logf("the client saw: %v", err)
	// The server is still up.
	if st, body := f.get(f.at("/api/2/files/%d")); st != http.StatusOK {
		t.Fatalf("%d %s", st, body)
	}
}
