package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"

	"berth/account"
	"berth/agentlink"
	"berth/kv"
	"berth/share"
	"berth/vfs"
	"berth/vfs/chunk"
)

// Errors of the request itself, found by rest before any domain is called.
// Domain errors are declared in their own packages and only mapped here.
var (
	// ErrInvalidRequest is a missing or invalid parameter (400 invalid_request).
	ErrInvalidRequest = errors.New("invalid request")
	// ErrInsecureTransport is a request over plain HTTP (400 insecure_transport).
	ErrInsecureTransport = errors.New("insecure transport")
	// ErrInvalidDateFormat is a date not written YYYY-MM-DD (400 invalid_date_format).
	ErrInvalidDateFormat = errors.New("invalid date format")
	// ErrInvalidDatetimeFormat is a date-time not written YYYY-MM-DDTHH:MM:SS
	// (400 invalid_datetime_format).
	ErrInvalidDatetimeFormat = errors.New("invalid datetime format")
	// ErrNoFileReceived is an upload without its `file` field (400 no_file_received).
	ErrNoFileReceived = errors.New("no file received")
	// ErrAccessDenied is a request without valid credentials (401 access_denied).
	ErrAccessDenied = errors.New("access denied")
	// ErrForbidden is a request the caller may not make (403 forbidden).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound is a path no route serves (404 not_found).
	ErrNotFound = errors.New("not found")
	// ErrMethodNotAllowed is a method no route serves on a path some route
	// serves with others (405 invalid_request; the spec has no code for it).
	ErrMethodNotAllowed = errors.New("method not allowed")
	// ErrUnavailable is a temporary inability to serve, such as during
	// shutdown (503 temporarily_unavailable).
	ErrUnavailable = errors.New("temporarily unavailable")
	// ErrTooManyRequests is a request past what its caller may make in a
	// while, such as activity notes (429 too_many_requests; the spec has
	// no code for it).
	ErrTooManyRequests = errors.New("too many requests")
)

// errorMapping maps one error value to its status and spec code (section
// 7). description is the default error_description; an error wrapped by
// Describe carries its own, and so does a domain error that is a describer.
type errorMapping struct {
	err         error
	status      int
	code        string
	description string
}

