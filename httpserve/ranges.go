package httpserve

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRanges is the most parts of a Range that berth serves; a Range of
// more is ignored and the whole contents sent (RFC 9110 14.2 allows it
// for many small ranges, a sign of a broken client or a denial of
// service). Every part out of order can make a file's reader fetch,
// verify and decode a chunk of up to 4 MiB again (1 to 5 ms); a request
// header of 1 MiB holds some 40,000 parts, which made one request of a
// few bytes cost the server a minute of CPU. Clients that read several
// ranges (PDF readers, media players) ask for a few at a time.
const MaxRanges = 100

// unsatisfiableRange starts past the end of any contents, so that
// http.ServeContent answers it 416 with Content-Range bytes */size.
const unsatisfiableRange = "bytes=9223372036854775807-"

// rangePart is one part of a bytes Range (RFC 9110 14.1.1): the bytes
// first to last, first to the end when last is -1, or the last `last`
// bytes (a suffix) when first is -1.
type rangePart struct{ first, last int64 }

// byteRanges is a Range header as berth serves it (parseRange).
type byteRanges struct {
	// whole: the Range is ignored and the whole contents sent, 200.
	whole bool
	// refused: the Range is answered 416 bytes */size, sending nothing.
	refused bool
	// parts are the parts to serve, in the order asked, when neither.
	parts []rangePart
}

// parseRange reads the Range header value h (RFC 9110 14.1, 14.2). It is
// berth's one reading of a Range: what http.ServeContent gets
// (ServableRange) is written from it, and what a share link counts
// (Sends, RangeBytes) is read from it, so the two cannot disagree.
//
//   - No header, a unit other than bytes (matched without case, 14.1) or
//     none ("0-1"), or no part at all ("bytes=") is whole: 14.2 has a
//     server ignore a unit it does not understand, where ServeContent,
//     which knows only the exact prefix "bytes=", answered 416.
//   - More than MaxRanges parts is whole too. Blank parts and zero-length
//     suffixes do not count; the header is read no further than the part
//     past the limit, and nothing is kept per part dropped.
//   - A zero-length suffix ("-0") is satisfied by no byte (14.1.1): it is
//     dropped, as a part no byte satisfies is while another is
//     satisfiable. ServeContent sent each as a part that ends before it
//     starts ("bytes 11-10/11"). A Range of nothing else is refused.
//   - A part that is no range (no "-", a last position before the first,
//     a position that is not a number) refuses the whole Range, as 14.2
//     allows; ServeContent refused it too, but without the Content-Range
//     a 416 should carry (15.5.17).
//
// Positions are read as net/http reads them: white space around a part
// and around each position is trimmed, and a position may have a "+"
// sign ("+0" is 0). A position too large for an int64 is the largest
// one, which is what it means for contents of any size (a first position
// past the end, a last one or a suffix that reaches it), where strconv
// failed and ServeContent refused it.
//
// The parts are appended to buf, which a caller may keep on its stack.
func parseRange(h string, buf []rangePart) byteRanges {
	unit, spec, ok := strings.Cut(strings.Trim(h, asciiSpace), "=")
	if !ok || !strings.EqualFold(unit, "bytes") {
		return byteRanges{whole: true}
	}
	b := byteRanges{parts: buf[:0]}
	counted, zeros := 0, false
	for spec != "" {
		var part string
		part, spec, _ = strings.Cut(spec, ",")
		part = strings.Trim(part, asciiSpace)
		if part == "" {
			continue
		}
		p, valid := parsePart(part)
		if valid && p.first < 0 && p.last == 0 {
			zeros = true
			continue
		}
		if counted++; counted > MaxRanges {
			return byteRanges{whole: true}
		}
		switch {
		case !valid:
			b.refused = true
		case !b.refused:
			b.parts = append(b.parts, p)
		}
	}
	switch {
	case b.refused:
		return byteRanges{refused: true}
	case len(b.parts) == 0 && zeros:
		return byteRanges{refused: true}
	case len(b.parts) == 0:
		return byteRanges{whole: true}
	}
	return b
}

// parsePart reads one trimmed, non-blank part of a bytes Range; false
// when it is no range.
func parsePart(s string) (rangePart, bool) {
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return rangePart{}, false
	}
	first, last = strings.Trim(first, asciiSpace), strings.Trim(last, asciiSpace)
	if first == "" {
		n, ok := parsePosition(last)
		return rangePart{first: -1, last: n}, ok
	}
	a, ok := parsePosition(first)
	if !ok {
		return rangePart{}, false
	}
	if last == "" {
		return rangePart{first: a, last: -1}, true
	}
	z, ok := parsePosition(last)
	return rangePart{first: a, last: z}, ok && z >= a
}

// parsePosition reads a position of a Range: digits, after an optional
// "+" (strconv's sign, which net/http accepted), saturating at the
// largest int64 rather than failing. It allocates nothing, where a
// strconv error does, for every hostile part.
func parsePosition(s string) (int64, bool) {
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
			continue // still checks that the rest are digits
		}
		n = n*10 + d
	}
	return n, true
}

