package rest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"
	"github.com/prometheus/client_golang/prometheus"

	"berth/account"
	"berth/berthtest"
)

// tsOutbox is an account.CodeSender that keeps the codes it is handed.
type tsOutbox struct {
	mu   sync.Mutex
	msgs []account.CodeMessage
}

func (b *tsOutbox) SendCode(_ context.Context, m account.CodeMessage) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.msgs = append(b.msgs, m)
	return nil
}

func (b *tsOutbox) last(t *testing.T) account.CodeMessage {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.msgs) == 0 {
		t.Fatal("no code sent")
	}
	return b.msgs[len(b.msgs)-1]
}

// tsFixture is a fixture whose accounts run on a fixed clock, send codes
// to an outbox, log to logs and count into reg; the lockout takes three
// failures.
type tsFixture struct {
	*fixture
	clk  *berthtest.Clock
	box  *tsOutbox
	logs *berthtest.LogBuffer
	reg  *prometheus.Registry
}

func twoStepFixture(t *testing.T) *tsFixture {
	t.Helper()
	x := &tsFixture{clk: berthtest.NewClock(time.Date(2026, 3, 1, 9, 0, 10, 0, time.UTC)), box: &tsOutbox{},
		logs: &berthtest.LogBuffer{}, reg: prometheus.NewRegistry()}
	x.fixture = newFixtureWith(t, fixtureOptions{Accounts: account.Options{
		Now:        x.clk.Now,
		Lockout:    account.LockoutOptions{MaxFailures: 3, Window: time.Hour, Duration: time.Hour},
		TwoStep:    account.TwoStepOptions{Sender: x.box, Email: true, SMS: true},
		Logger:     slog.New(slog.NewTextHandler(x.logs, nil)),
		Registerer: x.reg,
	}})
	return x
}

// tsExactBody checks an error response's status and that its body has
// exactly the fields of want.
func tsExactBody(t *testing.T, status int, body []byte, wantStatus int, want map[string]string) {
	t.Helper()
	var got map[string]string
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	if status != wantStatus || len(got) != len(want) {
		t.Fatalf("got %d %s, want %d %v", status, body, wantStatus, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %d %s, want %d %v", status, body, wantStatus, want)
		}
	}
}

func (f *fixture) twoStepPost(token, path string, form url.Values) (int, []byte) {
	f.t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	return f.readAll(f.request(http.MethodPost, path, token, strings.NewReader(form.Encode()), h))
}

// enrollAuthenticator enrolls the fixture's person over the API and
// returns the secret and the recovery codes.
func (f *fixture) enrollAuthenticator(t *testing.T, clk *berthtest.Clock) (string, []string) {
	t.Helper()
	status, body := f.twoStepPost(f.token, fmt.Sprintf("/api/2/person/%d/two_step/enroll", f.person.ID), url.Values{"mode": {"authenticator"}, "current_password": {fixturePassword}})
	var en struct {
		Mode    string  `json:"two_step_mode"`
		URI     string  `json:"otpauth_uri"`
		QR      string  `json:"qr_code"`
		Secret  string  `json:"secret"`
		SentTo  *string `json:"sent_to"`
		Expires string  `json:"expires"`
	}
	if status != http.StatusOK {
		t.Fatalf("enroll: %d %s", status, body)
	}
	decode(t, body, &en)
	if en.Mode != "authenticator" || !strings.HasPrefix(en.URI, "otpauth://totp/") || !strings.HasPrefix(en.QR, "data:image/png;base64,") ||
		en.Secret == "" || en.SentTo != nil || en.Expires != "2026-03-01T09:10:10" {
		t.Fatalf("enroll body %s", body)
	}
	code, _ := totp.GenerateCode(en.Secret, clk.Now())
	status, body = f.twoStepPost(f.token, fmt.Sprintf("/api/2/person/%d/two_step/confirm", f.person.ID), url.Values{"auth_code": {code}})
	var rc recoveryCodesBody
	if status != http.StatusOK {
		t.Fatalf("confirm: %d %s", status, body)
	}
	decode(t, body, &rc)
	if rc.TwoStepMode != "authenticator" || len(rc.RecoveryCodes) != 10 {
		t.Fatalf("confirm body %s", body)
	}
	return en.Secret, rc.RecoveryCodes
}

