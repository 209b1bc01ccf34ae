package rest

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/vfs"
)

// zipURL is the folder download route of the fixture's root.
func (f *fixture) zipURL(folder uint64) string {
	return f.at("/api/2/files/%d/folder/%d/download", folder)
}

// TestFolderDownloadZip uploads a tree through the API, downloads a folder
// as a zip and opens it with the standard library: same names (spaces,
// non-ASCII, nesting, an empty folder), same bytes, deleted items absent,
// every entry Stored, and a Content-Length that is the bytes sent.
func TestFolderDownloadZip(t *testing.T) {
	f := newFixture(t)
	top := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "Reports 2024 – été")
	in := func(id uint64) string { return f.at("/api/2/files/%d/folder/%d/upload", id) }
	mkdir := func(parent uint64, name string) folderJSON {
		return f.mustMkdir(f.at("/api/2/files/%d/folder/%d/create_folder", parent), name)
	}
	text := []byte(strings.Repeat("berth keeps files; the zip keeps names.\n", 4000))
	random := berthtest.RandomBytes(7, 2<<20+123)
	want := map[string][]byte{
		"notes and thoughts.txt":  text,
		"データ 日本語.bin":             random,
		"nested/":                 nil,
		"nested/deeper/":          nil,
		"nested/deeper/ünï.txt":   []byte("ünïcödé\n"),
		"nested/zero byte":        {},
		"empty folder/":           nil,
		"nested/deeper/again.bin": random[:70000],
	}
	f.mustUpload(in(top.ID), "notes and thoughts.txt", text)
	f.mustUpload(in(top.ID), "データ 日本語.bin", random)
	nested := mkdir(top.ID, "nested")
	deeper := mkdir(nested.ID, "deeper")
	f.mustUpload(in(deeper.ID), "ünï.txt", []byte("ünïcödé\n"))
	f.mustUpload(in(deeper.ID), "again.bin", random[:70000])
	f.mustUpload(in(nested.ID), "zero byte", nil)
	mkdir(top.ID, "empty folder")
	gone := f.mustUpload(in(top.ID), "gone.txt", text)
	goneDir := mkdir(nested.ID, "gone folder")
	f.mustUpload(in(goneDir.ID), "inside.txt", text)
	for _, p := range []string{f.at("/api/2/files/%d/%d/delete", gone.ID), f.at("/api/2/files/%d/folder/%d/delete", goneDir.ID)} {
		if status, body := f.postForm(p, nil); status != http.StatusOK {
			t.Fatalf("delete: %d %s", status, body)
		}
	}

	resp := f.request(http.MethodGet, f.zipURL(top.ID), f.token, nil, nil)
	status, body := f.readAll(resp)
	if status != http.StatusOK {
		t.Fatalf("download: %d %s", status, body)
	}
	h := resp.Header
	if ct := h.Get("Content-Type"); ct != "application/zip" {
		t.Errorf("Content-Type %q", ct)
	}
	if cl := h.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
		t.Errorf("Content-Length %q, %d bytes sent", cl, len(body))
	}
	if h.Get("ETag") == "" || h.Get("Accept-Ranges") != "bytes" {
		t.Errorf("ETag %q, Accept-Ranges %q", h.Get("ETag"), h.Get("Accept-Ranges"))
	}
	wantCD := `attachment; filename="Reports 2024 _ _t_.zip"; filename*=UTF-8''Reports%202024%20%E2%80%93%20%C3%A9t%C3%A9.zip`
	if cd := h.Get("Content-Disposition"); cd != wantCD {
		t.Errorf("Content-Disposition %q, want %q", cd, wantCD)
	}

	zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("archive/zip cannot open the download: %v", err)
	}
	var names []string
	for _, zf := range zr.File {
		names = append(names, zf.Name)
		data, ok := want[zf.Name]
		if !ok {
			t.Errorf("unexpected entry %q", zf.Name)
			continue
		}
		delete(want, zf.Name)
		if zf.Flags&0x800 == 0 {
			t.Errorf("%q: UTF-8 flag not set", zf.Name)
		}
		if strings.HasSuffix(zf.Name, "/") {
			continue
		}
		rc, err := zf.Open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%q: %d bytes (%v), want the %d uploaded", zf.Name, len(got), err, len(data))
		}
		if zf.Method != zip.Store {
			t.Errorf("%q: method %d, want Store", zf.Name, zf.Method)
		}
	}
	for name := range want {
		t.Errorf("entry %q missing (have %q)", name, names)
	}
}

