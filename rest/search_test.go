package rest

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestSearchPages: search answers the spec's {results: [...]} by item id,
// pages with limit and after, and says where the next page starts in a
// Link header (rel="next") only while there may be more.
func TestSearchPages(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := range 5 {
		name := fmt.Sprintf("Page-%d.txt", i)
		st, body := f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {name}})
		if st != http.StatusOK {
			t.Fatalf("create %s: %d %s", name, st, body)
		}
		want = append(want, "/"+name)
	}
	f.postForm(f.at("/api/2/files/%d/create_folder"), url.Values{"name": {"other"}})
	tests := []struct {
		name  string
		query string
		pages [][]string
	}{
		{"one page", "query=PAGE", [][]string{want}},
		{"pages of two", "query=page-&limit=2", [][]string{want[:2], want[2:4], want[4:]}},
		{"short query", "query=p&limit=3", [][]string{want[:3], want[3:]}},
		{"after the last", "query=page&after=18446744073709551615", [][]string{{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := f.at("/api/2/files/%d/search?" + tc.query)
			for i, page := range tc.pages {
				if next == "" {
					t.Fatalf("page %d: no Link to it", i)
				}
				resp := f.request(http.MethodGet, next, f.token, nil, nil)
				link := resp.Header.Get("Link")
				st, body := f.readAll(resp)
				var res struct {
					Results []map[string]any `json:"results"`
				}
				decode(t, body, &res)
				if st != http.StatusOK || res.Results == nil {
					t.Fatalf("page %d: %d %s", i, st, body)
				}
				got := []string{}
				for _, r := range res.Results {
					got = append(got, r["path"].(string))
				}
				if !slices.Equal(got, page) {
					t.Fatalf("page %d: %q, want %q", i, got, page)
				}
				next = ""
				if link != "" {
					u, ok := strings.CutPrefix(link, "<")
					u, ok2 := strings.CutSuffix(u, `>; rel="next"`)
					if !ok || !ok2 {
						t.Fatalf("page %d: Link %q", i, link)
					}
					next = u
				}
			}
			if next != "" {
				t.Fatalf("a Link after the last page: %q", next)
			}
		})
	}
	for _, bad := range []string{"after=-1", "after=x", "after=1.5",
		// Longer than any name: it matches nothing, and each of its
		// trigrams was a scan of the index (60,000 runes: 0.43 s of
		// CPU on a root of 250 names; a 1 MiB URL some seconds).
		"query=" + strings.Repeat("pagé", 64)} {
		if !strings.HasPrefix(bad, "query=") {
			bad = "query=page&" + bad
		}
		st, body := f.get(f.at("/api/2/files/%d/search?" + bad))
		wantError(t, st, body, http.StatusBadRequest, "invalid_request")
	}
}
