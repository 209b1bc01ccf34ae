package webdav_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestDelete: DELETE of files and collections. A row per case, each on a
// fresh server; DELETE on a full disk is in space_test.go, over a lock in
// lock_test.go.
func TestDelete(t *testing.T) {
	runCases(t, []davCase{
		// DELETE of a collection with a Depth other than infinity (RFC 4918
		// 9.6.1 allows no other) is refused with 400 and deletes nothing;
		// Depth on a file's DELETE is ignored. Formerly
		// TestDeleteCollectionDepth (deletedepth_test.go).
		{"a collection takes Depth infinity only", func(t *testing.T) {
			f := newFixture(t)
			st, _, body := f.do("MKCOL", "/d", nil)
			want(t, "MKCOL", st, http.StatusCreated, body)
			st, _, body = f.do("PUT", "/d/x.txt", strings.NewReader("x"))
			want(t, "PUT", st, http.StatusCreated, body)
			for _, d := range []string{"0", "1"} {
				st, _, body = f.do("DELETE", "/d", nil, "Depth", d)
				want(t, "DELETE Depth "+d, st, http.StatusBadRequest, body)
				if got, err := f.read("/d/x.txt"); err != nil || string(got) != "x" {
					t.Fatalf("d/x.txt after DELETE Depth %s: %q %v", d, got, err)
				}
			}
			st, _, body = f.do("DELETE", "/d/x.txt", nil, "Depth", "0")
			want(t, "DELETE of a file with Depth 0", st, http.StatusNoContent, body)
			st, _, body = f.do("DELETE", "/d", nil, "Depth", "infinity")
			want(t, "DELETE Depth infinity", st, http.StatusNoContent, body)
		}},
	})
}
