package account

import (
	"errors"
	"fmt"
	"time"
)

// Errors returned by the Service. They are declared once here and compared
// with errors.Is; rest maps each of them to one status and error code.
var (
	// ErrNotFound: no organization, person or machine has that id, login or GUID.
	ErrNotFound = errors.New("account: not found")
	// ErrExists: the username or e-mail address is already taken (by any
	// person, as either a username or an e-mail address: both share one
	// case-insensitive namespace so a login is never ambiguous).
	ErrExists = errors.New("account: already exists")
	// ErrInvalid: an input field has an invalid value. It is always wrapped in
	// a *FieldError that names the field.
	ErrInvalid = errors.New("account: invalid value")
	// ErrInvalidCredentials: unknown login or wrong password. The two cases
	// are deliberately indistinguishable, in the error and in time spent.
	ErrInvalidCredentials = errors.New("account: invalid credentials")
	// ErrAccountLocked: too many failed logins in the lockout window; no
	// password is checked until the lock expires. The Service returns it
	// inside a *LockedError, which says until when.
	ErrAccountLocked = errors.New("account: account locked")
	// ErrInvalidToken: the access or refresh token is unknown, expired or revoked.
	ErrInvalidToken = errors.New("account: invalid token")
	// ErrInactive: the person, or the organization they belong to, is disabled.
	ErrInactive = errors.New("account: inactive")
	// ErrUserLimitExceeded: creating the person would pass the organization
	// policy's NumUsersMaximum (spec 7.3 user_limit_exceeded).
	ErrUserLimitExceeded = errors.New("account: user limit exceeded")
	// ErrOrgLimitExceeded: creating the organization would pass its
	// parent policy's NumOrgsMaximum.
	ErrOrgLimitExceeded = errors.New("account: organization limit exceeded")
	// ErrGroupCycle: the membership change would make a group contain
	// itself, directly or through other groups. The Service returns it
	// inside a *GroupCycleError, which names the cycle.
	ErrGroupCycle = errors.New("account: group membership cycle")
	// ErrExtensionLocked: the file's extension is in the organization
	// policy's locked_extensions, which makes such a file read-only once
	// it has contents: no overwrite, rename, move or delete by anyone the
	// policy binds (Policy.Binds).
	ErrExtensionLocked = errors.New("account: the file's extension is locked by the organization's policy")
	// ErrPasswordExpired: the password is right but older than the
	// organization policy's change_password_frequency allows; the
	// person signs in with a new one (the password grant's new_password).
	ErrPasswordExpired = errors.New("account: password expired")
	// ErrDevicePasswordRequired: the person's main password was offered
	// where no two-step code can follow it (WebDAV Basic), and the person
	// uses two-step verification: only a device password is accepted
	// there (devicepw.go).
	ErrDevicePasswordRequired = errors.New("account: a device password is required")
	// ErrDirectoryDisabled: the organization's policy, or one above it,
	// leaves ad_enabled off, so it cannot add, change or import from
	// directory servers (auth sources).
	ErrDirectoryDisabled = errors.New("account: directory servers are not enabled by the organization's policy (ad_enabled)")
	// ErrDirectory: a directory server could not be reached, refused
	// berth's bind or its search. The Service returns it inside a
	// *DirectoryError, which says which server and what failed.
	ErrDirectory = errors.New("account: directory server failed")
	// ErrMissingTOTP: the password is right, the person has two-step
	// verification and no code came with it (spec 5.4 missing_totp). The
	// Service returns it inside a *TwoStepError, which names the mode;
	// for e-mail and SMS the code has been sent.
	ErrMissingTOTP = errors.New("account: two-step verification code required")
	// ErrInvalidTOTP: the two-step code is wrong, expired or already used
	// (spec 5.4 invalid_totp), inside a *TwoStepError naming the mode.
	ErrInvalidTOTP = errors.New("account: wrong two-step verification code")
	// ErrTwoStepRequired: the organization's policy has
	// require_two_step_auth and the person has not enrolled yet: only
	// enrollment is open to them (or, for DisableTwoStep, the person may
	// not turn it off).
	ErrTwoStepRequired = errors.New("account: the organization's policy requires two-step verification")
	// ErrCodeNotSent: an e-mail or SMS code could not be handed to the
	// configured sender; nothing was changed, and asking again may work.
	ErrCodeNotSent = errors.New("account: the two-step code could not be sent")
	// ErrCodeSentRecently: an enrollment asked for an e-mail or SMS code
	// too soon after the last one (TwoStepOptions.ResendAfter) or after
	// too many within the hour; none was sent. The Service returns it
	// inside a *ResendError, which says how long to wait.
	ErrCodeSentRecently = errors.New("account: a two-step code was sent too recently")
	// ErrTooManyAttempts: too many failed sign-ins from the client's
	// network address; its attempts are refused unchecked for a while,
	// whichever account they name (a known address of the account's
	// person excepted). The Service returns it inside a *ThrottledError,
	// which says until when.
	ErrTooManyAttempts = errors.New("account: too many failed sign-ins from this address")
	// ErrBusy: as many sign-ins wait for a password check as the
	// Service queues (Options.MaxHashQueue); this one was refused
	// without one, and the same request can succeed shortly (RetryAfter).
	ErrBusy = errors.New("account: too many sign-ins are being checked")
)

// FieldError says which input field is invalid and why. It unwraps to
// ErrInvalid. Field uses the spec's snake_case field names.
type FieldError struct {
	Field  string
	Reason string
}

