package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestLockNewNameRefusedCreatesNothing: a LOCK of a missing name creates
// an empty file and locks it; when the lock is refused (here by the
// caller's own exclusive depth-infinity lock on the folder, whose token
// lets the write through but not a second exclusive lock below it),
// no empty file is left behind.
func TestLockNewNameRefusedCreatesNothing(t *testing.T) {
	f := newFixture(t)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`
	st, _, body := f.do("MKCOL", "/d", nil)
	want(t, "MKCOL", st, http.StatusCreated, body)
	st, h, body := f.do("LOCK", "/d", strings.NewReader(lockBody))
	want(t, "LOCK /d", st, http.StatusOK, body)
	tok := h.Get("Lock-Token")
	st, _, body = f.do("LOCK", "/d/new.txt", strings.NewReader(lockBody), "If", "("+tok+")")
	want(t, "LOCK of a new name below an exclusive lock", st, http.StatusLocked, body)
	if n, err := f.lookup("/d/new.txt"); err == nil {
		t.Fatalf("a refused LOCK left %+v behind", n)
	}
	// Without the conflict, the same LOCK creates the file, locked.
	st, _, body = f.do("UNLOCK", "/d", nil, "Lock-Token", tok)
	want(t, "UNLOCK /d", st, http.StatusNoContent, body)
	st, h, body = f.do("LOCK", "/d/new.txt", strings.NewReader(lockBody))
	want(t, "LOCK of a new name", st, http.StatusCreated, body)
	n, err := f.lookup("/d/new.txt")
	if err != nil || n.Dir || n.Size != 0 || !n.Locked() || n.Locks[0].Token != strings.Trim(h.Get("Lock-Token"), "<>") {
		t.Fatalf("after LOCK of a new name: %+v %v", n, err)
	}
	st, _, body = f.do("PUT", "/d/new.txt", strings.NewReader("hello"))
	want(t, "PUT without the token", st, http.StatusLocked, body)
	st, _, body = f.do("PUT", "/d/new.txt", strings.NewReader("hello"), "If", "("+h.Get("Lock-Token")+")")
	want(t, "PUT with the token", st, http.StatusNoContent, body)
	if got, err := f.read("/d/new.txt"); err != nil || string(got) != "hello" {
		t.Fatalf("new.txt: %q %v", got, err)
	}
}
