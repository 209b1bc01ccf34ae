package rest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"berth/account"
	"berth/vfs"
)

// TestRouteAccess walks every route of the file system as each kind of
// caller, through share's one access API: the owner reaches their root;
// anyone without credentials gets 401 access_denied; a person of another
// organization, a plain person of the same one and the organization's
// administrator all get 404 not_found, the answer a root that does not
// exist gets, so no caller learns which roots exist (share.ErrNoRoot).
// Administrators manage persons, not their files: no root of another
// person is theirs to open.
func TestRouteAccess(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	d := f.mustMkdir(f.at("/api/2/files/%d/create_folder"), "D")
	fj := f.mustUpload(f.at("/api/2/files/%d/upload"), "f.txt", []byte("contents"))

	_, _, plain := f.addPerson("bob")
	root, err := f.fs.CreateRoot(ctx, "carol", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	admin := f.personToken(account.PersonInput{OrganizationID: f.org.ID, Username: "carol",
		Email: "carol@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	root, err = f.fs.CreateRoot(ctx, "dave", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	tenant := f.personToken(account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.com", Password: fixturePassword, Admin: true, RootID: root.ID})

	r, fi, fo := f.root.ID, fj.ID, d.ID
	// Each route with a request the owner may make; status is the owner's
	// answer.
	routes := []struct {
		method, path string
		form         url.Values
		status       int
	}{
		{"GET", fmt.Sprintf("/api/2/files/%d", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/search?query=f", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/modified_since?since=2024-01-01T00:00:00", r), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/create_folder", r), url.Values{"name": {"E"}}, 200},
		{"UPLOAD", fmt.Sprintf("/api/2/files/%d/upload", r), nil, 200},
		{"UPLOAD", fmt.Sprintf("/api/2/files/%d/folder/%d/upload", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/lock", r), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/unlock", r), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/%d", r, fi), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/%d/download", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/lock", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/unlock", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/rename", r, fi), url.Values{"name": {"g.txt"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/move", r, fi), url.Values{"folder_id": {fmt.Sprint(fo)}}, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/folder/%d", r, fo), nil, 200},
		{"GET", fmt.Sprintf("/api/2/files/%d/folder/%d/download", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/create_folder", r, fo), url.Values{"name": {"F"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/lock", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/unlock", r, fo), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/rename", r, fo), url.Values{"name": {"D2"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/move", r, fo), url.Values{"folder_id": {"0"}, "name": {"D3"}}, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/%d/delete", r, fi), nil, 200},
		{"POST", fmt.Sprintf("/api/2/files/%d/folder/%d/delete", r, fo), nil, 200},
	}
	callers := []struct {
		name, token string
		status      int
		code        string
	}{
		{"anonymous", "", http.StatusUnauthorized, "access_denied"},
		{"a bad token", "not-a-token", http.StatusUnauthorized, "access_denied"},
		{"another organization", tenant, http.StatusNotFound, "not_found"},
		{"a plain person of the organization", plain, http.StatusNotFound, "not_found"},
		{"the organization's administrator", admin, http.StatusNotFound, "not_found"},
	}
	for _, rt := range routes {
		for _, c := range callers {
			st, body := f.send(rt.method, rt.path, c.token, rt.form)
			if st != c.status || !strings.Contains(string(body), `"error":"`+c.code+`"`) {
				t.Errorf("%s %s as %s: %d %s, want %d %s", rt.method, rt.path, c.name, st, body, c.status, c.code)
			}
		}
		// The owner last, so the others saw every item as it was.
		if st, body := f.send(rt.method, rt.path, f.token, rt.form); st != rt.status {
			t.Errorf("%s %s as the owner: %d %s, want %d", rt.method, rt.path, st, body, rt.status)
		}
	}
}

// personToken creates a person from in and returns an access token of
// theirs.
func (f *fixture) personToken(in account.PersonInput) string {
	f.t.Helper()
	p, err := f.accounts.CreatePerson(context.Background(), in)
	if err != nil {
		f.t.Fatal(err)
	}
	toks, err := f.accounts.IssueTokens(context.Background(), p.ID, 0)
	if err != nil {
		f.t.Fatal(err)
	}
	return toks.AccessToken
}

// send makes a request as the holder of token ("" for none), with form as
// its body when it is a POST, and returns status and body. The method
// UPLOAD is a POST of a small file named up.txt.
func (f *fixture) send(method, path, token string, form url.Values) (int, []byte) {
	f.t.Helper()
	h := http.Header{}
	var body io.Reader
	switch method {
	case "UPLOAD":
		var ct string
		body, ct = multipartBody("up.txt", strings.NewReader("up"))
		h.Set("Content-Type", ct)
		method = http.MethodPost
	case http.MethodPost:
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		body = strings.NewReader(form.Encode())
	}
	return f.readAll(f.request(method, path, token, body, h))
}
