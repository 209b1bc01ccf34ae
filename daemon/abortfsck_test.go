package daemon

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAbortedUploadThenStop: uploads the client abandons midway (over
// REST and WebDAV) store nothing; after a clean stop the next start needs
// no recovery and fsck --verify is clean: their chunks are noted for the
// collector, not leaked.
func TestAbortedUploadThenStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	bin := buildBinary(t)
	data := filepath.Join(t.TempDir(), "data")
	p := startDaemon(t, bin, data)
	lc := newLCClient(t, p, data)
	for _, dav := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			lc.slowUploadCtx(ctx, "aborted.bin", content(9, 6<<20), 3*time.Second, dav)
		}()
		time.Sleep(1500 * time.Millisecond) // several chunks stored
		cancel()
		<-done
	}
	time.Sleep(300 * time.Millisecond)
	p.stop(t)
	fsck(t, bin, data)
	p = startDaemon(t, bin, data)
	if strings.Contains(p.stderr(), "unclean shutdown") {
		t.Errorf("the start after a clean stop swept as after a crash:\n%s", p.stderr())
	}
	if status, _ := newLCClient(t, p, data).read("aborted.bin"); status != http.StatusNotFound {
		t.Errorf("the aborted upload: GET %d, want 404", status)
	}
	p.stop(t)
}
