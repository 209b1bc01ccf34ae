package vfs_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"berth/vfs"
)

// TestRaces holds the cases where two requests meet: each row interleaves
// operations (at a chosen point, through hooks, or many at once) and checks
// that every answer is one a serial order could give and that the stores
// stay consistent. A race found later becomes a row here.
func TestRaces(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"MovesRaceIntoACycle", movesRaceIntoACycle},
		{"SameNameWritesRace", sameNameWritesRace},
		{"CopyRacesPurgeAndCollect", copyRacesPurgeAndCollect},
		{"DeleteRacesChangesInside", deleteRacesChangesInside},
		{"LockRacesWrite", lockRacesWrite},
		{"FolderChangeRacesSmallWriteAt", folderChangeRacesSmallWriteAt},
		{"ItemChangeRacesMoveAt", itemChangeRacesMoveAt},
		{"UploadRacesCollector", uploadRacesCollector},
		// was closerace_test.go
		{"CloseWithUploadInFlight", closeWithUploadInFlight},
		// was deleterace_test.go
		{"DeleteRacesCreateInside", deleteRacesCreateInside},
		// was lockrace_test.go
		{"DeepLockRacesMoveIn", deepLockRacesMoveIn},
		// was purgeroot_race_test.go
		{"PurgeRootRaces", purgeRootRaces},
		// was stress_test.go
		{"ConcurrentTreeChanges", concurrentTreeChanges},
		{"StormAcrossRoots", stormAcrossRoots},
		{"SplitOpRacesFolderChange", splitOpRacesFolderChange},
		{"LockRacesMoveOfParent", lockRacesMoveOfParent},
		{"QuotaStorm", quotaStorm},
		{"StagedEndsRace", stagedEndsRace},
	} {
		t.Run(tc.name, tc.run)
	}
}

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
func movesRaceIntoACycle(t *testing.T) {
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
func sameNameWritesRace(t *testing.T) {
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
func copyRacesPurgeAndCollect(t *testing.T) {
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
func deleteRacesChangesInside(t *testing.T) {
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
func lockRacesWrite(t *testing.T) {
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

// A small write by path (WriteAt, one transaction that walks down to the
// folder, then checks it by id from what the walk read: recMemo, placed)
// while its folder, or the folder above it, is locked, moved away or
// deleted, or its root deleted, by a commit inside its transaction: the
// write conflicts, tries again, and refuses as the folder now is; nothing
// is stored. MkdirAt, DeleteAt and MoveAt (out of the folder, into it,
// within it) walk alike.
func folderChangeRacesSmallWriteAt(t *testing.T) {
	type row struct {
		name    string
		change  func(fs *vfs.FS, root vfs.Root, top, d vfs.Node) error
		want    error
		deletes bool // the change deletes the file a DeleteAt names
	}
	var rows []row
	// The folder, and the folder above: its location too is taken from
	// the walk.
	for _, at := range []struct {
		suffix string
		pick   func(top, d vfs.Node) vfs.Node
	}{
		{"", func(_, d vfs.Node) vfs.Node { return d }},
		{" above", func(top, _ vfs.Node) vfs.Node { return top }},
	} {
		rows = append(rows,
			row{"lock" + at.suffix, func(fs *vfs.FS, root vfs.Root, top, d vfs.Node) error {
				_, err := fs.Lock(ctx, root.ID, at.pick(top, d).ID, vfs.LockRequest{Holder: "alice", Deep: true})
				return err
			}, vfs.ErrLocked, false},
			row{"move" + at.suffix, func(fs *vfs.FS, root vfs.Root, top, d vfs.Node) error {
				n := at.pick(top, d)
				_, err := fs.Rename(ctx, root.ID, n.ID, n.Name+"2", vfs.WriteOptions{})
				return err
			}, vfs.ErrNotExist, false},
			row{"delete" + at.suffix, func(fs *vfs.FS, root vfs.Root, top, d vfs.Node) error {
				return fs.Delete(ctx, root.ID, at.pick(top, d).ID, vfs.WriteOptions{})
			}, vfs.ErrNotExist, true},
		)
	}
	rows = append(rows, row{"delete root", func(fs *vfs.FS, root vfs.Root, top, d vfs.Node) error {
		return fs.DeleteRoot(ctx, root.ID)
	}, vfs.ErrRootDeleted, false})
	for _, tc := range rows {
		// MkdirAt and DeleteAt find their folder by the same walk.
		for _, op := range []struct {
			name string
			do   func(fs *vfs.FS, root vfs.Root) error
		}{
			{"WriteAt", func(fs *vfs.FS, root vfs.Root) error {
				_, _, err := fs.WriteAt(ctx, root.ID, "/top/d/b", bytes.NewReader(body(2, 4096)), vfs.WriteOptions{DeclaredSize: 4096, Principal: "bob"}, nil)
				return err
			}},
			{"MkdirAt", func(fs *vfs.FS, root vfs.Root) error {
				_, err := fs.MkdirAt(ctx, root.ID, "/top/d/b", vfs.WriteOptions{Principal: "bob"}, nil)
				return err
			}},
			{"DeleteAt", func(fs *vfs.FS, root vfs.Root) error {
				return fs.DeleteAt(ctx, root.ID, "/top/d/a", vfs.WriteOptions{Principal: "bob"}, nil)
			}},
			// MoveAt walks both paths: the folder holds the source,
			// the destination, or both.
			{"MoveAt", func(fs *vfs.FS, root vfs.Root) error {
				_, _, err := fs.MoveAt(ctx, root.ID, "/top/d/a", "/top/d/b", vfs.WriteOptions{Principal: "bob"}, nil)
				return err
			}},
			{"MoveAt out", func(fs *vfs.FS, root vfs.Root) error {
				_, _, err := fs.MoveAt(ctx, root.ID, "/top/d/a", "/e/a", vfs.WriteOptions{Principal: "bob"}, nil)
				return err
			}},
			{"MoveAt in", func(fs *vfs.FS, root vfs.Root) error {
				_, _, err := fs.MoveAt(ctx, root.ID, "/e/x", "/top/d/b", vfs.WriteOptions{Principal: "bob"}, nil)
				return err
			}},
		} {
			t.Run(tc.name+"/"+op.name, func(t *testing.T) {
				fs, root, db, _ := openHooked(t, vfs.Options{})
				top := mustMkdir(t, fs, root.ID, root.FolderID, "top")
				d := mustMkdir(t, fs, root.ID, top.ID, "d")
				a := mustWrite(t, fs, root.ID, d.ID, "a", body(1, 4096))
				e := mustMkdir(t, fs, root.ID, root.FolderID, "e")
				x := mustWrite(t, fs, root.ID, e.ID, "x", body(3, 4096))
				ran := inside(db, func() {
					if err := tc.change(fs, root, top, d); err != nil {
						t.Error(err)
					}
				})
				err := op.do(fs, root)
				if !*ran {
					t.Fatal("the hook did not run")
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("%s with a %s committed inside it: %v, want %v", op.name, tc.name, err, tc.want)
				}
				for _, p := range []string{"/top/d/b", "/top/d2/b", "/top2/d/b", "/e/a"} {
					if _, err := fs.Lookup(ctx, root.ID, p); !errors.Is(err, vfs.ErrNotExist) && !errors.Is(err, vfs.ErrRootDeleted) {
						t.Fatalf("%s after a refused %s: %v", p, op.name, err)
					}
				}
				if tc.want == vfs.ErrRootDeleted {
					return
				}
				// The file the delete refused is where the change left
				// it, and no record disagrees with another.
				if n, err := fs.Stat(ctx, root.ID, a.ID); err != nil || n.Deleted != tc.deletes {
					t.Fatalf("a after a refused %s: %+v, %v", op.name, n, err)
				}
				if n, err := fs.Stat(ctx, root.ID, x.ID); err != nil || n.Path != "/e/x" {
					t.Fatalf("x after a refused %s: %+v, %v", op.name, n, err)
				}
				if _, err := fs.Audit(ctx, root.ID); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// A move by path (MoveAt, one transaction that walks down to the source
// and to the destination's folder) while its source is locked, renamed or
// deleted, or an item appears at or is locked at its destination, by a
// commit inside its transaction: the move conflicts, tries again, and
// refuses as the items now are; nothing moves. (Its folders' changes are
// FolderChangeRacesSmallWriteAt's rows.)
func itemChangeRacesMoveAt(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dstFirst  bool // b is at the destination before the move
		overwrite bool
		change    func(fs *vfs.FS, root vfs.Root, a, dst vfs.Node) error
		want      error
		aGone     bool // the change deletes a
	}{
		{"lock source", false, false, func(fs *vfs.FS, root vfs.Root, a, _ vfs.Node) error {
			_, err := fs.Lock(ctx, root.ID, a.ID, vfs.LockRequest{Holder: "alice"})
			return err
		}, vfs.ErrLocked, false},
		{"rename source", false, false, func(fs *vfs.FS, root vfs.Root, a, _ vfs.Node) error {
			_, err := fs.Rename(ctx, root.ID, a.ID, "a2", vfs.WriteOptions{})
			return err
		}, vfs.ErrNotExist, false},
		{"delete source", false, false, func(fs *vfs.FS, root vfs.Root, a, _ vfs.Node) error {
			return fs.Delete(ctx, root.ID, a.ID, vfs.WriteOptions{})
		}, vfs.ErrNotExist, true},
		{"create destination", false, false, func(fs *vfs.FS, root vfs.Root, _, dst vfs.Node) error {
			_, err := fs.WriteFile(ctx, root.ID, dst.ID, "b", bytes.NewReader(body(4, 4096)), vfs.WriteOptions{})
			return err
		}, vfs.ErrNameConflict, false},
		{"lock destination", true, true, func(fs *vfs.FS, root vfs.Root, _, dst vfs.Node) error {
			b, err := fs.Lookup(ctx, root.ID, "/t/b")
			if err == nil {
				_, err = fs.Lock(ctx, root.ID, b.ID, vfs.LockRequest{Holder: "alice"})
			}
			return err
		}, vfs.ErrLocked, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			s := mustMkdir(t, fs, root.ID, root.FolderID, "s")
			dst := mustMkdir(t, fs, root.ID, root.FolderID, "t")
			a := mustWrite(t, fs, root.ID, s.ID, "a", body(1, 4096))
			if tc.dstFirst {
				mustWrite(t, fs, root.ID, dst.ID, "b", body(2, 4096))
			}
			ran := inside(db, func() {
				if err := tc.change(fs, root, a, dst); err != nil {
					t.Error(err)
				}
			})
			_, _, err := fs.MoveAt(ctx, root.ID, "/s/a", "/t/b", vfs.WriteOptions{Principal: "bob", Overwrite: tc.overwrite}, nil)
			if !*ran {
				t.Fatal("the hook did not run")
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("MoveAt with a %s committed inside it: %v, want %v", tc.name, err, tc.want)
			}
			n, err := fs.Stat(ctx, root.ID, a.ID)
			if err != nil || n.Deleted != tc.aGone || (!tc.aGone && n.ParentID != s.ID) {
				t.Fatalf("a after a refused MoveAt: %+v, %v", n, err)
			}
			if b, err := fs.Lookup(ctx, root.ID, "/t/b"); err == nil && b.ID == a.ID {
				t.Fatal("a moved")
			}
			if _, err := fs.Audit(ctx, root.ID); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// An upload that found chunks in the store and skipped them succeeds when
// the collector runs while its body still streams: the chunks it holds
// stay, the others it stores again.
func uploadRacesCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := openEnvWith(t, t.TempDir(), vfs.Options{Registerer: reg})
	t.Cleanup(e.close)
	e.root, _ = e.fs.CreateRoot(ctx, "r", vfs.RootSync)
	data := randBytes(5, 12<<20)
	a := e.write(t, e.root.FolderID, "a", data)
	if err := e.fs.Delete(ctx, e.root.ID, a.ID, vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Purge(ctx, e.root.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	// The same bytes again: the first chunks are found and skipped, then
	// the collector runs before the body ends.
	release := make(chan struct{})
	body := io.MultiReader(bytes.NewReader(data), gate(release))
	type result struct {
		n   vfs.Node
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := e.fs.WriteFile(ctx, e.root.ID, e.root.FolderID, "b", body, vfs.WriteOptions{})
		done <- result{n, err}
	}()
	// Wait until the upload has found (and skipped) a stored chunk.
	for deadline := time.Now().Add(20 * time.Second); metricValue(t, reg, "berth_chunks_deduplicated_total") < 1; {
		if time.Now().After(deadline) {
			t.Fatal("the upload skipped no chunk")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.fs.GC(ctx); err != nil {
		t.Fatal(err)
	}
	close(release)
	b := <-done
	if b.err != nil {
		t.Fatalf("upload while the collector ran: %v", b.err)
	}
	if !bytes.Equal(e.read(t, b.n.ID), data) {
		t.Fatal("the upload stored other bytes")
	}
	e.fs.GC(ctx)
	if rep, err := e.fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck: %v %v", rep, err)
	}
}

// TestCloseWithUploadInFlight: the daemon closes the file system, then the
// metadata store, after its grace period, while an upload may still be
// running. The upload then stores its chunks and can neither reference nor
// note them; a close that recorded a clean shutdown regardless made the
// next start skip the sweep that removes such chunks, and they leaked for
// good.
func closeWithUploadInFlight(t *testing.T) {
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

// TestDeleteRacesCreateInside: a file created in a folder while the
// folder's delete is counting what it moves to deleted space must be
// counted too. The delete's scan of the children does not see a key added
// after its snapshot, so without a key the creation writes and the count
// reads, both commit and usage keeps the new file as live under a deleted
// folder (and a purge then drives the deleted counts below zero).
func deleteRacesCreateInside(t *testing.T) {
	fs, root, db, _ := openHooked(t, vfs.Options{})
	for _, create := range []struct {
		name string
		fn   func(parent uint64) error
	}{
		{"file", func(parent uint64) error {
			_, err := fs.WriteFile(ctx, root.ID, parent, "late.txt", bytes.NewReader([]byte("late")), vfs.WriteOptions{})
			return err
		}},
		{"folder", func(parent uint64) error {
			_, err := fs.Mkdir(ctx, root.ID, parent, "late", vfs.WriteOptions{})
			return err
		}},
	} {
		t.Run(create.name, func(t *testing.T) {
			d, err := fs.Mkdir(ctx, root.ID, root.FolderID, "d-"+create.name, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := fs.Mkdir(ctx, root.ID, d.ID, "sub", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := fs.WriteFile(ctx, root.ID, sub.ID, "early.txt", bytes.NewReader([]byte("early")), vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			before, err := fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			ran := false
			late := func() {
				ran = true
				if err := create.fn(sub.ID); err != nil {
					t.Errorf("create inside: %v", err)
				}
			}
			db.beforeCommit.Store(&late)
			if err := fs.Delete(ctx, root.ID, d.ID, vfs.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			if !ran {
				t.Fatal("the hook did not run")
			}
			if err := fs.Purge(ctx, root.ID, d.ID); err != nil {
				t.Fatal(err)
			}
			u, err := fs.Usage(ctx, root.ID)
			if err != nil {
				t.Fatal(err)
			}
			// The folder and the early file were counted before; after the
			// delete and purge of the whole tree nothing of it may remain.
			want := before
			want.FolderCount -= 2
			want.FileCount--
			want.HeadSize -= int64(len("early"))
			want.PhysicalSize = want.HeadSize + want.RevisionSize + want.DeletedSize
			if u != want {
				t.Fatalf("usage after deleting and purging the folder:\n got %+v\nwant %+v", u, want)
			}
		})
	}
}

// TestDeepLockRacesMoveIn: an exclusive deep lock conflicts with any lock
// below its folder. An item locked by someone else and moved into the
// folder while the lock checks the folder's subtree is a child its scan
// does not see, so without a key the move writes and the lock reads both
// commit: two holders then each lock the item against the other.
func deepLockRacesMoveIn(t *testing.T) {
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

// TestPurgeRootRaces: a deleted root is purged (and the collector runs)
// in the middle of split operations that touch it: a copy staged into it,
// a copy staged out of it, an upload into it, and an upload into another
// root that deduplicates against its chunks. Whatever each operation
// answers, nothing it reports stored is short, and the stores are
// consistent afterwards.
func purgeRootRaces(t *testing.T) {
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

// concurrentTreeChanges runs random writes, moves, renames, copies,
// deletes, purges, locks and collections on one small tree at once, with
// operations split into several transactions from two chunks up, then
// checks that nothing was lost, leaked, corrupted or miscounted.
func concurrentTreeChanges(t *testing.T) {
	fs, root, _, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
	var mu sync.Mutex
	ids := []uint64{root.FolderID}
	dirs := []uint64{root.FolderID}
	add := func(n vfs.Node) {
		mu.Lock()
		ids = append(ids, n.ID)
		if n.Dir {
			dirs = append(dirs, n.ID)
		}
		mu.Unlock()
	}
	// pick prefers live items, as clients mostly name those.
	pick := func(r *rand.Rand, dir bool) uint64 {
		var id uint64
		for range 4 {
			mu.Lock()
			if dir || r.IntN(3) == 0 {
				id = dirs[r.IntN(len(dirs))]
			} else {
				id = ids[r.IntN(len(ids))]
			}
			mu.Unlock()
			if n, err := fs.Stat(ctx, root.ID, id); err == nil && !n.Deleted {
				break
			}
		}
		return id
	}
	for _, a := range []string{"a", "b", "c"} {
		d, err := fs.Mkdir(ctx, root.ID, root.FolderID, a, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		add(d)
		for _, b := range []string{"x", "y"} {
			sub, err := fs.Mkdir(ctx, root.ID, d.ID, b, vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			add(sub)
		}
	}
	names := []string{"a", "b", "c", "d"}
	o := vfs.WriteOptions{}
	const workers, steps = 6, 60
	seed := uint64(7)
	if v := os.Getenv("BERTH_STRESS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	var ok, failed sync.Map
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for range steps {
				name := names[r.IntN(len(names))]
				var err error
				var op string
				switch k := r.IntN(14); k {
				case 0, 1:
					op = "mkdir"
					var n vfs.Node
					if n, err = fs.Mkdir(ctx, root.ID, pick(r, true), name, o); err == nil {
						add(n)
					}
				case 2, 3, 4, 12, 13:
					op = "write"
					size := []int{100, 20 << 10, 300 << 10, 900 << 10}[r.IntN(4)]
					var n vfs.Node
					n, err = fs.WriteFile(ctx, root.ID, pick(r, true), name, bytes.NewReader(body(uint64(r.IntN(6)), size)), o)
					if err == nil {
						add(n)
					}
				case 5:
					op = "move"
					_, err = fs.Move(ctx, root.ID, pick(r, false), pick(r, true), "", o)
				case 6:
					op = "rename"
					_, err = fs.Rename(ctx, root.ID, pick(r, false), name, o)
				case 7:
					op = "copy"
					var n vfs.Node
					if n, err = fs.Copy(ctx, root.ID, pick(r, false), root.ID, pick(r, true), name, o); err == nil {
						add(n)
					}
				case 8:
					op = "delete"
					err = fs.Delete(ctx, root.ID, pick(r, false), o)
				case 9:
					op = "purge"
					mu.Lock()
					id := ids[r.IntN(len(ids))]
					mu.Unlock()
					err = fs.Purge(ctx, root.ID, id)
				case 10:
					op = "lock"
					var l vfs.Lock
					id := pick(r, false)
					l, err = fs.Lock(ctx, root.ID, id, vfs.LockRequest{Deep: r.IntN(2) == 0, Shared: r.IntN(2) == 0})
					if err == nil {
						err = fs.Unlock(ctx, root.ID, id, l.Token)
					}
				case 11:
					op = "gc"
					_, err = fs.GC(ctx)
				}
				if !expected(err) {
					t.Errorf("%s: %v", op, err)
				}
				m, key := &ok, op
				if err != nil {
					m = &failed
					for _, e := range []error{vfs.ErrNotExist, vfs.ErrNameConflict, vfs.ErrLocked, vfs.ErrBusy,
						vfs.ErrNotDir, vfs.ErrIsDir, vfs.ErrRootItem} {
						if errors.Is(err, e) {
							key = op + " " + e.Error()
						}
					}
				}
				c, _ := m.LoadOrStore(key, new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
			}
		})
	}
	wg.Wait()
	for _, m := range []*sync.Map{&ok, &failed} {
		m.Range(func(k, v any) bool {
			t.Logf("%s: %d", k, v.(*atomic.Int64).Load())
			return true
		})
	}
	checkStore(t, fs, root.ID, ids)
}

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

// body returns n bytes that describe themselves: a seed and a length,
// then bytes drawn from the seed. Files with equal seeds share chunks.
func body(seed uint64, n int) []byte {
	n = max(n, 16)
	b := randBytes(seed, n)
	binary.LittleEndian.PutUint64(b, seed)
	binary.LittleEndian.PutUint64(b[8:], uint64(n))
	return b
}

// checkBody reports whether b is a whole body as body made it.
func checkBody(b []byte) error {
	if len(b) < 16 {
		return fmt.Errorf("%d bytes, too short", len(b))
	}
	seed, n := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
	if uint64(len(b)) != n {
		return fmt.Errorf("%d bytes, body of seed %d had %d", len(b), seed, n)
	}
	if !bytes.Equal(b, body(seed, int(n))) {
		return fmt.Errorf("%d bytes of seed %d differ", n, seed)
	}
	return nil
}

// checkStore runs the collector, then checks that nothing is missing,
// leaked or miscounted, that the root's records agree and its usage
// matches a recount, that no intent is left, and that every revision of
// every item (live or deleted) reads back whole.
func checkStore(t *testing.T, fs *vfs.FS, root uint64, ids []uint64) {
	t.Helper()
	for range 2 {
		if _, err := fs.GC(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := fs.Fsck(ctx, true); err != nil || !rep.OK() {
		t.Fatalf("fsck: %v (%v)", rep, err)
	}
	if n, err := fs.IntentParts(ctx); err != nil || n != 0 {
		t.Fatalf("%d intent parts left (%v)", n, err)
	}
	want, err := fs.Audit(ctx, root)
	if err != nil {
		t.Fatalf("audit: %v", err)
	}
	got, err := fs.Usage(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("usage\n got %+v\nrecounted %+v", got, want)
	}
	for _, id := range ids {
		revs, err := fs.Revisions(ctx, root, id)
		if errors.Is(err, vfs.ErrNotExist) || errors.Is(err, vfs.ErrIsDir) {
			continue
		}
		if err != nil {
			t.Fatalf("revisions of %d: %v", id, err)
		}
		for _, r := range revs {
			f, err := fs.OpenRevision(ctx, root, id, r.ID)
			if err != nil {
				t.Fatalf("open %d revision %d: %v", id, r.ID, err)
			}
			b, err := io.ReadAll(f)
			f.Close()
			if err != nil {
				t.Fatalf("read %d revision %d: %v", id, r.ID, err)
			}
			if err := checkBody(b); err != nil {
				t.Fatalf("file %d revision %d: %v", id, r.ID, err)
			}
		}
	}
}

// expected reports whether err is a refusal a request may meet when
// others change the tree under it.
func expected(err error) bool {
	for _, e := range []error{vfs.ErrNotExist, vfs.ErrNameConflict, vfs.ErrLocked, vfs.ErrBusy,
		vfs.ErrNotDir, vfs.ErrIsDir, vfs.ErrRootItem, vfs.ErrNoSuchLock} {
		if errors.Is(err, e) {
			return true
		}
	}
	return err == nil
}

type gate chan struct{}

func (g gate) Read([]byte) (int, error) {
	<-g
	return 0, io.EOF
}

// metricValue is the value of a counter without labels, 0 when absent.
func metricValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) > 0 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// stormAcrossRoots: clients of three roots at once make, write, move
// (folders into one another, so cycles are tried), rename onto one name,
// copy across roots, delete, purge, lock deep and collect, each op split
// into transactions of two chunks. Then every root's usage matches a
// walk, the chunk store its references, and every live folder's kept
// listing sum and count match a scan of its children.
func stormAcrossRoots(t *testing.T) {
	fs, first, _, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
	roots := []vfs.Root{first}
	for _, n := range []string{"bob", "carol"} {
		r, err := fs.CreateRoot(ctx, n, vfs.RootSync)
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, r)
	}
	var mu sync.Mutex
	ids := map[uint64][]uint64{}  // by root: every item made
	dirs := map[uint64][]uint64{} // by root: every folder made
	add := func(root uint64, n vfs.Node) {
		mu.Lock()
		ids[root] = append(ids[root], n.ID)
		if n.Dir {
			dirs[root] = append(dirs[root], n.ID)
		}
		mu.Unlock()
	}
	// pick prefers live items, as clients mostly name those.
	pick := func(r *rand.Rand, root uint64, dir bool) uint64 {
		var id uint64
		for range 4 {
			mu.Lock()
			if dir || r.IntN(3) == 0 {
				id = dirs[root][r.IntN(len(dirs[root]))]
			} else {
				id = ids[root][r.IntN(len(ids[root]))]
			}
			mu.Unlock()
			if n, err := fs.Stat(ctx, root, id); err == nil && !n.Deleted {
				break
			}
		}
		return id
	}
	for _, root := range roots {
		dirs[root.ID] = []uint64{root.FolderID}
		for _, a := range []string{"a", "b"} {
			d := mustMkdir(t, fs, root.ID, root.FolderID, a)
			add(root.ID, d)
			for _, b := range []string{"x", "y"} {
				add(root.ID, mustMkdir(t, fs, root.ID, d.ID, b))
			}
		}
	}
	names := []string{"a", "b", "x", "n"}
	seed := uint64(11)
	if v := os.Getenv("BERTH_STRESS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	const workers, steps = 8, 50
	deadline := time.Now().Add(6 * time.Second)
	var wg sync.WaitGroup
	var tally sync.Map
	for w := range workers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for range steps {
				if time.Now().After(deadline) {
					return
				}
				root := roots[r.IntN(len(roots))].ID
				name := names[r.IntN(len(names))]
				o := vfs.WriteOptions{Overwrite: r.IntN(4) == 0}
				var err error
				var n vfs.Node
				op := ""
				switch r.IntN(18) {
				case 0, 1:
					op = "mkdir"
					if n, err = fs.Mkdir(ctx, root, pick(r, root, true), name, vfs.WriteOptions{}); err == nil {
						add(root, n)
					}
				case 2, 3, 4:
					op = "write"
					size := []int{100, 20 << 10, 300 << 10}[r.IntN(3)]
					if n, err = fs.WriteFile(ctx, root, pick(r, root, true), name, bytes.NewReader(body(uint64(r.IntN(5)), size)), o); err == nil {
						add(root, n)
					}
				case 5, 6:
					op = "move"
					_, err = fs.Move(ctx, root, pick(r, root, r.IntN(2) == 0), pick(r, root, true), "", o)
				case 7:
					op = "rename"
					_, err = fs.Rename(ctx, root, pick(r, root, false), name, o)
				case 8:
					op = "copy"
					dst := roots[r.IntN(len(roots))].ID
					if n, err = fs.Copy(ctx, root, pick(r, root, false), dst, pick(r, dst, true), name, o); err == nil {
						add(dst, n)
					}
				case 9:
					op = "delete"
					err = fs.Delete(ctx, root, pick(r, root, false), vfs.WriteOptions{})
				case 10:
					op = "purge"
					mu.Lock()
					id := ids[root][r.IntN(len(ids[root]))]
					mu.Unlock()
					err = fs.Purge(ctx, root, id)
				case 11:
					op = "lock"
					id := pick(r, root, true)
					var l vfs.Lock
					if l, err = fs.Lock(ctx, root, id, vfs.LockRequest{Deep: true, Holder: "h"}); err == nil {
						err = fs.Unlock(ctx, root, id, l.Token)
					}
				case 12:
					op = "gc"
					_, err = fs.GC(ctx)
				case 13:
					op = "trim"
					_, err = fs.TrimRevisions(ctx, root, 1+r.IntN(2), 0)
				case 14:
					op = "staged"
					data := body(uint64(r.IntN(5)), 200<<10)
					var st vfs.Staged
					if st, err = fs.Stage(ctx, root, pick(r, root, true), name, vfs.StageOptions{Length: int64(len(data))}, o); err == nil {
						if _, err = fs.Append(ctx, st.ID, 0, bytes.NewReader(data), vfs.AppendOptions{}); err == nil {
							if n, err = fs.Finish(ctx, st.ID, o); err == nil {
								add(root, n)
							}
						}
						if err != nil {
							fs.Terminate(ctx, st.ID)
						}
					}
				case 15:
					op = "moveat"
					from := []string{"/a", "/b", "/a/x", "/b/y", "/a/x/n", "/b/a"}[r.IntN(6)]
					to := []string{"/a", "/b", "/a/x", "/b/y", "/a/n", "/b/x/a"}[r.IntN(6)]
					_, _, err = fs.MoveAt(ctx, root, from, to, o, nil)
				case 16:
					op = "copyempty"
					dst := roots[r.IntN(len(roots))].ID
					if n, err = fs.CopyEmpty(ctx, root, pick(r, root, true), dst, pick(r, dst, true), name, o); err == nil {
						add(dst, n)
					}
				case 17:
					if r.IntN(3) > 0 {
						continue
					}
					op = "purgedeleted"
					_, err = fs.PurgeDeleted(ctx, time.Now().Add(time.Hour))
				}
				if !expected(err) {
					t.Errorf("%s: %v", op, err)
				}
				key := op + " ok"
				if err != nil {
					key = op + " refused"
					for _, e := range []error{vfs.ErrNotExist, vfs.ErrNameConflict, vfs.ErrLocked, vfs.ErrBusy,
						vfs.ErrNotDir, vfs.ErrIsDir, vfs.ErrRootItem} {
						if errors.Is(err, e) {
							key = op + " " + e.Error()
						}
					}
				}
				c, _ := tally.LoadOrStore(key, new(atomic.Int64))
				c.(*atomic.Int64).Add(1)
			}
		})
	}
	wg.Wait()
	tally.Range(func(k, v any) bool {
		t.Logf("%s: %d", k, v.(*atomic.Int64).Load())
		return true
	})
	for _, root := range roots {
		checkStore(t, fs, root.ID, ids[root.ID])
		checkListings(t, fs, root.ID, root.FolderID)
	}
}

// checkListings walks the live tree below folder and checks each
// folder's kept listing hash and count against a scan of its children.
func checkListings(t *testing.T, fs *vfs.FS, root, folder uint64) {
	t.Helper()
	kept, scanned, _, err := fs.ListHashes(ctx, folder)
	if err != nil {
		t.Fatal(err)
	}
	if kept != scanned {
		t.Fatalf("folder %d: kept hash %s, scan %s", folder, kept, scanned)
	}
	kids, _, err := fs.List(ctx, root, folder)
	if err != nil {
		t.Fatal(err)
	}
	err = fs.ListEach(ctx, root, folder, vfs.ListOptions{Count: true}, func(l *vfs.Listing) error {
		if l.Count != int64(len(kids)) {
			return fmt.Errorf("folder %d: count %d, %d children", folder, l.Count, len(kids))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		if k.Dir {
			checkListings(t, fs, root, k.ID)
		}
	}
}

// splitOpRacesFolderChange: a copy of a folder or an upload, each split
// over several transactions, has its destination folder (or the folder
// above it, or the source) deleted (and purged) or moved (the destination into the
// source, the source into the destination) between two of them; a
// staged upload has it changed inside the transaction of its Finish.
// Whatever each answers, what it reports made reads back whole, nothing
// lands unreachable yet counted live, and the stores stay consistent.
func splitOpRacesFolderChange(t *testing.T) {
	for _, op := range []string{"copy", "write", "staged"} {
		for _, change := range []string{"delete dst", "purge dst", "move dst into src", "move src into dst", "delete src", "delete dst parent", "move dst parent into src"} {
			if op != "copy" && (change == "move dst into src" || change == "move src into dst" || change == "delete src") {
				continue
			}
			t.Run(op+"/"+change, func(t *testing.T) {
				var hook func()
				opts := vfs.WithRefBatch(vfs.WithBatchHook(vfs.Options{}, func(o vfs.Op) {
					if h := hook; h != nil && (o == vfs.OpCopy || o == vfs.OpWrite) {
						hook = nil
						h()
					}
				}), 2)
				fs, root, db, _ := openHooked(t, opts)
				src := mustMkdir(t, fs, root.ID, root.FolderID, "src")
				sub := mustMkdir(t, fs, root.ID, src.ID, "sub")
				keep := []uint64{src.ID, sub.ID}
				for i := range 3 {
					keep = append(keep, mustWrite(t, fs, root.ID, sub.ID, fmt.Sprint("f", i), body(uint64(20+i), 300<<10)).ID)
				}
				up := mustMkdir(t, fs, root.ID, root.FolderID, "up")
				dst := mustMkdir(t, fs, root.ID, up.ID, "dst")
				ran := false
				hook = func() {
					ran = true
					var err error
					switch change {
					case "delete dst":
						err = fs.Delete(ctx, root.ID, dst.ID, vfs.WriteOptions{})
					case "purge dst":
						if err = fs.Delete(ctx, root.ID, up.ID, vfs.WriteOptions{}); err == nil {
							err = fs.Purge(ctx, root.ID, up.ID)
						}
						if err == nil {
							_, err = fs.GC(ctx)
						}
					case "delete dst parent":
						err = fs.Delete(ctx, root.ID, up.ID, vfs.WriteOptions{})
					case "delete src":
						err = fs.Delete(ctx, root.ID, src.ID, vfs.WriteOptions{})
					case "move dst into src":
						_, err = fs.Move(ctx, root.ID, dst.ID, sub.ID, "", vfs.WriteOptions{})
					case "move dst parent into src":
						_, err = fs.Move(ctx, root.ID, up.ID, sub.ID, "", vfs.WriteOptions{})
					case "move src into dst":
						_, err = fs.Move(ctx, root.ID, src.ID, dst.ID, "", vfs.WriteOptions{})
					}
					if err != nil {
						t.Errorf("%s: %v", change, err)
					}
				}
				var n vfs.Node
				var err error
				switch op {
				case "copy":
					n, err = fs.Copy(ctx, root.ID, src.ID, root.ID, dst.ID, "copy", vfs.WriteOptions{})
				case "staged":
					data := body(30, 3<<20)
					var st vfs.Staged
					if st, err = fs.Stage(ctx, root.ID, dst.ID, "new", vfs.StageOptions{Length: int64(len(data))}, vfs.WriteOptions{}); err != nil {
						t.Fatal(err)
					}
					if _, err := fs.Append(ctx, st.ID, 0, bytes.NewReader(data), vfs.AppendOptions{}); err != nil {
						t.Fatal(err)
					}
					// The change commits inside the transaction that
					// makes the file.
					if h := hook; h != nil {
						hook = nil
						inside(db, h)
					}
					n, err = fs.Finish(ctx, st.ID, vfs.WriteOptions{})
					if err != nil {
						fs.Terminate(ctx, st.ID)
					}
				default:
					n, err = fs.WriteFile(ctx, root.ID, dst.ID, "new", bytes.NewReader(body(30, 3<<20)), vfs.WriteOptions{})
				}
				if !ran {
					t.Fatal("the hook did not run")
				}
				t.Logf("%s: %v", op, err)
				if err == nil {
					keep = append(keep, n.ID)
					got, err := fs.Stat(ctx, root.ID, n.ID)
					if err != nil {
						t.Fatal(err)
					}
					t.Logf("made %+v", got)
					if op != "copy" && !got.Deleted && !bytes.Equal(contents(t, fs, root.ID, n.ID), body(30, 3<<20)) {
						t.Fatal("the upload differs")
					}
				} else if !expected(err) {
					t.Fatal(err)
				}
				checkStore(t, fs, root.ID, keep)
				checkListings(t, fs, root.ID, root.FolderID)
			})
		}
	}
}

// lockRacesMoveOfParent: alice holds a deep lock on q and moves p into
// it while bob locks f, a file in p, inside the move's transaction, or
// the other way about. Both cannot stand: f would hold bob's exclusive
// lock under alice's exclusive deep lock. One is refused (ErrLocked) and
// the other holds.
func lockRacesMoveOfParent(t *testing.T) {
	for _, lockInside := range []bool{true, false} {
		t.Run(fmt.Sprintf("lockInside=%v", lockInside), func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.Options{})
			q := mustMkdir(t, fs, root.ID, root.FolderID, "q")
			p := mustMkdir(t, fs, root.ID, root.FolderID, "p")
			f := mustWrite(t, fs, root.ID, p.ID, "f", body(1, 4096))
			if _, err := fs.Lock(ctx, root.ID, q.ID, vfs.LockRequest{Holder: "alice", Deep: true}); err != nil {
				t.Fatal(err)
			}
			var moveErr, lockErr error
			move := func() { _, moveErr = fs.Move(ctx, root.ID, p.ID, q.ID, "", vfs.WriteOptions{Principal: "alice"}) }
			lock := func() { _, lockErr = fs.Lock(ctx, root.ID, f.ID, vfs.LockRequest{Holder: "bob"}) }
			var ran *bool
			if lockInside {
				ran = inside(db, lock)
				move()
			} else {
				ran = inside(db, move)
				lock()
			}
			if !*ran {
				t.Fatal("the hook did not run")
			}
			t.Logf("move: %v, lock: %v", moveErr, lockErr)
			if (moveErr == nil) == (lockErr == nil) {
				t.Fatalf("move %v, lock %v: exactly one must stand", moveErr, lockErr)
			}
			for _, err := range []error{moveErr, lockErr} {
				if err != nil && !errors.Is(err, vfs.ErrLocked) {
					t.Fatal(err)
				}
			}
			checkStore(t, fs, root.ID, []uint64{f.ID})
		})
	}
}

// quotaStorm: writers of three roots counted into one tally write, copy
// across the roots, upload staged and delete at once, each write held to
// its root's space quota and the tally's. No quota ends exceeded, and
// every root's usage and the tally match a recount.
func quotaStorm(t *testing.T) {
	fs, _, _, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
	const tally = 77
	const rootQuota, tallyQuota = 3 << 20, 5 << 20
	var roots []vfs.Root
	for _, n := range []string{"q1", "q2", "q3"} {
		r, err := fs.CreateRootWith(ctx, n, vfs.RootSync, vfs.RootOptions{Tallies: []uint64{tally}})
		if err != nil {
			t.Fatal(err)
		}
		roots = append(roots, r)
	}
	o := vfs.WriteOptions{SpaceQuota: rootQuota, Quotas: []vfs.Quota{{Tally: tally, Bytes: tallyQuota}}}
	var mu sync.Mutex
	var made []vfs.Node
	seed := uint64(5)
	if v := os.Getenv("BERTH_STRESS_SEED"); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	deadline := time.Now().Add(5 * time.Second)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), seed))
			for range 30 {
				if time.Now().After(deadline) {
					return
				}
				root := roots[r.IntN(len(roots))]
				name := fmt.Sprint("f", r.IntN(6))
				var n vfs.Node
				var err error
				switch r.IntN(4) {
				case 0, 1:
					n, err = fs.WriteFile(ctx, root.ID, root.FolderID, name, bytes.NewReader(body(uint64(r.IntN(1000)), 400<<10)), o)
				case 2:
					mu.Lock()
					var src vfs.Node
					if len(made) > 0 {
						src = made[r.IntN(len(made))]
					}
					mu.Unlock()
					if src.ID != 0 {
						n, err = fs.Copy(ctx, src.RootID, src.ID, root.ID, root.FolderID, name+"c", o)
					}
				case 3:
					data := body(uint64(r.IntN(1000)), 300<<10)
					var st vfs.Staged
					if st, err = fs.Stage(ctx, root.ID, root.FolderID, name+"s", vfs.StageOptions{Length: int64(len(data))}, o); err == nil {
						if _, err = fs.Append(ctx, st.ID, 0, bytes.NewReader(data), vfs.AppendOptions{}); err == nil {
							n, err = fs.Finish(ctx, st.ID, o)
						}
						if err != nil {
							fs.Terminate(ctx, st.ID)
						}
					}
				}
				if err != nil && !expected(err) && !errors.Is(err, vfs.ErrQuotaExceeded) {
					t.Errorf("%v", err)
				}
				if err == nil && n.ID != 0 {
					mu.Lock()
					made = append(made, n)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, root := range roots {
		u, err := fs.Usage(ctx, root.ID)
		if err != nil {
			t.Fatal(err)
		}
		if u.PhysicalSize > rootQuota {
			t.Errorf("root %s holds %d bytes, over its quota of %d", root.Name, u.PhysicalSize, rootQuota)
		}
		sum += u.PhysicalSize
		checkStore(t, fs, root.ID, nil)
		checkListings(t, fs, root.ID, root.FolderID)
	}
	tu, err := fs.TallyUsage(ctx, tally)
	if err != nil {
		t.Fatal(err)
	}
	want, err := fs.TallyRecount(ctx, tally)
	if err != nil {
		t.Fatal(err)
	}
	if tu != want || tu.PhysicalSize != sum {
		t.Fatalf("tally\n got %+v\nrecount %+v (roots hold %d)", tu, want, sum)
	}
	if tu.PhysicalSize > tallyQuota {
		t.Fatalf("the tally holds %d bytes, over its quota of %d", tu.PhysicalSize, tallyQuota)
	}
	t.Logf("made %d items; tally %+v", len(made), tu)
}

// stagedEndsRace: two clients of one staged upload (tus) end it at once:
// one finishes it or appends to it while the other terminates, finishes
// or appends at the same offset, inside its transaction. At most one
// end stands (two finishes give one file, as one does); a finished file
// reads back one whole body, never a mix;
// the chunks, counts and reservations agree afterwards.
func stagedEndsRace(t *testing.T) {
	const size = 3 << 20
	for _, tc := range []struct{ outer, inner string }{
		{"finish", "terminate"},
		{"terminate", "finish"},
		{"finish", "finish"},
		{"append", "terminate"},
		{"append", "append"},
	} {
		t.Run(tc.outer+"/"+tc.inner, func(t *testing.T) {
			fs, root, db, _ := openHooked(t, vfs.WithRefBatch(vfs.Options{}, 2))
			o := vfs.WriteOptions{SpaceQuota: 100 << 20}
			st, err := fs.Stage(ctx, root.ID, root.FolderID, "f", vfs.StageOptions{Length: size, Owner: "alice"}, o)
			if err != nil {
				t.Fatal(err)
			}
			appended := strings.HasPrefix(tc.outer, "append")
			if !appended {
				if _, err := fs.Append(ctx, st.ID, 0, bytes.NewReader(body(1, size)), vfs.AppendOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			var finished []vfs.Node
			do := func(op string, seed uint64) error {
				switch op {
				case "finish":
					n, err := fs.Finish(ctx, st.ID, o)
					if err == nil {
						finished = append(finished, n)
					}
					return err
				case "terminate":
					return fs.Terminate(ctx, st.ID)
				default:
					_, err := fs.Append(ctx, st.ID, 0, bytes.NewReader(body(seed, size)), vfs.AppendOptions{})
					return err
				}
			}
			var innerErr error
			ran := inside(db, func() { innerErr = do(tc.inner, 2) })
			outerErr := do(tc.outer, 3)
			if !*ran {
				t.Fatal("the hook did not run")
			}
			t.Logf("%s: %v; %s inside: %v", tc.outer, outerErr, tc.inner, innerErr)
			for _, err := range []error{outerErr, innerErr} {
				if err != nil && !errors.Is(err, vfs.ErrNotExist) && !errors.Is(err, vfs.ErrUploadOffset) {
					t.Fatal(err)
				}
			}
			if tc.outer != tc.inner && outerErr == nil && innerErr == nil {
				t.Fatalf("both %s and %s stood", tc.outer, tc.inner)
			}
			// A second Finish answers the first's file (tus: the request
			// that sent the last piece after a HEAD finished it).
			if len(finished) == 2 {
				a, b := finished[0], finished[1]
				if a.ID != b.ID || a.RevisionID != b.RevisionID {
					t.Fatalf("finished twice: %+v", finished)
				}
				if revs, err := fs.Revisions(ctx, root.ID, a.ID); err != nil || len(revs) != 1 {
					t.Fatalf("%d revisions (%v)", len(revs), err)
				}
				finished = finished[:1]
			}
			if appended && outerErr == nil && innerErr == nil {
				t.Fatalf("both appends at offset 0 stood")
			}
			if appended {
				// What stands, if anything, finishes into one whole body.
				if n, err := fs.Finish(ctx, st.ID, o); err == nil {
					finished = append(finished, n)
				} else if !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("finish after: %v", err)
				}
			}
			var ids []uint64
			for _, n := range finished {
				ids = append(ids, n.ID)
				if err := checkBody(contents(t, fs, root.ID, n.ID)); err != nil {
					t.Fatal(err)
				}
			}
			fs.Terminate(ctx, st.ID)
			checkStore(t, fs, root.ID, ids)
		})
	}
}
