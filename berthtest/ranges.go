package berthtest

import (
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
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
