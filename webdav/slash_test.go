package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTrailingSlashOnAFile: a URL ending in "/" names a collection. Where
// the name is a file, writes to it are refused and the file stays: the
// slash used to be dropped, so "PUT a.txt/" replaced a.txt and
// "DELETE a.txt/" deleted it.
func TestTrailingSlashOnAFile(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/a.txt", "/b.txt"} {
		st, _, body := f.do("PUT", p, strings.NewReader("contents of "+p))
		want(t, "PUT "+p, st, http.StatusCreated, body)
	}
	st, _, body := f.do("MKCOL", "/d", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	for _, c := range []struct {
		method, path, body string
		status             int
		hdr                []string
	}{
		{"PUT", "/a.txt/", "replaced", http.StatusConflict, nil},
		{"DELETE", "/a.txt/", "", http.StatusNotFound, nil},
		{"MOVE", "/a.txt/", "", http.StatusNotFound, []string{"Destination", f.url("/moved.txt")}},
		{"COPY", "/b.txt", "", http.StatusConflict, []string{"Destination", f.url("/a.txt/")}},
		{"MOVE", "/d/", "", http.StatusConflict, []string{"Destination", f.url("/a.txt/")}},
		{"LOCK", "/a.txt/", lockBody, http.StatusNotFound, nil},
	} {
		st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
		want(t, c.method+" "+c.path, st, c.status, body)
		if got, err := f.read("/a.txt"); err != nil || string(got) != "contents of /a.txt" {
			t.Fatalf("after %s %s: a.txt is %q, %v", c.method, c.path, got, err)
		}
	}
	// A collection's URL with or without the slash is the collection.
	st, _, body = f.do("MOVE", "/d/", nil, "Destination", f.url("/e/"))
	want(t, "MOVE d/ to e/", st, http.StatusCreated, body)
	st, _, body = f.do("DELETE", "/e/", nil)
	want(t, "DELETE e/", st, http.StatusNoContent, body)
}
