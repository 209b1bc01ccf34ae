package webdav

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
	"berth/vfs/chunk"
)

// TestErrorTableCoversDomainErrors: every exported error of vfs,
// vfs/chunk, kv, account and share, as their source declares them, has a
// row of its own in errorTable, which classify finds for it bare and wrapped,
// and osErr hands x/net/webdav the row's os value. A new domain error
// fails here until it gets its row.
func TestErrorTableCoversDomainErrors(t *testing.T) {
	table := errorTable()
	berthtest.ForEachDomainError(t, func(t *testing.T, name string, err error) {
		var row *errorMapping
		for i := range table {
			if table[i].err == err {
				row = &table[i]
				break
			}
		}
		if row == nil {
			t.Fatalf("%s has no row in webdav's errorTable (an internal error gets an explicit 500 row)", name)
		}
		wrapped := fmt.Errorf("op on item 7: %w", err)
		for _, e := range []error{err, wrapped} {
			if m := classify(e); m.err != row.err {
				t.Errorf("%v: classify finds the row of %v, an earlier row than its own", e, m.err)
			}
		}
		checkOSErr(t, *row, wrapped)
	})
}

// checkOSErr checks what osErr gives x/net/webdav for err, whose row is m:
// the lock errors bare (x/net compares with ==), the os errors inside an
// *fs.PathError (os.IsNotExist sees through nothing else), other errors
// themselves inside one.
func checkOSErr(t *testing.T, m errorMapping, err error) {
	t.Helper()
	got := osErr("open", "/alice/a.txt", err)
	if m.os == xwebdav.ErrLocked || m.os == xwebdav.ErrNoSuchLock {
		if got != m.os {
			t.Errorf("osErr(%v) = %#v, want %v itself", err, got, m.os)
		}
		return
	}
	pe, ok := got.(*fs.PathError)
	if !ok {
		t.Fatalf("osErr(%v) = %T, want *fs.PathError", err, got)
	}
	want := m.os
	if want == nil {
		want = err
	}
	if pe.Err != want || pe.Op != "open" || pe.Path != "/alice/a.txt" {
		t.Errorf("osErr(%v) = %#v, want Err %v", err, pe, want)
	}
}

// TestOSErrForXNet pins what x/net/webdav's checks see (it tests with
// os.IsNotExist, os.IsExist, os.IsPermission and ==, none of which sees
// through %w), as fs.go's osErr gave it before the table.
func TestOSErrForXNet(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("vfs: lookup %q: %w", "a.txt", err) }
	for _, c := range []struct {
		err   error
		check func(error) bool
		what  string
	}{
		{vfs.ErrNotExist, os.IsNotExist, "os.IsNotExist"},
		{vfs.ErrRootDeleted, os.IsNotExist, "os.IsNotExist"},
		{vfs.ErrNotDir, os.IsNotExist, "os.IsNotExist"},
		{vfs.ErrNameConflict, os.IsExist, "os.IsExist"},
		{vfs.ErrInvalidName, os.IsPermission, "os.IsPermission"},
		{vfs.ErrNameTooLong, os.IsPermission, "os.IsPermission"},
		{vfs.ErrRootItem, os.IsPermission, "os.IsPermission"},
		{vfs.ErrExtensionExcluded, os.IsPermission, "os.IsPermission"},
		{vfs.ErrFileTooLarge, os.IsPermission, "os.IsPermission"},
		{vfs.ErrQuotaExceeded, os.IsPermission, "os.IsPermission"},
		{vfs.ErrIsDir, os.IsPermission, "os.IsPermission"},
		{vfs.ErrLocked, func(e error) bool { return e == xwebdav.ErrLocked }, "== webdav.ErrLocked"},
		{vfs.ErrNoSuchLock, func(e error) bool { return e == xwebdav.ErrNoSuchLock }, "== webdav.ErrNoSuchLock"},
	} {
		if got := osErr("stat", "/alice/a.txt", wrap(c.err)); !c.check(got) {
			t.Errorf("osErr(%v) = %#v: %s is false", c.err, got, c.what)
		}
	}
	if osErr("stat", "/x", nil) != nil {
		t.Error("osErr(nil) is not nil")
	}
	// What already is an os value (session.resolve's) goes as it is.
	pe := &fs.PathError{Op: "resolve", Path: "nope", Err: os.ErrNotExist}
	for _, e := range []error{os.ErrNotExist, os.ErrExist, os.ErrPermission, pe} {
		if got := osErr("stat", "/nope", e); got != e {
			t.Errorf("osErr(%#v) = %#v, want it unchanged", e, got)
		}
	}
	// An error x/net has no value for keeps its own, for the log.
	busy := fmt.Errorf("%w: closing", vfs.ErrBusy)
	if got := osErr("stat", "/a", busy); !errors.Is(got, vfs.ErrBusy) || os.IsNotExist(got) {
		t.Errorf("osErr(ErrBusy) = %#v", got)
	}
}

