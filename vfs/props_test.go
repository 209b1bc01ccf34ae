package vfs_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

func TestPropsPatchCopyMovePurge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	dir, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := e.fs.WriteFile(ctx, e.root.ID, dir.ID, "f.txt", strings.NewReader("x"), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set := map[string][]byte{"{ns}a": []byte("1"), "{ns}b": []byte("<x/>")}
	if err := e.fs.PatchProps(ctx, e.root.ID, f.ID, set, nil, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.PatchProps(ctx, e.root.ID, f.ID, map[string][]byte{"{ns}c": []byte("3")}, []string{"{ns}a", "{ns}missing"}, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"{ns}b": []byte("<x/>"), "{ns}c": []byte("3")}
	check := func(id uint64) {
		t.Helper()
		got, err := e.fs.Props(ctx, e.root.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		if !maps.EqualFunc(got, want, func(a, b []byte) bool { return string(a) == string(b) }) {
			t.Fatalf("props of %d = %q, want %q", id, got, want)
		}
	}
	check(f.ID)
	bulk, err := e.fs.PropsOf(ctx, e.root.ID, []uint64{f.ID, dir.ID, 424242})
	if err != nil || len(bulk) != 1 || string(bulk[f.ID]["{ns}c"]) != "3" {
		t.Fatalf("PropsOf = %v, %v; want only the file's", bulk, err)
	}

	// A lock refuses a patch by someone without the token.
	lk, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Holder: "h", Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.fs.PatchProps(ctx, e.root.ID, f.ID, map[string][]byte{"{ns}z": nil}, nil, vfs.WriteOptions{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("patch of a locked file: %v, want ErrLocked", err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, f.ID, lk.Token); err != nil {
		t.Fatal(err)
	}
	check(f.ID)

	// Copy (of the folder) carries them; Move keeps them.
	cp, err := e.fs.Copy(ctx, e.root.ID, dir.ID, e.root.ID, top, "d2", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cf, err := e.fs.Lookup(ctx, e.root.ID, "/d2/f.txt")
	if err != nil {
		t.Fatal(err)
	}
	check(cf.ID)
	if _, err := e.fs.Move(ctx, e.root.ID, f.ID, top, "moved.txt", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check(f.ID)

	// Deleted items have none to read; purged ones have none left at all.
	if err := e.fs.Delete(ctx, e.root.ID, cp.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Props(ctx, e.root.ID, cf.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("props of a deleted file: %v, want ErrNotExist", err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, cp.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.PatchProps(ctx, e.root.ID, cf.ID, nil, nil, vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("patch of a purged file: %v, want ErrNotExist", err)
	}
}