func TestFolderDownloadErrors(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	file := f.mustUpload(f.at("/api/2/files/%d/upload"), "a.txt", []byte("a"))
	gone := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "Gone")
	inGone := f.mustMkdir(f.at("/api/2/files/%d/folder/%d/create_folder", gone.ID), "Inside")
	if status, body := f.postForm(f.at("/api/2/files/%d/folder/%d/delete", gone.ID), nil); status != http.StatusOK {
		t.Fatalf("delete: %d %s", status, body)
	}
	_, bobRoot, _ := f.addPerson("bob")
	bobDir, err := f.fs.Mkdir(context.Background(), bobRoot.ID, bobRoot.FolderID, "B", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, path string
		token      string
		status     int
		code       string
	}{
		{"no token", f.zipURL(d.ID), "", http.StatusUnauthorized, "access_denied"},
		{"another person's root", fmt.Sprintf("/api/2/files/%d/folder/%d/download", bobRoot.ID, bobDir.ID), f.token, http.StatusNotFound, "not_found"},
		{"another root's folder in mine", f.zipURL(bobDir.ID), f.token, http.StatusNotFound, "not_found"},
		{"root id not an integer", fmt.Sprintf("/api/2/files/x%d/folder/%d/download", f.root.ID, d.ID), f.token, http.StatusNotFound, "not_found"},
		{"folder id not an integer", f.at("/api/2/files/%d/folder/1e3/download"), f.token, http.StatusNotFound, "not_found"},
		{"no such folder", f.zipURL(1 << 50), f.token, http.StatusNotFound, "not_found"},
		{"a file id", f.zipURL(file.ID), f.token, http.StatusNotFound, "not_found"},
		{"a deleted folder", f.zipURL(gone.ID), f.token, http.StatusNotFound, "not_found"},
		{"a folder in a deleted folder", f.zipURL(inGone.ID), f.token, http.StatusNotFound, "not_found"},
		{"a token not issued", f.zipURL(d.ID), "not-a-token", http.StatusUnauthorized, "access_denied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.readAll(f.request(http.MethodGet, c.path, c.token, nil, nil))
			wantError(t, status, body, c.status, c.code)
		})
	}
}

