package vfs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"berth/berthtest"
	"berth/kv"
	"berth/vfs"
)

// TestLocks holds vfs's lock cases, one row each: how a lock covers its item
// and what lies below, who may write through it, and what a change of
// place does to it. A lock bug found later becomes a row here. The races
// of locks with other changes are rows of TestRaces.
func TestLocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"DeepLockCoversSubtree", deepLockCoversSubtree},
		{"LockExpires", lockExpires},
		// was createlocked_test.go
		{"CreateLocked", createLocked},
		// was destlock_test.go
		{"ReplacingKeepsDestinationLocks", replacingKeepsDestinationLocks},
		// was movelocked_test.go
		{"MoveFolderWithLockedItem", moveFolderWithLockedItem},
		// was movelocked_test.go
		{"MoveEndsPathLocks", moveEndsPathLocks},
		// was sharedlock_test.go
		{"SharedLocksAnyOneHeld", sharedLocksAnyOneHeld},
		// was sharedlock_test.go
		{"ExclusiveLockStillRefusesUnderSharedOnes", exclusiveLockStillRefusesUnderSharedOnes},
		// was tokenholder_test.go
		{"LockTokenCountsOnlyForItsHolder", lockTokenCountsOnlyForItsHolder},
		{"ForceUnlockEndsEveryCoveringLock", forceUnlockEndsEveryCoveringLock},
		{"FindLockAtAPath", findLockAtAPath},
	} {
		t.Run(tc.name, tc.run)
	}
}

