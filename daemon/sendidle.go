package daemon

import (
	"net/http"
	"time"
)

// withSendIdleTimeout makes a write of a response that the client takes no
// byte of for idle fail, which ends the request: its handler sees the
// error and stops (a download, a zip, a PROPFIND stop reading their
// chunks and records). Without it a client that stops reading but keeps
// its connection open holds the handler, its open files and the chunks
// it read ahead (10 to 40 MiB for a zip) for as long as it likes: there
// is no WriteTimeout, which would cut a large download on a slow link.
// It is nginx's send_timeout: a bound on the time between writes that
// progress, not on the whole answer.
//
// It is a write deadline on the connection (HTTP/1.1) or the stream
// (HTTP/2), moved forward at most every idle/8, as for request bodies
// (withBodyIdleTimeout). It is moved once more when the handler returns,
// for what net/http writes after it (the end of a buffered answer), if it
// is due: a deadline moved within idle/8 still leaves that end time
// enough. net/http clears the deadline itself after each answer, so a
// small answer pays one move, not two.
func withSendIdleTimeout(h http.Handler, idle time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		iw := &idleWriter{ResponseWriter: w, idle: idle}
		h.ServeHTTP(iw, r)
		iw.renew()
	})
}

// deadliner is the ResponseWriter of net/http's HTTP/1.1 and HTTP/2
// servers, which http.ResponseController calls the same way; asking for
// it directly saves allocating a controller per request.
type deadliner interface {
	SetWriteDeadline(time.Time) error
}

// idleWriter is a ResponseWriter whose writes fail after idle without
// progress.
type idleWriter struct {
	http.ResponseWriter
	idle    time.Duration
	renewed time.Time // when the deadline was last moved; zero before the first write
	off     bool      // the connection takes no deadline (not a net/http server's)
}

// renew moves the deadline when it is due: a write is made only after the
// previous one returned, so what was written so far has left.
func (w *idleWriter) renew() {
	if w.off {
		return
	}
	if now := time.Now(); now.Sub(w.renewed) >= w.idle/8 {
		var err error
		if d, ok := w.ResponseWriter.(deadliner); ok {
			err = d.SetWriteDeadline(now.Add(w.idle))
		} else {
			err = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(now.Add(w.idle))
		}
		if err != nil {
			w.off = true
			return
		}
		w.renewed = now
	}
}

// maxIdleWrite is the most one write hands on under one deadline. A
// download writes whole chunks (a MiB or more) at once, and a client that
// takes them slowly but steadily needs several reads for one: the deadline
// must move between pieces small enough that any client making progress
// takes one within the timeout.
const maxIdleWrite = 64 << 10

func (w *idleWriter) Write(p []byte) (int, error) {
	n := 0
	for {
		w.renew()
		m, err := w.ResponseWriter.Write(p[n:min(len(p), n+maxIdleWrite)])
		n += m
		if err != nil || n == len(p) {
			return n, err
		}
	}
}

func (w *idleWriter) WriteHeader(code int) {
	w.renew()
	w.ResponseWriter.WriteHeader(code)
}

// Flush sends what is buffered, under the same deadline.
func (w *idleWriter) Flush() {
	w.renew()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
