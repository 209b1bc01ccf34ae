package webdav_test

import (
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestDeadPropNamespaceWithBrace stores dead properties whose namespace
// holds "}" (a namespace is any URI reference, and "}" is allowed in
// one), some crafted to close the element early, and checks that
// PROPFIND answers well-formed XML naming each property exactly as it
// was set.
func TestDeadPropNamespaceWithBrace(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do(http.MethodPut, "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	spaces := []string{
		"urn:x}y",
		`urn:x}a xmlns="DAV:"/><D:getetag>forged</D:getetag><b`,
	}
	var set strings.Builder
	set.WriteString(`<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop>`)
	for _, s := range spaces {
		set.WriteString(`<p xmlns="`)
		xml.EscapeText(&set, []byte(s))
		set.WriteString(`">v</p>`)
	}
	set.WriteString(`</D:prop></D:set></D:propertyupdate>`)
	st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(set.String()))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)

	for _, req := range []string{
		`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`,
		`<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>`,
	} {
		st, _, body = f.do("PROPFIND", "/a.txt", strings.NewReader(req), "Depth", "0")
		want(t, "PROPFIND", st, http.StatusMultiStatus, body)
		found := map[string]bool{}
		etags := 0
		d := xml.NewDecoder(strings.NewReader(body))
		for {
			tok, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("PROPFIND answer is not well-formed XML: %v\n%s", err, body)
			}
			if se, ok := tok.(xml.StartElement); ok {
				if se.Name.Local == "p" {
					found[se.Name.Space] = true
				}
				if se.Name.Space == "DAV:" && se.Name.Local == "getetag" {
					etags++
				}
			}
		}
		if etags > 1 {
			t.Fatalf("a property namespace forged a live property:\n%s", body)
		}
		for _, s := range spaces {
			if !found[s] {
				t.Errorf("property {%s}p missing from the answer:\n%s", s, body)
			}
		}
	}
}
