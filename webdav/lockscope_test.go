package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnlockAndRefreshWithinTheLocksScope: RFC 4918 9.11, the UNLOCK
// Request-URI "MUST identify a resource within the scope of the lock"
// (409 lock-token-matches-request-uri otherwise), and a refresh names the
// lock of the resource it is sent to. A depth-0 lock on a folder does not
// cover what the folder holds, yet an UNLOCK or a refresh sent to a
// member reached it; a depth-infinity lock does cover its members.
func TestUnlockAndRefreshWithinTheLocksScope(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("MKCOL", "/d", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	st, _, body = f.do("PUT", "/d/x.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, h, body := f.do("LOCK", "/d", strings.NewReader(lockBody), "Depth", "0")
	want(t, "LOCK d depth 0", st, http.StatusOK, body)
	tok := h.Get("Lock-Token")
	st, _, body = f.do("LOCK", "/d/x.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
	want(t, "refresh sent to a member of a depth-0 lock", st, http.StatusPreconditionFailed, body)
	st, _, body = f.do("UNLOCK", "/d/x.txt", nil, "Lock-Token", tok)
	want(t, "UNLOCK sent to a member of a depth-0 lock", st, http.StatusConflict, body)
	contains(t, body, "lock-token-matches-request-uri")
	if n, err := f.lookup("/d"); err != nil || !n.Locked() {
		t.Fatalf("d after an UNLOCK outside its lock's scope: %+v %v", n.Locks, err)
	}
	st, _, body = f.do("UNLOCK", "/d", nil, "Lock-Token", tok)
	want(t, "UNLOCK d", st, http.StatusNoContent, body)

	st, h, body = f.do("LOCK", "/d", strings.NewReader(lockBody), "Depth", "infinity")
	want(t, "LOCK d depth infinity", st, http.StatusOK, body)
	tok = h.Get("Lock-Token")
	st, _, body = f.do("LOCK", "/d/x.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
	want(t, "refresh sent to a member of a depth-infinity lock", st, http.StatusOK, body)
	st, _, body = f.do("UNLOCK", "/d/x.txt", nil, "Lock-Token", tok)
	want(t, "UNLOCK sent to a member of a depth-infinity lock", st, http.StatusNoContent, body)
}
