package durable

import (
	"encoding/binary"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// Log is the other bound the benchmarks set beside berth's small writes:
// every request appended to one file, and one fdatasync acknowledging all
// the appends made before it began (group commit), as a server that keeps
// its metadata and small files in one write-ahead log does at the least.
// Put's floor syncs each file and its folder on its own, which a server
// with group commit can beat when many clients write at once; Log keeps
// nothing else (no names, no index, no tree), so no durable server that
// answers each request on its own connection does less on this disk.
type Log struct {
	f *os.File

	mu      sync.Mutex
	synced  sync.Cond
	written uint64 // appends made
	durable uint64 // appends covered by a finished fdatasync
	syncing bool   // an fdatasync is under way, by one of the waiters
	err     error  // the first failed fdatasync: the log is broken after it
}

// OpenLog creates (or truncates) the log file name.
func OpenLog(name string) (*Log, error) {
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	l := &Log{f: f}
	l.synced.L = &l.mu
	return l, nil
}

// Append writes one record, op, key and what r holds, and returns once it
// is durable. The body is read into buf before the log is taken, so a
// slow client holds up no one; a body longer than buf is copied on
// through it while the log is held, as records are whole in the file.
func (l *Log) Append(op, key string, r io.Reader, buf []byte) error {
	n := 0
	var err error
	if r != nil {
		n, err = io.ReadFull(r, buf)
		switch err {
		case io.EOF, io.ErrUnexpectedEOF:
			r, err = nil, nil // all of it is in buf
		case nil:
		default:
			return err
		}
	}
	rec := binary.AppendUvarint(make([]byte, 0, 64+n), uint64(len(op)))
	rec = append(rec, op...)
	rec = binary.AppendUvarint(rec, uint64(len(key)))
	rec = append(rec, key...)
	rec = append(rec, buf[:n]...)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	if r == nil {
		// One write: the length goes last, after the body, since a
		// streamed body's length is known only once it is read.
		rec = binary.AppendUvarint(rec, uint64(n))
		_, err = l.f.Write(rec)
	} else if _, err = l.f.Write(rec); err == nil {
		var more int64
		more, err = io.CopyBuffer(struct{ io.Writer }{l.f}, r, buf)
		if err == nil {
			_, err = l.f.Write(binary.AppendUvarint(nil, uint64(n)+uint64(more)))
		}
	}
	if err != nil {
		// A record cut short is the log's end; nothing after it
		// could be read back, so the log takes no more.
		l.err = err
		return err
	}
	l.written++
	return l.wait(l.written)
}

// wait returns once append seq is covered by an fdatasync; l.mu is held,
// and let go while a sync runs so that others append meanwhile. The first
// waiter to find no sync under way runs one for every append made so far.
func (l *Log) wait(seq uint64) error {
	for l.durable < seq && l.err == nil {
		if l.syncing {
			l.synced.Wait()
			continue
		}
		l.syncing = true
		upto := l.written
		l.mu.Unlock()
		err := unix.Fdatasync(int(l.f.Fd()))
		l.mu.Lock()
		l.syncing = false
		if err != nil {
			l.err = err
		} else {
			l.durable = upto
		}
		l.synced.Broadcast()
	}
	return l.err
}

// Close closes the log file.
func (l *Log) Close() error { return l.f.Close() }