// TestFolderDownloadClientGone disconnects after the first bytes: the
// server's zip stops (the request ends) instead of reading the rest of the
// folder.
func TestFolderDownloadClientGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "big", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 256 MiB of a repeated random block: cheap to store (its chunks
	// repeat), incompressible, and far more than loopback buffers hold.
	block := berthtest.RandomBytes(9, 4<<20)
	if _, err := f.fs.WriteFile(ctx, f.root.ID, d.ID, "big.bin", &repeatReader{b: block, left: 256 << 20}, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	done := f.requestsDone()
	resp := f.request(http.MethodGet, f.zipURL(d.ID), f.token, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// Closing an HTTP/2 body resets the stream, which cancels the request's
	// context on the server.
	deadline := time.Now().Add(30 * time.Second)
	for f.requestsDone() == done {
		if time.Now().After(deadline) {
			t.Fatal("the server never stopped the zip of a client that went away")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The request log says how much went out: a stopped zip sent a little
	// more than the client read, nowhere near the folder's 256 MiB.
	m := regexp.MustCompile(`route="GET /api/2/files/\{root_id\}/folder/\{folder_id\}/download".* bytes=(\d+)`).FindStringSubmatch(f.logs.String())
	if m == nil {
		t.Fatalf("no request log line for the zip:\n%s", f.logs.String())
	}
	if sent, _ := strconv.ParseInt(m[1], 10, 64); sent > 64<<20 {
		t.Errorf("the server sent %d bytes to a client that left after 1 MiB", sent)
	}
}

// TestFolderDownloadReadError deletes a chunk file: the zip fails midway,
// and the client must see a broken transfer, not a short valid archive.
func TestFolderDownloadReadError(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	in := f.at("/api/2/files/%d/folder/%d/upload", d.ID)
	// The first file fills the buffers, so the response has started when
	// the second one fails.
	f.mustUpload(in, "a.bin", berthtest.RandomBytes(1, 1<<20))
	bad := f.mustUpload(in, "b.bin", berthtest.RandomBytes(2, 3<<20))
	revs, err := f.fs.Revisions(ctx, f.root.ID, bad.ID)
	if err != nil {
		t.Fatal(err)
	}
	refs := revs[len(revs)-1].Chunks
	if err := os.Remove(f.chunks.Path(refs[len(refs)-1].ID)); err != nil {
		t.Fatal(err)
	}

	resp := f.request(http.MethodGet, f.zipURL(d.ID), f.token, nil, nil)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: the failure should come after the first byte", resp.StatusCode)
	}
	got, err := io.ReadAll(resp.Body)
	if err == nil {
		t.Fatalf("read %d bytes without an error: a broken zip must break the transfer", len(got))
	}
	if _, zerr := zip.NewReader(bytes.NewReader(got), int64(len(got))); zerr == nil {
		t.Error("the bytes received open as a valid zip")
	}
}

// repeatReader reads b over and over, left bytes in all.
type repeatReader struct {
	b    []byte
	off  int
	left int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > r.left {
		p = p[:r.left]
	}
	n := copy(p, r.b[r.off:])
	r.off = (r.off + n) % len(r.b)
	r.left -= int64(n)
	return n, nil
}

// TestFolderZipRanges: the zip of a folder is one byte sequence with an
// exact Content-Length and an ETag, served by http.ServeContent: the same
// bytes twice, HEAD, 304, a download cut at 60% resumed with Range and
// If-Range into an archive unzip tests whole, a resumption against a
// folder changed since answered with the whole new archive (200), and an
// unsatisfiable Range as a JSON 416.
func TestFolderZipRanges(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "Résumé")
	in := func(id uint64) string { return f.at("/api/2/files/%d/folder/%d/upload", id) }
	f.mustUpload(in(d.ID), "a.bin", berthtest.RandomBytes(3, 3<<20))
	sub := f.mustMkdir(f.at("/api/2/files/%d/folder/%d/create_folder", d.ID), "sub ü")
	f.mustUpload(in(sub.ID), "b.txt", []byte("small"))
	f.mustUpload(in(sub.ID), "c.bin", berthtest.RandomBytes(4, 1<<20+5))
	url := f.zipURL(d.ID)
	get := func(method string, h http.Header) (*http.Response, []byte) {
		t.Helper()
		resp := f.request(method, url, f.token, nil, h)
		_, body := f.readAll(resp)
		return resp, body
	}
	resp, whole := get(http.MethodGet, nil)
	etag := resp.Header.Get("ETag")
	size := len(whole)
	cut := size * 6 / 10
	var first []byte // the download cut at 60%
	for _, c := range []struct {
		name   string
		method string
		header func() http.Header
		status int
		check  func(t *testing.T, resp *http.Response, body []byte)
	}{
		{"Content-Length is the bytes sent", http.MethodGet, nil, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.ContentLength != int64(len(body)) || len(body) != size {
				t.Errorf("Content-Length %d, %d bytes sent, %d before", resp.ContentLength, len(body), size)
			}
		}},
		{"the same ETag and bytes twice", http.MethodGet, nil, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.Header.Get("ETag") != etag || !bytes.Equal(body, whole) {
				t.Errorf("ETag %s then %s; bytes equal %v", etag, resp.Header.Get("ETag"), bytes.Equal(body, whole))
			}
		}},
		{"HEAD: the headers alone", http.MethodHead, nil, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.Header.Get("Content-Length") != strconv.Itoa(size) || resp.Header.Get("ETag") != etag || len(body) != 0 {
				t.Errorf("Content-Length %q ETag %q body %d", resp.Header.Get("Content-Length"), resp.Header.Get("ETag"), len(body))
			}
		}},
		{"If-None-Match: 304", http.MethodGet, func() http.Header { return http.Header{"If-None-Match": {etag}} }, http.StatusNotModified, nil},
		{"cut at 60%", http.MethodGet, func() http.Header { return http.Header{"Range": {fmt.Sprintf("bytes=0-%d", cut-1)}} }, http.StatusPartialContent, func(t *testing.T, resp *http.Response, body []byte) {
			first = body
		}},
		{"resumed with Range and If-Range", http.MethodGet, func() http.Header {
			return http.Header{"Range": {fmt.Sprintf("bytes=%d-", cut)}, "If-Range": {etag}}
		}, http.StatusPartialContent, func(t *testing.T, resp *http.Response, body []byte) {
			if want := fmt.Sprintf("bytes %d-%d/%d", cut, size-1, size); resp.Header.Get("Content-Range") != want {
				t.Errorf("Content-Range %q, want %q", resp.Header.Get("Content-Range"), want)
			}
			joined := append(append([]byte(nil), first...), body...)
			if !bytes.Equal(joined, whole) {
				t.Fatalf("joined %d bytes differ from the archive's %d", len(joined), size)
			}
			if _, err := zip.NewReader(bytes.NewReader(joined), int64(len(joined))); err != nil {
				t.Fatal(err)
			}
			berthtest.UnzipTest(t, joined)
		}},
		{"a suffix range", http.MethodGet, func() http.Header { return http.Header{"Range": {"bytes=-100"}} }, http.StatusPartialContent, func(t *testing.T, resp *http.Response, body []byte) {
			if !bytes.Equal(body, whole[size-100:]) {
				t.Error("the last 100 bytes differ")
			}
		}},
		{"two ranges: multipart", http.MethodGet, func() http.Header { return http.Header{"Range": {"bytes=0-9,100-199"}} }, http.StatusPartialContent, func(t *testing.T, resp *http.Response, body []byte) {
			_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if err != nil {
				t.Fatal(err)
			}
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for _, want := range [][]byte{whole[:10], whole[100:200]} {
				p, err := mr.NextPart()
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(p)
				if !bytes.Equal(got, want) {
					t.Errorf("part %q: %d bytes differ", p.Header.Get("Content-Range"), len(got))
				}
			}
		}},
		{"past the end: 416 as JSON", http.MethodGet, func() http.Header { return http.Header{"Range": {fmt.Sprintf("bytes=%d-", size+10)}} }, http.StatusRequestedRangeNotSatisfiable, func(t *testing.T, resp *http.Response, body []byte) {
			if !strings.Contains(string(body), `"error"`) {
				t.Errorf("body %s", body)
			}
		}},
		{"HEAD with a Range: the part's headers alone", http.MethodHead, func() http.Header { return http.Header{"Range": {"bytes=10-19"}} }, http.StatusPartialContent, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.Header.Get("Content-Length") != "10" || resp.Header.Get("Content-Range") != fmt.Sprintf("bytes 10-19/%d", size) || len(body) != 0 {
				t.Errorf("Content-Length %q Content-Range %q body %d", resp.Header.Get("Content-Length"), resp.Header.Get("Content-Range"), len(body))
			}
		}},
		{"past the end: 416 says the size", http.MethodGet, func() http.Header { return http.Header{"Range": {fmt.Sprintf("bytes=%d-", size)}} }, http.StatusRequestedRangeNotSatisfiable, func(t *testing.T, resp *http.Response, body []byte) {
			if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
				t.Errorf("Content-Range %q, want %q", got, want)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") || resp.Header.Get("Content-Disposition") != "" {
				t.Errorf("Content-Type %q, Content-Disposition %q", ct, resp.Header.Get("Content-Disposition"))
			}
			wantError(t, resp.StatusCode, body, http.StatusRequestedRangeNotSatisfiable, "invalid_request")
		}},
		{"If-Match of another archive: 412 as JSON", http.MethodGet, func() http.Header { return http.Header{"If-Match": {`"zother"`}} }, http.StatusPreconditionFailed, func(t *testing.T, resp *http.Response, body []byte) {
			if !strings.Contains(string(body), `"error"`) {
				t.Errorf("body %s", body)
			}
		}},
		{"If-Range with a date: the whole archive", http.MethodGet, func() http.Header {
			return http.Header{"Range": {"bytes=10-"}, "If-Range": {time.Now().UTC().Format(http.TimeFormat)}}
		}, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if !bytes.Equal(body, whole) {
				t.Error("not the whole archive")
			}
		}},
		{"overlapping ranges past the size: the whole archive", http.MethodGet, func() http.Header { return http.Header{"Range": {"bytes=1-,0-"}} }, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if !bytes.Equal(body, whole) {
				t.Error("not the whole archive")
			}
		}},
		{"resumed after the folder changed: the whole new archive", http.MethodGet, func() http.Header {
			f.mustUpload(in(sub.ID), "new.txt", []byte("added while the download was cut"))
			return http.Header{"Range": {fmt.Sprintf("bytes=%d-", cut)}, "If-Range": {etag}}
		}, http.StatusOK, func(t *testing.T, resp *http.Response, body []byte) {
			if resp.Header.Get("ETag") == etag {
				t.Error("the ETag did not change with the folder")
			}
			zr, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
			if err != nil {
				t.Fatal(err)
			}
			if n := len(zr.File); n != 5 {
				t.Errorf("%d entries, want 5", n)
			}
			berthtest.UnzipTest(t, body)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var h http.Header
			if c.header != nil {
				h = c.header()
			}
			resp, body := get(c.method, h)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			if c.check != nil {
				c.check(t, resp, body)
			}
		})
	}
}

