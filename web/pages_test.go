package web_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/share"
	"berth/vfs"
	"berth/web"
)

func ptr[T any](v T) *T { return &v }

// TestPages walks the pages' answers: status, type and what they show.
func TestPages(t *testing.T) {
	s := newSite(t)
	_, fileURL := s.link(t, s.file, share.LinkSettings{})
	_, folderURL := s.link(t, s.docs, share.LinkSettings{})
	_, expiredURL := s.link(t, s.file, share.LinkSettings{Expires: ptr("2020-01-01")})
	_, loginURL := s.link(t, s.file, share.LinkSettings{LoginRequired: ptr(true)})
	_, noReadURL := s.link(t, s.file, share.LinkSettings{ReadAccess: ptr(false)})
	other := s.mkfiles(t, "elsewhere", 1)
	// A name with a right-to-left override reads "photoexe.jpg" as is.
	spoof := "photo\u202egpj.exe"
	_, spoofURL := s.link(t, s.write(t, spoof, []byte("MZ")), share.LinkSettings{})
	_, spoofDirURL := s.link(t, s.mkfiles(t, "isolate\u2067d", 0), share.LinkSettings{})
	// 999,960 bytes is 999.96 KB, which one decimal rounds up to the next unit.
	_, roundsUpURL := s.link(t, s.write(t, "almost.bin", make([]byte, 999_960)), share.LinkSettings{})
	id := func(n uint64) string { return strconv.FormatUint(n, 10) }
	tests := []struct {
		name   string
		url    string
		status int
		ctype  string
		want   []string
		absent []string
	}{
		{"file page", fileURL, 200, "text/html; charset=utf-8", []string{"report.pdf", "48 B", `href="/s/`, "/download"}, nil},
		{"file download", fileURL + "/download", 200, "application/pdf", []string{fileBody}, nil},
		{"folder page", folderURL, 200, "text/html; charset=utf-8", []string{"notes.txt", "sub/", "?folder=" + id(s.sub.ID), "Download all (zip)"}, nil},
		{"subfolder page", folderURL + "?folder=" + id(s.sub.ID), 200, "text/html; charset=utf-8", []string{"deep.txt", ">docs</a>", "/download?folder=" + id(s.sub.ID)}, []string{"notes.txt"}},
		{"user content escaped", folderURL + "?folder=" + id(s.docs.ID), 200, "text/html; charset=utf-8", []string{"notes.txt"}, []string{"<script"}},
		{"file of the folder", folderURL + "/file/" + id(s.deep.ID), 200, "text/plain; charset=utf-8", []string{"deep down"}, nil},
		{"folder outside the share", folderURL + "?folder=" + id(other.ID), 404, "text/html; charset=utf-8", []string{"Link not found"}, nil},
		{"file outside the share", folderURL + "/file/" + id(s.file.ID), 404, "text/html; charset=utf-8", nil, nil},
		{"folder id of a file", folderURL + "?folder=" + id(s.notes.ID), 404, "text/html; charset=utf-8", nil, nil},
		{"bad folder id", folderURL + "?folder=abc", 404, "text/html; charset=utf-8", nil, nil},
		{"bad page", folderURL + "?page=0", 400, "text/html; charset=utf-8", []string{"Bad address"}, nil},
		{"page past the end", folderURL + "?page=2", 400, "text/html; charset=utf-8", nil, nil},
		{"file link has no files", fileURL + "/file/" + id(s.file.ID), 404, "text/html; charset=utf-8", nil, nil},
		{"wrong hash", s.srv.URL + "/s/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 404, "text/html; charset=utf-8", []string{"Link not found"}, nil},
		{"link id instead of hash", s.srv.URL + "/s/1", 404, "text/html; charset=utf-8", nil, nil},
		{"nothing there", s.srv.URL + "/s/", 404, "text/html; charset=utf-8", nil, nil},
		{"expired", expiredURL, 410, "text/html; charset=utf-8", []string{"Link expired"}, nil},
		{"expired download", expiredURL + "/download", 410, "text/html; charset=utf-8", nil, nil},
		{"login required", loginURL, 401, "text/html; charset=utf-8", []string{"Sign-in required"}, nil},
		{"no read access: page", noReadURL, 200, "text/html; charset=utf-8", []string{"report.pdf"}, []string{"/download"}},
		{"no read access: download", noReadURL + "/download", 403, "text/html; charset=utf-8", nil, nil},
		{"name reordered by an override: file page", spoofURL, 200, "text/html; charset=utf-8", []string{"photo\ufffdgpj.exe</h1>", "<title>photo\ufffdgpj.exe"}, []string{"\u202e"}},
		{"name reordered by an isolate: folder page", spoofDirURL, 200, "text/html; charset=utf-8", []string{"isolate\ufffdd</h1>"}, []string{"\u2067"}},
		{"a size that rounds up to the next unit", roundsUpURL, 200, "text/html; charset=utf-8", []string{">1.0 MB<"}, []string{"1000.0"}},
		{"style sheet", s.srv.URL + "/s/static/style.css", 200, "text/css; charset=utf-8", []string{"body{"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := get(t, tt.url)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.ctype {
				t.Errorf("Content-Type %q, want %q", got, tt.ctype)
			}
			checkBody(t, body, tt.want, tt.absent)
		})
	}
}

// TestStyleSheet: a page links its style sheet at a URL that names the
// sheet's version, kept a year without revalidation (immutable); the URL
// without a version, which pages of old link, still answers the sheet,
// briefly kept. It was the only URL, kept an hour, so a deploy left
// browsers on the old style that long.
func TestStyleSheet(t *testing.T) {
	s := newSite(t)
	_, fileURL := s.link(t, s.file, share.LinkSettings{})
	_, page := get(t, fileURL)
	m := regexp.MustCompile(`<link rel="stylesheet" href="(/s/static/style\.([0-9a-f]{16})\.css)">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page links no versioned style sheet:\n%s", page)
	}
	_, old := get(t, s.srv.URL+"/s/static/style.css")
	sum := sha256.Sum256([]byte(old))
	if version := hex.EncodeToString(sum[:8]); m[2] != version {
		t.Errorf("style sheet version %s, want %s (the sheet's)", m[2], version)
	}
	etag := `"` + m[2] + `"`
	for _, tc := range []struct {
		name, path string
		hdr        []string
		status     int
		cache      string
		body       bool
	}{
		{"versioned", m[1], nil, 200, "public, max-age=31536000, immutable", true},
		{"versioned, revalidated", m[1], []string{"If-None-Match", etag}, 304, "public, max-age=31536000, immutable", false},
		{"without a version", "/s/static/style.css", nil, 200, "public, max-age=300", true},
		{"without a version, revalidated", "/s/static/style.css", []string{"If-None-Match", etag}, 304, "public, max-age=300", false},
		{"another version", "/s/static/style.0123456789abcdef.css", nil, 404, "no-store", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, s.srv.URL+tc.path, nil)
			for i := 0; i+1 < len(tc.hdr); i += 2 {
				req.Header.Set(tc.hdr[i], tc.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, body)
			}
			if got := resp.Header.Get("Cache-Control"); got != tc.cache {
				t.Errorf("Cache-Control %q, want %q", got, tc.cache)
			}
			if tc.status == 404 {
				return
			}
			if got := resp.Header.Get("ETag"); got != etag {
				t.Errorf("ETag %q, want %q", got, etag)
			}
			if tc.body && (body != old || resp.Header.Get("Content-Type") != "text/css; charset=utf-8") {
				t.Errorf("%s, %d bytes; want the sheet, text/css", resp.Header.Get("Content-Type"), len(body))
			}
		})
	}
}

// TestSecurityHeaders checks every kind of answer carries the headers,
// and downloads are sandboxed attachments.
func TestSecurityHeaders(t *testing.T) {
	s := newSite(t)
	_, fileURL := s.link(t, s.file, share.LinkSettings{})
	_, folderURL := s.link(t, s.docs, share.LinkSettings{})
	for _, u := range []string{fileURL, fileURL + "/download", folderURL, folderURL + "/download",
		folderURL + "/file/" + strconv.FormatUint(s.notes.ID, 10), folderURL + "/file/" + strconv.FormatUint(s.html.ID, 10), s.srv.URL + "/s/nope-nope-nope-nope-nope", s.srv.URL + "/s/static/style.css"} {
		resp, _ := get(t, u)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.Contains(csp, "frame-ancestors 'none'") || strings.Contains(csp, "unsafe-inline") {
			t.Errorf("%s: CSP %q", u, csp)
		}
		for k, v := range map[string]string{
			"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
			"Strict-Transport-Security": "max-age=31536000", "X-Frame-Options": "DENY",
			// A link posted where a crawler reads it is still no page
			// for a search engine to list, nor its files.
			"X-Robots-Tag": "noindex, nofollow",
		} {
			if h.Get(k) != v {
				t.Errorf("%s: %s %q, want %q", u, k, h.Get(k), v)
			}
		}
		if strings.Contains(u, "download") || strings.Contains(u, "/file/") {
			if !strings.HasPrefix(h.Get("Content-Disposition"), "attachment") || !strings.Contains(csp, "sandbox") {
				t.Errorf("%s: a download must be a sandboxed attachment: %q, CSP %q", u, h.Get("Content-Disposition"), csp)
			}
		} else if !strings.HasPrefix(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'sha256-") || strings.Contains(csp, "script-src 'self'") {
			t.Errorf("%s: page CSP %q", u, csp)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, fileURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Content-Security-Policy") == "" {
		t.Errorf("POST: %d, CSP %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
}

// TestDownloadLimit counts the page's downloads through share, so the
// limit set over REST holds here: two downloads, then the limit page;
// resuming with a Range counts as below.
func TestDownloadLimit(t *testing.T) {
	s := newSite(t)
	l, u := s.link(t, s.file, share.LinkSettings{DownloadLimit: ptr(ptr(int64(2)))})
	for i := range 2 {
		if resp, body := get(t, u+"/download"); resp.StatusCode != 200 || body != fileBody {
			t.Fatalf("download %d: %d %q", i, resp.StatusCode, body)
		}
	}
	resp, body := get(t, u+"/download")
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "Download limit reached") {
		t.Errorf("third download: %d %s", resp.StatusCode, body)
	}
	get(t, u) // a view
	got, err := s.shares.ManagedLink(context.Background(), s.alice, strconv.FormatUint(l.ID, 10))
	if err != nil {
		t.Fatal(err)
	}
	if got.TimesDownloaded != 2 || got.TimesViewed != 1 {
		t.Errorf("times_downloaded %d, times_viewed %d; want 2, 1", got.TimesDownloaded, got.TimesViewed)
	}
	// Under a limit, a range that does not start at 0 resumes a counted
	// download free, up to the content once per download; past that it
	// counts as the share it sends (bytes=10- is 38 of 48 bytes), so
	// ranges that leave byte 0 out are bounded by the limit as well:
	// they were all served, uncounted, while the limit was not used up.
	// The credit is for the content downloaded: a subfolder's zip, or a
	// file of 25 bytes, bought a free copy of the folder's zip or of a
	// file of 52, sent in halves from byte 1.
	ids := strings.NewReplacer("{sub}", fmt.Sprint(s.sub.ID), "{notes}", fmt.Sprint(s.notes.ID), "{html}", fmt.Sprint(s.html.ID))
	type req struct {
		path string // under the link's page ({sub}, {notes}, {html}: ids)
		// "" for the whole; "half1", "half2": bytes=1-N/2 and
		// bytes=N/2+1- of the N bytes path has
		rng  string
		want int
	}
	for _, tt := range []struct {
		name  string
		item  vfs.Node
		limit int64
		reqs  []req
	}{
		{"no download first, limit 1", s.file, 1, []req{{"/download", "bytes=10-", 206}, {"/download", "bytes=10-", 403}, {"/download", "bytes=10-", 403}}},
		{"a download first, limit 2", s.file, 2, []req{{"/download", "", 200}, {"/download", "bytes=10-", 206}, {"/download", "bytes=10-", 206}, {"/download", "bytes=10-", 403}}},
		{"a subfolder's zip, then the folder's from byte 1, limit 1", s.docs, 1, []req{{"/download?folder={sub}", "", 200}, {"/download", "half1", 403}, {"/download", "half2", 403}}},
		{"a subfolder's zip, then the folder's from byte 1, limit 2", s.docs, 2, []req{{"/download?folder={sub}", "", 200}, {"/download", "half1", 206}, {"/download", "half2", 206}, {"/download?folder={sub}", "", 403}}},
		{"a file of a folder, then a larger one from byte 1, limit 1", s.docs, 1, []req{{"/file/{notes}", "", 200}, {"/file/{html}", "half1", 403}, {"/file/{html}", "half2", 403}}},
		{"a file of a folder from byte 1 in halves after its download, limit 1", s.docs, 1, []req{{"/file/{html}", "", 200}, {"/file/{html}", "half1", 206}, {"/file/{html}", "half2", 206}, {"/file/{notes}", "half1", 403}}},
		{"a file of a folder cut at 60% and resumed, then another, limit 1", s.docs, 1, []req{{"/file/{html}", "bytes=0-30", 206}, {"/file/{html}", "bytes=31-", 206}, {"/file/{notes}", "bytes=1-", 403}, {"/file/{html}", "bytes=31-", 206}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, u := s.link(t, tt.item, share.LinkSettings{DownloadLimit: ptr(ptr(tt.limit))})
			for i, q := range tt.reqs {
				path := u + ids.Replace(q.path)
				req, _ := http.NewRequest(http.MethodGet, path, nil)
				switch q.rng {
				case "":
				case "half1", "half2":
					resp, err := http.Head(path)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					half := resp.ContentLength / 2
					req.Header.Set("Range", fmt.Sprintf("bytes=1-%d", half))
					if q.rng == "half2" {
						req.Header.Set("Range", fmt.Sprintf("bytes=%d-", half+1))
					}
				default:
					req.Header.Set("Range", q.rng)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body := readAll(t, resp)
				if resp.StatusCode != q.want {
					t.Errorf("request %d (%s %q): %d, want %d", i, q.path, q.rng, resp.StatusCode, q.want)
				}
				if q.path == "/download" && q.rng == "" && tt.item.ID == s.file.ID && q.want == 200 && body != fileBody {
					t.Errorf("download: %q", body)
				}
			}
		})
	}
}

// TestZip fetches the zip of a subfolder and of the shared folder.
func TestZip(t *testing.T) {
	s := newSite(t)
	_, u := s.link(t, s.docs, share.LinkSettings{})
	for _, tt := range []struct {
		url   string
		files []string
	}{
		{u + "/download", []string{"notes.txt", "sub/deep.txt"}},
		{u + "/download?folder=" + strconv.FormatUint(s.sub.ID, 10), []string{"deep.txt"}},
	} {
		resp, body := get(t, tt.url)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/zip" {
			t.Fatalf("%s: %d %s", tt.url, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		if resp.Header.Get("Content-Length") != strconv.Itoa(len(body)) || resp.Header.Get("ETag") == "" {
			t.Errorf("%s: Content-Length %q for %d bytes, ETag %q", tt.url, resp.Header.Get("Content-Length"), len(body), resp.Header.Get("ETag"))
		}
		names := zipNames(t, []byte(body))
		for _, f := range tt.files {
			if !strings.Contains(strings.Join(names, "\n"), f) {
				t.Errorf("%s: zip %v lacks %s", tt.url, names, f)
			}
		}
	}
}

// TestZipShared: a link's zips, from its page as from the API, hold at
// most their share of the budget of zips being served (vfs.ZipBudget):
// a holder of one link who keeps its zips open (answers left unread) is
// answered the Busy page once they hold it, as are the zips of the
// maker's other links (one group), and another maker's link's zip is
// served meanwhile. Let go, the link's zips are served again.
func TestZipShared(t *testing.T) {
	const entry = vfs.ZipEntryCost + 5 // a file of a five-byte name
	s := newSiteWith(t, berthtest.Options{ZipBudget: 8 * entry})
	ctx := context.Background()
	wo := share.WriteOptions(s.alice)
	folder := func(name, file string, size int) vfs.Node {
		d, err := s.st.FS.Mkdir(ctx, s.root.ID, s.root.FolderID, name, wo)
		if err != nil {
			t.Fatal(err)
		}
		// Larger than the connection buffers: an answer not read holds
		// its zip open.
		if _, err := s.st.FS.WriteFile(ctx, s.root.ID, d.ID, file, bytes.NewReader(berthtest.RandomBytes(1, size)), wo); err != nil {
			t.Fatal(err)
		}
		return d
	}
	// The held link's folder holds folders of one large file each: each
	// zipped apart is another archive (zips of the same archive share
	// one layout).
	bigDir, err := s.st.FS.Mkdir(ctx, s.root.ID, s.root.FolderID, "big", wo)
	if err != nil {
		t.Fatal(err)
	}
	var subs []string
	for i := range 5 {
		d := folder(fmt.Sprint("s", i), "b.bin", 16<<20)
		if _, err := s.st.FS.Move(ctx, s.root.ID, d.ID, bigDir.ID, "", wo); err != nil {
			t.Fatal(err)
		}
		subs = append(subs, "?folder="+strconv.FormatUint(d.ID, 10))
	}
	_, held := s.link(t, bigDir, share.LinkSettings{})
	l2, other := s.link(t, folder("small", "s.txt", 5), share.LinkSettings{})
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var bodies []io.Closer
	for i := 0; ; i++ {
		req, err := http.NewRequestWithContext(hctx, http.MethodGet, held+"/download"+subs[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusOK {
			bodies = append(bodies, resp.Body)
			continue
		}
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusServiceUnavailable || i != 4 {
			t.Fatalf("zip %d of the held link: %d, want 503 after 4 held", i, resp.StatusCode)
		}
		checkBody(t, body, []string{"Busy"}, nil)
		break
	}
	// Alice's other link is one group with the held one (her links,
	// held to one half); bob's link is not.
	if resp, _ := get(t, other+"/download"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("another link of the same maker beside the held one: %d, want 503", resp.StatusCode)
	}
	bob, bobRoot, _ := s.st.AddPerson(t, "bob", "correct horse battery")
	bc, err := s.st.Accounts.Caller(ctx, bob.ID)
	if err != nil {
		t.Fatal(err)
	}
	bd, err := s.st.FS.Mkdir(ctx, bobRoot.ID, bobRoot.FolderID, "b", share.WriteOptions(bc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.st.FS.WriteFile(ctx, bobRoot.ID, bd.ID, "b.txt", strings.NewReader("bob's"), share.WriteOptions(bc)); err != nil {
		t.Fatal(err)
	}
	bl, err := s.shares.CreateLink(ctx, bc, bobRoot.ID, bd.ID, true, share.LinkSettings{})
	if err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, strings.TrimSuffix(other, l2.Hash)+bl.Hash+"/download")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("another maker's link's zip beside the held one: %d", resp.StatusCode)
	}
	berthtest.UnzipTest(t, []byte(body))
	cancel()
	for _, b := range bodies {
		b.Close()
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(held + "/download" + subs[0])
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close() // its status says the layout fitted
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the held link's zip, its holder gone: %d", resp.StatusCode)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func zipNames(t *testing.T, b []byte) []string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range zr.File {
		names = append(names, f.Name)
	}
	return names
}

// TestPaging lists a folder of 250 files over three pages of 100.
func TestPaging(t *testing.T) {
	s := newSite(t)
	d := s.mkfiles(t, "many", 250)
	_, u := s.link(t, d, share.LinkSettings{})
	for _, tt := range []struct {
		page        string
		rows        int
		first, last string
		prev, next  bool
	}{
		{"", 100, "f000.txt", "f099.txt", false, true},
		{"?page=2", 100, "f100.txt", "f199.txt", true, true},
		{"?page=3", 50, "f200.txt", "f249.txt", true, false},
	} {
		resp, body := get(t, u+tt.page)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", tt.page, resp.StatusCode)
		}
		if n := strings.Count(body, `class="file"`); n != tt.rows {
			t.Errorf("%s: %d rows", tt.page, n)
		}
		if !strings.Contains(body, tt.first) || !strings.Contains(body, tt.last) {
			t.Errorf("%s: lacks %s or %s", tt.page, tt.first, tt.last)
		}
		if strings.Contains(body, `id="prev"`) != tt.prev || strings.Contains(body, `id="next"`) != tt.next {
			t.Errorf("%s: prev/next links wrong", tt.page)
		}
	}
}

// TestPagingLargeFolder: a folder of more items than a page sorts whole
// (web.SetSmallFolder, 5,000 in earnest) is listed by name as stored, a
// page at a time from the name its Next link carries, with a link back to
// its first page; bad cursors are 400. Folders mix with files there.
func TestPagingLargeFolder(t *testing.T) {
	s := newSite(t)
	web.SetSmallFolder(t, 200) // a small folder had 2 pages at most
	d := s.mkfiles(t, "many", 250)
	if _, err := s.st.FS.Mkdir(context.Background(), s.root.ID, d.ID, "f150.dir", share.WriteOptions(s.alice)); err != nil {
		t.Fatal(err)
	}
	_, u := s.link(t, d, share.LinkSettings{})
	next := regexp.MustCompile(`id="next" href="([^"]+)"`)
	origin := u[:strings.Index(u, "/s/")]
	at := u
	for _, tt := range []struct {
		rows, dirs  int
		first, last string
		back, more  bool
	}{
		{100, 0, "f000.txt", "f099.txt", false, true},
		{100, 1, "f100.txt", "f198.txt", true, true},
		{51, 0, "f199.txt", "f249.txt", true, false},
	} {
		resp, body := get(t, at)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", at, resp.StatusCode)
		}
		if n, dirs := strings.Count(body, `class="file"`)+strings.Count(body, `class="folder"`), strings.Count(body, `class="folder"`); n != tt.rows || dirs != tt.dirs {
			t.Errorf("%s: %d rows, %d folders; want %d, %d", at, n, dirs, tt.rows, tt.dirs)
		}
		if !strings.Contains(body, tt.first) || !strings.Contains(body, tt.last) {
			t.Errorf("%s: lacks %s or %s", at, tt.first, tt.last)
		}
		if strings.Contains(body, `id="first"`) != tt.back || strings.Contains(body, `id="prev"`) {
			t.Errorf("%s: first-page or previous link wrong", at)
		}
		m := next.FindStringSubmatch(body)
		if (m != nil) != tt.more {
			t.Fatalf("%s: next link %v, want %v", at, m != nil, tt.more)
		}
		if m != nil {
			at = origin + html.UnescapeString(m[1])
		}
	}
	// A numbered page, from a link followed while the folder was small,
	// is its items by name still.
	if resp, body := get(t, u+"?page=2"); resp.StatusCode != 200 || !strings.Contains(body, "f100.txt") || !strings.Contains(body, "f198.txt") ||
		strings.Contains(body, "f099.txt") || !strings.Contains(body, `id="first"`) || !strings.Contains(body, `?after=f198.txt`) {
		t.Errorf("?page=2 of a large folder: %d", resp.StatusCode)
	}
	// A page number no small folder had (the third, here) is no link
	// followed while it was: reading through the pages before it would
	// cost an anonymous visitor's request the whole of a large folder.
	for _, q := range []string{"?page=3", "?page=4", "?page=99999999999", "?after=a%2Fb", "?after=f100.txt&page=2", "?after=" + strings.Repeat("x", 300)} {
		if resp, _ := get(t, u+q); resp.StatusCode != 400 {
			t.Errorf("%s: %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestDownloadConditions: a link's download of a file whose two revisions
// were written within one second, so share Last-Modified. A date proves
// the visitor's copy current only when the revision was written before
// the second it names: the old revision's date was 304, and the browser
// kept the old file as current. The ETag decides as before.
func TestDownloadConditions(t *testing.T) {
	s := newSite(t)
	t0, old, cur := berthtest.SameSecond(t, s.st.FS, s.root.ID, s.root.FolderID, "d.txt", "old", "new", share.WriteOptions(s.alice))
	_, u := s.link(t, cur, share.LinkSettings{})
	lm := t0.UTC().Format(http.TimeFormat)
	next := t0.Add(time.Second).UTC().Format(http.TimeFormat)
	for _, tt := range []struct {
		name    string
		headers map[string]string
		status  int
		body    string
	}{
		{"the old revision's date sends the new one", map[string]string{"If-Modified-Since": lm}, 200, "new"},
		{"the next second proves it current", map[string]string{"If-Modified-Since": next}, 304, ""},
		{"the old ETag sends the new revision", map[string]string{"If-None-Match": old.ETag()}, 200, "new"},
		{"the ETag is 304 whatever the date", map[string]string{"If-None-Match": cur.ETag(), "If-Modified-Since": lm}, 304, ""},
		{"If-Unmodified-Since the old revision's date is 412", map[string]string{"If-Unmodified-Since": lm}, 412, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := getWith(t, u+"/download", tt.headers)
			if resp.StatusCode != tt.status || tt.status != 412 && body != tt.body {
				t.Fatalf("%d %q, want %d %q", resp.StatusCode, body, tt.status, tt.body)
			}
			if tt.status == 304 && resp.Header.Get("ETag") != cur.ETag() {
				t.Errorf("ETag %q, want %q", resp.Header.Get("ETag"), cur.ETag())
			}
		})
	}
}

// TestDownloadCountRanges counts by the REST API's rule, for a file and a
// folder's zip alike: any answer that may hold byte 0 is a download;
// resuming and 304 are not.
func TestDownloadCountRanges(t *testing.T) {
	s := newSite(t)
	tests := []struct {
		name    string
		headers map[string]string
		status  int
		counted int64
		zip     bool
	}{
		{"whole", nil, 200, 1, false},
		{"resume", map[string]string{"Range": "bytes=10-"}, 206, 0, false},
		{"suffix", map[string]string{"Range": "bytes=-5"}, 206, 1, false},
		{"a later part from 0", map[string]string{"Range": "bytes=10-12,0-3"}, 206, 1, false},
		{"If-Range of another tag", map[string]string{"Range": "bytes=10-", "If-Range": `"other"`}, 200, 1, false},
		{"not modified", map[string]string{"If-None-Match": "*"}, 304, 0, false},
		{"If-Match of another tag", map[string]string{"If-Match": `"other"`}, 412, 0, false},
		{"zip: If-Match of another tag", map[string]string{"If-Match": `"other"`}, 412, 0, true},
		{"zip: whole", nil, 200, 1, true},
		{"zip: resume", map[string]string{"Range": "bytes=10-"}, 206, 0, true},
		{"zip: suffix", map[string]string{"Range": "bytes=-5"}, 206, 1, true},
		{"zip: If-Range of another tag", map[string]string{"Range": "bytes=10-", "If-Range": `"other"`}, 200, 1, true},
		{"zip: not modified", map[string]string{"If-None-Match": "*"}, 304, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			item := s.file
			if tt.zip {
				item = s.docs
			}
			l, u := s.link(t, item, share.LinkSettings{})
			resp, _ := getWith(t, u+"/download", tt.headers)
			if resp.StatusCode != tt.status {
				t.Errorf("status %d, want %d", resp.StatusCode, tt.status)
			}
			got, err := s.shares.ManagedLink(context.Background(), s.alice, strconv.FormatUint(l.ID, 10))
			if err != nil {
				t.Fatal(err)
			}
			if got.TimesDownloaded != tt.counted {
				t.Errorf("times_downloaded %d, want %d", got.TimesDownloaded, tt.counted)
			}
		})
	}
}
