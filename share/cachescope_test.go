package share_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/kv/badger"
	"berth/share"
)

// readLog is a store that notes the keys its read transactions read,
// while on: what a cache derives its entries from.
type readLog struct {
	kv.Store
	mu   sync.Mutex
	on   bool
	keys [][]byte
}

// MetaGeneration passes the store's on, which embedding would hide: the
// caches under test key on it.
func (r *readLog) MetaGeneration() uint64 { return kv.MetaGeneration(r.Store) }

func (r *readLog) View(ctx context.Context, fn func(kv.Txn) error) error {
	return r.Store.View(ctx, func(tx kv.Txn) error { return fn(readTxn{tx, r}) })
}

func (r *readLog) note(k []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.keys = append(r.keys, slices.Clone(k))
	}
}

func (r *readLog) set(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on, r.keys = on, nil
}

type readTxn struct {
	kv.Txn
	r *readLog
}

func (t readTxn) Get(k []byte) ([]byte, error) {
	t.r.note(k)
	return t.Txn.Get(k)
}

func (t readTxn) Scan(prefix, start []byte, fn func(k, v []byte) error) error {
	t.r.note(prefix)
	return t.Txn.Scan(prefix, start, func(k, v []byte) error { t.r.note(k); return fn(k, v) })
}

func (t readTxn) ScanReverse(prefix, start []byte, fn func(k, v []byte) error) error {
	t.r.note(prefix)
	return t.Txn.ScanReverse(prefix, start, func(k, v []byte) error { t.r.note(k); return fn(k, v) })
}

// TestCachedReadsOutsideContent: what the caches keyed on
// kv.MetaGeneration derive their entries from is read outside kv.Content,
// which file writes change without moving that generation. Those caches
// are account's LoginCallerRef, AccessCaller, DeviceCallerRef, the two-step
// answer, the roots' owners (RootOwnerOf) and a person's groups
// (PersonGroups), share's subscribed shares of a person, and WebDAV's
// mounts, which are share.Roots of the caller. A read
// of file content there would be a revocation that a file write leaves
// unseen, or an answer frozen while the files change under it. The one
// exception is the location of a root's top folder (vfs's N/), which vfs
// writes only beside the top folder's record (F/, not content).
func TestCachedReadsOutsideContent(t *testing.T) {
	ctx := context.Background()
	db, err := badger.Open(badger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	log := &readLog{Store: db}
	st := berthtest.New(t, berthtest.Options{Store: log})
	svc := share.New(share.Options{FS: st.FS, Accounts: st.Accounts})
	alice, aliceRoot, _ := st.AddPerson(t, "alice", password)
	adm, err := st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: st.Org.ID, Username: "adm",
		Email: "adm@example.com", Password: password, Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	admin := caller(t, st, adm.ID)
	// Alice reaches two shares: one directly, one through a group.
	direct, err := svc.CreateOrgShare(ctx, admin, st.Org.ID, "Direct")
	if err != nil {
		t.Fatal(err)
	}
	viaGroup, err := svc.CreateOrgShare(ctx, admin, st.Org.ID, "Team")
	if err != nil {
		t.Fatal(err)
	}
	g, err := st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: st.Org.ID, Name: "Team"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: []uint64{alice.ID}}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		id   uint64
		subs share.Subscribers
	}{
		{direct.ID, share.Subscribers{Persons: []share.Entry{{ID: alice.ID, Channel: share.ChannelWebDAV, Role: share.RoleCollaborator}}}},
		{viaGroup.ID, share.Subscribers{Groups: []share.Entry{{ID: g.ID, Channel: share.ChannelWebDAV, Role: share.RoleViewer}}}},
	} {
		if _, err := svc.SetSubscribers(ctx, admin, st.Org.ID, s.id, s.subs); err != nil {
			t.Fatal(err)
		}
	}
	dp, secret, err := st.Accounts.CreateDevicePassword(ctx, alice.ID, account.DevicePasswordInput{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := st.Accounts.IssueTokens(ctx, alice.ID, dp.MachineID)
	if err != nil {
		t.Fatal(err)
	}
	alice, err = st.Accounts.Person(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}

	// Every cache is empty now: the last commit moved both generations
	// past their entries.
	log.set(true)
	c, err := st.Accounts.LoginCallerRef(ctx, alice.ID, "alice", alice.PasswordHash)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Accounts.AccessCaller(ctx, toks.AccessToken); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := st.Accounts.DeviceCallerRef(ctx, "alice", secret); !ok || err != nil {
		t.Fatalf("DeviceCallerRef: %v, %v", ok, err)
	}
	if _, err := st.Accounts.NeedsDevicePassword(ctx, c); err != nil {
		t.Fatal(err)
	}
	roots, err := svc.Roots(ctx, *c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Accounts.RootOwnerOf(ctx, aliceRoot.ID); err != nil {
		t.Fatal(err)
	}
	keys := log.keys
	log.set(false)
	if len(roots) != 3 {
		t.Fatalf("alice reaches %d roots, want her own and two shares", len(roots))
	}
	if len(keys) == 0 {
		t.Fatal("no read was noted: the caches were not empty, or the log does not see the reads")
	}
	tops := map[string]bool{}
	for _, r := range []uint64{aliceRoot.FolderID, direct.FolderID, viaGroup.FolderID} {
		tops[string(kv.Key(kv.VFSLoc, r))+"/"] = true // vfs ends each id with a slash
	}
	for _, k := range keys {
		if kv.Content(k) && !tops[string(k)] {
			t.Errorf("a cache keyed on MetaGeneration read %q, which is file content (kv.Content)", k)
		}
	}
}
