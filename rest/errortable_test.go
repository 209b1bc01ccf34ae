package rest

import (
	"fmt"
	"net/http"
	"slices"
	"testing"

	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// TestErrorTableCoversDomainErrors: every exported error of vfs,
// vfs/chunk, kv, account and share, as their source declares them, has a
// row of its own in errorTable, and a wrapped one is answered as the bare one.
// vfs.ErrChanged and vfs.ErrMetadataLimit once had none and became 500s;
// a new domain error fails here until it gets its row.
func TestErrorTableCoversDomainErrors(t *testing.T) {
	table := errorTable()
	berthtest.ForEachDomainError(t, func(t *testing.T, name string, err error) {
		i := slices.IndexFunc(table, func(m errorMapping) bool { return m.err == err })
		if i < 0 {
			t.Fatalf("%s has no row in rest's errorTable (an internal error gets an explicit 500 unknown row)", name)
		}
		status, body, known := classify(err)
		row := table[i]
		if status != row.status {
			t.Errorf("%s: classify gives %d, its row says %d: an earlier row matches it", name, status, row.status)
		}
		if want := row.status != http.StatusInternalServerError; known != want {
			t.Errorf("%s: known = %v, want %v", name, known, want)
		}
		if row.status == http.StatusInternalServerError && (row.code != "unknown" || body.Error != "unknown" || body.Description != "") {
			t.Errorf("%s: a 500 row answers %+v (code %q), want a bare unknown", name, body, row.code)
		}
		ws, wb, wk := classify(fmt.Errorf("op on item 7: %w", err))
		if ws != status || wb != body || wk != known {
			t.Errorf("%s wrapped: %d %+v %v, bare: %d %+v %v", name, ws, wb, wk, status, body, known)
		}
	})
}

// TestErrorTableRows pins the answers chosen for the domain errors that
// had no row before the table test above (spec section 7).
func TestErrorTableRows(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		code   string
		known  bool
	}{
		// A conditional write whose file changed before the commit: as an
		// If-Match that fails at once.
		{vfs.ErrChanged, http.StatusPreconditionFailed, "invalid_request", true},
		// A lock over vfs.MaxLocks: the item cannot take another lock.
		{vfs.ErrMetadataLimit, http.StatusConflict, "resource_locked", true},
		// vfs answers these as ErrBusy; bare they mean the same.
		{kv.ErrConflict, http.StatusServiceUnavailable, "temporarily_unavailable", true},
		{kv.ErrClosed, http.StatusServiceUnavailable, "temporarily_unavailable", true},
		{fmt.Errorf("%w: %w", vfs.ErrBusy, kv.ErrConflict), http.StatusServiceUnavailable, "temporarily_unavailable", true},
		{chunk.ErrNoSpace, http.StatusServiceUnavailable, "temporarily_unavailable", true},
		// The server's own faults: logged, answered without detail.
		{kv.ErrNotDurable, http.StatusInternalServerError, "unknown", false},
		{chunk.ErrCorrupt, http.StatusInternalServerError, "unknown", false},
		{fmt.Errorf("reading chunk: %w", chunk.ErrNotFound), http.StatusInternalServerError, "unknown", false},
	} {
		status, body, known := classify(c.err)
		if status != c.status || body.Error != c.code || known != c.known {
			t.Errorf("%v: %d %q known=%v, want %d %q known=%v", c.err, status, body.Error, known, c.status, c.code, c.known)
		}
	}
}
