package httpserve

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"sync"
)

// Coalescing. TLS sends at most 16 KiB in a record, and crypto/tls writes
// each record to the connection on its own: a 1 GiB download is 65,536
// write calls, each one a trip through the kernel's TCP stack. Measured
// on this project's 2-core VM (1 GiB over loopback TLS, Go client, five
// runs each under load 11), writing the records 256 KiB at a time (now 64
// KiB, see coalesceSize) took
// 1.74 to 2.13 CPU seconds (median 1.86) against 2.12 to 2.35 (2.24) one
// record at a time. A small answer gains too: net/http writes a 4 KiB
// body as two records, one when its 4 KiB buffer fills and one at the end,
// so two write calls where one does. A download therefore holds its
// connection's records (Hold) while it writes its body, and sends them
// together when it releases it. Only an HTTP/1 answer holds: there the
// handler is the connection's only writer and never waits for the client
// mid-answer, while an HTTP/2 connection carries other streams and flow
// control, which records held back would stall.

// coalesceSize is what a held connection gathers before it writes. It is
// at most what the daemon's send-idle timeout lets one write take
// (maxIdleWrite in daemon/sendidle.go): a larger write under one deadline
// would cut a slow client that an uncoalesced answer keeps. A
// hold starts with a buffer of smallHold, enough for a small answer's
// records, and takes one of coalesceSize only when that fills: 32
// connections each taking 256 KiB for a 4 KiB answer cost more in fresh
// memory after every collection than the write call saved.
const (
	coalesceSize = 65 << 10 // four full records of 16 KiB, with their framing
	smallHold    = 32 << 10
)

// CoalesceListener wraps ln so that a download can hold the records of
// its connection (Hold). Put it below TLS (tls.NewListener, ServeTLS),
// with ConnContext as the server's, which hands each request its
// connection.
func CoalesceListener(ln net.Listener) net.Listener { return coalesceListener{ln} }

type coalesceListener struct{ net.Listener }

func (l coalesceListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &coalesceConn{Conn: c}, nil
}

// coalesceConn writes through unless held; held, it gathers writes up to
// coalesceSize. The mutex orders the holder's writes with any other
// writer's (crypto/tls's close_notify on Close from another goroutine).
type coalesceConn struct {
	net.Conn
	mu   sync.Mutex
	buf  *[]byte // nil unless held
	held int     // nested holds
}

var (
	smallBufs    = sync.Pool{New: func() any { b := make([]byte, 0, smallHold); return &b }}
	coalesceBufs = sync.Pool{New: func() any { b := make([]byte, 0, coalesceSize); return &b }}
)

func (c *coalesceConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buf == nil {
		return c.Conn.Write(p)
	}
	b := *c.buf
	if len(b)+len(p) > cap(b) && cap(b) < coalesceSize {
		big := coalesceBufs.Get().(*[]byte)
		*big = append((*big)[:0], b...)
		putBuf(c.buf)
		c.buf, b = big, *big
	}
	if len(b)+len(p) > cap(b) {
		if err := c.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) >= coalesceSize {
			return c.Conn.Write(p)
		}
	}
	*c.buf = append(*c.buf, p...)
	return len(p), nil
}

// flushLocked writes what is gathered.
func (c *coalesceConn) flushLocked() error {
	b := *c.buf
	*c.buf = b[:0]
	if len(b) == 0 {
		return nil
	}
	_, err := c.Conn.Write(b)
	return err
}

// hold starts gathering writes.
func (c *coalesceConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held++; c.buf == nil {
		c.buf = smallBufs.Get().(*[]byte)
		*c.buf = (*c.buf)[:0]
	}
}

// release ends one hold; the last one writes what is gathered.
func (c *coalesceConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held--; c.held > 0 {
		return nil
	}
	err := c.flushLocked()
	putBuf(c.buf)
	c.buf = nil
	return err
}

// putBuf returns b to its pool, emptied: what one connection gathered
// must never be written to another.
func putBuf(b *[]byte) {
	*b = (*b)[:0]
	if cap(*b) < coalesceSize {
		smallBufs.Put(b)
	} else {
		coalesceBufs.Put(b)
	}
}

// Close sends what is still gathered first, as a write would have. A
// write under way (a client that stopped reading) holds c.mu, and
// crypto/tls closes the connection precisely to break it: Close then
// closes at once instead of waiting for that write's deadline.
func (c *coalesceConn) Close() error {
	if !c.mu.TryLock() {
		return c.Conn.Close()
	}
	if c.buf != nil {
		_ = c.flushLocked()
	}
	c.mu.Unlock()
	return c.Conn.Close()
}

// connKey is the context key of a request's coalescing connection.
type connKey struct{}

// ConnContext is an http.Server's ConnContext that hands each request the
// coalescing connection under it (CoalesceListener), for Hold.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if cc, ok := c.(*coalesceConn); ok {
		return context.WithValue(ctx, connKey{}, cc)
	}
	return ctx
}

// Hold gathers the records of r's connection into large writes until the
// returned release, which flushes w (net/http's buffers) when the answer's
// Content-Length is set, writes what is gathered, and must be called
// before the handler returns; its error is a
// failed write to the client. Its callers are the handlers whose answer
// is at hand as it is sent (a stored file, a listing), never one made
// while the client waits (a zip). It holds nothing, and release does
// nothing, unless r is HTTP/1 on a CoalesceListener's connection.
func Hold(w http.ResponseWriter, r *http.Request) (release func() error) {
	h := hold(w, r)
	if h.cc == nil {
		return func() error { return nil }
	}
	return h.release
}

// held is Hold's hold as a value, for a caller that releases it in the
// same function (SendWhole): Hold's release is a closure on the heap,
// one more allocation per small download.
type held struct {
	cc *coalesceConn // nil: nothing held
	w  http.ResponseWriter
}

// hold is Hold without the closure.
func hold(w http.ResponseWriter, r *http.Request) held {
	cc, _ := r.Context().Value(connKey{}).(*coalesceConn)
	if cc == nil || r.ProtoMajor != 1 {
		return held{}
	}
	cc.hold()
	return held{cc: cc, w: w}
}

// release is Hold's release.
func (h held) release() error {
	if h.cc == nil {
		return nil
	}
	// The end of the answer, still in net/http's buffers, goes out with
	// the rest rather than in a write of its own; but only when its
	// length is set: a flush before the handler returns makes net/http
	// send an answer of no Content-Length (an error's) in chunks, which
	// it would otherwise measure.
	var ferr error
	if _, sized := h.w.Header()["Content-Length"]; sized {
		ferr = http.NewResponseController(h.w).Flush()
	}
	if err := h.cc.release(); err != nil {
		return err
	}
	return ferr
}
