package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"berth/berthtest"
	"berth/vfs"
)

// TestDownloadConditions: conditional GETs and HEADs of a file's download
// and of a share link's, for a file whose two revisions were written
// within one second, so that both have one Last-Modified. A date proves
// the client's copy current only when the revision was written before
// the second it names (httpserve.DateConditions): the date of the old
// revision, If-Modified-Since, was 304 and the client kept the old bytes
// as current; as If-Unmodified-Since it passed. The ETag names the
// revision and decides as before. A 304 carries the ETag and
// Cache-Control a 200 would, and no body; a 412 is the spec's JSON error.
func TestDownloadConditions(t *testing.T) {
	f := newFixture(t)
	t0, old, cur := berthtest.SameSecond(t, f.fs, f.root.ID, f.root.FolderID, "d.txt", "old", "new", vfs.WriteOptions{})
	date := func(d time.Duration) string { return t0.Add(d).UTC().Format(http.TimeFormat) }
	lm := date(0) // both revisions' Last-Modified
	l := f.createLink(t, f.at("/api/2/files/%d/%d/share", cur.ID), nil)

	tests := []struct {
		name   string
		method string
		header []string
		status int
		body   string
	}{
		{"the old revision's Last-Modified sends the new one", "GET", []string{"If-Modified-Since", lm}, 200, "new"},
		{"HEAD agrees", "HEAD", []string{"If-Modified-Since", lm}, 200, ""},
		{"the next second proves it current", "GET", []string{"If-Modified-Since", date(time.Second)}, 304, ""},
		{"HEAD agrees with the 304", "HEAD", []string{"If-Modified-Since", date(time.Second)}, 304, ""},
		{"a date in the future proves nothing", "GET", []string{"If-Modified-Since", time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}, 200, "new"},
		{"a date that is none is ignored", "GET", []string{"If-Modified-Since", "yesterday"}, 200, "new"},
		{"the old ETag sends the new revision", "GET", []string{"If-None-Match", old.ETag()}, 200, "new"},
		{"the ETag is 304 whatever the date", "GET", []string{"If-None-Match", cur.ETag(), "If-Modified-Since", lm}, 304, ""},
		{"a weak ETag is 304 (weak comparison)", "GET", []string{"If-None-Match", "W/" + cur.ETag()}, 304, ""},
		{"the old ETag among others sends it", "GET", []string{"If-None-Match", `"x", ` + old.ETag()}, 200, "new"},
		{"If-Unmodified-Since of Last-Modified is 412", "GET", []string{"If-Unmodified-Since", lm}, 412, `"error":"invalid_request"`},
		{"If-Unmodified-Since of the next second holds", "GET", []string{"If-Unmodified-Since", date(time.Second)}, 200, "new"},
		{"If-Match of the old ETag is 412", "GET", []string{"If-Match", old.ETag()}, 412, `"error":"invalid_request"`},
		{"If-Match of the ETag outweighs the date", "GET", []string{"If-Match", cur.ETag(), "If-Unmodified-Since", date(-time.Hour)}, 200, "new"},
	}
	for _, via := range []struct{ name, path, token string }{
		{"download", f.at("/api/2/files/%d/%d/download", cur.ID), f.token},
		{"share link", "/api/2/sharelinks/" + l.Hash + "/download", ""},
	} {
		for _, tt := range tests {
			t.Run(via.name+"/"+tt.name, func(t *testing.T) {
				h := http.Header{}
				for i := 0; i+1 < len(tt.header); i += 2 {
					h.Set(tt.header[i], tt.header[i+1])
				}
				resp := f.request(tt.method, via.path, via.token, nil, h)
				st, body := f.readAll(resp)
				if st != tt.status || !strings.Contains(string(body), tt.body) || tt.status != 412 && string(body) != tt.body {
					t.Fatalf("%d %q, want %d %q", st, body, tt.status, tt.body)
				}
				if st == http.StatusPreconditionFailed {
					return
				}
				if e := resp.Header.Get("ETag"); e != cur.ETag() {
					t.Errorf("ETag %q, want %q", e, cur.ETag())
				}
				if cc := resp.Header.Get("Cache-Control"); cc != "private, no-cache" {
					t.Errorf("Cache-Control %q", cc)
				}
				if st == http.StatusOK && resp.Header.Get("Content-Length") != "3" {
					t.Errorf("Content-Length %q", resp.Header.Get("Content-Length"))
				}
			})
		}
	}
}