// TestErrorTableOrder: no row is shadowed by an earlier one, so every row
// is the answer to its own error; and every error value webdav declares
// (package-level err*) is answered by a row, not as an unknown 500.
func TestErrorTableOrder(t *testing.T) {
	table := errorTable()
	for i, m := range table {
		if got := classify(m.err); got.err != m.err {
			t.Errorf("row %d (%v) is shadowed by the row of %v", i, m.err, got.err)
		}
	}
	// webdav's own error values, by name: the test parses the package
	// for err* variables and fails on one missing here, so a new one
	// gets its row before it is answered as an unknown 500.
	values := map[string]error{
		"errBadBody":           errBadBody,
		"errBadDepth":          errBadDepth,
		"errBadDestination":    errBadDestination,
		"errBadCondition":      errBadCondition,
		"errBadIf":             errBadIf,
		"errBadOverwrite":      errBadOverwrite,
		"errBadPath":           errBadPath,
		"errBadXML":            errBadXML,
		"errCollectionTarget":  errCollectionTarget,
		"errDisabled":          errDisabled,
		"errFileAsCollection":  errFileAsCollection,
		"errFiniteDepth":       errFiniteDepth,
		"errForeignLock":       errForeignLock,
		"errIfFailed":          errIfFailed,
		"errInsideItself":      errInsideItself,
		"errLockTokenMismatch": errLockTokenMismatch,
		"errLockingDisabled":   errLockingDisabled,
		"errMkcolBody":         errMkcolBody,
		"errNoCredentials":     errNoCredentials,
		"errNoLockToken":       errNoLockToken,
		"errNoOverwrite":       errNoOverwrite,
		"errNoRoot":            errNoRoot,
		"errNotWriteLock":      errNotWriteLock,
		"errOtherServer":       errOtherServer,
		"errParentMissing":     errParentMissing,
		"errPartialPut":        errPartialPut,
		"errPathTooDeep":       errPathTooDeep,
		"errPrecondition":      errPrecondition,
		"errRootsList":         errRootsList,
		"errRootsNotCreated":   errRootsNotCreated,
		"errShareReadOnly":     errShareReadOnly,
		"errSameResource":      errSameResource,
		"errStalled":           errStalled,
		"errTooManyXMLBodies":  errTooManyXMLBodies,
		"errXMLTooLarge":       errXMLTooLarge,
	}
	_, names := berthtest.VarNames(t, ".", "err")
	if len(names) == 0 {
		t.Fatal("found no err* variables in webdav")
	}
	for _, name := range names {
		err, ok := values[name]
		if !ok {
			t.Errorf("%s is declared in webdav but not listed in TestErrorTableOrder's values", name)
			continue
		}
		if classify(err) == unknownError {
			t.Errorf("%s has no row in errorTable", name)
		}
	}
}

