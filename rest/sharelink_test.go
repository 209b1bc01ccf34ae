package rest

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/httpserve"
	"berth/vfs"
)

// linkFixture is a fixture with a file (contents body) and a folder of
// the fixture person's holding it.
func linkFixture(t *testing.T, o fixtureOptions) (f *fixture, file, folder uint64, body string) {
	t.Helper()
	f = newFixtureWith(t, o)
	body = strings.Repeat("0123456789", 100)
	st, b := f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {"docs"}})
	var v struct {
		ID uint64 `json:"id"`
	}
	if st != 200 {
		t.Fatalf("create_folder: %d %s", st, b)
	}
	decode(t, b, &v)
	folder = v.ID
	st, b = f.upload(f.at("/api/2/files/%d/folder/%d/upload", folder), "a.txt", strings.NewReader(body))
	if st != 200 {
		t.Fatalf("upload: %d %s", st, b)
	}
	decode(t, b, &v)
	return f, v.ID, folder, body
}

type linkJSON struct {
	ID              uint64  `json:"id"`
	Hash            string  `json:"hash"`
	Type            string  `json:"type"`
	URL             string  `json:"url"`
	Expires         *string `json:"expires"`
	LoginRequired   bool    `json:"login_required"`
	DownloadLimit   *int64  `json:"download_limit"`
	TimesDownloaded int64   `json:"times_downloaded"`
	TimesViewed     int64   `json:"times_viewed"`
	CreatorName     string  `json:"creator_name"`
	File            *struct {
		ID uint64 `json:"id"`
	} `json:"file"`
}

func (f *fixture) createLink(t *testing.T, path string, form url.Values) linkJSON {
	t.Helper()
	st, b := f.postForm(path, form)
	if st != 200 {
		t.Fatalf("share: %d %s", st, b)
	}
	var l linkJSON
	decode(t, b, &l)
	return l
}

func (f *fixture) link(t *testing.T, id uint64) linkJSON {
	t.Helper()
	st, b := f.get(fmt.Sprintf("/api/2/sharelinks/%d", id))
	if st != 200 {
		t.Fatalf("get link: %d %s", st, b)
	}
	var l linkJSON
	decode(t, b, &l)
	return l
}

// TestCreateShareLink walks the share routes' inputs.
func TestCreateShareLink(t *testing.T) {
	f, file, folder, _ := linkFixture(t, fixtureOptions{})
	filePath := f.at("/api/2/files/%d/%d/share", file)
	tests := []struct {
		name   string
		path   string
		form   url.Values
		status int
		code   string
	}{
		{"bad date", filePath, url.Values{"expires": {"31.12.2099"}}, 400, "invalid_date_format"},
		{"impossible date", filePath, url.Values{"expires": {"2099-02-30"}}, 400, "invalid_date_format"},
		{"bad limit", filePath, url.Values{"download_limit": {"-1"}}, 400, "invalid_request"},
		{"bad bool", filePath, url.Values{"login_required": {"yes"}}, 400, "invalid_request"},
		{"a folder as a file", f.at("/api/2/files/%d/%d/share", folder), nil, 404, "not_found"},
		{"no such file", f.at("/api/2/files/%d/999999/share"), nil, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := f.postForm(tt.path, tt.form)
			wantError(t, st, b, tt.status, tt.code)
		})
	}
	l := f.createLink(t, filePath, url.Values{"expires": {"2099-12-31"}, "download_limit": {"2"}})
	if l.Type != "file_sharelink" || l.File == nil || l.File.ID != file || l.Expires == nil || *l.Expires != "2099-12-31" ||
		l.DownloadLimit == nil || *l.DownloadLimit != 2 || !strings.HasSuffix(l.URL, "/s/"+l.Hash) || l.CreatorName == "" {
		t.Errorf("file link %+v", l)
	}
	fl := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), nil)
	if fl.Type != "folder_sharelink" {
		t.Errorf("folder link %+v", fl)
	}
	// Update and delete.
	st, b := f.readAll(f.request(http.MethodPut, fmt.Sprintf("/api/2/sharelinks/%d", l.ID), f.token,
		strings.NewReader("download_limit=&expires=null"), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}))
	if st != 200 {
		t.Fatalf("put: %d %s", st, b)
	}
	if u := f.link(t, l.ID); u.DownloadLimit != nil || u.Expires != nil {
		t.Errorf("after update %+v", u)
	}
	st, b = f.readAll(f.request(http.MethodDelete, fmt.Sprintf("/api/2/sharelinks/%d", l.ID), f.token, nil, nil))
	if st != 200 {
		t.Fatalf("delete: %d %s", st, b)
	}
	st, b = f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+l.Hash+"/download", "", nil, nil))
	wantError(t, st, b, 404, "not_found")
}