// TestWriteConditions: If-Match, If-None-Match and If-Unmodified-Since on
// the API's writes to a file (RFC 9110 13.1, 13.2.2), judged against the
// file as a download shows it: a client that read revision 1 and sends
// its ETag loses no revision that came since. An upload is held to the
// file of its name (none: the name is free), a rename, move or delete to
// the item of the path. The API ignored them all, so an upload with
// If-Match of an old ETag replaced the newer revision. A condition that
// fails is 412 invalid_request and changes nothing; a tag list that does
// not parse is 400 invalid_request.
func TestWriteConditions(t *testing.T) {
	type step struct {
		route  string // "upload", "upload new", "rename", "move", "delete", "delete folder", "[un]lock[ folder| root]"
		header []string
	}
	tests := []struct {
		name   string
		step   step
		status int
		after  string // a.txt's contents after; "" when gone
	}{
		{"upload, If-Match of the old ETag", step{"upload", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"upload, If-Match of the ETag", step{"upload", []string{"If-Match", "CUR"}}, 200, "v3"},
		{"upload, If-Match of the weak ETag", step{"upload", []string{"If-Match", "W/CUR"}}, 412, "v2"},
		{"upload, If-Match among others", step{"upload", []string{"If-Match", `"x", CUR`}}, 200, "v3"},
		{"upload, If-Match of *", step{"upload", []string{"If-Match", "*"}}, 200, "v3"},
		// A list that does not parse is refused, not guessed at.
		{"upload, If-Match that is no tag", step{"upload", []string{"If-Match", "r1"}}, 400, "v2"},
		{"upload, If-None-Match of a bad tag, then the ETag", step{"upload", []string{"If-None-Match", "x, CUR"}}, 400, "v2"},
		{"upload, If-None-Match of * among tags", step{"upload", []string{"If-None-Match", "*, CUR"}}, 400, "v2"},
		{"delete, If-Match of an unclosed tag", step{"delete", []string{"If-Match", `"r1`}}, 400, "v2"},
		{"upload, If-None-Match of *", step{"upload", []string{"If-None-Match", "*"}}, 412, "v2"},
		{"upload, If-None-Match of the old ETag", step{"upload", []string{"If-None-Match", "OLD"}}, 200, "v3"},
		{"upload, If-Unmodified-Since of Last-Modified", step{"upload", []string{"If-Unmodified-Since", "LM"}}, 412, "v2"},
		{"upload, If-Unmodified-Since of the next second", step{"upload", []string{"If-Unmodified-Since", "LM+1"}}, 200, "v3"},
		{"upload of a new name, If-None-Match of *", step{"upload new", []string{"If-None-Match", "*"}}, 200, "v2"},
		{"upload of a new name, If-Match of *", step{"upload new", []string{"If-Match", "*"}}, 412, "v2"},
		{"rename, If-Match of the old ETag", step{"rename", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"move, If-Match of the old ETag", step{"move", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"delete, If-Match of the old ETag", step{"delete", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"delete, If-Unmodified-Since of Last-Modified", step{"delete", []string{"If-Unmodified-Since", "LM"}}, 412, "v2"},
		{"delete, If-Match of the ETag", step{"delete", []string{"If-Match", "CUR"}}, 200, ""},
		{"delete a folder, If-Match of another tag", step{"delete folder", []string{"If-Match", `"x"`}}, 412, "v2"},
		// Lock and unlock are judged alike; a refused lock locks nothing
		// and a refused unlock leaves the lock. They ignored them.
		{"lock, If-Match of the old ETag", step{"lock", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"lock, If-Match of the ETag", step{"lock", []string{"If-Match", "CUR"}}, 200, "v2"},
		{"lock, If-None-Match of *", step{"lock", []string{"If-None-Match", "*"}}, 412, "v2"},
		{"lock, If-Unmodified-Since of Last-Modified", step{"lock", []string{"If-Unmodified-Since", "LM"}}, 412, "v2"},
		{"lock, If-Unmodified-Since of the next second", step{"lock", []string{"If-Unmodified-Since", "LM+1"}}, 200, "v2"},
		{"lock, If-Match that is no tag", step{"lock", []string{"If-Match", "r1"}}, 400, "v2"},
		{"unlock, If-Match of the old ETag", step{"unlock", []string{"If-Match", "OLD"}}, 412, "v2"},
		{"unlock, If-None-Match of the ETag", step{"unlock", []string{"If-None-Match", "CUR"}}, 412, "v2"},
		{"unlock, If-Match of the ETag", step{"unlock", []string{"If-Match", "CUR"}}, 200, "v2"},
		{"lock a folder, If-Match of another tag", step{"lock folder", []string{"If-Match", `"x"`}}, 412, "v2"},
		{"unlock a folder, If-None-Match of *", step{"unlock folder", []string{"If-None-Match", "*"}}, 412, "v2"},
		{"lock the root, If-Match of another tag", step{"lock root", []string{"If-Match", `"x"`}}, 412, "v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			t0, old, cur := berthtest.SameSecond(t, f.fs, f.root.ID, f.root.FolderID, "a.txt", "v1", "v2", vfs.WriteOptions{})
			d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
			h := http.Header{}
			for i := 0; i+1 < len(tt.step.header); i += 2 {
				v := strings.NewReplacer("OLD", old.ETag(), "CUR", cur.ETag(), "LM+1", t0.Add(time.Second).UTC().Format(http.TimeFormat),
					"LM", t0.UTC().Format(http.TimeFormat)).Replace(tt.step.header[i+1])
				h.Set(tt.step.header[i], v)
			}
			// The item a lock or unlock is of; an unlock's is locked first.
			paths := map[string]string{
				"lock": f.at("/api/2/files/%d/%d/", cur.ID), "unlock": f.at("/api/2/files/%d/%d/", cur.ID),
				"lock folder": f.at("/api/2/files/%d/folder/%d/", d.ID), "unlock folder": f.at("/api/2/files/%d/folder/%d/", d.ID),
				"lock root": f.at("/api/2/files/%d/"),
			}
			lockOf := map[string]uint64{"lock": cur.ID, "unlock": cur.ID, "lock folder": d.ID, "unlock folder": d.ID, "lock root": f.root.FolderID}
			if strings.HasPrefix(tt.step.route, "unlock") {
				if st, body := f.send(http.MethodPost, paths[tt.step.route]+"lock", f.token, nil); st != http.StatusOK {
					t.Fatalf("lock before the unlock: %d %s", st, body)
				}
			}
			var st int
			var body []byte
			switch tt.step.route {
			case "upload", "upload new":
				name := "a.txt"
				if tt.step.route == "upload new" {
					name = "b.txt"
				}
				mb, ct := multipartBody(name, strings.NewReader("v3"))
				h.Set("Content-Type", ct)
				st, body = f.readAll(f.request(http.MethodPost, f.at("/api/2/files/%d/upload"), f.token, mb, h))
			default:
				path, form := f.at("/api/2/files/%d/%d/"+tt.step.route, cur.ID), url.Values{}
				switch tt.step.route {
				case "rename":
					form.Set("name", "c.txt")
				case "move":
					form.Set("folder_id", fmt.Sprint(d.ID))
				case "delete folder":
					path = f.at("/api/2/files/%d/folder/%d/delete", d.ID)
				case "lock", "unlock", "lock folder", "unlock folder", "lock root":
					path = paths[tt.step.route] + strings.Fields(tt.step.route)[0]
				}
				h.Set("Content-Type", "application/x-www-form-urlencoded")
				st, body = f.readAll(f.request(http.MethodPost, path, f.token, strings.NewReader(form.Encode()), h))
			}
			if tt.status >= 400 {
				wantError(t, st, body, tt.status, "invalid_request")
				if want := map[int]string{400: "list of entity tags", 412: "does not hold"}[tt.status]; !strings.Contains(string(body), want) {
					t.Errorf("error_description: %s", body)
				}
			} else if st != tt.status {
				t.Fatalf("%d %s, want %d", st, body, tt.status)
			}
			got := ""
			if n, err := f.fs.Lookup(ctx, f.root.ID, "/a.txt"); err == nil {
				_, rc, err := f.fs.OpenPath(ctx, f.root.ID, n.Path)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				got = string(b)
			}
			if got != tt.after {
				t.Errorf("a.txt holds %q, want %q", got, tt.after)
			}
			if id, ok := lockOf[tt.step.route]; ok {
				n, err := f.fs.Stat(ctx, f.root.ID, id)
				if err != nil {
					t.Fatal(err)
				}
				// A lock that succeeds and an unlock that fails leave it locked.
				if want := (tt.status == http.StatusOK) == (tt.step.route[0] == 'l'); n.Locked() != want {
					t.Errorf("item %d locked: %v, want %v", id, n.Locked(), want)
				}
			}
			if tt.status != http.StatusOK {
				if _, err := f.fs.Lookup(ctx, f.root.ID, "/b.txt"); err == nil {
					t.Error("a refused upload made b.txt")
				}
			}
		})
	}
}

// TestETagStability: an ETag names the bytes a download sends. The same
// bytes asked twice, or after a rename or a move, keep it (a client's
// If-None-Match is still 304); every new revision changes it, even one of
// the same bytes; a folder's zip asked twice has one ETag, and a new
// revision inside changes it.
func TestETagStability(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "a.txt", []byte("same"))
	etag := func() string {
		resp, _ := f.download(fj.ID, nil)
		return resp.Header.Get("ETag")
	}
	zipTag := func() string {
		resp := f.request(http.MethodHead, f.at("/api/2/files/%d/folder/%d/download", d.ID), f.token, nil, nil)
		f.readAll(resp)
		return resp.Header.Get("ETag")
	}
	e1 := etag()
	if e1 == "" || etag() != e1 {
		t.Fatalf("the same bytes asked twice: %q, then %q", e1, etag())
	}
	for _, step := range []struct{ route, field, value string }{
		{"rename", "name", "b.txt"},
		{"move", "folder_id", fmt.Sprint(d.ID)},
	} {
		if st, b := f.postForm(f.at("/api/2/files/%d/%d/"+step.route, fj.ID), url.Values{step.field: {step.value}}); st != http.StatusOK {
			t.Fatalf("%s: %d %s", step.route, st, b)
		}
		if e := etag(); e != e1 {
			t.Errorf("after a %s the ETag is %q, was %q", step.route, e, e1)
		}
		if resp, _ := f.download(fj.ID, http.Header{"If-None-Match": {e1}}); resp.StatusCode != http.StatusNotModified {
			t.Errorf("after a %s, If-None-Match of the ETag: %d", step.route, resp.StatusCode)
		}
	}
	z1 := zipTag()
	if z1 == "" || zipTag() != z1 {
		t.Fatalf("a zip asked twice: %q, then %q", z1, zipTag())
	}
	f.mustUpload(f.at("/api/2/files/%d/folder/%d/upload", d.ID), "b.txt", []byte("same"))
	if e := etag(); e == e1 {
		t.Errorf("a new revision of the same bytes kept the ETag %q", e)
	}
	if z := zipTag(); z == z1 {
		t.Errorf("a new revision inside kept the zip's ETag %q", z)
	}
}

// TestConditionAccess walks every route that judges If-Match,
// If-None-Match or If-Unmodified-Since, with one that fails and with one
// that does not parse, as each kind of caller: the conditions come after
// access, so a stranger gets the answer they get without them (401, or
// 404 as for a root that does not exist) and learns nothing of the
// item's ETag; only the owner gets 412 or 400, and nothing changes.
func TestConditionAccess(t *testing.T) {
	f := newFixture(t)
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("contents"))
	callers := f.strangers()
	r, fi, fo := f.root.ID, fj.ID, d.ID
	routes := []struct {
		method, path string
		form         url.Values
	}{
		{"UPLOAD", fmt.Sprintf("/api/2/files/%d/upload", r), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/lock", r), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/unlock", r), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/lock", r, fi), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/unlock", r, fi), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/rename", r, fi), url.Values{"name": {"g.txt"}}},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/move", r, fi), url.Values{"folder_id": {fmt.Sprint(fo)}}},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/delete", r, fi), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/lock", r, fo), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/unlock", r, fo), nil},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/rename", r, fo), url.Values{"name": {"D2"}}},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/move", r, fo), url.Values{"folder_id": {"0"}, "name": {"D3"}}},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/delete", r, fo), nil},
	}
	conds := []struct {
		name   string
		header http.Header
		status int // the owner's
	}{
		{"If-Match that fails", http.Header{"If-Match": {`"x"`}}, http.StatusPreconditionFailed},
		{"If-Match that does not parse", http.Header{"If-Match": {"x"}}, http.StatusBadRequest},
	}
	before := f.treeOf(t)
	for _, rt := range routes {
		for _, c := range conds {
			for _, who := range callers {
				st, body := f.sendWith(rt.method, rt.path, who.token, rt.form, c.header.Clone())
				who.answered(t, rt.method+" "+rt.path+", "+c.name+",", st, body)
			}
			st, body := f.sendWith(rt.method, rt.path, f.token, rt.form, c.header.Clone())
			if st != c.status || !strings.Contains(string(body), `"error":"invalid_request"`) {
				t.Errorf("%s %s, %s, as the owner: %d %s, want %d invalid_request", rt.method, rt.path, c.name, st, body, c.status)
			}
		}
	}
	if after := f.treeOf(t); after != before {
		t.Errorf("refused requests changed the root:\n%s\nwas:\n%s", after, before)
	}
}

// treeOf describes every item of the fixture's root with its ETag and
// locks, so a test sees any change to it.
func (f *fixture) treeOf(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	var walk func(id uint64)
	walk = func(id uint64) {
		n, err := f.fs.Stat(context.Background(), f.root.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %d locks\n", n.Path, n.ETag(), len(n.Locks))
		if !n.Dir {
			return
		}
		children, _, err := f.fs.List(context.Background(), f.root.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range children {
			walk(c.ID)
		}
	}
	walk(f.root.FolderID)
	return b.String()
}
