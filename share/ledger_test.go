package share_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
)

// ledgerWorld is an organization tree (Acme; two children; a grandchild
// below the first) with persons in each and roots of every type made by
// share.NewRoot.
type ledgerWorld struct {
	st      *berthtest.Stack
	svc     *share.Service
	orgs    []uint64
	persons []account.Person
	roots   []ledgerRoot
	purged  bool // the deleted roots are purged
}

type ledgerRoot struct {
	root  vfs.Root
	owner account.Person
	typ   vfs.RootType
	files []uint64  // ids of files written into it (live or not)
	gone  bool      // deleted
	trash vfs.Usage // its usage when it was deleted, in the trash until purged
}

// TestLedgerRandom: after 1,000 random operations across persons, roots
// and child organizations (uploads, revisions, deletes, purges, moves,
// new and deleted roots), every tally (each person's; each organization's
// by root type and of all types) equals a recount over the roots it
// covers, live or deleted and not purged yet (whose bytes are still
// stored), and every organization quota held: no organization's subtree
// passed it.
func TestLedgerRandom(t *testing.T) {
	ctx := context.Background()
	w := &ledgerWorld{st: berthtest.New(t, berthtest.Options{})}
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts})
	w.orgs = []uint64{w.st.Org.ID}
	for i, parent := range []int{0, 0, 1} {
		o, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: w.orgs[parent], Name: fmt.Sprint("child ", i)})
		if err != nil {
			t.Fatal(err)
		}
		w.orgs = append(w.orgs, o.ID)
	}
	// A quota on the first child (and so on the grandchild's roots too).
	const childQuota = 3 << 20
	if _, err := w.st.Accounts.UpdatePolicy(ctx, w.orgs[1], func(p *account.Policy) error {
		p.SpaceQuota = fmt.Sprint(childQuota)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for i, org := range w.orgs {
		for j := range 2 {
			p, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org,
				Username: fmt.Sprintf("p%d-%d", i, j), Email: fmt.Sprintf("p%d-%d@example.com", i, j), Password: password})
			if err != nil {
				t.Fatal(err)
			}
			w.persons = append(w.persons, p)
		}
	}
	types := []vfs.RootType{vfs.RootSync, vfs.RootShare, vfs.RootBackup}
	r := rand.New(rand.NewPCG(12, 1))
	newRoot := func() {
		p := w.persons[r.IntN(len(w.persons))]
		typ := types[r.IntN(len(types))]
		rt, err := w.svc.NewRoot(ctx, p, fmt.Sprint("r", len(w.roots)), typ)
		if err != nil {
			t.Fatal(err)
		}
		w.roots = append(w.roots, ledgerRoot{root: rt, owner: p, typ: typ})
	}
	for range 10 {
		newRoot()
	}
	counts := map[string]int{}
	for step := range 1000 {
		lr := &w.roots[r.IntN(len(w.roots))]
		for lr.gone && r.IntN(10) != 0 {
			lr = &w.roots[r.IntN(len(w.roots))]
		}
		c, err := w.st.Accounts.Caller(ctx, lr.owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		opts := share.WriteOptions(c)
		fs := w.st.FS
		var op string
		switch k := r.IntN(20); {
		case k < 9:
			op = "upload"
			var n vfs.Node
			size := []int{10, 3000, 70 << 10, 600 << 10}[r.IntN(4)]
			n, err = fs.WriteFile(ctx, lr.root.ID, lr.root.FolderID, fmt.Sprint("f", r.IntN(8)), bytes.NewReader(bytes.Repeat([]byte{byte(step)}, size)), opts)
			if err == nil {
				lr.files = append(lr.files, n.ID)
			}
		case k < 12 && len(lr.files) > 0:
			op = "delete"
			err = fs.Delete(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))], opts)
		case k < 14 && len(lr.files) > 0:
			op = "purge"
			err = fs.Purge(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))])
		case k < 17 && len(lr.files) > 0:
			op = "move"
			if _, err = fs.Mkdir(ctx, lr.root.ID, lr.root.FolderID, fmt.Sprint("d", r.IntN(3)), opts); err == nil || errors.Is(err, vfs.ErrNameConflict) {
				var dir vfs.Node
				if dir, err = fs.Lookup(ctx, lr.root.ID, fmt.Sprint("/d", r.IntN(3))); err == nil {
					_, err = fs.Move(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))], dir.ID, fmt.Sprint("m", r.IntN(8)), opts)
				}
			}
		case k < 18:
			op = "new root"
			newRoot()
		case k < 19:
			op = "delete root"
			var u vfs.Usage
			if u, err = fs.Usage(ctx, lr.root.ID); err == nil {
				if err = fs.DeleteRoot(ctx, lr.root.ID); err == nil {
					lr.gone, lr.trash = true, berthtest.Trashed(u)
				}
			}
		default:
			op = "skipped"
		}
		switch {
		case err == nil:
		case errors.Is(err, vfs.ErrQuotaExceeded):
			op += " over quota"
		case errors.Is(err, vfs.ErrNotExist), errors.Is(err, vfs.ErrRootDeleted), errors.Is(err, vfs.ErrNameConflict):
			op += " refused"
		default:
			t.Fatalf("step %d: %s: %v", step, op, err)
		}
		counts[op]++
		if step%100 == 99 {
			w.check(t, fmt.Sprint("step ", step))
		}
	}
	if _, err := w.st.FS.PurgeDeleted(ctx, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w.purged = true
	w.check(t, "end")
	if counts["upload over quota"] == 0 {
		t.Errorf("no upload met the quota: %v", counts)
	}
	t.Logf("%v", counts)
}

