package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/kv"
)

// txJournal keeps the changes whose transactions committed: each Record
// writes a key into its transaction, and only those keys count.
type txJournal struct {
	mu      sync.Mutex
	n       int
	changes map[string]Change
}

func (j *txJournal) Record(tx kv.Txn, c Change) error {
	j.mu.Lock()
	j.n++
	k := fmt.Sprintf("zjournal/%08d", j.n)
	j.changes[k] = c
	j.mu.Unlock()
	return tx.Set([]byte(k), nil)
}

// committed returns the committed changes, in order, as "activity on
// actor" strings.
func (j *txJournal) committed(t *testing.T, db kv.Store) []string {
	t.Helper()
	var out []string
	err := db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte("zjournal/"), nil, func(k, _ []byte) error {
			j.mu.Lock()
			c := j.changes[string(k)]
			j.mu.Unlock()
			out = append(out, fmt.Sprintf("%s by %s on %s %d/%d %s", c.Activity, c.Actor.Type, c.OnType, c.OnCompanyID, c.OnPersonID, c.Action))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoginJournal: a login, a failed login and a lockout each leave a
// record in the transaction that settles the attempt; attempts refused
// by the lock, and unknown logins, leave none.
func TestLoginJournal(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Now()}
	o := testOptions()
	o.Now = clk.Now
	o.Lockout = LockoutOptions{MaxFailures: 2, Window: time.Minute, Duration: 10 * time.Minute}
	j := &txJournal{changes: map[string]Change{}}
	o.Journal = j
	s := newService(t, o)
	org, p := fixture(t, s)
	on := fmt.Sprintf("person %d/%d", org.ID, p.ID)

	if _, err := s.Authenticate(ctx, "alice", pw); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "nobody", "x"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "wrong"); !errors.Is(err, ErrInvalidCredentials) {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "alice", "wrong again"); !errors.Is(err, ErrAccountLocked) {
		t.Fatal(err)
	}
	// Refused by the lock, unchecked: no write, no record.
	for range 5 {
		if _, err := s.Authenticate(ctx, "alice", "wrong"); !errors.Is(err, ErrAccountLocked) {
			t.Fatal(err)
		}
	}
	want := []string{
		fmt.Sprintf("organization_created by system on organization %d/0 ", org.ID),
		"person_created by system on " + on + " ",
		"login by person on " + on + " ",
		"login_failed by system on " + on + " bad_password",
		"login_failed by system on " + on + " bad_password",
		"account_locked by system on " + on + " ",
	}
	got := j.committed(t, s.db)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
