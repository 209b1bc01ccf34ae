package webdav_test

import (
	"context"
	"strings"
	"testing"
)

// The tests of this package are grouped by protocol concept, a file each,
// as golang.org/x/net/webdav groups its own: auth_test.go, download_test.go
// (GET, HEAD, ranges), put_test.go, mkcol_test.go, copymove_test.go,
// delete_test.go, lock_test.go, if_test.go (preconditions), props_test.go
// (PROPFIND, PROPPATCH, dead properties), xml_test.go (hostile and
// malformed bodies), paths_test.go (escaping, slashes, the mount's top)
// and space_test.go (a full disk). Each holds a table with a row per case; a bug found later
// becomes a new row named for what it checks, with the bug in its comment.
// fixture_test.go starts a real server; interop_test.go and mount_test.go
// run real clients against it.

// davCase is a row of a concept's table: a scenario named for what it
// checks, run as a subtest on a server of its own (newFixture), so that no
// row sees another's files, locks or logins.
type davCase struct {
	name string
	run  func(t *testing.T)
}

// runCases runs each row as a subtest, in order.
func runCases(t *testing.T, cases []davCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

const propfindAll = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`

// proppatchBody is a PROPPATCH that sets each of props (elements with the
// prefix Z bound to urn:z).
func proppatchBody(props ...string) string {
	return `<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop>` +
		strings.Join(props, "") + `</D:prop></D:set></D:propertyupdate>`
}

// props returns the dead properties of the item at root-relative path p.
func (f *fixture) props(p string) map[string][]byte {
	f.t.Helper()
	n, err := f.lookup(p)
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := f.fs.Props(context.Background(), f.root.ID, n.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// lockExclusive asks for an exclusive write lock; lockExclusiveOwned does
// too, with an owner.
const (
	lockExclusive      = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	lockExclusiveOwned = `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>me</D:owner></D:lockinfo>`
)