// TestTwoStepPasswordGrant: the replies of spec 5.4, exactly, for a
// person with an authenticator.
func TestTwoStepPasswordGrant(t *testing.T) {
	f := twoStepFixture(t)
	clk := f.clk
	secret, recovery := f.enrollAuthenticator(t, clk)
	clk.Add(30 * time.Second)
	code, _ := totp.GenerateCode(secret, clk.Now())

	const (
		missing = "two-step verification: send the code from the authenticator app (or a recovery code) as auth_code"
		wrong   = "the two-step code is wrong, expired or already used; send the current code from the authenticator app as auth_code"
	)
	status, body := f.oauthPost("/oauth/token", passwordForm())
	tsExactBody(t, status, body, 401, map[string]string{"error": "missing_totp", "two_step_mode": "authenticator", "error_description": missing})
	// A wrong password says nothing of two-step verification.
	status, body = f.oauthPost("/oauth/token", passwordForm("password", "wrong password"))
	wantError(t, status, body, 400, "invalid_grant")
	status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", "000000"))
	tsExactBody(t, status, body, 401, map[string]string{"error": "invalid_totp", "two_step_mode": "authenticator", "error_description": wrong})
	tr := f.grant(passwordForm("auth_code", code))
	// Replayed: the same code in the same step.
	status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", code))
	tsExactBody(t, status, body, 401, map[string]string{"error": "invalid_totp", "two_step_mode": "authenticator", "error_description": wrong})
	// The refresh grant needs no code.
	f.grant(refreshForm(tr.RefreshToken))
	// A recovery code instead of a code, once.
	f.grant(passwordForm("auth_code", recovery[0]))
	// A right code clears the count; then the third failure in a row
	// locks: 403 account_locked, and the right password and code are
	// refused until the lock ends.
	for i, c := range []string{recovery[0], "111111", "222222"} {
		status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", c))
		if i < 2 {
			wantError(t, status, body, 401, "invalid_totp")
			continue
		}
		wantError(t, status, body, 403, "account_locked")
	}
	clk.Add(30 * time.Second)
	code, _ = totp.GenerateCode(secret, clk.Now())
	status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", code))
	wantError(t, status, body, 403, "account_locked")
	if !strings.Contains(f.logs.String(), "two-step code refused") || strings.Contains(f.logs.String(), recovery[0]) {
		t.Errorf("log:\n%s", f.logs)
	}
	if n := tsMetric(t, f.reg, "berth_two_step_failures_total", `mode="authenticator",reason="replayed"`); n != 1 {
		t.Errorf("replayed failures: %v", n)
	}
}

