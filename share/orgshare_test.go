package share_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/share"
	"berth/vfs"

	"github.com/fxamacker/cbor/v2"
)

// shareWorld is Acme with an administrator, an organization share and a
// person for every relation to it.
type shareWorld struct {
	*world
	admin, viewer, collab, grouped, plain account.Caller
	root                                  vfs.Root
	group                                 account.Group
}

func newShareWorld(t *testing.T) *shareWorld {
	t.Helper()
	ctx := context.Background()
	w := &shareWorld{world: newWorld(t)}
	mk := func(name string, admin bool) account.Caller {
		p, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{
			OrganizationID: w.st.Org.ID, Username: name, Email: name + "@example.com", Password: password, Admin: admin,
		})
		if err != nil {
			t.Fatal(err)
		}
		return caller(t, w.st, p.ID)
	}
	w.admin, w.viewer, w.collab, w.grouped, w.plain = mk("adm", true), mk("viewer", false), mk("collab", false), mk("grouped", false), mk("plain", false)
	var err error
	w.root, err = w.svc.CreateOrgShare(ctx, w.admin, w.st.Org.ID, "Team")
	if err != nil {
		t.Fatal(err)
	}
	w.group, err = w.st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.st.Org.ID, Name: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Accounts.UpdateMembers(ctx, w.group.ID, account.MembersChange{AddPersons: []uint64{w.grouped.Person.ID, w.viewer.Person.ID}}); err != nil {
		t.Fatal(err)
	}
	inv, err := w.svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, share.Subscribers{
		Persons: []share.Entry{
			{ID: w.viewer.Person.ID, Channel: share.ChannelWeb, Role: share.RoleViewer},
			{ID: w.collab.Person.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator},
		},
		Groups:   []share.Entry{{ID: w.group.ID, Channel: share.ChannelWeb, Role: share.RoleViewer}},
		External: map[string]string{"Ext@Example.com": ""},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv) != 1 || inv[0].Email != "ext@example.com" || inv[0].Token == "" {
		t.Fatalf("invitations %+v", inv)
	}
	return w
}

func TestOrgShareAccess(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	for _, tc := range []struct {
		name   string
		c      account.Caller
		perms  share.Perm
		err    error
		listed bool
		dav    bool
	}{
		{"administrator", w.admin, share.Owner, nil, false, false},
		{"viewer", w.viewer, share.View | share.Read, nil, true, false},
		{"collaborator", w.collab, share.View | share.Read | share.Write | share.Delete, nil, true, true},
		{"through group", w.grouped, share.View | share.Read, nil, true, false},
		{"same org not subscribed", w.plain, 0, share.ErrNoRoot, false, false},
		{"other tenant", w.carol, 0, share.ErrNoRoot, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := w.svc.Root(ctx, tc.c, w.root.ID)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Root: %v, want %v", err, tc.err)
			}
			if err == nil {
				if a.Perms != tc.perms {
					t.Fatalf("perms %v, want %v", a.Perms, tc.perms)
				}
				if a.Opts.Principal != tc.c.Person.Principal() {
					t.Fatalf("principal %q", a.Opts.Principal)
				}
				for _, q := range a.Opts.Quotas {
					if q.Tally == account.TallyPerson(tc.c.Person.ID) {
						t.Fatalf("a share write is held to the subscriber's own quota")
					}
				}
				if a.WebDAV != tc.dav {
					t.Fatalf("WebDAV %v, want %v", a.WebDAV, tc.dav)
				}
			}
			all, err := w.svc.Roots(ctx, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			listed := false
			for _, a := range all {
				listed = listed || a.Root.ID == w.root.ID
			}
			if listed != tc.listed {
				t.Fatalf("listed %v, want %v", listed, tc.listed)
			}
		})
	}
}

