package webdav

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	xwebdav "golang.org/x/net/webdav"

	"berth/account"
	"berth/kv"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
)

// Errors of the WebDAV protocol itself, found by this package before (or
// instead of) calling a domain. Domain errors are declared in their own
// packages and only mapped here. A handler returns one of these, or a
// domain error, optionally wrapped by describe for a more precise message;
// errorTable alone decides the status.
var (
	// errBadPath is a request path berth refuses rather than reinterprets
	// (400): outside the prefix, an escaped slash, "." or "..".
	errBadPath = errors.New("invalid request path")
	// errTooManyXMLBodies is an XML body (PROPFIND, PROPPATCH, LOCK) of
	// a person whose requests are reading Options.MaxXMLBodies of them
	// already (503: the same request succeeds once one ends).
	errTooManyXMLBodies = errors.New("as many of your requests' XML bodies are being read as berth reads at once for one person; try again once one has arrived")
	// errDisabled is a caller whose organization's policy turns WebDAV off (403).
	errDisabled = errors.New("WebDAV access is disabled by your organization's policy; use the web or sync clients instead.")
	// errRootsNotCreated is a write that would create something directly
	// below the mount's top, where only roots live (403).
	errRootsNotCreated = errors.New("only roots live at the top of the WebDAV mount, and they are not created over WebDAV; put files and folders inside one")
	// errShareReadOnly is a change in a root the caller's share role
	// does not let them change (403): a VIEWER subscriber's PUT, say.
	errShareReadOnly = errors.New("your role in this share does not let you change it")
	// errRootsList is a change to the list of roots, the mount's top (403).
	errRootsList = errors.New("the list of roots cannot be changed")
	// errParentMissing is a resource whose parent collection does not
	// exist or is not a collection (409, RFC 4918 9.3.1, 9.7.1).
	errParentMissing = errors.New("the parent collection does not exist")
	// errFileAsCollection is a URL that ends in "/", which names a
	// collection, where the name is a file or would become one (409).
	errFileAsCollection = errors.New("the URL ends in / (a collection), and names a file")
	// errBadDepth is a Depth header the method does not take (400).
	errBadDepth = errors.New("invalid Depth header")
	// errFiniteDepth is a PROPFIND with Depth infinity where the server
	// does not allow it (403 with the RFC's propfind-finite-depth).
	errFiniteDepth = errors.New("PROPFIND with Depth: infinity is not allowed")
	// errBadDestination is a missing or malformed Destination header (400).
	errBadDestination = errors.New("malformed Destination")
	// errOtherServer is a Destination on another server (502, RFC 4918 9.8.5).
	errOtherServer = errors.New("Destination is on another server")
	// errBadOverwrite is an Overwrite header other than T or F (400).
	errBadOverwrite = errors.New("invalid Overwrite header")
	// errNoOverwrite is a COPY or MOVE onto an existing resource with
	// Overwrite: F (412).
	errNoOverwrite = errors.New("the destination exists and Overwrite is F")
	// errSameResource is a COPY or MOVE onto its own source (403).
	errSameResource = errors.New("source and destination are the same")
	// errInsideItself is a COPY or MOVE of a collection into itself, or
	// onto a collection that holds the source (403).
	errInsideItself = errors.New("a collection cannot go inside itself")
	// errPartialPut is a PUT with Content-Range (400, RFC 9110 14.5).
	errPartialPut = errors.New("PUT with Content-Range (a partial update) is not supported; send the whole file")
	// errCollectionTarget is a method that makes a file aimed at a
	// collection, or a MKCOL aimed at what exists (405).
	errCollectionTarget = errors.New("the method is not allowed on this resource")
	// errMkcolBody is a MKCOL with a body, whose format berth does not know (415).
	errMkcolBody = errors.New("MKCOL with a body is not supported")
	// errBadBody is a well-formed XML body that is not what the method
	// takes (400).
	errBadBody = errors.New("the body is not what the method takes")
	// errNotWriteLock is a LOCK of a type other than write (422).
	errNotWriteLock = errors.New("only write locks exist")
	// errLockingDisabled is a LOCK where the policy does not let users
	// lock files (403).
	errLockingDisabled = errors.New("the organization's policy here does not let users lock files")
	// errNoLockToken is a lock refresh or UNLOCK without the token it needs (400).
	errNoLockToken = errors.New("Lock-Token header required")
	// errForeignLock is a refresh or UNLOCK of someone else's lock (403, RFC 4918 6.4).
	errForeignLock = errors.New("the lock belongs to someone else")
	// errLockTokenMismatch is an UNLOCK whose token names no lock whose
	// scope holds the resource (409 with lock-token-matches-request-uri).
	errLockTokenMismatch = errors.New("the lock token does not match the request URI")
	// errIfFailed is an If header none of whose lists holds (412, RFC 4918 10.4.1).
	errIfFailed = errors.New("the If header's conditions do not hold")
	// errBadCondition is an If-Match or If-None-Match on a write that is
	// neither * nor a list of entity tags (400).
	errBadCondition = errors.New("malformed If-Match or If-None-Match")
	// errPrecondition is an If-Match, If-None-Match or If-Unmodified-Since
	// that does not hold (412, RFC 9110 13.1).
	errPrecondition = errors.New("a precondition does not hold")
	// errStalled is a request body that stopped arriving (408).
	errStalled = errors.New("the request body stopped arriving; nothing was stored")
)