// findLockAtAPath: FindLockAt finds a lock from the item at a path, or
// from the deepest item on the way to a path that names nothing (below a
// missing name, or below a file), as FindLock from that item does.
func findLockAtAPath(t *testing.T) {
	e := newEnv(t)
	d, err := e.fs.Mkdir(ctx, e.root.ID, e.root.FolderID, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, d.ID, "f", []byte("1"))
	dl, err := e.fs.Lock(ctx, e.root.ID, d.ID, vfs.LockRequest{Deep: true, Shared: true, TokenRequired: true, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Shared: true, TokenRequired: true, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, token string
		at          uint64 // the item holding the lock; 0 when none is found
		err         error
	}{
		{"/d", dl.Token, d.ID, nil},
		{"/d/f", dl.Token, d.ID, nil},
		{"/d/f", fl.Token, f.ID, nil},
		{"/d/missing/deeper", dl.Token, d.ID, nil},
		{"/d/f/below-a-file", fl.Token, f.ID, nil},
		{"/d/missing", fl.Token, 0, vfs.ErrNoSuchLock},
		{"/other", dl.Token, 0, vfs.ErrNoSuchLock},
		{"/", dl.Token, 0, vfs.ErrNoSuchLock},
		{"/d/../d", dl.Token, 0, vfs.ErrInvalidName},
	} {
		n, _, err := e.fs.FindLockAt(ctx, e.root.ID, c.path, c.token)
		if !errors.Is(err, c.err) || (c.err == nil && n.ID != c.at) {
			t.Errorf("FindLockAt(%s): item %d, %v; want item %d, %v", c.path, n.ID, err, c.at, c.err)
		}
	}
}

func deepLockCoversSubtree(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	d, _ := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	f := e.write(t, d.ID, "f", []byte("1"))
	lk, err := e.fs.Lock(ctx, e.root.ID, top, vfs.LockRequest{Deep: true, TokenRequired: true, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := e.fs.Root(ctx, e.root.ID); !r.Locked() {
		t.Fatal("root not locked")
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, "f", strings.NewReader("2"), vfs.WriteOptions{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("deep lock let a write through: %v", err)
	}
	if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{}); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("lock under a deep lock: %v", err)
	}
	if _, err := e.fs.RefreshLock(ctx, e.root.ID, top, lk.Token, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, top, ""); err != nil {
		t.Fatal(err)
	}
	e.write(t, d.ID, "f", []byte("2"))
}

func lockExpires(t *testing.T) {
	// The store's clock, not the wall's: on a loaded machine a 50 ms
	// lock could expire before the Stat that checks it is held.
	clock := berthtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newEnvWith(t, vfs.Options{Now: clock.Now})
	f := e.write(t, e.root.FolderID, "f", []byte("1"))
	if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Duration: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	clock.Add(49 * time.Millisecond)
	if n, _ := e.fs.Stat(ctx, e.root.ID, f.ID); !n.Locked() {
		t.Fatal("not locked")
	}
	clock.Add(2 * time.Millisecond)
	if n, _ := e.fs.Stat(ctx, e.root.ID, f.ID); n.Locked() {
		t.Fatal("expired lock still shown")
	}
	e.write(t, e.root.FolderID, "f", []byte("2"))
}

// TestCreateLocked: the empty file and its lock are one transaction; a
// conflicting lock above, a taken name or the policy create nothing.
func createLocked(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mine := vfs.WriteOptions{Principal: "person:1"}
	req := vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: true}
	dl, err := e.fs.Lock(ctx, e.root.ID, d.ID, vfs.LockRequest{Holder: "person:1", Deep: true, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	withToken := mine
	withToken.LockTokens = []string{dl.Token}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, d.ID, "a.txt", req, withToken); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("below an exclusive deep lock: %v, want ErrLocked", err)
	}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, d.ID, "a.txt", req, mine); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("into a folder locked without the token: %v, want ErrLocked", err)
	}
	x := mine
	x.ExcludedExtensions = []string{".txt"}
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, top, "a.txt", req, x); !errors.Is(err, vfs.ErrExtensionExcluded) {
		t.Fatalf("an excluded extension: %v", err)
	}
	e.write(t, top, "taken.txt", []byte("keep"))
	if _, _, err := e.fs.CreateLocked(ctx, e.root.ID, top, "taken.txt", req, mine); !errors.Is(err, vfs.ErrNameConflict) {
		t.Fatalf("a taken name: %v", err)
	}
	if kids, _, err := e.fs.List(ctx, e.root.ID, d.ID); err != nil || len(kids) != 0 {
		t.Fatalf("d after refusals: %d items, %v", len(kids), err)
	}
	n, lk, err := e.fs.CreateLocked(ctx, e.root.ID, top, "a.txt", req, mine)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.fs.Lookup(ctx, e.root.ID, "/a.txt")
	if err != nil || got.ID != n.ID || got.Size != 0 || len(got.Locks) != 1 || got.Locks[0].Token != lk.Token || len(e.read(t, n.ID)) != 0 {
		t.Fatalf("created %+v, lock %+v; looked up %+v %v", n, lk, got, err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, top, "a.txt", nil, mine); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("a write without the token: %v, want ErrLocked", err)
	}
	u, err := e.fs.Usage(ctx, e.root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if recount, err := e.fs.Audit(ctx, e.root.ID); err != nil || recount != u {
		t.Fatalf("usage %+v, recount %+v, %v", u, recount, err)
	}
}

