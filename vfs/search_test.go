package vfs_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"berth/vfs"
)

// searchNames runs a search and returns the paths found, in result order.
func searchNames(t *testing.T, e *env, q string) []string {
	t.Helper()
	ns, err := e.fs.Search(ctx, e.root.ID, q, 0)
	if err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, n.Path)
	}
	return out
}

// TestSearchIndex: what search finds after each kind of change, table by
// table: every row changes the tree, then checks queries at once, then
// the index against the records (Audit).
func TestSearchIndex(t *testing.T) {
	type check struct {
		q    string
		want []string // paths, in id order
	}
	type step struct {
		name   string
		do     func(t *testing.T, e *env, ids map[string]uint64)
		checks []check
	}
	none := []string(nil)
	mk := func(parent, name string) func(t *testing.T, e *env, ids map[string]uint64) {
		return func(t *testing.T, e *env, ids map[string]uint64) {
			p := e.root.FolderID
			if parent != "" {
				p = ids[parent]
			}
			n, err := e.fs.Mkdir(ctx, e.root.ID, p, name, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids[name] = n.ID
		}
	}
	wr := func(parent, name string) func(t *testing.T, e *env, ids map[string]uint64) {
		return func(t *testing.T, e *env, ids map[string]uint64) {
			p := e.root.FolderID
			if parent != "" {
				p = ids[parent]
			}
			ids[name] = e.write(t, p, name, []byte(name)).ID
		}
	}
	steps := []step{
		{"create", func(t *testing.T, e *env, ids map[string]uint64) {
			mk("", "Docs")(t, e, ids)
			wr("Docs", "Report-2024.PDF")(t, e, ids)
			wr("", "notes.txt")(t, e, ids)
		}, []check{
			{"report", []string{"/Docs/Report-2024.PDF"}},
			{"REPORT-2024.pdf", []string{"/Docs/Report-2024.PDF"}},
			{"o", []string{"/Docs", "/Docs/Report-2024.PDF", "/notes.txt"}},
			{"pdf", []string{"/Docs/Report-2024.PDF"}},
			{"xyz", none},
		}},
		{"new revision keeps it", wr("Docs", "Report-2024.PDF"), []check{
			{"report", []string{"/Docs/Report-2024.PDF"}},
		}},
		{"rename", func(t *testing.T, e *env, ids map[string]uint64) {
			if _, err := e.fs.Rename(ctx, e.root.ID, ids["Report-2024.PDF"], "summary.pdf", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", []string{"/Docs/summary.pdf"}},
			{"report", none},
			{"Rep", none},
			{"pdf", []string{"/Docs/summary.pdf"}},
		}},
		{"rename in case only", func(t *testing.T, e *env, ids map[string]uint64) {
			if _, err := e.fs.Rename(ctx, e.root.ID, ids["Report-2024.PDF"], "SUMMARY.pdf", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", []string{"/Docs/SUMMARY.pdf"}},
		}},
		{"move", func(t *testing.T, e *env, ids map[string]uint64) {
			mk("", "Archive")(t, e, ids)
			if _, err := e.fs.Move(ctx, e.root.ID, ids["Report-2024.PDF"], ids["Archive"], "", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", []string{"/Archive/SUMMARY.pdf"}},
		}},
		{"folder rename changes paths", func(t *testing.T, e *env, ids map[string]uint64) {
			if _, err := e.fs.Rename(ctx, e.root.ID, ids["Archive"], "Old", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", []string{"/Old/SUMMARY.pdf"}},
			{"archive", none},
			{"old", []string{"/Old"}},
		}},
		{"non-ASCII and folding", func(t *testing.T, e *env, ids map[string]uint64) {
			wr("", "ΣΊΣΥΦΟΣ.txt")(t, e, ids)
			wr("", "Straße.md")(t, e, ids)
			wr("", "ǅemal.doc")(t, e, ids)
			wr("", "ＦＵＬＬ.txt")(t, e, ids)
			wr("", "Cafe\u0301-1.md")(t, e, ids) // as macOS's WebDAV client names it
			wr("", "café-2.md")(t, e, ids)
		}, []check{
			// Each form of a query finds both forms of a name: every
			// keyboard types NFC, and Finder writes NFD.
			{"café", []string{"/Cafe\u0301-1.md", "/café-2.md"}},
			{"CAFE\u0301", []string{"/Cafe\u0301-1.md", "/café-2.md"}},
			{"é-", []string{"/Cafe\u0301-1.md", "/café-2.md"}},
			{"é", []string{"/Cafe\u0301-1.md", "/café-2.md"}},
			{"σίσυφος", []string{"/ΣΊΣΥΦΟΣ.txt"}},
			{"ΣΊΣΥΦΟς", []string{"/ΣΊΣΥΦΟΣ.txt"}},
			{"STRAßE", []string{"/Straße.md"}},
			{"strasse", none}, // simple folding: ß is not ss
			{"ß", []string{"/Straße.md"}},
			{"ǆemal", []string{"/ǅemal.doc"}},
			{"Ǆ", []string{"/ǅemal.doc"}},
			{"ｆｕｌｌ", []string{"/ＦＵＬＬ.txt"}},
			{"full", none}, // case, not width
		}},
		{"delete a file", func(t *testing.T, e *env, ids map[string]uint64) {
			if err := e.fs.Delete(ctx, e.root.ID, ids["notes.txt"], vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"notes", none},
			{"no", none},
			{"n", none},
		}},
		{"a new file of a deleted one's name", wr("", "notes.txt"), []check{
			{"notes", []string{"/notes.txt"}},
		}},
		{"delete a folder", func(t *testing.T, e *env, ids map[string]uint64) {
			if err := e.fs.Delete(ctx, e.root.ID, ids["Archive"], vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", none},
			{"su", none},
			{"old", none},
		}},
		{"purge", func(t *testing.T, e *env, ids map[string]uint64) {
			if err := e.fs.Purge(ctx, e.root.ID, ids["Archive"]); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"summary", none},
		}},
		{"copy", func(t *testing.T, e *env, ids map[string]uint64) {
			n, err := e.fs.Copy(ctx, e.root.ID, ids["Docs"], e.root.ID, e.root.FolderID, "Docs copy", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids["Docs copy"] = n.ID
		}, []check{
			{"docs", []string{"/Docs", "/Docs copy"}},
			{"copy", []string{"/Docs copy"}},
		}},
		{"move over a file replaces it", func(t *testing.T, e *env, ids map[string]uint64) {
			wr("", "a.txt")(t, e, ids)
			wr("Docs", "b.txt")(t, e, ids)
			if _, err := e.fs.Move(ctx, e.root.ID, ids["b.txt"], e.root.FolderID, "a.txt", vfs.WriteOptions{Overwrite: true}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"a.txt", []string{"/a.txt"}},
			{"b.txt", none},
		}},
		{"move with a new name", func(t *testing.T, e *env, ids map[string]uint64) {
			wr("Docs", "draft-one.txt")(t, e, ids)
			if _, err := e.fs.Move(ctx, e.root.ID, ids["draft-one.txt"], e.root.FolderID, "final-two.txt", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"final-two", []string{"/final-two.txt"}},
			{"draft", none},
			{"one.t", none},
		}},
		{"renamed twice, found only by the last", func(t *testing.T, e *env, ids map[string]uint64) {
			for _, n := range []string{"alpha.txt", "beta.txt"} {
				if _, err := e.fs.Rename(ctx, e.root.ID, ids["draft-one.txt"], n, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}, []check{
			{"beta", []string{"/beta.txt"}},
			{"alpha", none},
			{"final", none},
		}},
		{"renamed, then deleted", func(t *testing.T, e *env, ids map[string]uint64) {
			if _, err := e.fs.Rename(ctx, e.root.ID, ids["draft-one.txt"], "gamma.txt", vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := e.fs.Delete(ctx, e.root.ID, ids["draft-one.txt"], vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, []check{
			{"gamma", none},
			{"beta", none},
		}},
		{"copy over a file replaces it", func(t *testing.T, e *env, ids map[string]uint64) {
			wr("", "keep-me.txt")(t, e, ids)
			wr("Docs", "copied.txt")(t, e, ids)
			n, err := e.fs.Copy(ctx, e.root.ID, ids["copied.txt"], e.root.ID, e.root.FolderID, "keep-me.txt", vfs.WriteOptions{Overwrite: true})
			if err != nil {
				t.Fatal(err)
			}
			ids["keep-me copy"] = n.ID
		}, []check{
			{"keep-me", []string{"/keep-me.txt"}},
			{"copied", []string{"/Docs/copied.txt"}},
		}},
	}
	e := newEnv(t)
	ids := map[string]uint64{}
	for _, s := range steps {
		s.do(t, e, ids)
		for _, c := range s.checks {
			got := searchNames(t, e, c.q)
			if !slices.Equal(got, c.want) {
				t.Errorf("%s: search %q = %q, want %q", s.name, c.q, got, c.want)
			}
		}
		if _, err := e.fs.Audit(ctx, e.root.ID); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
	}
	// The "copy over" row: keep-me.txt is the copy, not the file replaced.
	if ns, _ := e.fs.Search(ctx, e.root.ID, "keep-me", 0); len(ns) != 1 || ns[0].ID != ids["keep-me copy"] {
		t.Errorf("after the copy over keep-me.txt: %+v, want item %d", ns, ids["keep-me copy"])
	}
	// The "move over" row checks ids too: the result is b.txt's node.
	if ns, _ := e.fs.Search(ctx, e.root.ID, "a.txt", 0); len(ns) != 1 || ns[0].ID != ids["b.txt"] {
		t.Errorf("after the move over a.txt: %+v, want item %d", ns, ids["b.txt"])
	}
}

// liveItems lists every live item below the root's top folder, by a walk
// of the tree: what a brute-force search looks through.
func liveItems(t *testing.T, e *env) []vfs.Node {
	t.Helper()
	var out []vfs.Node
	var walk func(id uint64)
	walk = func(id uint64) {
		kids, _, err := e.fs.List(ctx, e.root.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range kids {
			out = append(out, k)
			if k.Dir {
				walk(k.ID)
			}
		}
	}
	walk(e.root.FolderID)
	return out
}

// bruteSearch is what Search must answer: every live item whose folded
// name holds the folded query, by id.
func bruteSearch(items []vfs.Node, q string) []uint64 {
	var out []uint64
	for _, n := range items {
		for _, f := range []string{q, norm.NFC.String(q), norm.NFD.String(q)} {
			if strings.Contains(vfs.Fold(n.Name), vfs.Fold(f)) {
				out = append(out, n.ID)
				break
			}
		}
	}
	slices.Sort(out)
	return out
}

func ids(ns []vfs.Node) []uint64 {
	var out []uint64
	for _, n := range ns {
		out = append(out, n.ID)
	}
	return out
}

// TestSearchAgreesWithBruteForce builds a random tree of 10,000 names,
// renames, moves and deletes some of it, and compares Search with a walk
// of the tree over many random queries of every length, whole and paged.
func TestSearchAgreesWithBruteForce(t *testing.T) {
	e := newEnv(t)
	r := rand.New(rand.NewPCG(16, 4))
	// A small alphabet, cased and not, with non-ASCII letters, so
	// queries of every length match often.
	alpha := []rune("abcABCxyzé ÉΣσς-1\u0301")
	name := func() string {
		n := 1 + r.IntN(8)
		var b strings.Builder
		for range n {
			b.WriteRune(alpha[r.IntN(len(alpha))])
		}
		return strings.TrimSpace(b.String()) + fmt.Sprint(r.IntN(100000))
	}
	folders := []uint64{e.root.FolderID}
	var all []uint64
	for len(all) < 10_000 {
		parent := folders[r.IntN(len(folders))]
		names := map[string]bool{}
		for range 500 {
			names[name()] = true
		}
		got, err := e.fs.MkdirMany(ctx, e.root.ID, parent, slices.Sorted(func(yield func(string) bool) {
			for n := range names {
				if !yield(n) {
					return
				}
			}
		}))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, got...)
		folders = append(folders, got[:20]...)
	}
	for i := range 300 {
		id := all[r.IntN(len(all))]
		var err error
		switch i % 3 {
		case 0:
			_, err = e.fs.Rename(ctx, e.root.ID, id, name(), vfs.WriteOptions{})
		case 1:
			_, err = e.fs.Move(ctx, e.root.ID, id, folders[r.IntN(len(folders))], "", vfs.WriteOptions{})
		case 2:
			err = e.fs.Delete(ctx, e.root.ID, id, vfs.WriteOptions{})
		}
		if err != nil && !isExpected(err) {
			t.Fatalf("change %d: %v", i, err)
		}
	}
	if _, err := e.fs.Audit(ctx, e.root.ID); err != nil {
		t.Fatal(err)
	}
	var queries []string
	for range 150 {
		n := 1 + r.IntN(5)
		var b strings.Builder
		for range n {
			b.WriteRune(alpha[r.IntN(len(alpha))])
		}
		queries = append(queries, b.String())
	}
	queries = append(queries, "a", "É", "σ", "zz", "12", "Σς", "abc", "é σ", "no such name")
	items := liveItems(t, e)
	for _, q := range queries {
		want := bruteSearch(items, q)
		got, err := e.fs.Search(ctx, e.root.ID, q, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), want) {
			t.Fatalf("search %q: %d results, brute force %d", q, len(got), len(want))
		}
		// Paged by 7: the same, and each page at most its limit.
		var paged []uint64
		after := uint64(0)
		for pages := 0; ; pages++ {
			ns, next, err := e.fs.SearchAfter(ctx, e.root.ID, q, after, 7)
			if err != nil || len(ns) > 7 || pages > len(want)/7+1 {
				t.Fatalf("search %q after %d: %d results, %v", q, after, len(ns), err)
			}
			paged = append(paged, ids(ns)...)
			if next == 0 {
				break
			}
			after = next
		}
		if !slices.Equal(paged, want) {
			t.Fatalf("search %q in pages of 7: %d results, brute force %d", q, len(paged), len(want))
		}
	}
}

// isExpected says whether a random change failed the way random changes
// may: a name taken, a folder moved into itself, an item already deleted.
func isExpected(err error) bool {
	return errors.Is(err, vfs.ErrNameConflict) || errors.Is(err, vfs.ErrNotExist)
}

// TestSearchShortQueryBound: a query of one or two runes reads at most
// the bound of names per call; next says where to go on, and going on
// finds every match exactly once.
func TestSearchShortQueryBound(t *testing.T) {
	e := openEnvWith(t, t.TempDir(), vfs.WithShortQueryScan(vfs.Options{}, 10))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	var names []string
	for i := range 95 {
		names = append(names, fmt.Sprintf("n%03d", i))
	}
	names = append(names, "zq-rare")
	if _, err := e.fs.MkdirMany(ctx, root.ID, root.FolderID, names); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		q     string
		limit int
		pages int // calls until next is 0
		found int
	}{
		{"zq", 0, 10, 1},   // 96 names, 10 read per call
		{"n0", 5, 20, 95},  // full pages of 5 before the bound
		{"n0", 50, 10, 95}, // the bound before the limit
		{"zq-", 0, 1, 1},   // three runes: the index, unbounded
	}
	for _, tc := range tests {
		var found []uint64
		after, pages := uint64(0), 0
		for {
			ns, next, err := e.fs.SearchAfter(ctx, root.ID, tc.q, after, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			pages++
			found = append(found, ids(ns)...)
			if next == 0 || pages > 100 {
				break
			}
			after = next
		}
		if pages != tc.pages || len(found) != tc.found || !slices.IsSorted(found) {
			t.Errorf("%q limit %d: %d pages, %d found; want %d pages, %d found", tc.q, tc.limit, pages, len(found), tc.pages, tc.found)
		}
	}
}

// TestSearchBackfill: a root created before the name index existed is
// searched by a scan at once, and by the index once Open's backfill is
// done; the answers are the same.
func TestSearchBackfill(t *testing.T) {
	dir := t.TempDir()
	e := openEnv(t, dir)
	root, err := e.fs.CreateRoot(ctx, "old", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	var names []string
	for i := range 1500 {
		names = append(names, fmt.Sprintf("Item %d", i))
	}
	if _, err := e.fs.MkdirMany(ctx, root.ID, root.FolderID, names); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.ForgetNames(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	want := map[string][]uint64{}
	items := liveItems(t, e)
	for _, q := range []string{"item 1", "14", "9", "ITEM 149"} {
		want[q] = bruteSearch(items, q)
		got, err := e.fs.Search(ctx, root.ID, q, 0)
		if err != nil || !slices.Equal(ids(got), want[q]) {
			t.Fatalf("search %q before the backfill: %d results, %v; want %d", q, len(got), err, len(want[q]))
		}
	}
	e.fs.Close()
	e.db.Close()
	e = openEnv(t, dir)
	e.root = root
	t.Cleanup(e.close)
	e.fs.WaitNames()
	if ok, err := e.fs.RootIndexed(ctx, root.ID); err != nil || !ok {
		t.Fatalf("after the backfill: indexed %v, %v", ok, err)
	}
	if _, err := e.fs.Audit(ctx, root.ID); err != nil {
		t.Fatal(err)
	}
	for q, w := range want {
		got, err := e.fs.Search(ctx, root.ID, q, 0)
		if err != nil || !slices.Equal(ids(got), w) {
			t.Fatalf("search %q after the backfill: %d results, %v; want %d", q, len(got), err, len(w))
		}
	}
}

// TestSearchDeletedRoot: a deleted root is not searched.
func TestSearchDeletedRoot(t *testing.T) {
	e := newEnv(t)
	e.write(t, e.root.FolderID, "x.txt", []byte("x"))
	if err := e.fs.DeleteRoot(ctx, e.root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Search(ctx, e.root.ID, "x.txt", 0); !errors.Is(err, vfs.ErrRootDeleted) {
		t.Fatalf("search of a deleted root: %v", err)
	}
}

// TestGrams: the trigrams a name is indexed under, each once, in order of
// first appearance, for short names and for those past the length where
// duplicates are found by a map.
func TestGrams(t *testing.T) {
	long := strings.Repeat("ab", 20) + "c"
	for _, tc := range []struct {
		name string
		want []string
	}{
		{"ab", nil},
		{"abc", []string{"ABC"}},
		{"aaaaa", []string{"AAA"}},
		{"abcabca", []string{"ABC", "BCA", "CAB"}},
		{"f00123.bin", []string{"F00", "001", "012", "123", "23.", "3.B", ".BI", "BIN"}},
		{"ääää", []string{"ÄÄÄ"}},
		{long, []string{"ABA", "BAB", "ABC"}},
		{long + long, []string{"ABA", "BAB", "ABC", "BCA", "CAB"}},
	} {
		if got := vfs.Grams(tc.name); !slices.Equal(got, tc.want) {
			t.Errorf("Grams(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}
