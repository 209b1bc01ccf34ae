package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"berth/share"
	"berth/web"
)

// FuzzSharePage sends arbitrary ?folder=, ?page= and ?after= to a share
// link's page of a large folder (250 items, listed by name as stored;
// web.SetSmallFolder) and arbitrary link hashes. It checks that no
// request is answered other than 200, 400 or 404, and that a numbered
// page past the folder's three is 400, never another page's items.
func FuzzSharePage(f *testing.F) {
	s := newSite(f)
	web.SetSmallFolder(f, 100)
	d := s.mkfiles(f, "many", 250)
	l, _ := s.link(f, d, share.LinkSettings{})
	h := s.srv.Config.Handler
	for _, c := range []struct{ hash, folder, page, after string }{
		{"", "", "", ""},
		{"", "", "2", ""},
		{"", "", "3", ""},
		{"", "", "4", ""},
		{"", "", "0", ""},
		{"", "", "-1", ""},
		{"", "", "99999999999999999999", ""},
		{"", "", "184467440737095517", ""}, // (page-1)*100 wraps below 0
		{"", "", "", "f100.txt"},
		{"", "", "2", "f100.txt"},
		{"", "", "", "a/b"},
		{"", "", "", ".."},
		{"", "", "", strings.Repeat("x", 300)},
		{"", strconv.FormatUint(d.ID, 10), "", ""},
		{"", strconv.FormatUint(s.docs.ID, 10), "", ""},
		{"", "0", "", ""},
		{"", "-1", "", ""},
		{"", "18446744073709551616", "", ""},
		{"x", "", "", ""},
		{"0123456789abcdef0123", "", "", ""},
		{"%2e%2e", "", "", ""},
	} {
		f.Add(c.hash, c.folder, c.page, c.after)
	}
	f.Fuzz(func(t *testing.T, hash, folder, page, after string) {
		if hash == "" {
			hash = l.Hash
		}
		q := url.Values{}
		for k, v := range map[string]string{"folder": folder, "page": page, "after": after} {
			if v != "" {
				q.Set(k, v)
			}
		}
		u, err := url.Parse(web.Prefix + url.PathEscape(hash))
		if err != nil {
			return
		}
		u.RawQuery = q.Encode()
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.URL, req.RequestURI = u, u.RequestURI()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		switch w.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
		default:
			body, _ := io.ReadAll(w.Body)
			t.Fatalf("%s: %d %s", u, w.Code, body)
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(page), 10, 64); err == nil && n > 3 && w.Code == http.StatusOK && hash == l.Hash && (folder == "" || folder == strconv.FormatUint(d.ID, 10)) {
			t.Fatalf("%s: page %d of a folder of 3 pages is 200", u, n)
		}
	})
}
