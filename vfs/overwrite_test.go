package vfs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"berth/vfs"
)

// TestOverwrite: Copy, CopyEmpty and Move with Overwrite replace the item of
// that name in the same transaction, so one that is refused (a lock on
// what moves, the quota, the policy, the destination holding the source)
// leaves the item in place, and the usage agrees with a recount.
func TestOverwrite(t *testing.T) {
	for _, large := range []bool{false, true} {
		name := "one transaction"
		if large {
			name = "staged"
		}
		t.Run(name, func(t *testing.T) {
			opts := vfs.Options{}
			if large {
				opts = vfs.WithRefBatch(opts, 1) // every copy of more than an inline file is staged
			}
			e := openEnvWith(t, t.TempDir(), opts)
			t.Cleanup(e.close)
			ctx := context.Background()
			root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			e.root = root
			top := root.FolderID
			kept := func(what string, id uint64, want string) {
				t.Helper()
				n, err := e.fs.Lookup(ctx, root.ID, "/b.txt")
				if err != nil || n.ID != id || string(e.read(t, id)) != want {
					t.Fatalf("%s: b.txt is %+v, %v; want item %d with %q", what, n, err, id, want)
				}
			}
			a := e.write(t, top, "a.txt", randBytes(1, 100_000))
			b := e.write(t, top, "b.txt", []byte("b"))
			over := vfs.WriteOptions{Overwrite: true}

			if _, err := e.fs.Copy(ctx, root.ID, a.ID, root.ID, top, "b.txt", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("Copy onto b.txt without Overwrite: %v, want ErrNameConflict", err)
			}
			if _, err := e.fs.Move(ctx, root.ID, a.ID, top, "b.txt", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("Move onto b.txt without Overwrite: %v, want ErrNameConflict", err)
			}
			q := over
			q.SpaceQuota = 150_000
			if _, err := e.fs.Copy(ctx, root.ID, a.ID, root.ID, top, "b.txt", q); !errors.Is(err, vfs.ErrQuotaExceeded) {
				t.Fatalf("Copy over quota: %v", err)
			}
			kept("Copy over quota", b.ID, "b")
			x := over
			x.ExcludedExtensions = []string{".txt"}
			if _, err := e.fs.Copy(ctx, root.ID, a.ID, root.ID, top, "b.txt", x); !errors.Is(err, vfs.ErrExtensionExcluded) {
				t.Fatalf("Copy to an excluded name: %v", err)
			}
			kept("Copy to an excluded name", b.ID, "b")
			lk, err := e.fs.Lock(ctx, root.ID, a.ID, vfs.LockRequest{Holder: "person:9", Duration: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.fs.Move(ctx, root.ID, a.ID, top, "b.txt", over); !errors.Is(err, vfs.ErrLocked) {
				t.Fatalf("Move of a locked item: %v", err)
			}
			kept("Move of a locked item", b.ID, "b")
			if err := e.fs.Unlock(ctx, root.ID, a.ID, lk.Token); err != nil {
				t.Fatal(err)
			}

			// A folder holding the source cannot be replaced by it.
			p, err := e.fs.Mkdir(ctx, root.ID, top, "p", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := e.write(t, p.ID, "c.txt", []byte("c"))
			if _, err := e.fs.Copy(ctx, root.ID, c.ID, root.ID, top, "p", over); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("Copy onto the folder above: %v", err)
			}
			if _, err := e.fs.Move(ctx, root.ID, c.ID, top, "p", over); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("Move onto the folder above: %v", err)
			}
			if got := string(e.read(t, c.ID)); got != "c" {
				t.Fatalf("c.txt after refusals: %q", got)
			}

			// Replacements that go through.
			cp, err := e.fs.Copy(ctx, root.ID, a.ID, root.ID, top, "b.txt", over)
			if err != nil {
				t.Fatalf("Copy with Overwrite: %v", err)
			}
			kept("Copy with Overwrite", cp.ID, string(randBytes(1, 100_000)))
			if _, err := e.fs.Move(ctx, root.ID, a.ID, top, "b.txt", over); err != nil {
				t.Fatalf("Move with Overwrite: %v", err)
			}
			kept("Move with Overwrite", a.ID, string(randBytes(1, 100_000)))
			if _, err := e.fs.Copy(ctx, root.ID, p.ID, root.ID, top, "b.txt", over); err != nil {
				t.Fatalf("Copy of a folder over a file: %v", err)
			}
			if err := e.fs.PatchProps(ctx, root.ID, p.ID, map[string][]byte{"{urn:z}a": []byte("1")}, nil, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.fs.CopyEmpty(ctx, root.ID, p.ID, root.ID, top, "b.txt", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("CopyEmpty onto b.txt without Overwrite: %v, want ErrNameConflict", err)
			}
			ce, err := e.fs.CopyEmpty(ctx, root.ID, p.ID, root.ID, top, "b.txt", over)
			if err != nil || !ce.Dir {
				t.Fatalf("CopyEmpty with Overwrite: %+v %v", ce, err)
			}
			if kids, _, err := e.fs.List(ctx, root.ID, ce.ID); err != nil || len(kids) != 0 {
				t.Fatalf("CopyEmpty copied %d items, %v", len(kids), err)
			}
			if props, err := e.fs.Props(ctx, root.ID, ce.ID); err != nil || string(props["{urn:z}a"]) != "1" {
				t.Fatalf("CopyEmpty's properties: %v %v", props, err)
			}
			if kids, _, err := e.fs.List(ctx, root.ID, top); err != nil || len(kids) != 2 {
				t.Fatalf("top folder after replacements: %d items, %v; want p and b.txt", len(kids), err)
			}
			u, err := e.fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			if recount, err := e.fs.Audit(ctx, root.ID); err != nil || recount != u {
				t.Fatalf("usage %+v, recount %+v, %v", u, recount, err)
			}
		})
	}
}