// TestReplacingKeepsDestinationLocks: RFC 4918 7.6, when a COPY or MOVE
// lands on a locked destination, "the server MUST add the moved resource
// to the destination lock scope". A token-required (WebDAV) lock names a
// path, so the item that replaces a locked one, by Move, Copy (in one
// transaction or staged) or CopyEmpty with Overwrite, takes over its
// lock. A holder's (REST) lock was on the item replaced and goes with it.
func replacingKeepsDestinationLocks(t *testing.T) {
	e := openEnvWith(t, t.TempDir(), vfs.WithRefBatch(vfs.Options{}, 4))
	t.Cleanup(e.close)
	root, err := e.fs.CreateRoot(ctx, "alice", vfs.RootSync)
	if err != nil {
		t.Fatal(err)
	}
	e.root = root
	top := root.FolderID
	mkdir := func(parent uint64, name string) vfs.Node {
		t.Helper()
		n, err := e.fs.Mkdir(ctx, root.ID, parent, name, vfs.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	src := e.write(t, top, "src.txt", []byte("s"))
	big := mkdir(top, "big") // over the batch of 4: copied staged
	for _, n := range []string{"1", "2", "3", "4", "5"} {
		e.write(t, big.ID, n, []byte(n))
	}
	empty := mkdir(top, "empty")
	me := vfs.WriteOptions{Principal: "person:1", Overwrite: true}
	for _, c := range []struct {
		name string
		dir  bool
		do   func(o vfs.WriteOptions, dstName string) (vfs.Node, error)
	}{
		{"move", false, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			moved := e.write(t, top, "moving.txt", []byte("m"))
			return e.fs.Move(ctx, root.ID, moved.ID, top, d, o)
		}},
		{"copy", false, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.Copy(ctx, root.ID, src.ID, root.ID, top, d, o)
		}},
		{"staged copy", true, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.Copy(ctx, root.ID, big.ID, root.ID, top, d, o)
		}},
		{"copy empty", true, func(o vfs.WriteOptions, d string) (vfs.Node, error) {
			return e.fs.CopyEmpty(ctx, root.ID, empty.ID, root.ID, top, d, o)
		}},
	} {
		dst := "dst-" + c.name
		var old vfs.Node
		if c.dir {
			old = mkdir(top, dst)
		} else {
			old = e.write(t, top, dst, []byte("old"))
		}
		path, err := e.fs.Lock(ctx, root.ID, old.ID, vfs.LockRequest{Holder: "person:1", Deep: c.dir, Duration: time.Minute, TokenRequired: true, Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.fs.Lock(ctx, root.ID, old.ID, vfs.LockRequest{Holder: "person:1", Shared: true, Duration: time.Minute}); err != nil {
			t.Fatal(err)
		}
		o := me
		o.LockTokens = []string{path.Token}
		n, err := c.do(o, dst)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if n.ID == old.ID {
			t.Fatalf("%s: the destination was not replaced", c.name)
		}
		if len(n.Locks) != 1 || n.Locks[0].Token != path.Token || n.Locks[0].Deep != c.dir {
			t.Errorf("%s: locks of what replaced the destination %+v, want only its path lock %s", c.name, n.Locks, path.Token)
		}
	}
}

// TestMoveFolderWithLockedItem: a move or rename of a folder moves what is
// below it, so a lock on any of it refuses the move, as it refuses a
// delete; the lock's token or its (REST) holder lets it through.
func moveFolderWithLockedItem(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := e.fs.Mkdir(ctx, e.root.ID, d.ID, "sub", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := e.write(t, sub.ID, "x.txt", []byte("x"))
	other, err := e.fs.Mkdir(ctx, e.root.ID, top, "other", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lk, err := e.fs.Lock(ctx, e.root.ID, x.ID, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	me := vfs.WriteOptions{Principal: "person:1"}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, other.ID, "", me); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Move of a folder holding a locked file: %v, want ErrLocked", err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, d.ID, "renamed", me); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("Rename of a folder holding a locked file: %v, want ErrLocked", err)
	}
	if n, err := e.fs.Lookup(ctx, e.root.ID, "/d/sub/x.txt"); err != nil || n.ID != x.ID {
		t.Fatalf("x.txt after refused moves: %+v %v", n, err)
	}
	withToken := me
	withToken.LockTokens = []string{lk.Token}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, other.ID, "", withToken); err != nil {
		t.Fatalf("Move with the lock's token: %v", err)
	}
	// The lock named x.txt's old path (WebDAV's, token required): it
	// stays behind (RFC 4918 7.6).
	if n, err := e.fs.Lookup(ctx, e.root.ID, "/other/d/sub/x.txt"); err != nil || n.ID != x.ID || n.Locked() {
		t.Fatalf("x.txt after the move: %+v %v", n, err)
	}
}

// TestMoveEndsPathLocks: a move or rename ends the token-required
// (WebDAV) locks of what it moves, which name a path, and keeps a
// holder's (REST) locks, which are on the item.
func moveEndsPathLocks(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := e.write(t, d.ID, "x.txt", []byte("x"))
	y := e.write(t, d.ID, "y.txt", []byte("y"))
	f := e.write(t, top, "f.txt", []byte("f"))
	me := vfs.WriteOptions{Principal: "person:1"}
	lock := func(id uint64, tokenRequired bool) vfs.Lock {
		t.Helper()
		lk, err := e.fs.Lock(ctx, e.root.ID, id, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: tokenRequired})
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	dl, xl := lock(d.ID, true), lock(x.ID, true)
	lock(y.ID, false)
	fl := lock(f.ID, true)
	withTokens := me
	withTokens.LockTokens = []string{dl.Token, xl.Token, fl.Token}
	if _, err := e.fs.Move(ctx, e.root.ID, d.ID, top, "d2", withTokens); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Rename(ctx, e.root.ID, f.ID, "g.txt", withTokens); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   string
		locked bool
	}{{"/d2", false}, {"/d2/x.txt", false}, {"/d2/y.txt", true}, {"/g.txt", false}} {
		n, err := e.fs.Lookup(ctx, e.root.ID, c.path)
		if err != nil || n.Locked() != c.locked {
			t.Errorf("%s after the move: locks %+v, %v; want locked %v", c.path, n.Locks, err, c.locked)
		}
	}
}

