package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDeadPropertyKeepsItsLanguage: RFC 4918 4.3 has the server keep an
// xml:lang in scope of a dead property's element, set on it or on an
// element around it in the PROPPATCH; berth stored the content only and
// dropped the language.
func TestDeadPropertyKeepsItsLanguage(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	set := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z" xml:lang="de"><D:set><D:prop>` +
		`<Z:own xml:lang="en">colour</Z:own><Z:inherited>Farbe</Z:inherited></D:prop></D:set>` +
		`<D:set><D:prop xml:lang=""><Z:none>x</Z:none></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(set))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)
	for _, req := range []string{
		`<D:propfind xmlns:D="DAV:"><D:prop><Z:own xmlns:Z="urn:z"/><Z:inherited xmlns:Z="urn:z"/><Z:none xmlns:Z="urn:z"/></D:prop></D:propfind>`,
		`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`,
	} {
		st, _, body = f.do("PROPFIND", "/a.txt", strings.NewReader(req), "Depth", "0")
		want(t, "PROPFIND", st, http.StatusMultiStatus, body)
		contains(t, body, `<own xmlns="urn:z" xml:lang="en">colour</own>`, `<inherited xmlns="urn:z" xml:lang="de">Farbe</inherited>`,
			`<none xmlns="urn:z">x</none>`)
	}
	// The value read back through a COPY keeps it too.
	st, _, body = f.do("COPY", "/a.txt", nil, "Destination", f.url("/b.txt"))
	want(t, "COPY", st, http.StatusCreated, body)
	st, _, body = f.do("PROPFIND", "/b.txt", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:prop><Z:own xmlns:Z="urn:z"/></D:prop></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND copy", st, http.StatusMultiStatus, body)
	contains(t, body, `<own xmlns="urn:z" xml:lang="en">colour</own>`)
}