// TestErrorAnswers pins the answers, byte for byte, that finish writes
// for the table's kinds of row: a message of the row, the error's own
// text, describe's text, the status text of a 5xx, an RFC 4918 DAV:error
// body, a challenge.
func TestErrorAnswers(t *testing.T) {
	h := New(Options{})
	davError := func(cond string) string {
		return `<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<D:error xmlns:D="DAV:"><D:` + cond + `/></D:error>`
	}
	conflict := fmt.Errorf("%w: %q exists", vfs.ErrNameConflict, "a.txt")
	limit := fmt.Errorf("%w: 300 dead properties, at most 256", vfs.ErrMetadataLimit)
	for _, c := range []struct {
		name   string
		err    error
		status int
		body   string
		ctype  string
		auth   string
	}{
		{"row message", fmt.Errorf("lock: %w", vfs.ErrLocked), 423, "the resource is locked\n", "text/plain; charset=utf-8", ""},
		{"error's text", conflict, 409, conflict.Error() + "\n", "text/plain; charset=utf-8", ""},
		{"error's text and more", limit, 507, limit.Error() + "; nothing was stored\n", "text/plain; charset=utf-8", ""},
		{"507 keeps its message", vfs.ErrNoSpace, 507, "the server's storage is full; nothing was stored\n", "text/plain; charset=utf-8", ""},
		{"described", describe(errBadDepth, "invalid Depth for %s", "COPY"), 400, "invalid Depth for COPY\n", "text/plain; charset=utf-8", ""},
		{"described domain error", describe(vfs.ErrRootItem, "a root folder cannot be replaced"), 403, "a root folder cannot be replaced\n", "text/plain; charset=utf-8", ""},
		{"503 says only its status", fmt.Errorf("%w: closed", vfs.ErrBusy), 503, "Service Unavailable\n", "text/plain; charset=utf-8", ""},
		{"502 says only its status", errOtherServer, 502, "Bad Gateway\n", "text/plain; charset=utf-8", ""},
		{"unknown", errors.New("disk on fire"), 500, "Internal Server Error\n", "text/plain; charset=utf-8", ""},
		{"internal row", kv.ErrNotDurable, 500, "Internal Server Error\n", "text/plain; charset=utf-8", ""},
		{"chunk internal row", chunk.ErrCorrupt, 500, "Internal Server Error\n", "text/plain; charset=utf-8", ""},
		{"cancelled, client still there", context.Canceled, 400, "Bad Request\n", "text/plain; charset=utf-8", ""},
		{"finite depth", errFiniteDepth, 403, davError("propfind-finite-depth"), "application/xml; charset=utf-8", ""},
		{"unlock token mismatch", errLockTokenMismatch, 409, davError("lock-token-matches-request-uri"), "application/xml; charset=utf-8", ""},
		{"lock gone meanwhile", vfs.ErrNoSuchLock, 409, davError("lock-token-matches-request-uri"), "application/xml; charset=utf-8", ""},
		{"no credentials", errNoCredentials, 401, loginMessage + "\n", "text/plain; charset=utf-8", `Basic realm="berth", charset="UTF-8"`},
		{"path too deep", errPathTooDeep, 414, errPathTooDeep.Error() + "\n", "text/plain; charset=utf-8", ""},
		{"stalled", errStalled, 408, "the request body stopped arriving; nothing was stored\n", "text/plain; charset=utf-8", ""},
		// A lock says until when, from the error (issue 12: it said "for
		// a while"); a bare ErrAccountLocked keeps the row's message.
		{"lock says until when", fmt.Errorf("login: %w", &account.LockedError{Until: time.Date(2026, 11, 26, 14, 5, 0, 0, time.UTC), Left: 12 * time.Minute}),
			403, "Too many failed logins; the account is locked until 14:05:00 UTC (about 12 minutes).\n", "text/plain; charset=utf-8", ""},
		{"bare lock", account.ErrAccountLocked, 403, "Too many failed logins: the account is locked for a while.\n", "text/plain; charset=utf-8", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.finish(w, httptest.NewRequest("PUT", "/webdav/alice/a.txt", nil), c.err)
			if w.Code != c.status || w.Body.String() != c.body {
				t.Errorf("%d %q, want %d %q", w.Code, w.Body, c.status, c.body)
			}
			if got := w.Header().Get("Content-Type"); got != c.ctype {
				t.Errorf("Content-Type %q, want %q", got, c.ctype)
			}
			if got := w.Header().Get("WWW-Authenticate"); got != c.auth {
				t.Errorf("WWW-Authenticate %q, want %q", got, c.auth)
			}
		})
	}
}

// TestAuthFailedAgreesWithTable: a failed login is answered as the
// table's account rows say (status, challenge, body), so the one table
// holds the truth for them too. It once compared authFailed, which picked
// these statuses in place, with the table; authFailed is finish now.
func TestAuthFailedAgreesWithTable(t *testing.T) {
	h := New(Options{})
	for _, err := range []error{
		account.ErrAccountLocked, account.ErrInactive, errNoCredentials, account.ErrInvalidCredentials,
		account.ErrInvalidToken, account.ErrNotFound, account.ErrExists, account.ErrInvalid,
		account.ErrUserLimitExceeded, fmt.Errorf("login: %w", account.ErrAccountLocked),
		&account.LockedError{Until: time.Now().Add(time.Minute), Left: time.Minute},
	} {
		r := httptest.NewRequest("PROPFIND", "/webdav/", nil)
		got := httptest.NewRecorder()
		h.finish(got, r, err)
		m := classify(err)
		challenge := ""
		if m.challenge {
			challenge = `Basic realm="berth", charset="UTF-8"`
		}
		msg := m.message(err)
		if m.status >= 500 {
			msg = http.StatusText(m.status)
		}
		if got.Code != m.status || got.Body.String() != msg+"\n" ||
			got.Header().Get("WWW-Authenticate") != challenge ||
			got.Header().Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Errorf("%v: answered %d %q %v, the table says %d %q challenge %v", err, got.Code, got.Body, got.Header(), m.status, msg, m.challenge)
		}
	}
}

