package atomicfile_test

import (
	"os"
	"path/filepath"
	"testing"

	"berth/atomicfile"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		before  string // existing content, "" for none
		data    string
		perm    os.FileMode
		wantErr bool
	}{
		{name: "new file", data: "one\n", perm: 0o600},
		{name: "replaces", before: "old content that is longer", data: "new", perm: 0o644},
		{name: "empty", before: "x", data: "", perm: 0o600},
		{name: "missing folder", data: "x", perm: 0o600, wantErr: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := filepath.Join(dir, "f"+string(rune('a'+i)))
			if tt.wantErr {
				name = filepath.Join(dir, "no-such-folder", "f")
			}
			if tt.before != "" {
				if err := os.WriteFile(name, []byte(tt.before), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			err := atomicfile.WriteFile(name, []byte(tt.data), tt.perm)
			if tt.wantErr {
				if err == nil {
					t.Fatal("WriteFile into a missing folder succeeded")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(name)
			if err != nil || string(got) != tt.data {
				t.Fatalf("content %q, %v; want %q", got, err, tt.data)
			}
			fi, err := os.Stat(name)
			if err != nil || fi.Mode().Perm() != tt.perm {
				t.Fatalf("mode %v, %v; want %v", fi.Mode().Perm(), err, tt.perm)
			}
		})
	}
	// Nothing but the files themselves is left beside them.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("folder holds %v, want the 3 files only", names)
	}
}
