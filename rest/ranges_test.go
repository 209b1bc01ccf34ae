package rest

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
)

// rangeFile is a file the Range table downloads.
type rangeFile struct {
	id   uint64
	data []byte
	bad  int64 // offset of a damaged chunk; 0 for none
}

// TestDownloadRanges is the Range table: what a download answers for a
// Range (and If-Range) header. http.ServeContent does the work; the rows
// pin where berth corrects it (RFC 9110 14) or bounds its cost, each with
// the bug it caught in its name or comment.
func TestDownloadRanges(t *testing.T) {
	f := newFixture(t)
	files := map[string]*rangeFile{
		"hello":   {data: []byte("hello world")},
		"digits":  {data: []byte("0123456789")},
		"3MiB":    {data: randomBytes(5, 3<<20)},
		"20000":   {data: randomBytes(4, 20_000)},
		"damaged": f.damagedFile(t),
	}
	for name, rf := range files {
		if rf.id == 0 {
			rf.id = f.mustUpload(f.at("/api/2/files/%d/upload"), name+".bin", rf.data).ID
		}
	}
	// alternating asks for n one-byte parts, alternating between the
	// file's ends, as a costly request would.
	alternating := func(n int) func(*rangeFile) string {
		return func(rf *rangeFile) string {
			parts := make([]string, n)
			for i := range parts {
				at := i / 2 % (len(rf.data) / 2)
				if i%2 == 1 {
					at = len(rf.data) - 1 - at
				}
				parts[i] = fmt.Sprintf("%d-%d", at, at)
			}
			return "bytes=" + strings.Join(parts, ",")
		}
	}
	rows := []struct {
		name         string
		file         string
		method       string // GET when ""
		rng, ifRange string
		rngOf        func(*rangeFile) string // the Range, where it depends on the file
		gone         bool                    // the client goes away after the first part
		status       int
		parts        []string // "<Content-Range> <body>" of each part (berthtest.RangeParts), when set
		nparts       int      // the number of parts, when set
		tail         int      // the body is the file's last tail bytes, when set
		runs         int      // gone: times to run it (with -race)
	}{
		// A zero-length suffix (bytes=-0) is satisfied by no byte (14.1.1).
		// http.ServeContent answered it 206 with Content-Range "bytes
		// 11-10/11", a range that ends before it starts: 416 bytes */size.
		{name: "zero suffix is 416", file: "hello", rng: "bytes=-0", status: 416, parts: []string{"bytes */11"}},
		{name: "zero suffix is 416, HEAD", file: "hello", method: http.MethodHead, rng: "bytes=-0", status: 416, parts: []string{"bytes */11"}},
		{name: "zero suffix spelled -00 is 416", file: "hello", rng: "bytes= -00 ", status: 416, parts: []string{"bytes */11"}},
		{name: "zero suffix spelled -00 is 416, HEAD", file: "hello", method: http.MethodHead, rng: "bytes= -00 ", status: 416, parts: []string{"bytes */11"}},
		{name: "zero suffix of a chunked file is 416", file: "3MiB", rng: "bytes=-0", status: 416, parts: []string{"bytes */3145728"}},
		{name: "zero suffix of a chunked file is 416, HEAD", file: "3MiB", method: http.MethodHead, rng: "bytes=-0", status: 416, parts: []string{"bytes */3145728"}},
		{name: "zero suffix spelled -00 of a chunked file is 416", file: "3MiB", rng: "bytes= -00 ", status: 416, parts: []string{"bytes */3145728"}},
		{name: "zero suffix spelled -00 of a chunked file is 416, HEAD", file: "3MiB", method: http.MethodHead, rng: "bytes= -00 ", status: 416, parts: []string{"bytes */3145728"}},
		{name: "a real suffix still works", file: "hello", rng: "bytes=-1", status: 206, tail: 1},
		{name: "a real suffix of a chunked file still works", file: "3MiB", rng: "bytes=-1", status: 206, tail: 1},

		// A multi-range request with a zero-length suffix part is served
		// as if that part were not there (14.1.1: a part no byte
		// satisfies is ignored when others are satisfiable), not with a
		// part whose Content-Range ends before it starts.
		{name: "multi-range: zero suffix after a part is dropped", file: "hello", rng: "bytes=0-1,-0", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{name: "multi-range: zero suffix before a part is dropped", file: "hello", rng: "bytes=-0,0-1", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{name: "multi-range: zero suffix between parts is dropped", file: "hello", rng: "bytes=0-1, -00 ,4-5", status: 206, parts: []string{"bytes 0-1/11 he", "bytes 4-5/11 o "}},
		{name: "multi-range: zero suffix beside a suffix is dropped", file: "hello", rng: "bytes=-0,-5", status: 206, parts: []string{"bytes 6-10/11 world"}},
		{name: "multi-range: only zero suffixes is 416", file: "hello", rng: "bytes=-0,-0", status: 416, parts: []string{"bytes */11"}},
		{name: "multi-range: a failed If-Range sends the whole file", file: "hello", rng: "bytes=0-1,-0", ifRange: `"r0"`, status: 200},

		// A Range of a unit other than bytes is ignored (14.2: "An origin
		// server MUST ignore a Range header field that contains a range
		// unit it does not understand"), and unit names are
		// case-insensitive (14.1). http.ServeContent knew only the exact
		// prefix "bytes=" and answered anything else 416.
		{name: "unit: another unit is ignored", file: "digits", rng: "items=0-1", status: 200},
		{name: "unit: another unit's zero suffix is ignored", file: "digits", rng: "items=-0", status: 200},
		{name: "unit: no unit at all is ignored", file: "digits", rng: "0-1", status: 200},
		{name: "unit: Bytes is bytes", file: "digits", rng: "Bytes=2-4", status: 206, parts: []string{"bytes 2-4/10 234"}},
		{name: "unit: BYTES is bytes, zero suffix dropped", file: "digits", rng: "BYTES=-0,-2", status: 206, parts: []string{"bytes 8-9/10 89"}},
		{name: "unit: bytes", file: "digits", rng: "bytes=2-4", status: 206, parts: []string{"bytes 2-4/10 234"}},

		// More than vfs.MaxRanges parts are ignored and the whole file
		// sent (200), as 14.2 allows for many small ranges. Parts out of
		// order each made the reader fetch and verify a chunk again:
		// 2,000 alternating one-byte parts of a 64 MiB file took 2.4 s of
		// the server's CPU, and a 1 MiB header holds some 40,000. Up to
		// the limit, every part is served.
		{name: "many: MaxRanges parts are all served", file: "20000", rngOf: alternating(vfs.MaxRanges), status: 206, nparts: vfs.MaxRanges},
		{name: "many: MaxRanges+1 parts send the whole file", file: "20000", rngOf: alternating(vfs.MaxRanges + 1), status: 200},
		{name: "many: 5000 parts send the whole file", file: "20000", rngOf: alternating(5000), status: 200},

		// http.ServeContent reads the parts of a multi-range answer in a
		// goroutine of its own, which it does not wait for once a write to
		// the client fails. That goroutine's read of the file, failing (its
		// second part lies in a damaged chunk far past what the reader
		// fetches ahead), must not race with the handler, which has
		// returned meanwhile (the handler reads the error the download
		// keeps, and closes the file). Run with -race.
		{name: "client gone during a multi-range answer", file: "damaged", gone: true, runs: 5,
			rngOf: func(rf *rangeFile) string { return fmt.Sprintf("bytes=0-99,%d-%d", rf.bad, rf.bad+99) }},
	}
	for _, c := range rows {
		t.Run(c.name, func(t *testing.T) {
			rf := files[c.file]
			h := http.Header{"Range": {c.rng}}
			if c.rngOf != nil {
				h.Set("Range", c.rngOf(rf))
			}
			if c.ifRange != "" {
				h.Set("If-Range", c.ifRange)
			}
			path := f.at("/api/2/files/%d/%d/download", rf.id)
			if c.gone {
				for range c.runs {
					f.downloadGone(path, h)
				}
				return
			}
			method := cmp.Or(c.method, http.MethodGet)
			resp := f.request(method, path, f.token, nil, h)
			status, body := f.readAll(resp)
			got := berthtest.RangeParts(t, resp.StatusCode, resp.Header, string(body))
			if status != c.status {
				t.Fatalf("%s Range %q (If-Range %q): %d %q, want %d", method, h.Get("Range"), c.ifRange, status, got, c.status)
			}
			if c.parts != nil && !slices.Equal(got, c.parts) {
				t.Errorf("parts %q, want %q", got, c.parts)
			}
			if c.nparts > 0 && len(got) != c.nparts {
				t.Errorf("%d parts, want %d", len(got), c.nparts)
			}
			if c.tail > 0 && !bytes.Equal(body, rf.data[len(rf.data)-c.tail:]) {
				t.Errorf("body %q, want the last %d bytes", body, c.tail)
			}
			if status == http.StatusOK && !bytes.Equal(body, rf.data) {
				t.Errorf("%d bytes, want the whole file", len(body))
			}
			if status == http.StatusRequestedRangeNotSatisfiable && method == http.MethodGet {
				wantError(t, status, body, http.StatusRequestedRangeNotSatisfiable, "invalid_request")
			}
		})
	}
}

// damagedFile stores a 16 MiB file one of whose last chunks is damaged:
// reading it takes a while (it is fetched and hashed) and then fails.
func (f *fixture) damagedFile(t *testing.T) *rangeFile {
	t.Helper()
	ctx := context.Background()
	const size = 16 << 20
	data := randomBytes(15, size)
	n, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "damaged.bin", bytes.NewReader(data), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	revs, err := f.fs.Revisions(ctx, f.root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	refs := revs[len(revs)-1].Chunks
	var off int64
	for _, r := range refs[:len(refs)-2] {
		off += r.Size
	}
	p := f.chunks.Path(refs[len(refs)-2].ID)
	blob, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, randomBytes(6, len(blob)), 0o644); err != nil {
		t.Fatal(err)
	}
	return &rangeFile{id: n.ID, data: data, bad: off}
}

// downloadGone serves a GET of path through the handler to a client whose
// writes fail after the first part's header and bytes, as they do once it
// has gone away; the handler's abort is expected.
func (f *fixture) downloadGone(path string, h http.Header) {
	req := httptest.NewRequestWithContext(context.Background(), http.MethodGet, path, nil)
	req.Header = h.Clone()
	req.Header.Set("Authorization", "Bearer "+f.token)
	w := &failingWriter{ResponseRecorder: httptest.NewRecorder(), ok: 2}
	defer func() {
		if p := recover(); p != nil && p != http.ErrAbortHandler {
			panic(p)
		}
	}()
	f.srv.Config.Handler.ServeHTTP(w, req)
}

// failingWriter is a ResponseWriter whose writes fail after the first
// ok, as they do once a client has gone away (the first failing one
// after a moment, as a network write that times out).
type failingWriter struct {
	*httptest.ResponseRecorder
	ok int
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.ok == 0 {
		time.Sleep(time.Millisecond)
		return 0, errors.New("connection reset by peer")
	}
	w.ok--
	return w.ResponseRecorder.Write(p)
}