// TestSharedLocksAnyOneHeld: RFC 4918 6.2, "any principal that has both
// access privileges and a valid lock can use the locked resource": of the
// shared locks covering an item, holding any one lets a write through.
// Each item a change touches (the item, and its folder for a change of
// membership) needs one of its own covering locks.
func sharedLocksAnyOneHeld(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, d.ID, "f.txt", []byte("1"))
	lock := func(id uint64, holder string, deep bool) vfs.Lock {
		t.Helper()
		lk, err := e.fs.Lock(ctx, e.root.ID, id, vfs.LockRequest{Holder: holder, Shared: true, Deep: deep, Duration: time.Minute, TokenRequired: true})
		if err != nil {
			t.Fatal(err)
		}
		return lk
	}
	as := func(principal string, tokens ...string) vfs.WriteOptions {
		return vfs.WriteOptions{Principal: principal, LockTokens: tokens}
	}
	write := func(name string, o vfs.WriteOptions) error {
		_, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, name, strings.NewReader("2"), o)
		return err
	}

	// Two shared locks on the file.
	a, b := lock(f.ID, "person:1", false), lock(f.ID, "person:2", false)
	for _, c := range []struct {
		what string
		o    vfs.WriteOptions
		want error
	}{
		{"one holder with its token", as("person:1", a.Token), nil},
		{"the other holder with its token", as("person:2", b.Token), nil},
		{"a holder without a token", as("person:1"), vfs.ErrLocked},
		{"a third principal with another's token", as("person:3", a.Token), vfs.ErrLocked},
	} {
		if err := write("f.txt", c.o); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, err, c.want)
		}
	}
	for _, lk := range []vfs.Lock{a, b} {
		if err := e.fs.Unlock(ctx, e.root.ID, f.ID, lk.Token); err != nil {
			t.Fatal(err)
		}
	}

	// A shared deep lock on the folder and a shared lock on the file: the
	// folder's holder may change both; the file's holder the file, but
	// not the folder's membership.
	dl, fl := lock(d.ID, "person:1", true), lock(f.ID, "person:2", false)
	for _, c := range []struct {
		what string
		err  error
		want error
	}{
		{"folder holder writes the file", write("f.txt", as("person:1", dl.Token)), nil},
		{"file holder writes the file", write("f.txt", as("person:2", fl.Token)), nil},
		{"folder holder adds a file", write("new.txt", as("person:1", dl.Token)), nil},
		{"file holder adds a file", write("other.txt", as("person:2", fl.Token)), vfs.ErrLocked},
		{"file holder deletes the file", e.fs.Delete(ctx, e.root.ID, f.ID, as("person:2", fl.Token)), vfs.ErrLocked},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.what, c.err, c.want)
		}
	}
}

