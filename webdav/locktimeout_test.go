package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLockTimeoutBounded: however large the Timeout a LOCK or a refresh
// asks for, the lock expires within the 7-day bound. Second-N times a
// second overflowed for N over some 9.2e9 and wrapped to a negative
// duration, which vfs takes as "never expires".
func TestLockTimeoutBounded(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	lockBody := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	week := 7 * 24 * time.Hour
	check := func(what string, body string) {
		t.Helper()
		n, err := f.lookup("/a.txt")
		if err != nil || len(n.Locks) != 1 {
			t.Fatalf("%s: locks %+v, %v", what, n.Locks, err)
		}
		exp := n.Locks[0].Expires
		if exp.IsZero() || time.Until(exp) > week || time.Until(exp) < week-time.Minute {
			t.Fatalf("%s: the lock expires at %v, want in about 7 days", what, exp)
		}
		if strings.Contains(body, "Infinite") {
			t.Fatalf("%s: answer says Infinite:\n%s", what, body)
		}
	}
	for _, timeout := range []string{"Second-10000000000", "Second-9223372036854775807", "Second-99999999999999999999999"} {
		st, h, body := f.do("LOCK", "/a.txt", strings.NewReader(lockBody), "Timeout", timeout)
		want(t, "LOCK "+timeout, st, http.StatusOK, body)
		check("LOCK "+timeout, body)
		tok := h.Get("Lock-Token")
		st, _, body = f.do("LOCK", "/a.txt", nil, "If", "("+tok+")", "Timeout", "Second-60")
		want(t, "refresh", st, http.StatusOK, body)
		st, _, body = f.do("LOCK", "/a.txt", nil, "If", "("+tok+")", "Timeout", timeout)
		want(t, "refresh "+timeout, st, http.StatusOK, body)
		check("refresh "+timeout, body)
		n, _ := f.lookup("/a.txt")
		if err := f.fs.Unlock(context.Background(), f.root.ID, n.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
}
