package webdav_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"berth/berthtest"
	"berth/vfs"
)

// TestDownload: what GET, HEAD (and POST, which x/net/webdav answers as a
// GET) send. A row per case, each on a fresh server; byte ranges are the
// table of TestRange, a trailing slash on a file is in paths_test.go.
func TestDownload(t *testing.T) {
	runCases(t, []davCase{
		// A GET's Content-Type is the getcontenttype PROPFIND reports, from
		// the name's extension; the contents are never sniffed (an HTML body
		// in a file of unknown type is not served as text/html), and the
		// answer says nosniff. A POST, which x/net/webdav answers as a GET, is
		// held to the same: a cross-site form can send one. Formerly
		// TestGetContentTypeByName (gettype_test.go).
		{"Content-Type from the name, never sniffed", func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			for name, body := range map[string]string{
				"page.unknownext": "<html><script>alert(1)</script></html>",
				"notes":           "plain words, no extension",
				"a.PDF":           "%PDF-1.4 not really",
				"b.txt":           "<html>text file</html>",
			} {
				if _, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, name, bytes.NewReader([]byte(body)), vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
				st, _, prop := f.do("PROPFIND", "/"+name, nil, "Depth", "0")
				want(t, "PROPFIND "+name, st, http.StatusMultiStatus, prop)
				m := regexp.MustCompile(`<D:getcontenttype>([^<]*)</D:getcontenttype>`).FindStringSubmatch(prop)
				if m == nil {
					t.Fatalf("%s: no getcontenttype in %s", name, prop)
				}
				for _, method := range []string{"GET", "HEAD", "POST"} {
					st, h, got := f.do(method, "/"+name, nil)
					want(t, method+" "+name, st, http.StatusOK, got)
					if ct := h.Get("Content-Type"); ct != m[1] || h.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("%s %s: Content-Type %q (nosniff %q), getcontenttype %q", method, name, ct, h.Get("X-Content-Type-Options"), m[1])
					}
				}
			}
			// A collection's GET stays an error answer in plain text.
			st, h, body := f.do("GET", "/", nil)
			if st < 400 || h.Get("Content-Type") == "application/octet-stream" {
				t.Errorf("GET of a collection: %d %q %q", st, h.Get("Content-Type"), body)
			}
		}},
	})
}

// TestRange runs the Range table (berthtest.RangeCases, which rest's
// TestDownloadRanges runs too) over WebDAV GET and HEAD: each row's common
// answer, and WebDAV's own, a 416 in plain text and nosniff on every
// answer (newGetWriter). A chunked upload's range read back is a row of
// TestPut. Formerly this table held 9 rows of its own over an 11-byte
// f.txt, from TestGetZeroSuffixRange (emptyrange_test.go) and
// TestGetMultiRangeWithZeroSuffix (multirange_test.go); they are rows of
// the shared table now.
func TestRange(t *testing.T) {
	f := newFixture(t)
	for _, rf := range berthtest.RangeFiles() {
		if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, rf.Name, bytes.NewReader(rf.Data()), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range berthtest.RangeCases() {
		t.Run(c.Name, func(t *testing.T) {
			var hdr []string
			for k, v := range c.Header() {
				hdr = append(hdr, k, v[0])
			}
			st, h, body := f.do(c.RangeMethod(), "/"+c.File.Name, nil, hdr...)
			berthtest.CheckRange(t, c, st, h, []byte(body))
			if ct := h.Get("Content-Type"); st == http.StatusRequestedRangeNotSatisfiable && !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("416 with Content-Type %q, want plain text", ct)
			}
			if h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", h.Get("X-Content-Type-Options"))
			}
		})
	}
}