// TestShareLinkPolicy: user_create_shares off refuses, secure_shares
// forces login_required.
func TestShareLinkPolicy(t *testing.T) {
	pol := account.DefaultPolicy()
	pol.UserCreateShares = false
	f, file, _, _ := linkFixture(t, fixtureOptions{Policy: &pol})
	st, b := f.postForm(f.at("/api/2/files/%d/%d/share", file), nil)
	wantError(t, st, b, 403, "forbidden")

	pol = account.DefaultPolicy()
	pol.SecureShares = true
	f, file, _, _ = linkFixture(t, fixtureOptions{Policy: &pol})
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), url.Values{"login_required": {"false"}})
	if !l.LoginRequired {
		t.Errorf("secure_shares: %+v", l)
	}
	st, b = f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+l.Hash+"/download", "", nil, nil))
	wantError(t, st, b, 401, "access_denied")
	if st, _ := f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+l.Hash+"/download", f.token, nil, nil)); st != 200 {
		t.Errorf("creator through a login_required link: %d", st)
	}
}

// TestShareLinkPolicyLater: a policy set after a link was made reaches
// it (the creator's organization's, or one above it, which the policy
// they act under takes in): user_create_shares off makes the link as
// gone (404) until it is on again; secure_shares on makes it
// login_required, for the creator still open. Before, both bound only
// the links made afterwards: a child's persons' public links outlived a
// parent's withholding sharing.
func TestShareLinkPolicyLater(t *testing.T) {
	for _, tc := range []struct {
		name          string
		set           func(*account.Policy)
		anon, creator int
		code          string // the anonymous caller's error
	}{
		{"user_create_shares off", func(p *account.Policy) { p.UserCreateShares = false }, 404, 404, "not_found"},
		{"secure_shares on", func(p *account.Policy) { p.SecureShares = true }, 401, 200, "access_denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, file, _, _ := linkFixture(t, fixtureOptions{})
			l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), nil)
			path := "/api/2/sharelinks/" + l.Hash + "/download"
			policy := func(set func(*account.Policy)) {
				t.Helper()
				if _, err := f.accounts.UpdatePolicy(context.Background(), f.org.ID, func(p *account.Policy) error { set(p); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			if st, b := f.readAll(f.request(http.MethodGet, path, "", nil, nil)); st != 200 {
				t.Fatalf("before: %d %s", st, b)
			}
			policy(tc.set)
			st, b := f.readAll(f.request(http.MethodGet, path, "", nil, nil))
			wantError(t, st, b, tc.anon, tc.code)
			if st, b := f.readAll(f.request(http.MethodGet, path, f.token, nil, nil)); st != tc.creator {
				t.Errorf("the creator: %d %.200s, want %d", st, b, tc.creator)
			}
			policy(func(p *account.Policy) { *p = account.DefaultPolicy() })
			if st, b := f.readAll(f.request(http.MethodGet, path, "", nil, nil)); st != 200 {
				t.Errorf("with the policy as it was: %d %s", st, b)
			}
		})
	}
}

