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

		// Where several refusals apply, the one that answers: a
		// file named as a collection (404) before the share's role
		// (403), which comes before whether the item exists (a
		// VIEWER's DELETE of nothing is 403); then a missing item
		// (404), a root's top folder (403), Depth (400), the If
		// headers (412), locked_extensions (403) and a lock (423).
		{"which refusal comes first", func(t *testing.T) {
			f := newRefusalWorld(t)
			noMatch := []string{"If-Match", `"nope"`}
			f.checkRefusals(t, []refusal{
				{"DELETE", "/Team/a.txt/", nil, http.StatusNotFound},
				{"DELETE", "/Team/a.txt/", noMatch, http.StatusNotFound},
				{"DELETE", "/Team/a.txt", nil, http.StatusForbidden},
				{"DELETE", "/Team/dir/", nil, http.StatusForbidden},
				{"DELETE", "/Team/nothing", nil, http.StatusForbidden},
				{"DELETE", "/Team/nothing/", nil, http.StatusForbidden},
				{"DELETE", "/Team/", nil, http.StatusForbidden},
				{"DELETE", "/alice/nothing", noMatch, http.StatusNotFound},
				{"DELETE", "/alice/nothing/", nil, http.StatusNotFound},
				{"DELETE", "/alice/f.txt/x", nil, http.StatusNotFound},
				{"DELETE", "/alice/f.txt/", noMatch, http.StatusNotFound},
				{"DELETE", "/alice/f.txt/", []string{"Depth", "0"}, http.StatusNotFound},
				{"DELETE", "/alice/locked.txt/", nil, http.StatusNotFound},
				{"DELETE", "/alice/", noMatch, http.StatusForbidden},
				{"DELETE", "/alice", []string{"Depth", "0"}, http.StatusForbidden},
				{"DELETE", "/noroot/", nil, http.StatusNotFound},
				{"DELETE", "/alice/d", []string{"Depth", "0", "If-Match", `"nope"`}, http.StatusBadRequest},
				{"DELETE", "/alice/ld/", []string{"Depth", "1"}, http.StatusBadRequest},
				{"DELETE", "/alice/r.lck", noMatch, http.StatusPreconditionFailed},
				{"DELETE", "/alice/r.lck", nil, http.StatusForbidden},
				{"DELETE", "/alice/r.lck/", nil, http.StatusNotFound},
				{"DELETE", "/alice/lr.lck", nil, http.StatusForbidden},
				{"DELETE", "/alice/locked.txt", nil, http.StatusLocked},
				{"DELETE", "/alice/ld/y.txt", nil, http.StatusLocked},
				{"DELETE", "/alice/ld", noMatch, http.StatusPreconditionFailed},
				{"DELETE", "/alice/ld/", nil, http.StatusLocked},
			})
		}},
	})
}
