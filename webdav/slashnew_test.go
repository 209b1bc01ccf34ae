package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestTrailingSlashOnANewName: a URL ending in "/" names a collection, so
// nothing makes a file there: PUT, LOCK of a missing name (which creates
// an empty file), and COPY or MOVE of a file to such a Destination are
// 409 and create nothing. The slash used to be dropped, and the file
// then answered 404 at the URL that made it. MKCOL and a collection's
// COPY take the slash.
func TestTrailingSlashOnANewName(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	st, _, body = f.do("MKCOL", "/d", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	for _, c := range []struct {
		method, path, body, made string
		hdr                      []string
	}{
		{"PUT", "/n1/", "x", "/n1", nil},
		{"LOCK", "/n2/", lockBody, "/n2", nil},
		{"COPY", "/a.txt", "", "/n3", []string{"Destination", f.url("/n3/")}},
		{"MOVE", "/a.txt", "", "/n4", []string{"Destination", f.url("/n4/")}},
	} {
		st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
		want(t, c.method+" "+c.path, st, http.StatusConflict, body)
		if _, err := f.lookup(c.made); err == nil {
			t.Fatalf("%s %s made %s", c.method, c.path, c.made)
		}
	}
	if got, err := f.read("/a.txt"); err != nil || string(got) != "a" {
		t.Fatalf("a.txt after the refused MOVE: %q %v", got, err)
	}
	st, _, body = f.do("COPY", "/d", nil, "Destination", f.url("/d2/"))
	want(t, "COPY of a collection to a/", st, http.StatusCreated, body)
	st, _, body = f.do("MKCOL", "/m/", nil)
	want(t, "MKCOL m/", st, http.StatusCreated, body)
}
