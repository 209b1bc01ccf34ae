package web_test

import (
	"context"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
)

// TestLogin signs in to a login_required link through the page's form:
// the form's CSRF token must come back with its cookie and from the same
// origin; only the creator or a subscriber gets a session.
func TestLogin(t *testing.T) {
	s := newSite(t)
	s.st.AddPerson(t, "bob", "another good password")
	_, u := s.link(t, s.file, share.LinkSettings{LoginRequired: ptr(true)})
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	body := readAll(t, resp)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `name="password"`) {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no csrf field: %s", body)
	}
	csrf := m[1]
	post := func(client *http.Client, form url.Values, origin, site string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, u+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, readAll(t, resp)
	}
	form := func(user, pw, tok string) url.Values {
		return url.Values{"username": {user}, "password": {pw}, "csrf": {tok}}
	}
	noJar := &http.Client{CheckRedirect: c.CheckRedirect}
	tests := []struct {
		name   string
		client *http.Client
		form   url.Values
		origin string
		site   string
		status int
		want   string
	}{
		{"no csrf field", c, form("alice", "correct horse battery", ""), "", "", 403, "Form expired"},
		{"wrong csrf field", c, form("alice", "correct horse battery", strings.Repeat("A", 24)), "", "", 403, "Form expired"},
		{"no csrf cookie", noJar, form("alice", "correct horse battery", csrf), "", "", 403, "Form expired"},
		{"other origin", c, form("alice", "correct horse battery", csrf), "https://evil.example", "", 403, "Form expired"},
		{"cross-site fetch", c, form("alice", "correct horse battery", csrf), "", "cross-site", 403, "Form expired"},
		{"wrong password, Origin null (no-referrer)", c, form("alice", "wrong", csrf), "null", "", 401, "Wrong username or password"},
		{"not shared with", c, form("bob", "another good password", csrf), "", "same-origin", 403, "not shared with you"},
		{"creator", c, form("alice", "correct horse battery", csrf), s.srv.URL, "same-origin", 303, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(tt.client, tt.form, tt.origin, tt.site)
			if resp.StatusCode != tt.status || !strings.Contains(body, tt.want) {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, tt.status, body)
			}
			if resp.Header.Get("Content-Security-Policy") == "" {
				t.Error("no CSP")
			}
		})
	}
	for path, want := range map[string]string{"": "report.pdf", "/download": fileBody} {
		resp, err := c.Get(u + path)
		if err != nil {
			t.Fatal(err)
		}
		if body := readAll(t, resp); resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("%s signed in: %d %s", path, resp.StatusCode, body)
		}
	}
	// Without the session cookie it is the form again.
	if resp, _ := get(t, u); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no session: %d", resp.StatusCode)
	}
}