// TestShareLinkZipRanges: a share link's zip is served as the folder
// route's is (exact size, ETag, a resumption joined into an archive unzip
// tests), and file_ids narrowing gives another archive, with its own ETag.
func TestShareLinkZipRanges(t *testing.T) {
	f, file, folder, _ := linkFixture(t, fixtureOptions{})
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", folder), "b.bin", berthtest.RandomBytes(5, 1<<20))
	fl := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), nil)
	base := "/api/2/sharelinks/" + fl.Hash + "/download"
	get := func(path string, h http.Header) (*http.Response, []byte) {
		t.Helper()
		resp := f.request(http.MethodGet, path, "", nil, h)
		st, body := f.readAll(resp)
		if st >= 300 {
			t.Fatalf("%s: %d %s", path, st, body)
		}
		return resp, body
	}
	resp, whole := get(base, nil)
	etag := resp.Header.Get("ETag")
	if resp.ContentLength != int64(len(whole)) || etag == "" {
		t.Fatalf("Content-Length %d for %d bytes, ETag %q", resp.ContentLength, len(whole), etag)
	}
	cut := len(whole) * 6 / 10
	resp, rest := get(base, http.Header{"Range": {fmt.Sprintf("bytes=%d-", cut)}, "If-Range": {etag}})
	if resp.StatusCode != http.StatusPartialContent {
		t.Fatalf("resumption: %d", resp.StatusCode)
	}
	joined := append(append([]byte(nil), whole[:cut]...), rest...)
	if !bytes.Equal(joined, whole) {
		t.Fatal("the joined download differs")
	}
	berthtest.UnzipTest(t, joined)
	resp, narrowed := get(fmt.Sprintf("%s?file_ids=%d", base, file), nil)
	if resp.Header.Get("ETag") == etag || resp.ContentLength != int64(len(narrowed)) || len(narrowed) >= len(whole) {
		t.Errorf("narrowed: ETag %q (whole %q), %d bytes of %d", resp.Header.Get("ETag"), etag, len(narrowed), len(whole))
	}
	berthtest.UnzipTest(t, narrowed)
}

