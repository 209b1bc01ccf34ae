package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestPropfindAllpropInclude: RFC 4918 9.1 lets a client name, in
// DAV:include beside DAV:allprop, live properties that allprop leaves
// out; the RFC 4331 quota properties are such (sent only when asked for
// by name). berth ignored DAV:include.
func TestPropfindAllpropInclude(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("abc"))
	want(t, "PUT", st, http.StatusCreated, body)
	st, _, body = f.do("PROPFIND", "/", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`), "Depth", "0")
	want(t, "allprop", st, http.StatusMultiStatus, body)
	if strings.Contains(body, "quota-used-bytes") {
		t.Fatalf("allprop sends a quota property:\n%s", body)
	}
	inc := `<D:propfind xmlns:D="DAV:"><D:allprop/><D:include><D:quota-used-bytes/><D:getetag/></D:include></D:propfind>`
	st, _, body = f.do("PROPFIND", "/", strings.NewReader(inc), "Depth", "1")
	want(t, "allprop with include", st, http.StatusMultiStatus, body)
	contains(t, body, "<D:quota-used-bytes>", "<D:displayname>a.txt</D:displayname>")
	if c := strings.Count(body, "<D:getetag>"); c != 2 {
		t.Fatalf("%d getetag for 2 resources (an included property that allprop sends once):\n%s", c, body)
	}
	if c := strings.Count(body, "<D:quota-used-bytes>"); c != 1 {
		t.Fatalf("%d quota-used-bytes, want 1 (the folder; a file has none):\n%s", c, body)
	}
}
