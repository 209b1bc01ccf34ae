package webdav_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"berth/vfs"
	"berth/vfs/chunk"
)

// TestSpace: a disk down to its reserve. What adds data is 507 and stores
// nothing, what does not goes on. A row per case, each on a fresh server;
// the space quota of a policy is in put_test.go, COPY's single step on
// a disk that fills midway in copymove_test.go.
func TestSpace(t *testing.T) {
	runCases(t, []davCase{
		// On a disk down to its reserve, every method that adds data answers
		// 507 Insufficient Storage and stores nothing, while reads, deletes,
		// moves and locks on existing items go on. Formerly TestFullDisk
		// (diskfull_test.go).
		{"writes are 507 on a full disk, the rest goes on", func(t *testing.T) {
			var free atomic.Int64
			free.Store(1 << 40)
			f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
				Reserve: 1 << 30,
				Free:    func() (int64, error) { return free.Load(), nil },
			}})
			content := bytes.Repeat([]byte("berth "), 100_000)
			st, _, body := f.do("PUT", "/kept.txt", bytes.NewReader(content))
			want(t, "PUT with room", st, http.StatusCreated, body)
			st, _, body = f.do("MKCOL", "/dir", nil)
			want(t, "MKCOL with room", st, http.StatusCreated, body)

			free.Store(1<<30 - 1)
			for _, c := range []struct {
				what, method, path, body string
				hdr                      []string
			}{
				{"PUT of a new file", "PUT", "/new.txt", "hello", nil},
				{"PUT of a new revision", "PUT", "/kept.txt", "changed", nil},
				{"MKCOL", "MKCOL", "/newdir", "", nil},
				{"COPY", "COPY", "/kept.txt", "", []string{"Destination", f.url("/copy.txt")}},
				{"PROPPATCH", "PROPPATCH", "/kept.txt", `<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:a>1</Z:a></D:prop></D:set></D:propertyupdate>`, nil},
				{"LOCK of a new name", "LOCK", "/locked-new.txt", `<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`, nil},
			} {
				st, _, body := f.do(c.method, c.path, strings.NewReader(c.body), c.hdr...)
				want(t, c.what+" on a full disk", st, http.StatusInsufficientStorage, body)
				if !strings.Contains(body, "storage is full") {
					t.Errorf("%s: body %q does not say why", c.what, body)
				}
			}
			for _, p := range []string{"/new.txt", "/newdir", "/copy.txt", "/locked-new.txt"} {
				if _, err := f.lookup(p); !errors.Is(err, vfs.ErrNotExist) {
					t.Errorf("%s was stored on a full disk: %v", p, err)
				}
			}
			if got, err := f.read("/kept.txt"); err != nil || !bytes.Equal(got, content) {
				t.Fatalf("kept.txt on a full disk: %v, identical %v", err, bytes.Equal(got, content))
			}

			st, _, body = f.do("MOVE", "/dir", nil, "Destination", f.url("/moved"))
			want(t, "MOVE on a full disk", st, http.StatusCreated, body)
			st, _, body = f.do("DELETE", "/moved", nil)
			want(t, "DELETE on a full disk", st, http.StatusNoContent, body)

			free.Store(1 << 40)
			st, _, body = f.do("PUT", "/new.txt", strings.NewReader("hello"))
			want(t, "PUT after space was freed", st, http.StatusCreated, body)
		}},

		// A COPY (or a MOVE between roots, which copies) over an existing
		// destination replaces it; on a full disk the copy is refused, so the
		// destination must stay. Formerly TestFullDiskCopyOverwrite
		// (diskfull_test.go).
		{"a refused COPY keeps the destination it would replace", func(t *testing.T) {
			var free atomic.Int64
			free.Store(1 << 40)
			f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
				Reserve: 1 << 30,
				Free:    func() (int64, error) { return free.Load(), nil },
			}})
			for _, p := range []string{"/a.txt", "/b.txt"} {
				st, _, body := f.do("PUT", p, strings.NewReader("contents of "+p))
				want(t, "PUT "+p, st, http.StatusCreated, body)
			}
			st, _, body := f.do("MKCOL", "/dir", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("MKCOL", "/dir2", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)

			free.Store(1<<30 - 1)
			st, _, body = f.do("COPY", "/a.txt", nil, "Destination", f.url("/b.txt"))
			want(t, "COPY over a file on a full disk", st, http.StatusInsufficientStorage, body)
			st, _, body = f.do("COPY", "/dir", nil, "Destination", f.url("/dir2"), "Depth", "0")
			want(t, "COPY Depth 0 over a folder on a full disk", st, http.StatusInsufficientStorage, body)
			if got, err := f.read("/b.txt"); err != nil || string(got) != "contents of /b.txt" {
				t.Errorf("b.txt after a refused COPY over it: %q %v", got, err)
			}
			if _, err := f.lookup("/dir2"); err != nil {
				t.Errorf("dir2 after a refused COPY over it: %v", err)
			}
			// A MOVE within the root copies nothing: it goes on.
			st, _, body = f.do("MOVE", "/a.txt", nil, "Destination", f.url("/b.txt"))
			want(t, "MOVE over a file on a full disk", st, http.StatusNoContent, body)
		}},
	})
}