// TestExclusiveLockStillRefusesUnderSharedOnes: a move can bring an item
// with someone's exclusive lock under a folder's shared deep locks (the
// mover holds one of those). A shared lock's holder may then write what
// the shared locks cover, but not through the exclusive lock.
func exclusiveLockStillRefusesUnderSharedOnes(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	src, err := e.fs.Mkdir(ctx, e.root.ID, top, "src", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := e.fs.Mkdir(ctx, e.root.ID, top, "dst", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, src.ID, "f.txt", []byte("1"))
	// Bob's exclusive (REST) lock on the file; both hold a shared deep
	// lock on dst.
	if _, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Holder: "person:2", Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	var toks []string
	for _, who := range []string{"person:1", "person:2"} {
		lk, err := e.fs.Lock(ctx, e.root.ID, dst.ID, vfs.LockRequest{Holder: who, Shared: true, Deep: true, Duration: time.Minute, TokenRequired: true})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, lk.Token)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, f.ID, dst.ID, "", vfs.WriteOptions{Principal: "person:2", LockTokens: toks[1:]}); err != nil {
		t.Fatalf("bob's move into dst: %v", err)
	}
	alice := vfs.WriteOptions{Principal: "person:1", LockTokens: toks[:1]}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, dst.ID, "f.txt", strings.NewReader("alice"), alice); !errors.Is(err, vfs.ErrLocked) {
		t.Fatalf("alice's write through bob's exclusive lock: %v, want ErrLocked", err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, dst.ID, "new.txt", strings.NewReader("alice"), alice); err != nil {
		t.Fatalf("alice's new file under her shared lock: %v", err)
	}
}

