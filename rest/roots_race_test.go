package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"berth/account"
	"berth/kv"
	"berth/kv/badger"
	"berth/vfs"
)

// Roots created while their owner (a person, an organization) is being
// deleted: none may outlive it.

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

// orgDeleteHook is the metadata store with one hook: during runs inside
// the transaction that removes organization child from parent's list
// (account.DeleteOrganization's), after its closure and before its
// commit, as a request on another connection would commit there.
type orgDeleteHook struct {
	*badger.DB
	mu            sync.Mutex
	parent, child uint64
	during        func()
}

func (h *orgDeleteHook) Update(ctx context.Context, fn func(kv.Txn) error) error {
	return h.DB.Update(ctx, func(tx kv.Txn) error {
		if err := fn(tx); err != nil {
			return err
		}
		h.mu.Lock()
		during := h.during
		h.mu.Unlock()
		if during == nil {
			return nil
		}
		if _, err := tx.Get(kv.Key(kv.AccountOrgChild, h.parent, h.child)); !errors.Is(err, kv.ErrNotFound) {
			return err // not the deletion
		}
		h.mu.Lock()
		h.during = nil
		h.mu.Unlock()
		during()
		return nil
	})
}

// TestOrganizationDeleteDuringRootsCreate: a root made for a person of an
// organization while the organization's delete runs, after the delete
// has deleted the roots it found, is deleted too: no live root outlives
// its organization, counted in the tallies, reached by nobody. Before,
// the roots were listed once, before the organization's deletion, as a
// person's delete now lists them again after theirs.
func TestOrganizationDeleteDuringRootsCreate(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(badger.Options{Dir: filepath.Join(t.TempDir(), "meta")})
	if err != nil {
		t.Fatal(err)
	}
	hook := &orgDeleteHook{DB: db}
	f := newFixtureWith(t, fixtureOptions{Store: hook})
	admin := f.personToken(account.PersonInput{OrganizationID: f.org.ID, Username: "boss", Email: "boss@example.com", Password: fixturePassword, Admin: true})
	kid, err := f.accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Kid", ParentID: f.org.ID})
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: kid.ID, Username: "kim", Email: "kim@example.com", Password: fixturePassword})
	if err != nil {
		t.Fatal(err)
	}
	var made int
	hook.mu.Lock()
	hook.parent, hook.child = f.org.ID, kid.ID
	hook.during = func() {
		req, err := http.NewRequest(http.MethodPost, f.url(fmt.Sprintf("/api/2/person/%d/roots/create", p.ID)), nil)
		if err != nil {
			t.Error(err)
			return
		}
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := f.client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		made = resp.StatusCode
	}
	hook.mu.Unlock()
	if code, body := f.send(http.MethodPost, fmt.Sprintf("/api/2/organization/%d/delete", kid.ID), admin, nil); code != http.StatusOK {
		t.Fatalf("delete: %d %s", code, body)
	}
	if made != http.StatusOK {
		t.Fatalf("the root made alongside: %d", made)
	}
	roots, _, err := f.accounts.OrganizationRoots(ctx, kid.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(roots) == 0 {
		t.Fatal("no root recorded alongside the delete")
	}
	for _, o := range roots {
		if _, err := f.fs.Root(ctx, o.RootID); !errors.Is(err, vfs.ErrRootDeleted) {
			t.Errorf("root %d of the deleted organization: %v, want ErrRootDeleted", o.RootID, err)
		}
	}
}
