package daemon

import (
	"bytes"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestKillDuringCollection: the background collection runs every 100ms
// and purges what was deleted, while uploads store and delete files whose
// chunks other uploads store again (deduplicated against chunks the
// collector is about to remove), then SIGKILL. Every upload answered
// before the kill succeeds: the collector leaves alone the chunks an
// upload holds (no 503 over either front end). Files that were kept read
// back byte for byte while it runs and after the restart, and fsck
// --verify is clean.
func TestKillDuringCollection(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data, "--gc-interval", "100ms", "--gc-purge-deleted-after", "1ns")
	lc := newLCClient(t, p, data)

	body := func(k int) []byte { return content(uint64(500+k), 1<<20+k) }
	var (
		mu   sync.Mutex
		kept = map[string]int{} // answered, never deleted: content index
		// The content a churning worker deleted last, which keeping
		// workers store again while the collector may be removing it.
		lastDeleted atomic.Int64
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w*100000 + i // churn: new content every time
				if w >= 2 {
					k = int(lastDeleted.Load())
				}
				name := fmt.Sprintf("w%d-%d.bin", w, i)
				status, err := lc.upload(name, body(k), w%2 == 1)
				if err != nil {
					return
				}
				if status != http.StatusOK && status != http.StatusCreated {
					t.Errorf("upload %s: %d", name, status)
					return
				}
				if w < 2 {
					// Churn: delete it again, for the collector.
					if status, _, err := lc.dav(http.MethodDelete, name, nil); err != nil {
						return
					} else if status != http.StatusNoContent {
						t.Errorf("DELETE %s: %d", name, status)
						return
					}
					lastDeleted.Store(int64(k))
					continue
				}
				mu.Lock()
				kept[name] = k
				mu.Unlock()
				if status, b, err := lc.dav(http.MethodGet, name, nil); err != nil {
					return
				} else if status != 200 || !bytes.Equal(b, body(k)) {
					t.Errorf("%s read back %d, %d bytes while the collector ran", name, status, len(b))
				}
			}
		})
	}
	time.Sleep(3 * time.Second)
	p.kill(t)
	close(stop)
	wg.Wait()
	if !strings.Contains(p.stderr(), "chunk gc") {
		t.Errorf("the collector never ran:\n%s", p.stderr())
	}
	removed := 0
	for _, line := range strings.Split(p.stderr(), "\n") {
		if strings.Contains(line, "chunk gc") && !strings.Contains(line, "removed 0") {
			removed++
		}
	}
	t.Logf("%d collections removed chunks", removed)
	if t.Failed() {
		for _, line := range strings.Split(p.stderr(), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"status":5`) {
				t.Log(line)
			}
		}
	}

	p = startDaemon(t, bin, data, "--gc-interval", "100ms", "--gc-purge-deleted-after", "1ns")
	lc = newLCClient(t, p, data)
	time.Sleep(300 * time.Millisecond) // a collection or two after the restart
	for name, k := range kept {
		if status, b := lc.read(name); status != 200 || !bytes.Equal(b, body(k)) {
			t.Errorf("%s after the restart: %d, %d bytes", name, status, len(b))
		}
	}
	t.Logf("%d files kept", len(kept))
	p.stop(t)
	fsck(t, bin, data)
}
