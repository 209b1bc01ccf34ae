package share_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/account"
	"berth/berthtest"
	"berth/kv"
	"berth/kv/kvtest"
	"berth/share"
)

// linkWorld is newWorld with a store for links and a file of alice's.
func linkWorld(t *testing.T) (*world, uint64) {
	t.Helper()
	w := newWorld(t)
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Store: w.st.DB})
	n, err := w.st.FS.WriteFile(context.Background(), w.aliceRoot.ID, w.aliceRoot.FolderID, "a.txt", strings.NewReader("hello"), share.WriteOptions(w.alice))
	if err != nil {
		t.Fatal(err)
	}
	return w, n.ID
}

// TestCreateLink walks who may create a link and what the settings do.
func TestCreateLink(t *testing.T) {
	w, file := linkWorld(t)
	ctx := context.Background()
	bad := "2026-13-01"
	tests := []struct {
		name string
		c    account.Caller
		root uint64
		set  share.LinkSettings
		want error
	}{
		{"owner", w.alice, w.aliceRoot.ID, share.LinkSettings{}, nil},
		{"same organization, not the root's", w.bob, w.aliceRoot.ID, share.LinkSettings{}, share.ErrNoRoot},
		{"other organization", w.carol, w.aliceRoot.ID, share.LinkSettings{}, share.ErrNoRoot},
		{"bad date", w.alice, w.aliceRoot.ID, share.LinkSettings{Expires: &bad}, share.ErrInvalidDate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := w.svc.CreateLink(ctx, tt.c, tt.root, file, false, tt.set)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err == nil && (len(l.Hash) < 22 || l.ID == 0 || !l.ReadAccess) {
				t.Errorf("link %+v", l)
			}
		})
	}
	w.setPolicy(t, func(p *account.Policy) { p.UserCreateShares = false })
	c, _ := w.aliceNow(t)
	if _, err := w.svc.CreateLink(ctx, c, w.aliceRoot.ID, file, false, share.LinkSettings{}); !errors.Is(err, share.ErrForbidden) {
		t.Errorf("user_create_shares false: %v", err)
	}
	w.setPolicy(t, func(p *account.Policy) { p.UserCreateShares, p.SecureShares = true, true })
	c, _ = w.aliceNow(t)
	l, err := w.svc.CreateLink(ctx, c, w.aliceRoot.ID, file, false, share.LinkSettings{})
	if err != nil || !l.LoginRequired {
		t.Errorf("secure_shares: %+v %v", l, err)
	}
	if _, err := w.svc.OpenLink(ctx, l.Hash, nil); !errors.Is(err, share.ErrLoginRequired) {
		t.Errorf("login required, anonymous: %v", err)
	}
	if _, err := w.svc.OpenLink(ctx, l.Hash, &w.bob); !errors.Is(err, share.ErrLoginRequired) {
		t.Errorf("login required, not a subscriber: %v", err)
	}
	if _, err := w.svc.AddSubscriber(ctx, c, l.ID, share.Subscriber{Kind: "person", SubjectID: w.bob.Person.ID, ReadAccess: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.OpenLink(ctx, l.Hash, &w.bob); err != nil {
		t.Errorf("login required, subscriber: %v", err)
	}
	if ls, err := w.svc.SubjectLinks(ctx, w.bob.Person.ID); err != nil || len(ls) != 1 {
		t.Errorf("bob's links: %v %v", ls, err)
	}
}

// TestDownloadLimitConcurrent: 20 parallel reservations of a link with a
// limit of 5 give exactly 5.
func TestDownloadLimitConcurrent(t *testing.T) {
	w, file := linkWorld(t)
	ctx := context.Background()
	five := int64(5)
	lim := &five
	l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{DownloadLimit: &lim})
	if err != nil {
		t.Fatal(err)
	}
	la, err := w.svc.OpenLink(ctx, l.Hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		ok, over int
	)
	for range 20 {
		wg.Go(func() {
			err := w.svc.CountDownload(ctx, la, `"a"`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, share.ErrDownloadLimit):
				over++
			default:
				t.Errorf("reservation: %v", err)
			}
		})
	}
	wg.Wait()
	if ok != 5 || over != 15 {
		t.Errorf("%d downloads, %d refused; want 5 and 15", ok, over)
	}
	got, err := w.svc.ManagedLink(ctx, w.alice, l.Hash)
	if err != nil || got.TimesDownloaded != 5 {
		t.Errorf("times_downloaded %d %v", got.TimesDownloaded, err)
	}
}

