package vfs_test

import (
	"bytes"
	"errors"
	"testing"

	"berth/vfs"
)

// TestDeepLockRacesMoveIn: an exclusive deep lock conflicts with any lock
// below its folder. An item locked by someone else and moved into the
// folder while the lock checks the folder's subtree is a child its scan
// does not see, so without a key the move writes and the lock reads both
// commit: two holders then each lock the item against the other.
func TestDeepLockRacesMoveIn(t *testing.T) {
	fs, root, db, _ := openHooked(t, vfs.Options{})
	x, err := fs.Mkdir(ctx, root.ID, root.FolderID, "x", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := fs.Mkdir(ctx, root.ID, x.ID, "sub", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := body(3, 40<<10)
	f, err := fs.WriteFile(ctx, root.ID, root.FolderID, "f", bytes.NewReader(data), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Lock(ctx, root.ID, f.ID, vfs.LockRequest{Holder: "bob"}); err != nil {
		t.Fatal(err)
	}
	bob := vfs.WriteOptions{Principal: "bob"}
	ran := false
	moveIn := func() {
		ran = true
		if _, err := fs.Move(ctx, root.ID, f.ID, sub.ID, "", bob); err != nil {
			t.Errorf("move in: %v", err)
		}
	}
	db.beforeCommit.Store(&moveIn)
	_, err = fs.Lock(ctx, root.ID, x.ID, vfs.LockRequest{Holder: "alice", Deep: true})
	if !ran {
		t.Fatal("the hook did not run")
	}
	if !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("deep lock over an item locked by another, moved in meanwhile: %v", err)
	}
	// Bob's lock still lets him write his file, and it reads back whole.
	data = body(4, 40<<10)
	if _, err := fs.WriteFile(ctx, root.ID, sub.ID, "f", bytes.NewReader(data), bob); err != nil {
		t.Fatal(err)
	}
	file, err := fs.Open(ctx, root.ID, f.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := new(bytes.Buffer)
	_, err = got.ReadFrom(file)
	file.Close()
	if err != nil || !bytes.Equal(got.Bytes(), data) {
		t.Fatalf("contents after the race differ (%v)", err)
	}
	checkStore(t, fs, root.ID, []uint64{f.ID})
}
