package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

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
