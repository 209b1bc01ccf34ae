package webdav_test

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"testing"

	"berth/vfs"
)

// TestGetContentTypeByName: a GET's Content-Type is the getcontenttype
// PROPFIND reports, from the name's extension; the contents are never
// sniffed (an HTML body in a file of unknown type is not served as
// text/html), and the answer says nosniff. A POST, which x/net/webdav
// answers as a GET, is held to the same: a cross-site form can send one.
func TestGetContentTypeByName(t *testing.T) {
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
}