// tsMetric reads one series of the fixture's registry.
func tsMetric(t *testing.T, reg *prometheus.Registry, name, labels string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var parts []string
			for _, l := range m.GetLabel() {
				parts = append(parts, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			if strings.Join(parts, ",") == labels {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no series %s{%s}", name, labels)
	return 0
}

// TestTwoStepSMSGrant: for sms the code is sent with missing_totp.
func TestTwoStepSMSGrant(t *testing.T) {
	f := twoStepFixture(t)
	box := f.box
	path := fmt.Sprintf("/api/2/person/%d/two_step/", f.person.ID)
	status, body := f.twoStepPost(f.token, path+"enroll", url.Values{"mode": {"sms"}, "phone": {"+1 (555) 010-9999"}, "current_password": {fixturePassword}})
	if status != 200 || !strings.Contains(string(body), `"sent_to":"+15550109999"`) || !strings.Contains(string(body), `"otpauth_uri":null`) {
		t.Fatalf("enroll: %d %s", status, body)
	}
	status, body = f.twoStepPost(f.token, path+"confirm", url.Values{"auth_code": {box.last(t).Code}})
	if status != 200 {
		t.Fatalf("confirm: %d %s", status, body)
	}
	status, body = f.oauthPost("/oauth/token", passwordForm())
	tsExactBody(t, status, body, 401, map[string]string{"error": "missing_totp", "two_step_mode": "sms",
		"error_description": "two-step verification: send the code sent by text message (or a recovery code) as auth_code"})
	m := box.last(t)
	if m.Purpose != account.CodeSignIn || m.To != "+15550109999" {
		t.Fatalf("message %+v", m)
	}
	status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", "999999"))
	wantError(t, status, body, 401, "invalid_totp")
	f.grant(passwordForm("auth_code", m.Code))
	status, body = f.oauthPost("/oauth/token", passwordForm("auth_code", m.Code))
	wantError(t, status, body, 401, "invalid_totp")

	status, body = f.get(path[:len(path)-1])
	if status != 200 || !strings.Contains(string(body), `"two_step_mode":"sms"`) || !strings.Contains(string(body), `"recovery_codes_left":10`) {
		t.Fatalf("status: %d %s", status, body)
	}
}

// TestTwoStepRoutesInput: every bad input gets a clear error.
func TestTwoStepRoutesInput(t *testing.T) {
	f := twoStepFixture(t)
	path := fmt.Sprintf("/api/2/person/%d/two_step/", f.person.ID)
	for _, c := range []struct {
		name, route string
		form        url.Values
		status      int
		code, desc  string
	}{
		{"no mode", "enroll", nil, 400, "invalid_request", `missing parameter "mode"`},
		{"unknown mode", "enroll", url.Values{"mode": {"pigeon"}, "current_password": {fixturePassword}}, 400, "invalid_request", "mode: must be authenticator, email or sms"},
		{"sms without phone", "enroll", url.Values{"mode": {"sms"}, "current_password": {fixturePassword}}, 400, "invalid_request", "phone: "},
		{"confirm without code", "confirm", nil, 400, "invalid_request", `missing parameter "auth_code"`},
		{"confirm without enrollment", "confirm", url.Values{"auth_code": {"123456"}}, 400, "invalid_request", "code: no enrollment"},
		// The token alone does not make or remove a credential: the
		// current password again (a stolen token would otherwise
		// put the thief's second factor on the account, or take it off).
		{"enroll without current_password", "enroll", url.Values{"mode": {"authenticator"}}, 400, "invalid_request", "current_password is required to set up two-step verification"},
		{"enroll with a wrong current_password", "enroll", url.Values{"mode": {"authenticator"}, "current_password": {"not the password"}}, 403, "forbidden", "current_password is wrong"},
		{"disable without current_password", "disable", nil, 400, "invalid_request", "current_password is required to turn off two-step verification"},
		{"recovery codes without current_password", "recovery_codes", nil, 400, "invalid_request", "current_password is required to make new recovery codes"},
		{"recovery codes without two-step", "recovery_codes", url.Values{"current_password": {fixturePassword}}, 400, "invalid_request", "mode: two-step verification is not enabled"},
		// A password in a URL ends up in logs and histories.
		{"enroll with current_password in the URL", "enroll?current_password=" + url.QueryEscape(fixturePassword), url.Values{"mode": {"authenticator"}}, 400, "invalid_request", "current_password is taken from the request body only"},
		{"disable with current_password in the URL", "disable?current_password=" + url.QueryEscape(fixturePassword), nil, 400, "invalid_request", "current_password is taken from the request body only"},
		{"recovery codes with current_password in the URL", "recovery_codes?current_password=" + url.QueryEscape(fixturePassword), nil, 400, "invalid_request", "current_password is taken from the request body only"},
	} {
		status, body := f.twoStepPost(f.token, path+c.route, c.form)
		wantError(t, status, body, c.status, c.code)
		var e errorBody
		decode(t, body, &e)
		if !strings.Contains(e.Description, c.desc) {
			t.Errorf("%s: %s", c.name, body)
		}
	}
	// A code in the URL is refused.
	status, body := f.twoStepPost(f.token, path+"confirm?auth_code=123456", nil)
	wantError(t, status, body, 400, "invalid_request")
	// A text message to a number of one's choosing, again at once, is
	// not sent: 429 with how long to wait.
	sms := url.Values{"mode": {"sms"}, "phone": {"+41446681800"}, "current_password": {fixturePassword}}
	if status, body := f.twoStepPost(f.token, path+"enroll", sms); status != http.StatusOK {
		t.Fatalf("sms enrollment: %d %s", status, body)
	}
	sms.Set("phone", "+41446681801")
	resp := f.request(http.MethodPost, path+"enroll", f.token, strings.NewReader(sms.Encode()), http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	status, body = f.readAll(resp)
	wantError(t, status, body, http.StatusTooManyRequests, "too_many_attempts")
	if ra := resp.Header.Get("Retry-After"); ra != "30" || !strings.Contains(string(body), "wait less than a minute") || len(f.box.msgs) != 1 {
		t.Errorf("sms enrollment again: Retry-After %q, %s, %d sent", ra, body, len(f.box.msgs))
	}
}

// TestTwoStepRequired: under require_two_step_auth a person who has not
// enrolled signs in, but every route but enrollment is 403 until they do.
func TestTwoStepRequired(t *testing.T) {
	f := twoStepFixture(t)
	clk := f.clk
	ctx := context.Background()
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
		t.Fatal(err)
	}
	tr := f.grant(passwordForm())
	f.token = tr.AccessToken
	status, body := f.get(f.at("/api/2/files/%d/folder/0"))
	tsExactBody(t, status, body, 403, map[string]string{"error": "forbidden",
		"error_description": "the organization's policy requires two-step verification: enroll first (POST /api/2/person/<id>/two_step/enroll, then .../two_step/confirm)"})
	if status, body := f.get("/api/2/person"); status != 200 {
		t.Fatalf("self: %d %s", status, body)
	}
	status, body = f.twoStepPost(f.token, fmt.Sprintf("/api/2/person/%d/two_step/disable", f.person.ID), url.Values{"current_password": {fixturePassword}})
	wantError(t, status, body, 403, "forbidden")
	secret, _ := f.enrollAuthenticator(t, clk)
	if status, body := f.get(f.at("/api/2/files/%d/folder/0")); status == 403 {
		t.Fatalf("after enrolling: %d %s", status, body)
	}
	// Enrolled under the policy, the person cannot turn it off.
	status, body = f.twoStepPost(f.token, fmt.Sprintf("/api/2/person/%d/two_step/disable", f.person.ID), url.Values{"current_password": {fixturePassword}})
	wantError(t, status, body, 403, "forbidden")
	if !strings.Contains(string(body), "cannot be turned off") {
		t.Errorf("disable under the policy: %s", body)
	}
	// An administrator resets it; the next sign-in needs no code, and
	// enrollment is due again.
	admin, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "root", Email: "root@example.com", Password: fixturePassword, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	atoks, err := f.accounts.IssueTokens(ctx, admin.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The administrator must enroll too before acting.
	status, body = f.twoStepPost(atoks.AccessToken, fmt.Sprintf("/api/2/person/%d/two_step/reset", f.person.ID), nil)
	wantError(t, status, body, 403, "forbidden")
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error { p.RequireTwoStepAuth = false; return nil }); err != nil {
		t.Fatal(err)
	}
	clk.Add(30 * time.Second)
	code, _ := totp.GenerateCode(secret, clk.Now())
	f.grant(passwordForm("auth_code", code))
	status, body = f.twoStepPost(atoks.AccessToken, fmt.Sprintf("/api/2/person/%d/two_step/reset", f.person.ID), nil)
	if status != 200 {
		t.Fatalf("reset: %d %s", status, body)
	}
	f.grant(passwordForm())
}
