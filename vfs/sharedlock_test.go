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
