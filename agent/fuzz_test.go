package agent

import (
	"path"
	"path/filepath"
	"testing"
)

// FuzzLocalName reads arbitrary listing paths as the agent does
// (path.Base, localName) and checks that a name it keeps is one element
// joined under the local folder, never above or beside it. (Whether
// every name the server accepts is kept is vfs's rule against the
// agent's, which the agent's tests may not import: DESIGN.md's
// direction; TestMappingE2E syncs the server's names.)
func FuzzLocalName(f *testing.F) {
	for _, s := range []string{"/a", "/d/a.txt", "/d/", "", "/", "/..", "/d/..", "/.", "a\\..\\b", "/C:", "/x\x00y",
		"/\u2028", "/\uffff", "/\xff", "//", "/a/./", "/" + string(make([]byte, 256))} {
		f.Add(s)
	}
	dir := filepath.Join(f.TempDir(), "mapped")
	f.Fuzz(func(t *testing.T, p string) {
		name := path.Base(p)
		if !localName(name) {
			return
		}
		j := filepath.Join(dir, name)
		if filepath.Dir(j) != dir || filepath.Base(j) != name {
			t.Fatalf("%q: name %q joins as %q, not a child of %q", p, name, j, dir)
		}
	})
}
