package vfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"berth/vfs"
)

// TestTree holds the cases of changing the tree's shape that need more
// than a script line (TestScripts has those): replacing on Copy and Move,
// the depth limit whichever way an item gets deep, and copies built out of
// sight. A bug found later becomes a row here.
func TestTree(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		// was overwrite_test.go
		{"Overwrite", overwrite},
		// was depth_test.go
		{"MaxDepth", maxDepth},
		// was staged_test.go
		{"StagedCopyHiddenByID", stagedCopyHiddenByID},
		// was batchbound_test.go
		{"CopyAtDefaultBatch", copyAtDefaultBatch},
		{"CopyBoundedByBytes", copyBoundedByBytes},
		{"CopyOfAFolderHoldingAnExcludedName", copyExcludedInside},
		{"StagedCopyRacesMoveDeeper", stagedCopyRacesMoveDeeper},
		{"MoveDeeperRacesMkdirBelow", moveDeeperRacesMkdirBelow},
		{"MkdirAll", mkdirAll},
		{"DeepReads", deepReadsGrowLinearly},
	} {
		t.Run(tc.name, tc.run)
	}
}

// copyExcludedInside: a copy of a folder is refused, whole, when a file
// anywhere below it has a name the policy excludes, as a copy of that file
// alone is. Only the copy's top name was checked, so a folder holding
// setup.exe (written before the policy excluded .exe, or in another
// organization's root) brought a new setup.exe past the policy with one
// WebDAV COPY.
func copyExcludedInside(t *testing.T) {
	for _, large := range []bool{false, true} {
		name := "one transaction"
		if large {
			name = "staged"
		}
		t.Run(name, func(t *testing.T) {
			opts := vfs.Options{}
			if large {
				opts = vfs.WithRefBatch(opts, 1)
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
			d, err := e.fs.Mkdir(ctx, root.ID, top, "d", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			sub, err := e.fs.Mkdir(ctx, root.ID, d.ID, "sub", vfs.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			e.write(t, d.ID, "a.txt", randBytes(1, 100_000))
			e.write(t, sub.ID, "setup.EXE.", randBytes(2, 100_000))
			x := vfs.WriteOptions{ExcludedExtensions: []string{".exe"}}
			for _, c := range []struct{ what, name string }{{"the folder", "d2"}, {"a folder named like the excluded file", "setup.exe"}} {
				if _, err := e.fs.Copy(ctx, root.ID, d.ID, root.ID, top, c.name, x); !errors.Is(err, vfs.ErrExtensionExcluded) {
					t.Fatalf("Copy of %s: %v, want ErrExtensionExcluded", c.what, err)
				}
				if _, err := e.fs.Lookup(ctx, root.ID, "/"+c.name); !errors.Is(err, vfs.ErrNotExist) {
					t.Fatalf("after the refused Copy of %s: %v", c.what, err)
				}
			}
			if _, err := e.fs.Copy(ctx, root.ID, sub.ID, root.ID, top, "sub2", vfs.WriteOptions{ExcludedExtensions: []string{".txt"}}); err != nil {
				t.Fatalf("Copy of a folder with nothing excluded: %v", err)
			}
			if _, err := e.fs.Lookup(ctx, root.ID, "/sub2/setup.EXE."); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestOverwrite: Copy, CopyEmpty and Move with Overwrite replace the item of
// that name in the same transaction, so one that is refused (a lock on
// what moves, the quota, the policy, the destination holding the source)
// leaves the item in place, and the usage agrees with a recount.
func overwrite(t *testing.T) {
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

// Folders nest at most MaxDepth deep, whichever way an item gets there:
// every operation on an item walks the folders above it, so a chain of
// 100,000 folders made each request on its bottom cost 100,000 reads.
func maxDepth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	a := chain(t, e, top, "a", 1)
	b := chain(t, e, top, "b", vfs.MaxDepth)
	if _, err := e.fs.WriteFile(ctx, e.root.ID, b.ID, "deepest.txt", strings.NewReader("x"), vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a file at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	if _, err := e.fs.Mkdir(ctx, e.root.ID, b.ID, "deeper", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a folder at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, b.ID, "locked.txt", vfs.LockRequest{Holder: "x"}, vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("a locked new file at depth %d: %v, want ErrTooDeep", vfs.MaxDepth+1, err)
	}
	// b0 is the top of a chain MaxDepth deep; in a, it would be one
	// level deeper.
	b0, err := e.fs.Lookup(ctx, e.root.ID, "/b0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, b0.ID, a.ID, "", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("move of a deep chain below another: %v, want ErrTooDeep", err)
	}
	if _, err := e.fs.Copy(ctx, e.root.ID, b0.ID, e.root.ID, a.ID, "b0", vfs.WriteOptions{}); !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("copy of a deep chain below another: %v, want ErrTooDeep", err)
	}
	// Nothing moved or was copied, and the limit itself is allowed.
	if _, err := e.fs.Lookup(ctx, e.root.ID, "/b0"); err != nil {
		t.Fatalf("b0 after the refused move: %v", err)
	}
	if kids, _, err := e.fs.List(ctx, e.root.ID, a.ID); err != nil || len(kids) != 0 {
		t.Fatalf("a holds %d items (%v), want none", len(kids), err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, a.ID, "ok.txt", strings.NewReader("x"), vfs.WriteOptions{}); err != nil {
		t.Fatalf("a file at depth 2: %v", err)
	}
	// Moving an item up, or a file to the deepest folder but one, is fine.
	if _, err := e.fs.Move(ctx, e.root.ID, b.ID, top, "", vfs.WriteOptions{}); err != nil {
		t.Fatalf("move of the deepest folder to the top: %v", err)
	}
}

// moveDeeperRacesMkdirBelow: a folder moved to where what it holds just
// fits MaxDepth, while a folder is made in it one level deeper than its
// height was: the move's count of the levels below the folder reads each
// folder's write marker (G/), so the two conflict and the move, tried
// again, counts the new level and is refused. Before, the move's scan
// missed the folder made after it began, both committed, and the new
// folder landed one level past MaxDepth.
func moveDeeperRacesMkdirBelow(t *testing.T) {
	ctx := context.Background()
	fs, root, db, _ := openHooked(t, vfs.Options{})
	a, err := fs.Mkdir(ctx, root.ID, root.FolderID, "a", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := fs.Mkdir(ctx, root.ID, a.ID, "c", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// a in the chain's bottom is MaxDepth-1 deep, c MaxDepth: a fits.
	bottom, err := fs.MkdirChain(ctx, root.ID, root.FolderID, "b", vfs.MaxDepth-2)
	if err != nil {
		t.Fatal(err)
	}
	var made error
	ran := false
	mkdir := func() {
		ran = true
		_, made = fs.Mkdir(ctx, root.ID, c.ID, "d", vfs.WriteOptions{})
	}
	db.beforeCommit.Store(&mkdir)
	_, err = fs.Move(ctx, root.ID, a.ID, bottom, "", vfs.WriteOptions{})
	if !ran {
		t.Fatal("the hook did not run")
	}
	if made != nil {
		t.Fatalf("the folder made alongside: %v", made)
	}
	if !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("the move, after a level was made below the folder: %v, want ErrTooDeep", err)
	}
}

// stagedCopyRacesMoveDeeper: a copy built out of sight was checked
// against MaxDepth where it began; its folder, empty to everyone else
// meanwhile, then moved to the deepest level a folder may have. The
// last transaction, which puts the copy in place, must check again:
// without that the copy landed below MaxDepth, out of reach of every
// write and beyond what the limit promises a client syncing to a disk.
func stagedCopyRacesMoveDeeper(t *testing.T) {
	e := newSplitEnv(t)
	d := buildTree(t, e)
	a, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "a", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The chain's bottom is MaxDepth-1 deep: a fits in it, empty.
	bottom, err := e.fs.MkdirChain(ctx, e.root.ID, e.root.FolderID, "b", vfs.MaxDepth-1)
	if err != nil {
		t.Fatal(err)
	}
	moved := false
	e.onBatch(t, vfs.OpCopy, func() {
		if moved {
			return
		}
		moved = true
		if _, err := e.fs.Move(ctx, e.root.ID, a.ID, bottom, "", vfs.WriteOptions{}); err != nil {
			t.Errorf("move of a to the bottom: %v", err)
		}
	})
	_, err = e.fs.Copy(ctx, e.root.ID, d.ID, e.root.ID, a.ID, "d2", vfs.WriteOptions{})
	if !moved {
		t.Fatal("the hook did not run")
	}
	if !errors.Is(err, vfs.ErrTooDeep) {
		t.Fatalf("copy into a folder moved to MaxDepth meanwhile: %v, want ErrTooDeep", err)
	}
	if kids, _, err := e.fs.List(ctx, e.root.ID, a.ID); err != nil || len(kids) != 0 {
		t.Fatalf("a holds %d items (%v), want none", len(kids), err)
	}
	checkClean(t, e.env, "after the refused copy")
}

// TestStagedCopyHiddenByID: the items of a copy still being staged are
// not the user's yet, whatever their ids; a node id is a counter anyone
// can guess, so Stat, Revisions, OpenRevision and Unlock must not find
// them any more than a path does.
func stagedCopyHiddenByID(t *testing.T) {
	e := newSplitEnv(t)
	d := buildTree(t, e)
	mark, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "mark", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	e.onBatch(t, vfs.OpCopy, func() {
		// The copy's items take the next node ids.
		for id := mark.ID + 1; id <= mark.ID+16; id++ {
			if n, err := e.fs.Stat(ctx, e.root.ID, id); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("stat of staged item %d: %+v, %v", id, n, err)
			}
			if revs, err := e.fs.Revisions(ctx, e.root.ID, id); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("revisions of staged item %d: %d, %v", id, len(revs), err)
			}
			for rev := uint64(1); rev <= 32; rev++ {
				if f, err := e.fs.OpenRevision(ctx, e.root.ID, id, rev); err == nil {
					f.Close()
					t.Errorf("revision %d of staged item %d opens", rev, id)
				}
			}
			if err := e.fs.Unlock(ctx, e.root.ID, id, ""); !errors.Is(err, vfs.ErrNotExist) {
				t.Errorf("unlock of staged item %d: %v", id, err)
			}
			checked++
		}
	})
	c, err := e.fs.Copy(ctx, e.root.ID, d.ID, e.root.ID, e.root.FolderID, "d2", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 || c.ID <= mark.ID || c.ID > mark.ID+16 {
		t.Fatalf("checked %d ids, the copy is %d after %d", checked, c.ID, mark.ID)
	}
	if _, err := e.fs.Stat(ctx, e.root.ID, c.ID+1); err != nil {
		t.Fatalf("an item of the finished copy: %v", err)
	}
	checkClean(t, e.env, "copy")
}

// copyAtDefaultBatch copies, with the production batch size and kv
// settings, a folder just under the weight one transaction takes, made of
// the heaviest items: names of 255 bytes, bodies and dead properties just
// small enough to stay in kv's tree. It guards the margin between
// defaultRefBatch and Badger's transaction bound, which follows kv's
// memtable size.
func copyAtDefaultBatch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	src, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "src", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const files = 255 // with one property each and the folder: weight 511
	body := strings.Repeat("b", 1000)
	prop := []byte(strings.Repeat("v", 900))
	for i := range files {
		name := fmt.Sprintf("%04d-%s", i, strings.Repeat("n", 250))
		n, err := e.fs.WriteFile(ctx, e.root.ID, src.ID, name, strings.NewReader(body), vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.fs.PatchProps(ctx, e.root.ID, n.ID, map[string][]byte{"urn:x " + strings.Repeat("p", 100): prop}, nil, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := e.fs.Copy(ctx, e.root.ID, src.ID, e.root.ID, e.root.FolderID, "copy", vfs.WriteOptions{})
	if err != nil {
		t.Fatalf("Copy: %v", err)
	}
	kids, _, err := e.fs.List(ctx, e.root.ID, cp.ID)
	if err != nil || len(kids) != files {
		t.Fatalf("the copy lists %d items, %v", len(kids), err)
	}
}

// copyBoundedByBytes copies, with the production batch size and kv
// settings, folders of few items that weigh megabytes: small files of
// InlineMax, whose contents live in their revision records and so in
// kv's tree, each with a property of as many bytes. Counted in keys alone
// (one folder of 150 items) it fitted one transaction, which Badger
// refused as too big (2.4 MB); split by bytes, it is copied in several
// (a staged copy) and reads back whole. A tree of few light items still
// takes one.
func copyBoundedByBytes(t *testing.T) {
	var batches atomic.Int32
	e := openEnvWith(t, t.TempDir(), vfs.WithBatchHook(vfs.Options{}, func(op vfs.Op) {
		if op == vfs.OpCopy {
			batches.Add(1)
		}
	}))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	src, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "src", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const files = 150
	prop := bytes.Repeat([]byte("v"), vfs.InlineMax)
	for i := range files {
		body := randBytes(uint64(i), vfs.InlineMax)
		n := e.write(t, src.ID, fmt.Sprintf("f%03d", i), body)
		if err := e.fs.PatchProps(ctx, e.root.ID, n.ID, map[string][]byte{"urn:x big": prop}, nil, vfs.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := e.fs.Copy(ctx, e.root.ID, src.ID, e.root.ID, e.root.FolderID, "copy", vfs.WriteOptions{})
	if err != nil {
		t.Fatalf("Copy of %d files of %d bytes: %v", files, vfs.InlineMax, err)
	}
	if n := batches.Load(); n < 2 {
		t.Errorf("the copy took %d transactions, want it split", n+1)
	}
	kids, _, err := e.fs.List(ctx, e.root.ID, cp.ID)
	if err != nil || len(kids) != files {
		t.Fatalf("the copy lists %d items, %v", len(kids), err)
	}
	for _, k := range kids {
		var i uint64
		fmt.Sscanf(k.Name, "f%03d", &i)
		if got := e.read(t, k.ID); !bytes.Equal(got, randBytes(i, vfs.InlineMax)) {
			t.Fatalf("%s of the copy differs", k.Name)
		}
	}
	checkClean(t, e, "copy")
	// A few such files still go in one transaction.
	batches.Store(0)
	small, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "small", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.write(t, small.ID, fmt.Sprint(i), randBytes(uint64(i), vfs.InlineMax))
	}
	if _, err := e.fs.Copy(ctx, e.root.ID, small.ID, e.root.ID, e.root.FolderID, "small2", vfs.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := batches.Load(); n != 0 {
		t.Errorf("a copy of three small files took %d transactions", n+1)
	}
}

// chain makes n folders, each in the one before, below the folder parent
// and returns the last.
func chain(t *testing.T, e *env, parent uint64, prefix string, n int) vfs.Node {
	t.Helper()
	var d vfs.Node
	for i := range n {
		var err error
		if d, err = e.fs.Mkdir(context.Background(), e.root.ID, parent, fmt.Sprintf("%s%d", prefix, i), vfs.WriteOptions{}); err != nil {
			t.Fatalf("folder %d: %v", i, err)
		}
		parent = d.ID
	}
	return d
}

// TestReadsInOneWrite: a write transaction keeps the records it decoded
// for its later checks, and each of them still sees what the transaction
// itself changed in between (a lock added, a lock's expiry changed by a
// caller, the root deleted, the item moved).
func TestReadsInOneWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []vfs.Node{e.write(t, e.root.FolderID, "f.txt", []byte("x")), e.write(t, d.ID, "f.txt", []byte("x"))} {
		if err := e.fs.ReadsInOneWrite(ctx, e.root.ID, n.ID); err != nil {
			t.Fatalf("%s: %v", n.Name, err)
		}
	}
	if got := mustLookup(t, e, "/d/f.txt"); len(got.Locks) != 0 {
		t.Fatalf("the rolled back transaction left locks %v", got.Locks)
	}
}

// TestWalksHoldAPage: the walks over a folder's children that a delete
// (its usage count), a move (its depth and lock checks), a lock of depth
// infinity and a copy's size check make read the children a page at a
// time, so that a folder of a million files is never held whole: they
// read each folder's children at once, and a delete of such a folder
// held a million records. (A large copy still plans every item.)
func TestWalksHoldAPage(t *testing.T) {
	ctx := context.Background()
	const page, files = 8, 60
	defer vfs.SetRecordPage(page)()
	e := newEnv(t)
	mk := func(parent uint64, name string) vfs.Node {
		d, err := e.fs.Mkdir(ctx, e.root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, c := range []struct {
		name string
		op   func(dir vfs.Node) error
	}{
		{"delete", func(dir vfs.Node) error { return e.fs.Delete(ctx, e.root.ID, dir.ID, vfs.WriteOptions{}) }},
		{"move into another folder", func(dir vfs.Node) error {
			to := mk(e.root.FolderID, "to-"+dir.Name)
			_, err := e.fs.Move(ctx, e.root.ID, dir.ID, to.ID, dir.Name, vfs.WriteOptions{})
			return err
		}},
		{"deep lock", func(dir vfs.Node) error {
			_, err := e.fs.Lock(ctx, e.root.ID, dir.ID, vfs.LockRequest{Owner: "t", Deep: true, TokenRequired: true})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := mk(e.root.FolderID, c.name)
			sub := mk(dir.ID, "sub")
			for i := range files {
				e.write(t, dir.ID, fmt.Sprintf("f%03d", i), nil)
				e.write(t, sub.ID, fmt.Sprintf("g%03d", i), nil)
			}
			vfs.RecordsPeak()
			if err := c.op(dir); err != nil && !errors.Is(err, vfs.ErrNotExist) {
				t.Fatal(err)
			}
			// A page of the folder's and one of its subfolder's.
			if peak := vfs.RecordsPeak(); peak > 2*page {
				t.Errorf("%d records held at once, want at most %d", peak, 2*page)
			}
		})
	}
}
