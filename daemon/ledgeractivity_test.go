package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/config"
	"berth/kv"
	"berth/share"
	"berth/vfs"
)

// TestRandomOpsLedgerAndActivity is issue 12's acceptance run, on the
// stores as serve wires them (openStores, newAccounts): after 1,000
// random operations across persons, roots of every type and child
// organizations (uploads, revisions, deletes, purges, moves, new and
// deleted roots), every usage tally equals the sum of the roots it
// covers, deleted ones until purged (each root's own figure, which vfs's
// random test holds to an audit of its records), and the activity log holds exactly one record
// per acknowledged change, with the right actor.
func TestRandomOpsLedgerAndActivity(t *testing.T) {
	ctx := context.Background()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	st, err := openStores(ctx, cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close(slog.New(slog.DiscardHandler))
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	shares := share.New(share.Options{FS: st.files, Accounts: accounts})

	top, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Top"})
	if err != nil {
		t.Fatal(err)
	}
	orgs := []uint64{top.ID}
	for i, parent := range []int{0, 0, 1} {
		o, err := accounts.CreateOrganization(ctx, account.OrganizationInput{ParentID: orgs[parent], Name: fmt.Sprint("child ", i)})
		if err != nil {
			t.Fatal(err)
		}
		orgs = append(orgs, o.ID)
	}
	var persons []account.Person
	for i, org := range orgs {
		for j := range 2 {
			p, err := accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org,
				Username: fmt.Sprintf("p%d-%d", i, j), Email: fmt.Sprintf("p%d-%d@example.com", i, j), Password: "correct horse battery"})
			if err != nil {
				t.Fatal(err)
			}
			persons = append(persons, p)
		}
	}
	type liveRoot struct {
		root  vfs.Root
		owner account.Person
		typ   vfs.RootType
		files []uint64
		gone  bool
		trash vfs.Usage // its usage when it was deleted, in the trash until purged
	}
	var roots []*liveRoot
	types := []vfs.RootType{vfs.RootSync, vfs.RootShare, vfs.RootBackup}
	r := rand.New(rand.NewPCG(12, 6))
	newRoot := func() error {
		p := persons[r.IntN(len(persons))]
		typ := types[r.IntN(len(types))]
		rt, err := shares.NewRoot(ctx, p, fmt.Sprint("r", len(roots)), typ)
		if err == nil {
			roots = append(roots, &liveRoot{root: rt, owner: p, typ: typ})
		}
		return err
	}
	for range 10 {
		if err := newRoot(); err != nil {
			t.Fatal(err)
		}
	}

	before := countRecords(t, st.db)
	acked := 0            // changes acknowledged to their caller, each owed one record
	mine := map[int]int{} // acknowledged file changes, by person id
	counts := map[string]int{}
	for step := range 1000 {
		lr := roots[r.IntN(len(roots))]
		c, err := accounts.Caller(ctx, lr.owner.ID)
		if err != nil {
			t.Fatal(err)
		}
		opts := share.WriteOptions(c)
		fs := st.files
		var op string
		changes := 0
		switch k := r.IntN(20); {
		case k < 9:
			op = "upload"
			var n vfs.Node
			size := []int{10, 3000, 70 << 10}[r.IntN(3)]
			n, err = fs.WriteFile(ctx, lr.root.ID, lr.root.FolderID, fmt.Sprint("f", r.IntN(8)), bytes.NewReader(bytes.Repeat([]byte{byte(step)}, size)), opts)
			if err == nil {
				lr.files = append(lr.files, n.ID)
				changes = 1
			}
		case k < 12 && len(lr.files) > 0:
			op = "delete"
			if err = fs.Delete(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))], opts); err == nil {
				changes = 1
			}
		case k < 14 && len(lr.files) > 0:
			op = "purge"
			if err = fs.Purge(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))]); err == nil {
				changes = 1
			}
		case k < 17 && len(lr.files) > 0:
			op = "move"
			var dir vfs.Node
			dir, err = fs.Mkdir(ctx, lr.root.ID, lr.root.FolderID, fmt.Sprint("d", step), opts)
			if err == nil {
				changes = 1
				if _, err = fs.Move(ctx, lr.root.ID, lr.files[r.IntN(len(lr.files))], dir.ID, fmt.Sprint("m", step), opts); err == nil {
					changes++
				}
			}
		case k < 18:
			op = "new root"
			if err = newRoot(); err == nil {
				changes = 1
			}
		case k < 19:
			op = "delete root"
			var u vfs.Usage
			if u, err = fs.Usage(ctx, lr.root.ID); err == nil {
				if err = fs.DeleteRoot(ctx, lr.root.ID); err == nil {
					lr.gone, lr.trash = true, berthtest.Trashed(u)
					changes = 1
				}
			}
		default:
			op = "skipped"
		}
		switch {
		case err == nil:
		case errors.Is(err, vfs.ErrNotExist), errors.Is(err, vfs.ErrRootDeleted), errors.Is(err, vfs.ErrNameConflict), errors.Is(err, vfs.ErrIsDir):
			op += " refused"
		default:
			t.Fatalf("step %d: %s: %v", step, op, err)
		}
		counts[op]++
		acked += changes
		if op == "upload" || op == "delete" || op == "move" {
			mine[int(lr.owner.ID)] += changes
		}
	}
	t.Logf("operations: %v", counts)

	// The log: one record per acknowledged change, no more, no fewer.
	if got := countRecords(t, st.db) - before; got != acked {
		t.Errorf("the activity log holds %d records for %d acknowledged changes", got, acked)
	}
	// And each person's uploads, deletes and moves are theirs.
	for _, p := range persons {
		recs, total, err := st.activity.Person(ctx, p.ID, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		_ = recs
		if total < mine[int(p.ID)] {
			t.Errorf("person %d: %d records in their activity, made %d changes", p.ID, total, mine[int(p.ID)])
		}
	}

	// Every tally equals the sum of the roots it covers, live or deleted
	// and not purged (whose bytes are still stored); its RootCount counts
	// the live ones.
	want := map[uint64]vfs.Usage{}
	for _, lr := range roots {
		u, err := st.files.Usage(ctx, lr.root.ID)
		if errors.Is(err, vfs.ErrRootDeleted) && lr.gone {
			u, err = lr.trash, nil
		}
		if err != nil {
			t.Fatal(err)
		}
		chain, err := accounts.Chain(ctx, lr.owner.OrganizationID)
		if err != nil {
			t.Fatal(err)
		}
		tallies := []uint64{account.TallyPerson(lr.owner.ID)}
		for _, org := range orgs {
			if slices.Contains(chain, org) {
				tallies = append(tallies, account.TallyOrg(org, string(lr.typ)), account.TallyOrg(org, ""))
			}
		}
		for _, tl := range tallies {
			s := want[tl]
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
			want[tl] = s
		}
	}
	all := []uint64{}
	for _, p := range persons {
		all = append(all, account.TallyPerson(p.ID))
	}
	for _, org := range orgs {
		for _, typ := range []string{"", "sync", "share", "backup"} {
			all = append(all, account.TallyOrg(org, typ))
		}
	}
	for _, tl := range all {
		got, err := st.files.TallyUsage(ctx, tl)
		if err != nil {
			t.Fatal(err)
		}
		if got != want[tl] {
			t.Errorf("tally %#x: %+v, recount %+v", tl, got, want[tl])
		}
	}
}

// countRecords counts the activity log's records, every one of them.
func countRecords(t *testing.T, db kv.Store) int {
	t.Helper()
	n := 0
	err := db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte(kv.ActivityRecord), nil, func(_, _ []byte) error {
			n++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
