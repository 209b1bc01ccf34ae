package rest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"golang.org/x/oauth2"

	"berth/account"
)

// oauthPost posts a form to an OAuth2 endpoint, without a bearer token.
func (f *fixture) oauthPost(path string, form url.Values) (int, []byte) {
	f.t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	return f.readAll(f.request(http.MethodPost, path, "", strings.NewReader(form.Encode()), h))
}

// passwordForm is a valid password grant for the fixture's person.
func passwordForm(extra ...string) url.Values {
	v := url.Values{
		"grant_type": {"password"},
		"client_id":  {"anchor"},
		"username":   {"alice"},
		"password":   {fixturePassword},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return v
}

// grant posts a token request that must succeed and returns its body.
func (f *fixture) grant(form url.Values) tokenResponse {
	f.t.Helper()
	status, body := f.oauthPost("/oauth/token", form)
	if status != http.StatusOK {
		f.t.Fatalf("token: %d %s", status, body)
	}
	var tr tokenResponse
	decode(f.t, body, &tr)
	return tr
}

// personStatus calls GET /api/2/person with token.
func (f *fixture) personStatus(token string) (int, []byte) {
	f.t.Helper()
	return f.readAll(f.request(http.MethodGet, "/api/2/person", token, nil, nil))
}

func oauthConfig(f *fixture) (*oauth2.Config, context.Context) {
	conf := &oauth2.Config{
		ClientID: "anchor",
		Endpoint: oauth2.Endpoint{TokenURL: f.url("/oauth/token"), AuthStyle: oauth2.AuthStyleInParams},
	}
	// The oauth2 package's own requests must trust the test server's certificate.
	return conf, context.WithValue(context.Background(), oauth2.HTTPClient, f.client)
}

// TestOAuthClientRefreshesExpiredToken logs in with x/oauth2's password
// grant and lets its transport refresh after the access token expired.
func TestOAuthClientRefreshesExpiredToken(t *testing.T) {
	const ttl = 2 * time.Second
	f := newFixtureWith(t, fixtureOptions{Accounts: account.Options{AccessTTL: ttl}})
	conf, ctx := oauthConfig(f)
	tok, err := conf.PasswordCredentialsToken(ctx, "alice", fixturePassword)
	if err != nil {
		t.Fatal(err)
	}
	guid, _ := tok.Extra("guid").(string)
	if _, err := uuid.Parse(guid); err != nil {
		t.Fatalf("guid %q: %v", guid, err)
	}
	if tok.TokenType != "Bearer" || tok.Extra("scope") != "full" || tok.Extra("expires_in") != float64(2) {
		t.Fatalf("token: type %q scope %v expires_in %v", tok.TokenType, tok.Extra("scope"), tok.Extra("expires_in"))
	}

	// x/oauth2 refreshes 10 s before expiry by default, which is never
	// for a 2 s token; a small margin lets the token really expire first.
	src := oauth2.ReuseTokenSourceWithExpiry(tok, conf.TokenSource(ctx, tok), 300*time.Millisecond)
	client := oauth2.NewClient(ctx, src)
	getSelf := func() {
		t.Helper()
		resp, err := client.Get(f.url("/api/2/person"))
		if err != nil {
			t.Fatal(err)
		}
		status, body := f.readAll(resp)
		var p personBody
		decode(t, body, &p)
		if status != http.StatusOK || p.Username != "alice" {
			t.Fatalf("GET /api/2/person: %d %s", status, body)
		}
	}
	getSelf()

	time.Sleep(time.Until(tok.Expiry) + 100*time.Millisecond)
	// The server enforces the expiry itself.
	status, body := f.personStatus(tok.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")

	getSelf() // refreshes transparently
	fresh, err := src.Token()
	if err != nil {
		t.Fatal(err)
	}
	if fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken {
		t.Fatal("the transport did not refresh both tokens")
	}
	if g := fresh.Extra("guid"); g != guid {
		t.Errorf("guid after refresh = %v, want %s", g, guid)
	}
}

func TestOAuthTokenResponse(t *testing.T) {
	f := newFixture(t)
	resp := f.request(http.MethodPost, "/oauth/token", "",
		strings.NewReader(passwordForm("dns_name", "laptop", "os_type", "osx", "os_version", "15.1").Encode()),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control = %q, want no-store", cc)
	}
	// RFC 6749 5.1: and Pragma, which an HTTP/1.0 cache reads.
	if p := resp.Header.Get("Pragma"); p != "no-cache" {
		t.Errorf("Pragma = %q, want no-cache", p)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	status, body := f.readAll(resp)
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	var raw map[string]any
	decode(t, body, &raw)
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{"access_token", "expires_in", "guid", "refresh_token", "scope", "token_type"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	if raw["expires_in"] != float64(3600) || raw["token_type"] != "Bearer" || raw["scope"] != "full" {
		t.Errorf("body = %s", body)
	}
	var tr tokenResponse
	decode(t, body, &tr)
	if tr.AccessToken == "" || tr.RefreshToken == "" || tr.AccessToken == tr.RefreshToken {
		t.Errorf("tokens %q %q", tr.AccessToken, tr.RefreshToken)
	}
	if st, b := f.personStatus(tr.AccessToken); st != http.StatusOK {
		t.Fatalf("person with the new token: %d %s", st, b)
	}
}

func TestOAuthMachineGUID(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	first := f.grant(passwordForm("dns_name", "laptop", "os_type", "win", "os_version", "11"))
	m, err := f.accounts.MachineByGUID(ctx, first.GUID)
	if err != nil {
		t.Fatalf("machine of guid %q: %v", first.GUID, err)
	}
	if m.PersonID != f.person.ID || m.DNSName != "laptop" || m.OSType != "win" || m.OSVersion != "11" {
		t.Fatalf("machine = %+v", m)
	}

	// A known guid is echoed and its machine updated.
	again := f.grant(passwordForm("guid", first.GUID, "os_version", "12"))
	if again.GUID != first.GUID {
		t.Fatalf("guid = %q, want %q echoed", again.GUID, first.GUID)
	}
	if m, _ = f.accounts.MachineByGUID(ctx, first.GUID); m.OSVersion != "12" || m.DNSName != "laptop" {
		t.Fatalf("machine after update = %+v", m)
	}

	// An unknown guid gets a new one.
	unknown := uuid.NewString()
	other := f.grant(passwordForm("guid", unknown))
	if other.GUID == unknown || other.GUID == first.GUID {
		t.Fatalf("unknown guid: got %q", other.GUID)
	}

	// Refresh keeps the session's machine, records new fields, and echoes its guid.
	ref := f.grant(url.Values{"grant_type": {"refresh_token"}, "client_id": {"anchor"},
		"refresh_token": {first.RefreshToken}, "guid": {first.GUID}, "dns_name": {"renamed"}})
	if ref.GUID != first.GUID {
		t.Fatalf("refresh guid = %q, want %q", ref.GUID, first.GUID)
	}
	if m, _ = f.accounts.MachineByGUID(ctx, first.GUID); m.DNSName != "renamed" {
		t.Fatalf("machine after refresh = %+v", m)
	}
	// A refresh without guid, or naming another machine, still answers the session's.
	ref2 := f.grant(url.Values{"grant_type": {"refresh_token"}, "client_id": {"anchor"},
		"refresh_token": {ref.RefreshToken}, "guid": {other.GUID}})
	if ref2.GUID != first.GUID {
		t.Fatalf("refresh guid = %q, want the session's %q", ref2.GUID, first.GUID)
	}

	// Invalid machine fields on the password grant are invalid_request.
	status, body := f.oauthPost("/oauth/token", passwordForm("dns_name", strings.Repeat("x", 300)))
	wantError(t, status, body, http.StatusBadRequest, "invalid_request")
}

func refreshForm(tok string) url.Values {
	return url.Values{"grant_type": {"refresh_token"}, "client_id": {"anchor"}, "refresh_token": {tok}}
}

func TestOAuthRefreshRotation(t *testing.T) {
	f := newFixture(t)
	first := f.grant(passwordForm())
	second := f.grant(refreshForm(first.RefreshToken))
	if second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken {
		t.Fatal("refresh did not rotate the tokens")
	}
	if st, b := f.personStatus(second.AccessToken); st != http.StatusOK {
		t.Fatalf("new access token: %d %s", st, b)
	}
	// The access token issued before stays valid until it expires.
	if st, b := f.personStatus(first.AccessToken); st != http.StatusOK {
		t.Fatalf("earlier access token: %d %s", st, b)
	}

	// Replaying the rotated refresh token is refused, and, since it means
	// the token was copied, ends the whole session.
	status, body := f.oauthPost("/oauth/token", refreshForm(first.RefreshToken))
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	status, body = f.oauthPost("/oauth/token", refreshForm(second.RefreshToken))
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	status, body = f.personStatus(second.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")
}

// TestOAuthRefreshRetry: with a reuse grace, a client that lost the answer
// to its refresh and sends the same refresh token again gets a new pair
// (200, not invalid_grant), and the pair it never received stops working.
func TestOAuthRefreshRetry(t *testing.T) {
	opts := account.DefaultOptions()
	opts.RefreshReuseGrace = time.Minute
	f := newFixtureWith(t, fixtureOptions{Accounts: opts})
	first := f.grant(passwordForm())
	lost := f.grant(refreshForm(first.RefreshToken))
	retried := f.grant(refreshForm(first.RefreshToken))
	if st, b := f.personStatus(retried.AccessToken); st != http.StatusOK {
		t.Fatalf("retried pair: %d %s", st, b)
	}
	status, body := f.personStatus(lost.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")

	// Once the client moved on with its pair, the old token is a copy.
	f.grant(refreshForm(retried.RefreshToken))
	status, body = f.oauthPost("/oauth/token", refreshForm(first.RefreshToken))
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	status, body = f.personStatus(retried.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")
	status, body = f.oauthPost("/oauth/token", refreshForm(lost.RefreshToken))
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
}

func TestOAuthRevoke(t *testing.T) {
	f := newFixture(t)
	revoke := func(form url.Values) {
		t.Helper()
		status, body := f.oauthPost("/oauth/revoke", form)
		if status != http.StatusOK || strings.TrimSpace(string(body)) != `{"status":"ok"}` {
			t.Fatalf("revoke: %d %s", status, body)
		}
	}
	tr := f.grant(passwordForm())

	// Revoking the access token ends only that token.
	revoke(url.Values{"client_id": {"anchor"}, "token": {tr.AccessToken}, "token_type_hint": {"access_token"}})
	status, body := f.personStatus(tr.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")
	next := f.grant(refreshForm(tr.RefreshToken))

	// Revoking the refresh token ends the session: it cannot refresh, and
	// the access tokens issued with it stop working.
	revoke(url.Values{"client_id": {"anchor"}, "token": {next.RefreshToken}})
	status, body = f.oauthPost("/oauth/token", refreshForm(next.RefreshToken))
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	status, body = f.personStatus(next.AccessToken)
	wantError(t, status, body, http.StatusUnauthorized, "access_denied")

	// Unknown tokens and a wrong hint are still a success (RFC 7009 2.2).
	revoke(url.Values{"client_id": {"anchor"}, "token": {"no-such-token"}, "token_type_hint": {"refresh_token"}})
	revoke(url.Values{"client_id": {"anchor"}, "token": {tr.AccessToken}})

	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no token", url.Values{"client_id": {"anchor"}}, 400, "invalid_request"},
		{"no client", url.Values{"token": {"x"}}, 401, "invalid_client"},
		{"wrong client", url.Values{"client_id": {"other"}, "token": {"x"}}, 401, "invalid_client"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.oauthPost("/oauth/revoke", c.form)
			wantError(t, status, body, c.status, c.code)
		})
	}
}

func TestOAuthTokenErrors(t *testing.T) {
	f := newFixture(t)
	with := func(v url.Values, kv ...string) url.Values {
		out := url.Values{}
		for k, vs := range v {
			out[k] = slices.Clone(vs)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				out.Del(kv[i])
			} else {
				out.Set(kv[i], kv[i+1])
			}
		}
		return out
	}
	pw := passwordForm()
	repeated := with(pw)
	repeated.Add("username", "bob")
	for _, c := range []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"wrong password", with(pw, "password", "wrong password"), 400, "invalid_grant"},
		{"unknown user", with(pw, "username", "nobody"), 400, "invalid_grant"},
		{"missing grant_type", with(pw, "grant_type", ""), 400, "invalid_request"},
		{"authorization_code", with(pw, "grant_type", "authorization_code", "code", "abc"), 400, "unsupported_grant_type"},
		{"client_credentials", with(pw, "grant_type", "client_credentials"), 400, "unsupported_grant_type"},
		{"missing client_id", with(pw, "client_id", ""), 401, "invalid_client"},
		{"wrong client_id", with(pw, "client_id", "bosun"), 401, "invalid_client"},
		{"missing username", with(pw, "username", ""), 400, "invalid_request"},
		{"missing password", with(pw, "password", ""), 400, "invalid_request"},
		{"repeated field", repeated, 400, "invalid_request"},
		{"missing refresh_token", url.Values{"grant_type": {"refresh_token"}, "client_id": {"anchor"}}, 400, "invalid_request"},
		{"unknown refresh_token", refreshForm("not-a-token"), 400, "invalid_grant"},
		{"access token as refresh token", refreshForm(f.token), 400, "invalid_grant"},
		{"body too large", with(pw, "dns_name", strings.Repeat("x", maxOAuthForm)), 400, "invalid_request"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body := f.oauthPost("/oauth/token", c.form)
			wantError(t, status, body, c.status, c.code)
		})
	}

	// Credentials in the URL query are not read (RFC 6749 3.2).
	q := "/oauth/token?" + pw.Encode()
	status, body := f.readAll(f.request(http.MethodPost, q, "", nil, nil))
	wantError(t, status, body, http.StatusUnauthorized, "invalid_client")

	// x/oauth2 sees the RFC 6749 error code.
	conf, ctx := oauthConfig(f)
	_, err := conf.PasswordCredentialsToken(ctx, "alice", "wrong password")
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("oauth2 error = %v, want invalid_grant", err)
	}

	// A disabled person gets invalid_grant with a description that says so.
	if _, err := f.accounts.UpdatePerson(context.Background(), f.person.ID, func(p *account.Person) error {
		p.Active = false
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	status, body = f.oauthPost("/oauth/token", pw)
	wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	if !strings.Contains(string(body), "disabled") {
		t.Errorf("body %s does not say the account is disabled", body)
	}
}

func TestOAuthLockout(t *testing.T) {
	const maxFailures = 3
	f := newFixtureWith(t, fixtureOptions{Accounts: account.Options{
		Lockout: account.LockoutOptions{MaxFailures: maxFailures, Window: time.Minute, Duration: time.Minute},
	}})
	wrong := passwordForm("password", "wrong password")
	for i := 1; i < maxFailures; i++ {
		status, body := f.oauthPost("/oauth/token", wrong)
		wantError(t, status, body, http.StatusBadRequest, "invalid_grant")
	}
	// The failure that reaches the threshold already locks.
	status, body := f.oauthPost("/oauth/token", wrong)
	wantError(t, status, body, http.StatusForbidden, "account_locked")
	// While locked, even the right password is refused; the answer says
	// for how long (a one-minute lock: under a minute left).
	status, body = f.oauthPost("/oauth/token", passwordForm())
	wantError(t, status, body, http.StatusForbidden, "account_locked")
	if !strings.Contains(string(body), "the account is locked until ") || !strings.Contains(string(body), " UTC (") {
		t.Errorf("account_locked body %s does not say until when", body)
	}
}

// TestBearerRequired: a request without a valid bearer token is 401
// access_denied, with the challenge RFC 6750 3 and RFC 9110 15.5.2
// require of every 401 (error="invalid_token" only when a bearer token
// was sent, RFC 6750 3.1), on JSON routes and downloads alike.
func TestBearerRequired(t *testing.T) {
	f := newFixture(t)
	const (
		challenge = `Bearer realm="berth"`
		invalid   = `Bearer realm="berth", error="invalid_token"`
	)
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("x"))
	for _, c := range []struct {
		name, header, want string
	}{
		{"none", "", challenge},
		{"scheme only", "Bearer", challenge},
		{"empty token", "Bearer   ", challenge},
		{"basic", "Basic YWxpY2U6Y29ycmVjdCBob3JzZSBiYXR0ZXJ5", challenge},
		{"no scheme", f.token, challenge},
		{"unknown token", "Bearer not-a-token", invalid},
		{"refresh token", "Bearer " + f.grant(passwordForm()).RefreshToken, invalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.header != "" {
				h.Set("Authorization", c.header)
			}
			for _, path := range []string{"/api/2/person", f.at("/api/2/files/%d/%d/download", fj.ID)} {
				resp := f.request(http.MethodGet, path, "", nil, h)
				status, body := f.readAll(resp)
				wantError(t, status, body, http.StatusUnauthorized, "access_denied")
				if got := resp.Header.Get("WWW-Authenticate"); got != c.want {
					t.Errorf("%s: WWW-Authenticate %q, want %q", path, got, c.want)
				}
			}
		})
	}
	// Other answers carry no challenge.
	resp := f.request(http.MethodGet, f.at("/api/2/files/%d/999999"), f.token, nil, nil)
	if st, _ := f.readAll(resp); st != http.StatusNotFound || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("404: %d, WWW-Authenticate %q", st, resp.Header.Get("WWW-Authenticate"))
	}
	// The scheme is case-insensitive (RFC 7235 2.1).
	h := http.Header{"Authorization": {"bearer " + f.token}}
	if status, body := f.readAll(f.request(http.MethodGet, "/api/2/person", "", nil, h)); status != http.StatusOK {
		t.Fatalf("lowercase scheme: %d %s", status, body)
	}
}

