package agent

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestConflictName(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("CET", 3600))
	rows := []struct {
		name, taken, want string
	}{
		{"notes.txt", "", "notes (conflict from pc1 2026-03-04 040607).txt"},
		{"archive.tar.gz", "", "archive.tar (conflict from pc1 2026-03-04 040607).gz"},
		{"Makefile", "", "Makefile (conflict from pc1 2026-03-04 040607)"},
		{".bashrc", "", ".bashrc (conflict from pc1 2026-03-04 040607)"},
		{"dot.", "", "dot. (conflict from pc1 2026-03-04 040607)"},
		{"notes.txt", "notes (conflict from pc1 2026-03-04 040607).txt", "notes (conflict from pc1 2026-03-04 040607 2).txt"},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			got := conflictName(r.name, "pc1", at, func(n string) bool { return n == r.taken })
			if got != r.want {
				t.Errorf("conflictName(%q) = %q, want %q", r.name, got, r.want)
			}
		})
	}
}

func TestSyncIndex(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "mappings", "7.json")
	ix, err := loadIndex(p, 7, 3, "/home/a/Docs")
	if err != nil || len(ix.Entries) != 0 {
		t.Fatalf("a missing index: %v %v", ix, err)
	}
	ix.Entries["a/b.txt"] = &syncEntry{Size: 5, Mtime: 42, RID: 9, RRev: 11}
	ix.Entries["a"] = &syncEntry{Dir: true, RID: 8}
	if err := ix.save(p); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the index file: %v %v", fi, err)
	}
	rows := []struct {
		name    string
		root    uint64
		folder  string
		content string // written over the file first, when not ""
		entries int
	}{
		{"as saved", 3, "/home/a/Docs", "", 2},
		{"another root", 4, "/home/a/Docs", "", 0},
		{"another folder", 3, "/home/a/Other", "", 0},
		{"torn", 3, "/home/a/Docs", `{"version":1,"entr`, 0},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			if r.content != "" {
				os.WriteFile(p, []byte(r.content), 0o600)
			}
			got, err := loadIndex(p, 7, r.root, r.folder)
			if err != nil || len(got.Entries) != r.entries {
				t.Fatalf("loadIndex: %d entries (%v), want %d", len(got.Entries), err, r.entries)
			}
			if r.entries > 0 && *got.Entries["a/b.txt"] != *ix.Entries["a/b.txt"] {
				t.Errorf("entry %+v", got.Entries["a/b.txt"])
			}
		})
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "mappings", ".tmp-*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
