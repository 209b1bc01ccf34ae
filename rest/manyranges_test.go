package rest

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"berth/vfs"
)

// TestDownloadTooManyRanges: a Range of more than vfs.MaxRanges parts is
// ignored and the whole file sent (200), as RFC 9110 14.2 allows for
// many small ranges. Parts out of order each made the reader fetch and
// verify a chunk again: 2,000 alternating one-byte parts of a 64 MiB
// file took 2.4 s of the server's CPU, and a 1 MiB header holds some
// 40,000. Up to the limit, every part is served.
func TestDownloadTooManyRanges(t *testing.T) {
	f := newFixture(t)
	data := randomBytes(4, 20_000)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.bin", data)
	ranges := func(n int) string {
		parts := make([]string, n)
		for i := range parts {
			// Alternating between the ends, as a costly request would.
			at := i / 2 % (len(data) / 2)
			if i%2 == 1 {
				at = len(data) - 1 - at
			}
			parts[i] = fmt.Sprintf("%d-%d", at, at)
		}
		return "bytes=" + strings.Join(parts, ",")
	}

	resp, body := f.download(fj.ID, http.Header{"Range": {ranges(vfs.MaxRanges)}})
	if got := rangeParts(t, resp, body); resp.StatusCode != http.StatusPartialContent || len(got) != vfs.MaxRanges {
		t.Fatalf("%d parts: %d with %d parts, want 206 with all", vfs.MaxRanges, resp.StatusCode, len(got))
	}
	for _, n := range []int{vfs.MaxRanges + 1, 5000} {
		resp, body = f.download(fj.ID, http.Header{"Range": {ranges(n)}})
		if resp.StatusCode != http.StatusOK || string(body) != string(data) {
			t.Errorf("%d parts: %d with %d bytes, want 200 with the whole file", n, resp.StatusCode, len(body))
		}
	}
}
