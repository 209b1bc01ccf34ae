package rest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

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
	ctx := context.Background()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second).Add(100 * time.Millisecond)
	write := func(body string, at time.Time) vfs.Node {
		n, err := f.fs.WriteFile(ctx, f.root.ID, f.root.FolderID, "d.txt", strings.NewReader(body), vfs.WriteOptions{Modified: at})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	old := write("old", t0)
	cur := write("new", t0.Add(800*time.Millisecond))
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
