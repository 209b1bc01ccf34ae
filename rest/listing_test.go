package rest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"berth/vfs"
)

// listingPage is a root or folder object with one page of children.
type listingPage struct {
	Type     string `json:"type"`
	Hash     *string
	Children []struct {
		ID   uint64 `json:"id"`
		Path string `json:"path"`
	} `json:"children"`
	NextCursor *string `json:"next_cursor"`
}

// TestListingPagesUnderChange pages through a folder's and the root's
// children (limit and cursor) while children are added and removed
// between pages: every child present throughout comes exactly once, and
// no child twice; a paged answer has no hash; the last has no
// next_cursor.
func TestListingPagesUnderChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "big")
	for _, c := range []struct {
		name   string
		folder uint64
		path   string
		prefix string
	}{
		{"folder", dir.ID, f.at("/api/2/files/%d/folder/%d?include_children=true", dir.ID), "/big/"},
		{"root", f.root.FolderID, f.at("/api/2/files/%d?include_children=true"), "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			live := map[string]uint64{}
			add := func(name string) {
				if _, ok := live[name]; ok {
					return
				}
				n, err := f.fs.Mkdir(ctx, f.root.ID, c.folder, name, vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				live[name] = n.ID
			}
			for i := range 60 {
				add(fmt.Sprintf("n%03d", i*3))
			}
			if c.folder == f.root.FolderID {
				live["big"] = dir.ID
			}
			throughout := maps.Clone(live)
			seen := map[uint64]int{}
			cursor := ""
			for pages := 0; ; pages++ {
				if pages > 200 {
					t.Fatal("paging does not end")
				}
				q := "&limit=7"
				if cursor != "" {
					q += "&cursor=" + url.QueryEscape(cursor)
				}
				st, body := f.get(c.path + q)
				if st != http.StatusOK {
					t.Fatalf("%d %s", st, body)
				}
				var p listingPage
				decode(t, body, &p)
				if p.Hash != nil || len(p.Children) > 7 || p.Children == nil {
					t.Fatalf("a page: %s", body)
				}
				for _, k := range p.Children {
					seen[k.ID]++
				}
				if p.NextCursor == nil {
					break
				}
				cursor = *p.NextCursor
				for range 2 {
					names := slices.Sorted(maps.Keys(live))
					victim := names[rng.IntN(len(names))]
					if victim == "big" {
						continue
					}
					if err := f.fs.Delete(ctx, f.root.ID, live[victim], vfs.WriteOptions{}); err != nil {
						t.Fatal(err)
					}
					delete(live, victim)
					delete(throughout, victim)
					add(fmt.Sprintf("n%03d", rng.IntN(200)))
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Errorf("child %d listed %d times", id, n)
				}
			}
			for name, id := range throughout {
				if seen[id] != 1 {
					t.Errorf("%s, present throughout, listed %d times", name, seen[id])
				}
			}
		})
	}
}

// TestListingPageParameters: limit and cursor are checked, and the whole
// listing is still the default, with its hash and 304.
func TestListingPageParameters(t *testing.T) {
	f := newFixture(t)
	f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "a")
	f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "b")
	base := f.at("/api/2/files/%d?include_children=true")
	for _, q := range []string{"&limit=0", "&limit=1001", "&limit=x", "&limit=", "&cursor=YQ", "&limit=1&cursor=", "&limit=1&cursor=*", "&limit=1&cursor=Lg"} {
		st, body := f.get(base + q)
		if st != http.StatusBadRequest {
			t.Errorf("%s: %d %s", q, st, body)
			continue
		}
		var e errorBody
		decode(t, body, &e)
		if e.Error != "invalid_request" || e.Description == "" {
			t.Errorf("%s: %s", q, body)
		}
	}
	st, body := f.get(base + "&limit=1")
	var p listingPage
	decode(t, body, &p)
	if st != http.StatusOK || len(p.Children) != 1 || p.Children[0].Path != "/a" || p.NextCursor == nil {
		t.Fatalf("first page: %d %s", st, body)
	}
	st, body = f.get(base + "&limit=1&cursor=" + *p.NextCursor)
	p = listingPage{}
	decode(t, body, &p)
	if st != http.StatusOK || len(p.Children) != 1 || p.Children[0].Path != "/b" || p.NextCursor != nil {
		t.Fatalf("last page: %d %s", st, body)
	}
	_, body = f.get(base)
	p = listingPage{}
	decode(t, body, &p)
	if p.Hash == nil || len(p.Children) != 2 || p.NextCursor != nil {
		t.Fatalf("whole listing: %s", body)
	}
	if st, _ := f.get(base + "&hash=" + *p.Hash); st != http.StatusNotModified {
		t.Fatalf("current hash: %d", st)
	}
}