// TestLockTokenCountsOnlyForItsHolder: RFC 4918 6.4 wants a submitted lock
// token honoured only for the principal that created the lock, so a token
// that leaked (a log, a shared proxy, another client of the same share)
// is no key. A lock without a Holder keeps letting any presenter through.
func lockTokenCountsOnlyForItsHolder(t *testing.T) {
	e := newEnv(t)
	top := e.root.FolderID
	f := e.write(t, top, "f.txt", []byte("1"))
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	below := e.write(t, d.ID, "below.txt", []byte("1"))
	alice := vfs.WriteOptions{Principal: "person:1"}
	bob := vfs.WriteOptions{Principal: "person:2"}
	with := func(o vfs.WriteOptions, tok string) vfs.WriteOptions {
		o.LockTokens = []string{tok}
		return o
	}
	write := func(parent uint64, name string, o vfs.WriteOptions) error {
		_, err := e.fs.WriteFile(ctx, e.root.ID, parent, name, strings.NewReader("2"), o)
		return err
	}

	for _, tokenRequired := range []bool{true, false} {
		lk, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Holder: "person:1", Duration: time.Minute, TokenRequired: tokenRequired})
		if err != nil {
			t.Fatal(err)
		}
		if err := write(top, "f.txt", with(bob, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: another principal's write with the token: %v, want ErrLocked", tokenRequired, err)
		}
		if err := e.fs.Delete(ctx, e.root.ID, f.ID, with(bob, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: another principal's delete with the token: %v, want ErrLocked", tokenRequired, err)
		}
		if err := write(top, "f.txt", with(vfs.WriteOptions{}, lk.Token)); !errors.Is(err, vfs.ErrLocked) {
			t.Errorf("tokenRequired %v: a write with the token and no principal: %v, want ErrLocked", tokenRequired, err)
		}
		if err := write(top, "f.txt", with(alice, lk.Token)); err != nil {
			t.Errorf("tokenRequired %v: the holder's write with the token: %v", tokenRequired, err)
		}
		if err := e.fs.Unlock(ctx, e.root.ID, f.ID, lk.Token); err != nil {
			t.Fatal(err)
		}
	}

	// A deep lock on a folder: the same below it, and for a new name in it.
	dl, err := e.fs.Lock(ctx, e.root.ID, d.ID, vfs.LockRequest{Holder: "person:1", Deep: true, Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(d.ID, "below.txt", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's write below a deep lock with its token: %v, want ErrLocked", err)
	}
	if err := write(d.ID, "new.txt", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's new file in a deep-locked folder with its token: %v, want ErrLocked", err)
	}
	if _, err := e.fs.Move(ctx, e.root.ID, below.ID, top, "", with(bob, dl.Token)); !errors.Is(err, vfs.ErrLocked) {
		t.Errorf("another principal's move out of a deep-locked folder with its token: %v, want ErrLocked", err)
	}
	if err := write(d.ID, "below.txt", with(alice, dl.Token)); err != nil {
		t.Errorf("the holder's write below the deep lock: %v", err)
	}
	if err := e.fs.Unlock(ctx, e.root.ID, d.ID, dl.Token); err != nil {
		t.Fatal(err)
	}

	// A lock without a holder is the token's alone.
	anon, err := e.fs.Lock(ctx, e.root.ID, f.ID, vfs.LockRequest{Duration: time.Minute, TokenRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(top, "f.txt", with(bob, anon.Token)); err != nil {
		t.Errorf("a write with the token of a lock without holder: %v", err)
	}
}

// heldJournal keeps, for each forced unlock it hears, the item and the
// holder of the lock ended.
type heldJournal struct {
	mu    sync.Mutex
	ended []string
}

func (j *heldJournal) Record(_ context.Context, _ kv.Txn, ev vfs.Event) error {
	if ev.Op == vfs.OpUnlock && ev.Forced != nil {
		j.mu.Lock()
		j.ended = append(j.ended, ev.Name+" held by "+ev.Forced.Holder)
		j.mu.Unlock()
	}
	return nil
}

// forceUnlockEndsEveryCoveringLock: ForceUnlock of a file ends its own
// locks and the deep locks of the folders above it, each recorded with
// its holder, and leaves a folder's depth-0 lock, which does not cover
// the file: ending the file's own alone left it read-only under the
// folder's deep lock.
func forceUnlockEndsEveryCoveringLock(t *testing.T) {
	j := &heldJournal{}
	e := newEnvWith(t, vfs.Options{Journal: j})
	top := e.root.FolderID
	d, err := e.fs.Mkdir(ctx, e.root.ID, top, "d", vfs.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := e.write(t, d.ID, "f", []byte("1"))
	for _, l := range []struct {
		id     uint64
		holder string
		deep   bool
	}{{top, "person:3", false}, {d.ID, "person:1", true}, {f.ID, "person:2", false}} {
		if _, err := e.fs.Lock(ctx, e.root.ID, l.id, vfs.LockRequest{Holder: l.holder, Shared: true, Deep: l.deep, TokenRequired: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.fs.ForceUnlock(ctx, e.root.ID, f.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.WriteFile(ctx, e.root.ID, d.ID, "f", strings.NewReader("2"), vfs.WriteOptions{}); err != nil {
		t.Fatalf("the file after its forced unlock: %v", err)
	}
	if n, _ := e.fs.Stat(ctx, e.root.ID, top); len(n.Locks) != 1 {
		t.Fatalf("the top folder's depth-0 lock: %+v", n.Locks)
	}
	if want := "f held by person:2,d held by person:1"; strings.Join(j.ended, ",") != want {
		t.Fatalf("recorded %q, want %q", j.ended, want)
	}
	// Nothing covers it now: a success that records nothing.
	if err := e.fs.ForceUnlock(ctx, e.root.ID, f.ID); err != nil || len(j.ended) != 2 {
		t.Fatalf("again: %v, %q", err, j.ended)
	}
}
