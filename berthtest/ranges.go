package berthtest

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"berth/httpserve"
)

// RangeParts lists the parts of a 206 as "<Content-Range> <body>" each
// (one, or one per part of a multipart/byteranges answer), the
// Content-Range of a 416 alone, and nothing for any other status. Every
// front end serves ranges through httpserve; their range tables compare
// what clients receive in this one form.
func RangeParts(t testing.TB, status int, h http.Header, body string) []string {
	t.Helper()
	switch status {
	case http.StatusRequestedRangeNotSatisfiable:
		return []string{h.Get("Content-Range")}
	case http.StatusPartialContent:
	default:
		return nil
	}
	mt, params, _ := mime.ParseMediaType(h.Get("Content-Type"))
	if mt != "multipart/byteranges" {
		return []string{h.Get("Content-Range") + " " + body}
	}
	var parts []string
	mr := multipart.NewReader(strings.NewReader(body), params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return parts
		}
		if err != nil {
			t.Fatalf("multipart/byteranges: %v", err)
		}
		b, _ := io.ReadAll(p)
		parts = append(parts, p.Header.Get("Content-Range")+" "+string(b))
	}
}

// RangeFile is a file the Range table downloads. A front end's runner
// stores each file of RangeCases once, under Name, before it sends the
// rows.
type RangeFile struct {
	Name string // the file's name in the root
	Text string // its contents, when it is a short text
	Size int    // else Size pseudo-random bytes from Seed
	Seed uint64
}

// Data is the file's contents: Text, or Size bytes drawn from Seed (the
// same bytes on every call, so each front end stores the same file).
func (f RangeFile) Data() []byte {
	if f.Text != "" {
		return []byte(f.Text)
	}
	return RandomBytes(f.Seed, f.Size)
}

// RandomBytes returns n pseudo-random bytes that depend on seed alone, so
// a test's files are the same in every run and no two seeds share chunks.
func RandomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed+1))
	b := make([]byte, n+8)
	for i := 0; i < n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], r.Uint64())
	}
	return b[:n]
}

// The files of the Range table: short texts whose parts read well in a
// row, a file of more than one chunk, and one long enough for
// httpserve.MaxRanges one-byte parts at each end.
var (
	rangeHello  = RangeFile{Name: "hello.bin", Text: "hello world"}
	rangeDigits = RangeFile{Name: "digits.bin", Text: "0123456789"}
	range3MiB   = RangeFile{Name: "3MiB.bin", Size: 3 << 20, Seed: 5}
	range20000  = RangeFile{Name: "20000.bin", Size: 20_000, Seed: 4}
	rangeEmpty  = RangeFile{Name: "empty.bin"}
)

// RangeCase is a row of the Range table: a GET or HEAD of File with a
// Range (and If-Range) header, and what every front end answers.
// http.ServeContent does the work (through httpserve); the rows pin where
// berth corrects it (RFC 9110 14, httpserve.ServableRange) or bounds its cost,
// each with the bug it caught in its name or comment. What a front end
// adds (an error body, Content-Disposition) its runner checks beside
// CheckRange.
type RangeCase struct {
	Name           string
	File           RangeFile
	Method         string // GET when ""
	Range, IfRange string
	Status         int
	Parts          []string // "<Content-Range> <body>" of each part (RangeParts), when set
	NParts         int      // the number of parts, when set
	Tail           int      // the body is the file's last Tail bytes, when set
}

// RangeMethod is the row's method: GET unless it names one.
func (c RangeCase) RangeMethod() string { return cmp.Or(c.Method, http.MethodGet) }

// Header is the row's request header: Range, and If-Range when set.
func (c RangeCase) Header() http.Header {
	h := http.Header{"Range": {c.Range}}
	if c.IfRange != "" {
		h.Set("If-Range", c.IfRange)
	}
	return h
}

// RangeFiles are the distinct files RangeCases downloads, for a runner to
// store before it sends the rows.
func RangeFiles() []RangeFile {
	return []RangeFile{rangeHello, rangeDigits, range3MiB, range20000, rangeEmpty}
}

