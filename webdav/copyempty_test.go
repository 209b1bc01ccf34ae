package webdav_test

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"berth/vfs/chunk"
)

// TestCopyDepth0OverwriteIsOneStep: a COPY with Depth 0 of a collection
// over an existing one is a new empty collection with the source's dead
// properties. It used to be a folder made, then its properties set: a
// second step refused (here the disk reaching its reserve between the
// two) answered 507 after the destination had been replaced by an empty
// collection without them. Now it happens whole or not at all.
func TestCopyDepth0OverwriteIsOneStep(t *testing.T) {
	var room atomic.Int64 // space checks left before the disk is full
	room.Store(1 << 40)
	f := newFixtureWith(t, fixtureOptions{Disk: chunk.DiskOptions{
		Reserve: 1 << 30,
		Free: func() (int64, error) {
			if room.Add(-1) < 0 {
				return 0, nil
			}
			return 1 << 40, nil
		},
	}})
	for _, p := range []string{"/src", "/dst"} {
		st, _, body := f.do("MKCOL", p, nil)
		want(t, "MKCOL "+p, st, http.StatusCreated, body)
	}
	st, _, body := f.do("PUT", "/dst/keep.txt", strings.NewReader("keep"))
	want(t, "PUT", st, http.StatusCreated, body)
	st, _, body = f.do("PROPPATCH", "/src", strings.NewReader(`<D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:z"><D:set><D:prop><Z:a>1</Z:a></D:prop></D:set></D:propertyupdate>`))
	want(t, "PROPPATCH", st, http.StatusMultiStatus, body)

	room.Store(1) // one more check finds room, the next does not
	st, _, body = f.do("COPY", "/src", nil, "Destination", f.url("/dst"), "Depth", "0")
	switch st {
	case http.StatusNoContent:
		if _, err := f.lookup("/dst/keep.txt"); err == nil {
			t.Fatal("COPY Depth 0 answered 204 but dst still holds keep.txt")
		}
		st, _, body = f.do("PROPFIND", "/dst", strings.NewReader(`<D:propfind xmlns:D="DAV:" xmlns:Z="urn:z"><D:prop><Z:a/></D:prop></D:propfind>`), "Depth", "0")
		want(t, "PROPFIND", st, http.StatusMultiStatus, body)
		contains(t, body, ">1<")
	default:
		if got, err := f.read("/dst/keep.txt"); err != nil || string(got) != "keep" {
			t.Fatalf("COPY Depth 0 refused (%d %q), and dst/keep.txt is %q, %v", st, body, got, err)
		}
	}
}
