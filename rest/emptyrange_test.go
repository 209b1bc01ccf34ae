package rest

import (
	"bytes"
	"net/http"
	"strconv"
	"testing"
)

// TestDownloadZeroSuffixRange asks for the last 0 bytes (bytes=-0), which
// no byte satisfies (RFC 9110 14.1.1: a suffix range must be non-zero).
// http.ServeContent answers it 206 with Content-Range "bytes 11-10/11", a
// range that ends before it starts; berth must answer 416 bytes */size.
func TestDownloadZeroSuffixRange(t *testing.T) {
	f := newFixture(t)
	for _, data := range [][]byte{[]byte("hello world"), randomBytes(5, 3<<20)} {
		fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.bin", data)
		for _, rng := range []string{"bytes=-0", "bytes= -00 "} {
			for _, method := range []string{http.MethodGet, http.MethodHead} {
				resp := f.request(method, f.at("/api/2/files/%d/%d/download", fj.ID), f.token, nil, http.Header{"Range": {rng}})
				status, body := f.readAll(resp)
				cr := resp.Header.Get("Content-Range")
				if status != http.StatusRequestedRangeNotSatisfiable || cr != "bytes */"+strconv.Itoa(len(data)) {
					t.Fatalf("%s %q of %d bytes: %d, Content-Range %q", method, rng, len(data), status, cr)
				}
				if method == http.MethodGet {
					wantError(t, status, body, http.StatusRequestedRangeNotSatisfiable, "invalid_request")
				}
			}
		}
		// A real suffix still works.
		resp, got := f.download(fj.ID, http.Header{"Range": {"bytes=-1"}})
		if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(got, data[len(data)-1:]) {
			t.Fatalf("bytes=-1: %d %q", resp.StatusCode, got)
		}
	}
}
