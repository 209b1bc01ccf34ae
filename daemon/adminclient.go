package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sys/unix"

	"berth/atomicfile"
)

// This file is the client side of `berth admin`: the stored session, the
// OAuth2 grants and the calls of the REST API. It speaks only HTTPS to a
// running berth, never to its stores, so it works against any berth it
// can reach, as `mc admin` does against MinIO.

// Exit statuses of `berth admin` (documented in docs/operations.md): a
// script tells "the server said no" from "I typed it wrong" from "the
// server is not there or I am not logged in".
const (
	exitAPIError = 1 // the API answered with an error
	exitUsage    = 2 // bad arguments or flags
	exitNoAccess = 3 // cannot connect, TLS failed, not logged in, or the session ended
)

// exitError carries the exit status Main returns for err.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process status for an error run returned: the one an
// exitError carries, else 1.
func exitCode(err error) int {
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.code
	}
	return 1
}

// usageErrorf is a mistake on the command line (exit status 2).
func usageErrorf(format string, a ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

// noAccess wraps err as a failure to reach or authenticate to berth
// (exit status 3).
func noAccess(err error) error {
	var xe *exitError
	if errors.As(err, &xe) {
		return err
	}
	var cv *tls.CertificateVerificationError
	if errors.As(err, &cv) {
		// Go's text says what failed, not what to do: a berth with its
		// own certificate is trusted only by naming that certificate.
		err = fmt.Errorf("%w; berth's certificate is not trusted: log in with --ca FILE (a self-signed berth's is DATA/tls/cert.pem)", err)
	}
	return &exitError{code: exitNoAccess, err: err}
}

// apiError is an error answer of the API: {error, error_description}
// (spec 7), or, from something that is not berth (a proxy), only a status.
type apiError struct {
	Status      int
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *apiError) Error() string {
	switch {
	case e.Code == "":
		return fmt.Sprintf("HTTP %d %s (not an answer of berth's API)", e.Status, http.StatusText(e.Status))
	case e.Description == "":
		return fmt.Sprintf("%s (HTTP %d)", e.Code, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.Code, e.Status, e.Description)
}

// adminConfig is the stored session of `berth admin login`: where berth
// is, how to trust it, and the tokens. The file is the user's own (0600):
// its refresh token is as good as the password until it is revoked.
type adminConfig struct {
	URL      string `json:"url"`
	Username string `json:"username"`
	// CAFile is the absolute path of the PEM file that verifies berth's
	// certificate; empty means the system's roots.
	CAFile string `json:"ca_file,omitempty"`
	// InsecureSkipVerify trusts any certificate (a test server's).
	InsecureSkipVerify bool `json:"insecure_skip_verify,omitempty"`
	// GUID is the machine berth assigned to this session (spec 5.3).
	GUID         string    `json:"guid,omitempty"`
	AccessToken  string    `json:"access_token"`
	RefreshToken string    `json:"refresh_token"`
	Expiry       time.Time `json:"expiry"`
}

func (c *adminConfig) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: c.AccessToken, TokenType: "Bearer", RefreshToken: c.RefreshToken, Expiry: c.Expiry}
}

func (c *adminConfig) setToken(t *oauth2.Token) {
	c.AccessToken, c.RefreshToken, c.Expiry = t.AccessToken, t.RefreshToken, t.Expiry
	if g, ok := t.Extra("guid").(string); ok && g != "" {
		c.GUID = g
	}
}

// defaultAdminConfig is $XDG_CONFIG_HOME/berth/admin.json (~/.config on
// Linux when unset).
func defaultAdminConfig() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", usageErrorf("no config directory (%v): give --config", err)
	}
	return filepath.Join(dir, "berth", "admin.json"), nil
}