// TestShareLinkUse walks the use of a link by hash, without a token.
func TestShareLinkUse(t *testing.T) {
	f, file, folder, body := linkFixture(t, fixtureOptions{})
	fl := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), nil)
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), nil)
	old := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), url.Values{"expires": {"2000-01-01"}})
	noRead := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), url.Values{"read_access": {"false"}})
	top := f.root.FolderID
	tests := []struct {
		name        string
		path        string
		status      int
		code        string // for errors
		contains    string // for successes
		disposition string
	}{
		{"file download", "/api/2/sharelinks/" + l.Hash + "/download", 200, "", body, "attachment"},
		{"file view", "/api/2/sharelinks/" + l.Hash + "/view", 200, "", body, "inline"},
		{"folder view", "/api/2/sharelinks/" + fl.Hash + "/view", 404, "not_found", "", ""},
		{"folder zip", "/api/2/sharelinks/" + fl.Hash + "/download", 200, "", "a.txt", "attachment"},
		{"folder zip narrowed", fmt.Sprintf("/api/2/sharelinks/%s/download?file_ids=%d", fl.Hash, file), 200, "", "a.txt", ""},
		{"bad file_ids", "/api/2/sharelinks/" + fl.Hash + "/download?file_ids=x", 400, "invalid_request", "", ""},
		{"folder", "/api/2/sharelinks/" + fl.Hash + "/files?include_children=true", 200, "", `a.txt"`, ""},
		{"children", "/api/2/sharelinks/" + fl.Hash + "/files/children?page=1&page_size=10&sort=size&order=desc", 200, "", `"total":1`, ""},
		{"bad sort", "/api/2/sharelinks/" + fl.Hash + "/files/children?sort=colour", 400, "invalid_request", "", ""},
		{"file in folder", fmt.Sprintf("/api/2/sharelinks/%s/files/%d", fl.Hash, file), 200, "", `a.txt"`, ""},
		{"file in folder download", fmt.Sprintf("/api/2/sharelinks/%s/files/%d/download", fl.Hash, file), 200, "", body, "attachment"},
		{"subfolder zip", fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d/download", fl.Hash, folder), 200, "", "a.txt", ""},
		{"outside the share", fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d", fl.Hash, top), 404, "not_found", "", ""},
		{"outside the share, children", fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d/children", fl.Hash, top), 404, "not_found", "", ""},
		{"by id without a token", fmt.Sprintf("/api/2/sharelinks/%d/download", l.ID), 404, "not_found", "", ""},
		{"unknown hash", "/api/2/sharelinks/nosuchhashatallxyz/download", 404, "not_found", "", ""},
		{"expired", "/api/2/sharelinks/" + old.Hash + "/download", 410, "link_expired", "", ""},
		{"no read access", "/api/2/sharelinks/" + noRead.Hash + "/download", 403, "forbidden", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := f.request(http.MethodGet, tt.path, "", nil, nil)
			cd := resp.Header.Get("Content-Disposition")
			st, b := f.readAll(resp)
			if tt.code != "" {
				wantError(t, st, b, tt.status, tt.code)
				return
			}
			if st != tt.status || !strings.Contains(string(b), tt.contains) {
				t.Fatalf("%d %.200s", st, b)
			}
			if tt.disposition != "" && !strings.HasPrefix(cd, tt.disposition) {
				t.Errorf("Content-Disposition %q, want %s", cd, tt.disposition)
			}
			// What a browser shows of a shared file (a view of an
			// .html) runs nothing on berth's origin.
			if tt.disposition != "" && resp.Header.Get("Content-Security-Policy") != httpserve.DownloadCSP {
				t.Errorf("Content-Security-Policy %q", resp.Header.Get("Content-Security-Policy"))
			}
		})
	}
	if got := f.link(t, l.ID); got.TimesDownloaded != 1 || got.TimesViewed != 1 {
		t.Errorf("file link counted %d downloads, %d views; want 1 and 1", got.TimesDownloaded, got.TimesViewed)
	}
}

// TestShareLinkChildrenPaging: a link's children, paged by every sort and
// order, are the pages of the whole listing sorted, whichever way the
// page is chosen (read as stored for name ascending, the best lo+size
// kept otherwise); past maxSortedWindow of a larger folder a sort other
// than by name ascending is 400, and name ascending pages on. Each view
// read the whole folder into memory and sorted it before.
func TestShareLinkChildrenPaging(t *testing.T) {
	f, _, folder, _ := linkFixture(t, fixtureOptions{})
	ctx := context.Background()
	for i := range 39 {
		// Sizes repeat, so ties fall to the name; names interleave.
		name := fmt.Sprintf("%c%02d.bin", "zAmb"[i%4], i)
		if _, err := f.fs.WriteFile(ctx, f.root.ID, folder, name, strings.NewReader(strings.Repeat("x", (i*7)%5)), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	fl := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), nil)
	all, _, err := f.fs.List(ctx, f.root.ID, folder)
	if err != nil || len(all) != 40 {
		t.Fatalf("%d children, %v", len(all), err)
	}
	type page struct {
		MaxPage int `json:"max_page"`
		Total   int `json:"total"`
		Results []struct {
			Path string `json:"path"`
		} `json:"results"`
	}
	get := func(q string) (int, page, []byte) {
		st, b := f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+fl.Hash+"/files/children?"+q, "", nil, nil))
		var p page
		if st == 200 {
			decode(t, b, &p)
		}
		return st, p, b
	}
	sorts := map[string]func(a, b vfs.Node) int{
		"name": func(a, b vfs.Node) int { return strings.Compare(a.Name, b.Name) },
		"size": func(a, b vfs.Node) int { return cmp.Or(cmp.Compare(a.Size, b.Size), strings.Compare(a.Name, b.Name)) },
		"modified": func(a, b vfs.Node) int {
			return cmp.Or(a.Modified.Compare(b.Modified), strings.Compare(a.Name, b.Name))
		},
	}
	for sortBy, less := range sorts {
		for _, order := range []string{"asc", "desc"} {
			want := slices.Clone(all)
			slices.SortFunc(want, less)
			if order == "desc" {
				slices.Reverse(want)
			}
			for _, size := range []int{7, 40, 1000} {
				for pg := 1; pg <= 41/size+2; pg++ {
					q := fmt.Sprintf("sort=%s&order=%s&page_size=%d&page=%d", sortBy, order, size, pg)
					st, p, b := get(q)
					if st != 200 || p.Total != 40 || p.MaxPage != (40+size-1)/size {
						t.Fatalf("%s: %d total %d max_page %d: %.200s", q, st, p.Total, p.MaxPage, b)
					}
					lo, hi := min((pg-1)*size, 40), min(pg*size, 40)
					if len(p.Results) != hi-lo {
						t.Fatalf("%s: %d results, want %d", q, len(p.Results), hi-lo)
					}
					for i, r := range p.Results {
						if r.Path != want[lo+i].Path {
							t.Fatalf("%s: result %d is %s, want %s", q, i, r.Path, want[lo+i].Path)
						}
					}
				}
			}
		}
	}
	// A window of 10 on this folder of 40: sorted pages stop at it, by
	// name ascending they go on.
	old := maxSortedWindow
	maxSortedWindow = 10
	defer func() { maxSortedWindow = old }()
	for _, c := range []struct {
		q    string
		want int
	}{
		{"sort=size&page_size=7&page=1", 200},
		{"sort=size&page_size=7&page=2", 400},
		{"sort=name&order=desc&page_size=10&page=1", 200},
		{"sort=name&order=desc&page_size=10&page=2", 400},
		{"sort=modified&page_size=1000&page=1", 400},
		{"sort=name&page_size=7&page=6", 200},
		{"page_size=1000&page=1", 200},
	} {
		if st, _, b := get(c.q); st != c.want {
			t.Errorf("window 10, %s: %d, want %d: %.200s", c.q, st, c.want, b)
		}
	}
}