// TestOrgShareGrantsKept: what a share's subscribers grant is kept
// between requests up to 2,048 subscriber entries (maxKeptSubscribers),
// and decoded at each request past them, so that the kept grants of 1,024
// shares hold 32 MiB at most however many subscribers a share has.
func TestOrgShareGrantsKept(t *testing.T) {
	ctx := context.Background()
	const most = 2048
	st, svc, admin, ps := widePersons(t, most+1)
	for _, tc := range []struct {
		subscribers int
		kept        bool
	}{{most, true}, {most + 1, false}} {
		root, err := svc.CreateOrgShare(ctx, admin, st.Org.ID, fmt.Sprint("share of ", tc.subscribers))
		if err != nil {
			t.Fatal(err)
		}
		var subs share.Subscribers
		for _, p := range ps[:tc.subscribers] {
			subs.Persons = append(subs.Persons, share.Entry{ID: p.ID, Channel: share.ChannelWeb, Role: share.RoleViewer})
		}
		if _, err := svc.SetSubscribers(ctx, admin, st.Org.ID, root.ID, subs); err != nil {
			t.Fatal(err)
		}
		member := caller(t, st, ps[0].ID)
		for i := range 2 {
			before := st.DB.TxnStats().Views
			if _, err := svc.Root(ctx, member, root.ID); err != nil {
				t.Fatal(err)
			}
			if views := st.DB.TxnStats().Views - before; i == 1 && (views == 0) != tc.kept {
				t.Errorf("%d subscribers, asked again: %d reads, want the grants kept %v", tc.subscribers, views, tc.kept)
			}
		}
	}
}

// TestOrgShareGroupDisabled: a group subscriber disabled reaches nobody
// from the next request on, though what a share grants is kept between
// requests, and reaches its members again once enabled.
func TestOrgShareGroupDisabled(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	for _, tc := range []struct {
		active bool
		err    error
	}{{true, nil}, {false, share.ErrNoRoot}, {true, nil}} {
		if _, err := w.st.Accounts.UpdateGroup(ctx, w.group.ID, account.GroupUpdate{Active: &tc.active}); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			before := w.st.DB.TxnStats().Views
			if _, err := w.svc.Root(ctx, w.grouped, w.root.ID); !errors.Is(err, tc.err) {
				t.Fatalf("group active %v: %v, want %v", tc.active, err, tc.err)
			}
			// Asked again, the share's grants and the group's state are
			// kept, and so is the root: nothing is read.
			if views := w.st.DB.TxnStats().Views - before; i == 1 && views > 0 {
				t.Fatalf("group active %v, asked again: %d reads, want none", tc.active, views)
			}
		}
	}
}

// TestOrgShareRootsGroupWalk: a person in many groups, reaching many
// shares through them, costs Roots (GET /api/2/person, each person of an
// organization listing, WebDAV's mounts) one walk of their groups, where
// each share's access check walked them all again: groups × shares scans.
func TestOrgShareRootsGroupWalk(t *testing.T) {
	const groups, shares = 60, 20
	ctx := context.Background()
	w := newShareWorld(t)
	var ids []uint64
	for i := range groups {
		g, err := w.st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.st.Org.ID, Name: fmt.Sprintf("g%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.st.Accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: []uint64{w.plain.Person.ID}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, g.ID)
	}
	for i := range shares {
		r, err := w.svc.CreateOrgShare(ctx, w.admin, w.st.Org.ID, fmt.Sprintf("s%d", i))
		if err != nil {
			t.Fatal(err)
		}
		subs := share.Subscribers{Groups: []share.Entry{{ID: ids[i*groups/shares], Channel: share.ChannelWeb, Role: share.RoleViewer}}}
		if _, err := w.svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, r.ID, subs); err != nil {
			t.Fatal(err)
		}
	}
	before := w.st.DB.TxnStats()
	all, err := w.svc.Roots(ctx, w.plain)
	if err != nil {
		t.Fatal(err)
	}
	scans := w.st.DB.TxnStats().Scans - before.Scans
	if len(all) != shares {
		t.Fatalf("%d roots, want %d", len(all), shares)
	}
	// Their subscriptions (a scan per group and their own) and their
	// groups (a scan per group and their own): about 2 × groups.
	if limit := uint64(2*groups + shares); scans > limit {
		t.Fatalf("Roots of a person in %d groups reaching %d shares: %d scans, want at most %d", groups, shares, scans, limit)
	}
	// A file written anywhere changes neither: the next Roots walks
	// nothing again (a busy server writes files many times a second).
	if _, err := w.st.FS.WriteFile(ctx, w.aliceRoot.ID, w.aliceRoot.FolderID, "a.txt", strings.NewReader("hello"), share.WriteOptions(w.alice)); err != nil {
		t.Fatal(err)
	}
	before = w.st.DB.TxnStats()
	if _, err := w.svc.Roots(ctx, w.plain); err != nil {
		t.Fatal(err)
	}
	if scans := w.st.DB.TxnStats().Scans - before.Scans; scans != 0 {
		t.Fatalf("Roots after a file write: %d scans, want 0", scans)
	}
}