// header is b written as the Range http.ServeContent reads: "" for none
// (the whole contents), unsatisfiableRange for a refused one, else its
// parts, each as ServeContent reads it as b does.
func (b byteRanges) header() string {
	switch {
	case b.whole:
		return ""
	case b.refused:
		return unsatisfiableRange
	}
	var arr [64]byte
	buf := append(arr[:0], "bytes="...)
	for i, p := range b.parts {
		if i > 0 {
			buf = append(buf, ',')
		}
		if p.first >= 0 {
			buf = strconv.AppendInt(buf, p.first, 10)
		}
		buf = append(buf, '-')
		if p.last >= 0 {
			buf = strconv.AppendInt(buf, p.last, 10)
		}
	}
	return string(buf)
}

// rangeParts is room for the parts of a usual Range on a caller's stack.
type rangeParts [4]rangePart

// fromStart reports whether http.ServeContent, given b (header), sends the
// content's first byte: for the whole contents, a part from 0 or a
// suffix (which a part of the contents' size or more is).
func (b byteRanges) fromStart() bool {
	if b.whole {
		return true
	}
	for _, p := range b.parts {
		if p.first <= 0 {
			return true
		}
	}
	return false
}

// bytes is how many bytes ServeContent sends of contents of size bytes
// for b: the sum of its parts' lengths, each clipped to the contents,
// overlapping ones counted each time, and all of it once they add up to
// that (ServeContent then sends it whole); none for a refused Range.
func (b byteRanges) bytes(size int64) int64 {
	if b.whole {
		return size
	}
	var n int64
	for _, p := range b.parts {
		switch {
		case p.first < 0:
			n += min(p.last, size)
		case p.first < size:
			end := size - 1
			if p.last >= 0 && p.last < end {
				end = p.last
			}
			n += end - p.first + 1
		}
		if n >= size {
			return size
		}
	}
	return n
}

// ServableRange sets r's Range to what berth serves of it (parseRange),
// for http.ServeContent to read next, and removes it when its If-Range
// is a date (dropDateIfRange). Every front end that hands a Range to
// ServeContent calls it.
func ServableRange(r *http.Request) {
	rng := r.Header.Get("Range")
	if rng == "" {
		return
	}
	if _, date := ifRange(r); date {
		r.Header.Del("Range")
		return
	}
	var buf rangeParts
	switch h := parseRange(rng, buf[:0]).header(); {
	case h == "":
		r.Header.Del("Range")
	case h != rng:
		r.Header.Set("Range", h)
	}
}

// ifRange is r's If-Range (RFC 9110 13.1.5) read as net/http reads it:
// the entity tag it names, or date set when it names none (a date, or
// something that is neither, which ServeContent answers as a date that
// does not match).
//
// A date sends the whole contents, 200, as an If-Range that does not
// match (ServableRange removes the Range). ServeContent honours a date
// equal to Last-Modified, whose resolution is a second: a revision that
// replaced the file within the second of the one a client began to
// download has the same Last-Modified, and the client's resumption got
// the new revision's bytes after the old one's, a mix of two files with
// a success status. Such a date is never a strong validator (8.8.2.2),
// and every answer of berth carries a strong ETag, which a client that
// resumes must send instead (13.1.5); only a client that ignores it is
// sent the whole file again.
func ifRange(r *http.Request) (tag string, date bool) {
	ir := r.Header.Get("If-Range")
	if ir == "" {
		return "", false
	}
	tag, _ = scanETag(ir)
	return tag, tag == ""
}

// rangeHolds reports whether r's Range stands after its If-Range, for
// contents of entity tag etag: no If-Range, or one of etag compared
// strongly, as ServeContent compares it.
func rangeHolds(r *http.Request, etag string) bool {
	tag, date := ifRange(r)
	switch {
	case date:
		return false
	case tag == "":
		return true
	}
	return tag == etag && strings.HasPrefix(tag, `"`)
}

// Sends reports what http.ServeContent's answer to r for a file with
// entity tag etag, last modified at modified (zero for none, as a zip),
// sends: sends is false for a HEAD, for a GET answered 304 (If-None-Match,
// or If-Modified-Since as DateConditions leaves it), for one answered
// 412 (If-Match, or If-Unmodified-Since as DateConditions leaves it),
// and for a Range refused 416 (parseRange), which send no content;
// fromStart is whether the content sent includes the file's first byte,
// so that the request is a download (or view) of its own rather than the
// resumption of one: no Range, or one served whole (parseRange), a part
// starting at 0 or a suffix part (-N), or an If-Range that is not etag
// (ServeContent then sends the whole file; a date If-Range counts, to be
// safe).
func Sends(r *http.Request, etag string, modified time.Time) (sends, fromStart bool) {
	if r.Method != http.MethodGet || failsPrecondition(r, etag, modified) || notModified(r, etag, modified) {
		return false, false
	}
	rng := r.Header.Get("Range")
	if rng == "" || !rangeHolds(r, etag) {
		return true, true
	}
	var buf rangeParts
	b := parseRange(rng, buf[:0])
	if b.refused {
		return false, false
	}
	return true, b.fromStart()
}

// RangeBytes is how many bytes http.ServeContent's answer to r's Range
// sends of content of size bytes, for a request that Sends finds not to
// send from the start (every part starts at an offset): the sum of its
// parts' lengths, each clipped to the content, overlapping ones counted
// each time; all of it for a Range served whole (parseRange). The sum
// is what a link's download_limit charges the request
// (share.CountRequest), and may only err high.
func RangeBytes(r *http.Request, size int64) int64 {
	var buf rangeParts
	return parseRange(r.Header.Get("Range"), buf[:0]).bytes(size)
}
