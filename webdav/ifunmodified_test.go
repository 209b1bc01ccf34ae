package webdav_test

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestIfUnmodifiedSince: RFC 9110 13.1.4 and 13.2.2 have an origin server
// evaluate If-Unmodified-Since (when If-Match is absent) before it changes
// a resource: a resource modified after the date is 412 and stays as it
// was. berth ignored it on every write.
func TestIfUnmodifiedSince(t *testing.T) {
	f := newFixture(t)
	st, h, body := f.do("PUT", "/a.txt", strings.NewReader("one"))
	want(t, "PUT", st, http.StatusCreated, body)
	etag := h.Get("ETag")
	past := time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat)
	future := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)

	for _, c := range []struct {
		method string
		hdr    []string
	}{
		{"PUT", nil},
		{"DELETE", nil},
		{"MOVE", []string{"Destination", f.url("/b.txt")}},
		{"COPY", []string{"Destination", f.url("/b.txt")}},
		{"PROPPATCH", nil},
	} {
		var b *strings.Reader
		switch c.method {
		case "PUT":
			b = strings.NewReader("two")
		case "PROPPATCH":
			b = strings.NewReader(`<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:c xmlns:Z="urn:z">r</Z:c></D:prop></D:set></D:propertyupdate>`)
		default:
			b = strings.NewReader("")
		}
		st, _, body := f.do(c.method, "/a.txt", b, append([]string{"If-Unmodified-Since", past}, c.hdr...)...)
		want(t, c.method+" If-Unmodified-Since before the last change", st, http.StatusPreconditionFailed, body)
	}
	if got, err := f.read("/a.txt"); err != nil || string(got) != "one" {
		t.Fatalf("a.txt after refused writes: %q %v", got, err)
	}
	if _, err := f.lookup("/b.txt"); err == nil {
		t.Fatal("a refused COPY or MOVE made b.txt")
	}
	// If-Match, when present, is evaluated instead.
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("two"), "If-Unmodified-Since", past, "If-Match", etag)
	want(t, "PUT with If-Match and an old If-Unmodified-Since", st, http.StatusNoContent, body)
	st, _, body = f.do("PUT", "/a.txt", strings.NewReader("three"), "If-Unmodified-Since", future)
	want(t, "PUT If-Unmodified-Since after the last change", st, http.StatusNoContent, body)
	// A new resource has no modification date: the header is ignored.
	st, _, body = f.do("PUT", "/new.txt", strings.NewReader("n"), "If-Unmodified-Since", past)
	want(t, "PUT of a new name", st, http.StatusCreated, body)
	// So is a date that is not one.
	st, _, body = f.do("DELETE", "/new.txt", nil, "If-Unmodified-Since", "yesterday")
	want(t, "DELETE with an invalid date", st, http.StatusNoContent, body)
}
