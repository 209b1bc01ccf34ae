package webdav_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/vfs"
)

// TestRouteAccess walks every WebDAV method over alice's mount as each
// kind of caller, through share's one access API: without credentials or
// with an unknown login the answer is 401 with a Basic challenge; a plain
// person of alice's organization, its administrator and a person of
// another organization see no mount of that name: each gets exactly the
// answer a mount that does not exist gets (404 to read, 409 to write
// below a missing parent; OPTIONS tells nothing either way), and alice's
// tree does not change; a COPY or MOVE from the caller's own mount into
// alice's lands nowhere. Only alice reaches her files.
func TestRouteAccess(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, p := range []string{"/f.txt", "/D/", "/D/g.txt"} {
		var st int
		if strings.HasSuffix(p, "/") {
			st, _, _ = f.do("MKCOL", p, nil)
		} else {
			st, _, _ = f.do("PUT", p, strings.NewReader("contents"))
		}
		want(t, "set-up "+p, st, http.StatusCreated, "")
	}
	f.addPerson("bob")
	root, err := f.fs.CreateRoot(ctx, "carol", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: f.org.ID, Username: "carol",
		Email: "carol@example.com", Password: password, Admin: true, RootID: root.ID}); err != nil {
		t.Fatal(err)
	}
	other, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Globex"})
	if err != nil {
		t.Fatal(err)
	}
	if root, err = f.fs.CreateRoot(ctx, "dave", vfs.RootSync); err != nil {
		t.Fatal(err)
	}
	if _, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: other.ID, Username: "dave",
		Email: "dave@example.com", Password: password, Admin: true, RootID: root.ID}); err != nil {
		t.Fatal(err)
	}

	base := f.srv.URL + "/webdav/alice"
	lock := `<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>`
	type request struct {
		method, path, body string
		hdr                []string
	}
	var sendTo func(base, user, pass string, rq request) (int, http.Header)
	unknown := 0
	requests := []request{
		{"OPTIONS", "/f.txt", "", nil},
		{"GET", "/f.txt", "", nil},
		{"HEAD", "/f.txt", "", nil},
		{"PROPFIND", "/", propfindAll, []string{"Depth", "1"}},
		{"PROPFIND", "/D/g.txt", "", []string{"Depth", "0"}},
		{"PROPPATCH", "/f.txt", proppatchBody("<Z:a>1</Z:a>"), nil},
		{"PUT", "/f.txt", "overwritten", nil},
		{"PUT", "/new.txt", "new", nil},
		{"MKCOL", "/E/", "", nil},
		{"COPY", "/f.txt", "", []string{"Destination", base + "/copy.txt"}},
		{"MOVE", "/D/g.txt", "", []string{"Destination", base + "/moved.txt"}},
		{"LOCK", "/f.txt", lock, nil},
		{"UNLOCK", "/f.txt", "", []string{"Lock-Token", "<urn:uuid:00000000-0000-0000-0000-000000000000>"}},
		{"DELETE", "/D/", "", nil},
	}
	callers := []struct {
		name, user, password string
		status               int
	}{
		{"anonymous", "", "", http.StatusUnauthorized},
		// A fresh unknown login each time: five failures lock a login,
		// known or not, and a locked one gets 403.
		{"an unknown login", "nobody", password, http.StatusUnauthorized},
		// 0: the answer the caller gets for a mount that does not exist.
		{"a plain person of the organization", "bob", password, 0},
		{"the organization's administrator", "carol", password, 0},
		{"another organization", "dave", password, 0},
	}
	send := func(user, pass string, rq request) (int, http.Header) {
		return sendTo(base, user, pass, rq)
	}
	sendTo = func(base, user, pass string, rq request) (int, http.Header) {
		req, err := http.NewRequest(rq.method, base+rq.path, strings.NewReader(rq.body))
		if err != nil {
			t.Fatal(err)
		}
		if user == "nobody" {
			unknown++
			user = fmt.Sprintf("nobody%d", unknown)
		}
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		for i := 0; i+1 < len(rq.hdr); i += 2 {
			req.Header.Set(rq.hdr[i], rq.hdr[i+1])
		}
		st, h, _ := f.send(req)
		return st, h
	}
	before := f.tree()
	for _, rq := range requests {
		for _, c := range callers {
			st, h := send(c.user, c.password, rq)
			wantStatus := c.status
			if wantStatus == 0 {
				nowhere := rq
				nowhere.hdr = slices.Clone(rq.hdr)
				for i := 0; i+1 < len(nowhere.hdr); i += 2 {
					nowhere.hdr[i+1] = strings.Replace(nowhere.hdr[i+1], "/webdav/alice/", "/webdav/nowhere/", 1)
				}
				wantStatus, _ = sendTo(f.srv.URL+"/webdav/nowhere", c.user, c.password, nowhere)
				if rq.method != "OPTIONS" && wantStatus < 400 {
					t.Errorf("%s %s of a missing mount as %s: %d", rq.method, rq.path, c.name, wantStatus)
				}
			}
			if st != wantStatus {
				t.Errorf("%s %s as %s: %d, want %d (a missing mount's answer)", rq.method, rq.path, c.name, st, wantStatus)
			}
			if c.status == http.StatusUnauthorized && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Basic ") {
				t.Errorf("%s %s as %s: no Basic challenge (%q)", rq.method, rq.path, c.name, h.Get("WWW-Authenticate"))
			}
		}
	}
	if after := f.tree(); after != before {
		t.Errorf("others' requests changed alice's tree:\n%s\nwas:\n%s", after, before)
	}
	// From one's own mount into alice's: the destination is a mount the
	// caller does not have.
	for _, c := range callers[2:] {
		for _, m := range []string{"COPY", "MOVE"} {
			rq := request{"PUT", "/x.txt", "mine", nil}
			mine := f.srv.URL + "/webdav/" + c.user
			req, _ := http.NewRequest(rq.method, mine+rq.path, strings.NewReader(rq.body))
			req.SetBasicAuth(c.user, c.password)
			if st, _, _ := f.send(req); st != http.StatusCreated && st != http.StatusNoContent {
				t.Fatalf("PUT into %s's own mount: %d", c.user, st)
			}
			req, _ = http.NewRequest(m, mine+"/x.txt", nil)
			req.SetBasicAuth(c.user, c.password)
			req.Header.Set("Destination", base+"/from-"+c.user+".txt")
			if st, _, _ := f.send(req); st < 400 {
				t.Errorf("%s from %s's mount into alice's: %d", m, c.name, st)
			}
			if _, err := f.lookup("/from-" + c.user + ".txt"); err == nil {
				t.Errorf("%s from %s's mount stored a file in alice's", m, c.name)
			}
		}
	}
	// Alice herself: every request is served.
	for _, rq := range requests {
		if st, _ := send("alice", password, rq); st >= 400 && !(rq.method == "UNLOCK" && st == http.StatusConflict) {
			t.Errorf("%s %s as alice: %d", rq.method, rq.path, st)
		}
	}
}

// tree describes every item of alice's root with its revision and dead
// properties, so a test sees any change to it.
func (f *fixture) tree() string {
	f.t.Helper()
	var b strings.Builder
	var walk func(p string)
	walk = func(p string) {
		n, err := f.lookup(p)
		if err != nil {
			f.t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s %s %d %v\n", p, n.ETag(), n.Size, f.props(p))
		if !n.Dir {
			return
		}
		children, _, err := f.fs.List(context.Background(), f.root.ID, n.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		for _, c := range children {
			walk(strings.TrimSuffix(p, "/") + "/" + c.Name)
		}
	}
	walk("/")
	return b.String()
}
