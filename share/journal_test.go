package share_test

import (
	"context"
	"slices"
	"sync"
	"testing"

	"berth/account"
	"berth/kv"
	"berth/share"
)

// changeLog is an account.Journal that keeps what it is handed.
type changeLog struct {
	mu  sync.Mutex
	got []account.Change
}

func (j *changeLog) Record(_ kv.Txn, c account.Change) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.got = append(j.got, c)
	return nil
}

// TestSharingJournal: creating, changing and deleting a share link, and
// changing an organization share's subscribers, each leave one record
// for the activity log, in the change's transaction, naming the root and
// never the link's hash.
func TestSharingJournal(t *testing.T) {
	ctx := context.Background()
	w, file := linkWorld(t)
	j := &changeLog{}
	accounts := account.New(w.st.DB, account.Options{Journal: j, Argon2: account.Argon2Params{Memory: 64, Time: 1, Threads: 1}})
	svc := share.New(share.Options{FS: w.st.FS, Accounts: accounts, Store: w.st.DB})

	l, err := svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	if _, err := svc.UpdateLink(ctx, w.alice, l.ID, share.LinkSettings{DownloadNotify: &yes}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddSubscriber(ctx, w.alice, l.ID, share.Subscriber{Kind: "email", Email: "friend@example.com", ReadAccess: true}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteLink(ctx, w.alice, l.ID); err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, c := range j.got {
		acts = append(acts, c.Activity)
		if c.OnRootID != w.aliceRoot.ID || c.OnType != "sharelink" {
			t.Errorf("%s acted on %s root %d, want the link's root %d", c.Activity, c.OnType, c.OnRootID, w.aliceRoot.ID)
		}
		if l.Hash != "" && (c.OnText == l.Hash || c.Data == l.Hash) {
			t.Errorf("%s names the link's hash", c.Activity)
		}
	}
	want := []string{account.ActShareLinkCreated, account.ActShareLinkUpdated, account.ActShareLinkUpdated, account.ActShareLinkDeleted}
	if !slices.Equal(acts, want) {
		t.Errorf("records %v, want %v", acts, want)
	}
}
