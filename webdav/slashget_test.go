package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestGetTrailingSlashOnAFile: "a.txt/" names a collection, and there is
// none; a GET or HEAD of it is 404 as the writes to it are, rather than
// the file's bytes under a URL that is not the file's.
func TestGetTrailingSlashOnAFile(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("contents"))
	want(t, "PUT", st, http.StatusCreated, body)
	for _, m := range []string{"GET", "HEAD"} {
		st, h, body := f.do(m, "/a.txt/", nil)
		want(t, m+" a.txt/", st, http.StatusNotFound, body)
		if h.Get("ETag") != "" {
			t.Errorf("%s a.txt/: ETag %q", m, h.Get("ETag"))
		}
		st, _, body = f.do(m, "/a.txt", nil)
		want(t, m+" a.txt", st, http.StatusOK, body)
	}
}
