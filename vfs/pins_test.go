package vfs

import (
	"testing"
	"time"

	"berth/vfs/chunk"
)

// TestPinSet: the collector skips a pinned chunk, and a pin taken while the
// chunk is being removed returns only once it is gone; pins of other
// chunks do not wait.
func TestPinSet(t *testing.T) {
	var p pinSet
	a, b := chunk.ID{1}, chunk.ID{2}
	p.Pin(a)
	p.Pin(a)
	p.Unpin(a)
	if ran, err := p.deleteUnpinned(a, func() error { t.Error("removed a pinned chunk"); return nil }); ran || err != nil {
		t.Fatalf("pinned: ran %v, %v", ran, err)
	}
	p.Unpin(a)

	removing, release := make(chan struct{}), make(chan struct{})
	gone := false
	finished := make(chan bool)
	go func() {
		ran, err := p.deleteUnpinned(a, func() error {
			close(removing)
			<-release
			gone = true
			return nil
		})
		finished <- ran && err == nil
	}()
	<-removing
	p.Pin(b) // another chunk: no wait
	pinned := make(chan bool)
	go func() {
		p.Pin(a)
		pinned <- gone
	}()
	select {
	case <-pinned:
		t.Fatal("a pin returned while its chunk was being removed")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if !<-pinned {
		t.Fatal("the pin returned before the removal ended")
	}
	if !<-finished {
		t.Fatal("the unpinned chunk was not removed")
	}
	if ran, _ := p.deleteUnpinned(a, func() error { return nil }); ran {
		t.Fatal("removed a chunk pinned after the last removal")
	}
}
