package webdav_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDestinationHostEquivalence: hosts compare without case and a
// scheme's default port is the same authority as none (RFC 3986 6.2.2.1,
// 6.2.3), so such a Destination names this server; it got 502 Bad
// Gateway as if it named another. Another host or port is still 502.
func TestDestinationHostEquivalence(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	u, _ := url.Parse(f.srv.URL)
	hostname, port := u.Hostname(), u.Port()
	send := func(hostHeader, dest string) (int, string) {
		req, _ := http.NewRequest("COPY", f.url("/a.txt"), nil)
		req.SetBasicAuth("alice", password)
		req.Host = hostHeader
		req.Header.Set("Destination", dest)
		req.Header.Set("Overwrite", "T")
		st, _, b := f.send(req)
		return st, b
	}
	st, body = send("LocalHost:"+port, "https://localhost:"+port+"/webdav/alice/b.txt")
	want(t, "host in another case", st, http.StatusCreated, body)
	st, body = send("localhost", "https://localhost:443/webdav/alice/c.txt")
	want(t, "default port spelled out", st, http.StatusCreated, body)
	st, body = send("localhost:443", "https://localhost/webdav/alice/d.txt")
	want(t, "default port in Host", st, http.StatusCreated, body)
	st, body = send(hostname+":"+port, "https://elsewhere.example:"+port+"/webdav/alice/e.txt")
	want(t, "another host", st, http.StatusBadGateway, body)
	st, body = send("localhost", "https://localhost:8443/webdav/alice/e.txt")
	want(t, "another port", st, http.StatusBadGateway, body)
}