// loadAdminConfig reads the session file; a missing one means not logged
// in (exit status 3).
func loadAdminConfig(path string) (*adminConfig, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, noAccess(fmt.Errorf("not logged in (no %s): run berth admin login", path))
	}
	if err != nil {
		return nil, noAccess(err)
	}
	defer f.Close()
	var c adminConfig
	if err := json.NewDecoder(f).Decode(&c); err != nil {
		return nil, noAccess(fmt.Errorf("%s: %w (run berth admin login again)", path, err))
	}
	if c.URL == "" || c.RefreshToken == "" {
		return nil, noAccess(fmt.Errorf("%s holds no session: run berth admin login", path))
	}
	return &c, nil
}

// saveAdminConfig writes the session file whole or not at all: a temp
// file (0600 from its creation, so the token is never readable by
// others), fsynced, renamed over the old one. A rotated refresh token
// lost to a crash would log the administrator out.
func saveAdminConfig(path string, c *adminConfig) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(b, '\n'), 0o600)
}

// lockAdminConfig takes an exclusive lock beside the session file for a
// refresh. Refresh tokens rotate and berth ends the session of a refresh
// token used twice (reuse detection), so two `berth admin` commands that
// both find the access token expired must not both refresh with the same
// one: the second waits, then reads the token the first stored.
func lockAdminConfig(path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing releases the lock
}

// httpClient trusts berth's certificate as the session says.
func (c *adminConfig) httpClient() (*http.Client, error) {
	return newAdminHTTPClient(c.CAFile, c.InsecureSkipVerify)
}

// adminRequestTimeout bounds one request: every admin call is a small
// JSON exchange, so a berth that takes longer is not answering.
const adminRequestTimeout = 60 * time.Second

func newAdminHTTPClient(caFile string, insecure bool) (*http.Client, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure}
	if caFile != "" {
		pool, err := caPool(caFile)
		if err != nil {
			return nil, noAccess(fmt.Errorf("the CA file: %w", err))
		}
		tc.RootCAs = pool
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Transport: tr, Timeout: adminRequestTimeout}, nil
}

// oauthConfig is the OAuth2 client of spec 5: client anchor, no secret,
// the client id in the form (spec 5.3 requires it on every request).
func oauthConfig(base string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: "anchor",
		Endpoint: oauth2.Endpoint{
			TokenURL:  base + "/oauth/token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
}

// passwordGrantWithCode is the password grant with a two-step code
// (auth_code), which oauth2's PasswordCredentialsToken has no way to
// send. It answers as that does: the token, or an *oauth2.RetrieveError
// with berth's error code.
func passwordGrantWithCode(ctx context.Context, client *http.Client, base, user, password, code string) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {"password"}, "client_id": {oauthConfig(base).ClientID},
		"username": {user}, "password": {password}, "auth_code": {code}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/oauth/token", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	var out struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	if err := json.Unmarshal(body, &out); err != nil || resp.StatusCode != http.StatusOK || out.AccessToken == "" {
		return nil, &oauth2.RetrieveError{Response: resp, Body: body, ErrorCode: out.Error, ErrorDescription: out.Description}
	}
	tok := &oauth2.Token{AccessToken: out.AccessToken, TokenType: out.TokenType, RefreshToken: out.RefreshToken}
	if out.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(out.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// grantError turns a failed grant into its exit status: berth's refusal
// (wrong password, account_locked, invalid_grant) and an unreachable
// berth alike are exit 3.
func grantError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		ae := &apiError{Status: re.Response.StatusCode, Code: re.ErrorCode, Description: re.ErrorDescription}
		return noAccess(ae)
	}
	return noAccess(err)
}

// adminSession is a logged-in client of one berth.
type adminSession struct {
	path   string // the session file
	cfg    *adminConfig
	client *http.Client
}

func openAdminSession(path string) (*adminSession, error) {
	cfg, err := loadAdminConfig(path)
	if err != nil {
		return nil, err
	}
	client, err := cfg.httpClient()
	if err != nil {
		return nil, err
	}
	return &adminSession{path: path, cfg: cfg, client: client}, nil
}