// TestCountRequestCuts: under a download_limit an answer is charged
// before it sends and gives back, settled, what it did not send, so a
// download cut and resumed again and again counts once, while what
// ranges send, cut or in flight together, stays bounded by the limit.
// The credit a download gives is for its own content: content a (1000
// bytes) or b (4000, another file of a folder, or its zip); part is
// what the Range asks for.
func TestCountRequestCuts(t *testing.T) {
	w, file := linkWorld(t)
	ctx := context.Background()
	sizes := map[string]int64{"a": 1000, "b": 4000}
	type step struct {
		fromStart bool
		part      int64 // of a resumption
		sent      int64 // -1: still sending at the next step
		refused   bool
		of        string // the content: "a" or "b"
	}
	tests := []struct {
		name  string
		limit int64
		steps []step
		times int64
		// old is how many steps a berth that kept no ResumedETag
		// ran: the link is then stored as it stored it.
		old int
	}{
		{"a download cut twice, resumed, and its credit used, limit 1", 1, []step{
			{true, 0, 300, false, "a"}, {false, 700, 300, false, "a"}, {false, 400, 400, false, "a"},
			{false, 999, 999, false, "a"}, {false, 999, 999, true, "a"}, {true, 0, 1000, true, "a"},
		}, 1, 0},
		{"bytes=1- cut early and resumed, limit 1", 1, []step{
			{false, 999, 10, false, "a"}, {false, 989, 10, false, "a"}, {false, 979, 979, false, "a"},
			{false, 999, 999, true, "a"}, {true, 0, 1000, true, "a"},
		}, 0, 0},
		{"bytes=1- twice at once, limit 1", 1, []step{
			{false, 999, -1, false, "a"}, {false, 999, 999, true, "a"},
		}, 0, 0},
		{"a download and bytes=1- twice at once, limit 2", 2, []step{
			{true, 0, 1000, false, "a"}, {false, 999, -1, false, "a"}, {false, 999, -1, false, "a"}, {false, 999, 999, true, "a"},
		}, 1, 0},
		{"a download cut at 60% and resumed, limit 1", 1, []step{
			{true, 0, 600, false, "a"}, {false, 400, 400, false, "a"},
		}, 1, 0},
		// A download of a bought a free copy of b, whatever their sizes.
		{"a downloaded, then b from byte 1, limit 1", 1, []step{
			{true, 0, 1000, false, "a"}, {false, 3999, 3999, true, "b"}, {false, 999, 999, false, "a"},
		}, 1, 0},
		{"a downloaded, then b from byte 1 in halves, limit 1", 1, []step{
			{true, 0, 1000, false, "a"}, {false, 2000, 2000, true, "b"}, {false, 1999, 1999, true, "b"},
		}, 1, 0},
		{"a downloaded, then b from byte 1, limit 2", 2, []step{
			{true, 0, 1000, false, "a"}, {false, 3999, 3999, false, "b"}, {false, 999, 999, true, "a"}, {true, 0, 1000, true, "a"},
		}, 1, 0},
		// What a cut answer gives back is its own content's credit.
		{"a and b at once, a cut at 60% and resumed, limit 2", 2, []step{
			{true, 0, -1, false, "b"}, {true, 0, 600, false, "a"}, {false, 400, 400, false, "a"}, {false, 3999, 3999, true, "b"},
		}, 2, 0},
		{"b cut and resumed after a was downloaded, limit 2", 2, []step{
			{true, 0, 1000, false, "a"}, {true, 0, 2000, false, "b"}, {false, 2000, 2000, false, "b"}, {false, 999, 999, true, "a"},
		}, 2, 0},
		// A link stored without ResumedETag: its credit goes to the
		// first content resumed (the download the upgrade cut goes on),
		// and is that content's from then on.
		{"a cut by an upgrade and resumed, then b, limit 1", 1, []step{
			{true, 0, 600, false, "a"}, {false, 400, 400, false, "a"}, {false, 3999, 3999, true, "b"}, {false, 999, 999, false, "a"},
		}, 1, 1},
		{"a credit of an old berth's, taken by b, limit 1", 1, []step{
			{true, 0, 1000, false, "a"}, {false, 3999, 3999, false, "b"}, {false, 999, 999, true, "a"},
		}, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := &tt.limit
			l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{DownloadLimit: &lim})
			if err != nil {
				t.Fatal(err)
			}
			la, err := w.svc.OpenLink(ctx, l.Hash, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				if i == tt.old && i > 0 {
					storeAsOld(t, w, l.ID)
				}
				c, err := w.svc.CountRequest(ctx, la, false, true, st.fromStart, `"`+st.of+`"`, st.part, sizes[st.of])
				if refused := errors.Is(err, share.ErrDownloadLimit); refused != st.refused || (err != nil && !refused) {
					t.Fatalf("step %d: %v, want refused %v", i, err, st.refused)
				}
				if st.sent >= 0 {
					if err := c.Settle(ctx, st.sent); err != nil {
						t.Fatal(err)
					}
				}
			}
			got, err := w.svc.ManagedLink(ctx, w.alice, l.Hash)
			if err != nil || got.TimesDownloaded != tt.times {
				t.Errorf("times_downloaded %d %v, want %d", got.TimesDownloaded, err, tt.times)
			}
		})
	}
}

