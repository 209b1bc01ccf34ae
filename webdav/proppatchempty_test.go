package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestProppatchNamingNothing: a PROPPATCH whose set and remove name no
// property got a 207 whose response held neither a status nor a propstat,
// which RFC 4918's DTD for DAV:response does not allow; it is 400.
func TestProppatchNamingNothing(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	for _, b := range []string{
		`<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop/></D:set></D:propertyupdate>`,
		`<D:propertyupdate xmlns:D="DAV:"><D:remove><D:prop></D:prop></D:remove></D:propertyupdate>`,
		`<D:propertyupdate xmlns:D="DAV:"/>`,
	} {
		st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(b))
		want(t, "PROPPATCH "+b, st, http.StatusBadRequest, body)
	}
}