// RangeCases is the Range table both front ends run (rest's
// TestDownloadRanges, webdav's TestRange): one row per case, formerly
// kept twice, REST's 26 rows and WebDAV's 9.
func RangeCases() []RangeCase {
	return []RangeCase{
		// A zero-length suffix (bytes=-0) is satisfied by no byte (14.1.1).
		// http.ServeContent answered it 206 with Content-Range "bytes
		// 11-10/11", a range that ends before it starts: 416 bytes */size.
		// Formerly TestGetZeroSuffixRange (webdav's emptyrange_test.go).
		{Name: "zero suffix is 416", File: rangeHello, Range: "bytes=-0", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "zero suffix is 416, HEAD", File: rangeHello, Method: http.MethodHead, Range: "bytes=-0", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "zero suffix spelled -00 is 416", File: rangeHello, Range: "bytes= -00 ", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "zero suffix spelled -00 is 416, HEAD", File: rangeHello, Method: http.MethodHead, Range: "bytes= -00 ", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "zero suffix of a chunked file is 416", File: range3MiB, Range: "bytes=-0", Status: 416, Parts: []string{"bytes */3145728"}},
		{Name: "zero suffix of a chunked file is 416, HEAD", File: range3MiB, Method: http.MethodHead, Range: "bytes=-0", Status: 416, Parts: []string{"bytes */3145728"}},
		{Name: "zero suffix spelled -00 of a chunked file is 416", File: range3MiB, Range: "bytes= -00 ", Status: 416, Parts: []string{"bytes */3145728"}},
		{Name: "zero suffix spelled -00 of a chunked file is 416, HEAD", File: range3MiB, Method: http.MethodHead, Range: "bytes= -00 ", Status: 416, Parts: []string{"bytes */3145728"}},
		{Name: "a real suffix still works", File: rangeHello, Range: "bytes=-1", Status: 206, Tail: 1},
		{Name: "a real suffix is the last bytes", File: rangeHello, Range: "bytes=-5", Status: 206, Parts: []string{"bytes 6-10/11 world"}},
		{Name: "a real suffix of a chunked file still works", File: range3MiB, Range: "bytes=-1", Status: 206, Tail: 1},

		// A multi-range request with a zero-length suffix part is served
		// as if that part were not there (14.1.1: a part no byte
		// satisfies is ignored when others are satisfiable), not with a
		// part whose Content-Range ends before it starts; with no other
		// part it is 416. A failed If-Range sends the whole file.
		// Formerly TestGetMultiRangeWithZeroSuffix (webdav's
		// multirange_test.go).
		{Name: "multi-range: zero suffix after a part is dropped", File: rangeHello, Range: "bytes=0-1,-0", Status: 206, Parts: []string{"bytes 0-1/11 he"}},
		{Name: "multi-range: zero suffix before a part is dropped", File: rangeHello, Range: "bytes=-0,0-1", Status: 206, Parts: []string{"bytes 0-1/11 he"}},
		{Name: "multi-range: zero suffix between parts is dropped", File: rangeHello, Range: "bytes=0-1, -00 ,4-5", Status: 206, Parts: []string{"bytes 0-1/11 he", "bytes 4-5/11 o "}},
		{Name: "multi-range: zero suffix beside a suffix is dropped", File: rangeHello, Range: "bytes=-0,-5", Status: 206, Parts: []string{"bytes 6-10/11 world"}},
		{Name: "multi-range: only zero suffixes is 416", File: rangeHello, Range: "bytes=-0,-0", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "multi-range: a failed If-Range sends the whole file", File: rangeHello, Range: "bytes=0-1,-0", IfRange: `"r0"`, Status: 200},

		// A Range of a unit other than bytes is ignored (14.2: "An origin
		// server MUST ignore a Range header field that contains a range
		// unit it does not understand"), and unit names are
		// case-insensitive (14.1). http.ServeContent knew only the exact
		// prefix "bytes=" and answered anything else 416.
		{Name: "unit: another unit is ignored", File: rangeDigits, Range: "items=0-1", Status: 200},
		{Name: "unit: another unit's zero suffix is ignored", File: rangeDigits, Range: "items=-0", Status: 200},
		{Name: "unit: no unit at all is ignored", File: rangeDigits, Range: "0-1", Status: 200},
		{Name: "unit: Bytes is bytes", File: rangeDigits, Range: "Bytes=2-4", Status: 206, Parts: []string{"bytes 2-4/10 234"}},
		{Name: "unit: BYTES is bytes, zero suffix dropped", File: rangeDigits, Range: "BYTES=-0,-2", Status: 206, Parts: []string{"bytes 8-9/10 89"}},
		{Name: "unit: bytes", File: rangeDigits, Range: "bytes=2-4", Status: 206, Parts: []string{"bytes 2-4/10 234"}},

		// More than httpserve.MaxRanges parts are ignored and the whole file
		// sent (200), as 14.2 allows for many small ranges. Parts out of
		// order each made the reader fetch and verify a chunk again:
		// 2,000 alternating one-byte parts of a 64 MiB file took 2.4 s of
		// the server's CPU, and a 1 MiB header holds some 40,000. Up to
		// the limit, every part is served.
		{Name: "many: MaxRanges parts are all served", File: range20000, Range: alternating(range20000, httpserve.MaxRanges), Status: 206, NParts: httpserve.MaxRanges},
		{Name: "many: MaxRanges+1 parts send the whole file", File: range20000, Range: alternating(range20000, httpserve.MaxRanges+1), Status: 200},
		{Name: "many: 5000 parts send the whole file", File: range20000, Range: alternating(range20000, 5000), Status: 200},

		// Chunk boundaries: a file of several chunks read in httpserve.MaxRanges
		// parts that tile it, so that every boundary between two chunks
		// falls in a part or between two (the last byte of a chunk, the
		// first of the next); CheckRange compares every part with the
		// stored bytes. A part backwards in the file reloads a chunk.
		{Name: "chunks: parts tiling a chunked file are its bytes", File: range3MiB, Range: tiling(range3MiB, httpserve.MaxRanges, false), Status: 206, NParts: httpserve.MaxRanges},
		{Name: "chunks: parts tiling a chunked file backwards are its bytes", File: range3MiB, Range: tiling(range3MiB, httpserve.MaxRanges, true), Status: 206, NParts: httpserve.MaxRanges},
		{Name: "chunks: a part across the middle", File: range3MiB, Range: "bytes=1000000-2200000", Status: 206, NParts: 1},
		{Name: "chunks: the last byte", File: range3MiB, Range: "bytes=3145727-3145727", Status: 206, Tail: 1},
		{Name: "chunks: a part past the end is clipped", File: range3MiB, Range: "bytes=3145000-9999999", Status: 206, Tail: 728},

		// A suffix longer than the file is the whole file (14.1.3), 206.
		{Name: "suffix: longer than the file", File: rangeHello, Range: "bytes=-100", Status: 206, Parts: []string{"bytes 0-10/11 hello world"}},
		{Name: "suffix: longer than a chunked file", File: range3MiB, Range: "bytes=-4000000", Status: 206, Tail: 3 << 20},
		{Name: "suffix: a first position past the end is 416", File: rangeHello, Range: "bytes=11-", Status: 416, Parts: []string{"bytes */11"}},

		// A part that is no range refuses the Range (RFC 9110 14.2), 416
		// with the Content-Range a 416 carries (15.5.17), which
		// http.ServeContent left out: berth writes the Range it hands
		// ServeContent from its own reading (httpserve's parseRange).
		{Name: "invalid: last before first is 416", File: rangeHello, Range: "bytes=5-3", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "invalid: one bad part refuses the rest", File: rangeHello, Range: "bytes=0-1,x", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "invalid: a bad part, HEAD", File: rangeHello, Method: http.MethodHead, Range: "bytes=0-1,x", Status: 416, Parts: []string{"bytes */11"}},

		// A position past an int64 means what it says of any file, where
		// strconv failed and ServeContent refused it without a
		// Content-Range.
		{Name: "overflow: a last position is the end", File: rangeHello, Range: "bytes=6-99999999999999999999", Status: 206, Parts: []string{"bytes 6-10/11 world"}},
		{Name: "overflow: a first position is past the end", File: rangeHello, Range: "bytes=99999999999999999999-", Status: 416, Parts: []string{"bytes */11"}},
		{Name: "overflow: a suffix is the whole file", File: rangeHello, Range: "bytes=-99999999999999999999", Status: 206, Parts: []string{"bytes 0-10/11 hello world"}},

		// White space around parts and positions is trimmed, as net/http
		// trims it; overlapping parts are served as asked until they add
		// up past the file, which is then sent whole (ServeContent).
		{Name: "white space around parts and positions", File: rangeHello, Range: "bytes= 0 - 1 ,\t4-5\t", Status: 206, Parts: []string{"bytes 0-1/11 he", "bytes 4-5/11 o "}},
		{Name: "overlap: parts within the file", File: rangeHello, Range: "bytes=0-4,2-6", Status: 206, Parts: []string{"bytes 0-4/11 hello", "bytes 2-6/11 llo w"}},
		{Name: "overlap: parts past the file send it whole", File: rangeHello, Range: "bytes=0-,1-", Status: 200},

		// An empty file is sent whole, empty, 200, whatever the Range:
		// http.ServeContent does so for a first position (bytes=0-), and
		// answered a suffix (bytes=-5) 206 with Content-Range "bytes
		// 0--1/0", which ends before it starts (httpserve.DropEmptyRange).
		{Name: "empty: first byte sends it", File: rangeEmpty, Range: "bytes=0-0", Status: 200},
		{Name: "empty: open range sends it", File: rangeEmpty, Range: "bytes=0-", Status: 200},
		{Name: "empty: suffix sends it", File: rangeEmpty, Range: "bytes=-5", Status: 200},
		{Name: "empty: suffix sends it, HEAD", File: rangeEmpty, Method: http.MethodHead, Range: "bytes=-5", Status: 200},
		{Name: "empty: suffix and a part send it", File: rangeEmpty, Range: "bytes=-5,0-0", Status: 200},
		{Name: "empty: zero suffix sends it", File: rangeEmpty, Range: "bytes=-0", Status: 200},
		{Name: "empty: another unit sends it", File: rangeEmpty, Range: "items=0-1", Status: 200},
	}
}

