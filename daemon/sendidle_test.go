package daemon

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

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
	bin := buildBinary(t)
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
	id := lc.fileID("big.bin")
	// get sends a GET of the file over REST (rest) or WebDAV on a
	// connection of its own and returns the answer, its body unread.
	get := func(t *testing.T, rest bool) *http.Response {
		t.Helper()
		conn, err := tls.Dial("tcp", p.addrs["https"], &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		target, auth := "/webdav/admin/big.bin", "Basic "+basicAuth("admin", lc.password)
		if rest {
			target, auth = fmt.Sprintf("/api/2/files/%d/%d/download", lc.root, id), "Bearer "+lc.token
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: %s\r\n\r\n", target, p.addrs["https"], auth)
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %v %v", target, resp, err)
		}
		return resp
	}

	t.Run("stalled", func(t *testing.T) {
		for _, rest := range []bool{true, false} {
			resp := get(t, rest)
			first := make([]byte, 1<<20)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatal(err)
			}
			time.Sleep(2 * idle)
			n, err := io.Copy(io.Discard, resp.Body)
			if got := int64(len(first)) + n; got >= int64(len(big)) || err == nil {
				t.Fatalf("rest %v: after a stall of %v the transfer went on: %d of %d bytes, %v", rest, 2*idle, got, len(big), err)
			}
		}
		// The REST handler ended: its request is logged, short of the file.
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, line := range strings.Split(p.stderr(), "\n") {
				var rec struct {
					Msg, Route string
					Bytes      int64
				}
				if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "request" && strings.HasSuffix(rec.Route, "/{item}/{sub}") {
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
		for _, rest := range []bool{true, false} {
			resp := get(t, rest)
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
						t.Fatalf("rest %v: slow reader cut after %d of %d bytes: %v", rest, got, len(big), err)
					}
					break
				}
				if got < 20<<20 {
					time.Sleep(250 * time.Millisecond)
				}
			}
			if got != len(big) {
				t.Fatalf("rest %v: slow reader got %d of %d bytes", rest, got, len(big))
			}
		}
	})
	p.stop(t)
}