// TestShareLinkDownloadLimitConcurrent: 20 parallel downloads of a link
// with a limit of 5 give exactly 5 files and 15 refusals.
func TestShareLinkDownloadLimitConcurrent(t *testing.T) {
	f, file, _, body := linkFixture(t, fixtureOptions{})
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), url.Values{"download_limit": {"5"}})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, over int
	)
	for range 20 {
		wg.Go(func() {
			st, b := f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+l.Hash+"/download", "", nil, nil))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case st == 200 && string(b) == body:
				ok++
			case st == 403 && strings.Contains(string(b), "download limit reached"):
				over++
			default:
				t.Errorf("%d %.200s", st, b)
			}
		})
	}
	wg.Wait()
	if ok != 5 || over != 15 {
		t.Errorf("%d downloads, %d refusals; want 5 and 15", ok, over)
	}
	if got := f.link(t, l.ID); got.TimesDownloaded != 5 {
		t.Errorf("times_downloaded %d, want 5", got.TimesDownloaded)
	}
}

// TestShareLinkResumeCountsOnce: a download resumed over three Range
// requests counts once; HEAD counts nothing.
func TestShareLinkResumeCountsOnce(t *testing.T) {
	f, file, _, body := linkFixture(t, fixtureOptions{})
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), nil)
	path := "/api/2/sharelinks/" + l.Hash + "/download"
	var got strings.Builder
	for _, rng := range []string{"bytes=0-299", "bytes=300-699", "bytes=700-"} {
		st, b := f.readAll(f.request(http.MethodGet, path, "", nil, http.Header{"Range": {rng}}))
		if st != http.StatusPartialContent {
			t.Fatalf("%s: %d %s", rng, st, b)
		}
		got.Write(b)
	}
	if got.String() != body {
		t.Fatalf("resumed download differs")
	}
	if st, _ := f.readAll(f.request(http.MethodHead, path, "", nil, nil)); st != 200 {
		t.Fatalf("HEAD: %d", st)
	}
	if n := f.link(t, l.ID).TimesDownloaded; n != 1 {
		t.Errorf("times_downloaded %d, want 1", n)
	}
}

