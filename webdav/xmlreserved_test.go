package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestReservedNamespacesRefused: XML Namespaces reserves the xml and
// xmlns namespace names: no prefix but xml may be bound to the first, none
// to the second, and neither is a default namespace, so no element is in
// either. encoding/xml lets such a body through; stored as a dead
// property it came back in every PROPFIND of the resource as
// <p xmlns="http://www.w3.org/2000/xmlns/">, which a namespace-aware
// parser (expat: davfs2, cadaver) refuses along with the whole answer.
// The body is 400 and nothing is stored; xml:lang on a value stays fine.
func TestReservedNamespacesRefused(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do(http.MethodPut, "/a", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	for _, prop := range []string{
		`<xml:r>v</xml:r>`,
		`<s xmlns="http://www.w3.org/XML/1998/namespace">v</s>`,
		`<t xmlns="http://www.w3.org/2000/xmlns/">v</t>`,
		`<p:u xmlns:p="http://www.w3.org/2000/xmlns/">v</p:u>`,
		`<p:w xmlns:p="http://www.w3.org/XML/1998/namespace">v</p:w>`,
		`<Z:v xmlns:Z="urn:z"><i xmlns="http://www.w3.org/2000/xmlns/"/></Z:v>`,
	} {
		pp := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>` + prop + `</D:prop></D:set></D:propertyupdate>`
		st, _, body := f.do("PROPPATCH", "/a", strings.NewReader(pp))
		want(t, "PROPPATCH "+prop, st, http.StatusBadRequest, body)
	}
	ok := `<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:p xml:lang="en">v</Z:p></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/a", strings.NewReader(ok))
	want(t, "PROPPATCH with xml:lang", st, http.StatusMultiStatus, body)
	st, _, body = f.do("PROPFIND", "/a", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND", st, http.StatusMultiStatus, body)
	contains(t, body, `<p xmlns="urn:z" xml:lang="en">v</p>`)
	if strings.Contains(body, "www.w3.org/2000/xmlns") || strings.Contains(body, `xmlns="http://www.w3.org/XML/1998/namespace"`) {
		t.Fatalf("a reserved namespace was stored:\n%s", body)
	}
}
