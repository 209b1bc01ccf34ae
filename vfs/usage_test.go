package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"

	"berth/vfs"
)

// Concurrent writers to one root keep exact accounting, and a quota holds
// under concurrency: no interleaving lets two writes both pass one sum.
func TestUsageConcurrent(t *testing.T) {
	e := newEnv(t)
	const writers, each, size = 8, 12, 1000
	quota := int64(50 * size)
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, fmt.Sprintf("w%d-%d", w, i),
					bytes.NewReader(randBytes(uint64(w*100+i), size)), vfs.WriteOptions{SpaceQuota: quota})
				switch {
				case err == nil:
					mu.Lock()
					stored++
					mu.Unlock()
				case !errors.Is(err, vfs.ErrQuotaExceeded):
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored != 50 || u.FileCount != 50 || u.PhysicalSize != quota {
		t.Fatalf("stored %d files, usage %+v, quota %d", stored, u, quota)
	}
}