// storeAsOld rewrites link id as a berth that kept no resumed_etag
// stored it: the same record without the field.
func storeAsOld(t *testing.T, w *world, id uint64) {
	t.Helper()
	err := w.st.DB.Update(context.Background(), func(tx kv.Txn) error {
		b, err := tx.Get(kv.Key(kv.ShareLink, id))
		if err != nil {
			return err
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		if _, ok := m["resumed_etag"]; !ok {
			return errors.New("the link stored has no resumed_etag to take away")
		}
		delete(m, "resumed_etag")
		if b, err = json.Marshal(m); err != nil {
			return err
		}
		return tx.Set(kv.Key(kv.ShareLink, id), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// notices records what a Notifier is asked to send.
type notices struct {
	mu     sync.Mutex
	sent   []string
	bodies []string
}

func (n *notices) Notify(_ context.Context, to, subject, body string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sent = append(n.sent, to+": "+subject)
	n.bodies = append(n.bodies, body)
	return nil
}

// TestLinkSubscriberMail: a new e-mail subscriber is mailed its own URL,
// the one way it opens a login_required link, where berth mailed it to no
// one and the creator had to pass it on by hand. Once per subscriber (a
// second add answers the entry and sends nothing), from the creator's
// mail budget, and only where berth knows its public address.
func TestLinkSubscriberMail(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		publicURL string
		perHour   int
		adds      []string
		want      int // mails sent
	}{
		{"one subscriber", "https://files.example.org/", 0, []string{"sam@example.com"}, 1},
		{"the same subscriber twice", "https://files.example.org", 0, []string{"sam@example.com", "SAM@example.com"}, 1},
		{"no public address", "", 0, []string{"sam@example.com"}, 0},
		{"past the creator's budget", "https://files.example.org", 2, []string{"a@example.com", "b@example.com", "c@example.com"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, file := linkWorld(t)
			n := &notices{}
			w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Store: w.st.DB, Notifier: n, PublicURL: tc.publicURL, MailPerHour: tc.perHour})
			l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{})
			if err != nil {
				t.Fatal(err)
			}
			var first share.Subscriber
			for i, addr := range tc.adds {
				sb, err := w.svc.AddSubscriber(ctx, w.alice, l.ID, share.Subscriber{Kind: "email", Email: addr})
				if err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = sb
				}
			}
			if len(n.sent) != tc.want {
				t.Fatalf("mails %q, want %d", n.sent, tc.want)
			}
			if tc.want > 0 {
				want := "https://files.example.org/s/" + first.Hash
				if !strings.HasPrefix(n.sent[0], tc.adds[0]+": ") || !strings.Contains(n.sent[0], "a.txt") || !strings.Contains(n.bodies[0], want) {
					t.Errorf("mail %q %q, want one to %s with %s", n.sent[0], n.bodies[0], tc.adds[0], want)
				}
			}
		})
	}
}

