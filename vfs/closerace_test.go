package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"berth/vfs"
)

// pausing reads data, then says so on reached and blocks until release
// closes, then ends.
type pausing struct {
	r       io.Reader
	reached chan struct{}
	release chan struct{}
}

func (p *pausing) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err == io.EOF {
		close(p.reached)
		<-p.release
	}
	return n, err
}

// TestCloseWithUploadInFlight: the daemon closes the file system, then the
// metadata store, after its grace period, while an upload may still be
// running. The upload then stores its chunks and can neither reference nor
// note them; a close that recorded a clean shutdown regardless made the
// next start skip the sweep that removes such chunks, and they leaked for
// good.
func TestCloseWithUploadInFlight(t *testing.T) {
	dir := t.TempDir()
	e := openEnv(t, dir)
	root, err := e.fs.CreateRoot(ctx, "r", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	kept := body(1, 700<<10)
	if _, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, "kept", bytes.NewReader(kept), vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	p := &pausing{r: bytes.NewReader(body(2, 2<<20)), reached: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, "late", p, vfs.WriteOptions{})
		done <- err
	}()
	<-p.reached
	if err := e.fs.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.db.Close(); err != nil {
		t.Fatal(err)
	}
	close(p.release)
	if err := <-done; !errors.Is(err, vfs.ErrBusy) {
		t.Fatalf("upload across the close: %v", err)
	}
	// A write that starts after the close stores nothing either.
	if _, err := e.fs.WriteFile(ctx, root.ID, root.FolderID, "later", bytes.NewReader(body(3, 700<<10)), vfs.WriteOptions{}); err == nil {
		t.Fatal("upload after the close succeeded")
	}

	e = openEnv(t, dir)
	defer e.close()
	e.root = root
	if rep, err := e.fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck after restarting: %v (%v)", rep, err)
	}
	n, err := e.fs.Lookup(ctx, root.ID, "/kept")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(t, n.ID); !bytes.Equal(got, kept) {
		t.Fatal("a file stored before the close differs")
	}
	if _, err := e.fs.Lookup(ctx, root.ID, "/late"); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the upload that failed: %v", err)
	}
}
