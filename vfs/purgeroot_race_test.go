package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"berth/vfs"
)

// TestPurgeRootRaces: a deleted root is purged (and the collector runs)
// in the middle of split operations that touch it: a copy staged into it,
// a copy staged out of it, an upload into it, and an upload into another
// root that deduplicates against its chunks. Whatever each operation
// answers, nothing it reports stored is short, and the stores are
// consistent afterwards.
func TestPurgeRootRaces(t *testing.T) {
	far := time.Now().Add(1000 * time.Hour)
	for _, tc := range []string{"copy into", "copy from", "upload into", "dedup upload"} {
		t.Run(tc, func(t *testing.T) {
			var hook func()
			opts := vfs.WithRefBatch(vfs.WithBatchHook(vfs.Options{}, func(op vfs.Op) {
				if h := hook; h != nil && (op == vfs.OpCopy || op == vfs.OpWrite) {
					hook = nil
					h()
				}
			}), 2)
			fs, live, _, chunks := openHooked(t, opts)
			doomed, err := fs.CreateRoot(ctx, "doomed", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			src, err := fs.Mkdir(ctx, doomed.ID, doomed.FolderID, "src", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var files [][]byte
			for i := range 4 {
				data := body(uint64(60+i), 3<<20)
				files = append(files, data)
				mustWrite(t, fs, doomed.ID, src.ID, fmt.Sprint("f", i), data)
			}
			purge := func() {
				if err := fs.DeleteRoot(ctx, doomed.ID); err != nil {
					t.Error(err)
				}
				if rep, err := fs.PurgeDeleted(ctx, far); err != nil || rep.Roots != 1 {
					t.Errorf("purge: %s %v", rep, err)
				}
				if _, err := fs.GC(ctx); err != nil {
					t.Error(err)
				}
			}
			ran := false
			var keep []uint64
			switch tc {
			case "copy into":
				dst, err := fs.Mkdir(ctx, live.ID, live.FolderID, "dst", vfs.WriteOptions{})
				if err != nil {
					t.Fatal(err)
				}
				for i, data := range files {
					keep = append(keep, mustWrite(t, fs, live.ID, dst.ID, fmt.Sprint("f", i), data).ID)
				}
				keep = append(keep, dst.ID)
				hook = func() { ran = true; purge() }
				_, err = fs.Copy(ctx, live.ID, dst.ID, doomed.ID, doomed.FolderID, "copy", vfs.WriteOptions{})
				if !errors.Is(err, vfs.ErrRootDeleted) {
					t.Errorf("copy into a purged root: %v", err)
				}
			case "copy from":
				hook = func() { ran = true; purge() }
				n, err := fs.Copy(ctx, doomed.ID, src.ID, live.ID, live.FolderID, "copy", vfs.WriteOptions{})
				if err == nil {
					keep = append(keep, n.ID)
					t.Logf("copy from a purged root succeeded")
				} else {
					t.Logf("copy from a purged root: %v", err)
				}
			case "upload into":
				hook = func() { ran = true; purge() }
				_, err := fs.WriteFile(ctx, doomed.ID, src.ID, "new", bytes.NewReader(body(70, 3<<20)), vfs.WriteOptions{})
				if !errors.Is(err, vfs.ErrRootDeleted) {
					t.Errorf("upload into a purged root: %v", err)
				}
			case "dedup upload":
				f := func() { ran = true; purge() }
				chunks.afterHas.Store(&f)
				n, err := fs.WriteFile(ctx, live.ID, live.FolderID, "dup", bytes.NewReader(files[0]), vfs.WriteOptions{})
				if err != nil {
					t.Fatalf("upload deduplicated against a purged root: %v", err)
				}
				if !bytes.Equal(contents(t, fs, live.ID, n.ID), files[0]) {
					t.Fatal("the upload stored other bytes")
				}
				keep = append(keep, n.ID)
			}
			if !ran {
				t.Fatal("the hook did not run")
			}
			checkStore(t, fs, live.ID, keep)
			// Only what the live root keeps is left.
			rep, err := fs.Fsck(ctx, false)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after: %s", rep)
		})
	}
}

// TestPurgeRootInterrupted: a root purge cut short after some of its
// transactions leaves a store that is consistent, and the next run
// finishes it.
func TestPurgeRootInterrupted(t *testing.T) {
	for _, stop := range []int{2, 3, 5, 8} {
		t.Run(fmt.Sprint(stop), func(t *testing.T) {
			fs, live, db, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
			doomed, err := fs.CreateRoot(ctx, "doomed", vfs.RootSync)
			if err != nil {
				t.Fatal(err)
			}
			d, err := fs.Mkdir(ctx, doomed.ID, doomed.FolderID, "d", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			shared := body(80, 3<<20)
			keep := mustWrite(t, fs, live.ID, live.FolderID, "shared", shared)
			for i := range 3 {
				mustWrite(t, fs, doomed.ID, d.ID, fmt.Sprint("f", i), body(uint64(81+i), 3<<20))
				mustWrite(t, fs, doomed.ID, d.ID, fmt.Sprint("f", i), shared)
			}
			if err := fs.DeleteRoot(ctx, doomed.ID); err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			n := 0
			var arm func()
			arm = func() {
				f := func() {
					if n++; n == stop {
						cancel()
						return
					}
					arm()
				}
				db.afterUpdate.Store(&f)
			}
			arm()
			rep, err := fs.PurgeDeleted(cctx, time.Now().Add(time.Hour))
			db.afterUpdate.Store(nil)
			t.Logf("cut: %s %v", rep, err)
			if _, err := fs.GC(ctx); err != nil {
				t.Fatal(err)
			}
			if rep, err := fs.Fsck(ctx, false); err != nil || !rep.OK() {
				t.Fatalf("fsck after the cut: %s %v", rep, err)
			}
			rep, err = fs.PurgeDeleted(ctx, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("second: %s", rep)
			if _, err := fs.Usage(ctx, doomed.ID); !errors.Is(err, vfs.ErrRootDeleted) {
				t.Fatal(err)
			}
			checkStore(t, fs, live.ID, []uint64{keep.ID})
			if rep, err := fs.Fsck(ctx, false); err != nil || rep.Revisions != 1 {
				t.Fatalf("after: %s %v, want only the live file", rep, err)
			}
		})
	}
}
