package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestMoveCollectionWithLockedMember: a MOVE of a collection moves its
// members, so a locked member refuses it (423) unless its token is
// submitted (RFC 4918 9.9.4); the lock holder would otherwise find the
// file gone from the URL it locked.
func TestMoveCollectionWithLockedMember(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("MKCOL", "/d", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	st, _, body = f.do("PUT", "/d/x.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, h, body := f.do("LOCK", "/d/x.txt", strings.NewReader(lockBody))
	want(t, "LOCK", st, http.StatusOK, body)
	tok := h.Get("Lock-Token")
	st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"))
	want(t, "MOVE without the member's token", st, http.StatusLocked, body)
	if got, err := f.read("/d/x.txt"); err != nil || string(got) != "x" {
		t.Fatalf("d/x.txt after a refused MOVE: %q %v", got, err)
	}
	st, _, body = f.do("MOVE", "/d", nil, "Destination", f.url("/e"), "If", "<"+f.url("/d/x.txt")+"> ("+tok+")")
	want(t, "MOVE with the member's token", st, http.StatusCreated, body)
	if got, err := f.read("/e/x.txt"); err != nil || string(got) != "x" {
		t.Fatalf("e/x.txt after the MOVE: %q %v", got, err)
	}
}
