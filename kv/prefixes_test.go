package kv

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// clashes returns a line for each pair of prefixes of which one starts
// the other, and for each domain prefix that breaks the layout rules.
func clashes(ps []Prefix) []string {
	var out []string
	for i, a := range ps {
		for _, b := range ps[i+1:] {
			if strings.HasPrefix(a.Prefix, b.Prefix) || strings.HasPrefix(b.Prefix, a.Prefix) {
				out = append(out, fmt.Sprintf("%s %q and %s %q overlap", a.Owner, a.Prefix, b.Owner, b.Prefix))
			}
		}
		if a.Owner == "kv" || strings.HasPrefix(a.Owner, "kv/") {
			continue
		}
		name, ok := strings.CutSuffix(a.Prefix, "/")
		if !ok || name == "" || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
			out = append(out, fmt.Sprintf("%s %q is not ASCII letters and a '/'", a.Owner, a.Prefix))
		}
	}
	return out
}

// TestPrefixesDisjoint: no registered prefix starts another, so no scan of
// one kind returns another kind's keys, and each domain prefix follows
// the layout rules. The other rows check that the check itself catches
// what a newcomer might add.
func TestPrefixesDisjoint(t *testing.T) {
	tests := []struct {
		name     string
		prefixes []Prefix
		want     int // clashes
	}{
		{"the registry", Prefixes(), 0},
		{"a stem without its slash starts every prefix of it",
			[]Prefix{{"account", AccountOrg}, {"share", "acct"}}, 2},
		{"the same prefix in two packages", []Prefix{{"vfs", VFSRoot}, {"share", "R/"}}, 1},
		{"a longer name is no clash", []Prefix{{"account", AccountPerson}, {"account", AccountPersonMachine}}, 0},
		{"an engine's byte starts a domain prefix", []Prefix{{"kv", EnginePrefix}, {"share", "\x00share/"}}, 2},
		{"a slash inside a name", []Prefix{{"share", "share/link/"}}, 1},
	}
	for _, tc := range tests {
		got := clashes(tc.prefixes)
		if len(got) != tc.want {
			t.Errorf("%s: %d clashes, want %d: %q", tc.name, len(got), tc.want, got)
		}
	}
}

// TestPrefixesListed: every prefix constant declared in prefixes.go is in
// Prefixes, so none escapes TestPrefixesDisjoint by being declared and
// used in a keys.go but left out of the list.
func TestPrefixesListed(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "prefixes.go", nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, p := range Prefixes() {
		listed[p.Prefix] = true
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, id := range vs.Names {
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					t.Errorf("%s is not a string literal; list its value in Prefixes by hand and here", id.Name)
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatalf("%s: %v", id.Name, err)
				}
				n++
				if !listed[v] {
					t.Errorf("%s (%q) is declared in prefixes.go but missing from Prefixes", id.Name, v)
				}
			}
		}
	}
	if n != len(Prefixes()) {
		t.Errorf("prefixes.go declares %d prefixes, Prefixes lists %d", n, len(Prefixes()))
	}
}
