package webdav_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"berth/vfs"
)

// TestGetZeroSuffixRange: Range bytes=-0 asks for no byte at all (RFC 9110
// 14.1.1), so it is 416 with Content-Range bytes */size, not the 206 with
// "bytes 11-10/11" that http.ServeContent writes for it.
func TestGetZeroSuffixRange(t *testing.T) {
	f := newFixture(t)
	data := []byte("hello world")
	if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, "f.txt", bytes.NewReader(data), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"GET", "HEAD"} {
		st, h, body := f.do(m, "/f.txt", nil, "Range", "bytes=-0")
		want(t, m+" bytes=-0", st, http.StatusRequestedRangeNotSatisfiable, body)
		if cr := h.Get("Content-Range"); cr != "bytes */11" {
			t.Fatalf("%s: Content-Range %q", m, cr)
		}
	}
	st, h, body := f.do("GET", "/f.txt", nil, "Range", "bytes=-5")
	want(t, "bytes=-5", st, http.StatusPartialContent, body)
	if body != "world" || h.Get("Content-Range") != "bytes 6-10/11" {
		t.Fatalf("bytes=-5: %q %q", body, h.Get("Content-Range"))
	}
}
