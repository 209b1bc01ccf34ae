package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestOverwriteKeepsDestinationLock: a client holds a lock on b.txt and
// MOVEs or COPYs another file over it (as editors save: write a temporary
// file, move it over the original). RFC 4918 7.6: what lands at a locked
// destination joins its lock, so b.txt stays locked under the same token,
// which still refreshes and unlocks it; it used to vanish with the item
// replaced.
func TestOverwriteKeepsDestinationLock(t *testing.T) {
	f := newFixture(t)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	for _, method := range []string{"MOVE", "COPY"} {
		for _, p := range []string{"/tmp.txt", "/b.txt"} {
			st, _, body := f.do("PUT", p, strings.NewReader("contents of "+p))
			if st != http.StatusCreated && st != http.StatusNoContent {
				t.Fatalf("PUT %s: %d %s", p, st, body)
			}
		}
		st, h, body := f.do("LOCK", "/b.txt", strings.NewReader(lockBody))
		want(t, "LOCK b.txt", st, http.StatusOK, body)
		tok := h.Get("Lock-Token")
		st, _, body = f.do(method, "/tmp.txt", nil, "Destination", f.url("/b.txt"), "If", "<"+f.url("/b.txt")+"> ("+tok+")")
		want(t, method+" over the locked b.txt", st, http.StatusNoContent, body)
		if b, err := f.read("/b.txt"); err != nil || string(b) != "contents of /tmp.txt" {
			t.Fatalf("%s: b.txt is %q, %v", method, b, err)
		}
		st, _, body = f.do("PUT", "/b.txt", strings.NewReader("no token"))
		want(t, method+": PUT b.txt without the token", st, http.StatusLocked, body)
		st, _, body = f.do("LOCK", "/b.txt", nil, "If", "("+tok+")")
		want(t, method+": refresh of b.txt's lock", st, http.StatusOK, body)
		st, _, body = f.do("UNLOCK", "/b.txt", nil, "Lock-Token", tok)
		want(t, method+": UNLOCK b.txt", st, http.StatusNoContent, body)
	}
}
