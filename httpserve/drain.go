package httpserve

import (
	"io"
	"net/http"
	"time"
)

// Bounds of Drain. The bytes bound what one refused request can make
// berth read for nothing (well above the 150 MiB that lost their answer
// before, issue 11), the time a client that sends slowly; a client that
// stops sending is cut off sooner by the daemon's body idle timeout.
const (
	// MaxDrain is the most bytes Drain reads.
	MaxDrain = 256 << 20
	// MaxDrainTime is the longest Drain reads.
	MaxDrainTime = 30 * time.Second
)

// Drain reads and discards what is left of a refused upload's body, so
// that net/http can answer on a connection it keeps, and the client,
// which may still be sending, reads the answer instead of a reset: a
// client that sent Expect: 100-continue was told to go on at the first
// read, and net/http, answering with more than 256 KiB of the body
// unread, closes the connection under it. It reads nothing when the
// client left, when the body already failed or ended, and when the body
// announced more than MaxDrain still to come: the answer is then sent at
// once and the connection closed, as net/http does, and a client that
// does not read while it sends may miss it. This lingering read is what
// nginx and Apache do before they close (lingering_close), bounded the
// same way. The REST uploads and the share-link pages' upload form use
// it.
//
// HTTP/2 needs none of it: its server ends the stream with NO_ERROR, which
// asks the client to stop sending and keep the answer (RFC 9113 8.1).
func Drain(r *http.Request, body *CountingBody) {
	if r.ProtoMajor != 1 || r.Context().Err() != nil || body.Err != nil {
		return
	}
	if r.ContentLength >= 0 && r.ContentLength-body.N > MaxDrain {
		return
	}
	end := time.Now().Add(MaxDrainTime)
	buf := make([]byte, 32<<10)
	for left := int64(MaxDrain); left > 0 && body.Err == nil && time.Now().Before(end); {
		n, _ := body.Read(buf[:min(int64(len(buf)), left)])
		left -= int64(n)
	}
}

// CountingBody counts the bytes of a request body read so far and keeps
// its first error (io.EOF included), which tells Drain whether anything
// is left to read.
type CountingBody struct {
	R   io.Reader // the body
	N   int64     // bytes read
	Err error     // the first error
}

// Read reads on until the first error, then repeats it, so a drain after
// the handler read to the end reads nothing more.
func (c *CountingBody) Read(b []byte) (int, error) {
	if c.Err != nil {
		return 0, c.Err
	}
	n, err := c.R.Read(b)
	c.N += int64(n)
	c.Err = err
	return n, err
}
