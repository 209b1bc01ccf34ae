package account

import (
	"context"
	"sync"
	"testing"
	"time"

	"berth/kv"
	"berth/kv/badger"
)

// cheap argon2 parameters: tests exercise the format, not the cost.
var testArgon = Argon2Params{Memory: 1024, Time: 1, Threads: 1, SaltLength: 16, KeyLength: 32}

func testOptions() Options {
	o := DefaultOptions()
	o.Argon2 = testArgon
	return o
}

func openDB(t testing.TB) kv.Store {
	t.Helper()
	db, err := badger.Open(badger.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newService(t testing.TB, o Options) *Service {
	t.Helper()
	return New(openDB(t), o)
}

const pw = "correct horse battery"

// fixture creates an organization and one person "alice".
func fixture(t testing.TB, s *Service) (Organization, Person) {
	t.Helper()
	ctx := context.Background()
	org, err := s.CreateOrganization(ctx, OrganizationInput{Name: "Acme Corp", Email: "it@acme.example"})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.CreatePerson(ctx, PersonInput{
		OrganizationID: org.ID, Username: "Alice", Email: "Alice@Acme.example",
		FirstName: "Alice", LastName: "Liddell", Password: pw,
	})
	if err != nil {
		t.Fatal(err)
	}
	return org, p
}

// clock is a settable Options.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func countKeys(t *testing.T, s *Service, prefix string) int {
	t.Helper()
	n := 0
	err := s.db.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan([]byte(prefix), nil, func(_, _ []byte) error { n++; return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing after limit. It waits for
// TTL expiry, not measuring speed.
func waitFor(t *testing.T, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
