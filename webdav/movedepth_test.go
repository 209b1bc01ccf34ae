package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMoveDepthOnAFile: RFC 4918 9.9.2 asks for Depth infinity on a MOVE
// of a collection only; a Depth header on the MOVE of a file has nothing
// to apply to, and clients that send "Depth: 0" with every MOVE got 400.
// A collection's MOVE with another Depth is still 400 and moves nothing.
func TestMoveDepthOnAFile(t *testing.T) {
	f := newFixture(t)
	for _, c := range [][3]string{{"PUT", "/a.txt", "a"}, {"PUT", "/b.txt", "b"}, {"MKCOL", "/d", ""}} {
		st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
		want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
	}
	st, _, body := f.do("MOVE", "/a.txt", nil, "Destination", f.url("/a2.txt"), "Depth", "0")
	want(t, "MOVE of a file with Depth 0", st, http.StatusCreated, body)
	st, _, body = f.do("MOVE", "/b.txt", nil, "Destination", f.url("/b2.txt"), "Depth", "1")
	want(t, "MOVE of a file with Depth 1", st, http.StatusCreated, body)
	st, _, body = f.do("MOVE", "/b2.txt", nil, "Destination", f.url("/b3.txt"), "Depth", "2")
	want(t, "MOVE with a Depth that is none", st, http.StatusBadRequest, body)
	for _, d := range []string{"0", "1"} {
		st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "Depth", d)
		want(t, "MOVE of a collection with Depth "+d, st, http.StatusBadRequest, body)
	}
	if _, err := f.lookup("/d"); err != nil {
		t.Fatalf("d after refused MOVEs: %v", err)
	}
}
