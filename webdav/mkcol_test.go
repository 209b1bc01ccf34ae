package webdav_test

import (
	"net/http"
	"testing"
)

// TestMkcol: what a MKCOL refuses. A row per case, each on a fresh
// server; MKCOL below folders is in paths_test.go
// (TestNewTargetBelowFolders), on a full disk in space_test.go.
func TestMkcol(t *testing.T) {
	runCases(t, []davCase{
		// Where several refusals apply, the one that answers: the
		// share's role (403) before what the name holds; then an item
		// there (405), a missing parent (409), the If headers (412)
		// and a lock (423).
		{"which refusal comes first", func(t *testing.T) {
			f := newRefusalWorld(t)
			noMatch := []string{"If-Match", `"nope"`}
			f.checkRefusals(t, []refusal{
				{"MKCOL", "/Team/new", nil, http.StatusForbidden},
				{"MKCOL", "/Team/a.txt", nil, http.StatusForbidden},
				{"MKCOL", "/Team/a.txt/", nil, http.StatusForbidden},
				{"MKCOL", "/Team/missing/x", nil, http.StatusForbidden},
				{"MKCOL", "/alice/f.txt", noMatch, http.StatusMethodNotAllowed},
				{"MKCOL", "/alice/f.txt/", nil, http.StatusMethodNotAllowed},
				{"MKCOL", "/alice/", nil, http.StatusMethodNotAllowed},
				{"MKCOL", "/alice/ld", nil, http.StatusMethodNotAllowed},
				{"MKCOL", "/alice/locked.txt", nil, http.StatusMethodNotAllowed},
				{"MKCOL", "/alice/missing/x", noMatch, http.StatusConflict},
				{"MKCOL", "/alice/f.txt/x", nil, http.StatusConflict},
				{"MKCOL", "/alice/ld/missing/x", nil, http.StatusConflict},
				{"MKCOL", "/noroot/x", nil, http.StatusConflict},
				{"MKCOL", "/new", nil, http.StatusForbidden},
				{"MKCOL", "/alice/new", noMatch, http.StatusPreconditionFailed},
				{"MKCOL", "/alice/ld/new", nil, http.StatusLocked},
				{"MKCOL", "/alice/ld/new", noMatch, http.StatusPreconditionFailed},
			})
		}},
	})
}
