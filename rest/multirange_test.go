package rest

import (
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestDownloadMultiRangeWithZeroSuffix: a multi-range request with a
// zero-length suffix part (bytes=0-1,-0) is served as if that part were
// not there (RFC 9110 14.1.1: a part no byte satisfies is ignored when
// others are satisfiable), not with a part whose Content-Range ends
// before it starts; with no other part it is 416.
func TestDownloadMultiRangeWithZeroSuffix(t *testing.T) {
	f := newFixture(t)
	data := "hello world"
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte(data))
	for _, tc := range []struct {
		rng, ifRange string
		status       int
		parts        []string // Content-Range and body of each part
	}{
		{rng: "bytes=0-1,-0", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{rng: "bytes=-0,0-1", status: 206, parts: []string{"bytes 0-1/11 he"}},
		{rng: "bytes=0-1, -00 ,4-5", status: 206, parts: []string{"bytes 0-1/11 he", "bytes 4-5/11 o "}},
		{rng: "bytes=-0,-5", status: 206, parts: []string{"bytes 6-10/11 world"}},
		{rng: "bytes=-0,-0", status: 416, parts: []string{"bytes */11"}},
		{rng: "bytes=0-1,-0", ifRange: `"r0"`, status: 200},
	} {
		h := http.Header{"Range": {tc.rng}}
		if tc.ifRange != "" {
			h.Set("If-Range", tc.ifRange)
		}
		resp, body := f.download(fj.ID, h)
		got := rangeParts(t, resp, body)
		if resp.StatusCode != tc.status || !slices.Equal(got, tc.parts) {
			t.Errorf("Range %q (If-Range %q): %d %q, want %d %q", tc.rng, tc.ifRange, resp.StatusCode, got, tc.status, tc.parts)
		}
		if tc.status == 200 && string(body) != data {
			t.Errorf("Range %q with a failed If-Range: body %q, want the whole file", tc.rng, body)
		}
	}
}

// rangeParts lists the parts of a 206 (or the Content-Range of a 416) as
// "<Content-Range> <body>".
func rangeParts(t *testing.T, resp *http.Response, body []byte) []string {
	t.Helper()
	switch resp.StatusCode {
	case http.StatusRequestedRangeNotSatisfiable:
		return []string{resp.Header.Get("Content-Range")}
	case http.StatusPartialContent:
	default:
		return nil
	}
	mt, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "multipart/byteranges" {
		return []string{resp.Header.Get("Content-Range") + " " + string(body)}
	}
	var parts []string
	mr := multipart.NewReader(strings.NewReader(string(body)), params["boundary"])
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
