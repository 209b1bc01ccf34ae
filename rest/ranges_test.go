package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
)

// rangeFile is a file the client-gone row downloads.
type rangeFile struct {
	id   uint64
	data []byte
	bad  int64 // offset of a damaged chunk; 0 for none
}

// TestDownloadRanges runs the Range table (berthtest.RangeCases, which
// webdav's TestRange runs too) over a REST download: each row's common
// answer, and REST's own, the JSON error of a 416 GET. The one row only
// REST has (a client gone during a multi-range answer) follows the table.
func TestDownloadRanges(t *testing.T) {
	f := newFixture(t)
	ids := map[string]uint64{}
	for _, rf := range berthtest.RangeFiles() {
		ids[rf.Name] = f.mustUpload(f.at("/api/2/files/%d/upload"), rf.Name, rf.Data()).ID
	}
	for _, c := range berthtest.RangeCases() {
		t.Run(c.Name, func(t *testing.T) {
			method := c.RangeMethod()
			resp := f.request(method, f.at("/api/2/files/%d/%d/download", ids[c.File.Name]), f.token, nil, c.Header())
			status, body := f.readAll(resp)
			berthtest.CheckRange(t, c, status, resp.Header, body)
			if status == http.StatusRequestedRangeNotSatisfiable && method == http.MethodGet {
				wantError(t, status, body, http.StatusRequestedRangeNotSatisfiable, "invalid_request")
			}
		})
	}

	// http.ServeContent reads the parts of a multi-range answer in a
	// goroutine of its own, which it does not wait for once a write to
	// the client fails. That goroutine's read of the file, failing (its
	// second part lies in a damaged chunk far past what the reader
	// fetches ahead), must not race with the handler, which has
	// returned meanwhile (the handler reads the error the download
	// keeps, and closes the file). Run with -race. REST's alone: it
	// drives the handler with a failing ResponseWriter (downloadGone).
	t.Run("client gone during a multi-range answer", func(t *testing.T) {
		rf := f.damagedFile(t)
		h := http.Header{"Range": {fmt.Sprintf("bytes=0-99,%d-%d", rf.bad, rf.bad+99)}}
		path := f.at("/api/2/files/%d/%d/download", rf.id)
		for range 5 {
			f.downloadGone(path, h)
		}
	})
}

// damagedFile stores a 16 MiB file one of whose last chunks is damaged:
// reading it takes a while (it is fetched and hashed) and then fails.
func (f *fixture) damagedFile(t *testing.T) *rangeFile {
	t.Helper()
	ctx := context.Background()
	const size = 16 << 20
	data := berthtest.RandomBytes(15, size)
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
	if err := os.WriteFile(p, berthtest.RandomBytes(6, len(blob)), 0o644); err != nil {
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

// TestDownloadResumeByDate: a download resumed with an If-Range of its
// Last-Modified date, after a new revision came within the same second
// (the date's resolution), is sent whole, 200: http.ServeContent honoured
// the date and sent the rest of the new revision, 206, which the client
// appended to the start of the old one. The ETag still resumes.
func TestDownloadResumeByDate(t *testing.T) {
	f := newFixture(t)
	for try := 0; ; try++ {
		old := bytes.Repeat([]byte("a"), 20)
		fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "r.bin", old)
		resp, _ := f.download(fj.ID, http.Header{"Range": {"bytes=0-9"}})
		lm := resp.Header.Get("Last-Modified")
		neu := bytes.Repeat([]byte("b"), 20)
		f.mustUpload(f.at("/api/2/files/%d/upload"), "r.bin", neu)
		resp, body := f.download(fj.ID, http.Header{"Range": {"bytes=10-"}, "If-Range": {lm}})
		if resp.Header.Get("Last-Modified") != lm {
			if try < 20 {
				continue // the second turned between the revisions
			}
			t.Skip("no two revisions within one second")
		}
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, neu) {
			t.Fatalf("resumed by date over a new revision of the same second: %d %q, want 200 and the whole new revision", resp.StatusCode, body)
		}
		resp, body = f.download(fj.ID, http.Header{"Range": {"bytes=10-"}, "If-Range": {resp.Header.Get("Etag")}})
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, neu[10:]) {
			t.Fatalf("resumed by ETag: %d %q", resp.StatusCode, body)
		}
		return
	}
}
