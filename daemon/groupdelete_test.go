package daemon

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"berth/account"
	"berth/activity"
	"berth/berthtest"
	"berth/config"
	"berth/kv/badger"
)

// TestGroupDeletionActivity: deleting a group leaves in the activity log
// the one record a small group's deletion leaves, however many members
// it had, on a store with the least memtable memory.kv_memtable takes
// (1 MiB), where its 10,000 memberships go in many transactions (there a
// full group's deletion failed with kv.ErrTxnTooBig). That the record
// comes with the first of them, so that a deletion cut short leaves none
// of its batches unrecorded, is account's TestDeleteFullGroup.
func TestGroupDeletionActivity(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(badger.Options{Dir: t.TempDir(), MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	log := activity.New(db, activity.Options{})
	st := berthtest.New(t, berthtest.Options{Store: db, Accounts: account.Options{Journal: accountJournal{log}}})
	ins := make([]account.PersonInput, account.MaxGroupMembers)
	for i := range ins {
		name := fmt.Sprint("member", i)
		ins[i] = account.PersonInput{OrganizationID: st.Org.ID, Username: name, Email: name + "@example.com", NoPassword: true}
	}
	persons, err := st.Accounts.CreatePersons(ctx, ins)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, len(persons))
	for i, p := range persons {
		ids[i] = p.ID
	}
	deleted, _ := log.Type(account.ActGroupDeleted)
	for _, tc := range []struct {
		name    string
		members []uint64
	}{
		{"a small group", ids[:3]},
		{"a full group", ids},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: st.Org.ID, Name: "G"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.Accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: tc.members}); err != nil {
				t.Fatal(err)
			}
			_, before, err := log.Organization(ctx, st.Org.ID, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.Accounts.DeleteGroup(ctx, g.ID); err != nil {
				t.Fatal(err)
			}
			recs, after, err := log.Organization(ctx, st.Org.ID, 0, 1)
			if err != nil {
				t.Fatal(err)
			}
			if after != before+1 {
				t.Fatalf("the deletion added %d records to the organization's activity, want 1", after-before)
			}
			r := recs[0]
			if r.ActivityTypeID != deleted.ID || r.ActedOnType != "group" || r.ActedOnGroupID != g.ID || r.ActedOnText != "G" || r.ActedOnCompanyID != st.Org.ID {
				t.Errorf("the deletion's record: %+v; want group_deleted of group %d", r, g.ID)
			}
		})
	}
}

// TestFinishGroupDeletions: a large group's deletion cut short between
// its batches (the request's context ended, as a crash would end it)
// leaves the group marked Deleting; the job the daemon runs at start
// finishes it: the group and every membership go, and the organization's
// activity holds the one group_deleted record. Before, such a group
// stayed, with part of its members, until someone deleted it again.
func TestFinishGroupDeletions(t *testing.T) {
	ctx := t.Context()
	cfg := config.Default()
	// 1 MiB memtables: a full group's memberships go in many batches.
	cfg.Memory.KVMemtable = 1 << 20
	st, log := tempStores(t, cfg)
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
