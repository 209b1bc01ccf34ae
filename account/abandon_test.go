package account

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth/kv"
)

// TestAbandonedLoginLeavesTheHashQueue: a login whose every caller has
// gone (a client that sends a password and hangs up at once) gives up its
// place in the queue for an argon2 slot: its attempt counts as failed,
// and no hash is computed for nobody. The check used to run to its end
// regardless, so anyone could queue hashes faster than the server computes
// them, without even holding a connection, and hold the CPU and every
// later login for as long as the queue took to drain.
func TestAbandonedLoginLeavesTheHashQueue(t *testing.T) {
	s := newService(t, testOptions())
	_, p := fixture(t, s)
	subject := s.loginSubject("alice", p.ID)
	failures := func() (int, bool) {
		var fr failRecord
		err := s.db.View(context.Background(), func(tx kv.Txn) error {
			return s.get(tx, keyBytes(pfxFail, subject), &fr, ErrNotFound)
		})
		if errors.Is(err, ErrNotFound) {
			return 0, false
		}
		if err != nil {
			t.Fatal(err)
		}
		return fr.Count, true
	}

	// Every slot is busy, as in a burst of logins.
	for range cap(s.hashSlots) {
		s.hashSlots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Authenticate(ctx, "alice", pw)
		done <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if _, ok := failures(); ok {
			break // counted: the check waits for a slot
		}
		if time.Now().After(deadline) {
			t.Fatal("the attempt was never counted")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Authenticate after its caller left: %v, want context.Canceled", err)
	}
	time.Sleep(100 * time.Millisecond) // for the check to see it is alone
	for range cap(s.hashSlots) {
		<-s.hashSlots
	}
	// A check still queued would now take a slot, find the password
	// right and clear the count: a login made for nobody.
	time.Sleep(300 * time.Millisecond)
	if n, ok := failures(); !ok || n != 1 {
		t.Fatalf("after the caller left: failure count %d (present %v), want the attempt counted once and no login made", n, ok)
	}
	// The account works as before.
	if _, err := s.Authenticate(context.Background(), "alice", pw); err != nil {
		t.Fatalf("right password afterwards: %v", err)
	}
}