// errorTable is the one table from error values to responses; no handler
// writes an error body by hand. It is ordered: the first entry whose err
// matches (errors.Is) wins, so put specific errors before general ones.
// Add a domain error with one line, e.g.
//
//	{vfs.ErrNameConflict, http.StatusConflict, "name_conflict", ""},
//
// Every exported error of vfs, vfs/chunk, kv, account and share has a row
// (errortable_test.go checks). One that is the server's own fault gets an
// explicit 500 "unknown" row: it is answered and logged as an unmatched
// error is, but the choice is written down.
//
// It is a function so the table cannot be changed at run time.
func errorTable() []errorMapping {
	return []errorMapping{
		// Request-level errors (spec 7.1, 7.3).
		{ErrInvalidRequest, http.StatusBadRequest, "invalid_request", ""},
		{ErrInsecureTransport, http.StatusBadRequest, "insecure_transport", "requests must use HTTPS"},
		{ErrInvalidDateFormat, http.StatusBadRequest, "invalid_date_format", "dates must be formatted YYYY-MM-DD"},
		{ErrInvalidDatetimeFormat, http.StatusBadRequest, "invalid_datetime_format", "date-times must be formatted YYYY-MM-DDTHH:MM:SS"},
		{ErrNoFileReceived, http.StatusBadRequest, "no_file_received", "the file `file` is missing"},
		{ErrAccessDenied, http.StatusUnauthorized, "access_denied", ""},
		{ErrForbidden, http.StatusForbidden, "forbidden", ""},
		{ErrNotFound, http.StatusNotFound, "not_found", ""},
		{ErrMethodNotAllowed, http.StatusMethodNotAllowed, "invalid_request", "the method is not allowed on this path"},
		{ErrUnavailable, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable"},
		{ErrTooManyRequests, http.StatusTooManyRequests, "too_many_requests", "too many requests of this kind; try again later"},
		// A machine's agent offline or silent: the request cannot be
		// served now, and may be later (docs/agent.md).
		{agentlink.ErrOffline, http.StatusServiceUnavailable, "temporarily_unavailable", "the machine is offline: its agent is not connected"},
		{agentlink.ErrTimeout, http.StatusServiceUnavailable, "temporarily_unavailable", "the machine's agent did not answer in time"},
		{agentlink.ErrBadAnswer, http.StatusServiceUnavailable, "temporarily_unavailable", "the machine's agent answered in a form the command does not take"},
		// OAuth2 token and revoke endpoints (RFC 6749 5.2).
		{ErrUnsupportedGrantType, http.StatusBadRequest, "unsupported_grant_type", ""},
		{ErrInvalidClient, http.StatusUnauthorized, "invalid_client", ""},
		{ErrInvalidGrant, http.StatusBadRequest, "invalid_grant", ""},
		// A body larger than http.MaxBytesReader allows is the client's fault.
		{errTooLarge, http.StatusBadRequest, "invalid_request", "request body too large"},
		// A request body that stopped arriving (the read deadline
		// http.body_idle_timeout sets): RFC 9110's 408, with the spec's
		// generic code, which has none for it.
		{os.ErrDeadlineExceeded, http.StatusRequestTimeout, "invalid_request", "the request body stopped arriving; nothing was stored"},
		// The client went away (its request's context is done) before
		// the answer: nobody reads it, but a 500 counted it as the
		// server's fault in the logs and metrics. As WebDAV answers it.
		{context.Canceled, http.StatusBadRequest, "invalid_request", "the request was cancelled before its answer; nothing more was done"},
		{errRangeNotSatisfiable, http.StatusRequestedRangeNotSatisfiable, "invalid_request", "the requested range is not satisfiable"},
		{errPreconditionFailed, http.StatusPreconditionFailed, "invalid_request", "the file does not match If-Match or If-Unmodified-Since"},
		{errUploadExcluded, http.StatusConflict, "policy_error", "the organization's policy does not allow uploads of files with this extension (excluded_extensions)"},

		// vfs (spec 7.2, 7.3).
		{vfs.ErrNotExist, http.StatusNotFound, "not_found", "no such file or folder"},
		{vfs.ErrNotDir, http.StatusNotFound, "not_found", "no such folder"},
		{vfs.ErrIsDir, http.StatusNotFound, "not_found", "no such file"},
		{vfs.ErrNameConflict, http.StatusConflict, "name_conflict", ""},
		// An agent delta against a revision no longer current (agentupload.go): the agent sends the whole file.
		{errBaseRevision, http.StatusConflict, "name_conflict", "the base revision is not the file's current revision: send the whole file"},
		{vfs.ErrLocked, http.StatusConflict, "resource_locked", "the item or a folder above it is locked"},
		{vfs.ErrNoSuchLock, http.StatusConflict, "resource_locked", "the item does not hold that lock"},
		{vfs.ErrRootDeleted, http.StatusGone, "root_deleted", "the root was deleted earlier"},
		{vfs.ErrInvalidName, http.StatusBadRequest, "invalid_name", `a name may not be empty, "." or "..", nor hold "/", "\", control characters or invalid UTF-8`},
		{vfs.ErrNameTooLong, http.StatusBadRequest, "name_too_long", "a name may be at most 255 bytes of UTF-8"},
		{vfs.ErrExtensionExcluded, http.StatusBadRequest, "invalid_extension", "the organization's policy does not allow files with this extension"},
		{vfs.ErrFileTooLarge, http.StatusConflict, "policy_error", "the file is larger than the organization's policy allows (max_file_size)"},
		{vfs.ErrQuotaExceeded, http.StatusConflict, "policy_error", "storing the file would exceed the space quota"},
		// tus (tus.go): 409 for a wrong offset and 460 for a checksum
		// mismatch are the tus protocol's statuses.
		{vfs.ErrUploadOffset, http.StatusConflict, "offset_mismatch", "the offset is not the upload's: ask with HEAD and go on from there"},
		{vfs.ErrChecksumMismatch, 460, "checksum_mismatch", "the bytes sent do not match Upload-Checksum; nothing of them was stored"},
		{errTusVersion, http.StatusPreconditionFailed, "invalid_request", "send Tus-Resumable: 1.0.0"},
		{errTusTooLarge, http.StatusRequestEntityTooLarge, "invalid_request", "the piece runs past the upload's Upload-Length; nothing of it was stored"},
		{vfs.ErrTooDeep, http.StatusBadRequest, "invalid_request", fmt.Sprintf("folders may nest at most %d levels below the root", vfs.MaxDepth)},
		{vfs.ErrRootItem, http.StatusForbidden, "forbidden", "not allowed on a root's top folder"},
		{vfs.ErrBusy, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable; try again"},
		{vfs.ErrNoSpace, http.StatusServiceUnavailable, "temporarily_unavailable", "the server's storage is full; nothing was stored"},
		// A condition on the file (If-Match) held when checked but not
		// when the write came to commit: the same answer as one that
		// failed at once.
		{vfs.ErrChanged, http.StatusPreconditionFailed, "invalid_request", "the file changed while the request was sent; nothing was stored"},
		// Over REST only a lock meets a metadata bound (vfs.MaxLocks,
		// vfs.MaxLockOwnerBytes): the item cannot take another lock.
		{vfs.ErrMetadataLimit, http.StatusConflict, "resource_locked", "the item holds as many locks or properties as it may; nothing was stored"},
		{vfs.ErrTooManyStaged, http.StatusBadRequest, "invalid_request", "you have as many resumable uploads in progress as berth keeps: finish or end one (tus DELETE) first"},
		{vfs.ErrZipTooLarge, http.StatusBadRequest, "invalid_request", fmt.Sprintf("the folder holds more than one zip may (%d items, paths of 65,535 bytes); download its folders one by one", vfs.ZipMaxEntries)},

		// The layers below vfs. vfs turns kv's conflicts and closing into
		// vfs.ErrBusy (matched above); bare, they mean the same. The rest
		// are the server's own faults.
		{kv.ErrConflict, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable; try again"},
		{kv.ErrClosed, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable; try again"},
		// Background jobs only; a request never holds a lease.
		{kv.ErrLeaseLost, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable; try again"},
		{kv.ErrNotFound, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrTxnTooBig, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrReadOnly, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrInUse, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrNotDurable, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrDamaged, http.StatusInternalServerError, "unknown", ""},
		{kv.ErrStop, http.StatusInternalServerError, "unknown", ""},
		// A start refuses it (daemon's checkChunkStore); no request meets it.
		{vfs.ErrOtherChunkStore, http.StatusInternalServerError, "unknown", ""},
		{chunk.ErrNotFound, http.StatusInternalServerError, "unknown", ""},
		{chunk.ErrCorrupt, http.StatusInternalServerError, "unknown", ""},
		{chunk.ErrInvalidID, http.StatusInternalServerError, "unknown", ""},
		{chunk.ErrTooLarge, http.StatusInternalServerError, "unknown", ""},

		// account (spec 7.1, 7.4).
		{account.ErrNotFound, http.StatusNotFound, "not_found", ""},
		{account.ErrInvalid, http.StatusBadRequest, "invalid_request", ""},
		// An *account.LockedError says until when (describer).
		{account.ErrAccountLocked, http.StatusForbidden, "account_locked", "too many failed logins; the account is locked for a while"},
		{account.ErrInvalidCredentials, http.StatusBadRequest, "invalid_grant", "the username or password is wrong"},
		{account.ErrInvalidToken, http.StatusUnauthorized, "access_denied", ""},
		{account.ErrInactive, http.StatusForbidden, "forbidden", "the account or its organization is disabled"},
		{account.ErrExists, http.StatusConflict, "name_conflict", "that username or e-mail address is taken"},
		{account.ErrUserLimitExceeded, http.StatusConflict, "user_limit_exceeded", "the organization has reached its account limit"},
		{account.ErrOrgLimitExceeded, http.StatusConflict, "policy_error", "the organization holds as many child organizations as its policy allows (num_orgs_maximum)"},
		// An *account.GroupCycleError names the cycle (describer).
		{account.ErrGroupCycle, http.StatusBadRequest, "invalid_request", "a group cannot contain itself, directly or through other groups"},
		{account.ErrExtensionLocked, http.StatusForbidden, "forbidden", "files with this extension are read-only under the organization's policy (locked_extensions)"},
		{account.ErrDevicePasswordRequired, http.StatusUnauthorized, "access_denied", "this account uses two-step verification: its password alone is refused where no code can follow it; use a device password"},
		{account.ErrPasswordExpired, http.StatusForbidden, "password_expired", "the password is older than the organization's policy allows (change_password_frequency); sign in again with the form field new_password beside password to set a new one"},
		// Directory servers (auth sources): a policy switch refuses as
		// user_lock_files does; a server that fails is a gateway's fault.
		{account.ErrDirectoryDisabled, http.StatusForbidden, "forbidden", "the organization's policy does not enable directory servers (ad_enabled), here or above"},
		// A *account.DirectoryError says which server and what failed (describer).
		{account.ErrDirectory, http.StatusBadGateway, "directory_error", "the directory server failed"},
		// Two-step verification (spec 5.4, 7.4): a *account.TwoStepError
		// is a describer and names the mode (two_step_mode, see classify).
		{account.ErrMissingTOTP, http.StatusUnauthorized, "missing_totp", ""},
		{account.ErrInvalidTOTP, http.StatusUnauthorized, "invalid_totp", ""},
		{account.ErrTwoStepRequired, http.StatusForbidden, "forbidden", "the organization's policy requires two-step verification: enroll first (POST /api/2/person/<id>/two_step/enroll, then .../two_step/confirm)"},
		{account.ErrCodeNotSent, http.StatusServiceUnavailable, "temporarily_unavailable", "the verification code could not be sent; try again later"},
		// An enrollment's code asked for too soon after the last: a
		// *account.ResendError says how long (describer, Retry-After).
		{account.ErrCodeSentRecently, http.StatusTooManyRequests, "too_many_attempts", "a verification code was sent a moment ago; wait before asking for another"},
		// Sign-in under attack (docs/api.md): a throttled client address
		// (a *account.ThrottledError says until when), and a full
		// password-check queue. Both carry Retry-After (writeError).
		{account.ErrTooManyAttempts, http.StatusTooManyRequests, "too_many_attempts", "too many failed sign-ins from your network address; try again later"},
		{account.ErrBusy, http.StatusServiceUnavailable, "temporarily_unavailable", "the service is temporarily unavailable: too many sign-ins are being checked; try again shortly"},

		{share.ErrNoRoot, http.StatusNotFound, "not_found", "no such root"},
		// A *share.Refusal says why (describer).
		{share.ErrForbidden, http.StatusForbidden, "forbidden", ""},
		{share.ErrNotFound, http.StatusNotFound, "not_found", ""},
		// An expired invitation is as good as none (the spec's codes
		// have no other), but the description tells its holder why.
		{share.ErrInvitationExpired, http.StatusNotFound, "not_found", "the invitation has expired; ask the share's administrator to invite you again"},
		{share.ErrLinkExpired, http.StatusGone, "link_expired", "the share link has expired"},
		{share.ErrDownloadLimit, http.StatusForbidden, "forbidden", "download limit reached: the share link's download_limit has been used up"},
		{share.ErrLoginRequired, http.StatusUnauthorized, "access_denied", "this share link requires signing in (Authorization: Bearer <token>) as its creator or a subscriber"},
		{share.ErrInvalidDate, http.StatusBadRequest, "invalid_date_format", "dates must be formatted YYYY-MM-DD"},
		{share.ErrNoLinks, http.StatusInternalServerError, "unknown", ""},

		// Further domain errors go here, one line each.
	}
}

// errTooLarge stands for *http.MaxBytesError, which has no sentinel value.
var errTooLarge = errors.New("request body too large")

// errRangeNotSatisfiable is a Range no byte of the file satisfies, which
// http.ServeContent finds (see jsonStatusError).
var errRangeNotSatisfiable = errors.New("range not satisfiable")

// errPreconditionFailed is an If-Match or If-Unmodified-Since that the
// file fails, which http.ServeContent finds (see jsonStatusError).
var errPreconditionFailed = errors.New("precondition failed")

// errUploadExcluded is an upload of a file whose extension the policy's
// excluded_extensions refuses: 409 policy_error, where a rename or move
// to such a name is vfs.ErrExtensionExcluded's 400 invalid_extension.
var errUploadExcluded = errors.New("upload of an excluded extension")

// errServeContent is any other error answer of http.ServeContent (a file
// that cannot seek); it matches no table entry, so it is 500 unknown.
var errServeContent = errors.New("serving the file failed")

// errPanicked is a handler's panic, recovered (see panicked); like
// errServeContent it matches no table entry, so it is 500 unknown.
var errPanicked = errors.New("handler panicked")

// describedError carries an error_description for the client next to the
// error it wraps.
type describedError struct {
	err         error
	description string
}

func (e *describedError) Error() string { return e.err.Error() + ": " + e.description }
func (e *describedError) Unwrap() error { return e.err }

// Describe wraps err with a client-facing error_description, e.g.
// Describe(ErrInvalidRequest, "missing parameter %q", "name"). The text is
// sent to the client, so it must not hold internal detail.
func Describe(err error, format string, args ...any) error {
	return &describedError{err: err, description: fmt.Sprintf(format, args...)}
}

// describer is a domain error that carries its own error_description,
// built from its fields (account.LockedError: until when the lock lasts).
// classify consults it after Describe's text and before the row's: the
// row keeps the status and code, the error says the specifics.
type describer interface {
	Description() string
}

// errorBody is the JSON of every error response (spec 7).
type errorBody struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
	// TwoStepMode is the two_step_mode of missing_totp and invalid_totp
	// (spec 7.4), from an *account.TwoStepError.
	TwoStepMode string `json:"two_step_mode,omitempty"`
}

// classify finds the response for err. known is false for an error no
// table entry matches, or one whose row is 500: 500 unknown, whose detail
// belongs in the log only.
func classify(err error) (status int, body errorBody, known bool) {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		err = errTooLarge
	}
	for _, m := range errorTable() {
		if !errors.Is(err, m.err) {
			continue
		}
		if m.status == http.StatusInternalServerError {
			break
		}
		body = errorBody{Error: m.code, Description: m.description}
		var de *describedError
		var fe *account.FieldError
		var d describer
		switch {
		case errors.As(err, &de) && de.description != "":
			body.Description = de.description
		case errors.As(err, &fe):
			// The field name and reason are written for the client.
			body.Description = fe.Field + ": " + fe.Reason
		case errors.As(err, &d):
			body.Description = d.Description()
		}
		if te := (*account.TwoStepError)(nil); errors.As(err, &te) {
			body.TwoStepMode = te.Mode
		}
		return m.status, body, true
	}
	return http.StatusInternalServerError, errorBody{Error: "unknown"}, false
}