// TestZipBudgetShared: the layouts of the zips being served share one
// budget, and the zips of one requester (a share link, whoever holds
// it; a person) hold at most half of what the others leave. So an
// anonymous holder of a share link who keeps its zips open (reads them
// slowly, or opens many at once) is refused once the link's zips hold
// their share, and every other requester's zip is served meanwhile: the
// same organization's persons, its administrator, another
// organization's person, another person's link. With the budget alone,
// the one holder kept every other zip of the server at 503. The link's
// maker's other links and own zips are one group with it, held to the
// same half, since a person makes as many links as they like. Access is unchanged
// (anonymous: 401; another organization's person: 404), the holder's
// zips give their share back when its client goes away, and a zip of
// half the budget, the most one requester may hold, is served again
// once they have.
func TestZipBudgetShared(t *testing.T) {
	// Each folder zipped holds one file of a five-byte name, an entry of
	// entry bytes; the budget holds eight, a requester's zips four.
	const entry = vfs.ZipEntryCost + 5
	f := newFixtureWith(t, fixtureOptions{ZipBudget: 8 * entry})
	ctx := context.Background()
	// The link's folder holds a file larger than what the connection
	// buffers, so that an answer not read holds its zip open.
	big := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "big")
	bigFile := f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", big.ID), "b.bin", berthtest.RandomBytes(3, 16<<20))
	small := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "small")
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", small.ID), "s.txt", []byte("small"))
	lone := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "lone")
	for i := range 4 {
		f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", lone.ID), fmt.Sprintf("%d.txt", i), []byte("lone"))
	}
	held := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", big.ID), nil)
	other := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", small.ID), nil)
	lonely := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", lone.ID), nil)
	linkZip := func(l linkJSON) string { return "/api/2/sharelinks/" + l.Hash + "/download" }

	// Persons with a folder of one small file each in their own root: a
	// plain person and the administrator of alice's organization, and a
	// person of another.
	person := func(org uint64, name string, admin bool) (tok, zip, folder string) {
		root, err := f.fs.CreateRoot(ctx, name, vfs.RootSync)
		if err != nil {
			t.Fatal(err)
		}
		tok = f.personToken(account.PersonInput{OrganizationID: org, Username: name,
			Email: name + "@example.com", Password: fixturePassword, Admin: admin, RootID: root.ID})
		d, err := f.fs.Mkdir(ctx, root.ID, root.FolderID, "d", vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.fs.WriteFile(ctx, root.ID, d.ID, "x.txt", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		folder = fmt.Sprintf("/api/2/files/%d/folder/%d", root.ID, d.ID)
		return tok, folder + "/download", folder
	}
	plainTok, plainZip, plainFolder := person(f.org.ID, "bob", false)
	adminTok, adminZip, _ := person(f.org.ID, "carol", true)
	globex, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	tenantTok, tenantZip, _ := person(globex.ID, "dave", false)
	// A link of bob's: another maker's.
	var bobs linkJSON
	st, body := f.readAll(f.request(http.MethodPost, plainFolder+"/share", plainTok, strings.NewReader(""),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}))
	if st != http.StatusOK {
		t.Fatalf("bob's link: %d %s", st, body)
	}
	decode(t, body, &bobs)

	// hold opens zips of the held link until one is refused, and leaves
	// the answers unread; stop cancels them, as a client that goes away.
	// Each chooses its file and a folder that is not there, another
	// archive of the same entry each time: zips of the same archive
	// share one layout.
	hold := func() (stop func()) {
		t.Helper()
		hctx, cancel := context.WithCancel(ctx)
		var bodies []io.Closer
		stop = func() {
			cancel()
			for _, b := range bodies {
				b.Close()
			}
		}
		for i := 0; ; i++ {
			req, err := http.NewRequestWithContext(hctx, http.MethodGet, f.url(fmt.Sprintf("%s?file_ids=%d&folder_ids=%d", linkZip(held), bigFile.ID, 1<<40+i)), nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := f.client.Do(req)
			if err != nil {
				stop()
				t.Fatal(err)
			}
			if resp.StatusCode == http.StatusOK {
				bodies = append(bodies, resp.Body)
				continue
			}
			st, body := f.readAll(resp)
			wantError(t, st, body, http.StatusServiceUnavailable, "temporarily_unavailable")
			if i != 4 {
				stop()
				t.Fatalf("the link's holder held %d zips of one entry before a refusal; its share is 4", i)
			}
			return stop
		}
	}

	// free waits until a zip of half the budget, the lonely link's, is
	// served: every zip of the held link has given its share back. The
	// server sees a client gone once its write fails, so that comes
	// some time after the client went.
	free := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			st, body := f.readAll(f.request(http.MethodGet, linkZip(lonely), "", nil, nil))
			if st == http.StatusOK {
				berthtest.UnzipTest(t, body)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: a zip of half the budget, the holder gone: %d %s", what, st, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	stop := hold()
	for _, c := range []struct {
		name, path, token string
		status            int
		code              string
	}{
		{"the held link's other holders share its part", linkZip(held), "", 503, "temporarily_unavailable"},
		// The maker's other links are one group with the held link,
		// held to the same half: a person makes as many links as they
		// like, and each link alone a requester of its own let them take
		// all but a sliver of the budget.
		{"another link of the same maker", linkZip(other), "", 503, "temporarily_unavailable"},
		{"the link's maker, her own folder", f.zipURL(small.ID), f.token, 200, ""},
		{"another maker's link", linkZip(bobs), "", 200, ""},
		{"a plain person of the organization", plainZip, plainTok, 200, ""},
		{"the organization's administrator", adminZip, adminTok, 200, ""},
		{"a person of another organization", tenantZip, tenantTok, 200, ""},
		{"anonymous, a folder route", f.zipURL(small.ID), "", 401, "access_denied"},
		{"another organization's person, alice's folder", f.zipURL(small.ID), tenantTok, 404, "not_found"},
	} {
		st, body := f.readAll(f.request(http.MethodGet, c.path, c.token, nil, nil))
		if c.code != "" {
			wantError(t, st, body, c.status, c.code)
			continue
		}
		if st != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
			continue
		}
		berthtest.UnzipTest(t, body)
	}
	stop()
	free("the holder gone")

	// Held and let go again and again, the link's zips give back all they
	// held: after each round a zip of half the budget, which needs every
	// other's given back, is served.
	for round := range 4 {
		hold()()
		free(fmt.Sprint("round ", round))
	}
}

// TestZipSegmentsShareALayout: a download fetched in parallel segments
// (aria2c -x16, a download manager, a browser resuming) is 16 Range
// requests at once for one archive, of one requester: they share one
// layout, so every segment is answered (206) under a budget that holds
// two copies of it in no requester's share, and the segments joined are
// the whole archive, which unzip tests. Each request laid out its own
// copy before, and the second of them was busy (503) however the budget
// was set for the largest folder. Over the folder route, and over a
// share link's, whose counted downloads commit between the segments.
func TestZipSegmentsShareALayout(t *testing.T) {
	const files, segments = 1000, 16
	// The folder's entries: files of names of 9 bytes, and big.bin.
	layout := int64(files)*(vfs.ZipEntryCost+9) + vfs.ZipEntryCost + 7
	f := newFixtureWith(t, fixtureOptions{ZipBudget: 3 * layout})
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "many")
	for i := range files {
		if _, err := f.fs.WriteFile(ctx, f.root.ID, d.ID, fmt.Sprintf("f%04d.txt", i), strings.NewReader(fmt.Sprint(i)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Large enough that a segment not read yet holds its answer open.
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "big.bin", berthtest.RandomBytes(7, 32<<20))
	link := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", d.ID), nil)
	for _, row := range []struct {
		name, path, token string
	}{
		{"folder route", f.zipURL(d.ID), f.token},
		{"share link", "/api/2/sharelinks/" + link.Hash + "/download", ""},
	} {
		t.Run(row.name, func(t *testing.T) {
			send := func(h http.Header) (*http.Response, error) {
				req, err := http.NewRequest(http.MethodGet, f.url(row.path), nil)
				if err != nil {
					return nil, err
				}
				maps.Copy(req.Header, h)
				if row.token != "" {
					req.Header.Set("Authorization", "Bearer "+row.token)
				}
				return f.client.Do(req)
			}
			resp, err := send(nil)
			if err != nil {
				t.Fatal(err)
			}
			st, whole := f.readAll(resp)
			etag := resp.Header.Get("ETag")
			if st != http.StatusOK || int64(len(whole)) != resp.ContentLength {
				t.Fatalf("whole: %d, %d bytes of %d", st, len(whole), resp.ContentLength)
			}
			type part struct {
				status       int
				contentRange string
				body         []byte
				err          error
			}
			parts := make([]part, segments)
			var headers, done sync.WaitGroup
			all := make(chan struct{})
			size := len(whole)
			for i := range segments {
				from, to := i*size/segments, (i+1)*size/segments-1
				headers.Add(1)
				done.Go(func() {
					resp, err := send(http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", from, to)}, "If-Range": {etag}})
					headers.Done()
					if err != nil {
						parts[i].err = err
						return
					}
					defer resp.Body.Close()
					<-all // every segment's answer begun before any is read
					parts[i].status, parts[i].contentRange = resp.StatusCode, resp.Header.Get("Content-Range")
					parts[i].body, parts[i].err = io.ReadAll(resp.Body)
				})
			}
			headers.Wait()
			close(all)
			done.Wait()
			var joined []byte
			for i, p := range parts {
				from, to := i*size/segments, (i+1)*size/segments-1
				if want := fmt.Sprintf("bytes %d-%d/%d", from, to, size); p.err != nil || p.status != http.StatusPartialContent || p.contentRange != want {
					t.Fatalf("segment %d: %v, %d %q %.200s, want 206 %q", i, p.err, p.status, p.contentRange, p.body, want)
				}
				joined = append(joined, p.body...)
			}
			if !bytes.Equal(joined, whole) {
				t.Fatalf("the %d segments joined (%d bytes) differ from the whole archive (%d)", segments, len(joined), size)
			}
			berthtest.UnzipTest(t, joined)
		})
	}
}
