package daemon

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"berth/rest"
)

// TestPlainHTTPOnTLSListener: a client that speaks plain HTTP to the
// HTTPS port gets the spec's JSON 400 insecure_transport (spec 1, 7.1),
// as on the plain-HTTP listener, not net/http's text "Client sent an HTTP
// request to an HTTPS server."; TLS clients are served as before.
func TestPlainHTTPOnTLSListener(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "over TLS")
	}))
	srv.Listener = rejectPlainHTTP(srv.Listener, rest.InsecureHandler())
	srv.StartTLS()
	defer srv.Close()

	const want = `{"error":"insecure_transport","error_description":"requests must use HTTPS"}`
	for _, req := range []string{
		"GET /api/2/version HTTP/1.1\r\nHost: x\r\n\r\n",
		"POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n\r\na=b",
		"PROPFIND /webdav/ HTTP/1.1\r\nHost: x\r\nDepth: 1\r\n\r\n",
		"HEAD / HTTP/1.0\r\n\r\n",
		"get / HTTP/1.1\r\nHost: x\r\n\r\n",
		"NOT A REQUEST\r\n\r\n",
	} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, req); err != nil {
			t.Fatal(err)
		}
		method, _, _ := strings.Cut(req, " ")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
		if err != nil {
			t.Fatalf("%q: %v", req, err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if method == http.MethodHead {
			body = []byte(want + "\n")
		}
		if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/json" ||
			strings.TrimSpace(string(body)) != want {
			t.Errorf("%q: %d %q %s", req, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}

	// A client still sending a large body reads the answer too, rather
	// than a reset for the bytes nobody read.
	for i := 0; i < 5; i++ {
		resp, err := http.Post("http://"+srv.Listener.Addr().String()+"/api/2/files/1/upload",
			"application/octet-stream", bytes.NewReader(make([]byte, 8<<20)))
		if err != nil {
			t.Fatalf("large POST: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || strings.TrimSpace(string(body)) != want {
			t.Fatalf("large POST: %d %s", resp.StatusCode, body)
		}
	}

	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "over TLS" {
		t.Fatalf("TLS: %d %q", resp.StatusCode, body)
	}
}
