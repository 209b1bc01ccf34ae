package webdav_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"berth/vfs"
)

// The tests below send what a hostile or broken client could, each over
// one of berth's bounds, and check the answer is a clear refusal that
// stores nothing, not a 500, a silent truncation or unbounded storage.

func proppatchBody(props ...string) string {
	return `<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop>` +
		strings.Join(props, "") + `</D:prop></D:set></D:propertyupdate>`
}

// props returns the dead properties of the item at root-relative path p.
func (f *fixture) props(p string) map[string][]byte {
	f.t.Helper()
	n, err := f.lookup(p)
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := f.fs.Props(context.Background(), f.root.ID, n.ID)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

func TestDeadPropertyLimits(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/p.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody(`<Z:kept>1</Z:kept>`)))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)

	// A name longer than Badger's key limit (65,000 bytes) was a 500.
	long := strings.Repeat("n", vfs.MaxPropNameBytes+1)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody("<Z:"+long+">1</Z:"+long+">")))
	want(t, "PROPPATCH with a long name", st, http.StatusInsufficientStorage, body)
	contains(t, body, "property name")
	long = strings.Repeat("n", 70000)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody(`<`+long+` xmlns="urn:z">1</`+long+`>`)))
	want(t, "PROPPATCH with a name over Badger's key limit", st, http.StatusInsufficientStorage, body)

	// One value over the per-item total, then several that reach it
	// only together: each refused whole, what was stored stays.
	big := strings.Repeat("v", vfs.MaxPropsBytes)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody("<Z:big>"+big+"</Z:big>")))
	want(t, "PROPPATCH with a large value", st, http.StatusInsufficientStorage, body)
	half := strings.Repeat("v", vfs.MaxPropsBytes/2)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody("<Z:a>"+half+"</Z:a>")))
	want(t, "PROPPATCH of half the limit", st, http.StatusMultiStatus, body)
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody("<Z:b>"+half+"</Z:b>")))
	want(t, "PROPPATCH past the limit", st, http.StatusInsufficientStorage, body)
	// Replacing a value counts the new one, not both.
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody("<Z:a>"+half+"</Z:a>")))
	want(t, "PROPPATCH replacing a value", st, http.StatusMultiStatus, body)
	m := f.props("/p.txt")
	if len(m) != 2 || string(m["{urn:z}kept"]) != "1" || len(m["{urn:z}a"]) != len(half) {
		t.Fatalf("stored properties changed by refused requests: %d of them", len(m))
	}

	// Many small properties: the same total bound.
	var many []string
	for i := range vfs.MaxPropsBytes / 16 {
		many = append(many, fmt.Sprintf("<Z:p%d>x</Z:p%d>", i, i))
	}
	st, _, body = f.do("PROPPATCH", "/p.txt", strings.NewReader(proppatchBody(many...)))
	want(t, "PROPPATCH of many properties", st, http.StatusInsufficientStorage, body)
	if got := len(f.props("/p.txt")); got != 2 {
		t.Fatalf("%d properties after a refused PROPPATCH, want 2", got)
	}
}

func TestLockOwnerAndCountLimits(t *testing.T) {
	f := newFixture(t)
	st, _, body := f.do("PUT", "/l.txt", strings.NewReader("x"))
	want(t, "PUT", st, http.StatusCreated, body)
	lock := func(owner string) (int, string) {
		st, _, body := f.do("LOCK", "/l.txt", strings.NewReader(`<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>`+owner+`</D:owner></D:lockinfo>`))
		return st, body
	}
	st, body = lock("<D:href>" + strings.Repeat("o", vfs.MaxLockOwnerBytes) + "</D:href>")
	want(t, "LOCK with a long owner", st, http.StatusInsufficientStorage, body)
	contains(t, body, "owner")
	for i := range vfs.MaxLocks {
		st, body = lock(fmt.Sprintf("client %d", i))
		want(t, fmt.Sprintf("shared LOCK %d", i), st, http.StatusOK, body)
	}
	st, body = lock("one too many")
	want(t, "shared LOCK over the limit", st, http.StatusInsufficientStorage, body)
	n, err := f.lookup("/l.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(n.Locks) != vfs.MaxLocks {
		t.Fatalf("%d locks, want %d", len(n.Locks), vfs.MaxLocks)
	}
}

// A listing reads its items' dead properties a batch at a time, so that a
// folder of many items with large properties is never held whole; every
// item still gets its own, across the batches' edges.
func TestPropfindListingReadsPropsInBatches(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	dir, err := f.fs.Mkdir(ctx, f.root.ID, f.root.FolderID, "many", f.opts())
	if err != nil {
		t.Fatal(err)
	}
	const count = 600
	withProps := map[int]bool{0: true, 255: true, 256: true, 511: true, 512: true, 599: true}
	for i := range count {
		n, err := f.fs.WriteFile(ctx, f.root.ID, dir.ID, fmt.Sprintf("f%03d.txt", i), strings.NewReader("x"), f.opts())
		if err != nil {
			t.Fatal(err)
		}
		if withProps[i] {
			v := fmt.Appendf(nil, "value-%03d", i)
			if err := f.fs.PatchProps(ctx, f.root.ID, n.ID, map[string][]byte{"{urn:z}tag": v}, nil, f.opts()); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, _, body := f.do("PROPFIND", "/many", strings.NewReader(`<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>`), "Depth", "1")
	want(t, "PROPFIND allprop", st, http.StatusMultiStatus, body)
	if got := strings.Count(body, "<D:response>"); got != count+1 {
		t.Fatalf("%d responses, want %d", got, count+1)
	}
	for i := range count {
		resp := body[strings.Index(body, fmt.Sprintf("/f%03d.txt</D:href>", i)):]
		resp = resp[:strings.Index(resp, "</D:response>")]
		has := strings.Contains(resp, fmt.Sprintf(`<tag xmlns="urn:z">value-%03d</tag>`, i))
		if has != withProps[i] || (!withProps[i] && strings.Contains(resp, "urn:z")) {
			t.Fatalf("f%03d.txt: its property is there: %v, want %v:\n%s", i, has, withProps[i], resp)
		}
	}
}
