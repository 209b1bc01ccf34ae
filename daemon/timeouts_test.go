package daemon

import (
	"bufio"
	"bytes"
	"crypto/tls"
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

	"berth/berthtest"
)

// TestBodyIdleTimeout: a request body that stops arriving is bounded by
// http.body_idle_timeout.
//
// A client that sends half a body and then nothing more (over REST
// upload, WebDAV PUT and the token endpoint) is answered 408 within the
// timeout, its connection is closed and nothing is stored
// (TestStalledBodyTimesOut).
//
// A request whose handler answers without reading the body (no
// credentials, a route that takes none, the plain-HTTP listener) and
// whose client then sends none of the body it announced is answered and
// closed within the timeout (TestUnreadBodyBounded). net/http reads up to
// 256 KiB of an unread body before it writes the answer, and without a
// deadline on that read such a client held its connection, unanswered,
// for as long as it liked: anyone could pile up connections until the
// daemon ran out of file descriptors.
//
// A body that keeps arriving, slowly, with pauses shorter than the
// timeout but in all much longer than it, is not cut.
func TestBodyIdleTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const idle = time.Second
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--http-body-idle-timeout", idle.String())
	lc := newLCClient(t, p, data)
	pool := certPool(t, filepath.Join(data, "tls", "cert.pem"))

	half := bytes.Repeat([]byte("x"), 256<<10)
	const boundary = "stalledboundary"
	preamble := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"stalled-rest.bin\"\r\n" +
		"Content-Type: application/octet-stream\r\n\r\n"
	cases := []struct {
		name     string
		listener string // "https" or "http"
		head     string // request line and headers, without Host (nor Content-Length where length is set)
		sent     []byte // the part of the body that is sent
		length   int    // the declared Content-Length; 0 where head declares the body
		// read: the handler reads the body, so the stall is answered
		// 408 within the timeout with Connection: close.
		read    bool
		file    string // must not exist afterwards; "" for none
		wantErr string // the JSON error code of a 408, "" for a WebDAV answer
	}{
		{
			name:     "stalled body, REST upload",
			listener: "https",
			head: fmt.Sprintf("POST /api/2/files/%d/upload HTTP/1.1\r\nAuthorization: Bearer %s\r\n"+
				"Content-Type: multipart/form-data; boundary=%s\r\n", lc.root, lc.token, boundary),
			sent:    append([]byte(preamble), half...),
			length:  len(preamble) + 2*len(half) + len("\r\n--"+boundary+"--\r\n"),
			read:    true,
			file:    "stalled-rest.bin",
			wantErr: "invalid_request",
		},
		{
			name:     "stalled body, WebDAV PUT",
			listener: "https",
			head:     "PUT /webdav/admin/stalled-dav.bin HTTP/1.1\r\nAuthorization: Basic " + basicAuth("admin", lc.password) + "\r\n",
			sent:     half,
			length:   2 * len(half),
			read:     true,
			file:     "stalled-dav.bin",
		},
		{
			name:     "stalled body, token endpoint",
			listener: "https",
			head:     "POST /oauth/token HTTP/1.1\r\nContent-Type: application/x-www-form-urlencoded\r\n",
			sent:     []byte("grant_type=password&client_id=anchor&"),
			length:   200,
			read:     true,
			wantErr:  "invalid_request",
		},
		{name: "unread body, version, Content-Length", listener: "https", head: "GET /api/2/version HTTP/1.1\r\nContent-Length: 100\r\n"},
		{name: "unread body, upload without a token, chunked", listener: "https", head: "POST /api/2/files/1/upload HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"},
		{name: "unread body, WebDAV without credentials", listener: "https", head: "PROPFIND /webdav/ HTTP/1.1\r\nContent-Length: 100\r\n"},
		{name: "unread body, plain-HTTP listener", listener: "http", head: "POST /oauth/token HTTP/1.1\r\nContent-Length: 100\r\n"},
	}
	for _, tc := range cases {
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
			req := tc.head + "Host: " + addr + "\r\n"
			if tc.length > 0 {
				req += fmt.Sprintf("Content-Length: %d\r\n", tc.length)
			}
			if _, err := conn.Write(append([]byte(req+"\r\n"), tc.sent...)); err != nil {
				t.Fatal(err)
			}
			stalled := time.Now()
			conn.SetReadDeadline(stalled.Add(10 * idle))
			br := bufio.NewReader(conn)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer after %v to a request whose body never came: %v", time.Since(stalled), err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if tc.read {
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
			}
			if n, err := br.Read(make([]byte, 1)); err == nil {
				t.Errorf("the connection stays open after the answer (read %d bytes)", n)
			} else if waited := time.Since(stalled); waited > idle+2*time.Second {
				t.Errorf("the connection was closed after %v, the timeout is %v", waited, idle)
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

// TestStalledReaderDropped: a client that stops taking a download is
// dropped within http.send_idle_timeout: its transfer ends short of the
// file and the request's log line says so; a client that keeps reading,
// slowly, with pauses shorter than the timeout but in all much longer
// than it, gets the whole file.
func TestStalledReaderDropped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const idle = 2 * time.Second
	bin := berthtest.BuildBerth(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--http-send-idle-timeout", idle.String())
	lc := newLCClient(t, p, data)
	pool := certPool(t, filepath.Join(data, "tls", "cert.pem"))
	// More than the loopback socket buffers of both ends hold, so the
	// server's writes block while the client does not read.
	big := content(5, 64<<20)
	if status, err := lc.upload("big.bin", big, true); err != nil || status != http.StatusCreated {
		t.Fatalf("upload: %d %v", status, err)
	}
	if status, err := lc.upload("small.bin", content(6, 4096), true); err != nil || status != http.StatusCreated {
		t.Fatalf("upload: %d %v", status, err)
	}
	// The big file's GET comes on a fresh connection, right after a
	// small GET on the same one, and after a small GET and a pause past
	// the timeout: a deadline left by an earlier answer, or one skipped
	// because it was moved a moment ago, must neither spare a stalled
	// reader nor cut a progressing one. (net/http clears the deadline
	// after each answer: a deadline shared by a connection's requests
	// failed the second row.)
	type before struct {
		name  string
		small bool
		pause time.Duration
	}
	befores := []before{{"fresh connection", false, 0}, {"after a small GET", true, 0}, {"after a small GET and a pause", true, idle + idle/2}}
	// get sends a GET of the file over REST (rest) or WebDAV on a
	// connection of its own, after b, and returns the answer, its body
	// unread.
	get := func(t *testing.T, rest bool, b before) *http.Response {
		t.Helper()
		conn, err := tls.Dial("tcp", p.addrs["https"], &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		br := bufio.NewReader(conn)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		send := func(name string) *http.Response {
			target, auth := "/webdav/admin/"+name, "Basic "+basicAuth("admin", lc.password)
			if rest {
				target, auth = fmt.Sprintf("/api/2/files/%d/%d/download", lc.root, lc.fileID(name)), "Bearer "+lc.token
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n", target, p.addrs["https"], auth)
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: GET %s: %v %v", b.name, target, resp, err)
			}
			return resp
		}
		if b.small {
			resp := send("small.bin")
			if n, err := io.Copy(io.Discard, resp.Body); n != 4096 || err != nil {
				t.Fatalf("%s: small GET: %d bytes, %v", b.name, n, err)
			}
			time.Sleep(b.pause)
		}
		return send("big.bin")
	}

	t.Run("stalled", func(t *testing.T) {
		for _, b := range befores[:2] {
			for _, rest := range []bool{true, false} {
				resp := get(t, rest, b)
				first := make([]byte, 1<<20)
				if _, err := io.ReadFull(resp.Body, first); err != nil {
					t.Fatal(err)
				}
				time.Sleep(2 * idle)
				n, err := io.Copy(io.Discard, resp.Body)
				if got := int64(len(first)) + n; got >= int64(len(big)) || err == nil {
					t.Fatalf("%s, rest %v: after a stall of %v the transfer went on: %d of %d bytes, %v", b.name, rest, 2*idle, got, len(big), err)
				}
			}
		}
		// The REST handler ended: its request is logged, short of the
		// file (and longer than the small file's GETs before it).
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, line := range strings.Split(p.stderr(), "\n") {
				var rec struct {
					Msg, Route string
					Bytes      int64
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && strings.HasSuffix(rec.Route, "/{item}/{sub}") && rec.Bytes > 4096 {
					if rec.Bytes >= int64(len(big)) {
						t.Fatalf("the stalled download is logged with %d bytes, the whole file", rec.Bytes)
					}
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Errorf("no request log line for the stalled download:\n%s", p.stderr())
	})

	t.Run("slow but progressing", func(t *testing.T) {
		for _, b := range []before{befores[0], befores[2]} {
			for _, rest := range []bool{true, false} {
				resp := get(t, rest, b)
				// 1 MiB every 250 ms for the first 20 MiB: each pause far
				// shorter than the timeout (the kernel wakes a blocked
				// writer only once a good part of its buffer is free, so
				// a write may wait out several), 5 s in all, and the
				// server's writes wait on them.
				got := 0
				buf := make([]byte, 1<<20)
				for {
					n, err := io.ReadFull(resp.Body, buf)
					got += n
					if err != nil {
						if err != io.EOF && err != io.ErrUnexpectedEOF {
							t.Fatalf("%s, rest %v: slow reader cut after %d of %d bytes: %v", b.name, rest, got, len(big), err)
						}
						break
					}
					if got < 20<<20 {
						time.Sleep(250 * time.Millisecond)
					}
				}
				if got != len(big) {
					t.Fatalf("%s, rest %v: slow reader got %d of %d bytes", b.name, rest, got, len(big))
				}
			}
		}
	})
	p.stop(t)
}
