package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestIfHeaderAndPathLimits(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/i.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)

	conds := strings.Repeat("(<urn:uuid:00000000-0000-0000-0000-000000000000>) ", 1000)
	st, _, body = f.do("PUT", "/i.txt", strings.NewReader("y"), "If", conds)
	want(t, "PUT with 1,000 If conditions", st, http.StatusBadRequest, body)
	contains(t, body, "conditions")

	deep := strings.Repeat("/a", 5000)
	st, _, body = f.do("UNLOCK", deep, nil, "Lock-Token", "<urn:uuid:00000000-0000-0000-0000-000000000000>")
	want(t, "UNLOCK of a path 5,000 deep", st, http.StatusRequestURITooLong, body)
	st, _, body = f.do("COPY", "/i.txt", nil, "Destination", f.url(deep))
	want(t, "COPY to a path 5,000 deep", st, http.StatusBadRequest, body)
	contains(t, body, "Destination")
	st, _, body = f.do("PUT", "/i.txt", strings.NewReader("y"), "If", "<"+f.url(deep)+"> (<urn:uuid:00000000-0000-0000-0000-000000000000>)")
	want(t, "PUT with an If tag 5,000 deep", st, http.StatusBadRequest, body)
	if b, err := f.read("/i.txt"); err != nil || string(b) != "x" {
		t.Fatalf("i.txt = %q, %v; want it unchanged", b, err)
	}
}