// TestShareLinkLimitRanges: under a download_limit, ranges that leave
// byte 0 out (bytes=1-, the rest of a zip whose first byte is always
// "P") count as the share they send, so they do not serve the content
// again and again: each of them was served, uncounted, while the limit
// was not used up. A download cut and resumed still counts once. The
// credit a download gives its resumptions is for its own content: a
// zip narrowed by file_ids, or one file of a folder, bought a free copy
// of the folder's whole zip or of a larger file, sent in halves from
// byte 1.
func TestShareLinkLimitRanges(t *testing.T) {
	f, file, folder, _ := linkFixture(t, fixtureOptions{})
	st, b := f.upload(f.at("/api/2/files/%d/folder/%d/upload", folder), "b.txt", strings.NewReader(strings.Repeat("abcdefghij", 10_000)))
	if st != 200 {
		t.Fatalf("upload: %d %s", st, b)
	}
	var big struct {
		ID uint64 `json:"id"`
	}
	decode(t, b, &big)
	ids := strings.NewReplacer("{a}", fmt.Sprint(file), "{b}", fmt.Sprint(big.ID))
	type req struct {
		op string // "download", "view", or a path under the link ({a}: a.txt's id, {b}: b.txt's, 100,000 bytes)
		// "" for the whole; "inm": If-None-Match "x, <ETag>"; "half1",
		// "half2": bytes=1-N/2 and bytes=N/2+1- of the N bytes op has
		rng    string
		status int
	}
	tests := []struct {
		name   string
		folder bool
		limit  string
		reqs   []req
		counts int64
	}{
		{"a zip from byte 1, limit 1", true, "1", []req{{"download", "bytes=1-", 206}, {"download", "bytes=1-", 403}, {"download", "bytes=1-", 403}}, 0},
		{"a file from byte 1, limit 1", false, "1", []req{{"download", "bytes=1-", 206}, {"download", "bytes=1-", 403}}, 0},
		{"a zip downloaded, then from byte 1, limit 2", true, "2", []req{{"download", "", 200}, {"download", "bytes=1-", 206}, {"download", "bytes=1-", 206}, {"download", "bytes=1-", 403}, {"download", "", 403}}, 1},
		{"a download cut and resumed, limit 2", false, "2", []req{{"download", "bytes=0-299", 206}, {"download", "bytes=300-", 206}, {"download", "", 200}, {"download", "", 403}}, 2},
		{"a download cut twice and resumed, limit 1", false, "1", []req{{"download", "bytes=0-299", 206}, {"download", "bytes=300-", 206}, {"download", "bytes=600-", 206}}, 1},
		{"viewed after the limit, limit 1", false, "1", []req{{"download", "", 200}, {"view", "", 403}, {"view", "bytes=1-", 206}, {"view", "bytes=1-", 403}}, 1},
		{"viewed, then from byte 1, limit 1", false, "1", []req{{"view", "", 200}, {"view", "bytes=1-", 206}, {"download", "", 403}, {"view", "bytes=1-", 403}}, 1},
		// More parts than httpserve.MaxRanges send the whole file (200): a
		// download, not the few bytes the parts name.
		{"more parts than MaxRanges, limit 1", false, "1", []req{{"download", manyRanges(httpserve.MaxRanges + 1), 200}, {"download", manyRanges(httpserve.MaxRanges + 1), 403}}, 1},
		{"a zip in more parts than MaxRanges, limit 1", true, "1", []req{{"download", manyRanges(httpserve.MaxRanges + 1), 200}, {"download", manyRanges(httpserve.MaxRanges + 1), 403}}, 1},
		{"If-None-Match with a bad tag first, limit 1", false, "1", []req{{"download", "", 200}, {"download", "inm", 403}}, 1},
		{"from +0, limit 1", false, "1", []req{{"download", "bytes=+0-", 206}, {"download", "", 403}}, 1},
		{"viewed again and again, limit 2", false, "2", []req{{"view", "", 200}, {"view", "", 200}, {"view", "", 403}, {"download", "bytes=1-", 206}, {"download", "bytes=1-", 206}, {"view", "bytes=1-", 403}}, 2},
		{"a zip narrowed by file_ids, then the whole zip from byte 1, limit 1", true, "1", []req{{"download?file_ids={a}", "", 200}, {"download", "half1", 403}, {"download", "half2", 403}}, 1},
		{"a zip narrowed by file_ids, then the whole zip from byte 1, limit 2", true, "2", []req{{"download?file_ids={a}", "", 200}, {"download", "half1", 206}, {"download", "half2", 206}, {"download", "", 403}}, 1},
		{"a file of a folder, then a larger one from byte 1, limit 1", true, "1", []req{{"files/{a}/download", "", 200}, {"files/{b}/download", "half1", 403}, {"files/{b}/download", "half2", 403}}, 1},
		{"a file of a folder, then a larger one from byte 1, limit 2", true, "2", []req{{"files/{a}/download", "", 200}, {"files/{b}/download", "half1", 206}, {"files/{b}/download", "half2", 206}, {"files/{a}/download", "", 403}}, 1},
		{"a file of a folder from byte 1 in halves after its download, limit 1", true, "1", []req{{"files/{a}/download", "", 200}, {"files/{a}/download", "half1", 206}, {"files/{a}/download", "half2", 206}, {"files/{b}/download", "half1", 403}}, 1},
		{"a file of a folder cut at 60% and resumed, then another, limit 1", true, "1", []req{{"files/{a}/download", "bytes=0-599", 206}, {"files/{a}/download", "bytes=600-", 206}, {"files/{b}/download", "bytes=1-", 403}, {"files/{a}/download", "bytes=600-", 206}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := f.at("/api/2/files/%d/%d/share", file)
			if tt.folder {
				path = f.at("/api/2/files/%d/folder/%d/share", folder)
			}
			l := f.createLink(t, path, url.Values{"download_limit": {tt.limit}})
			for i, q := range tt.reqs {
				path := "/api/2/sharelinks/" + l.Hash + "/" + ids.Replace(q.op)
				var h http.Header
				switch q.rng {
				case "":
				case "inm": // a tag ServeContent cannot parse, then the ETag
					resp := f.request(http.MethodHead, path, "", nil, nil)
					f.readAll(resp)
					h = http.Header{"If-None-Match": {"x, " + resp.Header.Get("ETag")}}
				case "half1", "half2":
					resp := f.request(http.MethodHead, path, "", nil, nil)
					f.readAll(resp)
					half := resp.ContentLength / 2
					h = http.Header{"Range": {fmt.Sprintf("bytes=1-%d", half)}}
					if q.rng == "half2" {
						h = http.Header{"Range": {fmt.Sprintf("bytes=%d-", half+1)}}
					}
				default:
					h = http.Header{"Range": {q.rng}}
				}
				st, b := f.readAll(f.request(http.MethodGet, path, "", nil, h))
				if st != q.status {
					t.Errorf("request %d (%q): %d %.100s, want %d", i, q.rng, st, b, q.status)
				}
			}
			if n := f.link(t, l.ID).TimesDownloaded; n != tt.counts {
				t.Errorf("times_downloaded %d, want %d", n, tt.counts)
			}
		})
	}
}

