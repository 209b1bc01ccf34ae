package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPartialPutRefused: a PUT with Content-Range carries part of a file;
// storing it as the whole file would cut the file to that part. It is
// refused with 400 (RFC 9110 14.5) and the file stays as it was.
func TestPartialPutRefused(t *testing.T) {
	f := newFixture(t)
	whole := strings.Repeat("x", 1000)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader(whole))
	want(t, "PUT", st, http.StatusCreated, body)
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("yyyy"), "Content-Range", "bytes 100-103/1000")
	want(t, "PUT with Content-Range", st, http.StatusBadRequest, body)
	if got, err := f.read("/a.txt"); err != nil || string(got) != whole {
		t.Fatalf("a.txt after a partial PUT: %d bytes, %v", len(got), err)
	}
	st, _, body = f.do("PUT", "/new.txt", strings.NewReader("yyyy"), "Content-Range", "bytes 0-3/1000")
	want(t, "PUT of a new file with Content-Range", st, http.StatusBadRequest, body)
	if _, err := f.lookup("/new.txt"); err == nil {
		t.Fatal("a partial PUT created new.txt")
	}
}
