package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"berth/vfs"
)

// listEach collects a whole ListEach: what a front end streams.
func listEach(t *testing.T, e *env, folder uint64, opts vfs.ListOptions) ([]vfs.Child, string, string) {
	t.Helper()
	var out []vfs.Child
	var hash, next string
	err := e.fs.ListEach(context.Background(), e.root.ID, folder, opts, func(l *vfs.Listing) error {
		hash = l.Hash
		for c, err := range l.Children() {
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		next = l.Next()
		return nil
	})
	if err != nil {
		t.Fatalf("ListEach(%d, %+v): %v", folder, opts, err)
	}
	return out, hash, next
}

// TestListEachAgreesWithList lists folders of more than one batch, whose
// children's ids interleave with another folder's, with and without
// their dead properties, and checks every child, property and the hash
// against List and Props; then again from List's cache.
func TestListEachAgreesWithList(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	a, err := e.fs.Mkdir(ctx, e.root.ID, top, "a", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.fs.Mkdir(ctx, e.root.ID, top, "b", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		// Ids alternate between a and b; b's children hold many
		// properties each, which an ordered scan of a's must skip.
		ca, err := e.fs.Mkdir(ctx, e.root.ID, a.ID, fmt.Sprintf("n%03d", (i*7)%300), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cb := e.write(t, b.ID, fmt.Sprintf("f%03d", i), nil)
		if i%3 == 0 {
			set := map[string][]byte{"{ns}i": fmt.Appendf(nil, "%d", i)}
			if err := e.fs.PatchProps(ctx, e.root.ID, ca.ID, set, nil, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		set := map[string][]byte{}
		for j := range 10 {
			set[fmt.Sprintf("{ns}p%d", j)] = []byte("v")
		}
		if err := e.fs.PatchProps(ctx, e.root.ID, cb.ID, set, nil, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, folder := range []uint64{a.ID, b.ID, top} {
		for _, pass := range []string{"read", "cached"} {
			t.Run(fmt.Sprintf("%d/%s", folder, pass), func(t *testing.T) {
				want, wantHash, err := e.fs.List(ctx, e.root.ID, folder)
				if err != nil {
					t.Fatal(err)
				}
				// The count the kept sum gives is the listing's.
				var count int64
				if err := e.fs.ListEach(ctx, e.root.ID, folder, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
					count = l.Count
					return nil
				}); err != nil || count != int64(len(want)) {
					t.Fatalf("Count %d (%v), want %d", count, err, len(want))
				}
				for _, props := range []bool{false, true} {
					got, hash, next := listEach(t, e, folder, vfs.ListOptions{Hash: true, Props: props})
					if hash != wantHash || next != "" {
						t.Fatalf("hash %q next %q, want %q and none", hash, next, wantHash)
					}
					if len(got) != len(want) {
						t.Fatalf("%d children, want %d", len(got), len(want))
					}
					for i, c := range got {
						if c.ID != want[i].ID || c.Path != want[i].Path || !c.Modified.Equal(want[i].Modified) {
							t.Fatalf("child %d = %+v, want %+v", i, c.Node, want[i])
						}
						wantProps := map[string][]byte(nil)
						if props {
							if wantProps, err = e.fs.Props(ctx, e.root.ID, c.ID); err != nil {
								t.Fatal(err)
							}
						}
						if len(c.Props) != len(wantProps) || !maps.EqualFunc(c.Props, wantProps, func(x, y []byte) bool { return string(x) == string(y) }) {
							t.Fatalf("props of %s = %q, want %q", c.Name, c.Props, wantProps)
						}
					}
				}
			})
		}
	}

	// A file and a missing folder are List's errors.
	f := e.write(t, top, "file", nil)
	for id, want := range map[uint64]error{f.ID: vfs.ErrNotDir, 1 << 40: vfs.ErrNotExist} {
		err := e.fs.ListEach(ctx, e.root.ID, id, vfs.ListOptions{}, func(*vfs.Listing) error { return nil })
		if !errors.Is(err, want) {
			t.Fatalf("ListEach of %d: %v, want %v", id, err, want)
		}
	}
}

// TestListEachPagesUnderChange pages through a folder while children are
// added and removed between pages: every child present throughout comes
// exactly once, and no name comes twice.
func TestListEachPagesUnderChange(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	live := map[string]uint64{}
	for i := range 200 {
		name := fmt.Sprintf("k%04d", i*5)
		live[name] = e.write(t, dir.ID, name, nil).ID
	}
	for _, limit := range []int{1, 7, 50, 300} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			throughout := maps.Clone(live)
			seen := map[string]int{}
			after := ""
			for pages := 0; ; pages++ {
				if pages > 2000 {
					t.Fatal("paging does not end")
				}
				got, hash, next := listEach(t, e, dir.ID, vfs.ListOptions{After: after, Limit: limit, Hash: true})
				if hash != "" || len(got) > limit {
					t.Fatalf("a page of %d with hash %q", len(got), hash)
				}
				for _, c := range got {
					seen[c.Name]++
					if c.Name <= after {
						t.Fatalf("%q listed after cursor %q", c.Name, after)
					}
				}
				if next == "" {
					break
				}
				if next != got[len(got)-1].Name {
					t.Fatalf("next %q, last listed %q", next, got[len(got)-1].Name)
				}
				after = next
				// Between pages: remove two children and add two, before
				// and after the cursor.
				for range 2 {
					names := slices.Sorted(maps.Keys(live))
					victim := names[rng.IntN(len(names))]
					if err := e.fs.Delete(ctx, e.root.ID, live[victim], vfs.WriteOptions{}); err != nil {
						t.Fatal(err)
					}
					delete(live, victim)
					delete(throughout, victim)
					name := fmt.Sprintf("k%04d", rng.IntN(1000))
					if _, ok := live[name]; !ok {
						live[name] = e.write(t, dir.ID, name, nil).ID
					}
				}
			}
			for name, n := range seen {
				if n != 1 {
					t.Errorf("%q listed %d times", name, n)
				}
			}
			for name := range throughout {
				if seen[name] != 1 {
					t.Errorf("%q, present throughout, listed %d times", name, seen[name])
				}
			}
			if t.Failed() {
				t.Logf("live: %s", strings.Join(slices.Sorted(maps.Keys(live)), " "))
			}
		})
	}
}