// TestShareLinkWrite: create_folder and upload through a folder link with
// write access: anonymous only with anon_edit; never without write access.
func TestShareLinkWrite(t *testing.T) {
	f, file, folder, _ := linkFixture(t, fixtureOptions{})
	share := func(form url.Values) string {
		return f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), form).Hash
	}
	readOnly := share(nil)
	writer := share(url.Values{"write_access": {"true"}})
	anon := share(url.Values{"write_access": {"true"}, "anon_edit": {"true"}})
	// A subscriber with write access, signed in: held by the creator's
	// lock as themself (their writes elsewhere through the link go).
	subLink := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), url.Values{"write_access": {"true"}})
	sub, _, subToken := f.addPerson("linkwriter")
	if st, b := f.postForm(fmt.Sprintf("/api/2/sharelinks/%d/subscribers", subLink.ID), url.Values{
		"subscriber_type": {"person"}, "subscriber_id": {fmt.Sprint(sub.ID)}, "write_access": {"true"}}); st != 200 {
		t.Fatalf("subscribe: %d %s", st, b)
	}
	// The creator locks a.txt: a write through the link is made with
	// the creator's access, but by someone else, whom the lock holds.
	if st, b := f.postForm(f.at("/api/2/files/%d/%d/lock", file), nil); st != 200 {
		t.Fatalf("lock: %d %s", st, b)
	}
	tests := []struct {
		name   string
		hash   string
		token  string
		status int
		code   string
		file   string // the name uploaded; "" a new one
		upCode string // the upload's error, "" none
	}{
		{"read-only link", readOnly, "", 403, "forbidden", "", ""},
		{"read-only link, creator", readOnly, f.token, 403, "forbidden", "", ""},
		{"write link, anonymous", writer, "", 403, "forbidden", "", ""},
		{"write link, creator", writer, f.token, 200, "", "", ""},
		{"anon_edit, anonymous", anon, "", 200, "", "", ""},
		{"anon_edit, anonymous, over a file the creator locked", anon, "", 200, "", "a.txt", "resource_locked"},
		{"write link, creator, over a file they locked", writer, f.token, 200, "", "a.txt", ""},
		{"write link, subscriber", subLink.Hash, subToken, 200, "", "", ""},
		{"write link, subscriber, over a file the creator locked", subLink.Hash, subToken, 200, "", "a.txt", "resource_locked"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
			st, b := f.readAll(f.request(http.MethodPost, "/api/2/sharelinks/"+tt.hash+"/files/create_folder", tt.token,
				strings.NewReader(url.Values{"name": {fmt.Sprintf("sub%d", i)}}.Encode()), h))
			if tt.code != "" {
				wantError(t, st, b, tt.status, tt.code)
				return
			}
			if st != tt.status {
				t.Fatalf("create_folder: %d %s", st, b)
			}
			name := cmp.Or(tt.file, fmt.Sprintf("up%d.txt", i))
			body, ct := multipartBody(name, strings.NewReader("up"))
			st, b = f.readAll(f.request(http.MethodPost, "/api/2/sharelinks/"+tt.hash+"/files/upload", tt.token, body, http.Header{"Content-Type": {ct}}))
			if tt.upCode != "" {
				wantError(t, st, b, 409, tt.upCode)
				return
			}
			if st != 200 || !strings.Contains(string(b), "/docs/"+name) {
				t.Fatalf("upload: %d %s", st, b)
			}
		})
	}
}

