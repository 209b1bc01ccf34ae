package webdav_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"berth/account"
	"berth/vfs"
)

// quotaPropfind asks for the RFC 4331 properties of the top of mount as
// login.
func (f *fixture) quotaPropfind(login, mount string) (used, available string) {
	f.t.Helper()
	req, err := http.NewRequest("PROPFIND", f.srv.URL+"/webdav/"+mount+"/",
		bytes.NewReader([]byte(`<D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/><D:quota-used-bytes/></D:prop></D:propfind>`)))
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth(login, password)
	req.Header.Set("Depth", "0")
	st, _, body := f.send(req)
	want(f.t, "quota PROPFIND", st, http.StatusMultiStatus, body)
	prop := func(name string) string {
		m := regexp.MustCompile(`<D:` + name + `>([0-9]+)</D:` + name + `>`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return m[1]
	}
	return prop("quota-used-bytes"), prop("quota-available-bytes")
}

// put stores n bytes at the dav path p of mount as login.
func (f *fixture) putAs(login, mount, p string, n int) (int, string) {
	f.t.Helper()
	req, err := http.NewRequest("PUT", f.srv.URL+"/webdav/"+mount+p, bytes.NewReader(make([]byte, n)))
	if err != nil {
		f.t.Fatal(err)
	}
	req.SetBasicAuth(login, password)
	st, _, body := f.send(req)
	return st, body
}

// TestQuotaOfTheSubtree: a parent's space_quota bounds a person of its
// child organization over WebDAV (507), counting what its whole subtree
// holds, and quota-available-bytes says what it leaves.
func TestQuotaOfTheSubtree(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	child, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: f.org.ID, Name: "Sales"})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: child.ID, Username: "bob",
		Email: "bob@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	tallies, err := f.accounts.RootTallies(ctx, bob, "sync")
	if err != nil {
		t.Fatal(err)
	}
	root, err := f.fs.CreateRootWith(ctx, "bob", vfs.RootSync, vfs.RootOptions{Tallies: tallies})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: bob.ID, Type: "sync"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.UpdatePolicy(ctx, f.org.ID, func(p *account.Policy) error {
		p.SpaceQuota = "10000"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if st, body := f.putAs("alice", "alice", "/a", 6000); st != http.StatusCreated {
		t.Fatalf("alice's PUT under the quota: %d %s", st, body)
	}
	if used, avail := f.quotaPropfind("bob", "bob"); used != "0" || avail != "4000" {
		t.Errorf("bob's quota properties: used %q, available %q; want 0 and 4000", used, avail)
	}
	if st, body := f.putAs("bob", "bob", "/b", 5000); st != http.StatusInsufficientStorage {
		t.Errorf("bob's PUT past the parent's quota: %d %s, want 507", st, body)
	}
	if u, _ := f.fs.Usage(ctx, root.ID); u.FileCount != 0 {
		t.Errorf("a refused PUT stored something: %+v", u)
	}
	if st, body := f.putAs("bob", "bob", "/b", 4000); st != http.StatusCreated {
		t.Fatalf("bob's PUT to the quota's last byte: %d %s", st, body)
	}
	if used, avail := f.quotaPropfind("bob", "bob"); used != "4000" || avail != "0" {
		t.Errorf("bob's quota properties when full: used %q, available %q; want 4000 and 0", used, avail)
	}
}

// TestQuotaAvailableAlwaysAnswered: without any quota, quota-available-bytes
// is the store's room, coarsened (vfs.FS.StoreRoom): a small upload, stored
// before or not, does not move it.
func TestQuotaAvailableAlwaysAnswered(t *testing.T) {
	f := newFixture(t)
	room, ok := f.fs.StoreRoom()
	if !ok {
		t.Fatal("the disk store cannot tell its room")
	}
	if room%(1<<30) != 0 {
		t.Errorf("StoreRoom = %d, not a multiple of 1 GiB", room)
	}
	used, avail := f.quotaPropfind("alice", "alice")
	if used != "0" || avail != strconv.FormatInt(room, 10) {
		t.Errorf("used %q, available %q; want 0 and %d", used, avail, room)
	}
	for i := range 3 {
		if st, body := f.putAs("alice", "alice", fmt.Sprint("/f", i), 70000); st != http.StatusCreated {
			t.Fatalf("PUT: %d %s", st, body)
		}
	}
	used, after := f.quotaPropfind("alice", "alice")
	if used != "210000" || after != avail {
		t.Errorf("after three uploads: used %q, available %q; want 210000 and %q", used, after, avail)
	}
}
