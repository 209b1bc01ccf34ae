package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestXMLBodyLimits(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/x.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)

	// Over the size cap: 413, not a truncated body called malformed.
	pad := strings.Repeat(" ", 2<<20)
	st, _, body = f.do("PROPFIND", "/x.txt", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:allprop/>`+pad+`</D:propfind>`), "Depth", "0")
	want(t, "PROPFIND with a large body", st, http.StatusRequestEntityTooLarge, body)
	st, _, body = f.do("PROPPATCH", "/x.txt", strings.NewReader(proppatchBody("<Z:a>"+pad+"</Z:a>")))
	want(t, "PROPPATCH with a large body", st, http.StatusRequestEntityTooLarge, body)
	st, _, body = f.do("LOCK", "/x.txt", strings.NewReader(`<D:lockinfo xmlns:D="DAV:"><D:locktype><D:write/></D:locktype><D:owner>`+pad+`</D:owner></D:lockinfo>`))
	want(t, "LOCK with a large body", st, http.StatusRequestEntityTooLarge, body)

	// Deep nesting and endless elements, well within the size cap.
	deep := strings.Repeat("<Z:a>", 50000) + strings.Repeat("</Z:a>", 50000)
	st, _, body = f.do("PROPFIND", "/x.txt", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop>`+deep+`</D:prop></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND nested deeply", st, http.StatusRequestEntityTooLarge, body)
	contains(t, body, "nested")
	many := strings.Repeat("<Z:a/>", 100000)
	st, _, body = f.do("PROPFIND", "/x.txt", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop>`+many+`</D:prop></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND of many elements", st, http.StatusRequestEntityTooLarge, body)
	contains(t, body, "elements")
	if len(f.props("/x.txt")) != 0 {
		t.Fatal("a refused PROPPATCH stored properties")
	}
}

// A PROPFIND names at most maxPropfindNames properties: each is answered
// for every resource listed, so 10,000 names on a folder of 10,000 items
// made the server write a hundred million entries.
func TestPropfindNamesBounded(t *testing.T) {
	f := newFixture(t)
	names := strings.Repeat("<Z:a/>", 257)
	st, _, body := f.do("PROPFIND", "/", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop>`+names+`</D:prop></D:propfind>`), "Depth", "1")
	want(t, "PROPFIND of 257 names", st, http.StatusBadRequest, body)
	contains(t, body, "256")
	names = strings.Repeat("<Z:a/>", 256)
	st, _, body = f.do("PROPFIND", "/", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop>`+names+`</D:prop></D:propfind>`), "Depth", "1")
	want(t, "PROPFIND of 256 names", st, http.StatusMultiStatus, body)
}
