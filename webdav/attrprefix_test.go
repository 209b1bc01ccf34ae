package webdav_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestUndeclaredAttributePrefix: an undeclared prefix is refused (400) on
// attributes as on elements (Namespaces in XML); on an attribute it was
// taken as a namespace named after the prefix and stored.
func TestUndeclaredAttributePrefix(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/a.txt", strings.NewReader("a"))
	want(t, "PUT", st, http.StatusCreated, body)
	set := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:p xmlns:Z="urn:z"><Z:q Q:attr="v"/></Z:p></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(set))
	want(t, "PROPPATCH with an undeclared attribute prefix", st, http.StatusBadRequest, body)
	n, _ := f.lookup("/a.txt")
	if props, err := f.fs.Props(context.Background(), f.root.ID, n.ID); err != nil || len(props) != 0 {
		t.Fatalf("props after a refused PROPPATCH: %q %v", props, err)
	}
	st, _, body = f.do("PROPFIND", "/a.txt", strings.NewReader(`<D:propfind xmlns:D="DAV:" Q:x="1"><D:allprop/></D:propfind>`), "Depth", "0")
	want(t, "PROPFIND with an undeclared attribute prefix", st, http.StatusBadRequest, body)
	// Declared prefixes and xml: stay fine.
	ok := `<D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><Z:p xmlns:Z="urn:z" xmlns:Q="urn:q"><Z:q Q:attr="v" xml:lang="en"/></Z:p></D:prop></D:set></D:propertyupdate>`
	st, _, body = f.do("PROPPATCH", "/a.txt", strings.NewReader(ok))
	want(t, "PROPPATCH with declared prefixes", st, http.StatusMultiStatus, body)
}