// TestPageSignOut: the sign-out form of a signed-in page (POST
// /s/<hash>/logout, CSRF as the sign-in's) ends the session of the
// link's cookie, stored session included, and clears the cookie. Walked
// as anonymous, another tenant's administrator, a plain person and an
// administrator of the creator's organization, each with a session of
// their own in the cookie, and as the person signed in: each ends their
// own session and no one else's. Forged forms end nothing. A sign-in
// past the person's session cap ends their least recently used session
// rather than being refused, as every sign-in does.
func TestPageSignOut(t *testing.T) {
	s := newSiteWith(t, berthtest.Options{Accounts: account.Options{MaxSessions: 3}})
	ctx := context.Background()
	acc := s.st.Accounts
	l, u := s.link(t, s.file, share.LinkSettings{LoginRequired: ptr(true)})
	other, err := acc.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	session := func(org uint64, username string, admin bool) string {
		t.Helper()
		p, err := acc.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: username, Email: username + "@example.com", Password: "correct horse battery", Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := acc.IssueTokens(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return toks.AccessToken
	}
	alive := func(tok string) bool {
		_, err := acc.AccessCaller(ctx, tok)
		return err == nil
	}

	// alice fills her cap with sessions of the API, then signs in on the
	// page: the oldest ends, the sign-in is let in.
	var api []string
	for range 3 {
		toks, err := acc.IssueTokens(ctx, s.alice.Person.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		api = append(api, toks.AccessToken)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, body := clientGet(t, c, u)
	csrf := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if resp.StatusCode != http.StatusUnauthorized || csrf == nil {
		t.Fatalf("page: %d %s", resp.StatusCode, body)
	}
	resp, body = postForm(t, c, u+"/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}, "csrf": {csrf[1]}}, "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in past the cap: %d %s", resp.StatusCode, body)
	}
	var page string
	for _, ck := range jar.Cookies(mustURL(t, u)) {
		if ck.Name == "berth_link" {
			page = ck.Value
		}
	}
	if page == "" || !alive(page) || alive(api[0]) || !alive(api[1]) || !alive(api[2]) {
		t.Fatalf("past the cap: page session %v, API sessions %v %v %v; want the oldest API session ended", alive(page), alive(api[0]), alive(api[1]), alive(api[2]))
	}
	resp, body = clientGet(t, c, u)
	if resp.StatusCode != 200 || !strings.Contains(body, `action="/s/`+l.Hash+`/logout"`) || !strings.Contains(body, `id="signout"`) {
		t.Fatalf("signed-in page without a sign-out form: %d %s", resp.StatusCode, body)
	}
	// The sign-in form of another tab, left open, sent again: the new
	// session replaces the cookie's, which ends rather than staying
	// stored for its hour and taking one of alice's devices' places.
	resp, body = postForm(t, c, u+"/login", url.Values{"username": {"alice"}, "password": {"correct horse battery"}, "csrf": {csrf[1]}}, "same-origin")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in again: %d %s", resp.StatusCode, body)
	}
	was := page
	for _, ck := range jar.Cookies(mustURL(t, u)) {
		if ck.Name == "berth_link" {
			page = ck.Value
		}
	}
	if page == was || !alive(page) || alive(was) || !alive(api[1]) || !alive(api[2]) {
		t.Fatalf("signed in again: new session %v, replaced session %v, API sessions %v %v; want the replaced one alone ended",
			alive(page), alive(was), alive(api[1]), alive(api[2]))
	}

	rows := []struct {
		name   string
		token  string // the session in the caller's cookie; "" none
		csrf   string // "" the form's own
		site   string
		status int
		ends   bool // the caller's session ends
	}{
		{"forged: no csrf", page, "-", "same-origin", 403, false},
		{"forged: another site", page, "", "cross-site", 403, false},
		{"anonymous", "", "", "same-origin", 303, false},
		{"another tenant's administrator", session(other.ID, "oadmin", true), "", "same-origin", 303, true},
		{"a plain person", session(s.st.Org.ID, "bob", false), "", "same-origin", 303, true},
		{"an administrator", session(s.st.Org.ID, "admin", true), "", "same-origin", 303, true},
		{"the person signed in", page, "", "same-origin", 303, true},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			j, _ := cookiejar.New(nil)
			cl := &http.Client{Jar: j, CheckRedirect: c.CheckRedirect}
			cookies := []*http.Cookie{{Name: "berth_csrf", Value: csrf[1], Path: "/s/"}}
			if row.token != "" {
				cookies = append(cookies, &http.Cookie{Name: "berth_link", Value: row.token, Path: "/s/" + l.Hash})
			}
			j.SetCookies(mustURL(t, u), cookies)
			form := url.Values{"csrf": {csrf[1]}}
			if row.csrf == "-" {
				form.Del("csrf")
			}
			resp, body := postForm(t, cl, u+"/logout", form, row.site)
			if resp.StatusCode != row.status {
				t.Fatalf("%d, want %d: %s", resp.StatusCode, row.status, body)
			}
			if row.status == 303 {
				if loc := resp.Header.Get("Location"); loc != "/s/"+l.Hash {
					t.Errorf("back to %q", loc)
				}
				cleared := false
				for _, ck := range resp.Cookies() {
					cleared = cleared || ck.Name == "berth_link" && ck.MaxAge < 0 && ck.Path == "/s/"+l.Hash
				}
				if !cleared {
					t.Errorf("the cookie is not cleared: %v", resp.Header.Values("Set-Cookie"))
				}
			}
			if row.token != "" && alive(row.token) == row.ends {
				t.Errorf("the caller's session alive %v, want ended %v", alive(row.token), row.ends)
			}
			if row.token != page && !alive(page) {
				t.Fatal("alice's page session ended by another's sign-out")
			}
		})
	}
	// Signed out, the page asks for the sign-in again; alice's other
	// sessions go on.
	if resp, _ := clientGet(t, c, u); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("after the sign-out: %d, want the sign-in form", resp.StatusCode)
	}
	if !alive(api[1]) || !alive(api[2]) {
		t.Error("the sign-out ended alice's other sessions")
	}
}

func clientGet(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

// postForm posts form to u with c, the Sec-Fetch-Site a browser would send.
func postForm(t *testing.T, c *http.Client, u string, form url.Values, site string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", site)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, readAll(t, resp)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