// accessToken returns a live access token, refreshing (and storing the
// rotated refresh token) when the stored one has expired or force is set.
func (s *adminSession) accessToken(ctx context.Context, force bool) (string, error) {
	if !force && s.cfg.token().Valid() {
		return s.cfg.AccessToken, nil
	}
	unlock, err := lockAdminConfig(s.path)
	if err != nil {
		return "", noAccess(err)
	}
	defer unlock()
	// Another command may have refreshed while this one waited.
	cur, err := loadAdminConfig(s.path)
	if err != nil {
		return "", err
	}
	if cur.RefreshToken != s.cfg.RefreshToken && cur.token().Valid() {
		s.cfg = cur
		return s.cfg.AccessToken, nil
	}
	old := cur.token()
	old.Expiry = time.Unix(1, 0) // make the library refresh
	ctx = context.WithValue(ctx, oauth2.HTTPClient, s.client)
	tok, err := oauthConfig(cur.URL).TokenSource(ctx, old).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
			return "", noAccess(fmt.Errorf("the session has ended (%w): run berth admin login again", &apiError{Status: re.Response.StatusCode, Code: re.ErrorCode, Description: re.ErrorDescription}))
		}
		return "", grantError(err)
	}
	cur.setToken(tok)
	if err := saveAdminConfig(s.path, cur); err != nil {
		// The old refresh token is spent: say so loudly.
		return "", noAccess(fmt.Errorf("the refresh token rotated but %s could not be written (log in again): %w", s.path, err))
	}
	s.cfg = cur
	return s.cfg.AccessToken, nil
}

// call sends one API request and decodes a JSON answer into out (nil:
// discard). form, when not nil, is sent as the POST body. An access token
// refused with 401 is refreshed once and the request sent again: berth
// acted on nothing it refused.
func (s *adminSession) call(ctx context.Context, method, path string, query url.Values, form url.Values, out any) error {
	for attempt := 0; ; attempt++ {
		tok, err := s.accessToken(ctx, attempt > 0)
		if err != nil {
			return err
		}
		err = doJSON(ctx, s.client, s.cfg.URL, tok, method, path, query, form, out)
		var ae *apiError
		if attempt == 0 && errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
			continue
		}
		return err
	}
}

// maxAdminAnswer bounds what one answer may hold: a page of 100 persons
// with their policies is a few hundred KiB; more is not berth.
const maxAdminAnswer = 16 << 20

// doJSON performs one request against base and decodes the answer.
func doJSON(ctx context.Context, client *http.Client, base, token, method, path string, query, form url.Values, out any) error {
	u := base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return noAccess(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return noAccess(fmt.Errorf("reading the answer: %w", err))
	}
	if resp.StatusCode >= 300 {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(b, ae) != nil {
			ae.Code, ae.Description = "", ""
		}
		// A refused token and a locked account are the session failing,
		// not the call: the same status as a failed login.
		if resp.StatusCode == http.StatusUnauthorized || ae.Code == "account_locked" {
			return &exitError{code: exitNoAccess, err: ae}
		}
		return &exitError{code: exitAPIError, err: ae}
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		if !json.Valid(b) {
			return &exitError{code: exitAPIError, err: fmt.Errorf("%s %s: the answer is not JSON", method, path)}
		}
		*raw = bytes.Clone(b)
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &exitError{code: exitAPIError, err: fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)}
	}
	return nil
}

// revoke ends the session's tokens at berth (spec 5.5). Revoking the
// refresh token ends its access tokens too.
func (s *adminSession) revoke(ctx context.Context) error {
	form := url.Values{"client_id": {"anchor"}, "token": {s.cfg.RefreshToken}, "token_type_hint": {"refresh_token"}}
	return doJSON(ctx, s.client, s.cfg.URL, "", http.MethodPost, "/oauth/revoke", nil, form, nil)
}