// tiling asks for n parts of f that together are all of it, in order or
// backwards.
func tiling(f RangeFile, n int, backwards bool) string {
	parts := make([]string, n)
	for i := range parts {
		a, b := i*f.Size/n, (i+1)*f.Size/n-1
		parts[i] = fmt.Sprintf("%d-%d", a, b)
	}
	if backwards {
		slices.Reverse(parts)
	}
	return "bytes=" + strings.Join(parts, ",")
}

// alternating asks for n one-byte parts of f, alternating between the
// file's ends, as a costly request would.
func alternating(f RangeFile, n int) string {
	size := f.Size
	parts := make([]string, n)
	for i := range parts {
		at := i / 2 % (size / 2)
		if i%2 == 1 {
			at = size - 1 - at
		}
		parts[i] = fmt.Sprintf("%d-%d", at, at)
	}
	return "bytes=" + strings.Join(parts, ",")
}

// CheckRange fails t unless a front end's answer (status, header, body)
// to c is what every front end owes it: the row's status, parts, number
// of parts and tail, and the whole file for a 200.
func CheckRange(t testing.TB, c RangeCase, status int, h http.Header, body []byte) {
	t.Helper()
	got := RangeParts(t, status, h, string(body))
	if status != c.Status {
		t.Fatalf("%s Range %q (If-Range %q): %d %q, want %d", c.RangeMethod(), c.Range, c.IfRange, status, got, c.Status)
	}
	if c.Parts != nil && !slices.Equal(got, c.Parts) {
		t.Errorf("parts %q, want %q", got, c.Parts)
	}
	if c.NParts > 0 && len(got) != c.NParts {
		t.Errorf("%d parts, want %d", len(got), c.NParts)
	}
	data := c.File.Data()
	if status == http.StatusPartialContent {
		checkParts(t, got, data)
	}
	if c.Tail > 0 && !bytes.Equal(body, data[len(data)-c.Tail:]) {
		t.Errorf("body %q, want the last %d bytes", body, c.Tail)
	}
	if status == http.StatusOK && !bytes.Equal(body, data) {
		t.Errorf("%d bytes, want the whole file", len(body))
	}
}

// checkParts fails t unless each part of a 206 (RangeParts) is the
// stored bytes its Content-Range names, of a file of data's size.
func checkParts(t testing.TB, parts []string, data []byte) {
	t.Helper()
	for i, p := range parts {
		var a, b, size int64
		if _, err := fmt.Sscanf(p, "bytes %d-%d/%d", &a, &b, &size); err != nil {
			t.Errorf("part %d: Content-Range of %.40q: %v", i, p, err)
			continue
		}
		if size != int64(len(data)) || a < 0 || b < a || b >= size {
			t.Errorf("part %d: Content-Range bytes %d-%d/%d of a file of %d bytes", i, a, b, size, len(data))
			continue
		}
		_, body, _ := strings.Cut(p, " ")
		_, body, _ = strings.Cut(body, " ")
		if body != string(data[a:b+1]) {
			t.Errorf("part %d (bytes %d-%d): %d bytes that are not the file's", i, a, b, len(body))
		}
	}
}