// TestOrgShareAccessReads: a subscriber's request in a share of an
// organization four deep reads the share's subscribers and the root, and
// takes the quotas of the owning organization and its ancestors from
// where the root sits (account.RootPlace, kept between commits), where
// it read each organization of the chain again on every request.
func TestOrgShareAccessReads(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t)
	w.setPolicy(t, func(p *account.Policy) { p.SpaceQuota = "1000000" })
	org := w.st.Org.ID
	for _, name := range []string{"a", "b", "c"} {
		o, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: org, Name: name})
		if err != nil {
			t.Fatal(err)
		}
		org = o.ID
	}
	if _, err := w.st.Accounts.UpdatePolicy(ctx, org, func(p *account.Policy) error { p.SpaceQuota = "2000"; return nil }); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, admin bool) account.Caller {
		p, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org, Username: name, Email: name + "@example.com", Password: password, Admin: admin})
		if err != nil {
			t.Fatal(err)
		}
		return caller(t, w.st, p.ID)
	}
	admin, member := mk("adm", true), mk("member", false)
	root, err := w.svc.CreateOrgShare(ctx, admin, org, "Deep")
	if err != nil {
		t.Fatal(err)
	}
	subs := share.Subscribers{Persons: []share.Entry{{ID: member.Person.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}}}
	if _, err := w.svc.SetSubscribers(ctx, admin, org, root.ID, subs); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Root(ctx, member, root.ID); err != nil {
		t.Fatal(err)
	}
	before := w.st.DB.TxnStats()
	a, err := w.svc.Root(ctx, member, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if views := w.st.DB.TxnStats().Views - before.Views; views > 2 {
		t.Fatalf("a subscriber's access to a share four organizations deep: %d reads, want at most 2 (its subscribers, the root)", views)
	}
	var quotas []int64
	for _, q := range a.Opts.Quotas {
		quotas = append(quotas, q.Bytes)
	}
	if !slices.Equal(quotas, []int64{2000, 1000000}) {
		t.Fatalf("quotas %v, want the owner's 2000 and the top's 1000000", quotas)
	}
}