// check recounts every tally from the roots it covers (each root's own
// usage, which vfs's tests hold to an audit of its records; a deleted
// root's as it was when it was deleted, until it is purged) and compares.
func (w *ledgerWorld) check(t *testing.T, where string) {
	t.Helper()
	ctx := context.Background()
	want := map[uint64]vfs.Usage{}
	for _, lr := range w.roots {
		u, err := w.st.FS.Usage(ctx, lr.root.ID)
		if errors.Is(err, vfs.ErrRootDeleted) {
			if !lr.gone || w.purged {
				continue
			}
			u, err = lr.trash, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		add := func(tally uint64) {
			s := want[tally]
			s.FileCount += u.FileCount
			s.HeadSize += u.HeadSize
			s.RevisionCount += u.RevisionCount
			s.RevisionSize += u.RevisionSize
			s.DelFileCount += u.DelFileCount
			s.DelRevisionCount += u.DelRevisionCount
			s.DeletedSize += u.DeletedSize
			s.FolderCount += u.FolderCount
			s.PhysicalSize += u.PhysicalSize
			if !lr.gone {
				s.RootCount++
			}
			want[tally] = s
		}
		add(account.TallyPerson(lr.owner.ID))
		chain, err := w.st.Accounts.Chain(ctx, lr.owner.OrganizationID)
		if err != nil {
			t.Fatal(err)
		}
		for _, org := range w.orgs {
			if slices.Contains(chain, org) {
				add(account.TallyOrg(org, string(lr.typ)))
				add(account.TallyOrg(org, ""))
			}
		}
	}
	var tallies []uint64
	for _, p := range w.persons {
		tallies = append(tallies, account.TallyPerson(p.ID))
	}
	for _, org := range w.orgs {
		for _, typ := range []string{"", "sync", "share", "backup"} {
			tallies = append(tallies, account.TallyOrg(org, typ))
		}
	}
	for _, tl := range tallies {
		got, err := w.st.FS.TallyUsage(ctx, tl)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[tl] {
			t.Fatalf("%s: tally %#x\n      got %+v\nrecounted %+v", where, tl, got, want[tl])
		}
	}
	if u, _ := w.st.FS.TallyUsage(ctx, account.TallyOrg(w.orgs[1], "")); u.PhysicalSize > 3<<20 {
		t.Fatalf("%s: the first child holds %d bytes, over its quota", where, u.PhysicalSize)
	}
}