// TestShareLinkCounting: which requests count as a download.
func TestShareLinkCounting(t *testing.T) {
	f, file, folder, body := linkFixture(t, fixtureOptions{})
	// A revision of an hour ago, which a date of a second ago proves
	// current.
	if _, err := f.fs.WriteFile(context.Background(), f.root.ID, folder, "a.txt", strings.NewReader(body), vfs.WriteOptions{Modified: time.Now().Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), nil)
	fl := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", folder), nil)
	resp := f.request(http.MethodHead, "/api/2/sharelinks/"+l.Hash+"/download", "", nil, nil)
	etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	f.readAll(resp)
	resp = f.request(http.MethodHead, "/api/2/sharelinks/"+fl.Hash+"/download", "", nil, nil)
	zipTag := resp.Header.Get("ETag")
	f.readAll(resp)
	tests := []struct {
		name   string
		link   linkJSON
		header http.Header
		counts int64
	}{
		{"whole", l, nil, 1},
		{"a range from 0", l, http.Header{"Range": {"bytes=0-9"}}, 1},
		{"a resumption", l, http.Header{"Range": {"bytes=10-"}}, 0},
		{"byte 0 in a later part", l, http.Header{"Range": {"bytes=5-,0-4"}}, 1},
		{"a suffix range", l, http.Header{"Range": {"bytes=-2000"}}, 1},
		{"If-Range not matching", l, http.Header{"Range": {"bytes=10-"}, "If-Range": {`"other"`}}, 1},
		{"If-Range matching", l, http.Header{"Range": {"bytes=10-"}, "If-Range": {etag}}, 0},
		{"not modified", l, http.Header{"If-None-Match": {etag}}, 0},
		{"not modified since a later date", l, http.Header{"If-Modified-Since": {time.Now().Add(-time.Second).UTC().Format(http.TimeFormat)}}, 0},
		{"modified since its own date", l, http.Header{"If-Modified-Since": {lastMod}}, 1},
		{"If-Match of another tag", l, http.Header{"If-Match": {`"other"`}}, 0},
		{"If-Unmodified-Since its own date", l, http.Header{"If-Unmodified-Since": {lastMod}}, 0},
		// ServeContent stops reading If-None-Match at a tag it cannot
		// parse, and sends the file: the ETag after it matches nothing.
		{"If-None-Match with a bad tag before the ETag", l, http.Header{"If-None-Match": {"x, " + etag}}, 1},
		{"If-None-Match with a space in a tag before the ETag", l, http.Header{"If-None-Match": {`"a b", ` + etag}}, 1},
		// ServeContent reads "+0" as 0 (strconv.ParseInt): byte 0 is sent.
		{"a range from +0", l, http.Header{"Range": {"bytes=+0-9"}}, 1},
		// Parts that add up past the file: ServeContent sends it whole.
		{"overlapping parts past the file", l, http.Header{"Range": {"bytes=1-,1-"}}, 1},
		// More parts than httpserve.MaxRanges: the whole file is sent, 200.
		{"more parts than MaxRanges", l, http.Header{"Range": {manyRanges(httpserve.MaxRanges + 1)}}, 1},
		// A zip counts as a file does (its ETag names the archive).
		{"a zip whole", fl, nil, 1},
		{"a zip from 0", fl, http.Header{"Range": {"bytes=0-9"}}, 1},
		{"a zip resumed", fl, http.Header{"Range": {"bytes=10-"}}, 0},
		{"a zip resumed, If-Range matching", fl, http.Header{"Range": {"bytes=10-"}, "If-Range": {zipTag}}, 0},
		{"a zip resumed, If-Range of another archive", fl, http.Header{"Range": {"bytes=10-"}, "If-Range": {`"zother"`}}, 1},
		{"a zip not modified", fl, http.Header{"If-None-Match": {zipTag}}, 0},
		{"a zip, If-None-Match with a bad tag before its ETag", fl, http.Header{"If-None-Match": {"x, " + zipTag}}, 1},
		{"a zip in overlapping parts past it", fl, http.Header{"Range": {"bytes=1-,1-"}}, 1},
		{"a zip from +0", fl, http.Header{"Range": {"bytes=+0-9"}}, 1},
		{"a zip of more parts than MaxRanges", fl, http.Header{"Range": {manyRanges(httpserve.MaxRanges + 1)}}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.link(t, tt.link.ID).TimesDownloaded
			st, b := f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+tt.link.Hash+"/download", "", nil, tt.header))
			if st >= 400 && st != http.StatusPreconditionFailed {
				t.Fatalf("%d %s", st, b)
			}
			if got := f.link(t, tt.link.ID).TimesDownloaded - before; got != tt.counts {
				t.Errorf("counted %d, want %d (status %d)", got, tt.counts, st)
			}
		})
	}
}

