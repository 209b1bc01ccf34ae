package share_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
)

const password = "correct horse battery"

// world is a berth with persons in every relation to a root that share
// must tell apart.
type world struct {
	st       *berthtest.Stack
	svc      *share.Service
	alice    account.Caller // Acme, owns aliceRoot
	bob      account.Caller // Acme, owns bobRoot
	carol    account.Caller // another organization, owns carolRoot
	rootless account.Caller // Acme, no root yet
	erin     account.Caller // Acme, whose root was deleted
	frank    account.Caller // Acme, whose root id names no root at all

	aliceRoot, bobRoot, carolRoot, erinRoot vfs.Root
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{st: berthtest.New(t, berthtest.Options{})}
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts})
	var p account.Person
	p, w.aliceRoot, _ = w.st.AddPerson(t, "alice", password)
	w.alice = caller(t, w.st, p.ID)
	p, w.bobRoot, _ = w.st.AddPerson(t, "bob", password)
	w.bob = caller(t, w.st, p.ID)

	other, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Other"})
	if err != nil {
		t.Fatal(err)
	}
	w.carolRoot, err = w.st.FS.CreateRoot(ctx, "carol", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	p, err = w.st.Accounts.CreatePerson(ctx, account.PersonInput{
		OrganizationID: other.ID, Username: "carol", Email: "carol@example.com",
		Password: password, RootID: w.carolRoot.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.carol = caller(t, w.st, p.ID)

	p, err = w.st.Accounts.CreatePerson(ctx, account.PersonInput{
		OrganizationID: w.st.Org.ID, Username: "dave", Email: "dave@example.com", Password: password,
	})
	if err != nil {
		t.Fatal(err)
	}
	w.rootless = caller(t, w.st, p.ID)

	p, w.erinRoot, _ = w.st.AddPerson(t, "erin", password)
	if err := w.st.FS.DeleteRoot(ctx, w.erinRoot.ID); err != nil {
		t.Fatal(err)
	}
	w.erin = caller(t, w.st, p.ID)

	p, _, _ = w.st.AddPerson(t, "frank", password)
	if err := w.st.Accounts.SetPersonRoot(ctx, p.ID, 1<<40); err != nil {
		t.Fatal(err)
	}
	w.frank = caller(t, w.st, p.ID)
	return w
}

// caller reads person id as a front end does once it has authenticated them.
func caller(t testing.TB, st *berthtest.Stack, id uint64) account.Caller {
	t.Helper()
	c, err := st.Accounts.Caller(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// setPolicy changes Acme's policy as an administrator would.
func (w *world) setPolicy(t *testing.T, change func(p *account.Policy)) {
	t.Helper()
	if _, err := w.st.Accounts.UpdatePolicy(context.Background(), w.st.Org.ID, func(p *account.Policy) error {
		change(p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// aliceNow reads alice afresh, as her next request would after a change
// to her or her organization, and share's answer for her own root.
func (w *world) aliceNow(t *testing.T) (account.Caller, share.Access) {
	t.Helper()
	c := caller(t, w.st, w.alice.Person.ID)
	a, err := w.svc.Root(context.Background(), c, w.aliceRoot.ID)
	if err != nil {
		t.Fatal(err)
	}
	return c, a
}

// disabled is c as it would read after its person (or, with org, its
// organization) was disabled. The account service hands out no such
// caller; share refuses it all the same.
func disabled(c account.Caller, org bool) account.Caller {
	if org {
		c.Organization.Active = false
	} else {
		c.Person.Active = false
	}
	return c
}

func TestRoot(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    account.Caller
		id   uint64
		want error // nil: the caller's own root, with every permission
	}{
		{"own root", w.alice, w.aliceRoot.ID, nil},
		{"own root, another owner", w.bob, w.bobRoot.ID, nil},
		{"own root, another organization", w.carol, w.carolRoot.ID, nil},
		// Someone else's root is refused exactly like a root that does
		// not exist, so the answer does not tell which ids are roots.
		{"a person of the same organization's root", w.alice, w.bobRoot.ID, share.ErrNoRoot},
		{"a person of another organization's root", w.alice, w.carolRoot.ID, share.ErrNoRoot},
		{"another organization's person reaching in", w.carol, w.aliceRoot.ID, share.ErrNoRoot},
		{"no root of that id", w.alice, 1 << 40, share.ErrNoRoot},
		{"id 0", w.alice, 0, share.ErrNoRoot},
		{"id 0, person without a root", w.rootless, 0, share.ErrNoRoot},
		{"person without a root, someone's root", w.rootless, w.aliceRoot.ID, share.ErrNoRoot},
		// The owner of a deleted root learns it was deleted (REST's 410
		// root_deleted); nobody else does.
		{"own root, deleted", w.erin, w.erinRoot.ID, vfs.ErrRootDeleted},
		{"another's root, deleted", w.alice, w.erinRoot.ID, share.ErrNoRoot},
		{"own root id names no root", w.frank, 1 << 40, share.ErrNoRoot},
		{"disabled person, own root", disabled(w.alice, false), w.aliceRoot.ID, account.ErrInactive},
		{"disabled organization, own root", disabled(w.alice, true), w.aliceRoot.ID, account.ErrInactive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := w.svc.Root(ctx, tc.c, tc.id)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Root(%s, %d) = %v, want %v", tc.c.Person.Username, tc.id, err, tc.want)
			}
			if tc.want != nil {
				if a.Root.ID != 0 || a.Perms != 0 {
					t.Errorf("a refused Root returned %+v", a)
				}
				return
			}
			if a.Root.ID != tc.id || a.Root.FolderID == 0 || a.Root.Deleted {
				t.Errorf("Root = %+v, want live root %d", a.Root, tc.id)
			}
			if a.Perms != share.Owner {
				t.Errorf("Perms = %v, want %v", a.Perms, share.Owner)
			}
			if a.Policy != tc.c.Organization.Policy {
				t.Errorf("Policy = %+v, want the caller's organization's %+v", a.Policy, tc.c.Organization.Policy)
			}
			if a.Opts.Principal != tc.c.Person.Principal() {
				t.Errorf("Opts.Principal = %q, want %q", a.Opts.Principal, tc.c.Person.Principal())
			}
		})
	}
}

func TestRoots(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		c    account.Caller
		want []uint64 // root ids reached
		err  error
	}{
		{"own root", w.alice, []uint64{w.aliceRoot.ID}, nil},
		{"own root, another organization", w.carol, []uint64{w.carolRoot.ID}, nil},
		// WebDAV shows an empty top level, not an error, for these.
		{"person without a root", w.rootless, nil, nil},
		{"own root deleted", w.erin, nil, nil},
		{"own root id names no root", w.frank, nil, nil},
		{"disabled person", disabled(w.bob, false), nil, account.ErrInactive},
		{"disabled organization", disabled(w.bob, true), nil, account.ErrInactive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reach, err := w.svc.Roots(ctx, tc.c)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Roots = %v, want %v", err, tc.err)
			}
			var ids []uint64
			for _, a := range reach {
				ids = append(ids, a.Root.ID)
				// Each root reached carries its own terms; the same as
				// Root answers for it.
				one, err := w.svc.Root(ctx, tc.c, a.Root.ID)
				if err != nil {
					t.Fatalf("Root(%d) of a root Roots listed: %v", a.Root.ID, err)
				}
				if one.Perms != a.Perms || one.Policy != a.Policy || one.Opts.Principal != a.Opts.Principal ||
					!slices.Equal(one.Opts.Quotas, a.Opts.Quotas) || one.Opts.MaxFileSize != a.Opts.MaxFileSize ||
					!slices.Equal(one.Opts.ExcludedExtensions, a.Opts.ExcludedExtensions) {
					t.Errorf("Roots says %+v of root %d, Root says %+v", a, a.Root.ID, one)
				}
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("Roots reach %v, want %v", ids, tc.want)
			}
		})
	}
}

// TestWriteOptions checks how the organization's policy and the person's
// own quota become the options of every vfs write: REST and WebDAV used
// to build these each by hand.
func TestWriteOptions(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		maxFileSize int64
		orgQuota    string
		excluded    string
		personQuota int64

		wantPerson   int64 // quota on the person's tally; 0 none
		wantOrg      int64 // quota on the organization's tally of all types; 0 none
		wantExcluded []string
	}{
		{name: "default policy: no limits", orgQuota: "0"},
		{name: "max file size", maxFileSize: 1 << 20, orgQuota: "0"},
		{name: "organization quota", orgQuota: "1000", wantOrg: 1000},
		{name: "person quota alone", orgQuota: "0", personQuota: 300, wantPerson: 300},
		{name: "person quota under the organization's", orgQuota: "1000", personQuota: 500, wantPerson: 500, wantOrg: 1000},
		{name: "organization quota under the person's", orgQuota: "1000", personQuota: 2000, wantPerson: 2000, wantOrg: 1000},
		{name: "excluded extensions, spaces trimmed", orgQuota: "0",
			excluded: ".exe, .TMP", wantExcluded: []string{".exe", ".TMP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.setPolicy(t, func(p *account.Policy) {
				p.MaxFileSize, p.SpaceQuota, p.ExcludedExtensions = tc.maxFileSize, tc.orgQuota, tc.excluded
			})
			if _, err := w.st.Accounts.UpdatePerson(ctx, w.alice.Person.ID, func(p *account.Person) error {
				p.SpaceQuota = tc.personQuota
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			c, a := w.aliceNow(t)
			want := vfs.WriteOptions{
				Principal:          c.Person.Principal(),
				MaxFileSize:        tc.maxFileSize,
				ExcludedExtensions: tc.wantExcluded,
			}
			if tc.wantPerson > 0 {
				want.Quotas = append(want.Quotas, vfs.Quota{Tally: account.TallyPerson(c.Person.ID), Bytes: tc.wantPerson})
			}
			if tc.wantOrg > 0 {
				want.Quotas = append(want.Quotas, vfs.Quota{Tally: account.TallyOrg(c.Organization.ID, ""), Bytes: tc.wantOrg, Shared: true})
			}
			for _, got := range []struct {
				how  string
				opts vfs.WriteOptions
			}{{"Access.Opts", a.Opts}, {"WriteOptions", share.WriteOptions(c)}} {
				o := got.opts
				if o.Principal != want.Principal || o.MaxFileSize != want.MaxFileSize || o.SpaceQuota != 0 || !slices.Equal(o.Quotas, want.Quotas) ||
					!slices.Equal(o.ExcludedExtensions, want.ExcludedExtensions) {
					t.Errorf("%s = %+v, want %+v", got.how, o, want)
				}
				// Per-request fields are the front end's to add.
				if o.LockTokens != nil || !o.Modified.IsZero() || o.DeclaredSize != 0 || o.IfRevision != 0 {
					t.Errorf("%s sets per-request fields: %+v", got.how, o)
				}
			}
			if a.Policy.MaxFileSize != tc.maxFileSize || a.Policy.SpaceQuota != tc.orgQuota || a.Policy.ExcludedExtensions != tc.excluded {
				t.Errorf("Access.Policy = %+v, not the organization's updated policy", a.Policy)
			}
		})
	}
}

// TestPolicyCarried checks that what the policy withholds stays in
// Access.Policy for the front ends to enforce, rather than in the
// permissions: a root's owner still holds every permission.
func TestPolicyCarried(t *testing.T) {
	w := newWorld(t)
	w.setPolicy(t, func(p *account.Policy) {
		p.UserLockFiles, p.UserCreateShares, p.WebDAVEnabled = false, false, false
	})
	_, a := w.aliceNow(t)
	if a.Policy.UserLockFiles || a.Policy.UserCreateShares || a.Policy.WebDAVEnabled {
		t.Errorf("Access.Policy = %+v, want the locking, sharing and WebDAV switches off", a.Policy)
	}
	if a.Perms != share.Owner {
		t.Errorf("Perms = %v, want %v", a.Perms, share.Owner)
	}
}

func TestPerm(t *testing.T) {
	for _, tc := range []struct {
		p, q   share.Perm
		has    bool
		string string
	}{
		{share.Owner, share.View | share.Read | share.Write, true, "view|read|write|delete|reshare"},
		{share.View | share.Read, share.Write, false, "view|read"},
		{share.View | share.Read, share.View | share.Write, false, "view|read"},
		{share.Write, share.Write, true, "write"},
		{0, share.View, false, "none"},
		{0, 0, true, "none"},
		{share.Read | 1<<7, share.Read, true, "read|0x80"},
	} {
		if got := tc.p.Has(tc.q); got != tc.has {
			t.Errorf("%v.Has(%v) = %v, want %v", tc.p, tc.q, got, tc.has)
		}
		if got := tc.p.String(); got != tc.string {
			t.Errorf("Perm(%#x).String() = %q, want %q", uint8(tc.p), got, tc.string)
		}
	}
}
