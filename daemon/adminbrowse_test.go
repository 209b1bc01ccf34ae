package daemon

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/vfs"
)

// TestAdminBrowseOwnPolicy: an administrator reads a person's root only
// where both the policy of the person's organization and the
// administrator's own organization's have admin_browse_files. Before,
// only the former counted: a child's administrator whom the parent
// withheld it from made a grandchild over REST, turned it on there
// (the grandchild's policy is theirs to set) and read its persons'
// roots. WebDAV mounts no root an administrator only browses, before as
// now (share.Roots): it answers 404 for the root's folder to every
// administrator.
func TestAdminBrowseOwnPolicy(t *testing.T) {
	const password = "correct horse battery"
	ctx := context.Background()
	st := berthtest.New(t, berthtest.Options{})
	srv := httptest.NewTLSServer(authMux(st))
	t.Cleanup(srv.Close)
	// The parent (st.Org) lets its administrators browse; its child's
	// policy, which the parent's administrators set, withholds it.
	if _, err := st.Accounts.UpdatePolicy(ctx, st.Org.ID, func(p *account.Policy) error { p.AdminBrowseFiles = true; return nil }); err != nil {
		t.Fatal(err)
	}
	child, err := st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Child", ParentID: st.Org.ID})
	if err != nil {
		t.Fatal(err)
	}
	person := func(name string, org uint64, isAdmin bool) (account.Person, string) {
		t.Helper()
		p, err := st.Accounts.CreatePerson(ctx, account.PersonInput{
			OrganizationID: org, Username: name, Email: name + "@example.com", Password: password, Admin: isAdmin,
		})
		if err != nil {
			t.Fatal(err)
		}
		toks, err := st.Accounts.IssueTokens(ctx, p.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return p, toks.AccessToken
	}
	call := func(token, method, url string, form string) (int, string) {
		t.Helper()
		r, err := http.NewRequest(method, url, strings.NewReader(form))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Depth", "0") // for PROPFIND
		if form != "" {
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, parentTok := person("parentadm", st.Org.ID, true)
	_, childTok := person("childadm", child.ID, true)

	// The child's administrator makes a grandchild and turns
	// admin_browse_files on there, both over REST.
	status, body := call(childTok, http.MethodPost, fmt.Sprintf("%s/api/2/organization/%d/organizations/create", srv.URL, child.ID), "name=Grandchild")
	if status != http.StatusOK {
		t.Fatalf("grandchild: %d %s", status, body)
	}
	orgs, _, err := st.Accounts.ChildOrganizations(ctx, child.ID, 0, 10)
	if err != nil || len(orgs) != 1 {
		t.Fatalf("the child's organizations: %v %v", orgs, err)
	}
	grand := orgs[0]
	status, body = call(childTok, http.MethodPost, fmt.Sprintf("%s/api/2/organization/%d/policy/update", srv.URL, grand.ID), "admin_browse_files=true")
	if status != http.StatusOK {
		t.Fatalf("the grandchild's policy: %d %s", status, body)
	}
	gp, _ := person("grandperson", grand.ID, false)
	root, err := st.FS.CreateRoot(ctx, "grandperson", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Accounts.UpdatePerson(ctx, gp.ID, func(p *account.Person) error { p.RootID = root.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	_, grandTok := person("grandadm", grand.ID, true)

	for _, tt := range []struct {
		who   string
		token string
		rest  int // GET /api/2/files/<root>
	}{
		{"child admin, own policy withholds it", childTok, http.StatusNotFound},
		{"grandchild admin, own policy allows it", grandTok, http.StatusOK},
		{"parent admin, own policy allows it", parentTok, http.StatusOK},
	} {
		t.Run(tt.who, func(t *testing.T) {
			if got, body := call(tt.token, http.MethodGet, fmt.Sprintf("%s/api/2/files/%d", srv.URL, root.ID), ""); got != tt.rest {
				t.Errorf("REST: %d %s, want %d", got, body, tt.rest)
			}
			if got, body := call(tt.token, "PROPFIND", srv.URL+"/webdav/grandperson/", ""); got != http.StatusNotFound {
				t.Errorf("WebDAV: %d %s, want 404", got, body)
			}
		})
	}
}
