package daemon

import (
	"context"
	"fmt"
	"testing"

	"berth/account"
	"berth/activity"
	"berth/berthtest"
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
