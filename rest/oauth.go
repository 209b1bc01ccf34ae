package rest

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"berth/account"
)

// Errors of the OAuth2 endpoints (RFC 6749 section 5.2). The token
// endpoint turns account errors into these, so that the one error table
// can map account.ErrInvalidToken to access_denied for the API and a bad
// refresh token still answers invalid_grant here.
var (
	// ErrUnsupportedGrantType is a grant_type other than password and
	// refresh_token (400 unsupported_grant_type).
	ErrUnsupportedGrantType = errors.New("unsupported grant type")
	// ErrInvalidClient is a missing or unknown client_id (401 invalid_client).
	ErrInvalidClient = errors.New("invalid client")
	// ErrInvalidGrant is a refresh token that is unknown, expired or
	// revoked, or a grant for a disabled account (400 invalid_grant).
	ErrInvalidGrant = errors.New("invalid grant")
)

// oauthClientID is the only OAuth2 client (spec 5.3).
const oauthClientID = "anchor"

// maxOAuthForm bounds the body of a token or revoke request: a handful of
// short fields, so anything larger is not a real client.
const maxOAuthForm = 64 << 10

// tokenResponse is the body of a successful grant (spec 5.3), exactly these
// fields.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	ExpiresIn    int64  `json:"expires_in"`
	GUID         string `json:"guid"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
}

// oauthRoutes registers the OAuth2 endpoints (spec 4.1, 5). They are not
// tied to an API version and need no bearer token.
func (s *server) oauthRoutes() {
	s.handleOAuth("POST /oauth/token", s.token)
	s.handleOAuth("POST /oauth/revoke", s.revoke)
}

// handleOAuth is handlePublic for the OAuth2 endpoints, whose every
// answer carries Pragma: no-cache besides Cache-Control: no-store (RFC
// 6749 5.1 and 5.2 ask both of a token response and its errors): an
// HTTP/1.0 cache between a browser and berth reads only Pragma, and kept
// a response that holds tokens.
func (s *server) handleOAuth(pattern string, h JSONHandler) {
	s.registered(pattern, true)
	next := s.serveJSON(h)
	s.mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Pragma", "no-cache")
		next.ServeHTTP(w, r)
	}))
}

// token serves both grants of spec 5.1 and 5.2.
func (s *server) token(r *http.Request) (any, error) {
	form, err := oauthForm(r)
	if err != nil {
		return nil, err
	}
	grant, err := form.required("grant_type")
	if err != nil {
		return nil, err
	}
	switch grant {
	case "password":
		return s.passwordGrant(r, form)
	case "refresh_token":
		return s.refreshGrant(r, form)
	}
	return nil, Describe(ErrUnsupportedGrantType, "grant_type must be password or refresh_token")
}

// passwordGrant logs a person in and issues tokens for the machine the
// client names (spec 5.1). A person with two-step verification also
// gives auth_code (spec 5.4), checked once the password is right.
func (s *server) passwordGrant(r *http.Request, form oauthValues) (any, error) {
	username, err := form.required("username")
	if err != nil {
		return nil, err
	}
	password, err := form.required("password")
	if err != nil {
		return nil, err
	}
	// new_password (berth's, docs/api.md): sign in and change the
	// password at once, the way back in for a person whose password
	// change_password_frequency has expired.
	newPassword := form.get("new_password")
	p, err := s.accounts.Authenticate(r.Context(), username, password)
	if err != nil && (newPassword == "" || !errors.Is(err, account.ErrPasswordExpired)) {
		return nil, grantError(err)
	}
	// The code is judged before the password may change: the password
	// alone must not be enough to take the account.
	if err := s.accounts.VerifyTwoStep(r.Context(), p, form.get("auth_code")); err != nil {
		return nil, grantError(err)
	}
	if newPassword != "" {
		if p, err = s.accounts.SignInWithNewPassword(r.Context(), username, password, newPassword); err != nil {
			return nil, grantError(err)
		}
	}
	m, err := s.accounts.UpsertMachine(r.Context(), p.ID, form.machine())
	if err != nil {
		return nil, grantError(err)
	}
	toks, err := s.accounts.IssueLoginTokens(r.Context(), p, m.ID)
	if err != nil {
		return nil, grantError(err)
	}
	return tokenBody(toks, m.GUID), nil
}

// refreshGrant rotates a refresh token (spec 5.2). The session keeps the
// machine it was issued to: a guid naming another machine is not honoured,
// and the response carries the session's own guid, which the client is to
// keep.
func (s *server) refreshGrant(r *http.Request, form oauthValues) (any, error) {
	refresh, err := form.required("refresh_token")
	if err != nil {
		return nil, err
	}
	toks, p, err := s.accounts.Refresh(r.Context(), refresh)
	if err != nil {
		return nil, grantError(err)
	}
	guid := ""
	if toks.MachineID != 0 {
		guid = s.touchMachine(r, p.ID, toks.MachineID, form.machine())
	}
	return tokenBody(toks, guid), nil
}

// touchMachine records the client fields of a refresh on the session's
// machine and returns its GUID. The refresh has already rotated the token,
// so a failure here must not lose the new tokens: it is logged, and the
// grant still succeeds.
func (s *server) touchMachine(r *http.Request, personID, machineID uint64, in account.MachineInput) string {
	m, err := s.accounts.Machine(r.Context(), machineID)
	if err != nil {
		s.log.Warn("refresh: reading the session's machine", "machine_id", machineID, "error", err)
		return in.GUID
	}
	in.GUID = m.GUID
	if _, err := s.accounts.UpsertMachine(r.Context(), personID, in); err != nil {
		s.log.Warn("refresh: updating the session's machine", "machine_id", machineID, "error", err)
	}
	return m.GUID
}

// revoke serves spec 5.5 (RFC 7009): any well-formed request is a success,
// whether or not the token existed, so the endpoint tells nobody which
// tokens are live. token_type_hint is not needed: one lookup covers both
// kinds.
func (s *server) revoke(r *http.Request) (any, error) {
	form, err := oauthForm(r)
	if err != nil {
		return nil, err
	}
	tok, err := form.required("token")
	if err != nil {
		return nil, err
	}
	if err := s.accounts.Revoke(r.Context(), tok); err != nil {
		return nil, err
	}
	return nil, nil
}

func tokenBody(t account.Tokens, guid string) tokenResponse {
	return tokenResponse{
		AccessToken:  t.AccessToken,
		ExpiresIn:    int64(t.ExpiresIn / time.Second),
		GUID:         guid,
		TokenType:    "Bearer",
		RefreshToken: t.RefreshToken,
		Scope:        "full",
	}
}

// grantError gives the account errors of a grant their RFC 6749 meaning.
// Wrong credentials (account.ErrInvalidCredentials) and a locked account
// map through the table directly; a bad refresh token and a disabled
// account become invalid_grant here, because the table maps
// account.ErrInvalidToken to the API's access_denied.
func grantError(err error) error {
	switch {
	case errors.Is(err, account.ErrInvalidToken):
		return Describe(ErrInvalidGrant, "the refresh token is invalid, expired or revoked")
	case errors.Is(err, account.ErrInactive):
		return Describe(ErrInvalidGrant, "the account is disabled")
	}
	return err
}

// oauthValues are the body fields of an OAuth2 request.
type oauthValues map[string][]string

// oauthForm parses the form body of a token or revoke request and checks
// the client (spec 5.3). Fields are read from the body only (RFC 6749 3.2:
// credentials in a URL end up in logs), so the query is not parsed at all
// (http.Request.ParseForm would, and fail on a malformed one). A body is
// application/x-www-form-urlencoded (RFC 6749 4.3.2, RFC 7009 2.1): one of
// another type is invalid_request, rather than read as no fields and
// answered invalid_client for a client_id it holds. Without a Content-Type
// there are no fields. A field sent twice is invalid_request (RFC 6749 3.1).
func oauthForm(r *http.Request) (oauthValues, error) {
	vals := url.Values{}
	if h := r.Header.Get("Content-Type"); h != "" {
		ct, _, err := mime.ParseMediaType(h)
		if err != nil || ct != "application/x-www-form-urlencoded" {
			return nil, Describe(ErrInvalidRequest, "the body must be application/x-www-form-urlencoded")
		}
		b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxOAuthForm))
		var mbe *http.MaxBytesError
		switch {
		case r.Context().Err() != nil:
			return nil, r.Context().Err() // the client left
		case errors.As(err, &mbe):
			return nil, err
		case err != nil:
			return nil, Describe(ErrInvalidRequest, "the body ended early")
		}
		if vals, err = url.ParseQuery(string(b)); err != nil {
			return nil, Describe(ErrInvalidRequest, "the body is not a valid form")
		}
	}
	form := oauthValues(vals)
	for k, v := range form {
		if len(v) > 1 {
			return nil, Describe(ErrInvalidRequest, "parameter %q is repeated", k)
		}
	}
	client := form.get("client_id")
	if client == "" {
		// RFC 6749 2.3.1: a client may send its id by HTTP Basic instead.
		client, _, _ = r.BasicAuth()
	}
	switch client {
	case oauthClientID:
		return form, nil
	case "":
		return nil, Describe(ErrInvalidClient, "client_id is required")
	}
	return nil, Describe(ErrInvalidClient, "unknown client_id")
}

// get returns a field's value; empty means absent (RFC 6749 3.1).
func (v oauthValues) get(name string) string {
	if vs := v[name]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// required returns a field's value, or invalid_request naming it.
func (v oauthValues) required(name string) (string, error) {
	s := v.get(name)
	if s == "" {
		return "", Describe(ErrInvalidRequest, "missing parameter %q", name)
	}
	return s, nil
}

// machine returns the optional client fields of spec 5.1.
func (v oauthValues) machine() account.MachineInput {
	return account.MachineInput{
		GUID:      strings.TrimSpace(v.get("guid")),
		DNSName:   v.get("dns_name"),
		OSType:    v.get("os_type"),
		OSVersion: v.get("os_version"),
	}
}
