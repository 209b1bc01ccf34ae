package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestWritesAtTheMountTop: /webdav/ lists the roots, and roots are not
// made over WebDAV, so creating something directly below it is refused
// with 403, not the 404 of a resource that could exist; below a name that
// is no root, the parent collection is missing (409, RFC 4918 9.3.1 and
// 9.7.1).
func TestWritesAtTheMountTop(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	top := func(method, p, body string, hdr ...string) (int, string) {
		req, _ := http.NewRequest(method, f.srv.URL+p, strings.NewReader(body))
		req.SetBasicAuth("alice", password)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		st, _, b := f.send(req)
		return st, b
	}
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/webdav/new.txt", "x", http.StatusForbidden},
		{"MKCOL", "/webdav/newroot", "", http.StatusForbidden},
		{"MKCOL", "/webdav/newroot/", "", http.StatusForbidden},
		{"LOCK", "/webdav/new.txt", lockBody, http.StatusForbidden},
		{"PUT", "/webdav/noroot/x.txt", "x", http.StatusConflict},
		{"MKCOL", "/webdav/noroot/x", "", http.StatusConflict},
		{"LOCK", "/webdav/noroot/x.txt", lockBody, http.StatusConflict},
		{"DELETE", "/webdav/noroot", "", http.StatusNotFound},
		{"PROPFIND", "/webdav/noroot", "", http.StatusNotFound},
	} {
		st, b := top(c.method, c.path, c.body, "Depth", "0")
		want(t, c.method+" "+c.path, st, c.want, b)
	}
	st, _, body = f.do("COPY", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/a.txt")
	want(t, "COPY to the mount's top", st, http.StatusForbidden, body)
	st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/a.txt")
	want(t, "MOVE to the mount's top", st, http.StatusForbidden, body)
	st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.srv.URL+"/webdav/noroot/a.txt")
	want(t, "MOVE below a name that is no root", st, http.StatusConflict, body)
	if b, err := f.read("/a.txt"); err != nil || string(b) != "a" {
		t.Fatalf("a.txt after refused moves: %q %v", b, err)
	}
}
