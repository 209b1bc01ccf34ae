package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestIfHeaderOnReads: RFC 4918 10.4.1, a request whose If header does
// not match the resource's state "MUST fail with a 412", whatever the
// method; GET, HEAD, PROPFIND and UNLOCK went ahead as if it were absent.
func TestIfHeaderOnReads(t *testing.T) {
	f := newFixture(t)
	st, h, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	etag := h.Get("ETag")
	for _, m := range []string{"GET", "HEAD", "PROPFIND"} {
		st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(<urn:uuid:00000000-0000-0000-0000-000000000000>)")
		want(t, m+" with an If header that fails", st, http.StatusPreconditionFailed, body)
		st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", `(["r999"])`)
		want(t, m+" with an If entity tag that fails", st, http.StatusPreconditionFailed, body)
		ok := http.StatusOK
		if m == "PROPFIND" {
			ok = http.StatusMultiStatus
		}
		st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(Not <urn:uuid:00000000-0000-0000-0000-000000000000>)")
		want(t, m+" with an If header that holds", st, ok, body)
		st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(["+etag+"])")
		want(t, m+" with an If entity tag that holds", st, ok, body)
		st, _, body = f.do(m, "/a.txt", nil, "Depth", "0", "If", "(broken")
		want(t, m+" with a malformed If header", st, http.StatusBadRequest, body)
	}
	// UNLOCK too: the lock stays when the If header fails.
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, h, body = f.do("LOCK", "/a.txt", strings.NewReader(lockBody))
	want(t, "LOCK", st, http.StatusOK, body)
	tok := h.Get("Lock-Token")
	st, _, body = f.do("UNLOCK", "/a.txt", nil, "Lock-Token", tok, "If", `(["r999"])`)
	want(t, "UNLOCK with an If header that fails", st, http.StatusPreconditionFailed, body)
	if n, err := f.lookup("/a.txt"); err != nil || !n.Locked() {
		t.Fatalf("a.txt after a refused UNLOCK: %+v %v", n.Locks, err)
	}
	st, _, body = f.do("UNLOCK", "/a.txt", nil, "Lock-Token", tok, "If", "("+tok+")")
	want(t, "UNLOCK with an If header that holds", st, http.StatusNoContent, body)
}
