package account

import (
	"path"
	"strings"
	"testing"
)

// FuzzCleanMachinePath cleans arbitrary machine paths, as clients give
// them for mappings, backups and restores, and checks that what it
// accepts is absolute, clean, free of "..", within MaxMachinePath, clean
// again as it is, and stored: a mapping holding it encodes and decodes
// to the same (a path the store could write but not read back would
// make the mapping's record unreadable for good).
func FuzzCleanMachinePath(f *testing.F) {
	for _, s := range []string{"/home/a", `C:\Users\a`, "C:", "c:/", "/a/./b//", "/a/../b", "a/b", "..", "/..", "/a/..b",
		`\\server\share`, "/\x7f", "/\u0085", "/\xff", "/\xed\xa0\x80", "/é", "/" + strings.Repeat("a", 4096), ""} {
		f.Add(s)
	}
	c := newCodec()
	f.Fuzz(func(t *testing.T, p string) {
		clean, err := CleanMachinePath("path", p)
		if err != nil {
			return
		}
		if !strings.HasPrefix(clean, "/") || path.Clean(clean) != clean || len(clean) > MaxMachinePath {
			t.Fatalf("%q cleans as %q", p, clean)
		}
		for seg := range strings.SplitSeq(clean, "/") {
			if seg == ".." {
				t.Fatalf("%q cleans as %q", p, clean)
			}
		}
		if again, err := CleanMachinePath("path", clean); err != nil || again != clean {
			t.Fatalf("%q cleans as %q, which cleans as %q (%v)", p, clean, again, err)
		}
		b, err := c.marshal(MachineMapping{Path: clean})
		if err != nil {
			t.Fatalf("%q: %v", clean, err)
		}
		var back MachineMapping
		if err := c.unmarshal(b, &back); err != nil || back.Path != clean {
			t.Fatalf("%q is stored, read back as %q (%v)", clean, back.Path, err)
		}
	})
}
