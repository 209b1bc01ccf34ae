package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDeadPropertyXMLLang: an xml:lang inside a dead property's value
// (RFC 4918 4.3 has the server keep it) went out bound to a made-up
// prefix, xmlns:a0="http://www.w3.org/XML/1998/namespace", which
// Namespaces in XML forbids: expat, and so neon (davfs2, cadaver, litmus)
// refused the whole 207. The xml prefix needs no declaration.
func TestDeadPropertyXMLLang(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	set := `<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>` +
		`<Z:p xmlns:Z="urn:z">hi <Z:q xml:lang="fr" Z:attr="v">bonjour</Z:q></Z:p></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(set))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)
	for _, req := range []string{
		`<D:propfind xmlns:D="DAV:"><D:prop><Z:p xmlns:Z="urn:z"/></D:prop></D:propfind>`,
		`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`,
	} {
		st, _, body = f.do("PROPFIND", "/a.txt", strings.NewReader(req), "Depth", "0")
		want(t, "PROPFIND", st, http.StatusMultiStatus, body)
		if strings.Contains(body, `"http://www.w3.org/XML/1998/namespace"`) {
			t.Fatalf("a prefix is bound to the XML namespace:\n%s", body)
		}
		contains(t, body, `xml:lang="fr"`, `:attr="v">bonjour</q>`)
	}
}
