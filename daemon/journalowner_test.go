package daemon

import (
	"context"
	"slices"
	"strings"
	"testing"

	"berth/account"
	"berth/vfs"
)

// TestJournalRootOwners: the file journal keeps the roots' owners it
// names (fileJournal.known) only while no commit outside Content came
// between. A root's change made before its owner was recorded names
// none, every change after names the owner, the first read and the next
// kept, and an owner recorded after a change that found none is seen at
// the next.
func TestJournalRootOwners(t *testing.T) {
	ctx := context.Background()
	_, log, st, root := openSpaceStores(t) // the root has no owner yet
	defer func() { st.close(log) }()
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	org, err := accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: org.ID, Username: "alice",
		Email: "alice@example.com", Password: "correct horse battery"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string) {
		t.Helper()
		if _, err := st.files.WriteFile(ctx, root.ID, root.FolderID, name, strings.NewReader(name), vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	named := func() []string {
		t.Helper()
		recs, _, err := st.activity.Person(ctx, p.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			if r.ActedOnType == "file" {
				if r.ActedOnCompanyID != org.ID {
					t.Errorf("%s names organization %d, want %d", r.ActedOnText, r.ActedOnCompanyID, org.ID)
				}
				out = append(out, r.ActedOnText)
			}
		}
		slices.Sort(out)
		return out
	}
	write("before.txt")
	write("before2.txt")
	if _, err := accounts.AddRoot(ctx, account.RootOwner{RootID: root.ID, PersonID: p.ID, Type: "sync"}); err != nil {
		t.Fatal(err)
	}
	write("first.txt")
	write("second.txt")
	write("third.txt")
	if got, want := named(), []string{"first.txt", "second.txt", "third.txt"}; !slices.Equal(got, want) {
		t.Fatalf("changes naming the owner: %q, want %q", got, want)
	}
}