// TestLinkNotify: a counted download of a link with download_notify tells
// the creator; one without tells no one.
func TestLinkNotify(t *testing.T) {
	w, file := linkWorld(t)
	n := &notices{}
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Store: w.st.DB, Notifier: n})
	ctx := context.Background()
	yes := true
	for _, notify := range []*bool{nil, &yes} {
		l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{DownloadNotify: notify})
		if err != nil {
			t.Fatal(err)
		}
		la, err := w.svc.OpenLink(ctx, l.Hash, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.svc.CountDownload(ctx, la, `"a"`); err != nil {
			t.Fatal(err)
		}
	}
	if len(n.sent) != 1 || !strings.HasPrefix(n.sent[0], w.alice.Person.Email+": ") {
		t.Errorf("notices %q, want one to alice", n.sent)
	}

	// A creator's notices go to the address they set, which nothing
	// verifies, naming the item they chose: past MailPerHour in an hour
	// they are not sent, and the downloads go on. Before, each download
	// of a link mailed it, without end.
	clk := berthtest.NewClock(time.Now())
	n = &notices{}
	w.svc = share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Store: w.st.DB, Notifier: n, MailPerHour: 2, Now: clk.Now})
	l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{DownloadNotify: &yes})
	if err != nil {
		t.Fatal(err)
	}
	la, err := w.svc.OpenLink(ctx, l.Hash, nil)
	if err != nil {
		t.Fatal(err)
	}
	download := func() {
		t.Helper()
		if err := w.svc.CountDownload(ctx, la, `"a"`); err != nil {
			t.Fatalf("a download past the notices: %v", err)
		}
	}
	for range 5 {
		download()
	}
	if len(n.sent) != 2 {
		t.Errorf("5 downloads under a budget of 2 an hour: %d notices", len(n.sent))
	}
	clk.Add(time.Hour)
	download()
	if len(n.sent) != 3 {
		t.Errorf("an hour later: %d notices, want 3", len(n.sent))
	}
}

