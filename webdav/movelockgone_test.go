package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMoveLeavesLocksBehind: RFC 4918 7.6, "a successful MOVE request on a
// write locked resource MUST NOT move the write lock with the resource"; a
// lock names the URL it was taken on, and a lock at the destination covers
// what arrives there. The moved file, and a locked member of a moved
// collection, arrive unlocked; a depth-infinity lock on the destination
// folder covers them.
func TestMoveLeavesLocksBehind(t *testing.T) {
	f := newFixture(t)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	lockdiscovery := `<D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>`
	for _, c := range [][3]string{{"PUT", "/a.txt", "a"}, {"MKCOL", "/d", ""}, {"PUT", "/d/x.txt", "x"}, {"MKCOL", "/locked", ""}} {
		st, _, body := f.do(c[0], c[1], strings.NewReader(c[2]))
		want(t, c[0]+" "+c[1], st, http.StatusCreated, body)
	}
	st, h, body := f.do("LOCK", "/a.txt", strings.NewReader(lockBody))
	want(t, "LOCK a.txt", st, http.StatusOK, body)
	tokA := h.Get("Lock-Token")
	st, h, body = f.do("LOCK", "/d/x.txt", strings.NewReader(lockBody))
	want(t, "LOCK d/x.txt", st, http.StatusOK, body)
	tokX := h.Get("Lock-Token")

	st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"), "If", "("+tokA+")")
	want(t, "MOVE a.txt with its token", st, http.StatusCreated, body)
	st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "If", "<"+f.url("/d/x.txt")+"> ("+tokX+")")
	want(t, "MOVE d with its member's token", st, http.StatusCreated, body)
	for _, p := range []string{"/b.txt", "/e/x.txt"} {
		st, _, body = f.do("PROPFIND", p, strings.NewReader(lockdiscovery), "Depth", "0")
		want(t, "PROPFIND "+p, st, http.StatusMultiStatus, body)
		contains(t, body, "<D:lockdiscovery/>")
		st, _, body = f.do("PUT", p, strings.NewReader("free"))
		want(t, "PUT "+p+" without a token", st, http.StatusNoContent, body)
	}
	st, _, body = f.do("UNLOCK", "/b.txt", nil, "Lock-Token", tokA)
	want(t, "UNLOCK of the lock left behind at the new URL", st, http.StatusConflict, body)

	// A lock at the destination covers what arrives.
	st, h, body = f.do("LOCK", "/locked", strings.NewReader(lockBody))
	want(t, "LOCK locked/", st, http.StatusOK, body)
	tokL := h.Get("Lock-Token")
	st, _, body = f.do("MOVE", "/b.txt", nil, "Destination", f.url("/locked/b.txt"), "If", "<"+f.url("/locked")+"> ("+tokL+")")
	want(t, "MOVE into the locked folder with its token", st, http.StatusCreated, body)
	st, _, body = f.do("PUT", "/locked/b.txt", strings.NewReader("no"))
	want(t, "PUT below the destination's lock without its token", st, http.StatusLocked, body)
}
