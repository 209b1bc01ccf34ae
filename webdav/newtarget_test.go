package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestNewTargetBelowFolders: a PUT, MKCOL, COPY or MOVE into a folder
// below a root's top reads its target and that folder in one transaction
// (lookupNew); the answers are those of a lookup of each, for every state
// of the folder and the target.
func TestNewTargetBelowFolders(t *testing.T) {
	f := newFixture(t)
	for _, s := range []struct{ method, path string }{{"MKCOL", "/d"}, {"MKCOL", "/d/sub"}, {"PUT", "/d/f.txt"}, {"PUT", "/d/g.txt"}} {
		st, _, body := f.do(s.method, s.path, strings.NewReader(""))
		want(t, s.method+" "+s.path, st, http.StatusCreated, body)
	}
	for _, c := range []struct {
		method, path, body string
		hdr                []string
		status             int
	}{
		{"PUT", "/d/new.txt", "x", nil, http.StatusCreated},
		{"PUT", "/d/new.txt", "y", nil, http.StatusNoContent},
		{"PUT", "/d/sub/deep.txt", "x", nil, http.StatusCreated},
		{"PUT", "/d/sub", "x", nil, http.StatusMethodNotAllowed},
		{"PUT", "/d/missing/x.txt", "x", nil, http.StatusConflict},
		{"PUT", "/d/f.txt/x.txt", "x", nil, http.StatusConflict},
		{"PUT", "/d/new.txt", "z", []string{"If-None-Match", "*"}, http.StatusPreconditionFailed},
		{"PUT", "/d/other.txt", "z", []string{"If-None-Match", "*"}, http.StatusCreated},
		{"MKCOL", "/d/sub2", "", nil, http.StatusCreated},
		{"MKCOL", "/d/sub", "", nil, http.StatusMethodNotAllowed},
		{"MKCOL", "/d/f.txt", "", nil, http.StatusMethodNotAllowed},
		{"MKCOL", "/d/missing/x", "", nil, http.StatusConflict},
		{"MKCOL", "/d/f.txt/x", "", nil, http.StatusConflict},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt")}, http.StatusCreated},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt"), "Overwrite", "F"}, http.StatusPreconditionFailed},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/sub/f.txt")}, http.StatusNoContent},
		{"COPY", "/d/f.txt", "", []string{"Destination", f.url("/d/missing/f.txt")}, http.StatusConflict},
		{"MOVE", "/d/g.txt", "", []string{"Destination", f.url("/d/f.txt/g.txt")}, http.StatusConflict},
		{"MOVE", "/d/g.txt", "", []string{"Destination", f.url("/d/sub2/g.txt")}, http.StatusCreated},
		{"MOVE", "/d/sub2", "", []string{"Destination", f.url("/d/sub/sub2")}, http.StatusCreated},
	} {
		st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
		want(t, c.method+" "+c.path+" "+strings.Join(c.hdr, " "), st, c.status, body)
	}
	for p, contents := range map[string]string{"/d/new.txt": "y", "/d/sub/deep.txt": "x", "/d/sub/f.txt": "", "/d/sub/sub2/g.txt": ""} {
		if got, err := f.read(p); err != nil || string(got) != contents {
			t.Errorf("%s: %q, %v; want %q", p, got, err, contents)
		}
	}
	for _, p := range []string{"/d/missing", "/d/g.txt", "/d/sub2"} {
		if _, err := f.lookup(p); err == nil {
			t.Errorf("%s exists", p)
		}
	}
}
