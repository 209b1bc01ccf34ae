package daemon

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fxamacker/cbor/v2"

	"berth/account"
	"berth/berthtest"
	"berth/config"
	"berth/kv"
	"berth/share"
)

// TestUpgradeInvitations: organization share invitations stored by a
// berth from before invitations expired (48d050e: no expiry in the record,
// no TTL in the store) are dated by the job the daemon runs at start and
// last shares.invitation_ttl from then, as one sent that day would. Before,
// each counted as expired from the upgrade on: an invitation mailed the
// day before was answered "expired" at its first click.
func TestUpgradeInvitations(t *testing.T) {
	ctx := context.Background()
	st, log := tempStores(t, config.Default())
	const ttl = share.DefaultInvitationTTL
	upgrade := time.Now().Truncate(time.Second)
	clock := berthtest.NewClock(upgrade)
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	shares := share.New(share.Options{FS: st.files, Accounts: accounts, Store: st.db, Now: clock.Now})

	tests := []struct {
		name  string
		after time.Duration // from the upgrade to the acceptance
		want  error
	}{
		{"at once", 0, nil},
		{"six days on", 6 * 24 * time.Hour, nil},
		{"a week on", ttl, share.ErrInvitationExpired},
		{"a month on", 30 * 24 * time.Hour, share.ErrInvitationExpired},
	}
	// What the previous release stored: the share's subscribers with the
	// address invited, and its invitation without an expiry or a TTL.
	oldInvite := func(root uint64, email, token string) {
		t.Helper()
		subs, err := cbor.Marshal(struct {
			External map[string]string `cbor:"3,keyasint"`
		}{map[string]string{email: share.ExternalInvited}})
		if err != nil {
			t.Fatal(err)
		}
		inv, err := cbor.Marshal(struct {
			RootID uint64 `cbor:"1,keyasint"`
			Email  string `cbor:"2,keyasint"`
		}{root, email})
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256([]byte(token))
		if err := st.db.Update(ctx, func(tx kv.Txn) error {
			if err := tx.Set(kv.Key(kv.ShareSubscribers, root), subs); err != nil {
				return err
			}
			return tx.Set(kv.KeyString(kv.ShareInvite, nil, string(h[:])), inv)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range tests {
		oldInvite(uint64(100+i), fmt.Sprintf("guest%d@elsewhere.example", i), fmt.Sprintf("token-%d", i))
	}
	// One the new berth answers before the job has run: live still.
	oldInvite(99, "early@elsewhere.example", "token-early")
	if _, err := shares.AcceptInvitation(ctx, "token-early"); err != nil {
		t.Fatalf("an old invitation before the start's job: %v, want it accepted", err)
	}

	dateInvitations(ctx, st, shares, log)

	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clock.Set(upgrade.Add(tc.after))
			in, err := shares.AcceptInvitation(ctx, fmt.Sprintf("token-%d", i))
			if !errors.Is(err, tc.want) {
				t.Fatalf("accepting %s after the upgrade: %v, want %v", tc.after, err, tc.want)
			}
			if err == nil && (in.RootID != uint64(100+i) || in.Email != fmt.Sprintf("guest%d@elsewhere.example", i)) {
				t.Fatalf("accepted %+v", in)
			}
		})
	}
}

// TestUpgradeLinkSubjects: the index of the links a guest subscribes to
// (guest/<id>/shares), as the release before left it, is mended by the
// job the daemon runs at start. That release deleted a guest's entry when
// a group of the guest's id was removed from the link, the guest staying
// on it, and left an entry over when a failure came between its two
// transactions of a removal.
func TestUpgradeLinkSubjects(t *testing.T) {
	ctx := context.Background()
	st, log := tempStores(t, config.Default())
	accounts := st.newAccounts(account.Options{Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	shares := share.New(share.Options{FS: st.files, Accounts: accounts, Store: st.db})
	const guest = 7
	// What the release before stored: link 1 with the guest on it and
	// no index entry (its group 7 removed), link 2 without the guest
	// and an index entry of theirs.
	oldLink := func(id uint64, subs string) []byte {
		return fmt.Appendf(nil, `{"id":%d,"hash":"link-%d-hash","root_id":1,"file_id":5,"creator_id":2,"read_access":true,"next_sub":2,"subscribers":[%s]}`, id, id, subs)
	}
	if err := st.db.Update(ctx, func(tx kv.Txn) error {
		if err := tx.Set(kv.Key(kv.ShareLink, 1), oldLink(1, `{"id":1,"hash":"sub-1-hash","kind":"guest","subject_id":7,"read_access":true}`)); err != nil {
			return err
		}
		if err := tx.Set(kv.Key(kv.ShareLink, 2), oldLink(2, `{"id":2,"hash":"sub-2-hash","kind":"group","subject_id":7,"read_access":true}`)); err != nil {
			return err
		}
		return tx.Set(kv.Key(kv.ShareLinkSubject, guest, 2), nil)
	}); err != nil {
		t.Fatal(err)
	}

	indexLinkSubjects(ctx, st, shares, log)

	links, err := shares.SubjectLinks(ctx, guest)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, l := range links {
		ids = append(ids, l.ID)
	}
	if fmt.Sprint(ids) != "[1]" {
		t.Errorf("the guest's links after the start's job: %v, want [1]", ids)
	}
}