// Error names the field and the reason, for logs; the rest package sends
// Field and Reason to the client.
func (e *FieldError) Error() string {
	return fmt.Sprintf("account: invalid %s: %s", e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func invalid(field, reason string) error { return &FieldError{Field: field, Reason: reason} }

// LockedError is a refused login's lock: it says how long the lock lasts,
// for the front ends to tell the person (error_description). It unwraps
// to ErrAccountLocked, so errors.Is(err, ErrAccountLocked) holds.
type LockedError struct {
	// Until is when the lock ends (UTC).
	Until time.Time
	// Left is how much of the lock remained when the login was refused,
	// by the Service's clock: the figure to show, fixed at the refusal.
	Left time.Duration
}

// Error says until when, for logs.
func (e *LockedError) Error() string {
	return "account: account locked until " + e.Until.UTC().Format(time.RFC3339)
}

// Unwrap makes errors.Is(err, ErrAccountLocked) true.
func (e *LockedError) Unwrap() error { return ErrAccountLocked }

// Description is the lock told to the person who was refused, the same
// over every front end: until when (UTC) and about how long that is.
func (e *LockedError) Description() string {
	until := e.Until.UTC().Format("15:04:05 UTC")
	if e.Left >= 20*time.Hour {
		until = e.Until.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	return "too many failed logins; the account is locked until " + until + " (" + about(e.Left) + ")"
}

// about rounds d for a person to read.
func about(d time.Duration) string {
	switch m := int((d + 30*time.Second) / time.Minute); {
	case d < time.Minute:
		return "less than a minute"
	case m == 1:
		return "about 1 minute"
	case m < 120:
		return fmt.Sprintf("about %d minutes", m)
	default:
		return fmt.Sprintf("about %d hours", (m+30)/60)
	}
}

// lockedError is the error of a lock that ends at until, refused at now.
func lockedError(until, now time.Time) error {
	return &LockedError{Until: until.UTC(), Left: until.Sub(now)}
}

// TwoStepError is a refused two-step sign-in: ErrMissingTOTP or
// ErrInvalidTOTP, with the person's mode, which the front ends tell the
// client (spec 5.4 two_step_mode).
type TwoStepError struct {
	// Mode is TwoStepAuthenticator, TwoStepEmail or TwoStepSMS.
	Mode string
	// Err is ErrMissingTOTP or ErrInvalidTOTP.
	Err error
}

// Error names the refusal and the mode, for logs.
func (e *TwoStepError) Error() string { return e.Err.Error() + " (" + e.Mode + ")" }

// Unwrap makes errors.Is(err, ErrMissingTOTP) (or ErrInvalidTOTP) true.
func (e *TwoStepError) Unwrap() error { return e.Err }

// Description tells the person what to do, the same over every front end.
func (e *TwoStepError) Description() string {
	where := "from the authenticator app"
	switch e.Mode {
	case TwoStepEmail:
		where = "sent by e-mail"
	case TwoStepSMS:
		where = "sent by text message"
	}
	if errors.Is(e.Err, ErrMissingTOTP) {
		return "two-step verification: send the code " + where + " (or a recovery code) as auth_code"
	}
	return "the two-step code is wrong, expired or already used; send the current code " + where + " as auth_code"
}

// ThrottledError is a sign-in refused because its client address is
// throttled: until when, like LockedError. It unwraps to
// ErrTooManyAttempts.
type ThrottledError struct {
	// Until is when the throttle ends (UTC).
	Until time.Time
	// Left is how much of it remained at the refusal.
	Left time.Duration
}

// Error says until when, for logs.
func (e *ThrottledError) Error() string {
	return "account: too many failed sign-ins from this address; refused until " + e.Until.UTC().Format(time.RFC3339)
}

// Unwrap makes errors.Is(err, ErrTooManyAttempts) true.
func (e *ThrottledError) Unwrap() error { return ErrTooManyAttempts }

// Description is the throttle told to the client, the same over every
// front end.
func (e *ThrottledError) Description() string {
	return "too many failed sign-ins from your network address; try again after " +
		e.Until.UTC().Format("15:04:05 UTC") + " (" + about(e.Left) + ")"
}

// throttledError is the error of a throttle that ends at until, refused at now.
func throttledError(until, now time.Time) error {
	return &ThrottledError{Until: until.UTC(), Left: until.Sub(now)}
}

// ResendError is an enrollment refused a new e-mail or SMS code: how
// long until one may be sent. It unwraps to ErrCodeSentRecently.
type ResendError struct {
	// Left is the wait, by the Service's clock at the refusal.
	Left time.Duration
}

// Error says how long, for logs.
func (e *ResendError) Error() string {
	return "account: a two-step code was sent too recently; the next in " + e.Left.Round(time.Second).String()
}

// Unwrap makes errors.Is(err, ErrCodeSentRecently) true.
func (e *ResendError) Unwrap() error { return ErrCodeSentRecently }

// Description is the wait told to the person, the same over every
// front end.
func (e *ResendError) Description() string {
	return "a verification code was sent a moment ago; wait " + about(e.Left) +
		" before asking for another (a code already sent stays good for its time)"
}

// busyRetry is the Retry-After of ErrBusy: a few hashes' time.
const busyRetry = time.Second

// RetryAfter says how long a client refused with err should wait before
// trying again, for the front ends' Retry-After header (RFC 9110 10.2.3):
// the time left of a lock (*LockedError), throttle (*ThrottledError) or
// wait for a new code (*ResendError), about a second for ErrBusy. ok is
// false for any other error.
func RetryAfter(err error) (d time.Duration, ok bool) {
	var le *LockedError
	var te *ThrottledError
	var re *ResendError
	switch {
	case errors.As(err, &le):
		return max(le.Left, time.Second), true
	case errors.As(err, &te):
		return max(te.Left, time.Second), true
	case errors.As(err, &re):
		return max(re.Left, time.Second), true
	case errors.Is(err, ErrBusy):
		return busyRetry, true
	}
	return 0, false
}
