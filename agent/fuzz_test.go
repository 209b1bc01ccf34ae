package agent

import (
	"path"
	"path/filepath"
	"testing"

	"berth/vfs"
)

// FuzzLocalName reads arbitrary listing paths as the agent does
// (path.Base, localName) and checks that a name it keeps is one element
// joined under the local folder, never above or beside it, and that
// every name the server accepts (vfs.ValidateName) is kept: a file the
// agent skipped would silently never sync.
func FuzzLocalName(f *testing.F) {
	for _, s := range []string{"/a", "/d/a.txt", "/d/", "", "/", "/..", "/d/..", "/.", "a\\..\\b", "/C:", "/x\x00y",
		"/\u2028", "/\uffff", "/\xff", "//", "/a/./", "/" + string(make([]byte, 256))} {
		f.Add(s)
	}
	dir := filepath.Join(f.TempDir(), "mapped")
	f.Fuzz(func(t *testing.T, p string) {
		name := path.Base(p)
		if !localName(name) {
			if len(p) > 0 && p[0] == '/' && vfs.ValidateName(p[1:]) == nil {
				t.Fatalf("the server's name %q is not synced", p[1:])
			}
			return
		}
		j := filepath.Join(dir, name)
		if filepath.Dir(j) != dir || filepath.Base(j) != name {
			t.Fatalf("%q: name %q joins as %q, not a child of %q", p, name, j, dir)
		}
	})
}
