package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// TestLockTokenOfAnotherPrincipal: RFC 4918 6.4 has the server check that
// whoever submits a lock token is the lock's creator. No second person
// reaches alice's root over WebDAV yet, so the other principal's lock is
// taken through vfs exactly as berth's LOCK takes one (holder, token
// required): alice submitting its token may not write through it, refresh
// it or remove it, and her own token still works, over Basic and Bearer.
func TestLockTokenOfAnotherPrincipal(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	st, _, body := f.do("PUT", "/doc.txt", strings.NewReader("v1"))
	want(t, "PUT", st, http.StatusCreated, body)
	n, err := f.lookup("/doc.txt")
	if err != nil {
		t.Fatal(err)
	}
	bobs, err := f.fs.Lock(ctx, f.root.ID, n.ID, vfs.LockRequest{Owner: "<D:href>bob</D:href>", Holder: "person:999",
		Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	tok := "<" + bobs.Token + ">"
	st, _, body = f.do("PUT", "/doc.txt", strings.NewReader("alice"), "If", "("+tok+")")
	want(t, "PUT with another person's token", st, http.StatusLocked, body)
	st, _, body = f.do("DELETE", "/doc.txt", nil, "If", "("+tok+")")
	want(t, "DELETE with another person's token", st, http.StatusLocked, body)
	st, _, body = f.do("MOVE", "/doc.txt", nil, "If", "("+tok+")", "Destination", f.url("/moved.txt"))
	want(t, "MOVE with another person's token", st, http.StatusLocked, body)
	st, _, body = f.do("LOCK", "/doc.txt", nil, "If", "("+tok+")", "Timeout", "Second-3600")
	want(t, "LOCK refresh of another person's lock", st, http.StatusForbidden, body)
	st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", tok)
	want(t, "UNLOCK of another person's lock", st, http.StatusForbidden, body)
	if b, err := f.read("/doc.txt"); err != nil || string(b) != "v1" {
		t.Fatalf("doc.txt after refused writes: %q %v", b, err)
	}
	if l, err := f.fs.Stat(ctx, f.root.ID, n.ID); err != nil || len(l.Locks) != 1 || !l.Locks[0].Expires.Equal(bobs.Expires) {
		t.Fatalf("bob's lock after alice's refresh and unlock: %+v %v", l.Locks, err)
	}
	if err := f.fs.Unlock(ctx, f.root.ID, n.ID, bobs.Token); err != nil {
		t.Fatal(err)
	}

	// Alice's own lock: her token works, whichever credentials she sends.
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	st, h, body := f.do("LOCK", "/doc.txt", strings.NewReader(lockBody))
	want(t, "LOCK", st, http.StatusOK, body)
	mine := h.Get("Lock-Token")
	req, _ := http.NewRequest("PUT", f.url("/doc.txt"), strings.NewReader("v2"))
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("If", "("+mine+")")
	st, _, body = f.send(req)
	want(t, "PUT with her token over Bearer", st, http.StatusNoContent, body)
	st, _, body = f.do("LOCK", "/doc.txt", nil, "If", "("+mine+")", "Timeout", "Second-60")
	want(t, "LOCK refresh of her lock", st, http.StatusOK, body)
	if !strings.Contains(body, "<D:timeout>Second-60<") && !strings.Contains(body, "<D:timeout>Second-59<") {
		t.Fatalf("refresh did not set the timeout asked for:\n%s", body)
	}
	st, _, body = f.do("UNLOCK", "/doc.txt", nil, "Lock-Token", mine)
	want(t, "UNLOCK of her lock", st, http.StatusNoContent, body)
}
