package kv

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// Concurrent commits share fsync rounds, and each still returns only after
// a round that started after it committed.
func TestGroupSyncShares(t *testing.T) {
	b, err := OpenBadger(BadgerOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := b.Update(context.Background(), func(tx Txn) error {
				return tx.Set([]byte(fmt.Sprint("k", i)), []byte("v"))
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b.group.mu.Lock()
	rounds := b.group.done
	b.group.mu.Unlock()
	t.Logf("%d commits, %d fsync rounds", n, rounds)
	if rounds == 0 || rounds >= n {
		t.Fatalf("%d commits took %d sync rounds", n, rounds)
	}
}
