package rest

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"berth/account"
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
		// description, when set, is the error_description owed.
		description string
	}{
		// A conditional write whose file changed before the commit: as an
		// If-Match that fails at once.
		{vfs.ErrChanged, http.StatusPreconditionFailed, "invalid_request", true, ""},
		// A lock over vfs.MaxLocks: the item cannot take another lock.
		{vfs.ErrMetadataLimit, http.StatusConflict, "resource_locked", true, ""},
		// vfs answers these as ErrBusy; bare they mean the same.
		{kv.ErrConflict, http.StatusServiceUnavailable, "temporarily_unavailable", true, ""},
		{kv.ErrClosed, http.StatusServiceUnavailable, "temporarily_unavailable", true, ""},
		{fmt.Errorf("%w: %w", vfs.ErrBusy, kv.ErrConflict), http.StatusServiceUnavailable, "temporarily_unavailable", true, ""},
		{chunk.ErrNoSpace, http.StatusServiceUnavailable, "temporarily_unavailable", true, ""},
		// A client gone before the answer is no fault of the server's
		// (it was 500 unknown, in the logs and metrics too).
		{context.Canceled, http.StatusBadRequest, "invalid_request", true, ""},
		{fmt.Errorf("writing: %w", context.Canceled), http.StatusBadRequest, "invalid_request", true, ""},
		// The server's own faults: logged, answered without detail.
		{kv.ErrNotDurable, http.StatusInternalServerError, "unknown", false, ""},
		{chunk.ErrCorrupt, http.StatusInternalServerError, "unknown", false, ""},
		{fmt.Errorf("reading chunk: %w", chunk.ErrNotFound), http.StatusInternalServerError, "unknown", false, ""},
		// A lock says until when and about how long (issue 12: the
		// description used to be empty), wrapped or not; a bare
		// ErrAccountLocked, which the account service no longer returns,
		// gets the row's text.
		{&account.LockedError{Until: time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC), Left: 12 * time.Minute},
			http.StatusForbidden, "account_locked", true,
			"too many failed logins; the account is locked until 14:05:00 UTC (about 12 minutes)"},
		{fmt.Errorf("login: %w", &account.LockedError{Until: time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC), Left: 40 * time.Second}),
			http.StatusForbidden, "account_locked", true,
			"too many failed logins; the account is locked until 14:05:00 UTC (less than a minute)"},
		{account.ErrAccountLocked, http.StatusForbidden, "account_locked", true, "too many failed logins; the account is locked for a while"},
	} {
		status, body, known := classify(c.err)
		if status != c.status || body.Error != c.code || known != c.known {
			t.Errorf("%v: %d %q known=%v, want %d %q known=%v", c.err, status, body.Error, known, c.status, c.code, c.known)
		}
		if c.description != "" && body.Description != c.description {
			t.Errorf("%v: error_description %q, want %q", c.err, body.Description, c.description)
		}
	}
}
