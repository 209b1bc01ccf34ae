package webdav

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	"berth/vfs"
)

// TestPropDates: the hand-made date formats give time.AppendFormat's text,
// in UTC whatever the time's zone, for years of four digits and others.
func TestPropDates(t *testing.T) {
	east := time.FixedZone("east", 5*3600+1800)
	times := []time.Time{
		time.Unix(0, 0),
		time.Date(2024, 2, 29, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 11, 27, 0, 30, 0, 0, east), // the day before in UTC
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 12, 0, 0, 0, time.UTC),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		times = append(times, time.Unix(r.Int64N(400*365*86400)-100*365*86400, r.Int64N(1e9)).In(east))
	}
	for _, tm := range times {
		u := tm.UTC()
		if got, want := string(appendHTTPDate([]byte("x"), tm)), "x"+u.Format(http.TimeFormat); got != want {
			t.Errorf("appendHTTPDate(%v) = %q, want %q", tm, got, want)
		}
		if got, want := string(appendRFC3339([]byte("x"), tm)), "x"+u.Format(time.RFC3339); got != want {
			t.Errorf("appendRFC3339(%v) = %q, want %q", tm, got, want)
		}
	}
}

// TestAppendEscaped: appendEscaped gives escape's text.
func TestAppendEscaped(t *testing.T) {
	for _, s := range []string{"", "plain.txt", "a&b", `<"'>`, "tab\there", "café", "\x00bad\xff", "/webdav/a%20b/"} {
		if got, want := string(appendEscaped([]byte("x"), s)), "x"+escape(s); got != want {
			t.Errorf("appendEscaped(%q) = %q, want %q", s, got, want)
		}
	}
}

// BenchmarkPropWrite formats the entries of a Depth 1 listing of files,
// allprop against four named properties, without the listing or the
// connection: the writer's own cost per entry (ns/op is per entry).
func BenchmarkPropWrite(b *testing.B) {
	named := []xml.Name{{Space: davNS, Local: "resourcetype"}, {Space: davNS, Local: "getcontentlength"}, {Space: davNS, Local: "getlastmodified"}, {Space: davNS, Local: "getetag"}}
	now := time.Now()
	res := &resource{href: "/webdav/alice/big/file-1234.txt", m: &mount{name: "alice"}, fetched: true,
		n: vfs.Node{ID: 12345, Name: "file-1234.txt", Created: now, Modified: now, Size: 1, RevisionID: 67890}}
	for _, c := range []struct {
		mode  string
		names []xml.Name
	}{{"allprop", nil}, {"prop", named}} {
		b.Run(c.mode, func(b *testing.B) {
			pw := &propWriter{mode: c.mode, names: c.names, out: newAnswerWriter(io.Discard)}
			pw.dead = pw.needDead()
			pw.buf = pw.out.take()
			for b.Loop() {
				_ = pw.write(res)
			}
			_ = pw.out.close(pw.buf)
		})
	}
}

// writeSizes records the sizes of the writes made to it and their bytes.
type writeSizes struct {
	sizes []int
	all   []byte
}

func (w *writeSizes) Write(p []byte) (int, error) {
	w.sizes = append(w.sizes, len(p))
	w.all = append(w.all, p...)
	return len(p), nil
}

// TestAnswerPieces: an answer goes out in writes of answerPiece bytes
// exactly (the daemon's send-idle writer splits a longer one) but the
// last, in order, whatever the entries' sizes, one far larger than a
// piece among them (a resource with large dead properties).
func TestAnswerPieces(t *testing.T) {
	for _, sizes := range [][]int{{100}, {answerPiece}, {700, 900, answerPiece - 1600, 1, 3 * answerPiece, 5}} {
		sizes = append(sizes, make([]int, 300)...)
		for i := len(sizes) - 300; i < len(sizes); i++ {
			sizes[i] = 500 + i%700
		}
		var w writeSizes
		a := newAnswerWriter(&w)
		b := a.take()
		var want []byte
		for i, n := range sizes {
			entry := make([]byte, n)
			for j := range entry {
				entry[j] = byte(i + j)
			}
			want = append(want, entry...)
			b = append(b, entry...)
			for len(b) >= answerPiece {
				b = a.put(b)
			}
		}
		if err := a.close(b); err != nil {
			t.Fatal(err)
		}
		if string(w.all) != string(want) {
			t.Fatalf("entries of %v: the answer differs from what was written", sizes[:6])
		}
		for i, n := range w.sizes[:len(w.sizes)-1] {
			if n != answerPiece {
				t.Fatalf("entries of %v: write %d of %d is %d bytes", sizes[:6], i, len(w.sizes), n)
			}
		}
	}
}

// retainingWriter fails every write and keeps what it was given, as
// net/http's HTTP/2 writer may: a Write returns errStreamClosed once the
// client resets the stream, while the frame it handed on may still be
// being copied out of its bytes (writeDataFromHandler).
type retainingWriter struct{ kept [][]byte }

func (w *retainingWriter) Write(p []byte) (int, error) {
	w.kept = append(w.kept, p)
	return 0, errors.New("stream closed")
}

// TestAnswerFailedWrite: the buffers of an answer whose write failed are
// not handed to another answer, which would fill what the failed write
// may still be reading with another listing, whether the answer was one
// piece (written by close) or several (by the sender).
func TestAnswerFailedWrite(t *testing.T) {
	for _, n := range []int{100, 3*answerPiece + 100} {
		var w retainingWriter
		a := newAnswerWriter(&w)
		b := append(a.take(), bytes.Repeat([]byte{'a'}, n)...)
		for len(b) >= answerPiece {
			b = a.put(b)
		}
		if err := a.close(b); err == nil {
			t.Fatalf("%d bytes: close gave no error", n)
		}
		for range 4 {
			o := newAnswerWriter(io.Discard)
			c := o.take()
			for range 200 { // entries of 1000 bytes, in the pieces' room
				c = append(c, bytes.Repeat([]byte{'b'}, 1000)...)
				for len(c) >= answerPiece {
					c = o.put(c)
				}
			}
			_ = o.close(c)
		}
		for i, p := range w.kept {
			if bytes.IndexByte(p, 'b') >= 0 {
				t.Fatalf("%d bytes: write %d's bytes were reused by another answer", n, i)
			}
		}
	}
}