// TestTokenResponseShape pins the wire names of tokenResponse.
func TestTokenResponseShape(t *testing.T) {
	b, err := json.Marshal(tokenBody(account.Tokens{AccessToken: "a", RefreshToken: "r", ExpiresIn: 90 * time.Minute}, "g"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"access_token":"a","expires_in":5400,"guid":"g","token_type":"Bearer","refresh_token":"r","scope":"full"}`
	if string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

// TestOAuthClientIDByBasicAuth: x/oauth2's default auto-detection sends the
// client id by HTTP Basic first (RFC 6749 2.3.1), which is accepted.
func TestOAuthClientIDByBasicAuth(t *testing.T) {
	f := newFixture(t)
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleAutoDetect} {
		conf, ctx := oauthConfig(f)
		conf.Endpoint.AuthStyle = style
		tok, err := conf.PasswordCredentialsToken(ctx, "alice", fixturePassword)
		if err != nil {
			t.Fatalf("style %d: %v", style, err)
		}
		if st, b := f.personStatus(tok.AccessToken); st != http.StatusOK {
			t.Fatalf("style %d: %d %s", style, st, b)
		}
	}
	conf, ctx := oauthConfig(f)
	conf.ClientID = "bosun"
	conf.Endpoint.AuthStyle = oauth2.AuthStyleInHeader
	_, err := conf.PasswordCredentialsToken(ctx, "alice", fixturePassword)
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong client by Basic: %v", err)
	}
	// RFC 6749 5.2: a client that tried the Authorization header gets a
	// challenge of its scheme; RFC 9110 15.5.2 wants one on every 401, so
	// a client that sent client_id in the form (or none) gets it too.
	const challenge = `Basic realm="berth"`
	if got := re.Response.Header.Get("WWW-Authenticate"); got != challenge {
		t.Errorf("wrong client by Basic: WWW-Authenticate %q, want %q", got, challenge)
	}
	for _, form := range []url.Values{passwordForm("client_id", "bosun"), {"grant_type": {"password"}}} {
		h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
		resp := f.request(http.MethodPost, "/oauth/token", "", strings.NewReader(form.Encode()), h)
		status, body := f.readAll(resp)
		wantError(t, status, body, http.StatusUnauthorized, "invalid_client")
		if got := resp.Header.Get("WWW-Authenticate"); got != challenge {
			t.Errorf("client_id %q: WWW-Authenticate %q, want %q", form.Get("client_id"), got, challenge)
		}
	}
}

// TestOAuthSimultaneousGrants: more simultaneous password grants with the
// right password than the lockout's threshold all succeed (a sync client
// and a script starting together, several devices after a password
// change), while as many simultaneous guesses still lock the account.
func TestOAuthSimultaneousGrants(t *testing.T) {
	const maxFailures, grants = 3, 12
	f := newFixtureWith(t, fixtureOptions{Accounts: account.Options{
		// Costly enough that the grants overlap while they are checked.
		Argon2:  account.Argon2Params{Memory: 16 << 10, Time: 2, Threads: 1},
		Lockout: account.LockoutOptions{MaxFailures: maxFailures, Window: time.Minute, Duration: time.Minute},
	}})
	burst := func(form func(i int) url.Values) (statuses []int, bodies [][]byte) {
		statuses, bodies = make([]int, grants), make([][]byte, grants)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range grants {
			wg.Go(func() {
				<-start
				statuses[i], bodies[i] = f.oauthPost("/oauth/token", form(i))
			})
		}
		close(start)
		wg.Wait()
		return statuses, bodies
	}

	statuses, bodies := burst(func(int) url.Values { return passwordForm() })
	for i, st := range statuses {
		if st != http.StatusOK {
			t.Errorf("right password, grant %d of %d at once: %d %s", i+1, grants, st, bodies[i])
		}
	}

	for _, tc := range []struct {
		name, login string
		wrong       func(i int) string
	}{
		{"different wrong passwords", "carol", func(i int) string { return fmt.Sprintf("guess %d", i) }},
	} {
		f.addPerson(tc.login)
		statuses, bodies = burst(func(i int) url.Values { return passwordForm("username", tc.login, "password", tc.wrong(i)) })
		locked := 0
		for i, st := range statuses {
			var e struct{ Error string }
			decode(t, bodies[i], &e)
			switch {
			case st == http.StatusForbidden && e.Error == "account_locked":
				locked++
			case st == http.StatusBadRequest && e.Error == "invalid_grant":
			default:
				t.Errorf("%s: %d %s", tc.name, st, bodies[i])
			}
		}
		if locked < grants-maxFailures+1 {
			t.Errorf("%s, %d at once: %d answered account_locked, want at least %d", tc.name, grants, locked, grants-maxFailures+1)
		}
		status, body := f.oauthPost("/oauth/token", passwordForm("username", tc.login))
		wantError(t, status, body, http.StatusForbidden, "account_locked")
	}
}
