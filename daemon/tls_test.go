package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"berth/atomicfile"
	"berth/config"
	"berth/rest"

	"berth/berthtest"
)

// TestTLSKeyErrorNamesTheKey: a damaged key fails the start with a
// message naming the key file, not only the certificate.
func TestTLSKeyErrorNamesTheKey(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	// generated makes a data directory with its generated pair.
	generated := func(t *testing.T) string {
		data := t.TempDir()
		if _, _, err := tlsConfig(config.TLS{}, data, log); err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, tc := range []struct {
		name string
		// damage breaks the pair of data and returns the configuration
		// to start with and the key file the error must name.
		damage func(t *testing.T, data string) (config.TLS, string)
	}{
		{"a corrupt generated key", func(t *testing.T, data string) (config.TLS, string) {
			key := filepath.Join(data, "tls", "key.pem")
			if err := os.WriteFile(key, []byte("not a key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			return config.TLS{}, key
		}},
		{"a configured key of another certificate", func(t *testing.T, data string) (config.TLS, string) {
			otherKey := filepath.Join(generated(t), "tls", "key.pem")
			return config.TLS{Cert: filepath.Join(data, "tls", "cert.pem"), Key: otherKey}, otherKey
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := generated(t)
			cfg, key := tc.damage(t, data)
			_, _, err := tlsConfig(cfg, data, log)
			if err == nil || !strings.Contains(err.Error(), key) {
				t.Errorf("%s: %v, want an error naming %s", tc.name, err, key)
			}
		})
	}
}

// servedSerial is the serial number of the certificate a new TLS
// connection to addr gets.
func servedSerial(t *testing.T, addr string) *big.Int {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestHangupReloadsCertificate: SIGHUP makes the running daemon serve a
// renewed certificate to new connections, a broken renewal keeps the one
// in use (and says so), and the daemon neither exits nor restarts.
func TestHangupReloadsCertificate(t *testing.T) {
	bin := berthtest.BuildBerth(t)
	data := t.TempDir()
	p := startDaemon(t, bin, data)
	addr := p.addrs["https"]
	first := servedSerial(t, addr)

	// A renewal: a new pair written over the files in use.
	renewed := t.TempDir()
	if _, err := ensureSelfSigned(renewed, filepath.Join(renewed, "cert.pem"), filepath.Join(renewed, "key.pem")); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cert.pem", "key.pem"} {
		b, err := os.ReadFile(filepath.Join(renewed, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := atomicfile.WriteFile(filepath.Join(data, "tls", f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if got := servedSerial(t, addr); got.Cmp(first) != 0 {
		t.Fatalf("the certificate changed before SIGHUP")
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	second := waitFor(t, 10*time.Second, func() (*big.Int, bool) {
		s := servedSerial(t, addr)
		return s, s.Cmp(first) != 0
	})

	// A broken renewal: the key no longer matches.
	if err := os.WriteFile(filepath.Join(data, "tls", "cert.pem"), []byte("-----BEGIN CERTIFICATE-----\ngarbage\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() (struct{}, bool) {
		return struct{}{}, strings.Contains(p.stderr(), "keeping the TLS certificate in use")
	})
	if got := servedSerial(t, addr); got.Cmp(second) != 0 {
		t.Errorf("after a broken renewal the served certificate is %v, want the one in use (%v)", got, second)
	}
	p.stop(t)
}

// TestPlainHTTPOnTLSListener: a client that speaks plain HTTP to the
// HTTPS port gets the spec's JSON 400 insecure_transport (spec 1, 7.1),
// as on the plain-HTTP listener, not net/http's text "Client sent an HTTP
// request to an HTTPS server."; TLS clients are served as before.
func TestPlainHTTPOnTLSListener(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "over TLS")
	}))
	srv.Listener = rejectPlainHTTP(srv.Listener, rest.InsecureHandler(), 64<<10)
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

// TestStrictTransportSecurity: every answer of the HTTPS listener carries
// Strict-Transport-Security, the API's and WebDAV's (an error's too) as
// the share-link pages' did alone before; the plain-HTTP listener's
// never does (RFC 6797 7.2).
func TestStrictTransportSecurity(t *testing.T) {
	_, data, p, _ := runningDaemon(t)
	c := trustingClient(t, filepath.Join(data, "tls", "cert.pem"))
	base := "https://" + p.addrs["https"]
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/api/2/version"},
		{http.MethodGet, "/api/2/person"},
		{"PROPFIND", "/webdav/"},
		{http.MethodGet, "/s/nosuchlinkatall"},
		{http.MethodGet, "/nowhere"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Strict-Transport-Security"); got != hsts {
			t.Errorf("%s %s (%d): Strict-Transport-Security %q, want %q", tc.method, tc.path, resp.StatusCode, got, hsts)
		}
	}
	resp, err := http.Get("http://" + p.addrs["http"] + "/api/2/version")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Strict-Transport-Security"); got != "" || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("plain HTTP: %d with Strict-Transport-Security %q, want 400 without", resp.StatusCode, got)
	}
}
