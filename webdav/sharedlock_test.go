package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestSharedLocksOneTokenWrites: two clients each hold a shared lock on a
// file; each writes with its own token (RFC 4918 6.2), where berth used
// to want the tokens of every shared lock, so neither could.
func TestSharedLocksOneTokenWrites(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/s.txt", strings.NewReader("0"))
	want(t, "PUT", st, http.StatusCreated, body)
	shared := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	var toks []string
	for range 2 {
		st, h, body := f.do("LOCK", "/s.txt", strings.NewReader(shared))
		want(t, "shared LOCK", st, http.StatusOK, body)
		toks = append(toks, h.Get("Lock-Token"))
	}
	for i, tok := range toks {
		st, _, body = f.do("PUT", "/s.txt", strings.NewReader("by "+tok), "If", "("+tok+")")
		want(t, "PUT with one shared lock's token", st, http.StatusNoContent, body)
		if b, _ := f.read("/s.txt"); string(b) != "by "+toks[i] {
			t.Fatalf("s.txt = %q", b)
		}
	}
	st, _, body = f.do("PUT", "/s.txt", strings.NewReader("none"))
	want(t, "PUT without a token", st, http.StatusLocked, body)
}
