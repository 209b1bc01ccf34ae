package webdav_test

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
	"berth/webdav"
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
		owner              int // alice's answer; 0: any success
	}
	var sendTo func(base, user, pass string, rq request) (int, http.Header)
	unknown := 0
	requests := []request{
		{"OPTIONS", "/f.txt", "", nil, 0},
		{"GET", "/f.txt", "", nil, 0},
		{"HEAD", "/f.txt", "", nil, 0},
		{"PROPFIND", "/", propfindAll, []string{"Depth", "1"}, 0},
		{"PROPFIND", "/D/g.txt", "", []string{"Depth", "0"}, 0},
		{"PROPPATCH", "/f.txt", proppatchBody("<Z:a>1</Z:a>"), nil, 0},
		{"PUT", "/f.txt", "overwritten", nil, 0},
		{"PUT", "/new.txt", "new", nil, 0},
		{"MKCOL", "/E/", "", nil, 0},
		{"COPY", "/f.txt", "", []string{"Destination", base + "/copy.txt"}, 0},
		{"MOVE", "/D/g.txt", "", []string{"Destination", base + "/moved.txt"}, 0},
		{"LOCK", "/f.txt", lock, nil, 0},
		{"UNLOCK", "/f.txt", "", []string{"Lock-Token", "<urn:uuid:00000000-0000-0000-0000-000000000000>"}, 0},
		// Conditions come after access: a stranger learns nothing of an
		// ETag from a 412 or 400 that alice alone gets.
		{"PROPFIND", "/f.txt", propfindAll, []string{"Depth", "0", "If-Match", `"x"`}, http.StatusPreconditionFailed},
		{"PROPFIND", "/D/", propfindAll, []string{"Depth", "1", "If-None-Match", "*"}, http.StatusPreconditionFailed},
		{"PROPPATCH", "/f.txt", proppatchBody("<Z:a>2</Z:a>"), []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
		{"PUT", "/f.txt", "conditional", []string{"If-None-Match", "x"}, http.StatusBadRequest},
		{"LOCK", "/f.txt", lock, []string{"If-Match", `"x"`}, http.StatusPreconditionFailed},
		{"UNLOCK", "/f.txt", "", []string{"Lock-Token", "<urn:uuid:00000000-0000-0000-0000-000000000000>", "If-Match", `"x"`}, http.StatusPreconditionFailed},
		{"MOVE", "/D/", "", []string{"If-Match", `"x"`, "Destination", base + "/D4/"}, http.StatusPreconditionFailed},
		{"DELETE", "/D/", "", []string{"If-Unmodified-Since", "Mon, 01 Jan 2001 00:00:00 GMT"}, http.StatusPreconditionFailed},
		{"DELETE", "/D/", "", nil, 0},
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
			rq := request{"PUT", "/x.txt", "mine", nil, 0}
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
	// Alice herself: every request is served, or refused for its
	// condition alone.
	for _, rq := range requests {
		st, _ := send("alice", password, rq)
		if rq.owner != 0 && st != rq.owner || rq.owner == 0 && st >= 400 && !(rq.method == "UNLOCK" && st == http.StatusConflict) {
			t.Errorf("%s %s %v as alice: %d", rq.method, rq.path, rq.hdr, st)
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

// TestRevocationUnderFileWrites: what revokes a caller, or lowers what
// their session reaches, refuses their very next WebDAV request although
// only other people's file writes come between. File writes leave
// kv.MetaGeneration alone, and with it the remembered login, the device
// password's answer and the session's mounts (mountCache); the change
// must not. Each row: alice's requests are let in, twice, file writes,
// the change, file writes, then the same requests are refused, twice,
// while others' requests a row names go on being let in. File writes
// come between every two rounds, and move the clock of remembered Basic
// logins by 40 s: the first request after the change finds alice's main
// password remembered by use for 120 s, longer than one unused would be
// (90 s), so the rows check that such a login is refused at once too.
func TestRevocationUnderFileWrites(t *testing.T) {
	ctx := context.Background()
	const propfind = `<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:resourcetype/></D:prop></D:propfind>`
	type probe struct {
		method, path, body string
		device             bool   // with alice's device password, not her main one
		user               string // "": alice
		depth              string // a PROPFIND's; "": 0
	}
	// check is a probe and its status after the change.
	type check struct {
		probe
		status int
	}
	var (
		ownDir   = probe{method: "PROPFIND", path: "/webdav/alice/", body: propfind}
		shareGet = probe{method: "GET", path: "/webdav/Team/a.txt"}
		sharePut = probe{method: "PUT", path: "/webdav/Team/b.txt", body: "b"}
		device   = probe{method: "PROPFIND", path: "/webdav/alice/", body: propfind, device: true}
		// What a share taken away answers, beside shareGet: its name is
		// what a name that is no mount gets, 404 to read, 409 to write
		// below it. bob, a subscriber himself, keeps it, and alice her
		// own root.
		shareGone = []check{
			{probe{method: "PROPFIND", path: "/webdav/Team/", body: propfind, depth: "1"}, http.StatusNotFound},
			{sharePut, http.StatusConflict},
			{probe{method: "GET", path: "/webdav/Team/a.txt", user: "bob"}, http.StatusOK},
			{ownDir, http.StatusMultiStatus},
		}
	)
	policy := func(fn func(*account.Policy)) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdatePolicy(ctx, w.f.org.ID, func(p *account.Policy) error { fn(p); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	subscribe := func(channel, role string) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			subs := share.Subscribers{Persons: []share.Entry{{ID: w.f.person.ID, Channel: channel, Role: role}}}
			if _, err := w.sh.SetSubscribers(ctx, w.admin, w.f.org.ID, w.share.ID, subs); err != nil {
				t.Fatal(err)
			}
		}
	}
	setRole := func(role string) func(*testing.T, *revokeWorld) { return subscribe(share.ChannelWebDAV, role) }
	// withBob subscribes bob beside alice, or beside a group of hers.
	withBob := func(t *testing.T, w *revokeWorld, subs share.Subscribers) {
		subs.Persons = append(subs.Persons, share.Entry{ID: w.bob.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator})
		if _, err := w.sh.SetSubscribers(ctx, w.admin, w.f.org.ID, w.share.ID, subs); err != nil {
			t.Fatal(err)
		}
	}
	// viaGroup gives the share to a group of alice's instead of to her.
	viaGroup := func(t *testing.T, w *revokeWorld) {
		var err error
		if w.group, err = w.f.accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.f.org.ID, Name: "Team members"}); err != nil {
			t.Fatal(err)
		}
		if _, err := w.f.accounts.UpdateMembers(ctx, w.group.ID, account.MembersChange{AddPersons: []uint64{w.f.person.ID}}); err != nil {
			t.Fatal(err)
		}
		withBob(t, w, share.Subscribers{Groups: []share.Entry{{ID: w.group.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator}}})
	}
	setAdmin := func(v bool) func(*testing.T, *revokeWorld) {
		return func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdatePerson(ctx, w.f.person.ID, func(p *account.Person) error { p.Admin = v; return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	rows := []struct {
		name   string
		before func(*testing.T, *revokeWorld) // nil: none
		probe  probe
		change func(*testing.T, *revokeWorld)
		status int
		also   []check // further requests, alice's or others'
	}{
		{"password changed", nil, ownDir, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.SetPassword(ctx, w.f.person.ID, "another horse battery"); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, nil},
		{"person disabled", nil, ownDir, func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdatePerson(ctx, w.f.person.ID, func(p *account.Person) error { p.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, nil},
		{"password expired by the policy", nil, ownDir, policy(func(p *account.Policy) { always := "1ns"; p.ChangePasswordFrequency = &always }), http.StatusForbidden, nil},
		{"WebDAV turned off by the policy", nil, ownDir, policy(func(p *account.Policy) { p.WebDAVEnabled = false }), http.StatusForbidden, nil},
		{"WebDAV turned off by the policy, device password", nil, device, policy(func(p *account.Policy) { p.WebDAVEnabled = false }), http.StatusForbidden, nil},
		{"two-step verification required by the policy", nil, ownDir, policy(func(p *account.Policy) { p.RequireTwoStepAuth = true }), http.StatusForbidden, nil},
		{"organization disabled", nil, ownDir, func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdateOrganization(ctx, w.f.org.ID, func(o *account.Organization) error { o.Active = false; return nil }); err != nil {
				t.Fatal(err)
			}
		}, http.StatusForbidden, nil},
		{"enrolled in two-step verification", nil, ownDir, func(t *testing.T, w *revokeWorld) {
			en, err := w.f.accounts.EnrollTwoStep(ctx, w.f.person.ID, account.TwoStepAuthenticator, "")
			if err != nil {
				t.Fatal(err)
			}
			code, err := totp.GenerateCode(en.Secret, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.f.accounts.ConfirmTwoStep(ctx, w.f.person.ID, code); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, nil},
		{"device password revoked", nil, device, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.RevokeDevicePassword(ctx, w.f.person.ID, w.device.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, nil},
		{"machine deleted", nil, device, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.DeleteMachine(ctx, w.device.MachineID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusUnauthorized, nil},
		{"share lowered from write to read", nil, sharePut, setRole(share.RoleViewer), http.StatusForbidden, nil},
		{"share's channel no longer webdav", nil, shareGet, subscribe(share.ChannelWeb, share.RoleCollaborator), http.StatusNotFound, nil},
		{"administrator role removed, a viewer of the share", func(t *testing.T, w *revokeWorld) {
			setRole(share.RoleViewer)(t, w)
			setAdmin(true)(t, w)
		}, sharePut, setAdmin(false), http.StatusForbidden, nil},
		{"share deleted", nil, shareGet, func(t *testing.T, w *revokeWorld) {
			w.shareWrites = false
			if err := w.sh.DeleteOrgShare(ctx, w.admin, w.f.org.ID, w.share.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusNotFound, nil},
		{"share subscription removed", func(t *testing.T, w *revokeWorld) {
			withBob(t, w, share.Subscribers{Persons: []share.Entry{{ID: w.f.person.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator}}})
		}, shareGet, func(t *testing.T, w *revokeWorld) {
			withBob(t, w, share.Subscribers{})
		}, http.StatusNotFound, shareGone},
		{"removed from the group the share is given to", viaGroup, shareGet, func(t *testing.T, w *revokeWorld) {
			if _, err := w.f.accounts.UpdateMembers(ctx, w.group.ID, account.MembersChange{RemovePersons: []uint64{w.f.person.ID}}); err != nil {
				t.Fatal(err)
			}
		}, http.StatusNotFound, shareGone},
		{"the group the share is given to deleted", viaGroup, shareGet, func(t *testing.T, w *revokeWorld) {
			if err := w.f.accounts.DeleteGroup(ctx, w.group.ID); err != nil {
				t.Fatal(err)
			}
		}, http.StatusNotFound, shareGone},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newRevokeWorld(t)
			if row.before != nil {
				row.before(t, w)
			}
			send := func(p probe) (int, string) {
				req, err := http.NewRequest(p.method, w.f.srv.URL+p.path, strings.NewReader(p.body))
				if err != nil {
					t.Fatal(err)
				}
				pw := password
				if p.device {
					pw = w.deviceSecret
				}
				req.SetBasicAuth(cmp.Or(p.user, "alice"), pw)
				if p.method == "PROPFIND" {
					req.Header.Set("Depth", cmp.Or(p.depth, "0"))
				}
				st, _, b := w.f.send(req)
				return st, b
			}
			checks := append([]check{{row.probe, row.status}}, row.also...)
			for i := range 2 {
				w.writes(t)
				for _, c := range checks {
					if st, b := send(c.probe); st/100 != 2 {
						t.Fatalf("%s's %s %s before the change (%d): %d %s", cmp.Or(c.user, "alice"), c.method, c.path, i+1, st, b)
					}
				}
			}
			w.writes(t)
			first, _ := webdav.CredentialChecked(w.f.h, "alice", password)
			row.change(t, w)
			for i := range 2 {
				w.writes(t)
				if i == 0 && !row.probe.device {
					if at, ok := webdav.CredentialChecked(w.f.h, "alice", password); !ok || !at.Equal(first) || w.clock.Now().Sub(at) <= 90*time.Second {
						t.Fatalf("alice's login checked at %v (remembered %v), first at %v, now %v: not remembered by use past 90 s", at, ok, first, w.clock.Now())
					}
				}
				for _, c := range checks {
					st, b := send(c.probe)
					want(t, fmt.Sprintf("%s's %s %s after the change (%d)", cmp.Or(c.user, "alice"), c.method, c.path, i+1), st, c.status, b)
				}
			}
		})
	}
}

// revokeWorld is what TestRevocationUnderFileWrites revokes: alice, with
// a device password, a collaborator over WebDAV of an organization share
// (holding a.txt) that an administrator manages; bob writes files.
type revokeWorld struct {
	f            *fixture
	bob          account.Person
	group        account.Group // a group of alice's, where a row makes one
	sh           *share.Service
	admin        account.Caller
	share        vfs.Root
	bobRoot      vfs.Root
	device       account.DevicePassword
	deviceSecret string
	// shareWrites: files are still written into the share (not once it
	// is deleted).
	shareWrites bool
	// clock is the clock of remembered Basic logins; writes moves it.
	clock *berthtest.Clock
}

// writes are others' file writes, into bob's root and into the share:
// commits of file contents only, which leave MetaGeneration where it was.
func (w *revokeWorld) writes(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	w.clock.Add(40 * time.Second)
	meta := w.f.fs.MetaGeneration()
	roots := []vfs.Root{w.bobRoot}
	if w.shareWrites {
		roots = append(roots, w.share)
	}
	for _, r := range roots {
		opts := vfs.WriteOptions{Principal: "person:bob"}
		if _, err := w.f.fs.WriteFile(ctx, r.ID, r.FolderID, "bob.txt", strings.NewReader("bob"), opts); err != nil {
			t.Fatalf("a write into %s: %v", r.Name, err)
		}
	}
	if got := w.f.fs.MetaGeneration(); got != meta {
		t.Fatalf("file writes moved MetaGeneration from %d to %d: the row would not test the caches it means to", meta, got)
	}
}

func newRevokeWorld(t *testing.T) *revokeWorld {
	t.Helper()
	ctx := context.Background()
	w := &revokeWorld{f: newFixture(t), shareWrites: true, clock: berthtest.NewClock(time.Now())}
	webdav.SetCredentialClock(w.f.h, w.clock.Now)
	w.bob, w.bobRoot, _ = w.f.addPerson("bob")
	w.sh, w.admin, w.share = w.f.orgShare("Team")
	var err error
	subs := share.Subscribers{Persons: []share.Entry{{ID: w.f.person.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator}}}
	if _, err := w.sh.SetSubscribers(ctx, w.admin, w.f.org.ID, w.share.ID, subs); err != nil {
		t.Fatal(err)
	}
	if _, err := w.f.fs.WriteFile(ctx, w.share.ID, w.share.FolderID, "a.txt", strings.NewReader("a"), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if w.device, w.deviceSecret, err = w.f.accounts.CreateDevicePassword(ctx, w.f.person.ID, account.DevicePasswordInput{Name: "laptop"}); err != nil {
		t.Fatal(err)
	}
	return w
}
