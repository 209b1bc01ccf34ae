package kv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// TestWritesDuringRunGC: commits and id leases made while RunGC flushes
// the memtables wait for it instead of failing (Badger refuses writes
// while it flushes them for RunGC).
func TestWritesDuringRunGC(t *testing.T) {
	s := openDisk(t, t.TempDir(), BadgerOptions{NoSync: true})
	defer s.Close()
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Appendf(nil, "w/%d/%d", w, i)
				err := s.Update(ctx, func(tx Txn) error { return tx.Set(key, make([]byte, 2<<10)) })
				if err == nil {
					err = s.Update(ctx, func(tx Txn) error { return tx.Delete(key) })
				}
				if err == nil {
					_, err = s.NextID(ctx, fmt.Sprint("kind", i%3))
				}
				if err != nil {
					t.Errorf("write during RunGC: %v", err)
					return
				}
			}
		})
	}
	for range 20 {
		if err := s.RunGC(ctx); err != nil {
			t.Errorf("RunGC = %v", err)
		}
	}
	stop.Store(true)
	wg.Wait()
}
