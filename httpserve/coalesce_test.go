package httpserve_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"berth/httpserve"
)

// countingListener counts the write calls made on its connections: the
// calls to the kernel that coalescing saves.
type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// TestCoalescedDownload: a download through a CoalesceListener has the
// same status, headers and body as through a plain one, over HTTP/1.1 and
// HTTP/2, whole or not; a large whole body over HTTP/1.1 takes a write
// call per 64 KiB instead of one per 16 KiB record (unless its body is
// made as it is sent, as a zip), a small one a single
// call instead of two, and a body failing midway still breaks the
// transfer, after all that was read.
func TestCoalescedDownload(t *testing.T) {
	const big = 3<<20 + 123
	content := make([]byte, big)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(content)
	for _, tc := range []struct {
		name   string
		h2     bool
		method string
		size   int
		hdr    []string
		failAt int64 // the body's read fails here; 0: never
		made   bool  // the body has no CopyTo (a zip made as it is sent): never held
		// maxWrites bounds the server's write calls with coalescing,
		// minPlain is the least without (0: no bound).
		maxWrites, minPlain int64
	}{
		{name: "large GET", method: "GET", size: big, maxWrites: big/(64<<10) + 10, minPlain: big / (16 << 10)},
		{name: "large GET over HTTP/2", h2: true, method: "GET", size: big},
		{name: "large HEAD", method: "HEAD", size: big, maxWrites: 10},
		{name: "small GET", method: "GET", size: 4096, maxWrites: 1, minPlain: 2},
		{name: "large range", method: "GET", size: big, hdr: []string{"Range", "bytes=100-2000000"}, maxWrites: 2000000/(64<<10) + 10, minPlain: 2000000 / (16 << 10)},
		{name: "unsatisfiable range", method: "GET", size: big, hdr: []string{"Range", "bytes=9000000-"}},
		{name: "not modified", method: "GET", size: big, hdr: []string{"If-None-Match", `"v1"`}},
		{name: "large GET of a body made as it is sent", method: "GET", size: big, made: true},
		{name: "large GET failing midway", method: "GET", size: big, failAt: 2<<20 + 7, maxWrites: (2<<20)/(64<<10) + 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errs [2]error
			serve := func(coalesce bool) (*http.Response, []byte, int64, error) {
				var writes atomic.Int64
				i := 0
				if coalesce {
					i = 1
				}
				srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					body := &copyingBody{failingBody{Reader: bytes.NewReader(content[:tc.size]), after: int64(tc.size)}}
					if tc.failAt > 0 {
						body.after = tc.failAt
					}
					var rs io.ReadSeeker = body
					if tc.made {
						rs = &body.failingBody
					}
					errs[i] = httpserve.ServeContent(w, r, httpserve.Content{Name: "a.bin", ETag: `"v1"`, Modified: time.Unix(1e9, 0), Body: rs})
					if errs[i] != nil {
						panic(http.ErrAbortHandler)
					}
				}))
				srv.Listener = countingListener{srv.Listener, &writes}
				if coalesce {
					srv.Listener = httpserve.CoalesceListener(srv.Listener)
					srv.Config.ConnContext = httpserve.ConnContext
				}
				srv.EnableHTTP2 = tc.h2
				srv.StartTLS()
				defer srv.Close()
				c := srv.Client()
				defer c.CloseIdleConnections()
				// The handshake's writes are not the download's.
				if _, err := c.Head(srv.URL + "/warm"); err != nil {
					t.Fatal(err)
				}
				req, _ := http.NewRequest(tc.method, srv.URL, nil)
				for j := 0; j+1 < len(tc.hdr); j += 2 {
					req.Header.Set(tc.hdr[j], tc.hdr[j+1])
				}
				before := writes.Load()
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if tc.h2 != (resp.ProtoMajor == 2) {
					t.Fatalf("served over %s", resp.Proto)
				}
				return resp, got, writes.Load() - before, err
			}
			plain, plainBody, plainWrites, plainErr := serve(false)
			held, heldBody, heldWrites, heldErr := serve(true)
			t.Logf("write calls: %d coalesced, %d plain; %d bytes", heldWrites, plainWrites, len(heldBody))
			// A failing body breaks the transfer after what was read,
			// all of it sent when coalesced, as much as left net/http's
			// buffers when not.
			sameBody := bytes.Equal(plainBody, heldBody)
			if tc.failAt > 0 {
				sameBody = bytes.HasPrefix(content, heldBody) && bytes.HasPrefix(content, plainBody)
			}
			if plain.StatusCode != held.StatusCode || !sameBody {
				t.Errorf("coalesced: %d, %d bytes; plain: %d, %d bytes", held.StatusCode, len(heldBody), plain.StatusCode, len(plainBody))
			}
			delete(plain.Header, "Date")
			delete(held.Header, "Date")
			if !equalHeaders(plain.Header, held.Header) {
				t.Errorf("headers\n%v\nplain\n%v", held.Header, plain.Header)
			}
			if tc.failAt > 0 {
				if heldErr == nil || plainErr == nil || !errors.Is(errs[1], errLost) {
					t.Errorf("failing body: client errors %v (plain %v), server %v", heldErr, plainErr, errs[1])
				}
				if int64(len(heldBody)) != tc.failAt {
					t.Errorf("failing body: %d bytes before the break, want about %d", len(heldBody), tc.failAt)
				}
			} else if heldErr != nil || plainErr != nil {
				t.Errorf("client errors %v (plain %v)", heldErr, plainErr)
			}
			if tc.made && heldWrites < big/(16<<10) {
				t.Errorf("%d write calls for a body made as it is sent: held back", heldWrites)
			}
			if tc.maxWrites > 0 && heldWrites > tc.maxWrites {
				t.Errorf("%d write calls coalesced, want at most %d", heldWrites, tc.maxWrites)
			}
			if tc.minPlain > 0 && plainWrites < tc.minPlain {
				t.Errorf("%d write calls without coalescing, want at least %d: the comparison shows nothing", plainWrites, tc.minPlain)
			}
		})
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if len(b[k]) != len(v) {
			return false
		}
		for i := range v {
			if b[k][i] != v[i] {
				return false
			}
		}
	}
	return true
}