// errorMapping maps one error value to its WebDAV answer and to the value
// x/net/webdav is handed for it.
type errorMapping struct {
	err    error // matched with errors.Is
	status int
	// os is what the FileSystem and LockSystem give x/net/webdav, which
	// tests with os.IsNotExist and == and sees through no wrapping:
	// os.ErrNotExist, os.ErrExist or os.ErrPermission (inside an
	// *fs.PathError), xwebdav.ErrLocked or ErrNoSuchLock (bare). Nil
	// hands on the error itself inside an *fs.PathError.
	os error
	// msg is the text/plain body; "" is the status text, and a "%v" in
	// it is the error's own text. A message given with describe wins.
	// 5xx answers other than 507 send only the status text: the cause is
	// the server's, its detail goes to the log.
	msg string
	// condition, when set, makes the body the RFC 4918 DAV:error XML with
	// this precondition element instead of text.
	condition string
	// challenge adds the Basic challenge, where new credentials can help.
	challenge bool
}

// errorTable is webdav's one table from error values to answers: no
// handler picks a status or writes an error body itself. It is ordered:
// the first entry whose err matches (errors.Is) wins. Every exported
// error of vfs, vfs/chunk, kv, account and share has a row (errors_test.go
// checks), errors genuinely the server's with an explicit 500.
//
// It is a function so the table cannot be changed at run time.
func errorTable() []errorMapping {
	return []errorMapping{
		// The client gave up on the request (its context is done): no
		// body is written then, see finish.
		{err: context.Canceled, status: http.StatusBadRequest},

		// vfs.
		{err: vfs.ErrLocked, status: http.StatusLocked, os: xwebdav.ErrLocked, msg: "the resource is locked"},
		{err: vfs.ErrChanged, status: http.StatusPreconditionFailed, msg: "the resource changed while the request was sent; nothing was stored"},
		{err: vfs.ErrNotExist, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		{err: vfs.ErrRootDeleted, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		// A root the caller does not reach looks like one that does not
		// exist (a forbidden object and a missing one look the same).
		{err: share.ErrNoRoot, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		// WebDAV reaches no organization or person route; these are
		// answered as REST answers them, should one come through.
		{err: share.ErrForbidden, status: http.StatusForbidden, os: os.ErrPermission},
		{err: share.ErrNotFound, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		{err: share.ErrInvitationExpired, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		{err: share.ErrLinkExpired, status: http.StatusGone, os: os.ErrNotExist, msg: "the share link has expired"},
		{err: share.ErrDownloadLimit, status: http.StatusForbidden, os: os.ErrPermission},
		{err: share.ErrLoginRequired, status: http.StatusForbidden, os: os.ErrPermission},
		{err: share.ErrInvalidDate, status: http.StatusBadRequest, os: os.ErrInvalid, msg: "%v"},
		{err: share.ErrNoLinks, status: http.StatusInternalServerError},
		{err: vfs.ErrNotDir, status: http.StatusConflict, os: os.ErrNotExist, msg: "a parent of the resource is not a collection"},
		{err: vfs.ErrNameConflict, status: http.StatusConflict, os: os.ErrExist, msg: "%v"},
		{err: vfs.ErrInvalidName, status: http.StatusBadRequest, os: os.ErrPermission, msg: "%v"},
		{err: vfs.ErrNameTooLong, status: http.StatusBadRequest, os: os.ErrPermission, msg: "%v"},
		{err: vfs.ErrExtensionExcluded, status: http.StatusForbidden, os: os.ErrPermission, msg: "files with this extension are not allowed by the organization's policy here"},
		{err: vfs.ErrFileTooLarge, status: http.StatusRequestEntityTooLarge, os: os.ErrPermission, msg: "the file is larger than the organization's policy here allows"},
		{err: vfs.ErrQuotaExceeded, status: http.StatusInsufficientStorage, os: os.ErrPermission, msg: "storing this would exceed your space quota"},
		// RFC 4918 9.2.1 names 507 for a property the server cannot
		// record; a lock that would not fit is the same refusal.
		{err: vfs.ErrMetadataLimit, status: http.StatusInsufficientStorage, msg: "%v; nothing was stored"},
		{err: vfs.ErrTooDeep, status: http.StatusForbidden, msg: fmt.Sprintf("folders may nest at most %d levels below the root", vfs.MaxDepth)},
		{err: vfs.ErrNoSpace, status: http.StatusInsufficientStorage, msg: "the server's storage is full; nothing was stored"},
		// Staged uploads are tus's (rest); WebDAV never makes one.
		{err: vfs.ErrUploadOffset, status: http.StatusConflict, msg: "%v"},
		{err: vfs.ErrChecksumMismatch, status: http.StatusBadRequest, msg: "%v"},
		{err: vfs.ErrTooManyStaged, status: http.StatusBadRequest, msg: "%v"},
		// A race with the garbage collector, or a store closing under
		// the request: nothing was stored, and the same request can
		// succeed again, as REST's 503 temporarily_unavailable says.
		{err: vfs.ErrBusy, status: http.StatusServiceUnavailable},
		{err: vfs.ErrRootItem, status: http.StatusForbidden, os: os.ErrPermission, msg: "a root folder cannot be changed this way"},
		{err: vfs.ErrIsDir, status: http.StatusMethodNotAllowed, os: os.ErrPermission, msg: "the resource is a collection"},
		// WebDAV makes no zips.
		{err: vfs.ErrZipTooLarge, status: http.StatusInternalServerError},
		// A lock that went between finding it and removing or
		// refreshing it: the token no longer names a lock of the resource.
		{err: vfs.ErrNoSuchLock, status: http.StatusConflict, os: xwebdav.ErrNoSuchLock, condition: "lock-token-matches-request-uri"},

		// What x/net/webdav itself understands passes through as it is.
		{err: os.ErrNotExist, status: http.StatusNotFound, os: os.ErrNotExist, msg: "not found"},
		{err: os.ErrExist, status: http.StatusMethodNotAllowed, os: os.ErrExist},
		{err: os.ErrPermission, status: http.StatusForbidden, os: os.ErrPermission},

		// The layers below vfs. vfs turns kv's conflicts and closing into
		// ErrBusy (matched above); bare, they mean the same. The rest are
		// the server's own faults.
		{err: kv.ErrConflict, status: http.StatusServiceUnavailable},
		{err: kv.ErrClosed, status: http.StatusServiceUnavailable},
		{err: kv.ErrLeaseLost, status: http.StatusServiceUnavailable},
		{err: kv.ErrNotFound, status: http.StatusInternalServerError},
		{err: kv.ErrTxnTooBig, status: http.StatusInternalServerError},
		{err: kv.ErrReadOnly, status: http.StatusInternalServerError},
		{err: kv.ErrInUse, status: http.StatusInternalServerError},
		{err: kv.ErrNotDurable, status: http.StatusInternalServerError},
		{err: kv.ErrDamaged, status: http.StatusInternalServerError},
		{err: kv.ErrStop, status: http.StatusInternalServerError},
		// A start refuses it (daemon's checkChunkStore); no request meets it.
		{err: vfs.ErrOtherChunkStore, status: http.StatusInternalServerError},
		{err: chunk.ErrNotFound, status: http.StatusInternalServerError},
		{err: chunk.ErrCorrupt, status: http.StatusInternalServerError},
		{err: chunk.ErrInvalidID, status: http.StatusInternalServerError},
		{err: chunk.ErrTooLarge, status: http.StatusInternalServerError},
		// chunk.ErrNoSpace is vfs.ErrNoSpace, matched above.

		// account, as authentication meets it (serve, after
		// authenticate): 401 with a challenge where new credentials can
		// help, 403 where they cannot, so clients stop re-prompting.
		// WebDAV changes no account, so the rest are the server's.
		// An *account.LockedError says until when (describer).
		{err: account.ErrAccountLocked, status: http.StatusForbidden, msg: "Too many failed logins: the account is locked for a while."},
		{err: account.ErrInactive, status: http.StatusForbidden, msg: "The account or its organization is disabled."},
		// Sign-in under attack: a throttled client address (a
		// *account.ThrottledError says until when) and a full
		// password-check queue; finish adds Retry-After.
		{err: account.ErrTooManyAttempts, status: http.StatusTooManyRequests, msg: "Too many failed sign-ins from your network address: try again later."},
		{err: account.ErrBusy, status: http.StatusServiceUnavailable},
		{err: errNoCredentials, status: http.StatusUnauthorized, msg: loginMessage, challenge: true},
		{err: account.ErrInvalidCredentials, status: http.StatusUnauthorized, msg: loginMessage, challenge: true},
		{err: account.ErrInvalidToken, status: http.StatusUnauthorized, msg: loginMessage, challenge: true},
		{err: account.ErrNotFound, status: http.StatusUnauthorized, msg: loginMessage, challenge: true},
		{err: account.ErrExists, status: http.StatusInternalServerError},
		{err: account.ErrInvalid, status: http.StatusInternalServerError},
		{err: account.ErrUserLimitExceeded, status: http.StatusInternalServerError},
		{err: account.ErrOrgLimitExceeded, status: http.StatusInternalServerError},
		{err: account.ErrGroupCycle, status: http.StatusInternalServerError},
		// The policy's locked_extensions: a file that has contents is
		// read-only to persons (not to administrators).
		{err: account.ErrExtensionLocked, status: http.StatusForbidden, os: os.ErrPermission, msg: "files with this extension are read-only under the organization's policy here (locked_extensions)"},
		// New credentials cannot help until the person sets a new
		// password, which WebDAV cannot do: 403, no challenge.
		// Two-step verification: new credentials (a device password)
		// help, so 401 with a challenge, and the text says how to get one.
		{err: account.ErrDevicePasswordRequired, status: http.StatusUnauthorized, msg: devicePasswordMessage, challenge: true},
		{err: account.ErrPasswordExpired, status: http.StatusForbidden, msg: "Your password has expired under your organization's policy: set a new one by signing in to berth (the OAuth password grant with new_password), then use it here."},
		// The directory server that judges an imported person's password
		// did not answer: the password may be right, so no challenge.
		{err: account.ErrDirectory, status: http.StatusServiceUnavailable, msg: "The directory server that checks your password could not be reached; try again later."},
		{err: account.ErrDirectoryDisabled, status: http.StatusInternalServerError},
		// Two-step verification: Basic cannot carry a code (the device
		// helper's passwords answer it); a bearer token of a person who
		// must still enroll is refused until they do.
		{err: account.ErrMissingTOTP, status: http.StatusForbidden, msg: "This account uses two-step verification, which WebDAV cannot ask for: use a device password."},
		{err: account.ErrInvalidTOTP, status: http.StatusForbidden, msg: "This account uses two-step verification, which WebDAV cannot ask for: use a device password."},
		{err: account.ErrTwoStepRequired, status: http.StatusForbidden, msg: "Your organization requires two-step verification: enroll in the berth app first."},
		{err: account.ErrCodeNotSent, status: http.StatusServiceUnavailable},
		// WebDAV enrolls nobody: a server fault if it ever came here.
		{err: account.ErrCodeSentRecently, status: http.StatusInternalServerError},

		// The request itself.
		{err: errPathTooDeep, status: http.StatusRequestURITooLong, msg: "%v"},
		{err: errBadPath, status: http.StatusBadRequest},
		{err: errDisabled, status: http.StatusForbidden, msg: "%v"},
		{err: errStalled, status: http.StatusRequestTimeout, msg: "%v"},
		{err: errXMLTooLarge, status: http.StatusRequestEntityTooLarge, msg: "%v"},
		{err: errTooManyXMLBodies, status: http.StatusServiceUnavailable, msg: "%v"},
		{err: errBadXML, status: http.StatusBadRequest, msg: "%v"},
		{err: errBadBody, status: http.StatusBadRequest, msg: "%v"},
		{err: errBadIf, status: http.StatusBadRequest, msg: "%v"},
		{err: errIfFailed, status: http.StatusPreconditionFailed, msg: "%v"},
		{err: errPrecondition, status: http.StatusPreconditionFailed, msg: "%v"},
		{err: errBadCondition, status: http.StatusBadRequest, msg: "%v"},
		{err: errBadDepth, status: http.StatusBadRequest, msg: "%v"},
		{err: errFiniteDepth, status: http.StatusForbidden, condition: "propfind-finite-depth"},
		{err: errBadDestination, status: http.StatusBadRequest, msg: "%v"},
		{err: errOtherServer, status: http.StatusBadGateway},
		{err: errBadOverwrite, status: http.StatusBadRequest, msg: "%v"},
		{err: errNoOverwrite, status: http.StatusPreconditionFailed, msg: "%v"},
		{err: errSameResource, status: http.StatusForbidden, msg: "%v"},
		{err: errInsideItself, status: http.StatusForbidden, msg: "%v"},
		{err: errRootsNotCreated, status: http.StatusForbidden, msg: "%v"},
		{err: errShareReadOnly, status: http.StatusForbidden, msg: "%v"},
		{err: errRootsList, status: http.StatusForbidden, msg: "%v"},
		{err: errParentMissing, status: http.StatusConflict, msg: "%v"},
		{err: errFileAsCollection, status: http.StatusConflict, msg: "%v"},
		{err: errPartialPut, status: http.StatusBadRequest, msg: "%v"},
		{err: errCollectionTarget, status: http.StatusMethodNotAllowed, msg: "%v"},
		{err: errMkcolBody, status: http.StatusUnsupportedMediaType, msg: "%v"},
		{err: errNotWriteLock, status: http.StatusUnprocessableEntity, msg: "%v"},
		{err: errLockingDisabled, status: http.StatusForbidden, msg: "%v"},
		{err: errNoLockToken, status: http.StatusBadRequest, msg: "%v"},
		{err: errForeignLock, status: http.StatusForbidden, msg: "%v"},
		{err: errLockTokenMismatch, status: http.StatusConflict, condition: "lock-token-matches-request-uri"},
	}
}

// loginMessage is the body of a 401: what to log in with.
const loginMessage = "Log in with your berth username (or e-mail address) and password."

// devicePasswordMessage is the body of the 401 that refuses the main
// password of an account with two-step verification.
const devicePasswordMessage = "This account uses two-step verification, so its password is not accepted over WebDAV, which cannot ask for a code. Create a device password for this device (berth admin person device-password NAME, or POST /api/2/person/<your id>/device_passwords/create signed in with your password and code) and log in here with your username and that device password."

// unknownError is the answer to an error no row matches.
var unknownError = errorMapping{status: http.StatusInternalServerError}

// classify finds err's row; an error no row matches is unknownError.
func classify(err error) errorMapping {
	for _, m := range errorTable() {
		if errors.Is(err, m.err) {
			return m
		}
	}
	return unknownError
}

// describedErr is an error class (a value of errorTable) with the message
// the client sees; its text is that message.
type describedErr struct {
	err error
	msg string
}

// Error is the client's message: what finish sends when the row asks for
// the error's text.
func (e *describedErr) Error() string { return e.msg }

// Unwrap is the error class, which alone picks the row.
func (e *describedErr) Unwrap() error { return e.err }

// describe wraps err, an error of the table, with a message for the
// client, e.g. describe(errBadDepth, "invalid Depth for %s", r.Method).
// Only err decides the status; the arguments are text, never wrapped.
func describe(err error, format string, args ...any) error {
	return &describedErr{err: err, msg: fmt.Sprintf(format, args...)}
}

// describer is a domain error that carries its own message for the
// client, built from its fields (account.LockedError: until when the lock
// lasts). message consults it after describe's text and before the row's:
// the row keeps the status, the error says the specifics.
type describer interface {
	Description() string
}

// message is the text/plain body of m's answer to err.
func (m errorMapping) message(err error) string {
	if d := (*describedErr)(nil); errors.As(err, &d) {
		return d.msg
	}
	if d := describer(nil); errors.As(err, &d) {
		return sentence(d.Description())
	}
	switch {
	case m.msg == "":
		return http.StatusText(m.status)
	case strings.Contains(m.msg, "%v"):
		return fmt.Sprintf(m.msg, err)
	}
	return m.msg
}

// sentence writes a description as this package's messages read: a
// capital first letter and a full stop.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// finish answers err (nil: the handler answered itself) through
// errorTable and logs what is not the client's doing. A client that went
// away gets nothing: nobody reads a body.
func (h *Handler) finish(w http.ResponseWriter, r *http.Request, err error) {
	if err == nil {
		return
	}
	m := classify(err)
	if r.Context().Err() != nil && m.status != http.StatusRequestTimeout {
		// A stalled body cancels the context too, but that client is
		// still there.
		return
	}
	if d, ok := account.RetryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10))
	}
	switch {
	case m.condition != "":
		w.Header().Set("Content-Type", "application/xml; charset=utf-8")
		w.WriteHeader(m.status)
		w.Write([]byte(xml.Header + `<D:error xmlns:D="DAV:"><D:` + m.condition + `/></D:error>`))
	case m.status >= 500 && m.status != http.StatusInsufficientStorage:
		h.log.Error("webdav request failed", "method", r.Method, "path", r.URL.Path, "status", m.status, "error", err)
		plain(w, m.status, http.StatusText(m.status))
	default:
		if m.challenge {
			w.Header().Set("WWW-Authenticate", `Basic realm="berth", charset="UTF-8"`)
		}
		plain(w, m.status, m.message(err))
	}
}

// plain writes a short text/plain answer.
func plain(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

// osErr converts an error for x/net/webdav, which compares with
// os.IsNotExist and == and sees through no wrapping: the row's os value,
// bare for the lock errors compared with ==, else in an *fs.PathError.
// An error that already is the os value passes as it is.
func osErr(op, name string, err error) error {
	if err == nil {
		return nil
	}
	m := classify(err)
	switch {
	case m.os == nil:
		return &fs.PathError{Op: op, Path: name, Err: err}
	case errors.Is(err, m.os):
		return err
	case m.os == xwebdav.ErrLocked || m.os == xwebdav.ErrNoSuchLock:
		return m.os // compared with ==: never wrapped
	}
	return &fs.PathError{Op: op, Path: name, Err: m.os}
}

// goneWriter keeps x/net/webdav's error answers (404, 405, 412, ...) from
// a client that went away, as finish does for berth's own.
type goneWriter struct {
	http.ResponseWriter
	r       *http.Request
	dropped bool
}

// WriteHeader drops an error status once the client's request is done.
func (g *goneWriter) WriteHeader(code int) {
	if code >= 400 && g.r.Context().Err() != nil {
		g.dropped = true
		return
	}
	g.ResponseWriter.WriteHeader(code)
}

// Write drops the body of a dropped error answer.
func (g *goneWriter) Write(b []byte) (int, error) {
	if g.dropped {
		return len(b), nil
	}
	return g.ResponseWriter.Write(b)
}

// Unwrap gives http.ResponseController the underlying writer.
func (g *goneWriter) Unwrap() http.ResponseWriter { return g.ResponseWriter }
