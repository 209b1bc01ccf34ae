package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"berth/vfs"
)

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

// TestDownloadMultiRangeClientGone: http.ServeContent reads the parts of
// a multi-range answer in a goroutine of its own, which it does not wait
// for once a write to the client fails. That goroutine's read of the
// file, failing, must not race with the handler, which has returned
// meanwhile (the handler reads the error the download keeps, and closes
// the file). Run with -race.
func TestDownloadMultiRangeClientGone(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	const size = 16 << 20
	n, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "big.bin", &repeatReader{b: randomBytes(5, size), left: size}, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The second part is in a chunk far past what the reader fetches
	// ahead, and that chunk is damaged: reading it takes a while (it is
	// fetched and hashed) and then fails.
	revs, err := f.fs.Revisions(ctx, f.root.ID, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	refs := revs[len(revs)-1].Chunks
	var off int64
	for _, r := range refs[:len(refs)-2] {
		off += r.Size
	}
	bad := refs[len(refs)-2]
	p := f.chunks.Path(bad.ID)
	blob, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, randomBytes(6, len(blob)), 0o644); err != nil {
		t.Fatal(err)
	}
	h := f.srv.Config.Handler
	for range 5 {
		req := httptest.NewRequestWithContext(ctx, http.MethodGet, f.at("/api/2/files/%d/%d/download", n.ID), nil)
		req.Header.Set("Authorization", "Bearer "+f.token)
		req.Header.Set("Range", fmt.Sprintf("bytes=0-99,%d-%d", off, off+99))
		// Writes: the first part's header and bytes; the second part's
		// header fails while the goroutine reads the part.
		w := &failingWriter{ResponseRecorder: httptest.NewRecorder(), ok: 2}
		func() {
			defer func() {
				if p := recover(); p != nil && p != http.ErrAbortHandler {
					panic(p)
				}
			}()
			h.ServeHTTP(w, req)
		}()
	}
}
