package webdav_test

import (
	"bytes"
	"cmp"
	"context"
	"net/http"
	"regexp"
	"slices"
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

// TestRange: GET and HEAD with a Range header, one row per Range (and
// If-Range) sent, over an 11-byte file. Each row names the status and
// lists the parts answered as "<Content-Range> <body>" (a 416 lists its
// Content-Range). A chunked upload's range read back is a row of TestPut.
func TestRange(t *testing.T) {
	f := newFixture(t)
	data := "hello world"
	if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, "f.txt", bytes.NewReader([]byte(data)), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method       string // GET unless set
		rng, ifRange string
		status       int
		parts        []string // Content-Range and body of each part
	}{
		// A suffix range of no byte (bytes=-0) is 416 with Content-Range
		// bytes */size (RFC 9110 14.1.1), not the 206 with "bytes 11-10/11"
		// that http.ServeContent writes for it; a suffix of 5 bytes is the
		// last 5. Formerly TestGetZeroSuffixRange (emptyrange_test.go).
		{rng: "bytes=-0", status: 416, parts: []string{"bytes */11"}},
		{method: "HEAD", rng: "bytes=-0", status: 416, parts: []string{"bytes */11"}},
		{rng: "bytes=-5", status: 206, parts: []string{"bytes 6-10/11 world"}},

		// A multi-range GET with a zero-length suffix part is served as if
		// that part were not there (RFC 9110 14.1.1: a part no byte
		// satisfies is ignored when others are satisfiable), not with a part
		// whose Content-Range ends before it starts; with no other part it
		// is 416. A failed If-Range sends the whole file. Formerly
		// TestGetMultiRangeWithZeroSuffix (multirange_test.go).
		{rng: "bytes=0-1,-0", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{rng: "bytes=-0,0-1", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{rng: "bytes=0-1, -00 ,4-5", status: 206, parts: []string{"bytes 0-1/11 he", "bytes 4-5/11 o "}},
		{rng: "bytes=-0,-5", status: 206, parts: []string{"bytes 6-10/11 world"}},
		{rng: "bytes=-0,-0", status: 416, parts: []string{"bytes */11"}},
		{rng: "bytes=0-1,-0", ifRange: `"r0"`, status: 200},
	} {
		method := cmp.Or(tc.method, "GET")
		hdr := []string{"Range", tc.rng}
		if tc.ifRange != "" {
			hdr = append(hdr, "If-Range", tc.ifRange)
		}
		st, h, body := f.do(method, "/f.txt", nil, hdr...)
		got := berthtest.RangeParts(t, st, h, body)
		if st != tc.status || !slices.Equal(got, tc.parts) {
			t.Errorf("%s Range %q (If-Range %q): %d %q, want %d %q", method, tc.rng, tc.ifRange, st, got, tc.status, tc.parts)
		}
		if tc.status == 200 && body != data {
			t.Errorf("Range %q with a failed If-Range: body %q, want the whole file", tc.rng, body)
		}
	}
}
