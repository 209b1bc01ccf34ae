package daemon

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// withBodyIdleTimeout makes a read of a request body that gets no byte for
// idle fail with an error that wraps os.ErrDeadlineExceeded, which the
// front ends answer 408. Without it a client that stops sending midway
// holds its handler, its buffers and an upload in progress until TCP
// keepalive gives up on the connection, minutes later.
//
// It is a read deadline on the connection (HTTP/1.1) or the stream
// (HTTP/2), moved forward as bytes arrive. Moving it costs a system call
// or a message to the HTTP/2 serving goroutine, so it moves at most every
// idle/8, not on every Read of a few KiB: a stall is noticed after between
// 7/8 of idle and idle.
//
// An HTTP/1.x request gets the deadline before its handler runs, not only
// at its first Read: net/http itself reads up to 256 KiB of a body the
// handler left unread before it writes the answer (a 401, a route that
// takes no body, the plain-HTTP listener's 400), and a client that
// announced a body and sends none would otherwise hold that read, its
// connection and its goroutine for as long as it liked, without
// credentials. A handler that reads later moves the deadline at its first
// Read. HTTP/2 needs no such bound (an answer does not wait for the body)
// and gets none, because a stream's deadline that fires before the
// handler reads closes the body for good.
func withBodyIdleTimeout(h http.Handler, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		if r.ProtoMajor == 1 {
			// Fails only where no deadline can be set (not a net/http
			// connection); the body's own reads find that out too.
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(idle))
		}
		// A copy: net/http looks at the type of its own request's Body
		// after the handler, to decide whether to drain it.
		r2 := r.WithContext(r.Context())
		r2.Body = &idleBody{body: r.Body, ctl: http.NewResponseController(w), idle: idle}
		h.ServeHTTP(w, r2)
	})
}

// idleBody is a request body whose reads fail after idle without a byte.
type idleBody struct {
	body    io.ReadCloser
	ctl     *http.ResponseController
	idle    time.Duration
	renewed time.Time // when the deadline was last moved; zero before the first Read
	off     bool      // the connection takes no deadline (not a net/http server's)
	err     error     // the timeout, once it happened
}

func (b *idleBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if !b.off {
		// Read is called again only after the last one returned, so
		// the data so far has arrived: the deadline may move.
		if now := time.Now(); now.Sub(b.renewed) >= b.idle/8 {
			if err := b.ctl.SetReadDeadline(now.Add(b.idle)); err != nil {
				b.off = true
			}
			b.renewed = now
		}
	}
	n, err := b.body.Read(p)
	switch {
	case err == nil:
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = fmt.Errorf("request body: nothing arrived for %v: %w", b.idle, err)
		return n, b.err
	case !b.off:
		// The body is done (EOF) or broken. An HTTP/1.1 server then
		// reads ahead for the next request or a close, and a deadline
		// that expired under that read would cancel the request's
		// context while the handler still commits what it received.
		_ = b.ctl.SetReadDeadline(time.Time{})
	}
	return n, err
}

func (b *idleBody) Close() error { return b.body.Close() }

// Stalled returns the error that ended the body because nothing arrived
// for the idle timeout, or nil. The front ends ask for it by this method
// (they cannot import daemon) to answer 408 whatever a handler made of
// the failed read: a malformed form, bad XML, a cancelled context.
func (b *idleBody) Stalled() error { return b.err }
