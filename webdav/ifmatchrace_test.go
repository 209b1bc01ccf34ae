package webdav_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestConditionalPutHoldsAtCommit: If-Match and If-None-Match are checked
// when a PUT starts; a write that lands while its body is still arriving
// makes them false, so the PUT is refused with 412 at its commit instead
// of replacing that write.
func TestConditionalPutHoldsAtCommit(t *testing.T) {
	f := newFixture(t)
	st, h, body := f.do("PUT", "/a.txt", strings.NewReader("v1"))
	want(t, "PUT v1", st, http.StatusCreated, body)
	etag := h.Get("ETag")

	for _, c := range []struct {
		what, path string
		hdr        []string
	}{
		{"If-Match", "/a.txt", []string{"If-Match", etag}},
		{"If-None-Match: *", "/new.txt", []string{"If-None-Match", "*"}},
	} {
		pr, pw := io.Pipe()
		done := make(chan int)
		go func() {
			st, _, _ := f.do("PUT", c.path, pr, c.hdr...)
			done <- st
		}()
		if _, err := pw.Write([]byte("slow ")); err != nil { // the handler is reading the body
			t.Fatal(err)
		}
		st, _, body := f.do("PUT", c.path, strings.NewReader("meanwhile"))
		if st != http.StatusCreated && st != http.StatusNoContent {
			t.Fatalf("%s: PUT meanwhile: %d %q", c.what, st, body)
		}
		pw.Write([]byte("upload"))
		pw.Close()
		if st := <-done; st != http.StatusPreconditionFailed {
			t.Errorf("%s: the slow PUT got %d, want 412", c.what, st)
		}
		if got, err := f.read(c.path); err != nil || string(got) != "meanwhile" {
			t.Errorf("%s: %s is %q, %v; want the write that landed meanwhile", c.what, c.path, got, err)
		}
	}
}
