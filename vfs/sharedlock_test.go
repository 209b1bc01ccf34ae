package vfs_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"berth/vfs"
)

// TestSharedLocksAnyOneHeld: RFC 4918 6.2, "any principal that has both
// access privileges and a valid lock can use the locked resource": of the
// shared locks covering an item, holding any one lets a write through.
// Each item a change touches (the item, and its folder for a change of
// membership) needs one of its own covering locks.
func TestSharedLocksAnyOneHeld(t *testing.T) {
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
func TestExclusiveLockStillRefusesUnderSharedOnes(t *testing.T) {
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
