package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// rejectPlainHTTP wraps the HTTPS listener so that a client speaking plain
// HTTP to it is answered by h (rest.InsecureHandler: the spec's JSON 400
// insecure_transport, as on the plain-HTTP listener). net/http would
// answer such a client itself, in text ("Client sent an HTTP request to an
// HTTPS server."), and only for GET, HEAD, POST, PUT and OPTIONS; a
// PROPFIND got no answer at all.
//
// The check is made on the connection's first read, which the TLS
// handshake makes in the connection's own goroutine under the server's
// handshake deadline, so Accept never waits for a slow client.
//
// maxHead bounds what is read of such a request before it is answered
// (http.max_header_bytes, as for requests over TLS): a longer one is
// answered as a GET.
func rejectPlainHTTP(ln net.Listener, h http.Handler, maxHead int64) net.Listener {
	return &plainHTTPGuard{Listener: ln, h: h, maxHead: maxHead}
}

type plainHTTPGuard struct {
	net.Listener
	h       http.Handler
	maxHead int64
}

func (l *plainHTTPGuard) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &guardedConn{Conn: c, h: l.h, maxHead: l.maxHead}, nil
}

// errPlainHTTP ends the TLS handshake of a connection that spoke plain
// HTTP and has been answered.
var errPlainHTTP = errors.New("client spoke plain HTTP to the HTTPS port; answered 400 insecure_transport")

// guardedConn checks the first bytes a client sends.
type guardedConn struct {
	net.Conn
	h       http.Handler
	maxHead int64
	checked bool
}

func (c *guardedConn) Read(p []byte) (int, error) {
	if c.checked {
		return c.Conn.Read(p)
	}
	n, err := c.Conn.Read(p)
	if n == 0 {
		return n, err
	}
	c.checked = true
	// A TLS connection opens with a handshake record, content type 22;
	// no TLS record type is an ASCII letter, and every HTTP method
	// starts with one.
	if b := p[0] | 0x20; b < 'a' || b > 'z' {
		return n, err
	}
	c.answer(p[:n])
	c.Conn.Close()
	return 0, errPlainHTTP
}

// answer reads the plain request that starts with first and writes h's
// answer to it, closing the connection after. The request is read first
// so the client, still sending, is not reset before it reads the answer.
func (c *guardedConn) answer(first []byte) {
	br := bufio.NewReader(io.MultiReader(bytes.NewReader(first), io.LimitReader(c.Conn, c.maxHead)))
	req, err := http.ReadRequest(br)
	if err != nil {
		// Not a request net/http can read: answer as for a GET.
		req, _ = http.NewRequest(http.MethodGet, "/", nil)
	}
	rec := &bufferedResponse{header: http.Header{}}
	c.h.ServeHTTP(rec, req)
	resp := &http.Response{
		StatusCode:    rec.status,
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rec.header,
		Body:          io.NopCloser(&rec.body),
		ContentLength: int64(rec.body.Len()),
		Close:         true,
		Request:       req,
	}
	_ = c.Conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	// A failed write means the client is gone; nobody is left to tell.
	if resp.Write(c.Conn) != nil {
		return
	}
	// A client still sending a body (an upload) would get a reset for
	// the unread bytes, which can destroy the answer before it is read:
	// end our side, then read what comes for a moment, as net/http does
	// before it closes such a connection.
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.Conn.SetReadDeadline(time.Now().Add(plainLinger))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.Conn, maxPlainLinger))
}

// plainLinger and maxPlainLinger bound how long, and how much, a plain
// HTTP request's body is read after its answer.
const (
	plainLinger    = 500 * time.Millisecond
	maxPlainLinger = 16 << 20
)

// bufferedResponse is an http.ResponseWriter that keeps a small answer.
type bufferedResponse struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(status int) {
	if b.status == 0 {
		b.status = status
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}
