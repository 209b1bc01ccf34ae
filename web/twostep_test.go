package web_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"berth/account"
	"berth/share"
)

// TestLoginTwoStep: the share-link sign-in is no way around two-step
// verification: the form takes the code (auth_code), and a person who
// must enroll first gets no session.
func TestLoginTwoStep(t *testing.T) {
	ctx := context.Background()
	s := newSite(t)
	accounts := s.st.Accounts
	id := s.alice.Person.ID
	en, err := accounts.EnrollTwoStep(ctx, id, account.TwoStepAuthenticator, "")
	if err != nil {
		t.Fatal(err)
	}
	code, _ := totp.GenerateCode(en.Secret, time.Now())
	recovery, err := accounts.ConfirmTwoStep(ctx, id, code)
	if err != nil {
		t.Fatal(err)
	}
	_, u := s.link(t, s.file, share.LinkSettings{LoginRequired: ptr(true)})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if !strings.Contains(body, `name="auth_code"`) {
		t.Fatalf("no code field: %s", body)
	}
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)[1]
	post := func(authCode string) (int, string) {
		f := url.Values{"username": {"alice"}, "password": {"correct horse battery"}, "csrf": {csrf}, "auth_code": {authCode}}
		req, _ := http.NewRequest(http.MethodPost, u+"/login", strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, readAll(t, resp)
	}
	for _, tc := range []struct {
		name, code string
		status     int
		want       string
	}{
		{"no code", "", 401, "enter your password again with the code from your authenticator app"},
		{"wrong code", "000000", 401, "The two-step code is wrong, expired or already used."},
		{"a recovery code", recovery[0], 303, ""},
		{"the recovery code again", recovery[0], 401, "wrong, expired or already used"},
	} {
		status, body := post(tc.code)
		if status != tc.status || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %s", tc.name, status, body)
		}
	}
	// Under require_two_step_auth, a person not enrolled gets no session.
	if err := accounts.ResetTwoStep(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.UpdatePolicy(ctx, s.alice.Person.OrganizationID, func(p *account.Policy) error { p.RequireTwoStepAuth = true; return nil }); err != nil {
		t.Fatal(err)
	}
	// Nor does the session a sign-in before the policy gave: the page
	// asks for a sign-in again, as the API refuses its token.
	resp, err = c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	if body := readAll(t, resp); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="password"`) {
		t.Errorf("session from before the policy: %d %s", resp.StatusCode, body)
	}
	if status, body := post(""); status != 403 || !strings.Contains(body, "requires two-step verification") {
		t.Errorf("not enrolled under the policy: %d %s", status, body)
	}
}
