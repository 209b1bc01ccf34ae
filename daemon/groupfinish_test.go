package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"berth/account"
	"berth/config"
)

// TestFinishGroupDeletions: a large group's deletion cut short between
// its batches (the request's context ended, as a crash would end it)
// leaves the group marked Deleting; the job the daemon runs at start
// finishes it: the group and every membership go, and the organization's
// activity holds the one group_deleted record. Before, such a group
// stayed, with part of its members, until someone deleted it again.
func TestFinishGroupDeletions(t *testing.T) {
	ctx := t.Context()
	cfg := config.Default()
	cfg.Data = t.TempDir()
	// 1 MiB memtables: a full group's memberships go in many batches.
	cfg.Memory.KVMemtable = 1 << 20
	log := slog.New(slog.DiscardHandler)
	st, err := openStores(ctx, cfg, log, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close(log) })
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ins := make([]account.PersonInput, account.MaxGroupMembers)
	for i := range ins {
		name := fmt.Sprint("member", i)
		ins[i] = account.PersonInput{OrganizationID: org.ID, Username: name, Email: name + "@example.com", NoPassword: true}
	}
	persons, err := accounts.CreatePersons(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(persons))
	for i, p := range persons {
		ids[i] = p.ID
	}
	// cut starts a full group's deletion and ends its context once the
	// group shows Deleting, after its first batch; false when the
	// deletion finished first (a fast machine), to try again.
	cut := func() (account.Group, bool) {
		g, err := accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: org.ID, Name: "G"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: ids}); err != nil {
			t.Fatal(err)
		}
		del, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- accounts.DeleteGroup(del, g.ID) }()
		for {
			select {
			case err := <-done:
				if err == nil {
					return g, false
				}
				if !errors.Is(err, context.Canceled) {
					t.Fatal(err)
				}
				return g, true
			default:
			}
			if cur, err := accounts.Group(ctx, g.ID); err == nil && cur.Deleting {
				cancel()
			}
			time.Sleep(time.Millisecond)
		}
	}
	var g account.Group
	for try := 0; ; try++ {
		var ok bool
		if g, ok = cut(); ok {
			break
		}
		if try == 4 {
			t.Fatal("every deletion finished before it could be cut short")
		}
	}
	if cur, err := accounts.Group(ctx, g.ID); err != nil || !cur.Deleting || cur.Persons == 0 {
		t.Fatalf("after the cut: %+v, %v; want the group marked Deleting, with members left", cur, err)
	}
	_, before, err := st.activity.Organization(ctx, org.ID, 0, 1)
	if err != nil {
		t.Fatal(err)
	}

	finishGroupDeletions(ctx, st, accounts, log)

	if _, err := accounts.Group(ctx, g.ID); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("the group after the job: %v, want ErrNotFound", err)
	}
	for _, id := range ids[:3] {
		if gs, err := accounts.PersonGroups(ctx, id); err != nil || len(gs) != 0 {
			t.Fatalf("person %d's groups after the job: %v, %v", id, gs, err)
		}
	}
	if _, after, err := st.activity.Organization(ctx, org.ID, 0, 1); err != nil || after != before {
		t.Errorf("the job added %d activity records (%v), want none: the cut deletion recorded itself", after-before, err)
	}
}
