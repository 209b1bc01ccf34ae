package vfs_test

import (
	"context"
	"errors"
	"fmt"
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

// TestPurgeFolderOfManyProperties: a deleted folder whose items carry
// dead properties within the limits is purged, however many such items
// it holds. Each item's properties are keys its purge deletes; counting
// only the items and their revisions let one purge transaction take more
// of them than the store commits at once (kv.ErrTxnTooBig), and the
// folder, and its root's trash, could then never be purged.
func TestPurgeFolderOfManyProperties(t *testing.T) {
	e := newEnv(t)
	dir, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// 60 properties of 1,000-byte names stay within MaxPropsBytes; 64
	// items of them are about 4 MB of keys to delete.
	set := map[string][]byte{}
	for i := range 60 {
		set[fmt.Sprintf("{ns}%03d%s", i, strings.Repeat("n", 993))] = nil
	}
	for i := range 64 {
		f := e.write(t, dir.ID, fmt.Sprint("f", i), []byte("x"))
		if err := e.fs.PatchProps(ctx, e.root.ID, f.ID, set, nil, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fs.Delete(ctx, e.root.ID, dir.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, dir.ID); err != nil {
		t.Fatalf("purge: %v", err)
	}
	if _, err := e.fs.Stat(ctx, e.root.ID, dir.ID); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("stat of the purged folder: %v, want ErrNotExist", err)
	}
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want, err := e.fs.Audit(ctx, e.root.ID); err != nil || u != want {
		t.Fatalf("usage %+v, recounted %+v (%v)", u, want, err)
	}
}
