package vfs_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"berth/vfs"
)

// The tests here force one request to run entirely inside another's
// transaction, just before it commits (hookKV.beforeCommit), and check what
// both leave: contents byte for byte, fsck, and usage against a recount.

// mustMkdir and mustWrite set up fixtures.
func mustMkdir(t *testing.T, fs *vfs.FS, root, parent uint64, name string) vfs.Node {
	t.Helper()
	n, err := fs.Mkdir(ctx, root, parent, name, vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func mustWrite(t *testing.T, fs *vfs.FS, root, parent uint64, name string, data []byte) vfs.Node {
	t.Helper()
	n, err := fs.WriteFile(ctx, root, parent, name, bytes.NewReader(data), vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// contents reads the current revision of a live file.
func contents(t *testing.T, fs *vfs.FS, root, id uint64) []byte {
	t.Helper()
	f, err := fs.Open(ctx, root, id)
	if err != nil {
		t.Fatalf("open %d: %v", id, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("read %d: %v", id, err)
	}
	return b
}

// inside makes fn run inside the next Update, just before it commits.
func inside(db *hookKV, fn func()) *bool {
	ran := new(bool)
	f := func() {
		*ran = true
		fn()
	}
	db.beforeCommit.Store(&f)
	return ran
}

// TestMovesRaceIntoACycle: folders F0..Fn-1 each move into a subfolder of
// the next, all at once (each inside the previous one's transaction), so
// that together they would close a cycle. All but the outermost commit; it
// must then see the cycle and refuse, leaving a tree.
func TestMovesRaceIntoACycle(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			var folders, subs []vfs.Node
			var files []vfs.Node
			for i := range n {
				f := mustMkdir(t, fs, root.ID, root.FolderID, fmt.Sprintf("f%d", i))
				folders = append(folders, f)
				subs = append(subs, mustMkdir(t, fs, root.ID, f.ID, "sub"))
				files = append(files, mustWrite(t, fs, root.ID, subs[i].ID, "file", body(uint64(i), 30<<10)))
			}
			// A folder cannot move below itself, however deep.
			if _, err := fs.Move(ctx, root.ID, folders[0].ID, subs[0].ID, "", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrNameConflict) {
				t.Fatalf("move into its own subfolder: %v", err)
			}
			errs := make([]error, n)
			var move func(i int)
			move = func(i int) {
				if i+1 < n {
					inside(db, func() { move(i + 1) })
				}
				_, errs[i] = fs.Move(ctx, root.ID, folders[i].ID, subs[(i+1)%n].ID, "", vfs.WriteOptions{})
			}
			move(0)
			if !errors.Is(errs[0], vfs.ErrNameConflict) {
				t.Fatalf("the move closing the cycle: %v", errs[0])
			}
			for i := 1; i < n; i++ {
				if errs[i] != nil {
					t.Fatalf("move %d: %v", i, errs[i])
				}
			}
			for i, f := range files {
				if !bytes.Equal(contents(t, fs, root.ID, f.ID), body(uint64(i), 30<<10)) {
					t.Fatalf("file %d differs", i)
				}
			}
			checkStore(t, fs, root.ID, nil)
		})
	}
}

// TestSameNameWritesRace: a write that finds no file of its name, or the
// revision it replaces, while another write of that name commits first,
// becomes the next revision of the one file; nothing is lost, usage counts
// both, and the revisions list in the order they were committed, the
// current one last.
func TestSameNameWritesRace(t *testing.T) {
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("existing=%v", existing), func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			var first []byte
			if existing {
				first = body(1, 300<<10)
				mustWrite(t, fs, root.ID, root.FolderID, "f", first)
			}
			inner, outer := body(2, 500<<10), body(3, 20<<10)
			var in vfs.Node
			ran := inside(db, func() { in = mustWrite(t, fs, root.ID, root.FolderID, "f", inner) })
			out, err := fs.WriteFile(ctx, root.ID, root.FolderID, "f", bytes.NewReader(outer), vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !*ran {
				t.Fatal("the hook did not run")
			}
			if in.ID != out.ID || in.RevisionID == out.RevisionID {
				t.Fatalf("two writes of one name: file %d revision %d, file %d revision %d", in.ID, in.RevisionID, out.ID, out.RevisionID)
			}
			revs, err := fs.Revisions(ctx, root.ID, out.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := [][]byte{inner, outer}
			if existing {
				want = append([][]byte{first}, want...)
			}
			if len(revs) != len(want) {
				t.Fatalf("%d revisions, want %d", len(revs), len(want))
			}
			if last := revs[len(revs)-1].ID; last != out.RevisionID {
				t.Fatalf("revisions oldest first end with %d, but the current one is %d", last, out.RevisionID)
			}
			for i, r := range revs {
				f, err := fs.OpenRevision(ctx, root.ID, out.ID, r.ID)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(f)
				f.Close()
				if err != nil || !bytes.Equal(b, want[i]) {
					t.Fatalf("revision %d differs (%v)", i, err)
				}
			}
			checkStore(t, fs, root.ID, []uint64{out.ID})
		})
	}
}

// TestCopyRacesPurgeAndCollect: the source of a copy is deleted, purged and
// its chunks collected while the copy is under way, in one transaction or
// between the transactions of a copy built in several. The copy either
// fails or holds every byte; nothing is missing or leaked.
func TestCopyRacesPurgeAndCollect(t *testing.T) {
	for _, split := range []bool{false, true} {
		t.Run(fmt.Sprintf("split=%v", split), func(t *testing.T) {
			opts := vfs.Options{}
			var hook func(vfs.Op)
			if split {
				opts = vfs.WithRefBatch(vfs.WithBatchHook(opts, func(op vfs.Op) {
					if hook != nil && op == vfs.OpCopy {
						h := hook
						hook = nil
						h(op)
					}
				}), 2)
			}
			fs, root, db, _ := openHooked(t, opts)
			src := mustMkdir(t, fs, root.ID, root.FolderID, "src")
			var datas [][]byte
			for i := range 3 {
				datas = append(datas, body(uint64(10+i), 900<<10))
				mustWrite(t, fs, root.ID, src.ID, fmt.Sprintf("f%d", i), datas[i])
			}
			gone := func() {
				if err := fs.Delete(ctx, root.ID, src.ID, vfs.WriteOptions{}); err != nil {
					t.Error(err)
				}
				if err := fs.Purge(ctx, root.ID, src.ID); err != nil {
					t.Error(err)
				}
				if _, err := fs.GC(ctx); err != nil {
					t.Error(err)
				}
			}
			ran := new(bool)
			if split {
				hook = func(vfs.Op) { *ran = true; gone() }
			} else {
				ran = inside(db, gone)
			}
			cp, err := fs.Copy(ctx, root.ID, src.ID, root.ID, root.FolderID, "copy", vfs.WriteOptions{})
			if !*ran {
				t.Fatal("the hook did not run")
			}
			switch {
			case errors.Is(err, vfs.ErrNotExist):
			case err != nil:
				t.Fatal(err)
			default:
				kids, _, err := fs.List(ctx, root.ID, cp.ID)
				if err != nil || len(kids) != len(datas) {
					t.Fatalf("copy holds %d items (%v)", len(kids), err)
				}
				for i, k := range kids {
					if !bytes.Equal(contents(t, fs, root.ID, k.ID), datas[i]) {
						t.Fatalf("copied %s differs", k.Name)
					}
				}
			}
			checkStore(t, fs, root.ID, nil)
		})
	}
}

// TestDeleteRacesChangesInside: while a folder's delete counts what it
// moves to deleted space, another request changes the subtree: a new
// revision, a rename, a move in from outside, a move out, a copy in. Each
// either conflicts with the delete or is counted by it; after the delete
// and a purge the root's usage matches a recount and every byte outside
// the folder is intact.
func TestDeleteRacesChangesInside(t *testing.T) {
	for _, change := range []string{"revision", "rename", "move in", "move out", "copy in", "mkdir"} {
		t.Run(change, func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			d := mustMkdir(t, fs, root.ID, root.FolderID, "d")
			sub := mustMkdir(t, fs, root.ID, d.ID, "sub")
			in := mustWrite(t, fs, root.ID, sub.ID, "in", body(1, 300<<10))
			outside := mustMkdir(t, fs, root.ID, root.FolderID, "outside")
			out := mustWrite(t, fs, root.ID, outside.ID, "out", body(2, 300<<10))
			keep := mustWrite(t, fs, root.ID, root.FolderID, "keep", body(3, 300<<10))
			o := vfs.WriteOptions{}
			var err error
			ran := inside(db, func() {
				switch change {
				case "revision":
					_, err = fs.WriteFile(ctx, root.ID, sub.ID, "in", bytes.NewReader(body(4, 200<<10)), o)
				case "rename":
					_, err = fs.Rename(ctx, root.ID, in.ID, "renamed", o)
				case "move in":
					_, err = fs.Move(ctx, root.ID, out.ID, sub.ID, "", o)
				case "move out":
					_, err = fs.Move(ctx, root.ID, in.ID, outside.ID, "", o)
				case "copy in":
					_, err = fs.Copy(ctx, root.ID, out.ID, root.ID, sub.ID, "copied", o)
				case "mkdir":
					_, err = fs.Mkdir(ctx, root.ID, sub.ID, "new", o)
				}
			})
			if err := fs.Delete(ctx, root.ID, d.ID, o); err != nil {
				t.Fatal(err)
			}
			if !*ran || err != nil {
				t.Fatalf("the change inside: ran %v, %v", *ran, err)
			}
			if err := fs.Purge(ctx, root.ID, d.ID); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(contents(t, fs, root.ID, keep.ID), body(3, 300<<10)) {
				t.Fatal("a file outside the folder differs")
			}
			if change == "move out" && !bytes.Equal(contents(t, fs, root.ID, in.ID), body(1, 300<<10)) {
				t.Fatal("the file moved out differs")
			}
			if change != "move in" && !bytes.Equal(contents(t, fs, root.ID, out.ID), body(2, 300<<10)) {
				t.Fatal("the file outside differs")
			}
			checkStore(t, fs, root.ID, []uint64{in.ID, out.ID, keep.ID})
		})
	}
}

