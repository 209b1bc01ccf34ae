package webdav

import (
	"fmt"
	"net/http"
	"testing"

	"berth/vfs"
)

// TestBusyIsServiceUnavailable: vfs.ErrBusy (a store closing under a
// request, an intent released before its commit) stored nothing and is worth
// retrying: 503, as REST answers it, not a 500 that clients take for a server fault and give up on.
func TestBusyIsServiceUnavailable(t *testing.T) {
	err := fmt.Errorf("%w: the file system is closed", vfs.ErrBusy)
	if st := classify(err).status; st != http.StatusServiceUnavailable {
		t.Errorf("status of ErrBusy: %d, want 503", st)
	}
}
