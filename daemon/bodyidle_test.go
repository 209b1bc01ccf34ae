package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestStalledBodyTimesOut: a client that sends half a body and then
// nothing more (over REST upload, WebDAV PUT and the token endpoint) is
// answered 408 within http.body_idle_timeout, its connection is closed
// and nothing is stored; a body that keeps arriving, slowly, with pauses
// shorter than the timeout but in all much longer than it, is not cut.
func TestStalledBodyTimesOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const idle = time.Second
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--http-body-idle-timeout", idle.String())
	lc := newLCClient(t, p, data)
	pool := certPool(t, filepath.Join(data, "tls", "cert.pem"))

	half := bytes.Repeat([]byte("x"), 256<<10)
	const boundary = "stalledboundary"
	preamble := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"stalled-rest.bin\"\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n"
	cases := []struct {
		name    string
		head    string // request line and headers, without Content-Length
		sent    []byte // the part of the body that is sent
		length  int    // the declared Content-Length
		file    string // must not exist afterwards; "" for none
		wantErr string // the JSON error code, "" for a WebDAV answer
	}{
		{
			name: "REST upload",
			head: fmt.Sprintf("POST /api/2/files/%d/upload HTTP/1.1\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: multipart/form-data; boundary=%s\r\n", lc.root, lc.token, boundary),
			sent:    append([]byte(preamble), half...),
			length:  len(preamble) + 2*len(half) + len("\r\n--"+boundary+"--\r\n"),
			file:    "stalled-rest.bin",
			wantErr: "invalid_request",
		},
		{
			name:   "WebDAV PUT",
			head:   "PUT /webdav/admin/stalled-dav.bin HTTP/1.1\r\nAuthorization: Basic " + basicAuth("admin", lc.password) + "\r\n",
			sent:   half,
			length: 2 * len(half),
			file:   "stalled-dav.bin",
		},
		{
			name:    "token endpoint",
			head:    "POST /oauth/token HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			sent:    []byte("grant_type=password&client_id=anchor&"),
			length:  200,
			wantErr: "invalid_request",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := tls.Dial("tcp", p.addrs["https"], &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			req := fmt.Sprintf("%sHost: %s\r\nContent-Length: %d\r\n\r\n", tc.head, p.addrs["https"], tc.length)
			if _, err := conn.Write(append([]byte(req), tc.sent...)); err != nil {
				t.Fatal(err)
			}
			stalled := time.Now()
			conn.SetReadDeadline(stalled.Add(10 * idle))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer to a stalled body after %v: %v", time.Since(stalled), err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			waited := time.Since(stalled)
			if resp.StatusCode != http.StatusRequestTimeout {
				t.Errorf("status %d %s, want 408", resp.StatusCode, body)
			}
			if waited > idle+time.Second {
				t.Errorf("answered after %v, the timeout is %v", waited, idle)
			}
			if tc.wantErr != "" {
				var e struct{ Error string }
				if json.Unmarshal(body, &e) != nil || e.Error != tc.wantErr {
					t.Errorf("body %s, want error %q", body, tc.wantErr)
				}
			}
			// The rest of the body will never come: the connection ends.
			if !resp.Close {
				t.Error("the answer does not say Connection: close")
			}
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection stays open after the answer (read %d bytes)", n)
			}
			if tc.file != "" {
				if status, _ := lc.read(tc.file); status != http.StatusNotFound {
					t.Errorf("GET %s after the stalled upload: %d, want 404", tc.file, status)
				}
			}
		})
	}

	t.Run("slow but progressing", func(t *testing.T) {
		// 20 pauses of 400 ms: each shorter than the timeout, 8 s in all.
		want := content(3, 512<<10)
		var wg sync.WaitGroup
		for _, dav := range []bool{false, true} {
			name := fmt.Sprintf("slow-%v.bin", dav)
			wg.Go(func() {
				status, err := lc.slowUpload(name, want, 8*time.Second, dav)
				if err != nil || (status != http.StatusOK && status != http.StatusCreated) {
					t.Errorf("slow upload (webdav %v): %d %v", dav, status, err)
				}
			})
		}
		wg.Wait()
		for _, dav := range []bool{false, true} {
			name := fmt.Sprintf("slow-%v.bin", dav)
			if status, got := lc.read(name); status != http.StatusOK || !bytes.Equal(got, want) {
				t.Errorf("GET %s: %d, %d bytes, want %d", name, status, len(got), len(want))
			}
		}
	})
	if strings.Contains(p.stderr(), "panic") {
		t.Errorf("the server panicked:\n%s", p.stderr())
	}
	p.stop(t)
}

// basicAuth is the credentials part of an Authorization: Basic header.
func basicAuth(user, password string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
}

// TestUnreadBodyBounded: a request whose handler answers without reading
// the body (no credentials, a route that takes none, the plain-HTTP
// listener) and whose client then sends none of the body it announced is
// answered and closed within http.body_idle_timeout. net/http reads up
// to 256 KiB of an unread body before it writes the answer, and without
// a deadline on that read such a client held its connection, unanswered,
// for as long as it liked: anyone could pile up connections until the
// daemon ran out of file descriptors.
func TestUnreadBodyBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const idle = time.Second
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--http-body-idle-timeout", idle.String())
	pool := certPool(t, filepath.Join(data, "tls", "cert.pem"))
	for _, tc := range []struct {
		name, listener, head string
	}{
		{"version, Content-Length", "https", "GET /api/2/version HTTP/1.1\r\nContent-Length: 100\r\n"},
		{"upload without a token, chunked", "https", "POST /api/2/files/1/upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"},
		{"WebDAV without credentials", "https", "PROPFIND /webdav/ HTTP/1.1\r\nContent-Length: 100\r\n"},
		{"plain-HTTP listener", "http", "POST /oauth/token HTTP/1.1\r\nContent-Length: 100\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := p.addrs[tc.listener]
			var conn net.Conn
			var err error
			if tc.listener == "https" {
				conn, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
			} else {
				conn, err = net.Dial("tcp", addr)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "%sHost: %s\r\n\r\n", tc.head, addr); err != nil {
				t.Fatal(err)
			}
			sent := time.Now()
			conn.SetReadDeadline(sent.Add(10 * idle))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer after %v to a request whose body never came: %v", time.Since(sent), err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection stays open after the answer (read %d bytes)", n)
			} else if waited := time.Since(sent); waited > idle+2*time.Second {
				t.Errorf("the connection was closed after %v, the timeout is %v", waited, idle)
			}
		})
	}
	p.stop(t)
}
