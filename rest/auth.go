package rest

import (
	"errors"
	"net/http"
	"strings"

	"berth/account"
)

// caller is the authenticated person of a request, their organization's
// chain, and the machine their token was issued to: account's Caller,
// which share's access checks take as it is.
type caller = account.Caller

// callerOf returns the caller that authed put into r's context: a copy
// of the cached one (account.AccessCallerRef), which no request changes.
func callerOf(r *http.Request) caller {
	if c := account.CallerFrom(r.Context()); c != nil {
		return *c
	}
	return caller{}
}

// authed wraps h so that it runs only for a request with a valid bearer
// token (spec 5.4): anything else is 401 access_denied.
func (s *server) authed(h JSONHandler) JSONHandler {
	return func(r *http.Request) (any, error) {
		r, err := s.authenticate(r)
		if err != nil {
			return nil, err
		}
		return h(r)
	}
}

// authedStream is authed for download handlers.
func (s *server) authedStream(h StreamHandler) StreamHandler {
	return func(w http.ResponseWriter, r *http.Request) error {
		r, err := s.authenticate(r)
		if err != nil {
			return err
		}
		return h(w, r)
	}
}

// authenticate checks the bearer token and returns r with the caller in its
// context.
func (s *server) authenticate(r *http.Request) (*http.Request, error) {
	token, ok := bearer(r)
	if !ok {
		return r, Describe(ErrAccessDenied, "an access token is required: Authorization: Bearer <token>")
	}
	ac, err := s.accounts.AccessCallerRef(r.Context(), token)
	if err != nil {
		if errors.Is(err, account.ErrInvalidToken) || errors.Is(err, account.ErrNotFound) || errors.Is(err, account.ErrInactive) {
			return r, Describe(ErrAccessDenied, "the access token is invalid or expired")
		}
		return r, err
	}
	// require_two_step_auth: until enrolled, only enrollment is open.
	if !twoStepOpen[r.Pattern] {
		if err := s.accounts.TwoStepDue(r.Context(), ac); err != nil {
			return r, err
		}
	}
	// The cached caller itself, not a copy on the heap per request; its
	// Actor is made only for a change (account.WithCaller).
	return r.WithContext(account.WithCaller(r.Context(), ac)), nil
}

// bearer extracts the token of an `Authorization: Bearer` header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
