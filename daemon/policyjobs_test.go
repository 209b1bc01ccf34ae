package daemon

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"berth/account"
	"berth/kv/badger"
	"berth/vfs"
	"berth/vfs/chunk"
)

// policyStack is a real store with a clock the test moves: vfs stamps
// deletions with it, the jobs compute their cutoffs from it.
type policyStack struct {
	fs       *vfs.FS
	accounts *account.Service
	clock    atomic.Int64 // unix ns
}

func (s *policyStack) now() time.Time { return time.Unix(0, s.clock.Load()) }

func newPolicyStack(t *testing.T) *policyStack {
	t.Helper()
	ctx := context.Background()
	s := &policyStack{}
	s.clock.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	dir := t.TempDir()
	db, err := badger.Open(badger.Options{Dir: filepath.Join(dir, "meta"), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := chunk.NewDisk(filepath.Join(dir, "chunks"))
	if err != nil {
		t.Fatal(err)
	}
	s.fs, err = vfs.Open(ctx, db, chunks, vfs.Options{Now: s.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.fs.Close(); db.Close() })
	s.accounts = account.New(db, account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	return s
}

// person creates an organization with pol (under parent) and a person of
// it with a sync root.
func (s *policyStack) person(t *testing.T, name string, parent uint64, pol account.Policy) (account.Organization, vfs.Root) {
	t.Helper()
	ctx := context.Background()
	org, err := s.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: name, ParentID: parent, Policy: &pol})
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.fs.CreateRoot(ctx, name, vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.accounts.CreatePerson(ctx, account.PersonInput{
		OrganizationID: org.ID, Username: name, Email: name + "@example.com",
		Password: "a long enough password", RootID: root.ID,
	}); err != nil {
		t.Fatal(err)
	}
	return org, root
}

func (s *policyStack) write(t *testing.T, r vfs.Root, name string, data []byte) vfs.Node {
	t.Helper()
	n, err := s.fs.WriteFile(context.Background(), r.ID, r.FolderID, name, bytes.NewReader(data), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPolicyJobs: a run applies each organization's trim_revisions and
// purge_deleted to its own roots and to nobody else's: a file saved 20
// times under trim_revisions_x 5 keeps 5 revisions; under
// purge_deleted_frequency 1h an item deleted 2h ago is purged and one
// deleted 30m ago kept; usage drops accordingly; the counters count it;
// an organization without those policies (a child of the first, too) is
// untouched; a second run finds nothing left; a small batch bounds a run
// and later runs finish the work.
func TestPolicyJobs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		batch int
		runs  int // runs until everything is done
	}{
		{"one run", 10000, 1},
		{"batch of 4", 4, 4}, // 15 revisions: 4+4+4+3; the purge is done in the first
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newPolicyStack(t)
			pol := account.DefaultPolicy()
			pol.TrimRevisions, pol.TrimRevisionsX = true, "5"
			pol.PurgeDeleted, pol.PurgeDeletedFrequency = true, "1h"
			org, root := s.person(t, "acme", 0, pol)
			_, childRoot := s.person(t, "child", org.ID, account.DefaultPolicy())
			_, plainRoot := s.person(t, "plain", 0, account.DefaultPolicy())

			var saved, childSaved, plainSaved vfs.Node
			for i := range 20 {
				data := bytes.Repeat([]byte{byte(i)}, 1000+i)
				saved = s.write(t, root, "saved.txt", data)
				childSaved = s.write(t, childRoot, "saved.txt", data)
				plainSaved = s.write(t, plainRoot, "saved.txt", data)
			}
			old := s.write(t, root, "old.txt", make([]byte, 3000))
			recent := s.write(t, root, "recent.txt", make([]byte, 2000))
			childOld := s.write(t, childRoot, "old.txt", make([]byte, 3000))
			for _, d := range []struct {
				r  vfs.Root
				id uint64
			}{{root, old.ID}, {childRoot, childOld.ID}} {
				if err := s.fs.Delete(ctx, d.r.ID, d.id, vfs.WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			s.clock.Add(int64(90 * time.Minute))
			if err := s.fs.Delete(ctx, root.ID, recent.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			s.clock.Add(int64(30 * time.Minute)) // old: deleted 2h ago; recent: 30m ago
			before, err := s.fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}

			reg := prometheus.NewRegistry()
			j := newPolicyJobs(s.fs, s.accounts, slog.New(slog.DiscardHandler), reg, tc.batch)
			j.now = s.now
			for i := range tc.runs {
				rep, err := j.run(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if rep.Organizations != 1 || rep.Roots != 1 || rep.Trim.More != (i < tc.runs-1) {
					t.Fatalf("run %d: %s (more %t)", i, rep, rep.Trim.More)
				}
			}
			rep, err := j.run(ctx)
			if err != nil || rep.Trim.Revisions != 0 || rep.Purge.Purged != 0 {
				t.Fatalf("run after the work was done: %v %s", err, rep)
			}
			if got := counterValue(t, j.trimmed); got != 15 {
				t.Fatalf("trimmed counter %v", got)
			}
			if got := counterValue(t, j.purged); got != 1 {
				t.Fatalf("purged counter %v", got)
			}
			j.runLogged(ctx) // what the loop calls: counts the run
			if got := counterValue(t, j.runs.WithLabelValues("ok")); got != 1 {
				t.Fatalf("runs counter %v", got)
			}

			for _, c := range []struct {
				name string
				r    vfs.Root
				id   uint64
				want int
			}{{"acme", root, saved.ID, 5}, {"child", childRoot, childSaved.ID, 20}, {"plain", plainRoot, plainSaved.ID, 20}} {
				revs, err := s.fs.Revisions(ctx, c.r.ID, c.id)
				if err != nil || len(revs) != c.want {
					t.Fatalf("%s: %d revisions (%v), want %d", c.name, len(revs), err, c.want)
				}
			}
			if _, err := s.fs.Stat(ctx, root.ID, old.ID); !errors.Is(err, vfs.ErrNotExist) {
				t.Fatalf("old.txt, deleted 2h ago: %v", err)
			}
			if n, err := s.fs.Stat(ctx, root.ID, recent.ID); err != nil || !n.Deleted {
				t.Fatalf("recent.txt, deleted 30m ago: %+v %v", n, err)
			}
			if n, err := s.fs.Stat(ctx, childRoot.ID, childOld.ID); err != nil || !n.Deleted {
				t.Fatalf("the child organization's deleted item: %+v %v", n, err)
			}
			after, err := s.fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.RevisionCount != 4 || before.RevisionCount != 19 ||
				after.DelFileCount != 1 || after.DeletedSize != 2000 || before.DeletedSize != 5000 ||
				after.HeadSize != before.HeadSize {
				t.Fatalf("usage before %+v after %+v", before, after)
			}
		})
	}
}

// TestPolicyJobsCancelled: a run stops with the context (shutdown) and
// says so; the loop counts no failure for it.
func TestPolicyJobsCancelled(t *testing.T) {
	s := newPolicyStack(t)
	pol := account.DefaultPolicy()
	pol.TrimRevisions, pol.TrimRevisionsX = true, "1"
	_, root := s.person(t, "acme", 0, pol)
	s.write(t, root, "a.txt", []byte("1"))
	s.write(t, root, "a.txt", []byte("2"))
	j := newPolicyJobs(s.fs, s.accounts, slog.New(slog.DiscardHandler), nil, 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := j.run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled run: %v", err)
	}
	j.loop(ctx, time.Hour) // returns at once
	if got := counterValue(t, j.runs.WithLabelValues("error")); got != 0 {
		t.Fatalf("error counter %v after a cancelled run", got)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPolicyPurgesDeletedRoots: purge_deleted purges, whole, a root of
// the organization's own deleted longer ago than its frequency (a deleted
// root counts against the quotas until it is purged, and the policy is
// how an organization gets that space back), and leaves one deleted
// since and another organization's. Before, the job left every deleted
// root alone. The roots of a deleted child organization (and of those
// below it), deleted with it, still count against every ancestor's
// quota until purged, and nobody is left to set the deleted subtree's
// policy: the nearest live ancestor's purges them. Before, the job skipped
// a deleted organization, and its subtree's roots counted against the
// parent's quota for ever, whatever the parent's policy.
func TestPolicyPurgesDeletedRoots(t *testing.T) {
	ctx := context.Background()
	s := newPolicyStack(t)
	pol := account.DefaultPolicy()
	pol.PurgeDeleted, pol.PurgeDeletedFrequency = true, "1h"
	acme, old := s.person(t, "acme", 0, pol)
	_, recent := s.person(t, "acme2", 0, pol)
	plainOrg, plain := s.person(t, "plain", 0, account.DefaultPolicy())
	gone, goneRoot := s.person(t, "gone", acme.ID, account.DefaultPolicy())
	_, belowRoot := s.person(t, "below", gone.ID, account.DefaultPolicy())
	// A deleted organization whose own policy purged, under one that
	// does not: its own still applies.
	own, ownRoot := s.person(t, "own", plainOrg.ID, pol)
	for _, r := range []vfs.Root{old, recent, plain, goneRoot, belowRoot, ownRoot} {
		s.write(t, r, "f.txt", make([]byte, 3000))
	}
	for _, r := range []vfs.Root{old, plain, goneRoot, belowRoot, ownRoot} {
		if err := s.fs.DeleteRoot(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range []account.Organization{gone, own} {
		if _, err := s.accounts.DeleteOrganization(ctx, o.ID); err != nil {
			t.Fatal(err)
		}
	}
	s.clock.Add(int64(90 * time.Minute))
	if err := s.fs.DeleteRoot(ctx, recent.ID); err != nil {
		t.Fatal(err)
	}
	s.clock.Add(int64(30 * time.Minute)) // old, plain: deleted 2h ago; recent: 30m ago
	reg := prometheus.NewRegistry()
	j := newPolicyJobs(s.fs, s.accounts, slog.New(slog.DiscardHandler), reg, 100)
	j.now = s.now
	rep, err := j.run(ctx)
	if err != nil || rep.Purge.Roots != 4 || rep.Purge.Failed != 0 {
		t.Fatalf("run: %v %s, want acme's root, the deleted child's two and the deleted own's purged", err, rep)
	}
	if got := counterValue(t, j.purged); got != 4 {
		t.Fatalf("purged counter %v", got)
	}
	if rep, err := j.run(ctx); err != nil || rep.Purge.Roots != 0 {
		t.Fatalf("run after the work was done: %v %s", err, rep)
	}
	// What is left to the whole store's purge: the other organization's
	// root and the one deleted since; the policy's root is gone already.
	all, err := s.fs.PurgeDeleted(ctx, s.now())
	if err != nil || all.Roots != 2 {
		t.Fatalf("PurgeDeleted after the policy: %v %s, want the 2 roots the policy left", err, all)
	}
}