// TestLockRacesWrite: a lock taken on a file, or on its folder, while a
// write by someone else is about to commit refuses that write; the file
// keeps its contents and the refused upload leaks nothing.
func TestLockRacesWrite(t *testing.T) {
	for _, onFolder := range []bool{false, true} {
		t.Run(fmt.Sprintf("folder=%v", onFolder), func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			d := mustMkdir(t, fs, root.ID, root.FolderID, "d")
			old := body(1, 300<<10)
			f := mustWrite(t, fs, root.ID, d.ID, "f", old)
			target := f.ID
			if onFolder {
				target = d.ID
			}
			ran := inside(db, func() {
				if _, err := fs.Lock(ctx, root.ID, target, vfs.LockRequest{Holder: "alice", Deep: true}); err != nil {
					t.Error(err)
				}
			})
			_, err := fs.WriteFile(ctx, root.ID, d.ID, "f", bytes.NewReader(body(2, 600<<10)), vfs.WriteOptions{Principal: "bob"})
			if !*ran {
				t.Fatal("the hook did not run")
			}
			if !errors.Is(err, vfs.ErrLocked) {
				t.Fatalf("write under a lock taken meanwhile: %v", err)
			}
			if !bytes.Equal(contents(t, fs, root.ID, f.ID), old) {
				t.Fatal("the locked file changed")
			}
			checkStore(t, fs, root.ID, []uint64{f.ID})
		})
	}
}