// A share's bytes count to the organization, and its quota holds a
// subscriber's writes; the subscriber's own quota does not.
func TestOrgShareQuota(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	w.setPolicy(t, func(p *account.Policy) { p.SpaceQuota = "1024" })
	c := caller(t, w.st, w.collab.Person.ID)
	a, err := w.svc.Root(ctx, c, w.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range a.Opts.Quotas {
		found = found || q.Tally == account.TallyOrg(w.st.Org.ID, "")
	}
	if !found {
		t.Fatalf("quotas %+v lack the organization's", a.Opts.Quotas)
	}
	if _, err := w.st.FS.WriteFile(ctx, w.root.ID, a.Root.FolderID, "big", strings.NewReader(strings.Repeat("x", 1<<16)), a.Opts); err == nil {
		t.Fatal("a write past the organization's quota succeeded")
	}
}

// TestOrgSharePolicyChain: a share of a child organization is written
// under the child's policy tightened by every ancestor's, as the child's
// persons are in their own roots (account's effectivePolicy): a child
// keeps the default policy unless someone sets it, and was a way around
// the parent's limits for its subscribers and administrators alike. In a
// share of the parent (inParent) the child's administrator, who
// administers nothing there, is bound by locked_extensions and
// user_lock_files as the member is; the parent's administrators are not
// (account.Policy.Binds).
func TestOrgSharePolicyChain(t *testing.T) {
	ctx := context.Background()
	bound := func(a share.Access, c account.Caller) bool { return a.Policy.Binds(c.Person, a.Place) }
	for _, tc := range []struct {
		name     string
		parent   func(p *account.Policy)
		inParent bool
		check    func(a share.Access, c account.Caller) bool
	}{
		{"the parent's max_file_size", func(p *account.Policy) { p.MaxFileSize = 10 }, false,
			func(a share.Access, _ account.Caller) bool {
				return a.Opts.MaxFileSize == 10 && a.Policy.MaxFileSize == 10
			}},
		{"the parent's excluded_extensions", func(p *account.Policy) { p.ExcludedExtensions = ".exe" }, false,
			func(a share.Access, _ account.Caller) bool { return slices.Contains(a.Opts.ExcludedExtensions, ".exe") }},
		{"the parent's locked_extensions", func(p *account.Policy) { p.LockedExtensions = ".pdf" }, false,
			func(a share.Access, _ account.Caller) bool { return a.Policy.ExtensionLocked("report.pdf") }},
		{"the parent's user_lock_files off", func(p *account.Policy) { p.UserLockFiles = false }, false,
			func(a share.Access, _ account.Caller) bool { return !a.Policy.UserLockFiles }},
		{"the parent's user_create_shares off", func(p *account.Policy) { p.UserCreateShares = false }, false,
			func(a share.Access, _ account.Caller) bool { return !a.Policy.UserCreateShares }},
		{"the parent's share's locked_extensions bind a child's administrator", func(p *account.Policy) { p.LockedExtensions = ".pdf" }, true,
			func(a share.Access, c account.Caller) bool {
				return bound(a, c) && a.Policy.ExtensionReadOnly(c.Person, a.Place, "report.pdf", 1) != nil
			}},
		{"the parent's share's user_lock_files off binds a child's administrator", func(p *account.Policy) { p.UserLockFiles = false }, true,
			func(a share.Access, c account.Caller) bool { return !a.Policy.UserLockFiles && bound(a, c) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.setPolicy(t, tc.parent)
			child, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: w.st.Org.ID, Name: "Child"})
			if err != nil {
				t.Fatal(err)
			}
			mk := func(org uint64, name string, admin bool) account.Caller {
				p, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{
					OrganizationID: org, Username: name, Email: name + "@example.com", Password: password, Admin: admin,
				})
				if err != nil {
					t.Fatal(err)
				}
				return caller(t, w.st, p.ID)
			}
			admin, member := mk(child.ID, "childadm", true), mk(child.ID, "member", false)
			owner, org := admin, child.ID
			if tc.inParent {
				owner, org = mk(w.st.Org.ID, "parentadm", true), w.st.Org.ID
			}
			root, err := w.svc.CreateOrgShare(ctx, owner, org, "Team")
			if err != nil {
				t.Fatal(err)
			}
			subs := []share.Entry{{ID: member.Person.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator}}
			if tc.inParent {
				subs = append(subs, share.Entry{ID: admin.Person.ID, Channel: share.ChannelWeb, Role: share.RoleCollaborator})
			}
			if _, err := w.svc.SetSubscribers(ctx, owner, org, root.ID, share.Subscribers{Persons: subs}); err != nil {
				t.Fatal(err)
			}
			for _, c := range []account.Caller{member, admin} {
				a, err := w.svc.Root(ctx, c, root.ID)
				if err != nil {
					t.Fatal(err)
				}
				if !tc.check(a, c) {
					t.Errorf("%s in the share: %s not applied", c.Person.Username, tc.name)
				}
			}
			if tc.inParent {
				if a, err := w.svc.Root(ctx, owner, root.ID); err != nil || bound(a, owner) {
					t.Errorf("the parent's administrator in its share: bound %v, %v", bound(a, owner), err)
				}
			}
		})
	}
}

