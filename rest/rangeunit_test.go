package rest

import (
	"net/http"
	"testing"
)

// TestDownloadRangeUnit: a Range of a unit other than bytes must be
// ignored (RFC 9110 14.2: "An origin server MUST ignore a Range header
// field that contains a range unit it does not understand"), and unit
// names are case-insensitive (14.1). http.ServeContent knows only the
// exact prefix "bytes=" and answers anything else 416.
func TestDownloadRangeUnit(t *testing.T) {
	f := newFixture(t)
	data := []byte("0123456789")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", data)
	for _, c := range []struct {
		rng    string
		status int
		body   string
	}{
		{"items=0-1", http.StatusOK, string(data)},
		{"items=-0", http.StatusOK, string(data)},
		{"0-1", http.StatusOK, string(data)}, // no unit at all
		{"Bytes=2-4", http.StatusPartialContent, "234"},
		{"BYTES=-0,-2", http.StatusPartialContent, "89"},
		{"bytes=2-4", http.StatusPartialContent, "234"},
	} {
		t.Run(c.rng, func(t *testing.T) {
			resp, got := f.download(fj.ID, http.Header{"Range": {c.rng}})
			if resp.StatusCode != c.status || string(got) != c.body {
				t.Fatalf("Range %q: %d %q, want %d %q", c.rng, resp.StatusCode, got, c.status, c.body)
			}
		})
	}
}
