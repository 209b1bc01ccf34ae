package webdav_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// deepTree is a chain of folders in alice's root, built for a depth test:
// path is the dav path of its deepest folder, which holds the file f and
// the folders mv (moved) and side.
type deepTree struct {
	f     *fixture
	depth int // of the deepest folder, the top folder's children at 1
	path  string
	// rounds counts each request's rounds so far: a benchmark runs its
	// body more than once, and a MOVE there and back must alternate.
	rounds map[string]int
}

// newDeepTree makes a chain about depth folders deep: a few folders made
// one by one, then doubled by copying the chain and moving the copy into
// its bottom (each Mkdir walks the folders above it, so a thousand of
// them cost the square of the depth in the fixture alone).
func newDeepTree(t testing.TB, f *fixture, depth int) *deepTree {
	t.Helper()
	ctx := context.Background()
	base, doublings := depth, 0
	for base > 32 {
		base, doublings = base/2, doublings+1
	}
	top, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "c", f.opts())
	if err != nil {
		t.Fatal(err)
	}
	bottom := top
	for i := 1; i < base; i++ {
		if bottom, err = f.fs.Mkdir(ctx, f.root.ID, bottom.ID, "c", f.opts()); err != nil {
			t.Fatal(err)
		}
	}
	n := base
	for range doublings {
		cp, err := f.fs.Copy(ctx, f.root.ID, top.ID, f.root.ID, f.root.FolderID, "copy", f.opts())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.fs.Move(ctx, f.root.ID, cp.ID, bottom.ID, "c", f.opts()); err != nil {
			t.Fatal(err)
		}
		n *= 2
		if bottom, err = f.fs.Lookup(ctx, f.root.ID, bottom.Path+strings.Repeat("/c", n/2)); err != nil {
			t.Fatal(err)
		}
	}
	d := &deepTree{f: f, depth: n, path: bottom.Path, rounds: map[string]int{}}
	for _, dir := range []string{"mv", "side"} {
		if _, err := f.fs.Mkdir(ctx, f.root.ID, bottom.ID, dir, f.opts()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.fs.WriteFile(ctx, f.root.ID, bottom.ID, "f", strings.NewReader("x"), f.opts()); err != nil {
		t.Fatal(err)
	}
	return d
}

// deepRequests are the requests of a sync client at the bottom of a deep
// tree: each is sent with round i, and answers one of ok.
var deepRequests = []struct {
	name string
	req  func(d *deepTree, i int) (method, path, body string, hdr []string)
	ok   []int
}{
	{"PUT", func(d *deepTree, i int) (string, string, string, []string) {
		return "PUT", fmt.Sprint(d.path, "/p", i), "x", nil
	}, []int{http.StatusCreated}},
	{"PROPFIND0", func(d *deepTree, i int) (string, string, string, []string) {
		return "PROPFIND", d.path + "/f", "", []string{"Depth", "0"}
	}, []int{http.StatusMultiStatus}},
	{"PROPFIND1", func(d *deepTree, i int) (string, string, string, []string) {
		return "PROPFIND", d.path + "/side/", "", []string{"Depth", "1"}
	}, []int{http.StatusMultiStatus}},
	{"MOVEfile", func(d *deepTree, i int) (string, string, string, []string) {
		from, to := "/f", "/g"
		if i%2 == 1 {
			from, to = to, from
		}
		return "MOVE", d.path + from, "", []string{"Destination", d.f.url(d.path + to)}
	}, []int{http.StatusCreated}},
	{"MOVEfolder", func(d *deepTree, i int) (string, string, string, []string) {
		from, to := "/mv/", "/side/mv/"
		if i%2 == 1 {
			from, to = to, from
		}
		return "MOVE", d.path + from, "", []string{"Destination", d.f.url(d.path + to)}
	}, []int{http.StatusCreated}},
	{"LOCK", func(d *deepTree, i int) (string, string, string, []string) {
		return "LOCK", fmt.Sprint(d.path, "/l", i), lockExclusive, []string{"Depth", "0"}
	}, []int{http.StatusCreated}},
	{"DELETE", func(d *deepTree, i int) (string, string, string, []string) {
		return "DELETE", fmt.Sprint(d.path, "/p", i), "", nil
	}, []int{http.StatusNoContent}},
}

// deepReads is the store reads (Gets and Scans) of one request, the mean
// of rounds, and the time of one.
func deepReads(t testing.TB, d *deepTree, name string, rounds int, req func(*deepTree, int) (string, string, string, []string), ok []int) (gets, scans float64, per time.Duration) {
	t.Helper()
	i := d.rounds[name]
	d.rounds[name] += rounds
	before, start := d.f.stack.DB.TxnStats(), time.Now()
	for j := i; j < i+rounds; j++ {
		method, p, body, hdr := req(d, j)
		st, _, text := d.f.do(method, p, strings.NewReader(body), hdr...)
		if !slicesContains(ok, st) {
			t.Fatalf("%s %s: %d %s", method, p, st, text)
		}
	}
	per = time.Since(start) / time.Duration(rounds)
	after := d.f.stack.DB.TxnStats()
	return float64(after.Gets-before.Gets) / float64(rounds), float64(after.Scans-before.Scans) / float64(rounds), per
}

func slicesContains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// BenchmarkDeep prices a sync client's requests at the bottom of chains
// of folders 10, 100 and about vfs.MaxDepth deep, in store reads a
// request (gets/op, scans/op) beside the time.
// Run: go test -run '^$' -bench Deep -benchtime 10x ./webdav
func BenchmarkDeep(b *testing.B) {
	for _, depth := range []int{10, 100, vfs.MaxDepth - 2} {
		f := newFixture(b)
		d := newDeepTree(b, f, depth)
		for _, r := range deepRequests {
			b.Run(fmt.Sprint(r.name, "/", d.depth), func(b *testing.B) {
				gets, scans, _ := deepReads(b, d, r.name, b.N, r.req, r.ok)
				b.ReportMetric(gets, "gets/op")
				b.ReportMetric(scans, "scans/op")
			})
		}
	}
}

// TestDeepReads: what each of deepRequests reads of the store a level
// grows no more than linearly with the depth, read right after a write
// elsewhere (a sync client's requests come between its writes, and a
// commit empties vfs's caches). A PROPFIND's inherited locks were read
// by a Stat of each folder above the target, each resolving its path to
// the top: 992 deep, 492,000 reads a PROPFIND. Counts, not times.
func TestDeepReads(t *testing.T) {
	perLevel := map[string]map[int]float64{}
	for _, depth := range []int{100, 400} {
		f := newFixture(t)
		d := newDeepTree(t, f, depth)
		for _, r := range deepRequests {
			var reads float64
			for i := range 2 {
				st, _, text := f.do("PUT", fmt.Sprint("/elsewhere-", r.name, i), strings.NewReader("x"))
				want(t, "PUT elsewhere", st, http.StatusCreated, text)
				gets, scans, _ := deepReads(t, d, r.name, 1, r.req, r.ok)
				reads += gets + scans
			}
			if perLevel[r.name] == nil {
				perLevel[r.name] = map[int]float64{}
			}
			perLevel[r.name][d.depth] = reads / 2 / float64(d.depth)
		}
	}
	for _, r := range deepRequests {
		at := perLevel[r.name]
		t.Logf("%s: %.1f reads a level at depth 100, %.1f at 400", r.name, at[100], at[400])
		if at[400] > 1.2*at[100]+0.2 {
			t.Errorf("%s: %.1f reads a level at depth 100, %.1f at 400; want them to grow no more than linearly", r.name, at[100], at[400])
		}
	}
}
