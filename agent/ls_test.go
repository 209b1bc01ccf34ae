package agent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLs: the agent's own check of ls, without a server: within the
// set-up's folders only, after resolving symbolic links (the end-to-end
// test drives the same through the REST route).
func TestLs(t *testing.T) {
	dir := t.TempDir()
	p := func(rel string) string { return filepath.Join(dir, rel) }
	for _, d := range []string{"docs/sub", "mapped", "other"} {
		if err := os.MkdirAll(p(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"docs/b.txt", "docs/a.txt", "docs/sub/f", "other/secret"} {
		if err := os.WriteFile(p(f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"docs/escape": p("other"), "docs/inner": p("docs/sub"), "docs/up": "..", "mapped/file": p("docs/a.txt")} {
		if err := os.Symlink(to, p(link)); err != nil {
			t.Fatal(err)
		}
	}
	a := &Agent{}
	a.setup.cur = Setup{Backups: []Backup{{ID: 1, Path: p("docs")}}, Mappings: []Mapping{{ID: 2, Path: p("mapped")}}}
	a.setup.known = true
	for _, tc := range []struct {
		name, path string
		code       string // "" for success
		names      []string
	}{
		{"a backed-up folder", p("docs"), "", []string{"a.txt", "b.txt", "escape", "inner", "sub/", "up"}},
		{"a mapped folder", p("mapped"), "", []string{"file"}},
		{"below", p("docs/sub"), "", []string{"f"}},
		{"unclean but inside", p("docs") + "/./sub//", "", []string{"f"}},
		{"a link that stays inside", p("docs/inner"), "", []string{"f"}},
		{"a link that escapes", p("docs/escape"), "forbidden", nil},
		{"a link to the parent", p("docs/up"), "forbidden", nil},
		{"a path through an escaping link", p("docs/escape/."), "forbidden", nil},
		{"dot-dot out after cleaning", p("docs") + "/../other", "forbidden", nil},
		{"outside", p("other"), "forbidden", nil},
		{"a sibling with the folder's name as prefix", p("docs2"), "forbidden", nil},
		{"the root", "/", "forbidden", nil},
		{"missing", p("docs/none"), "not_found", nil},
		{"a file", p("docs/a.txt"), "invalid_request", nil},
		{"a link to a file of another allowed folder", p("mapped/file"), "invalid_request", nil},
		{"relative", "docs", "invalid_request", nil},
		{"empty", "", "invalid_request", nil},
		{"control character", p("docs") + "\x00", "invalid_request", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _ := json.Marshal(map[string]string{"path": tc.path})
			res, err := a.ls(context.Background(), args)
			if tc.code != "" {
				var ae *APIError
				if !errors.As(err, &ae) || ae.Code != tc.code || ae.Description == "" {
					t.Fatalf("ls %q: %v %v, want %s", tc.path, res, err, tc.code)
				}
				return
			}
			if err != nil || !slices.Equal(res.(lsResult).Names, tc.names) {
				t.Fatalf("ls %q: %v %v, want %q", tc.path, res, err, tc.names)
			}
		})
	}
}