// accepted dials cl and returns the server's end of the connection and
// what the client reads from it until it closes.
func accepted(t *testing.T, cl net.Listener) (net.Conn, <-chan []byte) {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		c, err := net.Dial("tcp", cl.Addr().String())
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	c, err := cl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	return c, got
}

// hold holds c as a download on it would.
func hold(c net.Conn) func() error {
	r := httptest.NewRequestWithContext(httpserve.ConnContext(context.Background(), c), "GET", "/", nil)
	return httpserve.Hold(httptest.NewRecorder(), r)
}

// TestCoalescedConn: what a held connection gathers reaches its peer, in
// order, on release or on Close, and never another connection's peer (a
// buffer handed back to the pool, grown or not, is empty); a connection
// of no CoalesceListener, under TLS or not, is never held; Close does not
// wait for a write stuck on a peer that stopped reading.
func TestCoalescedConn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl := httpserve.CoalesceListener(ln)
	defer cl.Close()
	big := bytes.Repeat([]byte("0123456789abcdef"), 40<<10/16) // past the first buffer
	for _, tc := range []struct {
		name   string
		writes [][]byte
		close  bool // close while held, without release
	}{
		{name: "small, released", writes: [][]byte{[]byte("a"), []byte("b")}},
		{name: "grown, released", writes: [][]byte{[]byte("a"), big, []byte("z")}},
		{name: "larger than a held write", writes: [][]byte{big, bytes.Repeat(big, 8), big}},
		{name: "closed while held", writes: [][]byte{[]byte("held")}, close: true},
		{name: "grown, closed while held", writes: [][]byte{big, []byte("z")}, close: true},
		{name: "small after the others", writes: [][]byte{[]byte("x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, got := accepted(t, cl)
			release := hold(c)
			var want []byte
			for _, w := range tc.writes {
				if _, err := c.Write(w); err != nil {
					t.Fatal(err)
				}
				want = append(want, w...)
			}
			if !tc.close {
				if err := release(); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				if err := release(); err != nil {
					t.Errorf("release after Close, with nothing left to send: %v", err)
				}
			}
			if b := <-got; !bytes.Equal(b, want) {
				t.Errorf("peer read %d bytes (%.20q...), want %d (%.20q...)", len(b), b, len(want), want)
			}
		})
	}
	t.Run("closed while a write is stuck", func(t *testing.T) {
		// A peer that never reads: the write blocks once the socket
		// buffers fill, and Close (as crypto/tls's, to break it) must
		// not wait for it.
		peer := make(chan net.Conn, 1)
		go func() {
			c, _ := net.Dial("tcp", cl.Addr().String())
			peer <- c
		}()
		c, err := cl.Accept()
		if err != nil {
			t.Fatal(err)
		}
		if p := <-peer; p != nil {
			defer p.Close()
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(make([]byte, 256<<20))
			wrote <- err
		}()
		time.Sleep(200 * time.Millisecond) // let the write fill the buffers
		closed := make(chan error, 1)
		go func() { closed <- c.Close() }()
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("Close waited for a stuck write")
		}
		if err := <-wrote; err == nil {
			t.Error("the stuck write succeeded after Close")
		}
	})
	p, q := net.Pipe()
	defer p.Close()
	defer q.Close()
	for _, c := range []net.Conn{p, tls.Server(q, &tls.Config{})} {
		if ctx := httpserve.ConnContext(t.Context(), c); ctx != t.Context() {
			t.Errorf("ConnContext took %T, of no CoalesceListener", c)
		}
	}
}
