package account

import (
	"errors"
	"fmt"
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
	// password is checked until the lock expires.
	ErrAccountLocked = errors.New("account: account locked")
	// ErrInvalidToken: the access or refresh token is unknown, expired or revoked.
	ErrInvalidToken = errors.New("account: invalid token")
	// ErrInactive: the person, or the organization they belong to, is disabled.
	ErrInactive = errors.New("account: inactive")
	// ErrUserLimitExceeded: creating the person would pass the organization
	// policy's NumUsersMaximum (spec 7.3 user_limit_exceeded).
	ErrUserLimitExceeded = errors.New("account: user limit exceeded")
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