// TestLinkSubscribers: who a login_required link admits, by subscriber
// kind, and which subscribers may be added.
func TestLinkSubscribers(t *testing.T) {
	w, file := linkWorld(t)
	ctx := context.Background()
	yes := true
	l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{LoginRequired: &yes})
	if err != nil {
		t.Fatal(err)
	}
	g, err := w.st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.st.Org.ID, Name: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Accounts.UpdateMembers(ctx, g.ID, account.MembersChange{AddPersons: []uint64{w.bob.Person.ID}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.OpenLink(ctx, l.Hash, &w.bob); !errors.Is(err, share.ErrLoginRequired) {
		t.Fatalf("bob before: %v", err)
	}
	// A disabled group reaches nobody, as a disabled group subscriber of
	// an organization share does.
	gina := w.personIn(t, w.st.Org.ID, "gina", "gina@example.com")
	off, err := w.st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.st.Org.ID, Name: "disbanded"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.st.Accounts.UpdateMembers(ctx, off.ID, account.MembersChange{AddPersons: []uint64{gina.Person.ID}}); err != nil {
		t.Fatal(err)
	}
	no := false
	if _, err := w.st.Accounts.UpdateGroup(ctx, off.ID, account.GroupUpdate{Active: &no}); err != nil {
		t.Fatal(err)
	}
	adds := []struct {
		name string
		sb   share.Subscriber
		want error
	}{
		{"group of the organization", share.Subscriber{Kind: "group", SubjectID: g.ID}, nil},
		{"a group of the organization, disabled", share.Subscriber{Kind: "group", SubjectID: off.ID}, nil},
		{"person of another organization", share.Subscriber{Kind: "person", SubjectID: w.carol.Person.ID}, share.ErrNotFound},
		{"no such group", share.Subscriber{Kind: "group", SubjectID: 99999}, share.ErrNotFound},
		{"a person as a guest", share.Subscriber{Kind: "guest", SubjectID: w.bob.Person.ID}, share.ErrNotFound},
		{"bad e-mail", share.Subscriber{Kind: "email", Email: "nobody"}, account.ErrInvalid},
		// The link's record holds its subscribers, and each download
		// rewrote it whole: 60 KB addresses made that 1.1 MB.
		{"e-mail longer than an address may be", share.Subscriber{Kind: "email", Email: strings.Repeat("x", 243) + "@example.com"}, account.ErrInvalid},
		{"bad kind", share.Subscriber{Kind: "robot"}, account.ErrInvalid},
		{"e-mail of another organization's person", share.Subscriber{Kind: "email", Email: w.carol.Person.Email}, nil},
		{"e-mail nobody's account has", share.Subscriber{Kind: "email", Email: "partner@example.net"}, nil},
		{"e-mail with an s", share.Subscriber{Kind: "email", Email: "sam@example.com"}, nil},
	}
	hashes := map[string]string{}
	for _, tt := range adds {
		t.Run(tt.name, func(t *testing.T) {
			sb, err := w.svc.AddSubscriber(ctx, w.alice, l.ID, tt.sb)
			if !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
			hashes[tt.sb.Email] = sb.Hash
		})
	}
	t.Run("past the subscribers a link holds", func(t *testing.T) {
		full, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range share.MaxLinkSubscribers {
			if _, err := w.svc.AddSubscriber(ctx, w.alice, full.ID, share.Subscriber{Kind: "email", Email: fmt.Sprintf("s%d@example.com", i)}); err != nil {
				t.Fatalf("subscriber %d: %v", i, err)
			}
		}
		if _, err := w.svc.AddSubscriber(ctx, w.alice, full.ID, share.Subscriber{Kind: "email", Email: "one-more@example.com"}); !errors.Is(err, account.ErrInvalid) {
			t.Errorf("subscriber %d: %v, want %v", share.MaxLinkSubscribers+1, err, account.ErrInvalid)
		}
	})
	// Anyone sets their own e-mail address (rest's person update, with
	// their password), to any address no account holds, and none is
	// verified: an address on an account proves nothing. An e-mail
	// subscriber's hash is what was sent to the address, so only that
	// hash, signed in with that address, lets them in; and the address is
	// compared as logins are, where "ſam" is another login than "sam"
	// that strings.EqualFold took for it.
	mallory := w.personIn(t, w.carol.Person.OrganizationID, "mallory", "partner@example.net")
	sigrid := w.personIn(t, w.carol.Person.OrganizationID, "sigrid", "ſam@example.com")
	opens := []struct {
		name string
		c    account.Caller
		ref  string
		want error
	}{
		{"a member of a group subscriber, by the link's hash", w.bob, l.Hash, nil},
		{"a member of a disabled group subscriber, by the link's hash", gina, l.Hash, share.ErrLoginRequired},
		{"a member of a disabled group subscriber, by the link's id", gina, strconv.FormatUint(l.ID, 10), share.ErrNotFound},
		{"an e-mail subscriber, by their own hash", w.carol, hashes[w.carol.Person.Email], nil},
		{"an e-mail subscriber, by the link's hash", w.carol, l.Hash, share.ErrLoginRequired},
		{"an e-mail subscriber, by the link's id", w.carol, strconv.FormatUint(l.ID, 10), share.ErrNotFound},
		{"one who set their address to a subscriber's, by the link's hash", mallory, l.Hash, share.ErrLoginRequired},
		{"one who set their address to a subscriber's, by the link's id", mallory, strconv.FormatUint(l.ID, 10), share.ErrNotFound},
		{"an address that folds to the subscriber's, by its hash", sigrid, hashes["sam@example.com"], share.ErrLoginRequired},
		{"an address that folds to the subscriber's, by the link's hash", sigrid, l.Hash, share.ErrLoginRequired},
	}
	for _, tt := range opens {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := w.svc.OpenLink(ctx, tt.ref, &tt.c); !errors.Is(err, tt.want) {
				t.Errorf("got %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := w.svc.AddSubscriber(ctx, w.bob, l.ID, share.Subscriber{Kind: "email", Email: "x@example.com"}); !errors.Is(err, share.ErrNotFound) {
		t.Errorf("a subscriber added by someone else: %v", err)
	}
}

// personIn adds a person of organization org with e-mail address email
// and returns them signed in.
func (w *world) personIn(t *testing.T, org uint64, username, email string) account.Caller {
	t.Helper()
	p, err := w.st.Accounts.CreatePerson(context.Background(), account.PersonInput{
		OrganizationID: org, Username: username, Email: email, Password: password,
	})
	if err != nil {
		t.Fatal(err)
	}
	return caller(t, w.st, p.ID)
}

// TestLinkSubscriberIndexes: a link's subscribers and the indexes that
// name them (each subscriber's hash; guest/<id>/shares's subject index)
// agree after every change, including one whose write failed after its
// first step, a second add of the same subscriber, and the removal of
// a group whose id is also a guest's. Before, a subscriber was added and
// removed in two transactions (the link, then its indexes): a failure
// between left a subscriber whose URL did not work, or an index naming a
// subscriber that was gone; the same guest could be added twice, and
// removing either entry dropped the subject index both shared, as did
// removing a group of the guest's id.
func TestLinkSubscriberIndexes(t *testing.T) {
	w, file := linkWorld(t)
	ctx := context.Background()
	f := kvtest.NewStepFailer(w.st.DB, -1)
	svc := share.New(share.Options{FS: w.st.FS, Accounts: w.st.Accounts, Store: f})
	guest, err := w.st.Accounts.CreateGuest(ctx, account.GuestInput{OrganizationID: w.st.Org.ID, Email: "gus@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	// A group whose id is the guest's: ids of the two are of two sequences.
	var twin account.Group
	for i := 0; twin.ID < guest.ID && i < 100; i++ {
		if twin, err = w.st.Accounts.CreateGroup(ctx, account.GroupInput{OrganizationID: w.st.Org.ID, Name: "g" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if twin.ID != guest.ID {
		t.Fatalf("no group of id %d (the guest's): the last is %d", guest.ID, twin.ID)
	}
	asGuest := share.Subscriber{Kind: "guest", SubjectID: guest.ID, ReadAccess: true}
	asGroup := share.Subscriber{Kind: "group", SubjectID: twin.ID, ReadAccess: true}
	byMail := share.Subscriber{Kind: "email", Email: "Friend@example.com", ReadAccess: true}
	add := func(sb share.Subscriber) func(l share.Link) error {
		return func(l share.Link) error { _, err := svc.AddSubscriber(ctx, w.alice, l.ID, sb); return err }
	}
	// rewrite stores link l as change leaves it, in place, with what
	// else change sets in tx: a link as an older release left it.
	rewrite := func(l share.Link, change func(tx kv.Txn, l *share.Link) error) error {
		return w.st.DB.Update(ctx, func(tx kv.Txn) error {
			b, err := tx.Get(kv.Key(kv.ShareLink, l.ID))
			if err != nil {
				return err
			}
			if err := json.Unmarshal(b, &l); err != nil {
				return err
			}
			if err := change(tx, &l); err != nil {
				return err
			}
			if b, err = json.Marshal(l); err != nil {
				return err
			}
			return tx.Set(kv.Key(kv.ShareLink, l.ID), b)
		})
	}
	// twice stores a second entry of the guest on link l, as a link
	// stored before a subscriber was kept once may hold.
	twice := func(l share.Link) error {
		return rewrite(l, func(tx kv.Txn, l *share.Link) error {
			sb := l.Subscribers[0]
			l.NextSub++
			sb.ID, sb.Hash = l.NextSub, "second-entry-hash"
			l.Subscribers = append(l.Subscribers, sb)
			return tx.Set(append([]byte(kv.ShareLinkHash), sb.Hash...), kv.Key("", l.ID))
		})
	}
	remove := func(sub uint64) func(l share.Link) error {
		return func(l share.Link) error { return svc.RemoveSubscriber(ctx, w.alice, l.ID, sub) }
	}
	// unlisted deletes the guest's index entry of link l, as the release
	// before's removal of a group of the guest's id (or of a second entry
	// of the guest) did, the guest's entry staying.
	unlisted := func(l share.Link) error {
		return w.st.DB.Update(ctx, func(tx kv.Txn) error {
			return tx.Delete(kv.Key(kv.ShareLinkSubject, guest.ID, l.ID))
		})
	}
	// unsubscribed takes the guest's entries off link l and leaves its
	// index entry, as a failure between the release before's two
	// transactions of a removal did.
	unsubscribed := func(l share.Link) error {
		return rewrite(l, func(_ kv.Txn, l *share.Link) error {
			l.Subscribers = nil
			return nil
		})
	}
	reindex := func(share.Link) error { _, err := svc.IndexLinkSubjects(ctx); return err }
	rows := []struct {
		name string
		// before is added first, then stored is done (when set),
		// unfailed; then op, with the store armed to fail the Update
		// after the first fail (-1: none fails).
		before []share.Subscriber
		stored func(l share.Link) error
		fail   int
		op     func(l share.Link) error
		// guests and entries are how many entries of the guest, and in
		// all, the link then has (-1: either, as long as the indexes
		// agree with them).
		guests, entries int
	}{
		{name: "an add whose step after the link fails", fail: 1, op: add(asGuest), guests: -1, entries: -1},
		{name: "an add whose first step fails", fail: 0, op: add(asGuest), guests: 0, entries: 0},
		{name: "a removal whose step after the link fails", before: []share.Subscriber{asGuest}, fail: 1, op: remove(1), guests: -1, entries: -1},
		{name: "a second add of the same guest answers the first", before: []share.Subscriber{asGuest}, fail: -1, op: func(l share.Link) error {
			sb, err := svc.AddSubscriber(ctx, w.alice, l.ID, share.Subscriber{Kind: "guest", SubjectID: guest.ID, WriteAccess: true})
			if err == nil && (sb.ID != 1 || sb.WriteAccess) {
				return fmt.Errorf("second add answered %+v, want subscriber 1 as it was", sb)
			}
			return err
		}, guests: 1, entries: 1},
		{name: "a second add of an address, in other case, answers the first", before: []share.Subscriber{byMail}, fail: -1, op: func(l share.Link) error {
			sb, err := svc.AddSubscriber(ctx, w.alice, l.ID, share.Subscriber{Kind: "email", Email: "friend@EXAMPLE.com"})
			if err == nil && sb.ID != 1 {
				return fmt.Errorf("second add answered %+v, want subscriber 1", sb)
			}
			return err
		}, guests: 0, entries: 1},
		{name: "removing one of two entries of a guest stored before", before: []share.Subscriber{asGuest}, stored: twice, fail: -1, op: remove(2), guests: 1, entries: 1},
		{name: "removing a group of the guest's id", before: []share.Subscriber{asGuest, asGroup}, fail: -1, op: remove(2), guests: 1, entries: 1},
		// What the release before left (49523ab: a removal deleted the
		// index entry of any kind's id, and two transactions): the
		// start's IndexLinkSubjects mends it.
		{name: "a listing the release before lost is mended at start", before: []share.Subscriber{asGuest}, stored: unlisted, fail: -1, op: reindex, guests: 1, entries: 1},
		{name: "a listing the release before left over is mended at start", before: []share.Subscriber{asGuest}, stored: unsubscribed, fail: -1, op: reindex, guests: 0, entries: 0},
	}
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			l, err := svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, file, false, share.LinkSettings{})
			if err != nil {
				t.Fatal(err)
			}
			for _, sb := range tt.before {
				if err := add(sb)(l); err != nil {
					t.Fatal(err)
				}
			}
			if tt.stored != nil {
				if err := tt.stored(l); err != nil {
					t.Fatal(err)
				}
			}
			f.Arm(tt.fail)
			err = tt.op(l)
			f.Arm(-1)
			if err != nil && !errors.Is(err, kvtest.ErrStep) {
				t.Fatal(err)
			}
			if l, err = svc.ManagedLink(ctx, w.alice, strconv.FormatUint(l.ID, 10)); err != nil {
				t.Fatal(err)
			}
			guests := 0
			for _, sb := range l.Subscribers {
				if _, err := svc.OpenLink(ctx, sb.Hash, nil); err != nil {
					t.Errorf("subscriber %d's hash: %v", sb.ID, err)
				}
				if sb.Kind == "guest" && sb.SubjectID == guest.ID {
					guests++
				}
			}
			if tt.guests >= 0 && guests != tt.guests || tt.entries >= 0 && len(l.Subscribers) != tt.entries {
				t.Errorf("%d entries, %d of the guest; want %d, %d", len(l.Subscribers), guests, tt.entries, tt.guests)
			}
			listed := false
			links, err := svc.SubjectLinks(ctx, guest.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, sl := range links {
				listed = listed || sl.ID == l.ID
			}
			if listed != (guests > 0) {
				t.Errorf("the guest's shares list the link: %v; the link has %d entries of theirs", listed, guests)
			}
		})
	}
}

// TestLinkWriteActor: a write through an anon_edit link names its
// writer in the activity log (share.LinkVisitor): the creator and a
// subscriber as themselves, anyone else as the link's visitor, of the
// creator's organization, with no ids. A signed-in visitor is named only
// when the creator's organization's administrators, whose lists the
// record is in, may read them: carol, of an organization that has no
// part in Acme, was named with her login to Acme's administrators and
// to alice, for whom Other does not exist.
func TestLinkWriteActor(t *testing.T) {
	ctx := context.Background()
	w, _ := linkWorld(t)
	yes := true
	l, err := w.svc.CreateLink(ctx, w.alice, w.aliceRoot.ID, w.aliceRoot.FolderID, true, share.LinkSettings{WriteAccess: &yes, AnonEdit: &yes})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.svc.AddSubscriber(ctx, w.alice, l.ID, share.Subscriber{Kind: "person", SubjectID: w.frank.Person.ID, ReadAccess: true, WriteAccess: true}); err != nil {
		t.Fatal(err)
	}
	child, err := w.st.Accounts.CreateOrganization(ctx, account.OrganizationInput{Name: "Branch", ParentID: w.st.Org.ID})
	if err != nil {
		t.Fatal(err)
	}
	gp, err := w.st.Accounts.CreatePerson(ctx, account.PersonInput{OrganizationID: child.ID, Username: "gina", Email: "gina@example.com", Password: password})
	if err != nil {
		t.Fatal(err)
	}
	gina := caller(t, w.st, gp.ID)
	visitor := fmt.Sprintf("a visitor of share link %d", l.ID)
	for _, tc := range []struct {
		name     string
		c        *account.Caller
		typ      string
		text     string
		personID uint64
		orgID    uint64
	}{
		{"the creator", &w.alice, "person", "alice", w.alice.Person.ID, w.st.Org.ID},
		{"a subscriber", &w.frank, "person", "frank", w.frank.Person.ID, w.st.Org.ID},
		{"not signed in", nil, "sharelink", visitor, 0, w.st.Org.ID},
		{"signed in, of the creator's organization", &w.bob, "sharelink", "bob, " + visitor, 0, w.st.Org.ID},
		{"signed in, of an organization below the creator's", &gina, "sharelink", "gina, " + visitor, 0, w.st.Org.ID},
		{"signed in, of an organization that has no part in the creator's", &w.carol, "sharelink", visitor, 0, w.st.Org.ID},
	} {
		t.Run(tc.name, func(t *testing.T) {
			la, err := w.svc.OpenLink(ctx, l.Hash, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			a, err := w.svc.LinkWrite(ctx, la, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := a.Opts.Actor.(account.Actor)
			if !ok || got.Type != tc.typ || got.Text != tc.text || got.PersonID != tc.personID || got.CompanyID != tc.orgID {
				t.Errorf("actor %+v, want %s %q, person %d, organization %d", a.Opts.Actor, tc.typ, tc.text, tc.personID, tc.orgID)
			}
		})
	}
}
