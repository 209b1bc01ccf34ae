package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"berth/account"
	"berth/vfs"
)

// TestPersonDeleteRacingRootsCreate: a person's delete racing the
// creation of their sync root leaves no live root behind the deleted
// person, and the organization's tally counts exactly its live roots.
func TestPersonDeleteRacingRootsCreate(t *testing.T) {
	k := newIsoCast(t)
	ctx := context.Background()
	org := k.p.org.ID
	for i := 0; i < 30; i++ {
		p := k.person(k.p)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			k.f.send(http.MethodPost, fmt.Sprintf("/api/2/person/%d/roots/create", p.ID), k.p.adminTok, nil)
		}()
		go func() {
			defer wg.Done()
			k.f.send(http.MethodPost, fmt.Sprintf("/api/2/person/%d/delete", p.ID), k.p.adminTok, nil)
		}()
		wg.Wait()
	}
	roots, _, err := k.f.accounts.OrganizationRoots(ctx, org, 0, 10000)
	if err != nil {
		t.Fatal(err)
	}
	live := int64(0)
	for _, o := range roots {
		_, rerr := k.f.fs.Root(ctx, o.RootID)
		if errors.Is(rerr, vfs.ErrRootDeleted) {
			continue
		}
		if rerr != nil {
			t.Fatal(rerr)
		}
		live++
		if _, err := k.f.accounts.Person(ctx, o.PersonID); errors.Is(err, account.ErrNotFound) {
			t.Errorf("root %d of deleted person %d is live", o.RootID, o.PersonID)
		}
	}
	u, err := k.f.fs.TallyUsage(ctx, account.TallyOrg(org, ""))
	if err != nil {
		t.Fatal(err)
	}
	if u.RootCount != live {
		t.Errorf("the organization's tally counts %d roots; %d are live", u.RootCount, live)
	}
}