// manyRanges is a Range of n one-byte parts from byte 10 on, none of
// them byte 0.
func manyRanges(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%d-%d", 10+2*i, 10+2*i)
	}
	return "bytes=" + strings.Join(parts, ",")
}

// TestShareLinkEmailClaim: a person of another organization who sets
// their own e-mail address to one a login_required link's email
// subscriber names (nobody held it) does not open the link by its
// sequential id or its hash, as they did; only the subscriber's own
// hash, the one sent to the address, admits the address's holder.
func TestShareLinkEmailClaim(t *testing.T) {
	ctx := context.Background()
	f, file, _, body := linkFixture(t, fixtureOptions{})
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", file), url.Values{"login_required": {"true"}})
	st, b := f.postForm(fmt.Sprintf("/api/2/sharelinks/%d/subscribers", l.ID), url.Values{"subscriber_type": {"email"}, "email": {"carol@partner.example"}})
	if st != http.StatusOK {
		t.Fatalf("subscribe: %d %s", st, b)
	}
	var sb struct {
		Hash string `json:"hash"`
	}
	decode(t, b, &sb)
	globex, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: globex.ID, Username: "mallory", Email: "mallory@globex.example", Password: fixturePassword})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(ctx, m.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	claim := url.Values{"email": {"carol@partner.example"}, "current_password": {fixturePassword}}
	st, b = f.readAll(f.request(http.MethodPost, fmt.Sprintf("/api/2/person/%d/update", m.ID), toks.AccessToken,
		strings.NewReader(claim.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}))
	if st != http.StatusOK {
		t.Fatalf("claim: %d %s", st, b)
	}
	for _, c := range []struct {
		name, ref string
		status    int
	}{
		{"by id", fmt.Sprint(l.ID), http.StatusNotFound},
		{"by the link's hash", l.Hash, http.StatusUnauthorized},
		{"by the subscriber's own hash", sb.Hash, http.StatusOK},
	} {
		st, b := f.readAll(f.request(http.MethodGet, "/api/2/sharelinks/"+c.ref+"/download", toks.AccessToken, nil, nil))
		if st != c.status || (st == http.StatusOK) != (string(b) == body) {
			t.Errorf("%s: %d %.80s, want %d", c.name, st, b, c.status)
		}
	}
}

// A share link's request for an item deep below the shared folder reads
// the store a number of times that grows linearly with the depth, after
// a write elsewhere has emptied vfs's caches: linkNode Stat'ed each
// folder between the item and the shared folder, each resolving its own
// path to the top (400 deep, the square of it). Counts, not times.
func TestShareLinkDeepReads(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	shared, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "shared", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l := f.createLink(t, f.at("/api/2/files/%d/folder/%d/share", shared.ID), nil)
	perLevel := map[int]float64{}
	for _, depth := range []int{100, 400} {
		deep, err := f.fs.MkdirAll(ctx, f.root.ID, fmt.Sprint("/shared/d", depth)+strings.Repeat("/a", depth-2), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, fmt.Sprint("elsewhere", depth), strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		before := f.stack.DB.TxnStats()
		st, b := f.readAll(f.request(http.MethodGet, fmt.Sprintf("/api/2/sharelinks/%s/files/folder/%d/children", l.Hash, deep.ID), "", nil, nil))
		if st != 200 {
			t.Fatalf("children %d deep: %d %s", depth, st, b)
		}
		after := f.stack.DB.TxnStats()
		perLevel[depth] = float64(after.Gets+after.Scans-before.Gets-before.Scans) / float64(depth)
	}
	t.Logf("reads a level: %.1f at depth 100, %.1f at 400", perLevel[100], perLevel[400])
	if perLevel[400] > 1.2*perLevel[100]+0.2 {
		t.Fatalf("reads a level: %.1f at depth 100, %.1f at 400; want them to grow no more than linearly", perLevel[100], perLevel[400])
	}
}