// TestCancelledClientGetsNoBody: a client that went away gets no answer,
// neither from berth's own handlers (finish) nor from x/net/webdav's
// (goneWriter): nobody reads it, as REST does too. A stalled body (408)
// is answered: that client is still there.
func TestCancelledClientGetsNoBody(t *testing.T) {
	h := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest("PUT", "/webdav/alice/a.txt", nil).WithContext(ctx)
	for _, err := range []error{context.Canceled, vfs.ErrNotExist, errors.New("disk on fire"), errFiniteDepth, errNoCredentials} {
		w := httptest.NewRecorder()
		h.finish(w, r, err)
		if w.Body.Len() != 0 || len(w.Header()) != 0 {
			t.Errorf("%v: cancelled client got %d %v %q", err, w.Code, w.Header(), w.Body)
		}
	}
	w := httptest.NewRecorder()
	h.finish(w, r, errStalled)
	if w.Code != http.StatusRequestTimeout || w.Body.Len() == 0 {
		t.Errorf("stalled body: %d %q, want 408 with a message", w.Code, w.Body)
	}

	// x/net/webdav's own error answers.
	rec := httptest.NewRecorder()
	g := &goneWriter{ResponseWriter: rec, r: r}
	g.WriteHeader(http.StatusNotFound)
	g.Write([]byte("Not Found"))
	if rec.Body.Len() != 0 || rec.Code != http.StatusOK || len(rec.Header()) != 0 {
		t.Errorf("goneWriter, client gone: %d %v %q", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	g = &goneWriter{ResponseWriter: rec, r: httptest.NewRequest("GET", "/webdav/alice/a.txt", nil)}
	g.WriteHeader(http.StatusNotFound)
	g.Write([]byte("Not Found"))
	if rec.Code != http.StatusNotFound || rec.Body.String() != "Not Found" {
		t.Errorf("goneWriter, client there: %d %q", rec.Code, rec.Body)
	}
}

// TestCancelledClientGetsNoBodyServed: through the whole handler, over a
// real store, requests whose client goes away before the answer get none:
// a PUT whose body read finds the client gone, a PROPFIND whose XML is
// cut off, a GET of a missing file answered by x/net/webdav.
func TestCancelledClientGetsNoBodyServed(t *testing.T) {
	stack := berthtest.New(t, berthtest.Options{})
	const pw = "correct horse battery"
	stack.AddPerson(t, "alice", pw)
	h := New(Options{FS: stack.FS, Accounts: stack.Accounts})

	// A successful login first, so the next ones meet the credential
	// cache and reach the method.
	r := httptest.NewRequest("PROPFIND", "/webdav/alice/", nil)
	r.SetBasicAuth("alice", pw)
	r.Header.Set("Depth", "0")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMultiStatus {
		t.Fatalf("PROPFIND: %d %q", w.Code, w.Body)
	}

	for _, c := range []struct {
		method, path string
		body         func(cancel func()) io.Reader
		cancelFirst  bool
		hdr          []string
	}{
		{"PUT", "/webdav/alice/a.txt", func(cancel func()) io.Reader { return &cancelReader{cancel: cancel, data: "some bytes"} }, false, nil},
		{"PROPFIND", "/webdav/alice/", func(cancel func()) io.Reader {
			return &cancelReader{cancel: cancel, data: "<D:propfind xmlns:D='DAV:'><D:pr"}
		}, false, []string{"Depth", "1"}},
		{"GET", "/webdav/alice/missing.txt", func(func()) io.Reader { return nil }, true, nil},
		{"DELETE", "/webdav/alice/missing.txt", func(func()) io.Reader { return nil }, true, nil},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		r := httptest.NewRequest(c.method, c.path, c.body(cancel)).WithContext(ctx)
		r.SetBasicAuth("alice", pw)
		for i := 0; i+1 < len(c.hdr); i += 2 {
			r.Header.Set(c.hdr[i], c.hdr[i+1])
		}
		if c.cancelFirst {
			cancel()
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		cancel()
		if w.Body.Len() != 0 {
			t.Errorf("%s %s, client gone: %d %q", c.method, c.path, w.Code, w.Body)
		}
	}
}

// cancelReader is a request body whose client goes away while it is read:
// it cancels the request's context, then ends.
type cancelReader struct {
	cancel func()
	data   string
	done   bool
}

func (c *cancelReader) Read(b []byte) (int, error) {
	if c.done {
		return 0, io.ErrUnexpectedEOF
	}
	c.done = true
	c.cancel()
	return copy(b, c.data), nil
}
