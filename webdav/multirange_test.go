package webdav_test

import (
	"bytes"
	"context"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"testing"

	"berth/vfs"
)

// TestGetMultiRangeWithZeroSuffix: a multi-range GET with a zero-length
// suffix part (bytes=0-1,-0) is served as if that part were not there
// (RFC 9110 14.1.1: a part no byte satisfies is ignored when others are
// satisfiable), not with a part whose Content-Range ends before it
// starts; with no other part it is 416.
func TestGetMultiRangeWithZeroSuffix(t *testing.T) {
	f := newFixture(t)
	data := "hello world"
	if _, err := f.fs.WriteFile(context.Background(), f.root.ID, f.root.FolderID, "f.txt", bytes.NewReader([]byte(data)), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
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
		hdr := []string{"Range", tc.rng}
		if tc.ifRange != "" {
			hdr = append(hdr, "If-Range", tc.ifRange)
		}
		st, h, body := f.do("GET", "/f.txt", nil, hdr...)
		got := rangeParts(t, st, h, body)
		if st != tc.status || !slices.Equal(got, tc.parts) {
			t.Errorf("Range %q (If-Range %q): %d %q, want %d %q", tc.rng, tc.ifRange, st, got, tc.status, tc.parts)
		}
		if tc.status == 200 && body != data {
			t.Errorf("Range %q with a failed If-Range: body %q, want the whole file", tc.rng, body)
		}
	}
}

// rangeParts lists the parts of a 206 (or the Content-Range of a 416) as
// "<Content-Range> <body>".
func rangeParts(t *testing.T, status int, h http.Header, body string) []string {
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