func TestOrgShareManage(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	org := w.st.Org.ID
	if _, err := w.svc.CreateOrgShare(ctx, w.plain, org, "x"); !errors.Is(err, share.ErrForbidden) {
		t.Fatalf("plain create: %v", err)
	}
	if _, err := w.svc.CreateOrgShare(ctx, w.carol, org, "x"); !errors.Is(err, share.ErrNotFound) {
		t.Fatalf("other tenant create: %v", err)
	}
	if _, err := w.svc.OrgShare(ctx, w.admin, org, w.alice.Person.RootID); !errors.Is(err, share.ErrNoRoot) {
		t.Fatalf("a sync root as a share: %v", err)
	}
	list, total, err := w.svc.OrgShares(ctx, w.admin, org, 0, 10)
	if err != nil || total != 1 || list[0].ID != w.root.ID {
		t.Fatalf("OrgShares %v %d %v", list, total, err)
	}
	if r, err := w.svc.RenameOrgShare(ctx, w.admin, org, w.root.ID, "Renamed"); err != nil || r.Name != "Renamed" {
		t.Fatalf("rename %v %v", r, err)
	}
	subs, err := w.svc.Subscribers(ctx, w.root.ID)
	if err != nil || subs.External["ext@example.com"] != share.ExternalInvited {
		t.Fatalf("subscribers %+v %v", subs, err)
	}
	from, err := w.svc.FromGroup(ctx, subs)
	if err != nil || len(from) != 1 || from[0].ID != w.grouped.Person.ID {
		t.Fatalf("from_group %+v %v (viewer is direct, grouped through the group)", from, err)
	}
	for _, bad := range []share.Subscribers{
		{Persons: []share.Entry{{ID: w.carol.Person.ID, Channel: "web", Role: "VIEWER"}}},
		{Persons: []share.Entry{{ID: w.plain.Person.ID, Channel: "fax", Role: "VIEWER"}}},
		{Persons: []share.Entry{{ID: w.plain.Person.ID, Channel: "web", Role: "KING"}}},
		{Groups: []share.Entry{{ID: 1 << 40, Channel: "web", Role: "VIEWER"}}},
		{External: map[string]string{"nobody": ""}},
	} {
		if _, err := w.svc.SetSubscribers(ctx, w.admin, org, w.root.ID, bad); !errors.Is(err, account.ErrInvalid) {
			t.Fatalf("SetSubscribers(%+v): %v", bad, err)
		}
	}
	if err := w.svc.DeleteOrgShare(ctx, w.admin, org, w.root.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.Root(ctx, w.viewer, w.root.ID); !errors.Is(err, vfs.ErrRootDeleted) {
		t.Fatalf("deleted share to a subscriber: %v", err)
	}
	if _, err := w.svc.Root(ctx, w.plain, w.root.ID); !errors.Is(err, share.ErrNoRoot) {
		t.Fatalf("deleted share to a non-subscriber: %v", err)
	}
}

func TestOrgShareInvitation(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	if _, err := w.svc.AcceptInvitation(ctx, "nope"); !errors.Is(err, share.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
	inv, err := w.svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, share.Subscribers{External: map[string]string{"ext@example.com": "", "new@example.com": ""}})
	if err != nil || len(inv) != 1 || inv[0].Email != "new@example.com" {
		t.Fatalf("%+v %v", inv, err)
	}
	got, err := w.svc.AcceptInvitation(ctx, inv[0].Token)
	if err != nil || got.RootID != w.root.ID {
		t.Fatalf("accept %+v %v", got, err)
	}
	subs, _ := w.svc.Subscribers(ctx, w.root.ID)
	if subs.External["new@example.com"] != share.ExternalAccepted || subs.External["ext@example.com"] != share.ExternalInvited {
		t.Fatalf("%+v", subs.External)
	}
	if _, err := w.svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, share.Subscribers{}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.AcceptInvitation(ctx, inv[0].Token); !errors.Is(err, share.ErrNotFound) {
		t.Fatalf("a dropped address's token: %v", err)
	}
}

// TestOrgShareInvitationIndex: an update of a share's subscribers reads
// that share's invitations only, through its index, where it read every
// invitation of every share on the server in its transaction (each
// tenant's update cost all tenants' invitations and conflicted with
// their changes: an unreadable one of another share failed it); and an
// invitation stored before the index is entered in it at start
// (DateInvitations), so dropping its address still revokes it.
func TestOrgShareInvitationIndex(t *testing.T) {
	ctx := context.Background()
	w := newShareWorld(t)
	put := func(token string, v []byte) {
		t.Helper()
		h := sha256.Sum256([]byte(token))
		if err := w.st.DB.Update(ctx, func(tx kv.Txn) error {
			return tx.Set(kv.KeyString(kv.ShareInvite, nil, string(h[:])), v)
		}); err != nil {
			t.Fatal(err)
		}
	}
	set := func(emails ...string) {
		t.Helper()
		ext := map[string]string{}
		for _, e := range emails {
			ext[e] = ""
		}
		if _, err := w.svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, share.Subscribers{External: ext}); err != nil {
			t.Fatalf("update: %v", err)
		}
	}
	set("old@example.com")
	// An invitation of the address as the berth before the index stored
	// it: a lifetime, no entry in the share's index.
	old, err := cbor.Marshal(map[int]any{1: w.root.ID, 2: "old@example.com", 3: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	put("old-token", old)
	if n, err := w.svc.DateInvitations(ctx); err != nil || n != 1 {
		t.Fatalf("DateInvitations: %d %v, want 1", n, err)
	}
	put("another share's", []byte{0xff})
	set()
	set("old@example.com")
	if _, err := w.svc.AcceptInvitation(ctx, "old-token"); !errors.Is(err, share.ErrNotFound) {
		t.Errorf("the old token of an address dropped and invited again: %v, want %v", err, share.ErrNotFound)
	}
}

// TestOrgShareInvitationExpiry: an invitation is accepted within its
// lifetime (Options.InvitationTTL) and refused with ErrInvitationExpired
// from then on; a subscribers update that keeps an address whose
// invitation expired invites it again, with a new token. An address
// that accepted is not invited again.
func TestOrgShareInvitationExpiry(t *testing.T) {
	ctx := context.Background()
	const ttl = 7 * 24 * time.Hour
	rows := []struct {
		name    string
		after   time.Duration // from the invitation to the acceptance
		reinvit bool          // a subscribers update keeping the address comes first
		want    error
	}{
		{"within its lifetime", ttl - time.Second, false, nil},
		{"at its end", ttl, false, share.ErrInvitationExpired},
		{"long after", 5 * ttl, false, share.ErrInvitationExpired},
		{"expired, then invited again", ttl, true, nil},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			w := newShareWorld(t)
			clk := berthtest.NewClock(time.Now())
			svc := share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Now: clk.Now, InvitationTTL: ttl})
			subs := share.Subscribers{External: map[string]string{"new@example.com": ""}}
			inv, err := svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, subs)
			if err != nil || len(inv) != 1 {
				t.Fatalf("%+v %v", inv, err)
			}
			clk.Add(row.after)
			tok := inv[0].Token
			if row.reinvit {
				again, err := svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, subs)
				if err != nil || len(again) != 1 || again[0].Email != "new@example.com" || again[0].Token == tok {
					t.Fatalf("invited again: %+v %v", again, err)
				}
				if _, err := svc.AcceptInvitation(ctx, tok); !errors.Is(err, share.ErrInvitationExpired) && !errors.Is(err, share.ErrNotFound) {
					t.Fatalf("the expired token after a new invitation: %v", err)
				}
				tok = again[0].Token
				clk.Add(ttl - time.Second)
			}
			_, err = svc.AcceptInvitation(ctx, tok)
			if (err == nil) != (row.want == nil) || !errors.Is(err, row.want) {
				t.Fatalf("accept: %v, want %v", err, row.want)
			}
			st, _ := svc.Subscribers(ctx, w.root.ID)
			wantState := share.ExternalAccepted
			if row.want != nil {
				wantState = share.ExternalInvited
			}
			if st.External["new@example.com"] != wantState {
				t.Fatalf("state %q, want %q", st.External["new@example.com"], wantState)
			}
			if row.want == nil {
				// Accepted: a later update sends nothing, however late.
				clk.Add(5 * ttl)
				if again, err := svc.SetSubscribers(ctx, w.admin, w.st.Org.ID, w.root.ID, subs); err != nil || len(again) != 0 {
					t.Fatalf("an accepted address invited again: %+v %v", again, err)
				}
			}
		})
	}
}
