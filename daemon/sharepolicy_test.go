package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
)

// TestSharePolicyParity: a person of a child organization, subscribed to
// a share of the parent organization, gets the same answer to the same
// write over REST and over WebDAV. Both apply the share's policy (the
// owning organization's tightened by every ancestor's, share.Access.Policy),
// not the caller's own: before, WebDAV held LOCK (user_lock_files) and
// locked_extensions to the caller's policy and REST to the share's, so a
// child organization's stricter switch refused over WebDAV what REST let
// through (docs/api.md, "Choices where the spec is silent"). A child's
// administrator is held to the share's locked_extensions and
// user_lock_files like any subscriber: both front ends let them past,
// as if they administered the parent.
func TestSharePolicyParity(t *testing.T) {
	const password = "correct horse battery"
	type side int
	const (
		shares  side = iota // the parent, which owns the share
		callers             // the child, the subscriber's own
	)
	type op int
	const (
		overwrite op = iota // replace report.pdf, which has contents
		lock                // lock notes.txt
		upload              // upload tool.exe of 100 bytes
	)
	for _, tc := range []struct {
		name  string
		side  side
		set   func(p *account.Policy)
		op    op
		allow bool
		// childAdmin: the subscriber administers the child, which
		// makes them no administrator of the parent's share.
		childAdmin bool
	}{
		{"locked extension overwrite, share's side", shares, func(p *account.Policy) { p.LockedExtensions = ".pdf" }, overwrite, false, false},
		{"locked extension overwrite, caller's side", callers, func(p *account.Policy) { p.LockedExtensions = ".pdf" }, overwrite, true, false},
		{"LOCK, user_lock_files off on the share's side", shares, func(p *account.Policy) { p.UserLockFiles = false }, lock, false, false},
		{"LOCK, user_lock_files off on the caller's side", callers, func(p *account.Policy) { p.UserLockFiles = false }, lock, true, false},
		{"excluded extension, share's side", shares, func(p *account.Policy) { p.ExcludedExtensions = ".exe" }, upload, false, false},
		{"excluded extension, caller's side", callers, func(p *account.Policy) { p.ExcludedExtensions = ".exe" }, upload, true, false},
		{"max_file_size, share's side", shares, func(p *account.Policy) { p.MaxFileSize = 10 }, upload, false, false},
		{"max_file_size, caller's side", callers, func(p *account.Policy) { p.MaxFileSize = 10 }, upload, true, false},
		{"locked extension overwrite by a child's administrator, share's side", shares, func(p *account.Policy) { p.LockedExtensions = ".pdf" }, overwrite, false, true},
		{"LOCK by a child's administrator, user_lock_files off on the share's side", shares, func(p *account.Policy) { p.UserLockFiles = false }, lock, false, true},
	} {
		for _, front := range []string{"rest", "webdav"} {
			t.Run(tc.name+"/"+front, func(t *testing.T) {
				ctx := context.Background()
				st := berthtest.New(t, berthtest.Options{})
				srv := httptest.NewTLSServer(authMux(st))
				t.Cleanup(srv.Close)
				svc := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
				child, err := st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Child", ParentID: st.Org.ID})
				if err != nil {
					t.Fatal(err)
				}
				person := func(name string, org uint64, admin bool) account.Caller {
					t.Helper()
					p, err := st.Accounts.CreatePerson(ctx, account.PersonInput{
						OrganizationID: org, Username: name, Email: name + "@example.com", Password: password, Admin: admin,
					})
					if err != nil {
						t.Fatal(err)
					}
					c, err := st.Accounts.Caller(ctx, p.ID)
					if err != nil {
						t.Fatal(err)
					}
					return c
				}
				admin, member := person("parentadm", st.Org.ID, true), person("member", child.ID, tc.childAdmin)
				root, err := svc.CreateOrgShare(ctx, admin, st.Org.ID, "Team")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := svc.SetSubscribers(ctx, admin, st.Org.ID, root.ID, share.Subscribers{
					Persons: []share.Entry{{ID: member.Person.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator}},
				}); err != nil {
					t.Fatal(err)
				}
				seed := map[string]vfs.Node{}
				for _, name := range []string{"report.pdf", "notes.txt"} {
					n, err := st.FS.WriteFile(ctx, root.ID, root.FolderID, name, strings.NewReader("first"), vfs.WriteOptions{})
					if err != nil {
						t.Fatal(err)
					}
					seed[name] = n
				}
				org := st.Org.ID
				if tc.side == callers {
					org = child.ID
				}
				if _, err := st.Accounts.UpdatePolicy(ctx, org, func(p *account.Policy) error { tc.set(p); return nil }); err != nil {
					t.Fatal(err)
				}
				toks, err := st.Accounts.IssueTokens(ctx, member.Person.ID, 0)
				if err != nil {
					t.Fatal(err)
				}

				var r *http.Request
				switch front {
				case "rest":
					api := fmt.Sprintf("%s/api/2/files/%d", srv.URL, root.ID)
					switch tc.op {
					case overwrite:
						r = restUpload(t, api+"/upload", "report.pdf", 100)
					case upload:
						r = restUpload(t, api+"/upload", "tool.exe", 100)
					case lock:
						r, _ = http.NewRequest(http.MethodPost, fmt.Sprintf("%s/%d/lock", api, seed["notes.txt"].ID), nil)
					}
					r.Header.Set("Authorization", "Bearer "+toks.AccessToken)
				case "webdav":
					dav := srv.URL + "/webdav/Team/"
					switch tc.op {
					case overwrite:
						r, _ = http.NewRequest(http.MethodPut, dav+"report.pdf", bytes.NewReader(make([]byte, 100)))
					case upload:
						r, _ = http.NewRequest(http.MethodPut, dav+"tool.exe", bytes.NewReader(make([]byte, 100)))
					case lock:
						r, _ = http.NewRequest("LOCK", dav+"notes.txt", strings.NewReader(`<?xml version="1.0" encoding="utf-8"?>`+
							`<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`))
						r.Header.Set("Content-Type", "application/xml")
					}
					r.SetBasicAuth(member.Person.Username, password)
				}
				resp, err := srv.Client().Do(r)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if allowed := resp.StatusCode < 300; allowed != tc.allow {
					t.Errorf("%s: %d %s, want allowed %v", r.Method, resp.StatusCode, body, tc.allow)
				}
			})
		}
	}
}

// restUpload is a REST upload to url of size zero bytes named name.
func restUpload(t *testing.T, url, name string, size int) *http.Request {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	part.Write(make([]byte, size))
	mw.Close()
	r, err := http.NewRequest(http.MethodPost, url, &b)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", mw.FormDataContentType())
	return r
}
