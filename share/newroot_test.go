package share_test

import (
	"context"
	"errors"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/share"
	"berth/vfs"
)

// TestNewRootOfDeletedPerson: a root made for a person deleted meanwhile
// (roots/create racing the person's delete) is refused, and leaves
// nothing counted: no live root in the organization's tallies that
// nobody owns and nobody can delete.
func TestNewRootOfDeletedPerson(t *testing.T) {
	ctx := context.Background()
	st := berthtest.New(t, berthtest.Options{})
	svc := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
	p, err := st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: st.Org.ID, Username: "gone",
		Email: "gone@example.com", NoPassword: true})
	if err != nil {
		t.Fatal(err)
	}
	before, err := st.FS.TallyUsage(ctx, account.TallyOrg(st.Org.ID, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Accounts.DeletePerson(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.NewRoot(ctx, p, p.Username, vfs.RootSync); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("NewRoot of a deleted person: %v, want account.ErrNotFound", err)
	}
	after, err := st.FS.TallyUsage(ctx, account.TallyOrg(st.Org.ID, ""))
	if err != nil {
		t.Fatal(err)
	}
	if after.RootCount != before.RootCount {
		t.Errorf("the organization's tally counts %d roots, %d before the refused one", after.RootCount, before.RootCount)
	}
}
