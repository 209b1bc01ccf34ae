package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestHostileRequests: what a hostile client sends on the wire, to the
// real binary over TLS, and the answer each must get: malformed framing
// (the smuggling shapes net/http refuses), names and paths that are not
// clean, oversized or endless headers, amplifying Range and If headers,
// Destinations elsewhere, malformed OAuth bodies, slow clients, and
// HTTP/2's floods. Each held when issue 15's protocol review probed it;
// a row keeps it held against a change of server settings, Go version or
// handler. Every loop is bounded in count and time.
func TestHostileRequests(t *testing.T) {
	_, _, p, lc := runningDaemon(t, "--tls-http2")
	addr := p.addrs["https"]
	if st, _, err := lc.dav("PUT", "f.txt", strings.NewReader("0123456789")); err != nil || st != http.StatusCreated {
		t.Fatalf("PUT f.txt: %d %v", st, err)
	}
	basic := "Authorization: Basic " + basicAuth("admin", lc.password) + "\r\n"
	bearer := "Authorization: Bearer " + lc.token + "\r\n"
	// Over Badger's 65,000-byte keys, under http.max_header_bytes
	// (64 KiB, and net/http's 4 KiB of slack).
	long := strings.Repeat("h", 66000)
	form := func(body string) string {
		return fmt.Sprintf("Content-Type: application/x-www-form-urlencoded\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	ranges := make([]string, 3000)
	for i := range ranges {
		ranges[i] = fmt.Sprintf("%d-%d", i%10, i%10)
	}
	for _, c := range []struct {
		name string
		req  string // after the request line's method and target: the rest is built here
		want int
	}{
		// Framing: net/http refuses what could be read two ways.
		{"Content-Length twice, differing", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcde", 400},
		{"a Transfer-Encoding other than chunked", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n", 501},
		{"a negative Content-Length", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400},
		{"a Content-Length with a sign", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Length: +4\r\n\r\nabcd", 400},
		{"a NUL in the request line", "GET /webdav/admin/f\x00.txt HTTP/1.1\r\nHost: x\r\n" + basic + "\r\n", 400},
		{"a Host with a space", "GET /api/2/version HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"an HTTP/2.0 request line", "GET /api/2/version HTTP/2.0\r\nHost: x\r\n\r\n", 505},
		{"headers over 1 MiB", "GET /api/2/version HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431},
		// http.max_header_bytes (64 KiB): net/http's 1 MiB let one
		// address's connections hold a gigabyte of headers at once.
		{"headers over 64 KiB", "GET /api/2/version HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 100<<10) + "\r\n\r\n", 431},
		{"headers of 56 KiB", "GET /api/2/version HTTP/1.1\r\nHost: x\r\nX-A: " + strings.Repeat("a", 56<<10) + "\r\n\r\n", 200},
		{"an Expect other than 100-continue", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 1\r\n\r\nx", 417},
		// No 100 Continue before the credentials are checked: the first
		// status line is the 401.
		{"Expect: 100-continue without credentials", "PUT /webdav/admin/e.txt HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n", 401},

		// Names and paths: refused, never reinterpreted.
		{"an escaped NUL in a name", "PUT /webdav/admin/g%00.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"an overlong UTF-8 slash in a name", "PUT /webdav/admin/a%C0%AFb HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"invalid UTF-8 in a name", "PUT /webdav/admin/a%FF HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"U+FFFE in a name", "PUT /webdav/admin/a%EF%BF%BE HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"an escaped backslash", "PUT /webdav/admin/a%5Cb HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"a backslash", "PUT /webdav/admin/a\\b HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n" + basic + "\r\nx", 400},
		{"escaped dot segments", "GET /webdav/admin/%2e%2e/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "\r\n", 400},
		{"dot segments on REST", "GET /api/2/files/../version HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"a Destination on another host", "COPY /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Destination: https://evil.example/webdav/admin/c.txt\r\n\r\n", 502},
		{"a Destination without a scheme on another host", "COPY /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Destination: //evil.example/webdav/admin/c.txt\r\n\r\n", 502},
		{"a Destination of another scheme", "COPY /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Destination: file:///webdav/admin/c.txt\r\n\r\n", 502},
		{"a Destination with escaped dot segments", "COPY /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Destination: /webdav/admin/%2e%2e/other/c.txt\r\n\r\n", 400},

		// Headers that would multiply the work.
		{"3,000 ranges get the whole file", "GET /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Range: bytes=" + strings.Join(ranges, ",") + "\r\n\r\n", 200},
		{"100 overlapping ranges get the whole file", "GET /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "Range: bytes=" + strings.Join(ranges[:100], ",") + "\r\n\r\n", 200},
		{"an If of 5,000 lists", "GET /webdav/admin/f.txt HTTP/1.1\r\nHost: x\r\n" + basic + "If: " + strings.Repeat("(<urn:x>)", 5000) + "\r\n\r\n", 400},

		// Identifiers longer than a metadata key may be (Badger's 65,000
		// bytes) are unknown, not a store error.
		{"a share-link hash of 66 KB", "GET /s/" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", 404},
		{"a share-link reference of 66 KB", "GET /api/2/sharelinks/" + long + "/files/children HTTP/1.1\r\nHost: x\r\n" + bearer + "\r\n", 404},
		// Encoded, a username longer than a key is longer than the headers may be.
		{"a Basic username of 66 KB", "PROPFIND /webdav/ HTTP/1.1\r\nHost: x\r\nDepth: 0\r\nAuthorization: Basic " + base64.StdEncoding.EncodeToString([]byte(long+":pw")) + "\r\n\r\n", 431},
		{"a Basic username of 48 KB", "PROPFIND /webdav/ HTTP/1.1\r\nHost: x\r\nDepth: 0\r\nAuthorization: Basic " + base64.StdEncoding.EncodeToString([]byte(long[:48000]+":pw")) + "\r\n\r\n", 401},
		{"a Bearer token of 66 KB", "GET /api/2/person HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + long + "\r\n\r\n", 401},
		{"a root name of 66 KB", "PROPFIND /webdav/" + long + " HTTP/1.1\r\nHost: x\r\nDepth: 0\r\n" + basic + "\r\n", 404},
		{"a tus upload id of 66 KB", "HEAD /api/2/tus/" + long + " HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n" + bearer + "\r\n", 404},
		{"a refresh token of 64 KB", "POST /oauth/token HTTP/1.1\r\nHost: x\r\n" + form("grant_type=refresh_token&client_id=anchor&refresh_token="+long[:65000]), 400},

		// OAuth bodies.
		{"an OAuth parameter repeated", "POST /oauth/token HTTP/1.1\r\nHost: x\r\n" + form("grant_type=password&grant_type=refresh_token&client_id=anchor"), 400},
		{"an OAuth body of JSON", "POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}", 400},
		{"an OAuth form over 64 KiB", "POST /oauth/token HTTP/1.1\r\nHost: x\r\n" + form(strings.Repeat("a=b&", 50000)), 400},
		{"an OAuth form with a bad escape", "POST /oauth/token HTTP/1.1\r\nHost: x\r\n" + form("client_id=anchor&grant_type%"), 400},
		{"an authorization-code request", "GET /oauth/authorize?response_type=code&client_id=anchor&redirect_uri=https://evil.example/ HTTP/1.1\r\nHost: x\r\n\r\n", 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, err := onTheWire(addr, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
		})
	}

	// A client that sends its headers a byte a second, or opens a
	// connection and says nothing, is cut off at the header timeout
	// (10 s), well before 30 s.
	t.Run("slow headers and silent connections are cut off", func(t *testing.T) {
		silent, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer silent.Close()
		cut := make(chan error, 1)
		go func() {
			silent.SetReadDeadline(time.Now().Add(30 * time.Second))
			_, err := io.Copy(io.Discard, silent)
			cut <- err
		}()
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		head := "GET /api/2/version HTTP/1.1\r\nHost: x\r\nX-Slow: " + strings.Repeat("a", 40)
		start := time.Now()
		for i := 0; i < len(head); i++ {
			if _, err := c.Write([]byte{head[i]}); err != nil {
				break
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := c.Read(make([]byte, 512)); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				break // answered (408) or closed
			}
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Fatalf("slow headers held the connection %v", d)
		}
		if err := <-cut; err != nil {
			t.Fatalf("a silent connection was not closed within 30 s: %v", err)
		}
	})

	// HTTP/2: at most 250 streams at once (token requests whose bodies
	// never come hold theirs), the rest refused; a
	// CONTINUATION flood ends the connection; a rapid reset of 2,000
	// streams leaves the server answering.
	t.Run("HTTP/2 streams over the limit are refused", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		defer c.Close()
		for i := uint32(0); i < 300; i++ {
			head := h2Head("POST", "/oauth/token", "content-type", "application/x-www-form-urlencoded")
			if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2*i + 1, BlockFragment: head, EndHeaders: true}); err != nil {
				t.Fatal(err)
			}
		}
		if got := h2Frames(c, fr, 3*time.Second)["RST_STREAM:REFUSED_STREAM"]; got < 50 {
			t.Fatalf("%d of 300 streams open at once refused, want at least 50", got)
		}
	})
	t.Run("HTTP/2 CONTINUATION flood ends the connection", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		defer c.Close()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: h2Get("/api/2/version")})
		junk := bytes.Repeat([]byte{0x40, 0x01, 'x', 0x7f, 0x00}, 3000)
		for i := 0; i < 2000; i++ {
			if fr.WriteContinuation(1, false, junk) != nil {
				break
			}
		}
		if got := h2Frames(c, fr, 5*time.Second); got["GOAWAY:PROTOCOL_ERROR"]+got["GOAWAY:ENHANCE_YOUR_CALM"] == 0 {
			t.Fatalf("no GOAWAY after a CONTINUATION flood: %v", got)
		}
	})
	t.Run("HTTP/2 rapid reset leaves the server answering", func(t *testing.T) {
		c, fr := h2Dial(t, addr)
		defer c.Close()
		start := time.Now()
		for i := uint32(0); i < 2000 && time.Since(start) < 10*time.Second; i++ {
			id := 2*i + 1
			if fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h2Get("/api/2/version"), EndStream: true, EndHeaders: true}) != nil ||
				fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				break
			}
		}
		if st, body := lc.do("GET", "/api/2/version", nil, ""); st != http.StatusOK {
			t.Fatalf("after a rapid reset: %d %s", st, body)
		}
	})
}

// onTheWire sends req as it is over a new TLS connection (HTTP/1.1) and
// reads the first answer.
func onTheWire(addr, req string) (*http.Response, error) {
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	// Written beside the read: the server may answer (431, 400) before
	// it has taken the whole request.
	go io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp, nil
}

// h2Dial opens an HTTP/2 connection and sends the preface and settings.
func h2Dial(t *testing.T, addr string) (*tls.Conn, *http2.Framer) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN %q, want h2", p)
	}
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	return c, fr
}

// h2Get is the header block of a GET of path.
func h2Get(path string) []byte { return h2Head("GET", path) }

// h2Head is the header block of a request, with extra fields (name,
// value pairs).
func h2Head(method, path string, extra ...string) []byte {
	var b bytes.Buffer
	e := hpack.NewEncoder(&b)
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", "x"}, {":path", path}} {
		e.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		e.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return b.Bytes()
}

// h2Frames counts the frames the server sends until it closes or is
// silent for d, by type and, for RST_STREAM and GOAWAY, error code.
func h2Frames(c net.Conn, fr *http2.Framer, d time.Duration) map[string]int {
	got := map[string]int{}
	for {
		c.SetReadDeadline(time.Now().Add(d))
		f, err := fr.ReadFrame()
		if err != nil {
			return got
		}
		k := f.Header().Type.String()
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			k += ":" + f.ErrCode.String()
		case *http2.RSTStreamFrame:
			k += ":" + f.ErrCode.String()
		}
		got[k]++
	}
}
